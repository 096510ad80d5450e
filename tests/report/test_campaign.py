"""The converged campaign (:mod:`geomlab.report.campaign` and its store, worker and results): the half-decade ladder, the tuning rule
(widened when the best lr sits on an edge, at most ``max_widen`` times), the run store's locks, a run stopped
and resumed giving the same numbers as one run through, the results (curves, seeds, equal training time) and
the command line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.commands.cli import main
from geomlab.report import campaign as cp
from geomlab.report import results as res
from geomlab.report import store as rs
from geomlab.report import worker as wk
from geomlab.report.protocol import COMPARISONS
from geomlab.report.render import converged_comparison, render_markdown
from helpers.executors import Inline

REPO = Path(__file__).resolve().parents[2]


def work(plan, store, **kw):
    """The campaign's runs through :func:`geomlab.report.dispatch.dispatch` with :class:`Inline`."""
    from geomlab.report.dispatch import dispatch

    return dispatch(plan, store, Inline(), **{"log": lambda m: None, "nice": 0, "poll_s": 0.0, **kw})


def tiny(text_file, **kw) -> cp.Campaign:
    base = dict(steps=(("ts-50k", 12), ("grassmann-200k", 6)), seeds=(0, 1), eval_every=4, batch_size=4,
                seq_len=16, corpus_override=str(text_file))
    return cp.Campaign(**{**base, **kw})


# ------------------------------------------------------------------------------------------ the ladder
def test_half_decade_ladder():
    assert cp.half_decade(1e-3, -1) == 3e-4
    assert cp.half_decade(3e-2, 1) == 0.1
    assert cp.half_decade(0.1, 1) == 0.3
    assert cp.half_decade(3e-3, -1) == 1e-3


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-12, max_value=-1))
def test_half_decade_steps_are_inverse_and_monotone(k):
    """Up then down returns to the same rung; every rung is 3x or 3.33x its neighbour."""
    x = float(f"{10 ** (k / 2):.0e}")
    up = cp.half_decade(x, 1)
    assert cp.half_decade(up, -1) == x
    assert 2.9 < up / x < 3.4


# ------------------------------------------------------------------------------------------ tuning rule
def _fake_outcome(store, job, valid):
    store.folder(job).mkdir(parents=True, exist_ok=True)
    status = "done" if valid is not None else "failed"
    store.write(job, "outcome.json", {"status": status, "metrics": {"valid_bpc": valid} if valid else {}})


def _tune(plan, store, comp, arms, valid=None):
    """Finish the first tuning round of ``arms`` with fake outcomes: ``valid`` maps lr -> valid BPC (None:
    every run diverged)."""
    for arm in arms:
        for j in cp.tuning_state(plan, store, comp, arm)[0]:
            _fake_outcome(store, j, None if valid is None else valid[j.lr])


def test_tuning_widens_at_an_edge_until_the_optimum_is_inside(tmp_path, text_file):
    """The best lr at the top of the grid adds the next half-decade; once the best is inside, the winner is
    set; the full-budget seeds then follow at it."""
    plan = tiny(text_file)
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    arm = comp.arms[1]
    pending, _, best, _ = cp.tuning_state(plan, store, comp, arm)
    assert [j.lr for j in pending] == [1e-3, 3e-3, 1e-2, 3e-2] and best is None
    curve = {1e-3: 3.0, 3e-3: 2.8, 1e-2: 2.6, 3e-2: 2.5, 0.1: 2.4, 0.3: 2.45}
    for j in pending:
        _fake_outcome(store, j, curve[j.lr])
    pending, results, best, _ = cp.tuning_state(plan, store, comp, arm)
    assert [j.lr for j in pending] == [0.1] and best is None  # 3e-2 won at the edge: widen upward
    _fake_outcome(store, pending[0], curve[0.1])
    pending, _, best, _ = cp.tuning_state(plan, store, comp, arm)
    assert [j.lr for j in pending] == [0.3]
    _fake_outcome(store, pending[0], curve[0.3])
    pending, results, best, note = cp.tuning_state(plan, store, comp, arm)
    assert pending == [] and best == (0.1, plan.warmup) and note == ""
    full = [j for j in cp.jobs(plan, store, ("ts-50k",)) if j.arm is arm]
    assert [(j.phase, j.lr, j.seed, j.steps) for j in full] == [("full", 0.1, 0, 12), ("full", 0.1, 1, 12)]


