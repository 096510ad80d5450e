"""Tests of the reproduction report (geomlab.report) and the `report` subcommand."""

from __future__ import annotations

import json
import math
import re

import pytest

from geomlab import report
from geomlab.commands.cli import main


# ----------------------------------------------------------------------------------------------- protocol
def test_profiles_share_one_protocol_per_run():
    for name, p in report.PROFILES.items():
        assert p.name == name
        assert set(p.comparisons) <= set(report.COMPARISONS)
        assert p.seeds and p.steps >= 1
    full = report.PROFILES["full"]
    assert len(full.seeds) >= 3 and full.eval_tokens is None and set(full.comparisons) == set(report.COMPARISONS)


def test_comparisons_have_exactly_one_baseline_and_the_papers_numbers():
    for c in report.COMPARISONS.values():
        assert sum(a.baseline for a in c.arms) == 1, c.key
    ts = {a.kind: a.paper for a in report.COMPARISONS["ts-100k"].arms if a.paper}
    assert ts["osmformer"]["test"] == 2.464 and ts["transformer"]["test"] == 2.583
    rnn = {a.kind: a.paper["test"] for a in report.COMPARISONS["ts-50k"].arms}
    assert rnn == {"osm-rnn": 2.539, "lstm": 2.594}
    groups = {a.config.get("group") for a in report.WORD_PROBLEM_ARMS if a.kind == "osm-rnn"}
    assert groups == {"O", "U", "T"}
    assert {a.kind for a in report.WORD_PROBLEM_ARMS} >= {"lstm", "transformer"}


def test_protocol_overrides_and_errors():
    p = report.protocol("quick", steps=7, seeds=[0, 1], comparisons=["ts-50k"], wp_steps=None)
    assert p.steps == 7 and p.seeds == (0, 1) and p.comparisons == ("ts-50k",)
    assert p.wp_steps == report.PROFILES["quick"].wp_steps  # None is ignored
    assert report.protocol("quick", eval_tokens="all").eval_tokens is None  # whole splits
    assert report.protocol("quick", eval_tokens=100).eval_tokens == 100
    with pytest.raises(report.ReportError, match="eval_tokens"):
        report.protocol("quick", eval_tokens=0)
    with pytest.raises(report.ReportError, match="unknown profile"):
        report.protocol("medium")
    with pytest.raises(report.ReportError, match="unknown comparisons"):
        report.protocol("quick", comparisons=["ts-1m"])
    with pytest.raises(report.ReportError, match="steps"):
        report.protocol("quick", steps=0)
    with pytest.raises(report.ReportError, match="unknown protocol keys"):
        report.protocol("quick", colour="red")
    with pytest.raises(report.ReportError, match="seed"):
        report.protocol("quick", seeds=[])
    assert report.protocol("quick", lr_grid=[1e-3, "3e-3"]).lr_grid == (1e-3, 3e-3)
    with pytest.raises(report.ReportError, match="lr-grid"):
        report.protocol("quick", lr_grid=[0.0])
    assert report.protocol("quick", wp_curriculum=[[2, 100]]).wp_curriculum == ((2, 100),)
    with pytest.raises(report.ReportError, match="word-problem curriculum"):
        report.protocol("quick", wp_curriculum=[(2, 10_000)])  # more steps than wp_steps
    with pytest.raises(report.ReportError, match="word-problem curriculum"):
        report.protocol("quick", wp_curriculum=[(0, 10)])
    with pytest.raises(report.ReportError, match="training length 16"):
        report.protocol("quick", wp_curriculum=[(64, 10)])  # longer than the training length (16)
    with pytest.raises(report.ReportError, match="between 0 and 10"):
        report.protocol("quick", lr_grid=[1e9])


