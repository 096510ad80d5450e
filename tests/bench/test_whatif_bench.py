"""`geomlab bench whatif` runs on every bundled OSM checkpoint and prints a steer/forward ratio per row."""

from geomlab.bench import available, whatif


def test_the_whatif_bench_prints_one_row_per_bundled_osm_checkpoint(capsys):
    assert "whatif" in available()
    assert whatif.main(["--chars", "24", "--repeats", "1"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    assert len(rows) == len(whatif._osm_refs()) >= 4
    assert all(r.startswith("bundled/osm") and float(r.split()[-1]) > 0 for r in rows)