def test_tuning_stops_widening_and_says_so(tmp_path, text_file):
    """Always better lower: two half-decades are added below, then the winner stays on the edge with a note;
    a diverged lr counts as lost."""
    plan = tiny(text_file, max_widen=2)
    store = rs.RunStore(tmp_path)
    comp, arm = COMPARISONS["ts-50k"], COMPARISONS["ts-50k"].arms[0]
    for _ in range(4):
        pending, _, best, note = cp.tuning_state(plan, store, comp, arm)
        for j in pending:
            _fake_outcome(store, j, None if j.lr == 3e-2 else 1.0 + j.lr)
    pending, results, best, note = cp.tuning_state(plan, store, comp, arm)
    assert pending == [] and best[0] == 1e-4 and "smallest" in note and "2 time(s)" in note
    assert sorted(lr for lr, _, _ in results) == [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    assert dict(((lr, v) for lr, _, v in results))[3e-2] is None


def test_an_arm_whose_every_lr_diverged_plans_no_seeds(tmp_path, text_file):
    plan = tiny(text_file, steps=(("ts-50k", 8),))
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    _tune(plan, store, comp, comp.arms)
    results = res.collect(plan, store)
    assert results["progress"]["done"] == results["progress"]["planned"] == 8
    assert results["progress"]["untimed_arms"] == 0
    assert all(r["status"].startswith("tuning failed") for r in results["comparisons"][0]["rows"])


def test_warmup_dimension_where_it_matters(tmp_path, text_file):
    plan = tiny(text_file)
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["grassmann-200k"]
    pending, *_ = cp.tuning_state(plan, store, comp, comp.arms[1])
    assert {(j.lr, j.warmup) for j in pending} == {(lr, wu) for lr in plan.lr_grid for wu in (0.02, 0.1)}
    assert {j.warmup for j in cp.tuning_state(plan, store, COMPARISONS["ts-50k"],
                                             COMPARISONS["ts-50k"].arms[0])[0]} == {0.02}


def test_unknown_comparison_is_refused(text_file):
    with pytest.raises(cp.ReportError, match="unknown comparisons"):
        tiny(text_file).comparisons(("nope",))


# ------------------------------------------------------------------------------------------ the store
def test_locks_keep_two_workers_apart_and_die_with_their_worker(tmp_path, text_file):
    """A lock held by another live process keeps the job from this one; when that process is killed (no
    clean-up at all) the job is free again; a finished job is never taken."""
    plan = tiny(text_file)
    store = rs.RunStore(tmp_path)
    job = next(cp.jobs(plan, store))
    assert store.acquire(job) and store.held(job)
    other = rs.RunStore(tmp_path)  # a second worker's view (same process: separate open files)
    assert other.held(job) and not other.acquire(job)
    store.release(job)
    assert not other.held(job)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from geomlab.report import store as rs; "
        "from geomlab.report.protocol import COMPARISONS as C; "
        f"s = rs.RunStore({str(tmp_path)!r}); c = C['ts-50k']; "
        f"j = rs.Job(c, c.arms[0], 'tune', {job.lr!r}, {job.warmup!r}, 0, {job.steps!r}); "
        "print(s.acquire(j), flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "True"
        assert store.held(job) and not store.acquire(job)
    finally:
        holder.kill()
        holder.wait()
    assert not store.held(job) and store.acquire(job)
    store.release(job)
    _fake_outcome(store, job, 2.0)
    assert not store.acquire(job)  # finished meanwhile: not taken


def test_a_gpu_run_resumes_on_the_worker_device(tmp_path, text_file):
    """A run whose checkpoint says cuda (started on a GPU machine) goes on with the worker's device, and a
    job that raises does not stop the worker."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.training import runs
    from geomlab.training.zoo import make_task

    plan = tiny(text_file, steps=(("ts-50k", 8),))
    store = rs.RunStore(tmp_path)
    job = next(cp.jobs(plan, store))
    built = runs.build(wk.job_spec(plan, job), task=make_task(str(text_file)), out=store.folder(job) / "ckpt")
    built.trainer.add_callback(lambda p: built.trainer.stop() if p.event == "eval" else None)
    built.trainer.run()
    meta = json.loads((store.folder(job) / "ckpt" / ckpt.META_FILE).read_text())
    meta["train_config"]["device"] = "cuda"
    (store.folder(job) / "ckpt" / ckpt.META_FILE).write_text(json.dumps(meta))
    broken = next(j for j in cp.jobs(plan, store) if j.key != job.key)
    (store.folder(broken) / "ckpt").mkdir(parents=True)
    (store.folder(broken) / "ckpt" / "config.json").write_text("{not json")
    logs = []
    work(plan, store, log=logs.append, max_jobs=2, device="cpu")
    assert store.outcome(job)["status"] == "done"
    assert store.outcome(broken) is None and any("failed" in m and broken.key in m for m in logs)


def test_a_stopped_run_resumes_to_the_same_numbers(tmp_path, text_file):
    """A job stopped at its first validation and finished by :func:`train_job` gives the same final BPC as the
    job run through in another store (the checkpoint carries optimizer, schedule and batch RNG)."""
    from geomlab.training import runs
    from geomlab.training.zoo import make_task

    plan = tiny(text_file)
    task = make_task(str(text_file))
    job = rs.Job(COMPARISONS["ts-50k"], COMPARISONS["ts-50k"].arms[1], "full", 1e-2, 0.02, 0, 12)
    a, b = rs.RunStore(tmp_path / "a"), rs.RunStore(tmp_path / "b")
    through = wk.train_job(plan, a, job, task, log=lambda m: None)
    built = runs.build(wk.job_spec(plan, job), task=task, out=b.folder(job) / "ckpt")
    built.trainer.add_callback(lambda p: built.trainer.stop() if p.event == "eval" else None)
    assert built.trainer.run().status == "stopped" and built.trainer.step == 4
    assert b.step(job) == 4 and a.step(job) == 12
    resumed = wk.train_job(plan, b, job, task, log=lambda m: None)
    assert resumed["status"] == through["status"] == "done"
    assert resumed["metrics"]["test_bpc"] == pytest.approx(through["metrics"]["test_bpc"], abs=1e-6)
    assert [p[0] for p in res.curve(resumed, plan.batch_size, plan.seq_len)] == [4, 8, 12]


# ------------------------------------------------------------------------------------------ the results
def _outcome(points, batch=4, seq=16):
    """An outcome whose log says each 4-step interval ran at ``tps`` tokens/s and whose validations are given."""
    hist = []
    for step, tps, v in points:
        hist.append({"step": step, "loss": 1.0, "tokens_per_s": tps})
        hist.append({"step": step, "valid_bpc": v})
    return {"history": hist}


def test_curve_clock_and_interpolation():
    o = _outcome([(4, 64.0, 3.0), (8, 32.0, 2.0)])  # 64 tokens per 4 steps: 1 s, then 2 s
    assert res.curve(o, 4, 4) == [(4, 1.0, 3.0), (8, 3.0, 2.0)]
    assert res.at([(1.0, 3.0), (3.0, 2.0)], 2.0) == pytest.approx(2.5)
    assert res.at([(1.0, 3.0), (3.0, 2.0)], 4.0) is None


def test_equal_time_compares_at_the_shorter_training_time():
    fast = {"seeds": [0], "train_time_s": [2.0], "curves": [[(4, 1.0, 3.0), (8, 2.0, 2.5)]]}
    slow = {"seeds": [0], "train_time_s": [4.0], "curves": [[(4, 2.0, 2.8), (8, 4.0, 2.2)]]}
    et = res.equal_time(slow, fast)
    assert et["seconds"] == 2.0 and et["valid"] == pytest.approx(2.8) and et["baseline_valid"] == 2.5
    assert et["gap"] == pytest.approx(0.3)
    assert res.equal_time(fast, fast) is None


def test_equal_time_keeps_every_seed_at_its_own_time():
    """Seeds of different lengths: each is compared at its own shorter time, so none drops out."""
    fast = {"seeds": [0, 1, 2], "curves": [[(4, 50.0, 3.0), (8, t, 2.5)] for t in (100.0, 101.0, 102.0)]}
    slow = {"seeds": [0, 1, 2], "curves": [[(4, 100.0, 2.8), (8, 200.0, 2.2)]] * 3}
    et = res.equal_time(slow, fast)
    assert et["seeds"] == 3 and et["seconds"] == pytest.approx(101.0)
    assert et["valid"] == pytest.approx(2.8 - 0.6 * 1 / 100)  # mean of 2.8, 2.794, 2.788 and et["baseline_valid"] == 2.5


@pytest.mark.slow
def test_a_tiny_campaign_end_to_end(tmp_path, text_file):
    """The campaign's jobs through the dispatcher, then :func:`collect` and the Markdown: every arm tuned
    (the winner inside its range or noted), both seeds finished, intervals and equal-time numbers present."""
    plan = tiny(text_file, steps=(("ts-50k", 12),))
    store = rs.RunStore(tmp_path / "store")
    n = work(plan, store)
    assert n >= 2 * (4 + 2) and list(cp.jobs(plan, store)) == []
    assert work(plan, store) == 0  # nothing left: a second dispatcher exits at once
    results = res.collect(plan, store)
    rows = results["comparisons"][0]["rows"]
    for r in rows:
        assert r["seeds"] == [0, 1] and all(math.isfinite(x) for x in r["test"])
        assert r["test_ci95"] is not None and r["status"] == "2 of 2 seeds finished"
        assert r["lr"] in [t["lr"] for t in r["tuning"]]
        edge = r["lr"] in (min(t["lr"] for t in r["tuning"]), max(t["lr"] for t in r["tuning"]))
        assert (not edge) or r["tuning_note"] or len(r["tuning"]) == 4 + 2 * plan.max_widen
        assert [p[0] for p in r["curves"][0]] == [4, 8, 12]
    osm = next(r for r in rows if not r["baseline"])
    assert osm["test_gap_ci95"] is not None
    et = osm["equal_time"]  # None when the slower model had not validated yet by the faster one's end
    if et is not None:
        lstm = next(r for r in rows if r["baseline"])
        per_seed = [min(a, b) for a, b in zip(osm["train_time_s"], lstm["train_time_s"])]
        if et["seeds"] == 2:
            assert et["seconds"] == pytest.approx(sum(per_seed) / 2)
        else:
            assert et["seeds"] == 1 and any(et["seconds"] == pytest.approx(t) for t in per_seed)
    assert results["progress"]["done"] == results["progress"]["planned"]
    assert results["progress"]["cpu_hours_left_timed"] == 0 and results["progress"]["untimed_arms"] == 0
    assert all(r["cpu_s_per_step"] > 0 for r in rows)
    md = render_markdown(results)
    assert "| OSM-RNN O(d) | 2 of 2 seeds finished |" in md
    # complete: the header and the reading say so, with no "so far"; one run short, they say how far it got
    done = results["progress"]["done"]
    assert f"the campaign is complete: all {done} planned runs finished" in md and "## Reading\n" in md
    partial = render_markdown(dict(results, progress=dict(results["progress"], done=done - 1)))
    assert f"**{done - 1} of {done} planned runs finished**" in partial and "complete" not in partial.split("\n")[2]
    assert "## Reading (what the finished runs say so far)" in partial
    assert "so far" not in md and "tuning runs so far" in partial
    json.dumps(results)  # the results file is plain JSON
    # the trace latency is measured once, kept beside the run, and read back by the next collect (measured
    # again each time, on a machine busy with workers, one model's number swung 10x between snapshots)
    kept = sorted((tmp_path / "store").rglob(res.TRACE_MS_FILE))
    assert len(kept) == len(rows) and all(r["trace_ms"] > 0 for r in rows)
    for f in kept:
        f.write_text(json.dumps({"trace_ms": 123.0, "length": 128}), encoding="utf-8")
    assert [r["trace_ms"] for r in res.collect(plan, store)["comparisons"][0]["rows"]] == [123.0] * len(rows)


# ------------------------------------------------------------------------------------------ command line
def test_cli_collect_on_an_empty_store(tmp_path, text_file, capsys):
    out = tmp_path / "conv" / "results.md"
    (tmp_path / "store").mkdir()
    rc = main(["report", "--converged", "--collect", "--store", str(tmp_path / "store"), "--corpus-file",
               str(text_file), "--only", "ts-50k", "--out", str(out), "--no-png"])
    assert rc == 0
    md = out.read_text(encoding="utf-8")
    assert "**0 of" in md and "tuning: 0 of 4 short runs" in md
    assert json.loads((out.parent / "results" / "results.json").read_text())["kind"] == "converged"


@pytest.mark.parametrize("argv, message", [
    (["--converged", "--steps", "5"], "--converged has its own protocol: drop --steps"),
    (["--collect"], "--collect, --max-jobs, --device, --speed, --restore, --dry-run, --records and --hours go"),
    (["--device", "cuda"], "--collect, --max-jobs, --device, --speed, --restore, --dry-run, --records and --hours go"),
    (["--restore", "x.json"], "--collect, --max-jobs, --device, --speed, --restore, --dry-run, --records and --hours go"),
    (["--converged", "--collect", "--restore", "missing.json"], "--restore missing.json: cannot read it"),
    (["--converged", "--collect", "--only", "word-problem"], "unknown comparisons"),
    (["--converged", "--collect", "--only", ","], "--only needs at least one comparison key"),
    (["--converged", "--max-jobs", "0"], "--max-jobs: must be an integer from 1"),
    (["--converged", "--collect"], "/s does not exist: no campaign has run there (nothing to collect"),
    (["--converged", "--collect", "--store", ".", "--device", "cpu"], "--collect and --dry-run train nothing"),
    (["--quick", "--campaign", "fair"], "--campaign runs or collects a campaign under its own protocol: drop --quick"),
    (["--page", "--campaign", "fair"], "--campaign runs or collects a campaign under its own protocol: drop --page"),
    (["--campaign", "fair", "--dry-run", "--collect"], "--collect writes the report and --dry-run prints the plan"),
    (["--campaign", "fair", "--collect", "--restore", "docs/results/runs/converged/results/results.json"],
     "restores the converged campaign only; the fair campaign restores from its records file"),
    (["--campaign", "fair", "--hours", "1", "--records", "README.md/r.jsonl"],
     "--records README.md/r.jsonl: README.md is a file, so no folder can be made there"),
])
def test_cli_refuses_mixed_options(tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(REPO)  # the committed report named above, read-only
    assert main(["report", *argv, "--store", str(tmp_path / "s"), "--out", str(tmp_path / "r.md")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "dispatch"])
def test_a_store_under_a_file_is_refused_before_anything_runs(tmp_path, capsys, dry):
    (tmp_path / "f").write_text("x")
    argv = ["report", "--campaign", "fair", "--store", str(tmp_path / "f" / "s"), "--no-png"]
    assert main(argv + (["--dry-run"] if dry else ["--hours", "1", "--out", str(tmp_path / "r.md")])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --store {tmp_path / 'f' / 's'}: {tmp_path / 'f'} is a file, not a folder"), err
    assert not (tmp_path / "r.md").exists()


def test_slurm_without_a_cluster_is_one_line(tmp_path, capsys):
    import shutil

    pytest.importorskip("submitit")
    if shutil.which("srun"):
        pytest.skip("a SLURM node: submitit finds its cluster")
    assert main(["report", "--campaign", "fair", "--executor", "slurm", "--store", str(tmp_path / "s"),
                 "--only", "ts-50k"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --executor slurm:") and "srun" in err and len(err.strip().splitlines()) == 1


def test_each_campaign_has_its_own_default_store(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--campaign", "fair", "--dry-run"]) == 0
    assert f"ready to start now (store {Path('runs') / 'fair'};" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_the_report_folder_is_not_touched_by_a_refused_call(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--converged", "--lr", "0.1"]) == 2
    assert not (tmp_path / "runs").exists()


def test_outside_ratios_name_each_model_beside_the_papers():
    """Ours per model of the paper's kind at equal steps, each named (not the baseline, not a schedule sized to
    a budget), against the baseline named in the header; the paper's and the re-runs' beside them."""
    from geomlab.report.render import outside_ratios

    def row(label, gap=None, ci=None, **kw):
        return {"label": label, "kind": "grassmann", "baseline": False, "paper": {}, "test_gap": gap,
                "test_gap_ci95": ci, "char_ppl_ratio": None if gap is None else 2 ** gap, **kw}

    c = {"rows": [row("All offsets", 0.05, 0.02, paper={"ppl_ratio": 1.11}), row("Twin", 0.0, baseline=True,
                  kind="grassmann-attn"), row("One offset", -0.015, 0.015),
                  row("One offset at the baseline's CPU budget (4,660 steps)", -0.017, 0.006), row("Later")]}
    text = "\n".join(outside_ratios(c))
    assert "| perplexity ratio (model / Twin) |" in text
    assert "| ours: All offsets | 1.035 (95% CI 1.021 to 1.050)" in text
    assert "| ours: One offset | 0.990 (95% CI 0.979 to 1.000)" in text and "| ours: Later | — |" in text
    assert "CPU budget" not in text and "| ours: Twin" not in text
    for v in ("1.11", "1.23", "1.40", "1.45", "1.43"):
        assert f"| {v} |" in text
    assert "not the paper's quantity" in text


def test_unigram_bpc_is_the_cross_entropy_of_character_frequencies(text_file):
    """Against an independent count: the valid split's mean -log2 of the train split's smoothed frequencies;
    a model is flagged when its valid BPC ends within 0.15 bits of it."""
    from collections import Counter

    from geomlab.data.tasks import unigram_bpc
    from geomlab.training.zoo import make_task

    task = make_task(str(text_file))
    train, valid = task.tokens("train").tolist(), task.tokens("valid").tolist()
    n = Counter(train)
    total = len(train) + task.vocab_size
    expected = -sum(math.log2((n[t] + 1) / total) for t in valid) / len(valid)
    assert unigram_bpc(task) == pytest.approx(expected, rel=1e-9)
    row = {"label": "A", "kind": "lstm", "baseline": True, "near_unigram": True, "tuning": [], "status": "",
           "tuning_steps": 1, "seeds": [], "valid_mean": None, "valid_std": None, "test_mean": None,
           "test_std": None}
    comp = {"title": "t", "corpus": "c", "split": "", "claim": "", "note": "", "unigram_bpc": 4.5, "rows": [row]}
    assert "**Did not train: A ended within 0.15 bits of the unigram (4.500 valid BPC)" in "\n".join(
        converged_comparison(comp))
    row["near_unigram"] = False
    assert "Every model trained" not in "\n".join(converged_comparison(comp))  # nothing finished: no claim
    row["valid_mean"] = 2.0
    assert "Every model trained" in "\n".join(converged_comparison(comp))


def test_the_zoo_models_train_one_seed_after_tuning(tmp_path, text_file):
    """The zoo's extra models (no baseline) get the same tuning and one full-budget seed; the report renders
    them without a gap."""
    plan = tiny(text_file, steps=(("zoo-ts", 8),), lr_from=())
    store = rs.RunStore(tmp_path)
    comp = cp.ZOO_TS
    for arm in comp.arms:
        for _ in range(3):
            for j in cp.tuning_state(plan, store, comp, arm)[0]:
                _fake_outcome(store, j, {1e-3: 3.0, 3e-3: 2.0, 1e-2: 2.5, 3e-2: 2.9}[j.lr])
    full = list(cp.jobs(plan, store))
    n = len(comp.arms)
    tunes = sum(4 * len(plan.warmups_for(comp.key, a.label)) for a in comp.arms)  # the Grassmann tries 2 warm-ups
    assert len(full) == n and {(j.phase, j.lr, j.seed) for j in full} == {("full", 3e-3, 0)}
    results = res.collect(plan, store)
    assert {k: results["progress"][k] for k in ("done", "planned", "untimed_arms")} == {
        "done": tunes, "planned": tunes + n, "untimed_arms": n}  # the fake outcomes carry no CPU time
    assert "Not a comparison" in render_markdown(results)
    from geomlab.report.render import converged_header

    for untimed, words in ((1, "(and 1 model not timed yet)"), (2, "(and 2 models not timed yet)")):
        results["progress"].update(untimed_arms=untimed, cpu_hours_left_timed=1.0)
        assert words in converged_header(results)[2]
    results["progress"].update(untimed_arms=n, cpu_hours_left_timed=0.0)  # no model timed: no "0.0 hours left"
    head = converged_header(results)[2]
    assert "no model timed yet, so no estimate of the CPU hours left" in head and "hours left for" not in head


def test_a_borrowed_lr_waits_for_its_source_and_follows_its_step_down(tmp_path, text_file):
    """An arm of ``lr_from`` is not tuned: it waits until its source arm's lr is decided, then trains its
    seeds at that lr, and steps down with the source's row when a source seed diverged."""
    zoo_lstm = ("zoo-ts", "LSTM, ~100K")
    plan = tiny(text_file, steps=(("ts-50k", 10), ("zoo-ts", 8)), lr_from=((zoo_lstm, ("ts-50k", "LSTM")),))
    store = rs.RunStore(tmp_path)
    arm = next(a for a in cp.ZOO_TS.arms if a.label == zoo_lstm[1])
    row = res.arm_row(plan, store, cp.ZOO_TS, arm)
    assert row["status"] == "waits for the lr of ts-50k / LSTM" and row["planned_seeds"] == [0]
    assert not [j for j in cp.jobs(plan, store) if j.arm is arm]
    src_comp, src = COMPARISONS["ts-50k"], COMPARISONS["ts-50k"].arms[1]
    _tune(plan, store, src_comp, [src], {1e-3: 3.0, 3e-3: 2.8, 1e-2: 2.5, 3e-2: 2.6})
    mine = [j for j in cp.jobs(plan, store) if j.arm is arm]
    assert [(j.phase, j.lr, j.seed, j.steps) for j in mine] == [("full", 1e-2, 0, 8)]
    first = next(j for j in cp.jobs(plan, store) if j.arm is src)
    store.folder(first).mkdir(parents=True, exist_ok=True)
    store.write(first, "outcome.json", {"status": "failed", "error": "step 7: the loss is not finite"})
    assert [j.lr for j in cp.jobs(plan, store) if j.arm is arm] == [3e-3]
    row = res.arm_row(plan, store, cp.ZOO_TS, arm)
    assert row["tuning"] == [] and row["lr"] == 3e-3 and row["tuning_note"] == "lr of ts-50k / LSTM"
    assert "zoo-ts / LSTM, ~100K ← ts-50k / LSTM" in render_markdown(res.collect(plan, store))


