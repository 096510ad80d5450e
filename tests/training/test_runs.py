"""geomlab.training.runs: one run spec, one way to build (task, model, trainer) and run it."""

from __future__ import annotations

import pytest
import torch

from geomlab.live import runner as live
from geomlab.training import runs
from geomlab.training import zoo
from geomlab.data import DataError, LMTask
from geomlab.data.word_problem import WordProblemTask

TINY = dict(kind="lstm", params=2_000, data="word-problem:S3", steps=4, batch_size=2, seq_len=8, lr=3e-3, seed=0)


def test_the_one_set_of_defaults_and_the_presets():
    from geomlab.training.config import Recipe, TrainConfig

    assert runs.RunSpec(**TINY).train_config() == TrainConfig(**{**Recipe().recipe_dict(), **{
        k: v for k, v in TINY.items() if k in ("steps", "batch_size", "seq_len", "lr", "seed")}})
    cfg = runs.RunSpec.preset("app", **TINY).train_config()  # the app's live runs
    assert (cfg.steps, cfg.batch_size, cfg.seq_len, cfg.seed) == (4, 2, 8, 0)
    assert cfg.eval_every == 1 and cfg.eval_tokens == 4096 and cfg.log_every == 1 and cfg.warmup == 0.05
    long = runs.RunSpec.preset("app", **{**TINY, "steps": 1000}).train_config()
    assert long.eval_every == 100 and long.log_every == 10
    app = runs.RunSpec.preset("app")  # the Train page's form starts here
    assert (app.steps, app.batch_size, app.seq_len, app.lr, app.data) == (200, 16, 8, 5e-3, "word-problem:Z5")
    assert (app.eval_every, app.log_every) == (20, 4)
    tuned = runs.RunSpec.preset("app", **TINY, eval_every=0, warmup=0.02, length_curriculum=[(2, 2)]).train_config()
    assert tuned.eval_every == 0 and tuned.warmup == 0.02 and tuned.length_curriculum == ((2, 2),)
    with pytest.raises(ValueError, match="length_curriculum"):
        runs.RunSpec(**TINY, length_curriculum=[(16, 2)]).train_config()
    zoo_spec = runs.RunSpec.preset("zoo", kind="lstm", steps=1000)
    assert (zoo_spec.eval_every, zoo_spec.log_every, zoo_spec.eval_tokens, zoo_spec.nearest_budget) == (200, 50, 16384,
                                                                                                      False)


