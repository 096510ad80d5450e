"""`geomlab bench whatif` runs on the bundled checkpoints and prints one row each with its timings (and writes
them as JSON with --json)."""

import json
import math

from geomlab.bench import available, whatif
from geomlab.checkpoints import catalog
from helpers.bench import undefined


def test_the_whatif_bench_prints_one_row_per_bundled_checkpoint(capsys, tmp_path):
    assert "whatif" in available()
    path = tmp_path / "w.json"
    assert whatif.main(["--chars", "24", "--repeats", "1", "--kinds", "osm-rnn,lstm,grassmann", "--json",
                        str(path)]) == 0
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
    data = json.loads(path.read_text())  # the same rows as JSON, with the ratios to the forward pass
    assert not undefined(data)
    assert data["kind"] == "bench-whatif" and data["chars"] == 24
    assert [r["checkpoint"] for r in data["rows"]] == [r.split()[0] for r in rows]
    for r in data["rows"]:
        for k in ("forward_ms", "patch_ms", "sweep_s", "patch_over_forward", "sweep_over_forward"):
            assert math.isfinite(r[k]) and r[k] > 0, (k, r)
        assert (r["knob_ms"] is None) == (r["knob"] is None) == (r["knob_over_forward"] is None)


def test_the_whatif_bench_counts_default_sweeps_that_barely_change_the_prediction(capsys, tmp_path):
    """--targets: per checkpoint, the default sweeps that barely change the prediction, 3 on against the
    chosen target (never more: the choice reads the same changes), and the choice's time against a sweep's."""
    path = tmp_path / "t.json"
    assert whatif.main(["--targets", "--positions", "4", "--kinds", "grassmann,lstm", "--json", str(path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    want = [e.ref for e in catalog.list_checkpoints(user=False) if e.kind in ("lstm", "grassmann")]
    data = json.loads(path.read_text())
    assert sorted(r["checkpoint"] for r in data["rows"]) == sorted(want) and not undefined(data)
    for r in data["rows"]:
        assert r["sweeps"] == 4 and 0 <= r["barely_chosen"] <= r["barely_3_on"] <= 4
        assert 0 < r["choose_ms"] and 0 < r["sweep_ms"]
    assert data["sweeps"] == 4 * len(want) and data["barely_3_on"] == sum(r["barely_3_on"] for r in data["rows"])
    assert out[-1].startswith("all") and "with 3 on" in out[-1]