def test_a_source_outside_the_campaign_is_refused(text_file):
    plan = tiny(text_file, steps=(("zoo-ts", 8),))  # the default lr_from reads ts-50k and ts-100k
    with pytest.raises(cp.ReportError, match="not an arm of the campaign"):
        plan.borrowed(cp.ZOO_TS, cp.ZOO_TS.arms[0])


def test_full_runs_go_seed_by_seed_across_arms(tmp_path, text_file):
    """Once both arms are tuned, seed 0 of each comes before seed 1 of either (a first paired seed early)."""
    plan = tiny(text_file, steps=(("ts-50k", 8),))
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    _tune(plan, store, comp, comp.arms, {1e-3: 3.0, 3e-3: 2.8, 1e-2: 2.5, 3e-2: 2.6})
    order = [(j.arm.label, j.seed) for j in cp.jobs(plan, store)]
    assert order == [("OSM-RNN O(d)", 0), ("LSTM", 0), ("OSM-RNN O(d)", 1), ("LSTM", 1)]


def test_a_one_seed_row_trains_its_decided_arms_before_the_others_tuning(tmp_path, text_file):
    """In the zoo's row (one seed, nothing to pair) an arm whose lr is borrowed and decided trains at once;
    the other arms' tuning runs come after it."""
    zoo_lstm = ("zoo-ts", "LSTM, ~100K")
    plan = tiny(text_file, steps=(("ts-50k", 10), ("zoo-ts", 8)), lr_from=((zoo_lstm, ("ts-50k", "LSTM")),))
    store = rs.RunStore(tmp_path)
    src_comp = COMPARISONS["ts-50k"]
    _tune(plan, store, src_comp, src_comp.arms, {1e-3: 3.0, 3e-3: 2.8, 1e-2: 2.5, 3e-2: 2.6})
    zoo = [(j.arm.label, j.phase) for j in cp.jobs(plan, store) if j.comp.key == "zoo-ts"]
    assert zoo[0] == ("LSTM, ~100K", "full") and zoo.count(("LSTM, ~100K", "full")) == 1
    assert {p for _, p in zoo[1:]} == {"tune"} and len(zoo) == 1 + sum(
        4 * len(plan.warmups_for("zoo-ts", a.label)) for a in cp.ZOO_TS.arms if a.label != zoo_lstm[1])
    ts50 = [(j.arm.label, j.seed) for j in cp.jobs(plan, store) if j.comp.key == "ts-50k"]
    assert ts50 == [("OSM-RNN O(d)", 0), ("LSTM", 0), ("OSM-RNN O(d)", 1), ("LSTM", 1)]  # paired rows: unchanged


