"""A checkpoint pair is written as one unit, exclusively when asked, and read only from
regular files. The kill tests fork a child that saves and dies (``os._exit``, no clean-up, or SIGKILL) at
every file-system step of a save, or at random moments, and check that what is left loads as the old pair
or the new pair, never a mix. The same for checkpoint folders (``layout="folder"``), whose
``config.json`` and ``README.md`` must be the new save's or the old one's with the weights."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
import torch

from geomlab.checkpoints import catalog
from geomlab.checkpoints import io as ckpt
from geomlab.checkpoints.io import CheckpointError
from geomlab.data import Vocab
from geomlab.models import build_model

TEXT = "the quick brown fox jumps over the lazy dog"
VOCAB = Vocab.from_text(TEXT)
#: file-system calls a save may make; the kill tests die at the k-th one of them
STEPS = ("open", "replace", "rename", "link", "unlink", "chmod", "fsync", "close", "write", "ftruncate")

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _model(version: int):
    """A model whose every weight is ``version`` (so a weight says which save wrote it) and whose width
    alternates with it (so a config of another save does not fit the weights)."""
    m = build_model({"kind": "lstm", "vocab_size": VOCAB.size, "hidden": 6 + version % 2, "embedding_dim": 3})
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(float(version))
    return m


def _save(stem: Path, version: int, layout: str = "flat") -> Path:
    return ckpt.save(stem, _model(version), VOCAB, {"version": version, "steps": version}, layout=layout)


def _version(stem: Path) -> int:
    """Load the checkpoint and return its version, asserting the weights are the JSON's (never a mix) and,
    for a folder, that the model card is the same save's (its front matter's ``steps``)."""
    c = ckpt.load(stem)
    values = {float(v) for p in c.model.parameters() for v in p.detach().flatten().unique()}
    assert values == {float(c.card["version"])}, f"mixed pair: JSON says {c.card['version']}, weights {values}"
    if c.layout == "folder":
        import yaml

        front = yaml.safe_load((c.path / "README.md").read_text().split("---")[1])
        assert front["steps"] == c.card["version"], "README.md of another save"
    return int(c.card["version"])


LAYOUTS = pytest.mark.parametrize("layout", ["flat", "folder"])


def _leftovers(tmp_path: Path) -> list[Path]:
    """Dot files (journals, temporary weights) in ``tmp_path`` and in its checkpoint folders."""
    return [p for d in [tmp_path, *(q for q in tmp_path.iterdir() if q.is_dir())] for p in d.iterdir()
            if p.name.startswith(".")]


def _fork(fn, timeout: float = 60.0) -> int:
    """Run ``fn()`` in a forked child; return its exit status (the child never returns to pytest)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 70
        try:
            fn()
            code = 0
        except BaseException:  # noqa: BLE001
            code = 71
        finally:
            os._exit(code)
    end = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise TimeoutError("the saving child did not finish")
        time.sleep(0.01)


KILLED, COMPLETED = 9, 3


def _save_dying_at(stem: Path, version: int, k: int, layout: str = "flat") -> None:
    """In the child: save ``version``, dying with no clean-up at the k-th file-system call."""
    count = [0]

    def wrap(name):
        real = getattr(os, name)

        def inner(*a, **kw):
            count[0] += 1
            if count[0] == k:
                os._exit(KILLED)  # like SIGKILL: no finally, no except, no atexit
            return real(*a, **kw)
        return inner

    for name in STEPS:
        if hasattr(os, name):
            setattr(os, name, wrap(name))
    _save(stem, version, layout)
    os._exit(COMPLETED)


@needs_fork
@LAYOUTS
def test_a_save_killed_at_every_step_leaves_the_old_or_the_new_pair(tmp_path, layout):
    stem = tmp_path / "ck"
    _save(stem, 1, layout)
    outcomes = []
    for k in range(1, 200):
        for p in _leftovers(tmp_path):  # start each attempt from the complete old pair (and its leftovers)
            p.unlink()
        _save(stem, 1, layout)
        code = _fork(lambda: _save_dying_at(stem, 2, k, layout))
        assert code in (KILLED, COMPLETED), code
        v = _version(stem)  # old or new, never a mix, never an error
        outcomes.append(v)
        listed = {e.name: e.card.get("version") for e in _listing(tmp_path)}
        assert listed == {"ck": v}, (k, listed, v)  # the catalog lists the pair the loader loads
        if code == COMPLETED:
            assert v == 2
            break
    else:
        pytest.fail("the save never completed")
    assert outcomes[0] == 1 and outcomes[-1] == 2 and len(outcomes) >= 4


def _listing(folder: Path):
    old = os.environ.get("GEOMLAB_RUNS_DIR")
    os.environ["GEOMLAB_RUNS_DIR"] = str(folder)
    try:
        return catalog.list_checkpoints(bundled=False)
    finally:
        if old is None:
            os.environ.pop("GEOMLAB_RUNS_DIR")
        else:
            os.environ["GEOMLAB_RUNS_DIR"] = old


@needs_fork
@LAYOUTS
def test_a_save_killed_at_random_moments_leaves_a_whole_pair(tmp_path, layout):
    stem = tmp_path / "ck"
    _save(stem, 0, layout)
    rng = random.Random(15)

    def keep_saving():
        for v in range(1, 10_000):
            _save(stem, v, layout)

    seen = set()
    for _ in range(25):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                keep_saving()
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        seen.add(_version(stem))
    assert len(seen) > 1  # the kills landed in different saves


