"""Tests of the Optuna sweeps (geomlab.training.sweep) and the `sweep` subcommand, on a tiny text and a tiny LSTM."""

from __future__ import annotations

import json
import math

import pytest

from geomlab.training import sweep
from geomlab.commands.cli import main


def _sweep(text_file, out, *extra):
    """A tiny sweep: a ~5K-parameter LSTM, 8 steps of 4 x 16 characters, validation on 256 characters."""
    return main(["sweep", "--model", "lstm", "--params", "5k", "--data", str(text_file), "--steps", "8",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "4", "--eval-tokens", "256",
                 "--sampler-seed", "0", "--out", str(out), *extra])


# ---------------------------------------------------------------------------------------------- search space
def test_parse_search_reads_every_form():
    dims = sweep.parse_search(["lr=log:1e-4:1e-1", "warmup=int:0:500", "config.tau=float:1:10",
                               "config.group=choice:O,SO", "batch_size=choice:8,16"])
    by = {d.key: d for d in dims}
    assert (by["lr"].kind, by["lr"].low, by["lr"].high) == ("log", 1e-4, 1e-1)
    assert by["warmup"].kind == "int" and by["warmup"].target == "train"
    assert by["config.tau"].target == "model" and by["config.tau"].name == "tau"
    assert by["config.group"].choices == ("O", "SO") and by["batch_size"].choices == (8, 16)
    # the text form reads back to the same dimension (it is what the study stores)
    assert sweep.parse_search([d.spec() for d in dims]) == dims
    assert sweep.split_params({"lr": 0.1, "config.tau": 2.0}) == ({"lr": 0.1}, {"tau": 2.0})


@pytest.mark.parametrize("spec, match", [
    ("lr=1e-3", "expects KEY=log:LOW:HIGH"),
    ("lr=log:1e-1:1e-4", "LOW must be below HIGH"),
    ("lr=log:0:1e-1", "above 0"),
    ("lr=log:1e-4", "takes LOW:HIGH"),
    ("lr=log:a:1", "not a number"),
    ("warmup=int:0.5:3", "integers"),
    ("colour=float:0:1", "not a searchable training key"),
    ("seed=int:0:3", "not a searchable training key"),
    ("config.=float:0:1", "config key"),
    ("lr=choice:", "at least one value"),
])
def test_bad_search_specs_are_refused(spec, match):
    with pytest.raises(sweep.SweepError, match=match):
        sweep.parse_search([spec])
    with pytest.raises(sweep.SweepError, match="twice"):
        sweep.parse_search(["lr=log:1e-4:1e-1", "lr=float:0.1:0.2"])


def test_check_space_knows_the_kind_and_the_fixed_keys():
    sweep.check_space(sweep.parse_search(["config.hidden=int:8:32", "lr=log:1e-3:1e-1"]), "lstm")
    with pytest.raises(sweep.SweepError, match="'lstm' has no config key 'tau'"):
        sweep.check_space(sweep.parse_search(["config.tau=float:1:10"]), "lstm")
    with pytest.raises(sweep.SweepError, match="both fixed .--lr. and searched"):
        sweep.check_space(sweep.parse_search(["lr=log:1e-3:1e-1"]), "lstm", {}, {"lr": 0.01})
    with pytest.raises(sweep.SweepError, match="both fixed .--config. and searched"):
        sweep.check_space(sweep.parse_search(["config.hidden=int:8:32"]), "lstm", {"hidden": 16}, {})


def test_bad_search_via_cli_is_one_line_and_trains_nothing(text_file, tmp_path, capsys):
    out = tmp_path / "sweeps"
    assert _sweep(text_file, out, "--search", "lr=log:1e-1") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --search 'lr=log:1e-1'") and err.count("\n") == 1
    assert _sweep(text_file, out, "--search", "config.tau=float:1:10") == 2
    assert "has no config key 'tau'" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())  # nothing written