def test_lr_grid_picks_the_best_validation_lr_per_model(monkeypatch):
    """With a grid, each arm is trained once per lr on the first seed, keeps the lr of the lowest validation
    BPC (a diverged lr loses) and reuses that run for its first seed; other seeds train at the chosen lr."""
    from types import SimpleNamespace

    from geomlab.models import build_model
    from geomlab.training.trainer import TrainingError

    calls = []
    best = {"osm-rnn": 1e-2, "lstm": 3e-2}

    def fake(kind, task, *, lr, seed, **kw):
        calls.append((kind, lr, seed))
        if kind == "lstm" and lr == 1e-3:
            raise TrainingError("diverged", 3, "loss")
        v = 2.0 + abs(math.log10(lr) - math.log10(best[kind]))
        model = build_model({"kind": "lstm", "vocab_size": 5, "hidden": 4})
        return SimpleNamespace(model=model, config={"kind": kind}, metrics={"valid_bpc": v, "test_bpc": v + 0.1},
                               tokens_per_s=100.0, train_time_s=1.0, cpu_time_s=1.0, history=[])

    monkeypatch.setattr(report.running, "train_and_evaluate", fake)
    monkeypatch.setattr(report.running, "trace_latency_ms", lambda *a, **k: 1.0)
    monkeypatch.setattr(report.running, "make_task", lambda name: SimpleNamespace(spec=lambda: {"corpus": name},
                                                                          vocab_size=5))
    proto = report.protocol("quick", lr_grid=[1e-3, 1e-2, 3e-2], seeds=[0, 1])
    res = report.run_comparison(report.COMPARISONS["ts-50k"], proto, log=lambda s: None)
    assert not [r["error"] for r in res["rows"] if r.get("error")]
    rows = {r["kind"]: r for r in res["rows"]}
    assert rows["osm-rnn"]["lr"] == 1e-2 and rows["lstm"]["lr"] == 3e-2
    assert rows["lstm"]["lr_sweep"]["0.001"] is None  # the diverged candidate is recorded, not chosen
    assert [c for c in calls if c[0] == "osm-rnn"] == [("osm-rnn", 1e-3, 0), ("osm-rnn", 1e-2, 0),
                                                      ("osm-rnn", 3e-2, 0), ("osm-rnn", 1e-2, 1)]
    assert rows["osm-rnn"]["valid"] == [2.0, 2.0] and not rows["osm-rnn"].get("error")
    md = report.render_markdown({**_fake_results(), "protocol": proto.to_dict(), "comparisons": [res]})
    assert "chosen per model from the grid 0.001, 0.01, 0.03" in md
    assert "LSTM: 0.001 → —, 0.01 → 2.477, 0.03 → 2.000 (best at the edge of the grid)" in md
    assert "the baseline's best learning rate (0.03) is at the edge of the grid" in md
    assert re.search(r"\| OSM-RNN O\(d\) \| `osm-rnn` \| [^|]+ \| 2 \| 0.01 \|", md)


# ----------------------------------------------------------------------------------------------- rendering
def _fake_results():
    rows = [
        {"label": "Model A", "kind": "osmformer", "baseline": False, "paper": {"valid": 2.254, "test": 2.464},
         "seeds": [0, 1], "params": 91_000, "valid_mean": 2.5, "valid_std": 0.01, "test_mean": 2.7,
         "test_std": 0.02, "tokens_per_s_mean": 500.0, "speed_ratio": 0.5, "trace_ms": 12.0, "test_gap": 0.2,
         "history": [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.5}]},
        {"label": "Base", "kind": "transformer", "baseline": True, "paper": {"valid": 2.259, "test": 2.583},
         "seeds": [0, 1], "params": 104_000, "valid_mean": 2.4, "valid_std": 0.01, "test_mean": 2.5,
         "test_std": 0.01, "tokens_per_s_mean": 1000.0, "speed_ratio": 1.0, "trace_ms": 3.0,
         "history": [{"step": 1, "loss": 3.1}, {"step": 2, "loss": 2.4}]},
        {"label": "Broken", "kind": "cem", "baseline": False, "paper": {}, "seeds": [0, 1], "error": "ValueError: x",
         "valid_mean": None, "valid_std": None, "test_mean": None, "test_std": None},
    ]
    return {
        "protocol": report.PROFILES["quick"].to_dict(), "started": "2026-01-01 00:00 UTC", "wall_s": 60.0,
        "machine": {"device": "cpu", "threads": 1, "torch": "x"},
        "comparisons": [{"key": "ts-100k", "title": "TS", "corpus": "tinyshakespeare", "split": "90/5/5",
                         "claim": "claim", "note": "", "rows": rows}],
        "word_problem": {"train_len": 16, "lengths": [4, 64], "groups": ["S5"], "rows": [
            {"group": "S5", "label": "OSM-RNN O(8)", "kind": "osm-rnn", "seeds": [0], "params": 11945,
             "acc": {"4": 0.9, "64": 0.5}, "chance": 1 / 120}]},
    }


