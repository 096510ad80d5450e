"""A full disk (or any refused write) is one line naming the file and the step, for checkpoints, TensorBoard
logs and traces; the last good state is kept. The disk is simulated where the real writer is: safetensors
raises its own ``SafetensorError`` (not an ``OSError``) when the disk fills, TensorBoard's writer thread an
``OSError`` without a file name."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest
import torch

from geomlab.checkpoints import io as ckpt
from geomlab.commands.cli import main
from geomlab.data import Vocab
from geomlab.models import build_model

ENOSPC_TEXT = "Error while serializing: I/O error: No space left on device (os error 28)"  # what 0.8 says


def _safetensors_full(monkeypatch, after: int = 0):
    """``save_file`` raising safetensors' own disk-full error from its ``after + 1``-th call on."""
    import safetensors
    import safetensors.torch

    real, calls = safetensors.torch.save_file, []

    def save_file(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) > after:
            Path(filename).write_bytes(b"\0" * 7)  # a half-written temporary file
            raise safetensors.SafetensorError(ENOSPC_TEXT)
        return real(tensors, filename, metadata=metadata)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    return calls


def _model():
    torch.manual_seed(0)
    vocab = Vocab.from_text("hello world")
    return build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": 8}), vocab


@pytest.mark.parametrize("layout", ["flat", "folder"])
def test_a_full_disk_during_a_checkpoint_save_is_an_oserror_naming_the_file(tmp_path, monkeypatch, layout):
    model, vocab = _model()
    first = ckpt.save(tmp_path / "run", model, vocab, {"which": "old"}, layout=layout)
    before = sorted(p.name for p in first.parent.iterdir())
    _safetensors_full(monkeypatch)
    with pytest.raises(OSError) as err:
        ckpt.save(tmp_path / "run", model, vocab, {"which": "new"}, layout=layout)
    assert err.value.errno == errno.ENOSPC and "\n" not in str(err.value)
    assert "run" in str(err.value) and "No space left on device" in str(err.value)
    assert ckpt.load(first).card["which"] == "old"  # the last good checkpoint is kept
    assert sorted(p.name for p in first.parent.iterdir()) == before  # no temporary file left


def _train(text_file, out, *extra) -> int:
    return main(["train", "--model", "lstm", "--config", "hidden=12", "--data", str(text_file), "--steps", "6",
                 "--batch-size", "4", "--seq-len", "16", "--eval-every", "3", "--eval-tokens", "200",
                 "--log-every", "2", "--device", "cpu", "--out", str(out), "--name", "w", "--quiet",
                 *extra])


def test_train_on_a_full_disk_is_one_line_and_keeps_the_last_checkpoint(text_file, tmp_path, monkeypatch, capsys):
    calls = _safetensors_full(monkeypatch, after=1)  # the step-3 save works, the step-6 one fills the disk
    assert _train(text_file, tmp_path / "runs") == 1
    err = capsys.readouterr().err.strip()
    assert len(calls) == 2
    assert "\n" not in err and "Traceback" not in err and "SafetensorError" not in err, err
    assert err.startswith("error: step 6: could not write the checkpoint ") and "No space left on device" in err
    assert "the last good checkpoint" in err and "is kept" in err
    assert ckpt.load(tmp_path / "runs" / "w").card["steps"] == 3


def _tensorboard_full(monkeypatch, after: int = 0):
    """TensorBoard's record writer (run in its writer thread) failing as a full disk does."""
    from tensorboard.summary.writer import record_writer

    real, calls = record_writer.RecordWriter.write, []

    def write(self, data):
        calls.append(1)
        if len(calls) > after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", write)


def test_a_full_disk_under_the_tensorboard_log_names_the_step_and_folder(tmp_path, monkeypatch, capfd):
    from geomlab.training.log import LogWriteError, ScalarLog

    log = ScalarLog(tmp_path / "tb")
    _tensorboard_full(monkeypatch)
    with pytest.raises(LogWriteError) as err:
        for step in range(1, 200):
            log.write({"step": step, "loss": 1.0})
            log.flush()
    log.close()  # after a failure: quiet
    msg = str(err.value)
    assert isinstance(err.value, OSError) and err.value.errno == errno.ENOSPC
    assert msg.startswith(f"step {step}: could not write the TensorBoard log in {tmp_path / 'tb'}: ")
    assert "No space left on device" in msg and "\n" not in msg
    assert "Traceback" not in capfd.readouterr().err  # the writer thread printed nothing of its own
    assert not [t for t in threading.enumerate() if "AsyncWriter" in type(t).__name__]


def test_train_with_a_full_log_disk_is_one_line(text_file, tmp_path, monkeypatch, capfd):
    _tensorboard_full(monkeypatch, after=3)
    assert _train(text_file, tmp_path / "runs", "--log-dir", str(tmp_path / "tb")) == 1
    err = capfd.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("error: step ") and f"TensorBoard log in {tmp_path / 'tb'}" in err


def test_live_run_on_a_full_disk_says_so_in_one_line(tmp_path, monkeypatch):
    from geomlab.live import runner as live

    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    _safetensors_full(monkeypatch)
    spec = live.RunSpec.preset("app", kind="lstm", params=2_000, data="word-problem:S3", batch_size=4, seq_len=8,
                               steps=8, threads=1, device="cpu")
    run = live.LiveRun(spec).start()
    assert run.join(120)
    snap = run.snapshot()
    assert "SafetensorError" not in snap.message and "No space left on device" in snap.message, snap.message
    assert snap.message.startswith("training failed: step ") and "\n" not in snap.message


def _disk_full_after(monkeypatch, n_bytes: int) -> None:
    """Files that :mod:`geomlab.core.writes` opens take ``n_bytes`` bytes, then the disk is full."""
    from geomlab.core import writes

    real = os.fdopen

    class Full:
        def __init__(self, fd, mode):
            self.f = real(fd, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:n_bytes])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writes.os, "fdopen", Full)


def test_a_full_disk_during_a_trace_save_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    from geomlab.trace import files
    from helpers.models import get_trace

    tr = get_trace("lstm")
    path = tmp_path / "t.npz"
    files.save_trace(tr, path)
    old = path.read_bytes()

    _disk_full_after(monkeypatch, 10)
    with pytest.raises(OSError) as err:
        files.save_trace(tr, path)
    assert err.value.errno == errno.ENOSPC and str(path) in str(err.value) and "\n" not in str(err.value)
    assert path.read_bytes() == old and sorted(p.name for p in tmp_path.iterdir()) == ["t.npz"]


@pytest.mark.parametrize("what", ["sweep summary", "report"])
def test_a_full_disk_under_a_summary_or_report_names_the_file_and_keeps_the_old_one(tmp_path, monkeypatch, what):
    from geomlab.report.output import write_report
    from geomlab.training.sweep_study import write_json

    path = tmp_path / ("summary.json" if what == "sweep summary" else "results.md")
    path.write_text("the old one")
    _disk_full_after(monkeypatch, 10)
    with pytest.raises(OSError) as err:
        if what == "sweep summary":
            write_json({"best": 1}, path)
        else:
            write_report({"runs": []}, path, png=False)
    msg = str(err.value)
    assert err.value.errno == errno.ENOSPC and err.value.filename and "\n" not in msg
    assert "No space left on device" in msg and "was not written" in msg
    assert path.read_text() == "the old one"
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".part")]  # no temporary file left