def test_late_arms_come_after_every_other_run(tmp_path, text_file):
    plan = tiny(text_file, steps=(("ts-100k", 8), ("ts-50k", 8)))
    order = [(j.comp.key, j.arm.label) for j in cp.jobs(plan, rs.RunStore(tmp_path))]
    late = ("ts-100k", "OSMFormer O(d), identity mixing")
    assert order[-4:] == [late] * 4 and late not in order[:-4]
    assert order[0][0] == "ts-100k" and ("ts-50k", "LSTM") in order[:-4]


def test_late_entries_keep_their_order_and_a_star_takes_a_whole_comparison(tmp_path, text_file):
    """The scaling points (``"*"``: every arm) wait after the identity-mixing arm, which waits after the rest."""
    late = ("ts-100k", "OSMFormer O(d), identity mixing")
    plan = tiny(text_file, steps=(("ts-scaling", 8), ("ts-100k", 8)), late=(late, ("ts-scaling", "*")))
    order = [(j.comp.key, j.arm.label) for j in cp.jobs(plan, rs.RunStore(tmp_path))]
    n_scaling = 4 * len(COMPARISONS["ts-scaling"].arms)
    assert len(order) == 4 * len(COMPARISONS["ts-100k"].arms) + n_scaling
    assert {k for k, _ in order[-n_scaling:]} == {"ts-scaling"}
    assert order[-n_scaling - 4:-n_scaling] == [late] * 4
    assert {k for k, _ in order[:-n_scaling - 4]} == {"ts-100k"} and late not in order[:-n_scaling - 4]