def test_render_markdown_shows_ours_next_to_the_paper():
    md = report.render_markdown(_fake_results(), {"Bits per character": "results/bpc.html"})
    assert "| Model A | `osmformer` | 91.0K | 2 | 0.003 | 2.500 ± 0.010 | 2.700 ± 0.020 | 2.254 | 2.464 | +0.200 |" in md
    assert "Base (baseline)" in md and "failed: ValueError: x" in md
    # the verdict compares our gap with the paper's gap (2.464 - 2.583 = -0.119)
    assert "Model A: test BPC +0.200 vs the baseline (paper: -0.119)" in md
    assert re.search(r"\| S5 \| OSM-RNN O\(8\) \| `osm-rnn` \| 11.9K \| 1 \| 0.90 \| 0.50 \|", md)
    assert "quick" in md and "not a reproduction" in md
    assert "[Bits per character](results/bpc.html)" in md
    card = {"name": "s5", "file": "s5.json", "model_config": {"kind": "osm-rnn"}, "params_effective": 4521,
            "steps": 8000, "batch_size": 64, "seq_len": 32, "valid_accuracy": 0.98, "test_accuracy": 0.97,
            "train_time_s": 1.0, "length_curriculum": [[2, 1500]]}
    md = report.render_markdown({**_fake_results(), "zoo_cards": [card]})
    assert "| `s5` | `osm-rnn` | 4.5K | 8000 x 64 x 32 (length curriculum) | 0.980 acc | 0.970 acc | 1.0 |" in md


def test_figures_for_builds_every_figure():
    figs = report.figures_for(_fake_results())
    assert set(figs) == {"bpc", "speed", "curves", "word_problem"}
    test = next(t for t in figs["bpc"].data if t.name.startswith("test (ours"))
    assert list(test.x) == [2.7, 2.5] and list(test.y) == ["Model A", "Base (baseline)"]  # the rows that ran
    assert next(t for t in figs["bpc"].data if t.name == "test (paper)").x == (2.464, 2.583)
    assert figs["speed"].data[0].orientation == "h" and list(figs["speed"].data[0].x) == [0.5, 1.0]
    # two comparisons: a section each, under each other, and the curves' legends one per section (one legend
    # for all mixed the sections' colours: a 7-section figure showed OSM-RNN and Grassmann in the same blue)
    res = _fake_results()
    res["comparisons"].append({**res["comparisons"][0], "key": "ptb-100k", "title": "PTB"})
    two = report.figures_for(res)
    assert [a.text for a in two["bpc"].layout.annotations] == ["TS", "PTB"]
    assert two["bpc"].layout.yaxis2.domain[1] < two["bpc"].layout.yaxis.domain[0]
    assert {t.legend for t in two["curves"].data} == {"legend", "legend2"} and two["curves"].layout.legend2.x > 0.62
    # a reduced run's figures say so in their titles (seen alone, 300-step numbers read as results)
    steps, n_seeds = res["protocol"]["steps"], len(res["protocol"]["seeds"])
    assert n_seeds == 1 and figs["bpc"].layout.title.text == (
        f"Bits per character (lower is better) ({steps:,} steps, 1 seed: not converged)")
    assert figs["curves"].layout.title.text.endswith(f"({steps:,} steps, 1 seed: not converged)")
    twelve = report.figures_for({"kind": "converged", "protocol": {}, "comparisons": [{
        "key": "zoo-ts", "title": "Zoo", "rows": [{"label": f"m{k}", "baseline": False, "test_mean": 2.5,
                                                   "curves": [[(100, 1.0, 2.6), (200, 2.0, 2.5)]]} for k in range(12)]}]})
    colours = [t.line.color for t in twelve["valid_curves"].data]
    assert len(set(colours)) == 12 and "not converged" not in twelve["bpc"].layout.title.text
    # word problem over two groups: a model keeps one colour in every panel, and one legend entry
    res = _fake_results()
    rows = res["word_problem"]["rows"]
    rows.append({**rows[0], "label": "LSTM", "kind": "lstm"})
    rows += [{**r, "group": "Z60"} for r in list(rows)]
    res["word_problem"]["groups"] = ["S5", "Z60"]
    wp = report.figures_for(res)["word_problem"]
    colours = {}
    for t in wp.data:
        colours.setdefault(t.name, set()).add(t.line.color)
    assert len(colours) == 2 and all(len(c) == 1 for c in colours.values())
    assert len({next(iter(c)) for c in colours.values()}) == 2
    assert sorted(t.name for t in wp.data if t.showlegend) == ["LSTM", "OSM-RNN O(8)"]