def test_edge_rule():
    lr = sweep.parse_search(["lr=log:1e-4:1e-1"])[0]
    assert lr.edge(1.1e-4) == "low" and lr.edge(0.09) == "high" and lr.edge(3e-3) is None
    # on the log scale: 1e-2 is two thirds of the way up, not at the edge; 6e-2 is in the top tenth
    assert lr.edge(1e-2) is None and lr.edge(6e-2) == "high"
    w = sweep.parse_search(["warmup=int:0:500"])[0]
    assert w.edge(0) == "low" and w.edge(500) == "high" and w.edge(250) is None
    grid = sweep.parse_search(["lr=choice:1e-3,3e-3,1e-2"])[0]
    assert grid.edge(1e-3) == "low" and grid.edge(1e-2) == "high" and grid.edge(3e-3) is None
    assert sweep.parse_search(["config.group=choice:O,SO"])[0].edge("O") is None  # not numbers: no edge
    found = sweep.edges([lr, w], {"lr": 0.09, "warmup": 250})
    assert [(e["key"], e["edge"]) for e in found] == [("lr", "high")]
    assert "lies at the high edge of the searched range [0.0001, 0.1]" in sweep.edge_lines(found)[0]


def test_direction_follows_the_task():
    from geomlab.data.word_problem import WordProblemTask

    setup = sweep.SweepSetup("lstm", "word-problem:parity:8").for_task(WordProblemTask("parity", length=8))
    assert (setup.metric, setup.direction) == ("accuracy", "maximize")


# ---------------------------------------------------------------------------------------------- sweeps
@pytest.mark.slow
def test_tiny_sweep_writes_storage_and_summary_then_resumes(text_file, tmp_path, capsys):
    out = tmp_path / "sweeps"
    assert _sweep(text_file, out, "--n-trials", "3", "--study-name", "tiny", "--seeds", "2") == 0
    stdout = capsys.readouterr().out
    storage, summary = out / "tiny.journal", out / "tiny.json"
    assert storage.is_file() and summary.is_file()
    data = json.loads(summary.read_text())
    assert data["n_trials"] == 3 and data["states"] == {"complete": 3} and data["direction"] == "minimize"
    values = [t["value"] for t in data["trials"]]
    assert all(math.isfinite(v) and v > 0 for v in values)
    for t in data["trials"]:  # the objective is the mean over the seeds
        assert len(t["seed_values"]) == 2 and t["value"] == pytest.approx(sum(t["seed_values"]) / 2)
        assert 1e-4 <= t["params"]["lr"] <= 1e-1  # the default search: lr, log-uniform
    assert data["best"]["value"] == min(values)
    assert f"best: trial {data['best']['number']}, valid bpc {min(values):.4f}" in stdout
    assert "retrain: python -m geomlab train --model lstm --params 5000" in stdout
    # a second process on the same storage continues the study: the trial count grows, old trials are kept
    assert _sweep(text_file, out, "--n-trials", "2", "--study-name", "tiny", "--seeds", "2") == 0
    assert "(3 earlier trial(s))" in capsys.readouterr().out
    again = json.loads(summary.read_text())
    assert again["n_trials"] == 5 and [t["number"] for t in again["trials"]] == [0, 1, 2, 3, 4]
    assert [t["value"] for t in again["trials"][:3]] == values
    # the same study name with another setup is refused instead of mixing the trials
    assert _sweep(text_file, out, "--n-trials", "1", "--study-name", "tiny", "--seeds", "1") == 2
    assert "made with another setup (differs in: seeds)" in capsys.readouterr().err
    assert json.loads(summary.read_text())["n_trials"] == 5
    # an empty name is refused (it once fell back to the default study silently)
    before = sorted(p.name for p in out.iterdir())
    for empty in ("", "  "):
        assert _sweep(text_file, out, "--n-trials", "1", "--study-name", empty) == 2
        assert "--study-name is empty" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.slow
def test_database_url_storage(text_file, tmp_path, capsys):
    db = tmp_path / "shared" / "study.db"
    db.parent.mkdir()
    assert _sweep(text_file, tmp_path / "sweeps", "--n-trials", "1", "--storage", f"sqlite:///{db}",
                  "--summary", str(tmp_path / "s.json")) == 0
    assert db.is_file() and json.loads((tmp_path / "s.json").read_text())["n_trials"] == 1
    capsys.readouterr()
    assert _sweep(text_file, tmp_path / "sweeps", "--storage", "nosuchdb://x/y") == 2
    assert capsys.readouterr().err.startswith("error: cannot open the storage nosuchdb://x/y")


