"""Checkpoint folders ``NAME/`` in Hugging Face's layout (``config.json``,
``model.safetensors``, ``README.md``, ``geomlab.json``): round trip, the model card's front matter, old flat
pairs, one readable error per broken folder, the catalog, uploads, resume. The kill tests for folders are in
``test_checkpoint_files.py`` (parametrized over both layouts)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from geomlab.checkpoints import catalog, uploads
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model

TEXT = "the quick brown fox jumps over the lazy dog"
VOCAB = Vocab.from_text(TEXT)
FILES = ["README.md", "config.json", "geomlab.json", "model.safetensors", "vocab.json"]
#: A folder with resumable training state has two more files.
STATE_FILES = sorted(FILES + ["training_state.json", "training_state.safetensors"])
CARD = {"corpus": "tiny", "steps": 7, "valid_bpc": 3.25, "test_bpc": 3.5, "description": "a test model"}


def _model(hidden: int = 8, seed: int = 0):
    torch.manual_seed(seed)
    return build_model({"kind": "lstm", "vocab_size": VOCAB.size, "hidden": hidden, "embedding_dim": 4})


def _save(folder: Path, hidden: int = 8, seed: int = 0, **kw) -> Path:
    return ckpt.save(folder, _model(hidden, seed), VOCAB, dict(CARD), layout="folder", **kw)


def _front_matter(readme: Path) -> dict:
    text = readme.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


# ------------------------------------------------------------------------------------------- round trip
def test_folder_round_trip(tmp_path):
    model = _model()
    state = {"tensors": {"optim.0.step": torch.tensor(3.0)}, "json": {"step": 3}}
    folder = ckpt.save(tmp_path / "runs" / "run", model, VOCAB, dict(CARD), train_config={"steps": 7},
                       metrics=[{"step": 1, "loss": 4.0}], train_state=state, layout="folder")
    assert folder == tmp_path / "runs" / "run" and sorted(p.name for p in folder.iterdir()) == STATE_FILES
    config = json.loads((folder / "config.json").read_text())
    meta = json.loads((folder / "geomlab.json").read_text())
    assert config == model.config  # config.json is exactly the model config
    assert "model_config" not in meta and meta["format_version"] == 3 == ckpt.FORMAT_VERSION
    assert meta["files"]["config.json"]["sha256"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    for path in (folder, *(folder / n for n in STATE_FILES)):  # the folder, or any file in it
        c = ckpt.load(path)
        assert c.path == folder and c.layout == "folder"
        assert c.model_config == model.config and c.vocab == VOCAB and c.card["valid_bpc"] == 3.25
        x = torch.randint(0, VOCAB.size, (2, 9))
        assert torch.equal(c.model(x), model.eval()(x))
    assert c.train_config == {"steps": 7} and c.metrics == [{"step": 1, "loss": 4.0}]
    assert c.train_state["json"] == {"step": 3} and "optim.0.step" in c.train_state["tensors"]
    assert ckpt.read_meta(folder)["model_config"] == model.config  # the cheap reader composes the same
    raw = (folder / "model.safetensors").read_bytes()
    assert raw[8:9] == b"{" and b"\x80\x04" not in raw[:16]  # safetensors, not a pickle


def test_model_card_front_matter_is_yaml_with_kind_parameters_dataset_metrics(tmp_path):
    from huggingface_hub import metadata_load

    folder = _save(tmp_path / "card-test")
    front = _front_matter(folder / "README.md")
    assert front == metadata_load(folder / "README.md")  # Hugging Face reads the same (offline)
    assert front["library_name"] == "geomlab" and front["model_kind"] == "lstm" and "lstm" in front["tags"]
    n = sum(p.numel() for p in _model().parameters())
    assert front["parameters"] == {"effective": n, "stored": n}
    assert front["dataset"] == "tiny" and front["datasets"] == ["tiny"]
    assert front["metrics"] == ["bpc"]
    (index,) = front["model-index"]
    got = {(r["dataset"]["split"], m["type"]): m["value"] for r in index["results"] for m in r["metrics"]}
    assert index["name"] == "card-test" and got == {("validation", "bpc"): 3.25, ("test", "bpc"): 3.5}
    body = (folder / "README.md").read_text().split("---\n", 2)[2]
    assert "# card-test" in body and "a test model" in body and "valid bpc: 3.2500" in body


def test_word_problem_card_says_accuracy_and_its_task(tmp_path):
    card = {"corpus": "word-problem:S3", "task": {"task": "word-problem", "group": "S3"}, "valid_accuracy": 0.5}
    folder = ckpt.save(tmp_path / "wp", _model(), VOCAB, card, layout="folder")
    front = _front_matter(folder / "README.md")
    assert front["metrics"] == ["accuracy"]
    assert front["model-index"][0]["results"][0]["task"]["type"] == "token-classification"


def test_old_flat_pairs_load_and_stay_flat(tmp_path):
    flat = ckpt.save(tmp_path / "old", _model(), VOCAB, dict(CARD))  # the default layout is the flat pair
    assert flat == tmp_path / "old.json" and json.loads(flat.read_text())["format_version"] == 1
    c = ckpt.load(tmp_path / "old")
    assert c.layout == "flat" and c.path == flat
    assert ckpt.layout_of(tmp_path / "old") == "flat" and ckpt.layout_of(tmp_path / "new") == "folder"
    assert ckpt.save(tmp_path / "old", _model(seed=1), VOCAB, {}, layout="auto") == flat  # not converted
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json", "old.safetensors"]
    bundled = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
    for p in sorted(bundled.glob("*.json"))[:2]:  # the bundled flat pairs, by stem too
        assert ckpt.load(p.with_suffix("")).layout == "flat"


def test_a_folder_wins_over_a_flat_pair_of_its_name_only_when_it_is_a_checkpoint(tmp_path):
    ckpt.save(tmp_path / "x", _model(), VOCAB, {"which": "flat"})
    (tmp_path / "x").mkdir()  # an ordinary folder of the same name: the flat pair is meant
    assert ckpt.load(tmp_path / "x").layout == "flat"
    ckpt.save(tmp_path / "x", _model(), VOCAB, {"which": "folder"}, layout="folder")
    assert ckpt.load(tmp_path / "x").card["which"] == "folder"
    assert ckpt.load(tmp_path / "x.json").card["which"] == "flat"


# ------------------------------------------------------------------------------------------- bad folders
def _copy_config_from_other_save(folder: Path, tmp_path: Path) -> None:
    other = _save(tmp_path / "other", hidden=9)
    shutil.copy(other / "config.json", folder / "config.json")


def _edit_config(folder: Path, tmp_path: Path) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "hidden": 9}))


def _weights_from_other_save(folder: Path, tmp_path: Path) -> None:
    other = _save(tmp_path / "other", seed=1)
    shutil.copy(other / "model.safetensors", folder / "model.safetensors")


def _truncate(name: str):
    def go(folder: Path, tmp_path: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])
    return go


@pytest.mark.parametrize("break_it, message", [
    (lambda f, t: (f / "geomlab.json").unlink(), "geomlab.json is missing"),
    (lambda f, t: (f / "model.safetensors").unlink(), "model.safetensors is missing"),
    (lambda f, t: (f / "config.json").unlink(), "config.json cannot be read"),
    (_truncate("model.safetensors"), "run/model.safetensors is truncated"),
    (_truncate("geomlab.json"), "run/geomlab.json is not valid JSON"),
    (_truncate("config.json"), "run/config.json is not valid JSON"),
    (_copy_config_from_other_save, "run/config.json does not belong with run/geomlab.json"),
    (_edit_config, "edited by hand"),
    (_weights_from_other_save, "two different saves"),
    (lambda f, t: [p.unlink() for p in f.iterdir()], "is a folder but not a checkpoint"),
])
def test_a_broken_folder_is_one_readable_error(tmp_path, monkeypatch, break_it, message):
    folder = _save(tmp_path / "run")
    break_it(folder, tmp_path)
    with pytest.raises(CheckpointError, match=message) as info:
        ckpt.load(folder)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    if "model.safetensors" not in message:  # the cheap reader (the description only) refuses it too
        with pytest.raises(CheckpointError):
            ckpt.read_meta(folder)
    if message != "run/model.safetensors is truncated":  # the listing reads the weights' header only
        monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path))
        assert "runs/run" not in {e.ref for e in catalog.list_checkpoints(bundled=False)}  # nor listed


def test_an_interrupted_folder_save_is_listed_new_and_finished_by_the_loader(tmp_path, monkeypatch):
    """The weights were renamed into the folder, every other file still in its journal: the catalog reads
    the new save (read-only) and the loader finishes it."""
    folder = _save(tmp_path / "ck", hidden=8)
    new = _save(tmp_path / "new", hidden=9)
    sid = json.loads((new / "geomlab.json").read_text())["save_id"]
    journals = {n: folder / f".{n}.{sid}.next" for n in ("geomlab.json", "config.json", "README.md")}
    for n, j in journals.items():
        os.replace(new / n, j)
    os.replace(new / "model.safetensors", folder / "model.safetensors")
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path))
    (entry,) = [e for e in catalog.list_checkpoints(bundled=False) if e.name == "ck"]
    assert entry.model_config["hidden"] == 9 and all(j.exists() for j in journals.values())
    assert ckpt.load(folder).model_config["hidden"] == 9
    assert not any(j.exists() for j in journals.values())
    assert json.loads((folder / "config.json").read_text())["hidden"] == 9
    assert _front_matter(folder / "README.md")["model-index"][0]["name"] == "new"  # the new card, in place


def test_exclusive_folder_save_never_replaces(tmp_path):
    folder = _save(tmp_path / "ck")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(ckpt.CheckpointExistsError, match="ck/ already exists"):
        _save(tmp_path / "ck", seed=1, exclusive=True)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# ------------------------------------------------------------------------------------------- catalog

def test_the_catalog_lists_and_resolves_folders(dirs, tmp_path):
    bundled, runs = dirs
    _save(bundled / "b-folder")
    ckpt.save(bundled / "b-flat", _model(), VOCAB, dict(CARD))
    _save(runs / "sweep" / "a")
    _save(runs / "both")
    ckpt.save(runs / "both", _model(), VOCAB, {"which": "flat"})  # hidden by the folder of its name
    listed = {e.ref: e for e in catalog.list_checkpoints()}
    assert set(listed) == {"bundled/b-folder", "bundled/b-flat", "runs/sweep/a", "runs/both"}
    e = listed["runs/sweep/a"]
    assert e.folder and e.name == "a" and e.path == runs / "sweep" / "a" and e.weights.name == "model.safetensors"
    assert e.kind == "lstm" and e.valid_bpc == 3.25 and e.corpus == "tiny" and e.steps == 7
    assert listed["runs/both"].folder and "which" not in listed["runs/both"].card
    for ref, entry in listed.items():
        assert catalog.resolve(ref).path == entry.path
        assert ckpt.load(entry.path).model is not None
    before = catalog.signature()
    ckpt.save(runs / "sweep" / "a", _model(seed=2), VOCAB, dict(CARD), layout="folder")
    assert catalog.signature() != before  # a re-save is seen


def test_the_catalog_never_follows_a_symlinked_folder_or_file(dirs, tmp_path):
    _, runs = dirs
    real = _save(tmp_path / "elsewhere")
    (runs / "linked").symlink_to(real, target_is_directory=True)
    inside = runs / "inside"
    inside.mkdir()
    for n in FILES:
        (inside / n).symlink_to(real / n)
    assert catalog.list_checkpoints() == []
    for ref in ("runs/linked", "runs/inside"):
        with pytest.raises(catalog.CatalogError, match="symlink|no checkpoint"):
            catalog.resolve(ref)


def test_deleting_a_folder_removes_its_files_and_keeps_others(dirs, monkeypatch):
    _, runs = dirs
    monkeypatch.setenv(catalog.SHARED_ENV, "1")
    _save(runs / "gone")
    kept = _save(runs / "kept")
    (kept / "notes.txt").write_text("mine")
    catalog.delete_user_checkpoint("runs/gone")
    catalog.delete_user_checkpoint("runs/kept")
    assert not (runs / "gone").exists()
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]  # never a file geomlab did not write
    assert catalog.list_checkpoints() == []


def _zip(folder: Path, prefix: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, prefix + f.name)
    return buf.getvalue()


def test_uploads_of_a_folder_its_zip_or_its_files(dirs, tmp_path):
    _, runs = dirs
    src = _save(tmp_path / "src" / "my-model")
    files = {f.name: f.read_bytes() for f in src.iterdir()}
    a = uploads.store_upload(files)  # the files selected together: the name geomlab.json recorded
    b = uploads.store_upload({"renamed.zip": _zip(src)})  # a zip of the files: the zip's name
    c = uploads.store_upload({"x.zip": _zip(src, "my-model/")})  # a zip of the folder: the folder's name
    d = uploads.store_upload({f"my-model/{n}": v for n, v in files.items()})  # a folder picker's names
    refs = [e.ref for e in (a, b, c, d)]
    assert refs == ["runs/uploads/my-model", "runs/uploads/renamed", "runs/uploads/my-model-2",
                    "runs/uploads/my-model-3"]
    for e in (a, b, c, d):
        assert e.folder and sorted(p.name for p in e.path.iterdir()) == FILES
        assert ckpt.load(e.path).card["valid_bpc"] == 3.25
    flat = ckpt.save(tmp_path / "src" / "pair", _model(), VOCAB, dict(CARD))
    e = uploads.store_upload({"pair.zip": _zip_pair(flat)})  # a zip of a flat pair
    assert e.ref == "runs/uploads/pair" and not e.folder


def _zip_pair(json_path: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in (json_path, json_path.with_suffix(".safetensors")):
            zf.write(f, f.name)
    return buf.getvalue()


@pytest.mark.parametrize("mutate, message", [
    (lambda f: {k: v for k, v in f.items() if k != "config.json"}, "config.json is missing"),
    (lambda f: {k: v for k, v in f.items() if k != "model.safetensors"}, "model.safetensors is missing"),
    (lambda f: {**f, "model.pt": b"x"}, "not accepted"),
    (lambda f: {**f, "config.json": b'{"kind": "lstm"}'}, "does not belong"),
    (lambda f: {**f, "geomlab.json": b"{oops"}, "not valid JSON"),
    (lambda f: {"ck.zip": b"not a zip"}, "not a readable zip"),
    (lambda f: {"ck.zip": _nested_zip(f)}, "at most one folder deep"),
])
def test_bad_folder_uploads_are_one_line_and_store_nothing(dirs, tmp_path, mutate, message):
    _, runs = dirs
    src = _save(tmp_path / "src" / "ck")
    files = mutate({f.name: f.read_bytes() for f in src.iterdir()})
    with pytest.raises(catalog.CatalogError, match=message) as info:
        uploads.store_upload(files)
    assert "\n" not in str(info.value)
    assert catalog.list_checkpoints() == [] and not (runs / uploads.UPLOAD_SUBDIR).exists()


def _nested_zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n, v in files.items():
            zf.writestr(f"a/b/{n}", v)
    return buf.getvalue()


# ------------------------------------------------------------------------------------------- resume
def test_resume_from_a_folder_writes_back_into_it(tmp_path, tiny_text):
    from geomlab.data import LMTask, corpus_from_text
    from geomlab.training.trainer import TrainConfig, Trainer

    task = LMTask(corpus_from_text(tiny_text))
    cfg = TrainConfig(steps=6, batch_size=2, seq_len=8, eval_every=3, eval_tokens=64, log_every=1)
    model = build_model({"kind": "lstm", "vocab_size": task.vocab_size, "hidden": 8})
    trainer = Trainer(model, task, cfg, out=tmp_path / "run")

    def stop_at_3(p):
        if p.event == "step" and p.step == 3:
            trainer.stop()

    trainer.add_callback(stop_at_3)
    res = trainer.run()
    assert res.status == "stopped" and res.checkpoint == tmp_path / "run"
    logs = {"metrics.csv", *(p.name for p in (tmp_path / "run").glob("events.out.tfevents.*"))}
    assert len(logs) == 2  # the run's CSV and TensorBoard logs, beside the checkpoint
    assert sorted(p.name for p in (tmp_path / "run").iterdir() if p.name not in logs) == STATE_FILES
    resumed = Trainer.from_checkpoint(tmp_path / "run", task)
    assert resumed.out == tmp_path / "run" and resumed.step == 3
    done = resumed.run()
    assert done.status == "done" and done.checkpoint == tmp_path / "run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no flat pair beside it
    assert ckpt.load(tmp_path / "run").card["steps"] == 6
    assert _front_matter(tmp_path / "run" / "README.md")["steps"] == 6


def test_a_failed_first_save_leaves_no_folder_and_a_flat_pair_named_model_stays_flat(tmp_path, monkeypatch):
    import errno

    import safetensors.torch

    def full(tensors, filename, metadata=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), filename)

    with monkeypatch.context() as m:
        m.setattr(safetensors.torch, "save_file", full)
        with pytest.raises(OSError, match="No space"):
            _save(tmp_path / "first")
    assert list(tmp_path.iterdir()) == []  # no empty folder blocks the name
    flat = ckpt.save(tmp_path / "model", _model(), VOCAB, {"which": "flat"})  # a pair named like a folder file
    for p in (flat, flat.with_suffix(".safetensors")):
        assert ckpt.load(p).layout == "flat"