def test_a_mismatched_pair_is_refused(tmp_path):
    """New weights beside an old JSON, no journal: what a save replacing one file after the other left."""
    a, b = _save(tmp_path / "a", 1), _save(tmp_path / "b", 2)
    os.replace(b.with_suffix(".safetensors"), a.with_suffix(".safetensors"))
    with pytest.raises(CheckpointError, match="two different saves"):
        ckpt.load(a)
    assert [e.name for e in _listing(tmp_path)] == []  # and it is not listed


def test_an_interrupted_save_is_finished_by_the_loader(tmp_path):
    """The weights were renamed, the JSON was still in its journal: the loader takes the journal's JSON
    (the weights' save id names it) and finishes the rename."""
    stem = tmp_path / "ck"
    _save(stem, 1)
    new = _save(tmp_path / "new", 2)
    sid = json.loads(new.read_text())["save_id"]
    journal = stem.with_name(f".ck.json.{sid}.next")
    os.replace(new, journal)
    os.replace(new.with_suffix(".safetensors"), stem.with_suffix(".safetensors"))
    assert [e.card["version"] for e in _listing(tmp_path)] == [2]  # listed as the new pair (read-only)
    assert journal.exists()
    assert _version(stem) == 2
    assert not journal.exists() and json.loads(stem.with_suffix(".json").read_text())["card"]["version"] == 2


def test_exclusive_save_never_replaces(tmp_path):
    stem = tmp_path / "ck"
    _save(stem, 1)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ckpt.CheckpointExistsError, match="already exists"):
        ckpt.save(stem, _model(2), VOCAB, {"version": 2}, exclusive=True)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing added, nothing changed
    # an orphan half also blocks the name (it is never overwritten either)
    (tmp_path / "half.json").write_text("{}")
    with pytest.raises(ckpt.CheckpointExistsError):
        ckpt.save(tmp_path / "half", _model(2), VOCAB, {"version": 2}, exclusive=True)
    assert (tmp_path / "half.json").read_text() == "{}" and not (tmp_path / "half.safetensors").exists()
    assert _version(ckpt.save(tmp_path / "fresh", _model(3), VOCAB, {"version": 3}, exclusive=True)) == 3


@LAYOUTS
def test_exclusive_saves_of_one_name_at_once_keep_exactly_one(tmp_path, layout):
    stem = tmp_path / "race"
    barrier, results = threading.Barrier(6), []

    def go(v):
        m = _model(v)
        barrier.wait()
        try:
            ckpt.save(stem, m, VOCAB, {"version": v, "steps": v}, exclusive=True, layout=layout)
            results.append(v)
        except ckpt.CheckpointExistsError:
            results.append(None)

    threads = [threading.Thread(target=go, args=(v,)) for v in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [v for v in results if v is not None]
    assert len(results) == 6 and len(winners) == 1
    assert _version(stem) == winners[0]


def test_a_too_long_name_is_a_checkpoint_error_not_an_os_error(tmp_path):
    with pytest.raises(CheckpointError, match="too long"):
        _save(tmp_path / ("x" * 5000), 1)
    assert not any(tmp_path.iterdir())


def test_the_bundled_checkpoints_still_load_unchanged():
    """Every bundled checkpoint loads without being changed, including those whose weights carry no save id
    (the retrained entries' previous weights kept for the trace fixtures, flat pairs)."""
    root = Path(__file__).resolve().parents[1]
    folders = [root.parent / "assets" / "checkpoints", root / "fixtures" / "trace_v1" / "checkpoints"]
    found = sorted(p for f in folders for p in f.iterdir() if p.suffix == ".json" or p.is_dir())
    assert found
    before = {p: p.read_bytes() for f in folders for p in f.rglob("*") if p.is_file()}
    older = 0
    for p in found:
        c = ckpt.load(p)
        assert c.model is not None
        older += "save_id" not in c.meta  # older format: no save id, read as before
    assert older >= 2
    assert {p: p.read_bytes() for f in folders for p in f.rglob("*") if p.is_file()} == before


def test_a_fifo_is_never_opened_by_the_loader(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    p = _save(tmp_path / "ck", 1)
    p.with_suffix(".safetensors").unlink()
    os.mkfifo(p.with_suffix(".safetensors"))
    box = []
    t = threading.Thread(target=lambda: box.append(_try_load(p)), daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():  # unblock the stuck reader before failing
        fd = os.open(p.with_suffix(".safetensors"), os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("loading a checkpoint whose weights are a FIFO blocked")
    assert isinstance(box[0], CheckpointError) and "missing" in str(box[0])


def _try_load(p):
    try:
        ckpt.load(p)
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


def test_the_next_save_removes_journals_left_by_killed_saves(tmp_path):
    stem = tmp_path / "ck"
    _save(stem, 1)
    old, fresh = tmp_path / ".ck.json.dead.next", tmp_path / ".ck.json.busy.next"
    for p in (old, fresh):
        p.write_text("{}")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    _save(stem, 2)
    assert not old.exists() and fresh.exists()  # a recent one may be another process's save in flight
    assert _version(stem) == 2
