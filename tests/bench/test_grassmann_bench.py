"""Smoke tests of the Grassmann scaling benchmark (geomlab.bench.grassmann); no timing is asserted."""

from __future__ import annotations

import json
import math

from geomlab.bench import available
from geomlab.bench import grassmann as bench
from geomlab.commands.cli import main
from helpers.bench import undefined


def test_bench_runs_and_prints_ratios(capsys, tmp_path):
    assert "grassmann" in available()
    path = tmp_path / "g.json"
    assert main(["bench", "grassmann", "--lengths", "16,32", "--reps", "1", "--no-models", "--mode", "forward",
                 "--d-model", "16", "--rank", "4", "--offsets", "1,2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sdpa/mix" in out and "log-log slope" in out and "KV cache" in out
    data = json.loads(path.read_text())  # the same tables as JSON
    assert data["kind"] == "bench-grassmann" and data["models"] == [] and not undefined(data)
    (mixers,) = data["mixers"]
    assert mixers["mode"] == "forward" and [r["L"] for r in mixers["rows"]] == [16, 32]
    for r in mixers["rows"]:
        assert all(math.isfinite(v) and v > 0 for k, v in r.items() if k != "L"), r
    assert set(mixers["slopes"]) == {"grassmann", "attn-sdpa", "attn-explicit"}
    assert all(math.isfinite(s["time"]) and math.isfinite(s["memory"]) for s in mixers["slopes"].values())
    assert [(d["L"], d["grassmann_kib"] > 0, d["kv_cache_kib"] > 0) for d in data["decode_state"]] == [
        (16, True, True), (32, True, True)]


def test_bench_measures_memory_growth():
    res = bench.run([32, 128], d_model=16, rank=4, n_heads=4, offsets=[1, 2], batch=1, reps=1, train=True)
    for name in ("grassmann", "attn-sdpa", "attn-explicit"):
        assert set(res[name]) == {32, 128}
        assert res[name][128]["peak_bytes"] > res[name][32]["peak_bytes"] > 0
    # materialised scores grow faster than the mixer's linear memory
    growth = {k: v[128]["peak_bytes"] / v[32]["peak_bytes"] for k, v in res.items()}
    assert growth["attn-explicit"] > growth["grassmann"]


def test_decode_state_is_constant_in_length():
    g1, a1 = bench.decode_state_bytes(128, 4, 64, 16, [1, 2, 16])
    g2, a2 = bench.decode_state_bytes(4096, 4, 64, 16, [1, 2, 16])
    assert g1 == g2 == 4 * 16 * 16 * 4 and a2 == 32 * a1


def test_bench_rejects_bad_arguments():
    import pytest

    from geomlab.core.argv import OptionValueError

    with pytest.raises(OptionValueError, match="--lengths: each item must be an integer from 2 to .*; got 'a'"):
        bench.main(["--lengths", "a,b"])
    with pytest.raises(ValueError, match=r"^--d-model: must be a multiple of --heads \(4: .*\), got 10$"):
        bench.main(["--d-model", "10", "--heads", "4"])
