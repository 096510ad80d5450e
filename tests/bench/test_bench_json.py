"""Every ``geomlab bench NAME`` takes ``--json PATH``: the figures its table shows (names, times with their unit
in the key, ratios to the baseline of the same run) with the machine facts, written by one runner
(:func:`geomlab.bench.run_benchmark`). Each benchmark runs here at its smallest size; browser and load, which
need app servers, write their figures through the same functions from made-up measurements. The benchmarks
whose other tests already run them write their JSON there (gp, groups, train, osm, whatif, grassmann)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.bench import undefined

from geomlab.bench import available, document, write_json
from geomlab.commands.cli import main

#: What every benchmark's JSON holds besides its figures.
MACHINE = {"kind", "benchmark", "date", "torch", "python", "platform", "cpu_count", "threads", "load_avg", "args",
           "definitions"}


def finite(row: dict, keys: list[str]) -> None:
    """``row[k]`` is a finite number for every key."""
    for k in keys:
        assert isinstance(row[k], (int, float)) and not isinstance(row[k], bool) and math.isfinite(row[k]), (k, row)


def read(path, name: str) -> dict:
    """The JSON at ``path``, with the machine facts of benchmark ``name`` checked."""
    data = json.loads(path.read_text())
    assert MACHINE <= set(data) and data["kind"] == f"bench-{name}" and data["benchmark"] == name
    finite(data, ["cpu_count", "threads"])
    return data


#: (benchmark, its smallest command line, check of its JSON)
RUNS = {
    "figures": (["--chars", "8", "--repeats", "1", "--kinds", "grassmann"], lambda d: (
        [r["kind"] for r in d["rows"]] == ["grassmann"] and d["target_total_s"] == 0.5,
        ["params", "forward_s", "trace_s", "figures_s", "total_s", "cpu_total_s", "total_over_forward",
         "n_figures", "figures_cpu_s", "send_cpu_s", "json_mb"])),
    "views": (["--chars", "8", "--only", "grassmann-tinyshakespeare"], lambda d: (
        [(r["checkpoint"], r["view"], r["chars"]) for r in d["rows"]] == [("grassmann-tinyshakespeare", "planes", 8)]
        and d["worst"][0]["chars"] == 8 and d["worst"][0]["target_cpu_s"] == 0.5,
        ["forward_cpu_s", "trace_cpu_s", "figures_cpu_s", "send_cpu_s", "total_cpu_s", "total_over_forward",
         "move_cpu_s", "n_figures", "trace_mb", "npz_mb"])),
    "defaults": (["--only", "grassmann-tinyshakespeare"], lambda d: (
        {r["figure"] for r in d["rows"]} >= {"plane_distances", "plucker_heatmap"}
        and all(r["view"] == "planes" for r in d["rows"]),
        [])),
    "device": (["--device", "cpu", "--rounds", "1", "--warmup", "0", "--batch", "64", "--dims", "2", "--only",
                "osm-rnn"], lambda d: (
        d["device"] == "cpu" and [r["name"] for r in d["rows"]] == ["osm-rnn"] and [e["d"] for e in d["exp"]] == [2]
        and d["clock"] == "process CPU" and d["args"]["dims"] == [2],
        ["ms", "base_ms", "ratio_median", "ratio_min", "params", "base_params"])),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_benchmark_writes_its_table_as_json(name, tmp_path, capsys):
    argv, check = RUNS[name]
    out = tmp_path / f"{name}.json"
    assert main(["bench", name, *argv, "--json", str(out)]) == 0
    assert capsys.readouterr().out  # the table is still printed
    data = read(out, name)
    ok, keys = check(data)
    assert ok and data["rows"], data
    assert not undefined(data)  # every key says what it is, with its unit
    for row in data["rows"]:
        finite(row, keys)
    if name == "defaults":
        heat = next(r for r in data["rows"] if r["figure"] == "plucker_heatmap")
        assert len(heat["heat"]) == 2 and 0 <= heat["blank"] <= 1 and math.isfinite(heat["row_cv"])
    if name == "device":
        finite(data["exp"][0], ["exp_ms", "matrix_exp_ms", "ratio"])


@pytest.mark.parametrize("name", available())
def test_every_benchmark_checks_its_json_place_first(name, capsys, tmp_path):
    """Before any work: the benchmark's defaults would run for minutes (or start servers)."""
    afile = tmp_path / "a-file"
    afile.write_text("x")
    assert main(["bench", name, "--json", str(afile / "x.json")]) == 2
    cap = capsys.readouterr()
    assert cap.err == f"error: --json {afile / 'x.json'}: {afile} is a file, so no folder can be made there\n"
    assert not cap.out


