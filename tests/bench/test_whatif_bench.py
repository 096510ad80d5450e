"""`geomlab bench whatif` runs on the bundled checkpoints and prints one row each with its timings."""

from geomlab.bench import available, whatif
from geomlab.checkpoints import catalog


def test_the_whatif_bench_prints_one_row_per_bundled_checkpoint(capsys):
    assert "whatif" in available()
    assert whatif.main(["--chars", "24", "--repeats", "1", "--kinds", "osm-rnn,lstm,grassmann"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    want = [e.ref for e in catalog.list_checkpoints(user=False) if e.kind in ("osm-rnn", "lstm", "grassmann")]
    assert sorted(r.split()[0] for r in rows) == sorted(want) and len(rows) >= 3
    for r in rows:
        cells = r.split()
        assert float(cells[2]) > 0 and float(cells[-2]) > 0 and float(cells[-1]) > 0  # forward, patch, sweep
        if cells[1] == "osm-rnn":
            assert cells[3] == "steer" and float(cells[4]) > 0
        if cells[1] == "lstm":
            assert cells[3] == "-"