def test_a_one_lr_grid_is_widened_too(tmp_path, text_file):
    plan = tiny(text_file, lr_grid=(1e-2,), max_widen=1)
    store = rs.RunStore(tmp_path)
    comp, arm = COMPARISONS["ts-50k"], COMPARISONS["ts-50k"].arms[1]
    seen = []
    for _ in range(4):
        pending, results, best, note = cp.tuning_state(plan, store, comp, arm)
        seen += [j.lr for j in pending]
        for j in pending:
            _fake_outcome(store, j, {1e-2: 2.5, 3e-3: 2.6, 3e-2: 2.4}[j.lr])
    assert seen == [1e-2, 3e-3, 3e-2] and best == (3e-2, plan.warmup) and "largest" in note


def test_a_seed_that_diverges_at_the_full_budget_steps_the_row_down(tmp_path, text_file):
    """The tuning's winner diverged on a full-budget seed: every seed of the row trains a half-decade lower,
    and the report says why."""
    plan = tiny(text_file, steps=(("ts-50k", 8),))
    store = rs.RunStore(tmp_path)
    comp, arm = COMPARISONS["ts-50k"], COMPARISONS["ts-50k"].arms[1]
    for j in cp.tuning_state(plan, store, comp, arm)[0]:
        _fake_outcome(store, j, {1e-3: 3.0, 3e-3: 2.8, 1e-2: 2.5, 3e-2: 2.6}[j.lr])
    first = [j for j in cp.jobs(plan, store, ("ts-50k",)) if j.arm is arm]
    assert {j.lr for j in first} == {1e-2}
    job = first[0]
    store.folder(job).mkdir(parents=True, exist_ok=True)
    store.write(job, "outcome.json", {"status": "failed", "error": "step 2675: the gradient norm overflowed"})
    again = [j for j in cp.jobs(plan, store, ("ts-50k",)) if j.arm is arm]
    assert [(j.lr, j.seed) for j in again] == [(3e-3, 0), (3e-3, 1)]
    row = res.arm_row(plan, store, comp, arm)
    assert row["lr"] == 3e-3 and row["tuned_lr"] == 1e-2 and row["status"] == "0 of 2 seeds finished"
    assert row["full_notes"] == ["lr 0.01 diverged at the full budget (seed 0, step 2,675): the seeds train at 0.003"]