def test_committed_report_renders_again_from_its_json():
    """The smoke appendix of docs/results.md is exactly what the renderer makes of docs/results/results.json
    (with the figure links, the longer runs next to it and the bundled zoo's cards, as write_report adds them),
    one heading level down: the Markdown is never edited by hand, and a change of the renderer that changes the
    committed report shows here. (A rebuilt zoo card changes the zoo table: re-render with `geomlab report
    --page`.)"""
    from pathlib import Path

    from geomlab.report.output import figure_links, with_context
    from geomlab.report.page import SMOKE_TITLE

    out = Path(__file__).resolve().parents[2] / "docs" / "results.md"
    fig_dir = out.parent / "results"
    results = json.loads((fig_dir / "results.json").read_text(encoding="utf-8"))
    figs = report.figures_for(results)
    pngs = {name: fig_dir / f"{name}.png" for name in figs if (fig_dir / f"{name}.png").is_file()}
    md = report.render_markdown(with_context(results, out), figure_links(figs, pngs))
    page = out.read_text(encoding="utf-8")
    appendix = page[page.index(f"## {SMOKE_TITLE}"):]
    expected = [f"## {SMOKE_TITLE}"] + ["#" + ln if ln.startswith("#") else ln.rstrip() for ln in md.splitlines()[1:]]
    assert appendix.rstrip() == "\n".join(expected).rstrip()
    # the converged campaign's report is named at the top, before the first table it supersedes
    assert page.index("[results/runs/converged/results.md](results/runs/converged/results.md)") < page.index("|")


# ----------------------------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_bench_smoke_writes_the_report(tmp_path, tiny_text):
    """The smallest profile end to end through the CLI on a tiny text: every expected row is in the
    Markdown with finite numbers, and results.json agrees with it."""
    text = tmp_path / "tiny.txt"
    text.write_text(tiny_text, encoding="utf-8")
    out = tmp_path / "docs" / "results.md"
    rc = main(["report", "--smoke", "--corpus-file", str(text), "--out", str(out), "--no-png", "--threads", "1"])
    assert out.is_file()
    md = out.read_text()
    data = json.loads((out.parent / "results" / "results.json").read_text())
    failed = [r["label"] for c in data["comparisons"] for r in c["rows"] if r.get("error")]
    failed += [r["label"] for r in data["word_problem"]["rows"] if r.get("error")]
    assert rc == 0 and not failed, failed
    # the reproduce command is the real one: the text file as given, and the real --out
    assert f"--corpus-file {text} --out {out.as_posix()}" in md
    assert "the text file's contiguous 90/5/5" in md and "PTB-char and WikiText-2 their official" not in md
    assert [c["key"] for c in data["comparisons"]] == list(report.PROFILES["smoke"].comparisons)
    for c in data["comparisons"]:
        comp = report.COMPARISONS[c["key"]]
        assert [r["label"] for r in c["rows"]] == [a.label for a in comp.arms]
        for r in c["rows"]:
            assert r["label"] in md
            for key in ("valid_mean", "test_mean", "tokens_per_s_mean", "speed_ratio", "cpu_speed_ratio", "trace_ms"):
                assert math.isfinite(r[key]) and r[key] > 0, (r["label"], key)
            assert r["seeds"] == [0]
    wp = data["word_problem"]
    assert len(wp["rows"]) == len(report.WORD_PROBLEM_ARMS) * len(wp["groups"])
    for r in wp["rows"]:
        assert all(0.0 <= v <= 1.0 for v in r["acc"].values())
    for name in ("bpc", "speed", "curves", "word_problem"):
        assert (out.parent / "results" / f"{name}.html").is_file()