def test_the_task_follows_the_spec(tmp_path, monkeypatch):
    task = runs.build_task(runs.RunSpec(**TINY))
    assert isinstance(task, WordProblemTask) and task.length == 8 and task.n_eval == runs.N_EVAL
    assert runs.build_task(runs.RunSpec(**{**TINY, "data": "word-problem:S3:5"})).length == 5
    assert runs.build_task(runs.RunSpec(**TINY, eval_sequences=None)).n_eval == 512  # the task's default
    text = runs.build_task(runs.RunSpec(**{**TINY, "data": "text"}, text="abc def " * 40))
    assert isinstance(text, LMTask)
    with pytest.raises(DataError, match="neither a known corpus"):
        runs.build_task(runs.RunSpec(**{**TINY, "data": "no/such/file.txt"}))
    monkeypatch.setenv("GEOMLAB_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "nocache"))
    with pytest.raises(DataError, match="not found"):  # the app's runs never download
        runs.build_task(runs.RunSpec(**{**TINY, "data": "corpus:ptb"}), download=False)


def test_validate_refuses_what_the_app_may_not_ask(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("x" * 500)
    with pytest.raises(runs.RunError, match="data must be"):
        runs.RunSpec(**{**TINY, "data": str(f)}).validate()  # no file of the server's through a request
    with pytest.raises(runs.RunError, match="unknown corpus"):
        runs.RunSpec(**{**TINY, "data": "corpus:nope"}).validate()
    with pytest.raises(runs.RunError, match="bench gp"):
        runs.RunSpec(**{**TINY, "data": "gp"}).validate()  # token models cannot take continuous inputs
    with pytest.raises(runs.RunError, match="data must be"):
        runs.RunSpec(**{**TINY, "data": "task:S3"}).validate()  # not a spelling of the word problem
    assert live.LiveError is runs.RunError


def test_strict_and_nearest_budgets_build_the_same_model_when_the_budget_is_met():
    strict, note = runs.build_model(runs.RunSpec(**TINY, nearest_budget=False), 6)
    near, note2 = runs.build_model(runs.RunSpec(**TINY), 6)
    assert note == note2 == "" and strict.config == near.config
    assert all(torch.equal(a, b) for a, b in zip(strict.state_dict().values(), near.state_dict().values()))
    with pytest.raises(ValueError):  # a budget the kind cannot meet: refused (command line, zoo) ...
        runs.build_model(runs.RunSpec(**TINY, model_overrides={"layers": 3}, nearest_budget=False), 6)
    model, note = runs.build_model(runs.RunSpec(**TINY, model_overrides={"layers": 3}), 6)
    assert "cannot be built with exactly 2,000" in note and model.config["layers"] == 3  # ... or the nearest, noted
    for nearest in (True, False):  # no budget: the kind's default size with the spec's keys
        model, note = runs.build_model(runs.RunSpec(**{**TINY, "params": None}, model_overrides={"hidden": 4},
                                                    nearest_budget=nearest), 6)
        assert model.config["hidden"] == 4 and note == ""


def test_every_caller_trains_the_same_run_from_the_same_description(tmp_path, monkeypatch):
    """The zoo's train_and_evaluate, runs.run and a live run give the same weights for one description."""
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    train = {"warmup": 0.02, "eval_every": 0, "eval_tokens": 16384, "log_every": 4, "final_eval": True}
    spec = runs.RunSpec(**TINY, nearest_budget=False, **train, threads=1)
    direct = runs.run(spec)
    via_zoo = zoo.train_and_evaluate("lstm", zoo.make_task("word-problem:S3:8"), budget=2_000, steps=4,
                                     batch_size=2, seq_len=8, lr=3e-3, seed=0)
    run = live.LiveRun(spec, work_dir=tmp_path / "w").start()
    assert live.wait_for(run, lambda s: not s.active, timeout=120).state == "finished"
    for other in (via_zoo.model, run.model):
        assert all(torch.equal(a, b.to(a.device)) for a, b in zip(direct.model.state_dict().values(),
                                                                   other.state_dict().values()))
    assert direct.metrics == via_zoo.metrics and direct.train_time_s > 0 and direct.tokens_per_s > 0


def test_a_finished_run_whose_validation_rose_says_it_overfits():
    """The finish message names the lowest validation BPC and its step when the run ended more than
    OVERFIT_BPC above it; a run that ended near its best says nothing more."""
    from geomlab.live.run import OVERFIT_BPC, overfit_note

    hist = [{"step": 100, "loss": 3.0}, {"step": 100, "valid_bpc": 5.1}, {"step": 200, "valid_bpc": 4.9},
            {"step": 300, "valid_bpc": 6.2}, {"step": 300, "final": True, "valid_bpc": 6.2, "test_bpc": 6.3}]
    note = overfit_note(hist, "bpc", 6.2)
    assert "lowest, 4.900, at step 200" in note and "overfits" in note
    assert overfit_note(hist, "bpc", 4.9 + OVERFIT_BPC / 2) == ""
    assert overfit_note([], "bpc", 6.2) == "" and overfit_note(hist, "bpc", None) == ""
    from geomlab.live.run import lowest_valid

    assert lowest_valid(hist, "bpc", 6.2) == (200, 4.9) and lowest_valid(hist, "bpc", 4.95) is None


def test_a_runs_label_names_its_data_short_and_its_steps_with_separators():
    """``RunSpec.label``: a registered corpus by its name alone (it heads a narrow select box), a text by its
    file name, a word problem as given; thousands separated."""
    assert runs.RunSpec(kind="lstm", params=50_000, data="corpus:tinyshakespeare", steps=3000).label() == \
        "lstm · 50k · tinyshakespeare · 3,000 steps"
    assert runs.RunSpec(kind="osm-rnn", group="O", params=20_000, data="word-problem:S3", steps=200).label() == \
        "osm-rnn · O · 20k · word-problem:S3 · 200 steps"
    assert runs.RunSpec(kind="lstm", params=500, data="text", text="x" * 99, text_name="notes.txt · 0e0952f6",
                        steps=10).label() == "lstm · 500 · notes.txt · 0e0952f6 · 10 steps"