def test_a_valid_test_flip_is_said():
    row = {"label": "A", "kind": "osm-rnn", "baseline": False, "tuning": [], "status": "", "tuning_steps": 1,
           "seeds": [0], "valid_mean": 2.33, "valid_std": None, "test_mean": 2.51, "test_std": None,
           "test_gap": -0.05, "paper": {}}
    base = {**row, "label": "B", "baseline": True, "valid_mean": 2.27, "test_mean": 2.56, "test_gap": 0.0}
    comp = {"title": "t", "corpus": "c", "split": "", "claim": "", "note": "", "rows": [row, base]}
    text = "\n".join(converged_comparison(comp))
    assert "The validation split orders them the other way: A +0.060 valid against -0.050 test BPC" in text
    row["valid_mean"] = 2.2
    assert "other way" not in "\n".join(converged_comparison(comp))


def test_the_reading_gives_signed_gaps_with_the_interval_and_the_goal():
    from geomlab.report.render import reading

    base = {"label": "Base", "baseline": True, "seeds": [0, 1, 2], "planned_seeds": [0, 1, 2], "test_mean": 2.5,
            "valid_mean": 2.23}
    row = {"label": "Ours", "baseline": False, "seeds": [0, 1, 2], "planned_seeds": [0, 1, 2], "test_mean": 2.41,
           "valid_mean": 2.21, "test_gap": -0.09, "test_gap_ci95": 0.05, "goal": 2.40,
           "equal_time": {"gap": 0.078, "seconds": 1860.0}}
    comp = {"title": "T", "claim": "The paper says so. More words.", "rows": [row, base]}
    empty = {"title": "U", "claim": "", "rows": [{"label": "B2", "baseline": True, "seeds": []}]}
    text = "\n".join(reading({"comparisons": [comp, empty]}))
    assert ("- **T** (baseline: Base). The paper says so.\n"
            "  - Ours: -0.090 test BPC at equal steps (95% CI -0.140 to -0.040 over 3 seeds), "
            "-0.020 valid; +0.078 valid at equal training time (31 min, the shorter run's training time); the "
            "goal of a test BPC below 2.40 is not reached (2.410).\n") in text
    assert "More words" not in text and "Provisional" not in text and "No result yet: U." in text
    comp["rows"].append({"label": "Later", "baseline": False, "seeds": [], "planned_seeds": [0, 1, 2]})
    text = "\n".join(reading({"comparisons": [comp]}))  # a row not run yet is named, not "provisional"
    assert "\n  - No result yet for Later." in text and "Provisional" not in text
    comp["rows"].pop()
    assert "negative means the model is ahead" in text
    row.update(test_gap_ci95=0.12, test_mean=2.39, seeds=[0, 1], equal_time=None)
    text = "\n".join(reading({"comparisons": [comp]}))
    assert "(95% CI -0.210 to +0.030 over 2 seeds: not distinguishable), -0.020 valid; the goal" in text
    assert "is reached (2.390)" in text
    assert "_Provisional: more seeds to come (2 of the 3 seeds planned finished)._" in text
    # under a seed rule the plan grows: "so far", and the most seeds it may reach
    text = "\n".join(reading({"comparisons": [comp], "protocol": {"seed_rule": [0.02, 8]}}))
    assert ("_Provisional: more seeds to come (2 of the 3 seeds planned so far finished; the seed rule adds seeds "
            "until every gap settles, at most 8)._") in text
    row.update(test_gap_ci95=None, seeds=[0], test_gap=0.2)
    assert "Ours: +0.200 test BPC at equal steps (1 seed, no interval yet)" in "\n".join(
        reading({"comparisons": [comp]}))
    base["test_mean"] = None  # no baseline result: no line, no section
    row.pop("test_gap")
    assert reading({"comparisons": [comp]}) == []


def test_the_provisional_line_is_a_paragraph_of_its_own():
    row = {"label": "A", "kind": "lstm", "baseline": True, "tuning": [], "status": "", "tuning_steps": 1,
           "seeds": [0], "planned_seeds": [0, 1, 2], "valid_mean": 2.0, "valid_std": None, "test_mean": 2.1,
           "test_std": None, "paper": {}}
    lines = converged_comparison({"title": "t", "corpus": "c", "split": "", "claim": "", "note": "", "rows": [row]})
    i = next(k for k, ln in enumerate(lines) if ln.startswith("**Provisional: more seeds to come (1 of the 3 seeds"))
    assert lines[i - 1] == "" and lines[i + 1] == "" and lines[i + 2].startswith("| model")
    # every row alike: one count; rows that differ: each named with its own
    two = {**row, "label": "B", "baseline": False, "test_gap": 0.1}
    comp = {"title": "t", "corpus": "c", "split": "", "claim": "", "note": "", "rows": [row, two]}
    assert ("**Provisional: more seeds to come (1 of the 3 seeds planned so far finished for every model; the seed "
            "rule adds seeds until every gap settles, at most 8); the gaps below compare what has finished so far.**"
            ) in converged_comparison(comp, most=8)
    two["seeds"] = [0, 1]
    assert ("**Provisional: more seeds to come (A 1 of 3, B 2 of 3 finished; the seed rule adds seeds until every "
            "gap settles, at most 8); the gaps below compare what has finished so far.**") in converged_comparison(
        comp, most=8)
    row["baseline"] = False  # the zoo's row: no baseline, no gaps, so no "provisional gaps" line
    assert not any("Provisional" in ln for ln in converged_comparison(
        {"title": "t", "corpus": "c", "split": "", "claim": "", "note": "", "rows": [row]}))


