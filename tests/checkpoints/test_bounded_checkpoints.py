"""Checkpoints read within bounds: deeply nested JSON (``geomlab.json``, ``config.json``, the safetensors
header) is one CheckpointError line, an uploaded zip whose member lies about its size is not inflated in full,
a config describing a bigger model than its weights is refused before the model is allocated; random bytes
and random JSON give a value or the module's own error, within a memory budget."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints import reading, uploads
from geomlab.checkpoints.catalog import CatalogError
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model
from helpers.memory import peak as _peak

VOCAB = Vocab.from_text("the quick brown fox jumps over the lazy dog")
#: Peak Python-traced memory one hostile read may cost (bytes).
BUDGET = 16 * 2**20
DEEP = 200_000


def _save(folder: Path) -> Path:
    torch.manual_seed(0)
    model = build_model({"kind": "lstm", "vocab_size": VOCAB.size, "hidden": 8, "embedding_dim": 4})
    return ckpt.save(folder, model, VOCAB, {"corpus": "tiny", "steps": 1}, layout="folder")




def _set_config(folder: Path, raw: bytes) -> None:
    """Replace ``config.json`` and record its sha256 in ``geomlab.json`` (as a save would)."""
    (folder / "config.json").write_bytes(raw)
    meta = json.loads((folder / "geomlab.json").read_text())
    meta["files"]["config.json"]["sha256"] = hashlib.sha256(raw).hexdigest()
    (folder / "geomlab.json").write_text(json.dumps(meta))


def _deep(depth: int = DEEP) -> bytes:
    return b"[" * depth + b"]" * depth


def _folder_zip(folder: Path) -> dict[str, bytes]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            zf.writestr(f"{folder.name}/{p.name}", p.read_bytes())
    return {f"{folder.name}.zip": buf.getvalue()}


# ------------------------------------------------------------------------------------------------ nesting
def test_deep_geomlab_json_is_one_checkpoint_error(tmp_path):
    folder = _save(tmp_path / "run")
    (folder / "geomlab.json").write_bytes(b'{"a": ' + _deep() + b"}")
    for fn in (ckpt.read_meta, ckpt.load):
        with pytest.raises(CheckpointError, match=r"geomlab\.json.*levels deep"):
            fn(folder)


def test_deep_config_json_is_one_checkpoint_error_naming_it(tmp_path):
    folder = _save(tmp_path / "run")
    _set_config(folder, _deep())
    for fn in (ckpt.read_meta, ckpt.load):
        with pytest.raises(CheckpointError, match=r"config\.json.*levels deep"):
            fn(folder)


def test_deep_safetensors_header_is_one_checkpoint_error(tmp_path):
    folder = _save(tmp_path / "run")
    header = b'{"__metadata__": ' + _deep() + b"}"
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    for fn in (ckpt.read_meta, ckpt.load):
        with pytest.raises(CheckpointError, match=r"model\.safetensors.*levels deep"):
            fn(folder)


def test_deep_json_in_an_upload_is_a_catalog_error(tmp_path):
    folder = _save(tmp_path / "run")
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    files["geomlab.json"] = b'{"tensors": ' + _deep() + b"}"
    with pytest.raises(CatalogError, match="levels deep"):
        uploads.validate_upload(files)


# ------------------------------------------------------------------------------------------ amplification
def test_zip_member_lying_about_its_size_is_not_inflated_in_full(tmp_path):
    folder = _save(tmp_path / "run")
    real = b" " * (64 * 2**20)  # 64 MiB of spaces, declared as 100 bytes
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.iterdir()):
            zf.writestr(f"run/{p.name}", real if p.name == "README.md" else p.read_bytes())
    data = bytearray(buf.getvalue())
    size = struct.pack("<I", len(real))
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := data.find(sig, at)) >= 0:
            if data[at + off:at + off + 4] == size:
                data[at + off:at + off + 4] = struct.pack("<I", 100)
            at += 4
    assert len(data) < 2**20
    err, peak = _peak(lambda: uploads.validate_upload({"run.zip": bytes(data)}))
    assert isinstance(err, CatalogError) and "README.md" in str(err), repr(err)
    assert peak < BUDGET, f"{peak / 2**20:.0f} MiB"


def test_zip_with_bzip2_members_is_refused(tmp_path):
    folder = _save(tmp_path / "run")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_BZIP2) as zf:
        for p in sorted(folder.iterdir()):
            zf.writestr(f"run/{p.name}", p.read_bytes())
    with pytest.raises(CatalogError, match="compression"):
        uploads.validate_upload({"run.zip": buf.getvalue()})
    uploads.validate_upload(_folder_zip(folder))  # the same folder, deflated, is accepted


def _spy_builds(monkeypatch) -> list[str]:
    devices: list[str] = []
    real = reading.build_model

    def spy(config):
        dev = torch.get_default_device().type
        devices.append(dev)
        if dev != "meta" and config.get("hidden", 0) > 8:
            raise AssertionError(f"a {config['hidden']}-wide model was allocated before its weights were checked")
        return real(config)

    monkeypatch.setattr(reading, "build_model", spy)
    return devices


@pytest.mark.parametrize("hidden, match", [(2_000, "shape"), (10**6, "limit")])
def test_config_bigger_than_its_weights_is_refused_before_allocation(tmp_path, monkeypatch, hidden, match):
    folder = _save(tmp_path / "run")
    config = json.loads((folder / "config.json").read_text())
    _set_config(folder, json.dumps({**config, "hidden": hidden}).encode())
    devices = _spy_builds(monkeypatch)
    with pytest.raises(CheckpointError, match=match) as info:
        ckpt.load(folder)
    assert "\n" not in str(info.value) and str(info.value).startswith("run/config.json")  # the config's file
    assert devices == ["meta"]


def test_config_of_a_million_layers_stops_early(tmp_path):
    import time

    torch.manual_seed(0)
    model = build_model({"kind": "transformer", "vocab_size": VOCAB.size, "d_model": 16, "n_layers": 1, "n_heads": 2})
    folder = ckpt.save(tmp_path / "run", model, VOCAB, {"corpus": "tiny", "steps": 1}, layout="folder")
    config = json.loads((folder / "config.json").read_text())
    _set_config(folder, json.dumps({**config, "n_layers": 10**9}).encode())
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=r"run/config\.json: .*more than 10,000 modules"):
        ckpt.load(folder)
    assert time.monotonic() - start < 20


def test_good_checkpoint_and_upload_still_load(tmp_path, monkeypatch):
    folder = _save(tmp_path / "run")
    devices = _spy_builds(monkeypatch)
    assert ckpt.load(folder).model is not None and devices == ["meta", "cpu"]
    name, _ = uploads.validate_upload(_folder_zip(folder))
    assert name == "run"


# ------------------------------------------------------------------------------------------- properties
def _json_text(max_leaves: int = 20):
    leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    values = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) |
                          st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=max_leaves)
    return st.builds(lambda v, d: "[" * d + json.dumps(v) + "]" * d, values, st.integers(0, 3000)).map(str.encode)


_FOLDER: dict[str, bytes] = {}


def _good_files(tmp: Path) -> dict[str, bytes]:
    if not _FOLDER:
        folder = _save(tmp / "good")
        _FOLDER.update({p.name: p.read_bytes() for p in folder.iterdir()})
    return dict(_FOLDER)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["geomlab.json", "config.json", "model.safetensors", "zip"]),
       st.binary(max_size=2048) | _json_text())
def test_random_input_gives_a_value_or_the_module_error_within_budget(tmp_path_factory, which, data):
    tmp = tmp_path_factory.mktemp("prop")
    files = _good_files(tmp_path_factory.getbasetemp())
    if which == "zip":
        upload = {"run.zip": data}
    else:
        files[which] = data
        upload = files
    folder = tmp / "run"
    folder.mkdir()
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    for fn, errors in ((lambda: ckpt.read_meta(folder), CheckpointError), (lambda: ckpt.load(folder), CheckpointError),
                       (lambda: uploads.validate_upload(upload), CatalogError),
                       (lambda: ckpt_files.header_save_id(folder / "model.safetensors"), ckpt_files.PairError)):
        err, peak = _peak(fn)
        assert err is None or isinstance(err, errors), repr(err)
        assert peak < BUDGET, f"{peak / 2**20:.0f} MiB"