def test_merge_results_and_from_json(tmp_path):
    a, b = _fake_results(), _fake_results()
    a["word_problem"] = None
    a["protocol"] = dict(a["protocol"], comparisons=["ts-100k"], wp_steps=0)
    a["cpu_s"], b["cpu_s"] = 10.0, 5.0
    b["comparisons"][0]["key"] = "ts-50k"
    b["protocol"] = dict(b["protocol"], comparisons=["ts-50k"])
    b["wall_s"] = 90.0
    merged = report.merge_results([b, a])
    assert [c["key"] for c in merged["comparisons"]] == ["ts-100k", "ts-50k"]  # COMPARISONS order
    assert merged["wall_s"] == 90.0 and merged["cpu_s"] == 15.0 and merged["parts"] == 2
    assert len(merged["word_problem"]["rows"]) == 1
    c = _fake_results()
    c["protocol"] = dict(c["protocol"], steps=999)
    with pytest.raises(report.ReportError, match="different protocols"):
        report.merge_results([a, c])
    fa, fb = tmp_path / "a.json", tmp_path / "b.json"
    fa.write_text(json.dumps(a))
    fb.write_text(json.dumps(b))
    out = tmp_path / "r.md"
    assert main(["report", "--from-json", str(fa), str(fb), "--out", str(out), "--no-png"]) == 0
    md = out.read_text()
    assert "2 parallel processes" in md and md.count("| Model A |") == 2
    # the reproduce block gives each part's own command, and the merge of their results files
    assert md.count("python -m geomlab report --quick --only ts-100k --out runs/report-") == 1
    assert md.count("python -m geomlab report --quick --only ts-50k,word-problem --out runs/report-") == 1
    assert "--from-json runs/report-0/results/results.json runs/report-1/results/results.json" in md
    assert main(["report", "--from-json", str(tmp_path / "missing.json"), "--out", str(out)]) == 2


def test_bench_with_report_options_is_an_ordinary_usage_error(tmp_path, capsys):
    """`geomlab bench` takes a benchmark name: report options are refused with bench's usage error (exit
    status 2) and no report is written; the report is `geomlab report`."""
    f = tmp_path / "a.json"
    f.write_text(json.dumps(_fake_results()))
    out = tmp_path / "r.md"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--from-json", str(f), "--out", str(out), "--no-png"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "geomlab bench: error: unrecognized arguments: --from-json" in err
    assert "deprecated" not in err and not out.exists()


def test_command_line_reproduces_the_protocol():
    """The command printed in the report, parsed by the real CLI parser, gives back the same protocol."""
    from geomlab.commands.cli import build_parser

    p = report.protocol("quick", steps=1000, lr=0.01, comparisons=["ts-50k"], wp_steps=0, eval_tokens="all",
                        seeds=[0, 1])
    cmd = report.command_line(p.to_dict())
    assert cmd.startswith("python -m geomlab report --quick")
    args = build_parser().parse_args(cmd.split()[3:])
    assert args.steps == 1000 and args.lr == 0.01 and args.only == "ts-50k" and args.eval_chars == "all"
    assert args.seeds == 2 and args.quick
    assert report.command_line(report.PROFILES["quick"].to_dict()) == "python -m geomlab report --quick"
    p = report.protocol("full", steps=400, batch_size=16, lr_grid=[3e-3, 1e-2], seeds=[0])
    cmd = report.command_line(p.to_dict())
    args = build_parser().parse_args(cmd.split()[3:])
    assert args.lr_grid == "0.003,0.01" and args.batch_size == 16 and args.steps == 400 and args.seeds == 1
    p = report.protocol("full", wp_curriculum=[(2, 100)], corpus_override="data/x.txt")
    args = build_parser().parse_args(report.command_line(p.to_dict()).split()[3:])
    assert args.wp_curriculum == "2:100" and args.corpus_file == "data/x.txt"