@pytest.mark.slow
def test_edge_warning_when_the_best_lr_is_at_the_range_edge(text_file, tmp_path, capsys):
    """Learning rates far too small for 8 steps: the largest one wins, and the sweep says the optimum may lie
    above the range."""
    out = tmp_path / "sweeps"
    assert _sweep(text_file, out, "--search", "lr=choice:1e-5,2e-5,4e-5", "--sampler", "grid", "--n-trials", "3",
                  "--study-name", "low") == 0
    stdout = capsys.readouterr().out
    data = json.loads((out / "low.json").read_text())
    assert data["best"]["params"]["lr"] == 4e-5
    assert data["edges"] == [{"key": "lr", "edge": "high", "value": 4e-5, "range": "{1e-05, 2e-05, 4e-05}"}]
    assert "warning: the best lr (4e-05) lies at the high edge of the searched range" in stdout


@pytest.mark.slow
def test_a_diverging_trial_is_recorded_and_the_sweep_goes_on(text_file, tmp_path, capsys):
    out = tmp_path / "sweeps"
    assert _sweep(text_file, out, "--search", "lr=choice:1e36,3e-3", "--sampler", "grid", "--n-trials", "2",
                  "--study-name", "div") == 0
    data = json.loads((out / "div.json").read_text())
    assert data["states"] == {"complete": 1, "diverged": 1}
    bad = next(t for t in data["trials"] if t["state"] == "diverged")
    assert bad["params"]["lr"] == 1e36 and bad["value"] is None
    assert "seed 0: step" in bad["error"] and "non-finite" in bad["error"]
    assert data["best"]["params"]["lr"] == 3e-3
    assert "diverged: seed 0: step" in capsys.readouterr().out
    # a sweep in which every trial diverged says so and exits with status 1
    assert _sweep(text_file, out, "--search", "lr=choice:1e36", "--sampler", "grid", "--n-trials", "1",
                  "--study-name", "all-bad") == 1
    assert "no trial completed" in capsys.readouterr().err


@pytest.mark.slow
def test_a_trial_the_pruner_rejects_stops_early(text_file):
    """train_trial reports the first seed's validations and stops the run when the pruner says so."""
    import optuna

    from geomlab.data.registry import make_task

    class Trial:  # the two calls of optuna.Trial that train_trial makes during training
        def __init__(self):
            self.reported, self.user_attrs = [], {}

        def report(self, value, step):
            self.reported.append((step, value))

        def should_prune(self):
            return True

        def set_user_attr(self, key, value):
            self.user_attrs[key] = value

    setup = sweep.SweepSetup("lstm", str(text_file), 5000, train={"steps": 8, "batch_size": 4, "seq_len": 16,
                                                                   "eval_every": 2, "eval_tokens": 256})
    task = make_task(str(text_file))
    setup.for_task(task)
    trial = Trial()
    with pytest.raises(optuna.TrialPruned, match="pruned at step 4"):
        sweep.train_trial(setup, task, {"lr": 1e-2}, trial, device="cpu", prune_after=4)
    assert [s for s, _ in trial.reported] == [2, 4] and all(math.isfinite(v) for _, v in trial.reported)
    assert trial.user_attrs == {"outcome": "pruned", "pruned_at": 4}
    # without a pruner the same call trains to the end and returns the validation BPC
    value = sweep.train_trial(setup, task, {"lr": 1e-2}, None, device="cpu")
    assert math.isfinite(value) and value > 0