def test_browser_figures_are_written_as_json(tmp_path):
    from geomlab.bench import browser

    base = "baseline (no preload)"
    first = {("shipped", "home"): [1.0, 3.0, 2.0], (base, "home"): [4.0, 4.0, 5.0]}
    moves = {"shipped": [0.5, 0.7], base: [0.9]}
    clicked = {("shipped", "attention"): {"token": [0.3], "cell": [], "overview": [0.4]},
               (base, "attention"): {"token": [0.6], "cell": [], "overview": [0.8]}}
    out = tmp_path / "b.json"
    write_json(out, document("browser", {"rounds": 3}, browser.figures(first, moves, clicked, base),
                             browser.DEFINITIONS))
    data = read(out, "browser")
    assert not undefined(data)
    (page,) = data["first_view"]
    assert page["page"] == "home" and page["shipped"]["median_s"] == 2.0 and page["baseline"]["min_s"] == 4.0
    assert page["ratio_median"] == 0.5 and data["baseline"] == base and data["args"] == {"rounds": 3}
    assert [(m["server"], m["n"]) for m in data["cursor_move"]] == [("shipped", 2), ("baseline", 1)]
    cells = [c for c in data["clicks"] if c["what"] == "cell"]
    assert len(data["clicks"]) == 6 and all(c["n"] == 0 and c["median_s"] is None for c in cells)


def test_load_figures_are_written_as_json(tmp_path, monkeypatch, capsys):
    """The load's whole command line, with the run (servers, sessions) replaced by its result."""
    from geomlab.bench import load
    from geomlab.bench.load import room
    from geomlab.bench.load.run import LoadResult
    from geomlab.bench.load.session import SessionResult

    sessions = [SessionResult(i, "energy", "cem-t2-tinyshakespeare", "u", first_view_s=2.0 + i, first_charts=3,
                              move_s=[0.5 * (i + 1)], bytes=10**6) for i in range(2)]
    alone = SessionResult(-1, "energy", "cem-t2-tinyshakespeare", "u", first_view_s=1.0, move_s=[0.25])
    result = LoadResult(sessions, [], 3.0, 4.0, 5.0, 300.0, 310.0, [], 512, 1, alone)
    monkeypatch.setattr(load, "run_load", lambda *a, **k: result)
    out = tmp_path / "load.json"
    assert main(["bench", "load", "--sessions", "2", "--moves", "1", "--json", str(out)]) == 0
    assert "first view   2/2" in capsys.readouterr().out
    data = read(out, "load")
    assert not undefined(data)
    assert data["ok"] is True and data["sessions_n"] == 2 and len(data["sessions"]) == 2
    assert data["first_view"]["median_s"] == 2.5 and data["first_view"]["ratio_to_alone"] == 2.5
    assert data["cursor_move"]["expected"] == 2 and data["cursor_move"]["alone_s"] == 0.25
    finite(data, ["server_up_s", "load_phase_s", "received_mb", "peak_rss_mb", "hwm_mb"])
    result.log_errors.append("ERROR boom")  # a failure is in the JSON and in the exit status
    assert main(["bench", "load", "--json", str(out)]) == 1
    assert json.loads(out.read_text())["log_errors"] == ["ERROR boom"]

    r = room.RoomResult(3, 1, join_s=[1.0, 2.0], cursor_s=[0.1], rss_mb=[200.0], load=(1.0, 2.0, 3.0))
    monkeypatch.setattr(room, "run_room", lambda *a, **k: r)
    assert main(["bench", "load", "--room", "3", "--json", str(out)]) == 0
    data = read(out, "load")
    assert not undefined(data)
    assert data["mode"] == "room" and data["join_s"] == [1.0, 2.0] and data["load"] == [1.0, 2.0, 3.0]


