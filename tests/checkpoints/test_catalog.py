"""geomlab.checkpoints.catalog: finding bundled and user checkpoints, safe refs, upload validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from geomlab.checkpoints import catalog, uploads
from geomlab.checkpoints import io as checkpoint
from geomlab.data import Vocab
from geomlab.models import build_model


def _save(stem: Path, text: str = "hello world, the quick brown fox", card: dict | None = None) -> Path:
    torch.manual_seed(0)
    vocab = Vocab.from_text(text)
    model = build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 8})
    return checkpoint.save(stem, model, vocab, card or {"corpus": "text", "valid_bpc": 3.25})



def test_empty_folders_give_empty_catalog(dirs):
    assert catalog.list_checkpoints() == []


def test_missing_folders_are_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "nope"))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "nope2"))
    assert catalog.list_checkpoints() == []
    assert catalog.signature() == ()


def test_lists_bundled_then_user_with_cards(dirs):
    bundled, runs = dirs
    _save(bundled / "b-one", card={"corpus": "tinyshakespeare", "valid_bpc": 2.5, "test_bpc": 2.6})
    _save(runs / "sub" / "last")
    (runs / "stray.json").write_text(json.dumps({"not": "a checkpoint"}))  # ignored
    (runs / "half.json").write_text("{")  # unreadable, ignored
    found = catalog.list_checkpoints()
    assert [e.ref for e in found] == ["bundled/b-one", "runs/sub/last"]
    b = found[0]
    assert b.source == "bundled" and b.kind == "lstm" and b.corpus == "tinyshakespeare"
    assert b.valid_bpc == pytest.approx(2.5) and b.test_bpc == pytest.approx(2.6)
    assert b.params == checkpoint.load(b.path).card["params_effective"] > 0
    assert "lstm" in b.title and "tinyshakespeare" in b.title
    assert found[1].source == "user"
    row = b.summary()
    assert row["kind"] == "lstm" and row["ref"] == "bundled/b-one"
    assert (row["metric"], row["valid"], row["test"]) == ("BPC", pytest.approx(2.5), pytest.approx(2.6))
    assert not b.is_word_problem and b.accuracy_by_length == {}


def test_word_problem_cards_give_accuracy_not_bpc(dirs):
    bundled, _ = dirs
    _save(bundled / "wp", card={"task": {"task": "word-problem", "group": "S3"}, "valid_accuracy": 0.9,
                                "test_accuracy": 0.85, "accuracy_by_length": {"16": 0.5, "2": 1.0, "x": 3}})
    e = catalog.list_checkpoints()[0]
    assert e.is_word_problem and e.valid_bpc is None
    assert e.metric == ("accuracy", pytest.approx(0.9), pytest.approx(0.85))
    assert e.accuracy_by_length == {2: 1.0, 16: 0.5}  # sorted by length, bad keys dropped
    row = e.summary()
    assert row["metric"] == "accuracy" and row["valid"] == pytest.approx(0.9) and "valid BPC" not in row


def test_weights_without_json_or_json_without_weights_are_skipped(dirs):
    _, runs = dirs
    p = _save(runs / "a")
    p.with_suffix(".safetensors").unlink()
    assert catalog.list_checkpoints() == []


def test_signature_changes_when_a_checkpoint_appears(dirs):
    _, runs = dirs
    before = catalog.signature()
    _save(runs / "new")
    assert catalog.signature() != before


def test_resolve_roundtrip_and_rejects_escapes(dirs):
    bundled, runs = dirs
    _save(runs / "deep" / "x")
    e = catalog.resolve("runs/deep/x")
    assert e.path == (runs / "deep" / "x.json") and e.weights.is_file()
    for bad in ["", "x", "runs/", "other/x", "runs/../bundled/x", "runs/../../etc/passwd", "/abs", None]:
        with pytest.raises(catalog.CatalogError):
            catalog.resolve(bad)
    with pytest.raises(catalog.CatalogError, match="no checkpoint"):
        catalog.resolve("bundled/missing")


def test_safe_name():
    assert catalog.safe_name("../../evil name!.json") == "evil-name-.json"
    assert catalog.safe_name("../../evil") == "evil"
    assert catalog.safe_name("///") == "checkpoint"
    assert catalog.safe_name("ok_name-1.2") == "ok_name-1.2"
    assert catalog.safe_name("my tiny run/../x 😀") == "my-tiny-run-x"  # no part of the name is dropped
    assert catalog.safe_name("a/b") == "a-b" and ".." not in catalog.safe_name("x..y")


def _pair(tmp_path: Path, name: str = "up") -> dict[str, bytes]:
    p = _save(tmp_path / "src" / name)
    return {f"{name}.json": p.read_bytes(), f"{name}.safetensors": p.with_suffix(".safetensors").read_bytes()}


def test_store_upload_validates_and_stores(dirs, tmp_path):
    _, runs = dirs
    files = _pair(tmp_path)
    e1 = uploads.store_upload(files)
    e2 = uploads.store_upload(files)  # same name again: not overwritten
    assert e1.ref == "runs/uploads/up" and e2.ref == "runs/uploads/up-2"
    assert {e.ref for e in catalog.list_checkpoints()} == {e1.ref, e2.ref}
    assert checkpoint.load(e1.path).vocab is not None


@pytest.mark.parametrize("mutate, message", [
    (lambda f: {k: v for k, v in f.items() if k.endswith(".json")}, "weights .*missing"),
    (lambda f: {k: v for k, v in f.items() if k.endswith(".safetensors")}, "description .*missing"),
    (lambda f: {**f, "model.pt": b"x"}, "not accepted"),
    (lambda f: {**f, "up.json": b""}, "empty"),
    (lambda f: {**f, "up.json": b"{not json"}, "not valid JSON"),
    (lambda f: {**f, "up.json": b"{\"a\": 1}"}, "model_config"),
    # a lone JSON that is no checkpoint description is named as such, not as "the weights are missing"
    (lambda f: {"settings.json": b"{\"a\": 1}"}, "settings.json is not a geomlab checkpoint description"),
    (lambda f: {"notes.json": b"hello"}, "notes.json is not valid JSON"),
    # a pair whose two names differ is refused even when the halves fit (two checkpoints of one shape would)
    (lambda f: {"bogus.json": f["up.json"], "random.safetensors": b"\xff" * 64},
     "bogus.json and random.safetensors are not one pair: a flat pair is NAME.json with NAME.safetensors"),
    (lambda f: {"a.json": f["up.json"], "b.safetensors": f["up.safetensors"]}, "a.json and b.safetensors are not"),
    (lambda f: {"up.json": f["up.json"], "up.safetensors": b"\xff" * 64}, "not a valid checkpoint: .*up.safetensors"),
    (lambda f: {**f, "up.safetensors": f["up.safetensors"][: len(f["up.safetensors"]) // 2]}, "not a valid checkpoint"),
    (lambda f: {**f, "other.json": f["up.json"]}, "exactly one pair"),
    (lambda f: {}, "no files"),
    # a folder's weights alone: named as such, with what to upload beside it
    (lambda f: {"model.safetensors": f["up.safetensors"]},
     r"model.safetensors is a checkpoint folder's weights: upload the folder's files together \(config.json, "
     r"model.safetensors, vocab.json \(if the model has one\) and geomlab.json; optional: training_state.\*"),
])
def test_bad_uploads_raise_readable_errors_and_store_nothing(dirs, tmp_path, mutate, message):
    _, runs = dirs
    files = mutate(_pair(tmp_path))
    with pytest.raises(catalog.CatalogError, match=message):
        uploads.store_upload(files)
    assert catalog.list_checkpoints() == []
    assert not (runs / uploads.UPLOAD_SUBDIR).exists() or not any((runs / uploads.UPLOAD_SUBDIR).iterdir())


def test_upload_with_mismatched_json_is_rejected(dirs, tmp_path):
    files = _pair(tmp_path)
    meta = json.loads(files["up.json"])
    meta["model_config"]["hidden"] = 9  # weights no longer fit
    with pytest.raises(catalog.CatalogError, match="not a valid checkpoint"):
        uploads.store_upload({**files, "up.json": json.dumps(meta).encode()})
    meta = json.loads(files["up.json"])
    meta["model_config"]["kind"] = "no-such-kind"
    with pytest.raises(catalog.CatalogError, match="no-such-kind"):
        uploads.validate_upload({**files, "up.json": json.dumps(meta).encode()})


def test_delete_user_checkpoint(dirs):
    bundled, runs = dirs
    _save(runs / "gone")
    _save(bundled / "kept")
    catalog.record_owner(runs / "gone.json", "me")  # a session's own checkpoint (see the ownership tests)
    catalog.delete_user_checkpoint("runs/gone", owner="me")
    assert [e.ref for e in catalog.list_checkpoints()] == ["bundled/kept"]
    with pytest.raises(catalog.CatalogError, match="bundled"):
        catalog.delete_user_checkpoint("bundled/kept")


# ------------------------------------------------------------------ files and sessions
def _with_timeout(fn, seconds: float = 20.0):
    """``fn()`` in a daemon thread; its result, or the string "hung" when it does not return in time."""
    import threading

    box: list = []

    def go():
        try:
            box.append(fn())
        except Exception as exc:  # noqa: BLE001
            box.append(exc)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(seconds)
    return box[0] if box else "hung"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_runs_never_blocks_the_listing_or_resolve(dirs):
    _, runs = dirs
    _save(runs / "good")
    (runs / "pipe.safetensors").write_bytes(b"x" * 16)
    os.mkfifo(runs / "pipe.json")  # a reader that opens it blocks until a writer comes
    os.mkfifo(runs / "pipe2.safetensors")
    (runs / "pipe2.json").write_text((runs / "good.json").read_text())
    try:
        listed = _with_timeout(catalog.list_checkpoints)
        assert listed != "hung", "listing runs/ blocked on a FIFO"
        assert [e.ref for e in listed] == ["runs/good"]
        for ref in ("runs/pipe", "runs/pipe2"):
            out = _with_timeout(lambda: catalog.resolve(ref))
            assert isinstance(out, catalog.CatalogError), out
        assert _with_timeout(catalog.signature) != "hung"
    finally:
        for p in ("pipe.json", "pipe2.safetensors"):  # release a stuck reader, if any
            try:
                os.close(os.open(runs / p, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass


def test_listing_and_resolve_agree_and_never_follow_symlinks(dirs, tmp_path):
    _, runs = dirs
    outside = tmp_path / "outside"
    src = _save(outside / "secret")
    _save(runs / "real")
    (runs / "link.json").symlink_to(src)
    (runs / "link.safetensors").symlink_to(src.with_suffix(".safetensors"))
    (runs / "alias.json").symlink_to(runs / "real.json")  # even a link that stays inside
    (runs / "alias.safetensors").symlink_to(runs / "real.safetensors")
    (runs / "linked-dir").symlink_to(outside, target_is_directory=True)
    _save(runs / ".live" / "abc" / "run")  # a dot folder: Train live's working files, never listed
    _save(runs / "a" / "b" / "c" / "d" / "too-deep")  # deeper than MAX_DEPTH
    listed = {e.ref for e in catalog.list_checkpoints()}
    assert listed == {"runs/real"}
    for ref in ("runs/link", "runs/alias", "runs/linked-dir/secret", "runs/.live/abc/run",
                "runs/a/b/c/d/too-deep", "runs/link.json"):
        with pytest.raises(catalog.CatalogError):
            catalog.resolve(ref)
    for e in catalog.list_checkpoints():  # every listed ref resolves, to the same file
        assert catalog.resolve(e.ref).path == e.path


@pytest.mark.parametrize("ref", ["runs/" + "a" * 5000, "runs/" + "a/" * 2500 + "x", "runs/" + "é" * 200,
                                 "bundled/" + "b" * 300, "runs/a\x00b"])
def test_long_or_odd_refs_are_one_line_catalog_errors(dirs, ref):
    with pytest.raises(catalog.CatalogError) as info:
        catalog.resolve(ref)
    assert len(str(info.value)) < 300 and "\n" not in str(info.value)


def test_simultaneous_uploads_of_one_name_keep_every_one(dirs, tmp_path, monkeypatch):
    """Exists-check then write lost uploads; the window is widened here by a slow ``Path.exists`` (the
    claim itself must not depend on a check made before the write)."""
    import threading
    import time

    _, runs = dirs
    files = _pair(tmp_path)
    real_exists = Path.exists

    def slow_exists(self, *a, **kw):
        out = real_exists(self, *a, **kw)
        time.sleep(0.05)
        return out

    n, barrier, got = 6, threading.Barrier(6), []

    def upload(i):
        barrier.wait()
        got.append(uploads.store_upload(files).ref)

    with monkeypatch.context() as m:
        m.setattr(Path, "exists", slow_exists)
        threads = [threading.Thread(target=upload, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert len(got) == n and len(set(got)) == n, got  # n uploads, n names: none lost
    assert len({e.ref for e in catalog.list_checkpoints()}) == n
    stored = sorted(p.name for p in (runs / uploads.UPLOAD_SUBDIR).iterdir())
    assert len(stored) == 2 * n and not any(p.startswith(".") for p in stored)  # no temporary file left
    for ref in got:
        checkpoint.load(catalog.resolve(ref).path)


def test_a_session_deletes_only_what_it_created(dirs, tmp_path, monkeypatch):
    _, runs = dirs
    monkeypatch.delenv(catalog.SHARED_ENV, raising=False)
    mine = uploads.store_upload(_pair(tmp_path, "mine"), owner="alice")
    theirs = uploads.store_upload(_pair(tmp_path, "theirs"), owner="bob")
    _save(runs / "from-the-cli")  # made outside the app: nobody's
    for ref, who in ((theirs.ref, "alice"), ("runs/from-the-cli", "alice"), (mine.ref, None)):
        with pytest.raises(catalog.CatalogError, match="not created by this session"):
            catalog.delete_user_checkpoint(ref, owner=who)
    assert catalog.may_change(mine, "alice") and not catalog.may_change(mine, "bob")
    catalog.delete_user_checkpoint(mine.ref, owner="alice")
    assert {e.ref for e in catalog.list_checkpoints()} == {theirs.ref, "runs/from-the-cli"}
    # a server started with GEOMLAB_SHARED_RUNS=1 shares everything
    monkeypatch.setenv(catalog.SHARED_ENV, "1")
    catalog.delete_user_checkpoint(theirs.ref, owner="alice")
    catalog.delete_user_checkpoint("runs/from-the-cli", owner=None)
    assert catalog.list_checkpoints() == []


def test_same_weights_finds_a_copy_of_a_checkpoint_by_its_weights(tmp_path):
    """The same run saved under two names: two folders with identical weights files. Another checkpoint, or
    the copy with one byte of its weights changed (same size), is not the same; a missing file is not."""
    import shutil

    assets = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
    if not (assets / "osm-rnn-o-s3").is_dir():
        pytest.skip("bundled checkpoints not present")
    for name in ("osm-rnn-o-s3", "osm-rnn-o-s5"):
        shutil.copytree(assets / name, tmp_path / name)
    shutil.copytree(assets / "osm-rnn-o-s3", tmp_path / "s3-copy")
    a, b, copy = (catalog.read_folder(tmp_path / n, tmp_path, "user") for n in ("osm-rnn-o-s3", "osm-rnn-o-s5", "s3-copy"))
    assert catalog.same_weights(a, copy) and not catalog.same_weights(a, b)
    raw = bytearray(copy.weights.read_bytes())
    raw[-1] ^= 1
    copy.weights.write_bytes(bytes(raw))
    os.utime(copy.weights, ns=(1, 1))  # another mtime: the cached hash is not used
    assert not catalog.same_weights(a, copy)
    copy.weights.unlink()
    assert not catalog.same_weights(a, copy)