def test_the_speed_benchmark_joins_the_report(tmp_path, text_file, capsys):
    """`bench train --json` writes the rows and settings; `report --converged --speed` shows them as a table
    (the ratios are the benchmark's, not recomputed); a file that is not the benchmark's is refused."""
    bench = tmp_path / "bench.json"
    assert main(["bench", "train", "--quick", "--only", "grassmann", "--json", str(bench)]) == 0
    data = json.loads(bench.read_text())
    assert data["kind"] == "bench-train" and data["batch"] == 4 and data["clock"] == "process CPU"
    (row,) = data["rows"]
    assert row["name"] == "grassmann" and row["base"] == "grassmann-attn" and row["ratio_min"] <= row["ratio_median"]
    store = tmp_path / "s"
    store.mkdir()
    out = tmp_path / "r.md"
    assert main(["report", "--converged", "--collect", "--store", str(store), "--corpus-file", str(text_file),
                 "--speed", str(bench), "--out", str(out), "--no-png"]) == 0
    text = out.read_text()
    assert "## Training speed measured alone (`geomlab bench train`)" in text
    assert f"| grassmann | {row['params']:,} | {row['ms']:.1f} | grassmann-attn |" in text
    assert f"| {row['ratio_median']:.2f} | {row['ratio_min']:.2f} |" in text
    (tmp_path / "bad.json").write_text('{"rows": 3}')
    capsys.readouterr()
    assert main(["report", "--converged", "--collect", "--store", str(store), "--speed",
                 str(tmp_path / "bad.json"), "--out", str(tmp_path / "r2.md")]) == 2
    assert "not a `geomlab bench train --json` file" in capsys.readouterr().err
    assert not (tmp_path / "r2.md").exists()
    assert main(["report", "--quick", "--speed", str(bench), "--out", str(tmp_path / "r3.md")]) == 2


def test_a_corpus_missing_here_is_said_not_left_as_empty_brackets():
    from geomlab.report.render import comparison_section

    c = {"title": "t", "corpus": "tinyshakespeare", "split": "", "claim": "", "note": "A note.", "rows": []}
    text = "\n".join(comparison_section(c, {}))
    assert "Corpus `tinyshakespeare` (not found on this machine, so its split is not shown). A note." in text
    assert "()" not in text


def test_an_arm_can_have_its_own_warmups(tmp_path, text_file):
    """A ``"key / arm label"`` entry tunes that arm over its own warm-ups; the comparison's other arms keep
    the comparison's (the zoo's post-norm Grassmann tries 10% as well)."""
    comp = COMPARISONS["ts-50k"]
    plan = tiny(text_file, warmups=((f"ts-50k / {comp.arms[1].label}", (0.02, 0.1)),))
    store = rs.RunStore(tmp_path)
    grids = {a.label: {(j.lr, j.warmup) for j in cp.tuning_state(plan, store, comp, a)[0]} for a in comp.arms}
    assert {w for _, w in grids[comp.arms[1].label]} == {0.02, 0.1} and len(grids[comp.arms[1].label]) == 8
    assert {w for _, w in grids[comp.arms[0].label]} == {plan.warmup}
    assert cp.CONVERGED.warmups_for("zoo-ts", "Grassmann, no position table, ~100K") == (0.02, 0.1)
    assert cp.CONVERGED.warmups_for("zoo-ts", "OSMFormer U(d), linear mixing") == (cp.CONVERGED.warmup,)


def test_collected_params_are_counted_again_from_the_config():
    # a finished run's recorded count is replaced by today's count of its model config (the torus count was
    # corrected after its run: 93,723 recorded, 7,923 effective); a config that does not build keeps the record
    from geomlab.models import build_model, count_params

    cfg = {"kind": "osmformer", "vocab_size": 66, "group": "T", "d": 26, "n_layers": 2, "mixing": "linear"}
    assert res._effective_params({"config": cfg, "params": 93_723}) == count_params(build_model(cfg)) == 7_923
    assert res._effective_params({"config": {"kind": "no-such-kind"}, "params": 5}) == 5


# ------------------------------------------------------------------------------------------ a new machine
def _finish(store, job, valid, test, points, cpu=30.0):
    """A finished full run with a logged learning curve (``points``: (step, tokens/s, valid BPC))."""
    store.folder(job).mkdir(parents=True, exist_ok=True)
    store.write(job, "outcome.json", {**_outcome(points), "status": "done", "steps": job.steps,
                                      "metrics": {"valid_bpc": valid, "test_bpc": test}, "train_time_s": 9.0,
                                      "cpu_s": cpu, "params": 1234, "params_stored": 1300, "config": {}})


