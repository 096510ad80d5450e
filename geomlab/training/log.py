"""TensorBoard event files of a training run: the run's metrics history, record by record, as scalars.

:class:`geomlab.training.trainer.Trainer` keeps a metrics history (the list of dicts saved in every checkpoint's JSON).
Given a log folder it also hands every record to a :class:`ScalarLog`, which writes each number as a
TensorBoard scalar at the record's ``step``, so the event files hold exactly the history's values (as
float32, TensorBoard's scalar type). View them with ``tensorboard --logdir DIR``.

Tags (:func:`scalar_tag`, design choice): ``valid_X`` -> ``valid/X``, ``test_X`` -> ``test/X``, any other
number -> ``train/KEY`` (``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s``,
``train/elapsed_s``); ``step`` and the ``final`` flag are not scalars.

Writer: ``torch.utils.tensorboard.SummaryWriter`` (needs the ``tensorboard`` package, the
``logging`` extra; the same package has the viewer and the event reader the tests use). It writes in a thread
of its own and hands a failure (a full disk) to the next call; :class:`ScalarLog` reports it as one
:class:`LogWriteError` line naming the step and the folder, and the writer thread prints nothing of its own
(:func:`_quiet_writer_threads`).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

from geomlab.checkpoints.files import make_writable

#: Seconds between flushes of the event file (design choice: a live run shows up in TensorBoard within
#: seconds; SummaryWriter's default is 120).
FLUSH_SECS = 5


class LogDirError(ValueError):
    """A log folder that cannot take event files (a file, unwritable, not creatable) or a missing
    ``tensorboard`` package; the message is one line."""


class LogWriteError(OSError):
    """The TensorBoard event file could not be written (disk full, folder gone...): one line naming the step
    and the log folder (``.step``; ``.errno`` the system's error number when there is one). The run stops
    there, like a checkpoint that cannot be written; checkpoints already saved are kept."""

    def __init__(self, message: str, step: int | None = None, errno_: int | None = None):
        super().__init__(message)
        self.step = step
        if errno_ is not None:
            self.errno = errno_


_HOOK_LOCK = threading.Lock()


def _quiet_writer_threads() -> None:
    """Install (once) a ``threading.excepthook`` that stays silent for TensorBoard's writer threads and
    passes every other thread's error to the hook that was there. Design choice: such a thread keeps its
    error and raises it again in the next ``add_scalar``/``flush``/``close`` of its writer, where
    :class:`ScalarLog` reports it with the step and the folder, so its own traceback would only repeat it
    without them."""
    from tensorboard.summary.writer.event_file_writer import _AsyncWriterThread

    with _HOOK_LOCK:
        if getattr(threading.excepthook, "_geomlab_quiet", False):
            return
        previous = threading.excepthook

        def hook(args) -> None:
            if not isinstance(args.thread, _AsyncWriterThread):
                previous(args)

        hook._geomlab_quiet = True  # type: ignore[attr-defined]
        threading.excepthook = hook


def scalar_tag(key: str) -> str | None:
    """The TensorBoard tag of a history key: ``valid_bpc`` -> ``valid/bpc``, ``test_accuracy`` ->
    ``test/accuracy``, ``loss`` -> ``train/loss``; ``None`` for ``step`` and ``final`` (not scalars)."""
    if key in ("step", "final"):
        return None
    for split in ("valid", "test"):
        if key.startswith(split + "_"):
            return f"{split}/{key[len(split) + 1:]}"
    return f"train/{key}"


def check_log_dir(path: str | Path) -> Path:
    """Make ``path`` (and its parents) and check that a file can be written in it (one is created and
    removed). Returns the path. Raises :class:`LogDirError` (one line) when it is a file, cannot be made or
    is not writable, and when the ``tensorboard`` package is missing, so a run fails before training."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise LogDirError(f"cannot write TensorBoard logs to {folder}: it is a file, not a folder (choose "
                          "another log folder; nothing was trained)")
    try:
        make_writable(folder)
    except OSError as exc:
        raise LogDirError(f"cannot write TensorBoard logs to {folder}: {exc.strerror or exc} (choose another "
                          "log folder; nothing was trained)") from None
    try:
        import tensorboard  # noqa: F401 - SummaryWriter needs it
    except ImportError:
        raise LogDirError("TensorBoard logging needs the tensorboard package: pip install 'geomlab[logging]' "
                          "(nothing was trained)") from None
    return folder


class ScalarLog:
    """Writes history records to TensorBoard event files in ``log_dir``.

    Args:
        log_dir: the folder (checked with :func:`check_log_dir`; a new event file per writer).
        purge_step: when resuming at step ``s``, pass ``s + 1``: TensorBoard then drops events of earlier
            files at steps ``>= s + 1`` (those of a run that went on past its checkpoint, e.g. a NaN
            restart), so each step shows one value.

    Raises :class:`LogDirError` for a bad folder. Not thread-safe; one writer per run.
    """

    def __init__(self, log_dir: str | Path, purge_step: int | None = None):
        self.log_dir = check_log_dir(log_dir)
        from torch.utils.tensorboard import SummaryWriter

        _quiet_writer_threads()
        self._step: int | None = None  # the last step written
        self._failed = False
        try:
            self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step, flush_secs=FLUSH_SECS)
        except OSError as exc:
            raise self._error(exc, "at the start") from None

    def _error(self, exc: BaseException, when: str | None = None) -> LogWriteError:
        """The one-line :class:`LogWriteError` for ``exc`` raised by the writer (its first failure: later
        calls, :meth:`close` included, stay quiet)."""
        self._failed = True
        reason = getattr(exc, "strerror", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        when = when or (f"step {self._step}" if self._step is not None else "at the start")
        return LogWriteError(f"{when}: could not write the TensorBoard log in {self.log_dir}: {reason}",
                             self._step, getattr(exc, "errno", None))

    def write(self, record: dict[str, Any]) -> None:
        """One history record (``{"step": s, "loss": ..., ...}``): each finite real number as a scalar at step
        ``s`` under :func:`scalar_tag`; other values (flags, strings, NaN) are skipped. Raises
        :class:`LogWriteError` when the writer failed (now, or in its thread since the last call)."""
        step = int(record["step"])
        self._step = step
        try:
            for key, value in record.items():
                tag = scalar_tag(key)
                if tag is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                if math.isfinite(value):
                    self._writer.add_scalar(tag, float(value), step)
        except (OSError, ValueError) as exc:
            raise self._error(exc) from None

    def write_summaries(self, summaries) -> None:
        """Write ready-made ``Summary`` protos (the hparams plugin's, from
        ``torch.utils.tensorboard.summary.hparams``) to the event file. Raises :class:`LogWriteError` when the
        writer failed."""
        try:
            for summary in summaries:
                self._writer._get_file_writer().add_summary(summary)
        except (OSError, ValueError) as exc:
            raise self._error(exc) from None

    def flush(self) -> None:
        """Write what is queued to the event file. Raises :class:`LogWriteError` when the writer failed."""
        try:
            self._writer.flush()
        except (OSError, ValueError) as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        """Flush and close the event file (the log may not be written to afterwards). Raises
        :class:`LogWriteError` when the writer failed, unless a failure was already reported (then it
        only lets go of the file)."""
        try:
            self._writer.close()
        except (OSError, ValueError) as exc:
            if not self._failed:
                raise self._error(exc) from None
