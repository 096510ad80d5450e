"""Tests of the zoo recipes (geomlab.training.zoo), the `zoo` subcommand and the bundled checkpoints."""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

import pytest
import torch

from geomlab.training import zoo
from geomlab.commands.cli import main
from geomlab.models.budget import resolve_config
from helpers.checkpoints import change_one_value

REPO = Path(__file__).resolve().parents[2]
BUNDLED = sorted(p for p in (REPO / "assets" / "checkpoints").iterdir() if p.is_dir())


# ----------------------------------------------------------------------------------------------- recipes
def test_recipes_are_complete_and_unique():
    names = [e.name for e in zoo.ZOO]
    assert len(names) == len(set(names))
    kinds = {e.run.kind for e in zoo.ZOO}
    # the list: OSM-RNN, OSMFormer (O linear, U, torus), CEM, Grassmann, LSTM, Transformer
    assert {"osm-rnn", "osmformer", "cem", "grassmann", "lstm", "transformer"} <= kinds
    groups = {e.run.model_overrides.get("group") for e in zoo.ZOO if e.run.kind == "osmformer"}
    assert {"O", "U", "T"} <= groups
    wp = [e for e in zoo.ZOO if e.run.data.startswith("word-problem:S5")]
    assert {e.run.model_overrides.get("group") for e in wp} == {"O", "T"}
    assert all(sum(k for _, k in e.run.length_curriculum) < e.run.steps for e in wp)  # S5 needs it
    for e in zoo.ZOO:
        r = e.run
        assert r.steps >= 1 and r.batch_size >= 1 and r.seq_len >= 1 and r.lr > 0
        assert r.params or r.model_overrides, e.name
        d = e.to_dict()
        assert json.loads(json.dumps(d)) == d  # JSON-serialisable recipe
        # the card's flat recipe is read from the one run spec
        assert (d["kind"], d["task"], d["budget"], d["config"], d["steps"]) == (
            r.kind, r.data, r.params, r.model_overrides, r.steps)
        assert list(d) == ["name", "title", "description", "kind", "task", "budget", "config", "steps",
                           "batch_size", "seq_len", "lr", "seed", "warmup", "weight_decay", "eval_lengths",
                           "length_curriculum", "notes"]


def test_entries_selection_and_errors():
    first, last = zoo.ZOO[0].name, zoo.ZOO[-1].name
    assert [e.name for e in zoo.entries(f"{first}, {last}")] == [first, last]
    assert [e.name for e in zoo.entries([last])] == [last]
    with pytest.raises(zoo.ZooError, match=f"^unknown zoo entry no-such-model; known: {first}, "):
        zoo.entries("no-such-model")
    with pytest.raises(zoo.ZooError, match="^unknown zoo entries a, b; known: "):
        zoo.entries("a,b")
    assert [e.name for e in zoo.entries(f"bundled/{first}")] == [first]  # as `zoo --list` and the app spell it
    for empty in ("", ",", " , "):  # --only "" listed nothing and advised a rebuild of the whole zoo
        with pytest.raises(zoo.ZooError, match=r"^no zoo entry named \(an empty list\); known: "):
            zoo.entries(empty)


