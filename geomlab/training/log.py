"""TensorBoard event files of a training run: the run's metrics history, record by record, as scalars.

:class:`geomlab.training.trainer.Trainer` keeps a metrics history (the list of dicts saved in every checkpoint's JSON).
Given a log folder it also hands every record to a :class:`ScalarLog`, which writes each number as a
TensorBoard scalar at the record's ``step``, so the event files hold exactly the history's values (as
float32, TensorBoard's scalar type). View them with ``tensorboard --logdir DIR``.

Tags (:func:`scalar_tag`, design choice): ``valid_X`` -> ``valid/X``, ``test_X`` -> ``test/X``, any other
number -> ``train/KEY`` (``train/loss``, ``train/lr``, ``train/grad_norm``, ``train/tokens_per_s``,
``train/elapsed_s``); ``step`` and the ``final`` flag are not scalars.

Writer: ``torch.utils.tensorboard.SummaryWriter`` (needs the ``tensorboard`` package, pinned in
requirements.txt; the same package has the viewer and the event reader the tests use).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from geomlab.checkpoints.files import make_writable

#: Seconds between flushes of the event file (design choice: a live run shows up in TensorBoard within
#: seconds; SummaryWriter's default is 120).
FLUSH_SECS = 5


class LogDirError(ValueError):
    """A log folder that cannot take event files (a file, unwritable, not creatable) or a missing
    ``tensorboard`` package; the message is one line."""


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
        raise LogDirError("TensorBoard logging needs the tensorboard package: pip install -r requirements.txt "
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

        self._writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step, flush_secs=FLUSH_SECS)

    def write(self, record: dict[str, Any]) -> None:
        """One history record (``{"step": s, "loss": ..., ...}``): each finite real number as a scalar at step
        ``s`` under :func:`scalar_tag`; other values (flags, strings, NaN) are skipped."""
        step = int(record["step"])
        for key, value in record.items():
            tag = scalar_tag(key)
            if tag is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(tag, float(value), step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file (the log may not be written to afterwards)."""
        self._writer.close()
