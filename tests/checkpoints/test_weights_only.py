"""A checkpoint folder copied without its training state (``config.json``, ``model.safetensors``,
``vocab.json``, ``geomlab.json``, ``README.md``) is weights-only: it loads, lists, uploads and comes from the Hub,
and only resuming refuses it; a training state that is there but broken, or half there, is still refused. A
``config.json`` that is not JSON says so, and an edited one says why it is refused and how to go on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers.models import VOCAB, small_model

from geomlab.checkpoints import catalog, hub, uploads
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError

#: The files the README calls a checkpoint (the ones a user shares).
SHARED = ("config.json", "model.safetensors", "vocab.json", "geomlab.json", "README.md")
CARD = {"corpus": "tiny", "steps": 5, "valid_bpc": 3.25, "test_bpc": 3.5}


def _saved(tmp_path: Path):
    model = small_model("lstm")
    state = {"tensors": {"optim.0.step": torch.tensor(5.0), "rng.batch": torch.get_rng_state()},
             "json": {"step": 5}}
    folder = ckpt.save(tmp_path / "src" / "tiny", model, VOCAB, dict(CARD), train_state=state,
                       train_config={"steps": 5}, layout="folder")
    return model, folder


def _shared(folder: Path, dest: Path, names=SHARED) -> Path:
    dest.mkdir(parents=True)
    for name in names:
        shutil.copy(folder / name, dest / name)
    return dest


def _logits(model) -> torch.Tensor:
    x = torch.arange(12).reshape(2, 6) % VOCAB.size
    with torch.no_grad():
        return model.eval()(x)


def test_the_five_shared_files_load_weights_only(tmp_path):
    model, folder = _saved(tmp_path)
    assert ckpt.load(folder).train_state is not None  # the run's own folder is resumable
    copy = _shared(folder, tmp_path / "nostate")
    c = ckpt.load(copy)
    assert torch.equal(_logits(c.model), _logits(model)) and c.vocab == VOCAB
    assert c.train_state is None and c.train_config == {"steps": 5} and c.card["test_bpc"] == 3.5
    assert ckpt.read_meta(copy)["model_config"] == model.config
    with pytest.raises(CheckpointError, match=r"^nostate has no training state \(no training_state.safetensors "
                                              r"and training_state.json: a weights-only copy.*cannot resume"):
        c.require_train_state()
    ckpt.load(folder).require_train_state()  # the full folder can


def test_a_weights_only_folder_is_listed_and_converted(tmp_path, monkeypatch):
    _, folder = _saved(tmp_path)
    _shared(folder, tmp_path / "runs" / "nostate")
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    assert [e.ref for e in catalog.list_checkpoints(bundled=False)] == ["runs/nostate"]
    assert catalog.broken_checkpoints(bundled=False) == []
    new = hub.convert(tmp_path / "runs" / "nostate", tmp_path / "converted")
    assert not (new / "training_state.json").exists() and ckpt.load(new).train_state is None


def test_a_hub_snapshot_of_the_five_files_loads(tmp_path, monkeypatch):
    import huggingface_hub

    model, folder = _saved(tmp_path)
    snapshot = _shared(folder, tmp_path / "snapshot")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(snapshot))
    monkeypatch.chdir(tmp_path)
    c = hub.from_pretrained("someone/tiny")
    assert c.train_state is None and torch.equal(_logits(c.model), _logits(model))


def test_an_upload_of_the_five_files_validates_and_is_stored(tmp_path, monkeypatch):
    _, folder = _saved(tmp_path)
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    files = {f"tiny/{n}": (folder / n).read_bytes() for n in SHARED}  # what a folder picker sends
    name, c = uploads.validate_upload(files)
    assert name == "tiny" and c.train_state is None
    assert uploads.validate_upload({n: (folder / n).read_bytes() for n in SHARED})[0] == "tiny"  # the app's names
    entry = uploads.store_upload(files)
    assert entry.ref == "runs/uploads/tiny" and sorted(p.name for p in entry.path.iterdir()) == sorted(SHARED)
    assert ckpt.load(entry.path).train_state is None


@pytest.mark.parametrize("files, missing", [
    (lambda f: {k: v for k, v in f.items() if k != "vocab.json"}, "vocab.json"),
    (lambda f: {k: v for k, v in f.items() if k != "config.json"}, "config.json"),
    (lambda f: {"model.safetensors": f["model.safetensors"]}, None),
])
def test_upload_messages_name_every_needed_file(tmp_path, files, missing):
    _, folder = _saved(tmp_path)
    with pytest.raises(catalog.CatalogError) as info:
        uploads.validate_upload(files({n: (folder / n).read_bytes() for n in SHARED}))
    msg = str(info.value)
    assert msg.startswith(f"the folder's {missing} is missing" if missing else "model.safetensors is a checkpoint")
    for name in ("config.json", "model.safetensors", "vocab.json (if the model has one)", "geomlab.json",
                 "optional: training_state.* (only to resume training) and README.md"):
        assert name in msg, msg
    assert len(msg) <= uploads.MAX_MESSAGE and not msg.endswith("…")


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:40])


@pytest.mark.parametrize("damage, message", [
    (lambda f: _truncate(f / "training_state.safetensors"), "training_state.safetensors does not belong"),
    (lambda f: (f / "training_state.json").write_text('{"step": 6}\n'), "training_state.json does not belong"),
    (lambda f: (f / "training_state.json").unlink(),
     "training_state.safetensors is there but tiny/training_state.json is missing: copy both"),
    (lambda f: (f / "training_state.safetensors").unlink(),
     "training_state.json is there but tiny/training_state.safetensors is missing: copy both"),
])
def test_a_broken_or_half_training_state_is_still_refused(tmp_path, monkeypatch, damage, message):
    _, folder = _saved(tmp_path)
    damage(folder)
    with pytest.raises(CheckpointError, match=message) as info:
        ckpt.load(folder)
    assert "\n" not in str(info.value)
    files = {n: p.read_bytes() for n, p in ((p.name, p) for p in folder.iterdir())}
    with pytest.raises(catalog.CatalogError, match=message):
        uploads.validate_upload(files)


def test_config_that_is_not_json_is_named_so(tmp_path):
    _, folder = _saved(tmp_path)
    (folder / "config.json").write_text('{"kind": "lstm", ')
    with pytest.raises(CheckpointError, match=r"^tiny/config.json is not valid JSON"):
        ckpt.load(folder)
    (folder / "config.json").write_text("[]")
    with pytest.raises(CheckpointError, match=r"^tiny/config.json must hold a JSON object"):
        ckpt.load(folder)


def test_an_edited_config_says_why_and_how_to_keep_it(tmp_path):
    model, folder = _saved(tmp_path)
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "dropout": 0.25}, indent=2))
    with pytest.raises(CheckpointError) as info:
        ckpt.load(folder)
    assert str(info.value) == (
        'tiny/config.json does not belong with tiny/geomlab.json: its sha256 is not the one recorded there (edited '
        'by hand, or from another save); restore the saved config.json, or to use this one delete the '
        '"config.json" entry under "files" in geomlab.json')
    meta = json.loads((folder / "geomlab.json").read_text())
    del meta["files"]["config.json"]  # the way the message gives
    (folder / "geomlab.json").write_text(json.dumps(meta))
    c = ckpt.load(folder)
    assert c.model_config["dropout"] == 0.25 and torch.equal(_logits(c.model), _logits(model))


def test_damaged_weights_in_a_folder_say_copy_its_files(tmp_path):
    """A folder's weights that safetensors cannot read: the message asks for its files anew, not "both" files
    (the older layout's pair)."""
    _, folder = _saved(tmp_path)
    copy = _shared(folder, tmp_path / "broken")
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    weights.write_bytes(bytes(data[: len(data) - 64]))  # the header intact, the tensors cut short
    with pytest.raises(CheckpointError, match=r"save the checkpoint again, or copy its files anew$"):
        ckpt.load(copy)