@pytest.mark.parametrize("scale,expected", [(0.5, 750), (0.0001, 1), (2, 3000)])
def test_steps_scale(scale, expected):
    e = zoo.ZooEntry("x", "t", "d", zoo.recipe("lstm", config={"hidden": 8}, steps=1500))
    run = zoo.scaled(e, scale).run
    assert run.steps == expected
    # the values derived from the steps follow them
    assert run.log_every == min(50, expected) and run.eval_every == max(1, expected // 5)
    assert run.train_config().steps == expected


def test_steps_scale_scales_the_length_curriculum():
    e = zoo.ZooEntry("x", "t", "d", zoo.recipe("lstm", config={"hidden": 8}, steps=1000,
                                                length_curriculum=((2, 300), (4, 300))))
    assert zoo.scaled(e, 0.1).run.length_curriculum == ((2, 30), (4, 30))
    assert "--steps-scale 0.1" in zoo.scaled(e, 0.1).notes and zoo.scaled(e, 1).notes == e.notes
    tiny = zoo.scaled(e, 0.001)  # 1 step: only the first phase fits
    assert tiny.run.steps == 1 and tiny.run.length_curriculum == ((2, 1),)
    assert tiny.run.train_config().length_curriculum == ((2, 1),)  # a valid TrainConfig
    assert e.run.steps == 1000 and e.run.length_curriculum == ((2, 300), (4, 300))  # e unchanged


@pytest.mark.parametrize("scale", [0, -1, float("nan"), float("inf"), "2"])
def test_bad_steps_scale(scale):
    e = zoo.ZooEntry("x", "t", "d", zoo.recipe("lstm", config={"hidden": 8}))
    with pytest.raises(zoo.ZooError):
        zoo.scaled(e, scale)


def test_resolve_config_budget_and_explicit():
    from geomlab.models import build_model, count_params

    cfg = resolve_config("lstm", 30, None, {"hidden": 12})
    assert cfg["hidden"] == 12 and cfg["vocab_size"] == 30 and cfg["kind"] == "lstm"
    cfg = resolve_config("lstm", 30, 20_000, {})
    n = count_params(build_model(cfg))
    assert abs(n - 20_000) <= 0.05 * 20_000


def test_transformer_width_adapter_meets_budget():
    """The `transformer` budget rule (a search over ``d_model`` in multiples of ``n_heads``, fewer heads when no
    width fits; geomlab.models.budget.search_width) meets these budgets within the registry's 5% tolerance."""
    from geomlab.models import build_model, count_params

    for vocab, budget in [(65, 104_000), (50, 100_000), (65, 500_000)]:
        cfg = resolve_config("transformer", vocab, budget, {})
        n = count_params(build_model(cfg))
        assert abs(n - budget) <= 0.05 * budget, (vocab, budget, n)


# ----------------------------------------------------------------------------------------------- training
def test_build_entry_lm_writes_a_loadable_card(tmp_path, tiny_text):
    from geomlab.checkpoints import io as ckpt

    text_file = tmp_path / "tiny.txt"
    text_file.write_text(tiny_text, encoding="utf-8")
    run = zoo.recipe("lstm", data=str(text_file), config={"hidden": 16}, steps=4, batch_size=2, seq_len=16, seed=3)
    entry = zoo.ZooEntry("tiny-lstm", "Tiny LSTM", "test", run)
    path = zoo.build_entry(entry, tmp_path / "zoo", log=None)
    c = ckpt.load(path)
    card = c.card
    for key in ("corpus", "split", "steps", "seed", "params_effective", "valid_bpc", "test_bpc", "train_time_s",
                "device", "batch_size", "seq_len", "lr", "recipe"):
        assert key in card, key
    assert card["steps"] == 4 and card["seed"] == 3 and card["recipe"]["name"] == "tiny-lstm"
    assert math.isfinite(card["valid_bpc"]) and math.isfinite(card["test_bpc"])
    assert card["params_effective"] == sum(p.numel() for p in c.model.parameters())
    # the card's BPC is the pipeline's evaluation of the saved weights on the same split
    from geomlab.data import make_task

    task = make_task(str(text_file), vocab=c.vocab)
    again = task.evaluate(c.model, "test", seq_len=16)["bpc"]
    assert again == pytest.approx(card["test_bpc"], abs=1e-3)
    cards = zoo.read_cards(tmp_path / "zoo")
    assert [k["name"] for k in cards] == ["tiny-lstm"]
    assert "tiny-lstm" in zoo.format_card(cards[0])


def make_task_for(path):
    from geomlab.training.zoo import make_task

    return make_task(str(path))


def test_adopt_entry_takes_a_finished_run_of_the_recipe_only(tmp_path, tiny_text, capsys):
    """A finished run of the entry's recipe becomes the entry (same weights and numbers as training the entry
    itself, which the same seed reproduces); a run of another lr, or one stopped early, is refused with the
    difference named, and nothing is written."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.training import runs
    from geomlab.commands.cli import main

    text_file = tmp_path / "tiny.txt"
    text_file.write_text(tiny_text, encoding="utf-8")
    recipe = zoo.recipe("lstm", data=str(text_file), config={"hidden": 16}, steps=6, batch_size=2, seq_len=16,
                        seed=3, eval_every=0)
    entry = zoo.ZooEntry("tiny-lstm", "Tiny LSTM", "test", recipe)
    runs.build(recipe, out=tmp_path / "run").trainer.run()
    adopted = ckpt.load(zoo.adopt_entry(entry, tmp_path / "run", tmp_path / "zoo", log=None))
    trained = ckpt.load(zoo.build_entry(entry, tmp_path / "zoo2", log=None))
    assert adopted.card["test_bpc"] == pytest.approx(trained.card["test_bpc"], abs=1e-6)
    assert adopted.card["recipe"] == trained.card["recipe"] and not adopted.train_state
    other = zoo.ZooEntry("tiny-lstm", "Tiny LSTM", "test", zoo.recipe(
        "lstm", data=str(text_file), config={"hidden": 16}, steps=6, batch_size=2, seq_len=16, seed=3, lr=1e-2))
    with pytest.raises(zoo.ZooError, match="lr: 0.003 .the recipe: 0.01"):
        zoo.adopt_entry(other, tmp_path / "run", tmp_path / "zoo3", log=None)
    assert not (tmp_path / "zoo3").exists()
    # resumed with another lr part-way: the final config is the recipe's, the weights are not
    from geomlab.training.trainer import Trainer

    part = runs.build(zoo.recipe("lstm", data=str(text_file), config={"hidden": 16}, steps=6, batch_size=2,
                                 seq_len=16, seed=3, eval_every=3, lr=0.1), out=tmp_path / "mixed").trainer
    part.add_callback(lambda p: part.stop() if p.event == "eval" else None)
    part.run()
    Trainer.from_checkpoint(tmp_path / "mixed", make_task_for(text_file), overrides={"lr": 3e-3}).run()
    with pytest.raises(zoo.ZooError, match="resumed with other training values .lr at step 3"):
        zoo.adopt_entry(entry, tmp_path / "mixed", tmp_path / "zoo4", log=None)
    strided = zoo.recipe("lstm", data=str(text_file), config={"hidden": 16}, steps=6, batch_size=2, seq_len=16,
                         seed=3, eval_every=0)
    strided.eval_stride = 4
    runs.build(strided, out=tmp_path / "strided").trainer.run()
    with pytest.raises(zoo.ZooError, match="not the full splits in windows of 16"):
        zoo.adopt_entry(entry, tmp_path / "strided", tmp_path / "zoo5", log=None)
    with pytest.raises(zoo.ZooError, match="is not a run's checkpoint folder"):
        zoo.adopt_entry(entry, tmp_path / "missing", tmp_path / "zoo6", log=None)
    (tmp_path / "afile").write_text("x")
    assert main(["zoo", "--rebuild", "--only", "lstm-tinyshakespeare", "--from-run", str(tmp_path / "run"),
                 "--dir", str(tmp_path / "afile")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["zoo", "--rebuild", "--from-run", str(tmp_path / "run")]) == 2
    assert "--from-run needs --rebuild and exactly one entry" in capsys.readouterr().err


def test_build_entry_word_problem_records_accuracy_by_length(tmp_path):
    run = zoo.recipe("lstm", data="word-problem:Z5:8", config={"hidden": 8}, steps=3, batch_size=4, seq_len=8)
    entry = zoo.ZooEntry("tiny-wp", "wp", "test", run, eval_lengths=(2, 4, 16))
    path = zoo.build_entry(entry, tmp_path, log=None)
    from geomlab.checkpoints import io as ckpt

    assert path == tmp_path / "tiny-wp"  # a checkpoint folder
    card = ckpt.read_meta(path)["card"]
    acc = card["accuracy_by_length"]
    assert set(acc) == {"2", "4", "16"}
    assert all(0.0 <= v <= 1.0 for v in acc.values())
    assert 0.0 <= card["test_accuracy"] <= 1.0


def test_accuracy_by_length_matches_an_independent_count():
    """An oracle that outputs the true running product scores 1 at every length; a constant model scores
    exactly the frequency of its constant among the final labels."""
    from geomlab.data.word_problem import WordProblemTask

    task = WordProblemTask("S3", length=6, n_eval=64, seed=5)

    class Oracle(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.one_hot(task.group.running_product(x), 6).float()

    class Const(torch.nn.Module):
        def forward(self, x):
            out = torch.zeros(*x.shape, 6)
            out[..., 2] = 1.0
            return out

    assert zoo.accuracy_by_length(Oracle(), task, [3, 6, 12]) == {3: 1.0, 6: 1.0, 12: 1.0}
    for n in (3, 12):
        _, y = task.eval_set("test", n)
        expected = float((y[:, -1] == 2).float().mean())
        assert zoo.accuracy_by_length(Const(), task, [n])[n] == pytest.approx(expected)


def test_cli_zoo_list_and_recipes(tmp_path, capsys, tiny_text):
    assert main(["zoo", "--list", "--dir", str(tmp_path)]) == 1  # empty folder
    assert "no checkpoints" in capsys.readouterr().out
    assert main(["zoo", "--recipes"]) == 0
    out = capsys.readouterr().out
    assert all(e.name in out for e in zoo.ZOO)
    s5 = next(line for line in out.splitlines() if line.startswith("osm-rnn-o-s5:"))
    assert "length curriculum: 1500 at length 2" in s5  # the key to the S5 result is shown
    assert main(["zoo", "--recipes", "--only", "nope"]) == 2  # readable error, no traceback
    card = next((c for c in zoo.read_cards() if c.get("name") == "osm-rnn-o-s5"), None)
    if card is not None:  # the bundled S5 card lists its curriculum too
        assert "the first 6000 steps a length curriculum" in zoo.format_card(card)
        assert f"test {card['test_accuracy']:.3f} accuracy" in zoo.format_card(card)



def _train_cli_run(text_file, out: Path, name: str) -> Path:
    assert main(["train", "--model", "lstm", "--config", "hidden=8", "--data", str(text_file), "--steps", "2",
                 "--batch-size", "2", "--seq-len", "8", "--eval-every", "2", "--eval-tokens", "50", "--device",
                 "cpu", "--threads", "1", "--lr", "0.007", "--out", str(out), "--name", name, "--quiet"]) == 0
    return out / name


def test_zoo_list_shows_a_cli_runs_lr_and_threads_and_a_damaged_one(tmp_path, capsys, text_file):
    """A run of `geomlab train` records its lr in its recipe (train_config) and its threads in its card: the
    listing shows both; a checkpoint whose weights changed since the save is said to be so, with the command
    that records the sum of weights changed on purpose, which then makes it load."""
    run = _train_cli_run(text_file, tmp_path / "runs", "w")
    capsys.readouterr()
    assert main(["zoo", "--list", "--dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "lr 0.007, seed 0;" in out and "on cpu (1 thread)" in out, out
    assert "lr None" not in out and "?" not in out
    assert "changed since saved" not in out
    change_one_value(run / "model.safetensors")
    assert main(["zoo", "--list", "--dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "changed since saved" in x)
    assert "w/model.safetensors changed since it was written" in line and "sha256 checked on load" not in out
    assert line.endswith(f"`geomlab zoo --accept-weights {run}`")
    assert "refer to it as" not in out and "geomlab eval" not in out  # it would not load
    assert main(["eval", str(run), "--data", str(text_file), "--device", "cpu"]) == 2  # refused
    assert main(["zoo", "--accept-weights", str(run)]) == 0
    assert f"recorded the sha256 of {run}'s weights" in capsys.readouterr().out
    assert main(["zoo", "--list", "--dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "changed since saved" not in out and f"refer to it as {run}" in out
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert f"  metrics from before the weights were changed on {today}\n" in out
    assert main(["eval", str(run), "--data", str(text_file), "--device", "cpu"]) == 0
    assert main(["zoo", "--accept-weights", str(run)]) == 0
    assert "already have the recorded sha256; nothing changed" in capsys.readouterr().out


def test_zoo_list_of_a_missing_folder_says_so(tmp_path, capsys):
    assert main(["zoo", "--list", "--dir", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().out.strip() == f"no folder {tmp_path / 'none'}"
    (tmp_path / "empty").mkdir()
    assert main(["zoo", "--list", "--dir", str(tmp_path / "empty")]) == 1
    assert capsys.readouterr().out.strip() == f"no checkpoints in {tmp_path / 'empty'}; run `geomlab zoo --rebuild`"


def test_zoo_convert_skips_and_names_a_damaged_checkpoint(tmp_path, capsys, text_file):
    """--convert converts what it can (a folder whose geomlab.json records no weights sum among them), skips a
    damaged checkpoint with its reason and exits 1 naming it."""
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        _train_cli_run(text_file, runs, name)
    meta = json.loads((runs / "b" / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]
    (runs / "b" / "geomlab.json").write_text(json.dumps(meta))
    change_one_value(runs / "a" / "model.safetensors")
    capsys.readouterr()
    assert main(["zoo", "--convert", "--dir", str(runs)]) == 1
    out, err = capsys.readouterr()
    assert "skipped a: a/model.safetensors changed since it was written" in out
    assert f"converted b -> {runs / 'b'}" in out and f"converted 1 checkpoint(s) in {runs}" in out
    assert err.strip() == "skipped 1 checkpoint(s), left as they were (the reasons above): a"
    assert "model.safetensors" in json.loads((runs / "b" / "geomlab.json").read_text())["files"]


# ----------------------------------------------------------------------------------------------- bundled
@pytest.mark.skipif(not BUNDLED, reason="no bundled checkpoints yet")
@pytest.mark.parametrize("json_path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_bundled_checkpoint_loads_with_a_full_card(json_path):
    from geomlab.checkpoints import io as ckpt

    assert sum(p.stat().st_size for p in json_path.iterdir()) < 4 * 2**20
    c = ckpt.load(json_path)
    card = c.card
    for key in ("corpus", "split", "steps", "seed", "params_effective", "train_time_s", "device", "recipe"):
        assert key in card, key
    recipe = {e.name: e for e in zoo.ZOO}.get(json_path.stem)
    assert recipe is not None, f"{json_path.name} has no recipe in geomlab.training.zoo.ZOO"
    assert card["recipe"]["kind"] == c.model.config["kind"] == recipe.run.kind
    from geomlab.models import count_params

    assert card["params_effective"] == count_params(c.model)  # the card's size is today's count of its model
    # the card carries the entry's recipe as geomlab.training.zoo defines it now (title, description, notes included):
    # an edited entry whose checkpoint was not rewritten (zoo --rebuild --only NAME [--from-run]) shows here
    want = json.loads(json.dumps(recipe.to_dict()))
    assert {k: want[k] for k in card["recipe"]} == card["recipe"]
    assert set(want) - set(card["recipe"]) <= {"length_curriculum"}  # S3 pair: written before that key existed
    if recipe.run.data.startswith("word-problem"):
        assert 0 <= card["test_accuracy"] <= 1 and card["accuracy_by_length"]
    else:
        assert 0 < card["valid_bpc"] < 8 and 0 < card["test_bpc"] < 8
    x = torch.randint(0, c.model.config["vocab_size"], (1, 12))
    assert torch.isfinite(c.model(x)).all()


def test_bundled_zoo_is_small():
    total = sum(p.stat().st_size for p in (REPO / "assets" / "checkpoints").rglob("*") if p.is_file())
    assert total < 16 * 2**20


_S3 = REPO / "assets" / "checkpoints" / "osm-rnn-o-s3"
_S3T = REPO / "assets" / "checkpoints" / "osm-rnn-torus-s3"
_S5 = REPO / "assets" / "checkpoints" / "osm-rnn-o-s5"
_S5T = REPO / "assets" / "checkpoints" / "osm-rnn-torus-s5"


@pytest.mark.skipif(not (_S3.is_dir() and _S3T.is_dir()), reason="S3 zoo pair not bundled")
def test_bundled_s3_pair_non_abelian_state_tracks_what_the_torus_cannot():
    """Recomputed from the weights on fresh evaluation sequences (not read from the cards): the O(4)
    OSM-RNN tracks the S3 running product at its training length; the abelian torus model does not."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.data.word_problem import WordProblemTask

    task = WordProblemTask("S3", length=16, n_eval=256, seed=99)
    acc_o = zoo.accuracy_by_length(ckpt.load(_S3).model, task, [4, 16])
    acc_t = zoo.accuracy_by_length(ckpt.load(_S3T).model, task, [4, 16])
    assert acc_o[4] > 0.95 and acc_o[16] > 0.95, acc_o
    assert acc_t[16] < 0.6, acc_t


@pytest.mark.skipif(not (_S5.is_dir() and _S5T.is_dir()), reason="S5 zoo pair not bundled")
def test_bundled_s5_pair_o5_tracks_s5_and_the_torus_cannot():
    """The issue's pair, recomputed from the weights on fresh sequences: the O(5) OSM-RNN tracks the S5
    running product (120 elements, non-solvable) at its training length; the abelian torus stays near
    chance (1/120), since commuting states can follow only the sign of the permutation."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.data.word_problem import WordProblemTask

    task = WordProblemTask("S5", length=32, n_eval=256, seed=99)
    acc_o = zoo.accuracy_by_length(ckpt.load(_S5).model, task, [8, 32])
    acc_t = zoo.accuracy_by_length(ckpt.load(_S5T).model, task, [8, 32])
    assert acc_o[8] > 0.95 and acc_o[32] > 0.85, acc_o
    assert acc_t[8] < 0.1 and acc_t[32] < 0.1, acc_t
    card = ckpt.load(_S5).card
    assert card["recipe"]["length_curriculum"] and card["accuracy_by_length"]["32"] > 0.85


_GRASS = REPO / "assets" / "checkpoints" / "grassmann-tinyshakespeare"


@pytest.mark.skipif(not _GRASS.is_dir(), reason="Grassmann zoo model not bundled")
def test_bundled_grassmann_traces_a_text_of_the_apps_full_length():
    """the bundled Grassmann model reads any text up to the app's limit (2,048 characters;
    a learned table of 128 positions could not), and the traced logits are the model's own on that text."""
    import numpy as np

    from geomlab.checkpoints import io as ckpt
    from geomlab.trace import MAX_TEXT_CHARS, encode_text, trace_text

    c = ckpt.load(_GRASS)
    assert c.model.config["positions"] == "sinusoidal" == c.card["recipe"]["config"]["positions"]  # any length
    chars = [t for t in c.vocab.tokens if t != c.vocab.unk]
    rng = np.random.default_rng(0)
    text = "".join(rng.choice(chars, size=MAX_TEXT_CHARS))
    assert len(text) == MAX_TEXT_CHARS == 2048
    tr = trace_text(c.model, c.vocab, text)
    assert tr.n_positions == MAX_TEXT_CHARS
    with torch.no_grad():
        expected = c.model(encode_text(c.vocab, text))[0].numpy()
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(np.asarray(tr.logits, dtype=np.float64), expected, rtol=0, atol=1e-5)


_LM_BUNDLED = [p for p in BUNDLED if not p.stem.endswith(("-s3", "-s5"))]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("json_path", _LM_BUNDLED, ids=[p.stem for p in _LM_BUNDLED])
def test_bundled_card_bpc_matches_its_weights(json_path):
    """The card's test BPC is what the current model code computes from the stored weights on the whole
    test split (catches a model change that silently invalidates a bundled checkpoint)."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.data import make_task

    torch.set_num_threads(1)
    c = ckpt.load(json_path)
    task = make_task(c.card["corpus"], vocab=c.vocab)
    got = task.evaluate(c.model, "test", seq_len=int(c.card["seq_len"]))["bpc"]
    assert got == pytest.approx(c.card["test_bpc"], abs=2e-3)