def test_restore_from_a_report_resumes_where_it_stopped(tmp_path, text_file):
    """A store rebuilt from the report's results (:func:`restore`) gives the same report again (tuning, the
    step-down after a diverged seed, seeds, curves, intervals, status) and the same work left to do; a second
    restore writes nothing; a file that is not a converged report is refused."""
    plan = tiny(text_file, steps=(("ts-50k", 12),))
    comp = COMPARISONS["ts-50k"]
    old = rs.RunStore(tmp_path / "old")
    _tune(plan, old, comp, comp.arms, {1e-3: 3.0, 3e-3: 2.0, 1e-2: 2.5, 3e-2: 2.9})
    osm, lstm = comp.arms
    diverged = rs.Job(comp, osm, "full", 3e-3, plan.warmup, 0, 12)
    old.folder(diverged).mkdir(parents=True)
    old.write(diverged, "outcome.json", {"status": "failed", "error": "step 7: the loss is not finite"})
    _finish(old, rs.Job(comp, osm, "full", 1e-3, plan.warmup, 0, 12), 2.4, 2.5,
            [(4, 64.0, 3.0), (8, 32.0, 2.6), (12, 64.0, 2.4)])
    _finish(old, rs.Job(comp, lstm, "full", 3e-3, plan.warmup, 0, 12), 2.2, 2.3, [(4, 128.0, 2.9), (12, 64.0, 2.2)])
    _finish(old, rs.Job(comp, lstm, "full", 3e-3, plan.warmup, 1, 12), 2.3, 2.35, [(4, 128.0, 2.8), (12, 64.0, 2.3)])
    before = res.collect(plan, old)
    new = rs.RunStore(tmp_path / "new")
    assert res.restore(plan, new, json.loads(json.dumps(before))) == 4 + 4 + 1 + 3
    assert res.restore(plan, new, before) == 0
    after = res.collect(plan, new)
    for a, b in zip(before["comparisons"][0]["rows"], after["comparisons"][0]["rows"]):
        for k in ("tuning", "lr", "warmup", "full_notes", "seeds", "valid", "test", "failed_seeds", "status",
                  "test_ci95", "train_time_s", "cpu_s", "params", "params_stored", "late_gain"):
            assert a[k] == b[k], k
        assert [[(s, pytest.approx(t), v) for s, t, v in c] for c in a["curves"]] == b["curves"]
    assert after["comparisons"][0]["rows"][0]["full_notes"] == [
        "lr 0.003 diverged at the full budget (seed 0, step 7): the seeds train at 0.001"]
    assert [j.key for j in cp.jobs(plan, new)] == [j.key for j in cp.jobs(plan, old)] != []
    assert after["progress"]["done"] == before["progress"]["done"]
    for bad in ({"kind": "report"}, []):
        with pytest.raises(ValueError, match="not a converged report"):
            res.restore(plan, new, bad)


def test_cli_restore_then_collect(tmp_path, text_file, capsys):
    """``--restore`` writes the report's finished runs into a new store before collecting it."""
    plan_json = tmp_path / "results.json"
    plan = cp.Campaign(corpus_override=str(text_file))
    comp = COMPARISONS["ts-50k"]
    old = rs.RunStore(tmp_path / "old")
    _tune(plan, old, comp, comp.arms[:1], {1e-3: 3.0, 3e-3: 2.0, 1e-2: 2.5, 3e-2: 2.9})
    plan_json.write_text(json.dumps(res.collect(plan, old, ("ts-50k",))), encoding="utf-8")
    out = tmp_path / "conv" / "results.md"
    rc = main(["report", "--converged", "--collect", "--restore", str(plan_json), "--store", str(tmp_path / "new"),
               "--corpus-file", str(text_file), "--only", "ts-50k", "--out", str(out), "--no-png"])
    assert rc == 0 and "restored 4 finished run(s)" in capsys.readouterr().out
    assert "tuning: 0 of 4 short runs" in out.read_text(encoding="utf-8")  # the LSTM: nothing restored
    assert len(list((tmp_path / "new").glob("**/outcome.json"))) == 4


def test_an_ablation_is_stated_against_what_it_ablates():
    """The paper's "linear mixing helps" was read off two gaps to the Transformer; an arm with ``versus`` now
    gets its own test-BPC difference to the arm it ablates, with the seed-paired interval, in the reading and
    the section's verdict; a ``versus`` naming no row is refused."""
    from geomlab.report.aggregation import ci95, compare_to_baseline, compare_to_versus
    from geomlab.report.render import reading, verdict

    def row(label, test, **kw):
        r = {"label": label, "baseline": False, "seeds": [0, 1, 2], "planned_seeds": [0, 1, 2], "test": test,
             "test_mean": sum(test) / 3, "valid_mean": 2.2, "tokens_per_s_mean": None, "tokens_per_cpu_s": None}
        return {**r, **kw}

    lin = row("Linear", [2.41, 2.42, 2.45])
    ident = row("Identity", [2.63, 2.62, 2.64], versus="Linear")
    base = row("Base", [2.50, 2.49, 2.48], baseline=True)
    rows = [lin, ident, base]
    compare_to_baseline(rows)
    compare_to_versus(rows)
    assert ident["versus_gap"] == pytest.approx(0.2033333, abs=1e-6)
    assert ident["versus_gap_ci95"] == pytest.approx(ci95([0.22, 0.20, 0.19]))
    assert "versus_gap" not in lin and "versus_gap" not in base
    lo, hi = ident["versus_gap"] - ident["versus_gap_ci95"], ident["versus_gap"] + ident["versus_gap_ci95"]
    phrase = f"+0.203 test BPC against Linear (95% CI {lo:+.3f} to {hi:+.3f} over 3 seeds)"
    comp = {"title": "T", "claim": "", "rows": rows}
    assert f"valid; {phrase}." in "\n".join(reading({"comparisons": [comp]}))
    assert f"over 3 seeds); {phrase}." in verdict(comp)
    # one seed of the ablation so far: the gap, no interval; a gap spanning 0 is "not distinguishable"
    one = row("Identity", [2.63], versus="Linear", seeds=[0])
    one["test_mean"] = 2.63
    compare_to_baseline([lin, one, base])
    compare_to_versus([lin, one])
    # (paired with the seed both rows finished, as every gap of the page is)
    assert one["versus_gap"] == pytest.approx(2.63 - 2.41) and one["versus_gap_ci95"] is None
    assert "against Linear (1 seed, no interval yet)" in verdict({"rows": [lin, one, base]})
    close = row("Close", [2.40, 2.44, 2.44], versus="Linear")
    compare_to_baseline([lin, close, base])
    compare_to_versus([lin, close])
    assert "not distinguishable" in verdict({"rows": [lin, close, base]})
    with pytest.raises(ValueError, match="'Typo', which is not another row"):
        compare_to_versus([lin, row("X", [2.5, 2.5, 2.5], versus="Typo")])
    # the campaign's identity-mixing arm names the linear arm, which exists
    from geomlab.report.protocol import COMPARISONS

    arms = {a.label: a for a in COMPARISONS["ts-100k"].arms}
    assert arms["OSMFormer O(d), identity mixing"].versus in arms
    # and the scaling study's ~500K OSMFormer its size-matched Transformer (the baseline is the ~200K one)
    arms = {a.label: a for a in COMPARISONS["ts-scaling"].arms}
    assert arms["OSMFormer O(d) ~500K"].versus == "Transformer ~500K" and not arms["Transformer ~500K"].baseline