def test_retrain_line_reproduces_the_best_trial_of_a_word_problem_sweep(tmp_path, capsys):
    """A word-problem sweep trains on the length in --data (as `train` does), and its "retrain:" line carries
    that length and the full-precision learning rate: the retrained run has exactly the trial's recipe."""
    import shlex

    from geomlab.checkpoints import io as ckpt

    out = tmp_path / "sweeps"
    lr = 0.012345678901234  # rounded to 6 digits (0.0123457) the retrain was another run
    assert main(["sweep", "--model", "lstm", "--config", "hidden=8", "--data", "word-problem:S3:6", "--steps", "2",
                 "--batch-size", "2", "--eval-every", "0", "--search", f"lr=choice:{lr!r}", "--sampler", "grid",
                 "--n-trials", "1", "--study-name", "wp", "--out", str(out), "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    summary = json.loads((out / "wp.json").read_text())
    assert summary["setup"]["train"]["seq_len"] == 6 and summary["best"]["params"]["lr"] == lr
    (retrain,) = [line[len("retrain: "):] for line in captured.out.splitlines() if line.startswith("retrain: ")]
    argv = shlex.split(retrain)
    assert argv[:3] == ["python", "-m", "geomlab"] and "--seq-len 6" in retrain and f"--lr {lr!r}" in retrain
    assert main([*argv[3:], "--out", str(tmp_path / "runs"), "--name", "again", "--quiet", "--device", "cpu"]) == 0
    c = ckpt.load(tmp_path / "runs" / "again")
    assert c.train_config["lr"] == lr and c.train_config["seq_len"] == 6 and c.card["task"]["length"] == 6
    assert c.card["valid_accuracy"] == pytest.approx(summary["best"]["value"], abs=1e-12)


def test_a_trials_run_spec_trains_the_sweeps_config_and_model():
    """A trial's run spec (geomlab.training.runs) gives exactly the TrainConfig of the sweep's train keys over
    TrainConfig's own defaults (not the run spec's run defaults), and the model of the fixed and searched
    keys at the budget, seeded with the seed."""
    import torch

    from geomlab.training import runs
    from geomlab.models import build_model
    from geomlab.models.budget import resolve_config
    from geomlab.core.rng import seeded
    from geomlab.training.trainer import TrainConfig

    setup = sweep.SweepSetup("lstm", "text", 3000, config={"layers": 1}, train={"steps": 8, "eval_tokens": 256})
    params = {"lr": 2e-3, "warmup": 0.3, "config.dropout": 0.1}
    spec = sweep.trial_spec(setup, params, seed=5, device="cpu")
    want = TrainConfig.from_dict({"steps": 8, "eval_tokens": 256, "lr": 2e-3, "warmup": 0.3, "seed": 5,
                                  "device": "cpu", "final_eval": False})
    assert spec.train_config() == want and want.eval_every == TrainConfig().eval_every
    model, note = runs.build_model(spec, 20)
    with seeded(5):
        ref = build_model(resolve_config("lstm", 20, 3000, {"layers": 1, "dropout": 0.1}))
    assert note == "" and model.config == ref.config and model.config["dropout"] == 0.1
    assert all(torch.equal(v, ref.state_dict()[k]) for k, v in model.state_dict().items())


def test_optimize_records_every_outcome_in_memory():
    """The generic loop: a value, a diverged run, a refused config and a non-finite value each become one
    trial record and the study goes on; an unexpected exception is recorded, then raised."""
    from geomlab.training.trainer import TrainingError

    space = sweep.parse_search(["lr=choice:1,2,3,4"])
    storage = sweep.open_storage(None)
    study = sweep.open_study(storage, "s", "minimize", {"a": 1})

    def objective(params, trial):
        lr = params["lr"]
        if lr == 2:
            raise TrainingError("step 3: the training loss is nan (non-finite); stopped", 3, "loss",
                                kept="the last good checkpoint (step 2) is kept")
        if lr == 3:
            raise ValueError("no width meets the budget")
        return float("inf") if lr == 4 else 0.5

    for lr in (1, 2, 3, 4):
        study.enqueue_trial({"lr": lr})
    sweep.optimize(study, objective, space, n_trials=4)
    recs = sweep.summary(study, space)["trials"]
    assert [(r["state"], r.get("error")) for r in recs] == [
        ("complete", None), ("diverged", "step 3: the training loss is nan (non-finite)"),
        ("invalid", "no width meets the budget"), ("diverged", "the objective is inf (non-finite)")]

    def broken(params, trial):
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        sweep.optimize(study, broken, space, n_trials=1)
    last = sweep.summary(study, space)["trials"][-1]
    assert last["state"] == "failed" and last["error"] == "RuntimeError: out of memory"
    with pytest.raises(sweep.SweepError, match="another setup"):
        sweep.open_study(storage, "s", "minimize", {"a": 2})