def test_a_value_json_cannot_hold_is_null():
    """NaN (not measured: ``whatif --no-sweep``) is null, not the invalid JSON token NaN."""
    data = document("x", {"log": Path("a") / "b.log"}, {"rows": [{"s": float("nan"), "t": (1, float("inf"))}]})
    assert data["rows"] == [{"s": None, "t": [1, None]}] and data["args"] == {"log": "a/b.log"}
    json.dumps(data, allow_nan=False)


def test_groups_json_says_what_its_ratios_and_drift_are(tmp_path, capsys):
    """The table's header defines ratio and drift; the JSON carries the same definitions (one place), and no
    ``group`` field repeating ``name`` and ``d``."""
    from geomlab.bench import groups

    out = tmp_path / "g.json"
    assert main(["bench", "groups", "--quick", "--groups", "O", "--dims", "2", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    data = read(out, "groups")
    defs = data["definitions"]
    assert not undefined(data) and "group" not in data["rows"][0]
    assert "matrix_exp" in defs["ratio"] and "forward+backward" in defs["ratio"] and "median" in defs["ratio_median"]
    assert "||H^* H - I||_F" in defs["drift_mean"] and "load average" in defs["load_avg"]
    assert f"# ratio: {groups.DEFINITIONS['ratio']}" in table and groups.DEFINITIONS["drift_mean"] in table


@pytest.mark.parametrize("name", available())
def test_every_benchmark_declares_its_definitions(name, monkeypatch):
    """Each hands the runner a mapping key -> meaning, which it writes into the JSON."""
    import importlib

    seen = {}

    def grab(parser, argv, measure, definitions):
        seen.update(definitions)
        return 0

    module = importlib.import_module(f"geomlab.bench.{name}")
    monkeypatch.setattr(module, "run_benchmark", grab)
    assert module.main([]) == 0
    assert seen and all(isinstance(v, str) and v and "\n" not in v for v in seen.values()), seen
    written = document(name, {}, {}, seen)["definitions"]
    assert all(v in written[k] for k, v in seen.items())


def test_whatif_tables_show_a_dash_where_nothing_was_measured(tmp_path, capsys):
    """--no-sweep and a model without a knob: ``-`` in the table (not ``nan``), ``null`` in the JSON."""
    out = tmp_path / "w.json"
    assert main(["bench", "whatif", "--chars", "8", "--repeats", "1", "--kinds", "lstm", "--no-sweep", "--json",
                 str(out)]) == 0
    rows = capsys.readouterr().out.strip().splitlines()[1:]
    assert rows and all("nan" not in r and r.split()[3:5] == ["-", "-"] and r.split()[-1] == "-" for r in rows)
    data = read(out, "whatif")
    assert not undefined(data)
    assert all(r["knob"] is None and r["knob_ms"] is None and r["sweep_s"] is None for r in data["rows"])


def test_a_missing_value_is_a_dash():
    from geomlab.bench import cell

    assert [cell(v, ".2f", 5) for v in (None, float("nan"), 1.0)] == ["    -", "    -", " 1.00"]


def test_a_row_key_named_as_a_machine_fact_keeps_both_meanings():
    """``kind`` is ``bench-NAME`` at the top and a model kind in ``bench figures``' rows."""
    defs = document("figures", {}, {}, {"kind": "the model kind"})["definitions"]
    assert defs["kind"].startswith("bench-NAME") and defs["kind"].endswith("in a row: the model kind")
