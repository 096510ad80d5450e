"""The weights' sha256 in a checkpoint's description: every writer records it, the loader refuses weights that
still parse but changed since the save (one line naming the file), a checkpoint saved before the sum was
recorded still loads and is said to have its weights unchecked, and the sum of an unchanged file is computed
once per process."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch
from helpers.checkpoints import change_one_value
from helpers.models import VOCAB, small_model
from safetensors import safe_open
from safetensors.torch import save_file

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints import hub
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.training import zoo

CARD = {"corpus": "tiny", "steps": 5}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "trace_v1" / "checkpoints"


def _weights_and_meta(where: Path) -> tuple[Path, dict]:
    loc = ckpt.locate(where)
    return loc.weights, json.loads(loc.meta.read_text())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("layout", ["folder", "flat"])
def test_save_records_the_sha256_of_the_weights_written(tmp_path, layout):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout=layout)
    weights, meta = _weights_and_meta(where)
    assert meta["files"]["model.safetensors"]["sha256"] == _sha(weights)


def test_the_hub_writers_record_it(tmp_path, monkeypatch):
    """save_pretrained and convert write it; push_to_hub of a folder saved without it uploads a converted
    folder that has it."""
    import huggingface_hub

    folder = hub.save_pretrained(small_model("grassmann"), tmp_path / "g", VOCAB, dict(CARD))
    assert ckpt_files.recorded_sha(_weights_and_meta(folder)[1], "model.safetensors") == _sha(folder / "model.safetensors")
    flat = ckpt.save(tmp_path / "pair", small_model("lstm"), VOCAB, dict(CARD), layout="flat")
    meta = json.loads(flat.read_text())
    del meta["files"]  # a flat pair saved before the weights had a sum
    flat.write_text(json.dumps(meta))
    new = hub.convert(flat, tmp_path / "converted")
    assert _weights_and_meta(new)[1]["files"]["model.safetensors"]["sha256"] == _sha(new / "model.safetensors")

    meta = json.loads((folder / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]  # a folder saved before the weights had a sum
    (folder / "geomlab.json").write_text(json.dumps(meta))
    pushed = []

    class Api:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kw):
            pass

        def upload_folder(self, *, folder_path, **kw):
            up = json.loads((Path(folder_path) / "geomlab.json").read_text())
            pushed.append((Path(folder_path), up, _sha(Path(folder_path) / "model.safetensors")))
            return "https://huggingface.co/me/g/commit/abc"

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    hub.push_to_hub(folder, "me/g")
    [(path, up, sha)] = pushed
    assert path != folder and up["files"]["model.safetensors"]["sha256"] == sha


def test_training_records_it(text_file, tmp_path):
    from geomlab.commands.cli import main

    assert main(["train", "--model", "lstm", "--config", "hidden=8", "--data", str(text_file), "--steps", "2",
                 "--batch-size", "2", "--seq-len", "8", "--eval-every", "2", "--eval-tokens", "50", "--device",
                 "cpu", "--out", str(tmp_path), "--name", "w", "--quiet"]) == 0
    weights, meta = _weights_and_meta(tmp_path / "w")
    assert meta["files"]["model.safetensors"]["sha256"] == _sha(weights)


@pytest.mark.parametrize("layout", ["folder", "flat"])
def test_weights_changed_since_the_save_are_refused(tmp_path, layout):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout=layout)
    ckpt.load(where)  # loaded (and its sum verified) once before the change
    weights, _ = _weights_and_meta(where)
    change_one_value(weights)
    with pytest.raises(CheckpointError) as err:
        ckpt.load(where)
    label, meta_label = ("run/model.safetensors", "run/geomlab.json") if layout == "folder" else (
        "run.safetensors", "run.json")
    assert str(err.value) == (
        f"{label} changed since it was written: its sha256 is not the one {meta_label} recorded at the save (a "
        "damaged copy or a replaced file); copy the checkpoint again, or, if the weights were changed on purpose, "
        f"record their sum with `geomlab zoo --accept-weights {where}`")
    with pytest.raises(CheckpointError) as unloaded:  # the same check and message without loading the model
        ckpt.check_weights(where)
    assert str(unloaded.value) == str(err.value)


def test_a_byte_flipped_in_place_with_the_old_times_is_refused(tmp_path):
    """A change that keeps the size and the modification time (a bit flip written in place) is hashed again:
    the change time and the inode are part of the cache key too."""
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    weights = where / "model.safetensors"
    ckpt.load(where)
    st = weights.stat()
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 0x01  # the last byte of a float32 weight: the value changes, the file still parses
    with open(weights, "r+b") as f:
        f.write(raw)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(CheckpointError, match="model.safetensors changed since it was written"):
        ckpt.load(where)


def test_an_unchanged_file_is_hashed_once_per_process(tmp_path, monkeypatch):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    real, calls = hashlib.sha256, []

    def counting(*data):
        calls.append("streamed" if not data else "whole")  # file_sha256 streams; config and vocab come whole
        return real(*data)

    monkeypatch.setattr(ckpt_files.hashlib, "sha256", counting)
    ckpt.load(where)
    assert calls.count("streamed") == 1
    ckpt.load(where)
    ckpt.load(where)
    assert calls.count("streamed") == 1 and calls.count("whole") == 6  # the weights' sum came from the cache


def test_a_description_without_the_sum_still_loads_with_its_weights_unchecked(tmp_path):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    meta = json.loads((where / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]
    (where / "geomlab.json").write_text(json.dumps(meta))
    change_one_value(where / "model.safetensors")
    c = ckpt.load(where)
    assert c.model is not None and ckpt_files.checked_files(c.meta) == ["config.json", "vocab.json"]
    assert ckpt_files.checksums_line(c.meta) == (
        "sha256 checked on load: config.json, vocab.json; the weights are not checked (saved before geomlab "
        "recorded their sha256; `geomlab zoo --accept-weights CHECKPOINT` records it)")
    old = ckpt.load(FIXTURES / "lstm-tinyshakespeare.json")  # a flat pair written before any sum
    assert ckpt_files.checksums_line(old.meta).startswith("sha256 checked on load: none; the weights are not")


def test_zoo_list_says_which_files_are_checked(tmp_path):
    ckpt.save(tmp_path / "new", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    old = ckpt.save(tmp_path / "old", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    meta = json.loads((old / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]
    (old / "geomlab.json").write_text(json.dumps(meta))
    lines = {zoo.card_name(c): zoo.format_card(c) for c in zoo.read_cards(tmp_path)}
    assert "  sha256 checked on load: model.safetensors, config.json, vocab.json\n" in lines["new"] + "\n"
    assert "the weights are not checked" in lines["old"] and "model.safetensors" not in lines["old"]


def test_the_bundled_checkpoints_record_their_weights_sum():
    root = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    assert folders
    for folder in folders:
        meta = json.loads((folder / "geomlab.json").read_text())
        assert meta["files"]["model.safetensors"]["sha256"] == _sha(folder / "model.safetensors"), folder.name


@pytest.mark.parametrize("layout", ["folder", "flat"])
def test_accept_weights_records_the_sum_of_weights_changed_on_purpose(tmp_path, layout):
    """The command the refusal names saves the checkpoint anew in place with its present weights' sum, keeping
    its card, recipe and training state; a second call changes nothing."""
    model = small_model("lstm")
    where = ckpt.save(tmp_path / "run", model, VOCAB, dict(CARD), train_config={"lr": 0.01}, layout=layout,
                      train_state={"tensors": {"m": torch.ones(3)}, "json": {"step": 5}})
    weights, _ = _weights_and_meta(where)
    change_one_value(weights)
    with pytest.raises(CheckpointError):
        ckpt.load(where)
    assert hub.accept_weights(where) == where
    c = ckpt.load(where)
    assert ckpt_files.recorded_sha(c.meta, "model.safetensors") == _sha(weights)
    changed = {k: v for k, v in c.model.state_dict().items() if not torch.equal(v, model.state_dict()[k])}
    assert len(changed) == 1  # the edited weights, not the saved ones
    assert c.card["corpus"] == "tiny" and c.train_config == {"lr": 0.01} and c.train_state["json"] == {"step": 5}
    assert c.layout == layout
    assert hub.accept_weights(where) is None  # already recorded: nothing written


def test_accept_weights_keeps_the_name_and_dates_the_metrics(tmp_path):
    """A copied folder keeps the name it was saved with; the card records the day the weights were vouched
    for, and the model card says its metrics predate them."""
    import datetime
    import shutil

    where = ckpt.save(tmp_path / "t", small_model("lstm"), VOCAB, {**CARD, "valid_bpc": 5.7}, layout="folder")
    shutil.copytree(where, tmp_path / "bad")
    change_one_value(tmp_path / "bad" / "model.safetensors")
    assert hub.accept_weights(tmp_path / "bad") == tmp_path / "bad"
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    meta = json.loads((tmp_path / "bad" / "geomlab.json").read_text())
    assert meta["name"] == "t" and meta["card"]["weights_accepted"] == today
    readme = (tmp_path / "bad" / "README.md").read_text()
    assert "\n# t\n" in readme and f"* metrics from before the weights were changed on {today}\n" in readme


def test_accept_weights_names_a_missing_checkpoint_as_eval_does(tmp_path):
    with pytest.raises(CheckpointError) as exc:
        hub.accept_weights(tmp_path / "x" / "none")
    assert str(exc.value).startswith(f"no checkpoint {tmp_path / 'x' / 'none'}: no folder none/ and no none.json")


def test_accept_weights_refuses_a_changed_config_saying_why(tmp_path):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    change_one_value(where / "model.safetensors")
    (where / "config.json").write_text((where / "config.json").read_text() + "\n")
    with pytest.raises(CheckpointError) as exc:
        hub.accept_weights(where)
    assert str(exc.value) == ("run/config.json changed since saved: --accept-weights vouches for the weights "
                              "only, and config.json decides how they are read; restore the saved config.json")


def test_accept_weights_still_refuses_weights_that_do_not_load(tmp_path):
    where = ckpt.save(tmp_path / "run", small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    with safe_open(str(where / "model.safetensors"), framework="pt") as f:
        header, tensors = f.metadata(), {k: f.get_tensor(k).clone() for k in f.keys()}
    name = next(k for k, v in tensors.items() if v.is_floating_point() and v.numel())
    tensors[name].view(-1)[0] = float("nan")
    save_file(tensors, str(where / "model.safetensors"), metadata=header)
    with pytest.raises(CheckpointError, match="non-finite"):
        hub.accept_weights(where)


def test_convert_folder_records_a_missing_sum_and_skips_a_damaged_checkpoint(tmp_path):
    """A current folder saved before the weights' sum gets it; a damaged one is skipped and named, the rest of
    the folder converted all the same."""
    for name in ("a-damaged", "b-nosum", "c-pair"):
        ckpt.save(tmp_path / name, small_model("lstm"), VOCAB, dict(CARD),
                  layout="flat" if name == "c-pair" else "folder")
    meta = json.loads((tmp_path / "b-nosum" / "geomlab.json").read_text())
    del meta["files"]["model.safetensors"]
    (tmp_path / "b-nosum" / "geomlab.json").write_text(json.dumps(meta))
    change_one_value(tmp_path / "a-damaged" / "model.safetensors")
    logged = []
    done, skipped = hub.convert_folder(tmp_path, log=logged.append)
    assert [p.name for p in done] == ["b-nosum", "c-pair"] and skipped == ["a-damaged"]
    assert any(s.startswith("skipped a-damaged: a-damaged/model.safetensors changed since it was written")
               for s in logged), logged
    for p in done:
        assert ckpt_files.recorded_sha(ckpt.load(p).meta, "model.safetensors") == _sha(p / "model.safetensors")
    assert hub.convert_folder(tmp_path, log=logged.append) == ([], ["a-damaged"])


def test_the_catalog_marks_a_listed_checkpoint_whose_weights_changed(tmp_path, monkeypatch):
    from geomlab.checkpoints import catalog

    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    for name in ("good", "bad"):
        ckpt.save(tmp_path / name, small_model("lstm"), VOCAB, dict(CARD), layout="folder")
    change_one_value(tmp_path / "bad" / "model.safetensors")
    found = {e.name: catalog.weights_changed(e) for e in catalog.list_checkpoints()}
    assert found["good"] is None
    assert found["bad"].startswith("bad/model.safetensors changed since it was written") and \
        found["bad"].endswith(f"`geomlab zoo --accept-weights {tmp_path / 'bad'}`")