def test_tune_lr_shares_its_grid_through_a_storage(tmp_path):
    """--lr-storage: a second worker on the same study trains none of the grid again (only the winning lr,
    for its row) and reads the first worker's values; another protocol under the same name is refused; in
    memory (no storage) every lr is trained, in the grid's order."""
    from types import SimpleNamespace

    from geomlab.training import sweep
    from geomlab.report import tune_lr

    bpc = {1e-3: 2.9, 3e-3: 2.5, 1e-2: 2.7}
    calls: list[float] = []

    def train(seed, lr):
        calls.append(lr)
        return SimpleNamespace(metrics={"valid_bpc": bpc[lr]}, lr=lr)

    grid = (1e-3, 3e-3, 1e-2)
    store = str(tmp_path / "lr.journal")
    quiet = lambda *_: None  # noqa: E731
    sweep_a, best_a, run_a = tune_lr(train, grid, 0, "ts / model", quiet, storage=store, setup={"steps": 10})
    assert calls == list(grid) and best_a == 3e-3 and run_a.lr == 3e-3
    assert sweep_a == {str(lr): bpc[lr] for lr in grid}
    calls.clear()
    sweep_b, best_b, run_b = tune_lr(train, grid, 0, "ts / model", quiet, storage=store, setup={"steps": 10})
    assert calls == [3e-3] and sweep_b == sweep_a and best_b == 3e-3  # only the row's run, trained here
    with pytest.raises(sweep.SweepError):
        tune_lr(train, grid, 0, "ts / model", quiet, storage=store, setup={"steps": 20})
    calls.clear()
    assert tune_lr(train, grid, 0, "ts / model", quiet)[1] == 3e-3 and calls == list(grid)


def test_seed_intervals_and_the_paired_gap():
    """95% Student-t intervals over seeds: [1, 2, 3] has mean 2, s = 1, t_0.975(2) = 4.3027, so
    a half-width of 4.3027 / sqrt(3); one seed has none. The gap's interval pairs the seeds (same batches), so
    a model that is 0.1 better on every seed has a zero-width interval although each row varies."""
    from geomlab.report.aggregation import ci95, compare_to_baseline

    assert ci95([1.0, 2.0, 3.0]) == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    assert ci95([2.5]) is None and ci95([2.5, None, float("nan")]) is None
    base = {"baseline": True, "seeds": [0, 1, 2], "test": [2.6, 2.8, 2.7], "test_mean": 2.7}
    ours = {"baseline": False, "seeds": [0, 1, 2], "test": [2.5, 2.7, 2.6], "test_mean": 2.6}
    other_seeds = {"baseline": False, "seeds": [3, 4, 5], "test": [2.5, 2.9, 2.6], "test_mean": 2.667}
    for r in (base, ours, other_seeds):
        r.update(tokens_per_s_mean=None, tokens_per_cpu_s=None)
    compare_to_baseline([base, ours, other_seeds])
    assert ours["test_gap"] == pytest.approx(-0.1) and ours["test_gap_ci95"] == pytest.approx(0.0, abs=1e-9)
    assert "test_gap_ci95" not in other_seeds and "test_gap_ci95" not in base  # not paired: no interval
    noisy = dict(ours, test=[2.5, 2.9, 2.6])
    compare_to_baseline([base, noisy])
    assert noisy["test_gap_ci95"] == pytest.approx(ci95([-0.1, 0.1, -0.1]))
    results = _fake_results()
    row = next(r for c in results["comparisons"] for r in c["rows"] if r["label"] == "Model A")
    row.update(test_gap_ci95=0.05, seeds=[0, 1])
    md = report.render_markdown(results)
    assert "| +0.200 (95% CI ±0.050) |" in md
    assert "Model A: test BPC +0.200 vs the baseline (95% CI +0.150 to +0.250 over 2 seeds)" in md
    row.update(test_gap_ci95=0.3)
    assert "over 2 seeds: not distinguishable)" in report.render_markdown(results)


def test_a_bare_report_command_asks_for_a_profile(capsys):
    """`geomlab report` alone would have started the full protocol (hours): it names the profiles instead."""
    from geomlab.commands.cli import main

    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert "choose a profile" in err and "--quick" in err and "--full" in err and err.count("\n") == 1
    assert report.command_line(report.PROFILES["full"].to_dict()) == "python -m geomlab report --full"
