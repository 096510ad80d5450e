"""A folder checkpoint's model config is its ``config.json``: a config the model rejects is reported under that
name, not under ``geomlab.json`` (which holds the manifest and the vocabulary)."""

from __future__ import annotations

import hashlib
import json

import pytest

from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model

VOCAB = Vocab.from_text("the quick brown fox")


def _folder(tmp_path, config_edit: dict):
    model = build_model({"kind": "lstm", "vocab_size": VOCAB.size, "hidden": 6, "embedding_dim": 3})
    path = ckpt.save(tmp_path / "m", model, VOCAB, {}, layout="folder")
    config = {**json.loads((path / "config.json").read_text()), **config_edit}
    raw = json.dumps(config).encode()
    (path / "config.json").write_bytes(raw)
    meta = json.loads((path / "geomlab.json").read_text())  # as if written so (the sha256 check passes)
    meta["files"]["config.json"]["sha256"] = hashlib.sha256(raw).hexdigest()
    (path / "geomlab.json").write_text(json.dumps(meta))
    return path


@pytest.mark.parametrize("edit,want", [({"hidden": -5}, "m/config.json: cannot build the 'lstm' model from its "
                                        "config: lstm: hidden must be a positive integer, got -5"),
                                       ({"kind": "nope"}, "m/config.json: unknown model kind 'nope'")])
def test_a_bad_config_json_is_named_as_config_json(tmp_path, edit, want):
    path = _folder(tmp_path, edit)
    with pytest.raises(CheckpointError) as exc:
        ckpt.load(path)
    assert str(exc.value).startswith(want) and "geomlab.json" not in str(exc.value), str(exc.value)
