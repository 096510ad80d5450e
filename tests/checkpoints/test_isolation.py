"""One broken checkpoint never hides the others: the catalog lists every good one and reports each broken
one with a one-line reason (deeply nested JSON, truncated files, a folder where a file should be, unreadable
files); the command line names the broken checkpoint in one line."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import pytest
import torch

from geomlab.checkpoints import catalog
from geomlab.checkpoints import io as checkpoint
from geomlab.data import Vocab
from geomlab.models import build_model

DEEP = b"[" * 200_000 + b"]" * 200_000  # a few hundred KB that overflow Python's recursion limit


def _save(stem: Path, layout: str = "flat") -> Path:
    torch.manual_seed(0)
    vocab = Vocab.from_text("hello world")
    model = build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 8})
    return checkpoint.save(stem, model, vocab, {"corpus": "text"}, layout=layout)


def _deep_header(weights: Path) -> None:
    weights.write_bytes(struct.pack("<Q", len(DEEP)) + DEEP)


def _deep_config(folder: Path) -> None:
    (folder / "config.json").write_bytes(DEEP)
    meta = json.loads((folder / "geomlab.json").read_text())
    meta["files"]["config.json"]["sha256"] = hashlib.sha256(DEEP).hexdigest()  # so the file is parsed
    (folder / "geomlab.json").write_text(json.dumps(meta))


BREAKS = {
    "deep pair json": ("flat", lambda p: p.write_bytes(DEEP), "deep"),
    "deep geomlab.json": ("folder", lambda p: (p / "geomlab.json").write_bytes(DEEP), "deep"),
    "deep config.json": ("folder", _deep_config, "deep"),
    "deep folder header": ("folder", lambda p: _deep_header(p / "model.safetensors"), "deep"),
    "deep pair header": ("flat", lambda p: _deep_header(p.with_suffix(".safetensors")), "deep"),
    "truncated weights": ("flat", lambda p: p.with_suffix(".safetensors").write_bytes(b"\x10\x00"),
                          "truncated"),
    "truncated json": ("folder", lambda p: (p / "geomlab.json").write_text('{"format_version": 2, "vo'),
                       "json"),
    "json not an object": ("flat", lambda p: p.write_text("[1, 2, 3]"), "json object"),
    "folder for config.json": ("folder", lambda p: ((p / "config.json").unlink(), (p / "config.json").mkdir()),
                               "config.json"),
    "folder for a file": ("folder", lambda p: ((p / "geomlab.json").unlink(), (p / "geomlab.json").mkdir()),
                          "geomlab.json"),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_one_broken_checkpoint_leaves_the_others_listed(dirs, case):
    bundled, runs = dirs
    layout, breaker, word = BREAKS[case]
    _save(bundled / "b-good")
    _save(runs / "good")
    bad = _save(runs / "sub" / "bad", layout)
    breaker(bad)
    assert [e.ref for e in catalog.list_checkpoints()] == ["bundled/b-good", "runs/good"]
    broken = catalog.broken_checkpoints()
    assert [b.ref for b in broken] == ["runs/sub/bad"]
    reason = broken[0].reason
    assert "\n" not in reason and len(reason) < 300 and word in reason.lower(), reason
    with pytest.raises(catalog.CatalogError) as err:  # a link to it says why, in one line
        catalog.resolve("runs/sub/bad")
    assert "\n" not in str(err.value) and word in str(err.value).lower()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_checkpoint_is_reported(dirs):
    _, runs = dirs
    _save(runs / "good")
    bad = _save(runs / "bad")
    bad.chmod(0)
    try:
        assert [e.ref for e in catalog.list_checkpoints()] == ["runs/good"]
        assert [b.ref for b in catalog.broken_checkpoints()] == ["runs/bad"]
    finally:
        bad.chmod(0o644)


def test_stray_files_are_not_reported_as_broken(dirs):
    _, runs = dirs
    _save(runs / "good")
    (runs / "stray.json").write_text(json.dumps({"not": "a checkpoint"}))  # no weights: not a checkpoint
    (runs / "half.json").write_text("{")
    (runs / "deep.json").write_bytes(DEEP)
    assert [e.ref for e in catalog.list_checkpoints()] == ["runs/good"]
    assert catalog.broken_checkpoints() == []


@pytest.mark.parametrize("case", ["deep pair json", "deep geomlab.json", "deep folder header"])
def test_eval_of_a_broken_checkpoint_is_one_line(tmp_path, capsys, case):
    from geomlab.commands import cli

    layout, breaker, _ = BREAKS[case]
    bad = _save(tmp_path / "bad", layout)
    breaker(bad)
    assert cli.main(["eval", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "bad" in err and "Traceback" not in err, err


def test_checkpoints_page_lists_the_good_and_names_the_broken(dirs, monkeypatch):
    from conftest import run_page

    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")
    _, runs = dirs
    _save(runs / "good")
    bad = _save(runs / "bad", "folder")
    (bad / "geomlab.json").write_bytes(DEEP)
    at = run_page("checkpoints")
    captions = " ".join(c.value for c in at.caption).replace("\\", "")  # markdown escapes
    assert "runs/bad" in captions and "levels deep" in captions
    assert "runs/good" in captions  # its card
