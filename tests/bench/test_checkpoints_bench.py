"""``geomlab bench checkpoints`` runs on a bundled checkpoint and a small synthetic one and reports the three
load times and their ratios (no timing asserted)."""

from __future__ import annotations

import json

from geomlab.bench import checkpoints as bench
from helpers.bench import undefined


def test_the_benchmark_times_both_checkpoints_three_ways(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert bench.main(["--mb", "1", "--repeats", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = data["rows"]
    assert not undefined(data)
    assert [r["name"] for r in rows][-1] == "lstm-1mib" and len(rows) == 2
    assert 0.9 < rows[-1]["weights_mib"] <= 1.0
    for r in rows:
        assert all(r[k] > 0 for k in ("unchecked_ms", "checked_ms", "cached_ms", "checked_ratio", "cached_ratio"))
    assert "checked/un" in capsys.readouterr().out


def test_the_lstm_width_fits_the_size_asked():
    h = bench._lstm_hidden(100, 65)
    size = lambda h: 4 * (4 * h * (65 + h) + 8 * h + h * 65 + 65) / 2**20  # noqa: E731
    assert size(h) <= 100 < size(h + 1)
