"""The logs of one training run: every metrics-history record goes to a CSV file (always, when the run has a
folder), to TensorBoard event files (by default, when the ``tensorboard`` package is installed) and to
Weights & Biases (only when asked for and installed).

Where (design choice): the run folder is the checkpoint folder ``OUT/NAME/``; it gets ``metrics.csv``
(:data:`CSV_NAME`) and the TensorBoard event files, so ``tensorboard --logdir OUT`` lists every run by its
name. ``--log-dir DIR`` sends the event files to ``DIR`` instead. A finished or stopped run adds the
TensorBoard hparams summary (:func:`hparams_of`: the run's model and training config as hyperparameters;
the final ``valid/*`` and ``test/*`` scalars as its metrics), which TensorBoard's HPARAMS tab compares across
runs.

CSV (stdlib ``csv``): one row per history record, columns ``step``, ``loss`` (mean training loss of the
logging interval), ``lr``, ``elapsed_s`` (training seconds so far; an evaluation row repeats the row
before's), then the others in order of first appearance (``grad_norm``, ``tokens_per_s``, ``valid_nll``,
``valid_bpc``, ..., ``final``); a cell is empty
where a record has no value. A new column rewrites the file with the wider header; a resumed run rewrites
it from the checkpoint's history, so rows after the checkpoint's step (a run that went on past it) are gone.

W&B (``wandb``, the ``wandb`` extra: ``pip install 'geomlab[wandb]'``): ``wandb.init(mode=...)`` with the mode
asked for, else ``WANDB_MODE`` from the environment (``offline`` writes ``OUT/NAME/wandb/`` for a later
``wandb sync``); every record goes to ``wandb.log`` at its step, the final metrics to the run's summary.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from geomlab.core.extras import MissingExtraError, _installed

#: The CSV log's file name in the run folder.
CSV_NAME = "metrics.csv"
#: The columns every CSV log starts with.
FIRST_COLUMNS = ("step", "loss", "lr", "elapsed_s")

_TOLD: set[str] = set()  # the info lines already printed in this process


def _info_once(line: str) -> None:
    """Print ``line`` to stderr once per process (an optional logger that is skipped)."""
    if line not in _TOLD:
        _TOLD.add(line)
        print(f"info: {line}", file=sys.stderr)


def tensorboard_available() -> bool:
    """Whether the ``tensorboard`` package (the ``logging`` extra) is installed."""
    return _installed("tensorboard")


def hparams_of(model_config: dict[str, Any], train_config: dict[str, Any]) -> dict[str, Any]:
    """The run's hyperparameters for TensorBoard and W&B: ``kind``, ``model.KEY`` for each model config
    value, ``train.KEY`` for each training value; numbers, strings and booleans as they are, anything else
    (lists, ``None``) as its JSON text (TensorBoard takes only those three types)."""
    out: dict[str, Any] = {"kind": str(model_config.get("kind", ""))}
    for prefix, values in (("model", model_config), ("train", train_config)):
        for key, value in values.items():
            if prefix == "model" and key == "kind":
                continue
            ok = isinstance(value, (bool, str)) or (isinstance(value, (int, float)) and math.isfinite(value))
            out[f"{prefix}.{key}"] = value if ok else json.dumps(value)
    return out


class CsvLog:
    """The CSV log ``folder/metrics.csv`` (see the module docstring). ``history``: the records already in the
    run (a resumed run's), written first. Raises ``OSError`` when the file cannot be made."""

    def __init__(self, folder: str | Path, history: list[dict[str, Any]] = ()):
        self.path = Path(folder) / CSV_NAME
        self._elapsed: float | None = None
        self.rows: list[dict[str, Any]] = [self._row(r) for r in history]
        self.columns = list(FIRST_COLUMNS)
        for r in self.rows:
            self._widen(r)
        self._rewrite()

    def _widen(self, rec: dict[str, Any]) -> bool:
        new = [k for k in rec if k not in self.columns]
        self.columns += new
        return bool(new)

    def _rewrite(self) -> None:
        with open(self.path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, self.columns, restval="")
            w.writeheader()
            w.writerows(self.rows)

    def _row(self, rec: dict[str, Any]) -> dict[str, Any]:
        """``rec`` with ``elapsed_s`` carried over from the row before when it has none (an evaluation)."""
        row = dict(rec)
        if "elapsed_s" in row:
            self._elapsed = row["elapsed_s"]
        elif self._elapsed is not None:
            row["elapsed_s"] = self._elapsed
        return row

    def write(self, rec: dict[str, Any]) -> None:
        """Add one history record (a new column rewrites the file). Raises
        :class:`geomlab.training.log.LogWriteError` (one line naming the step and the file) when the system
        refuses."""
        rec = self._row(rec)
        self.rows.append(rec)
        try:
            if self._widen(rec):
                self._rewrite()
                return
            with open(self.path, "a", newline="", encoding="utf-8") as f:
                csv.DictWriter(f, self.columns, restval="").writerow(rec)
        except OSError as exc:
            from geomlab.training.log import LogWriteError

            raise LogWriteError(f"step {rec['step']}: could not write the CSV log {self.path}: "
                                f"{exc.strerror or exc}", int(rec["step"]), exc.errno) from None


class RunLogs:
    """Every log of one run, fed record by record by :class:`geomlab.training.trainer.Trainer`.

    Args:
        folder: the run folder for ``metrics.csv`` (``None``: no CSV).
        tensorboard_dir: the folder for TensorBoard event files (``None``: none), checked by
            :func:`geomlab.training.log.check_log_dir` (:class:`~geomlab.training.log.LogDirError`).
        hparams: :func:`hparams_of` the run, for the hparams summary and W&B's config.
        history: the records the run already has (a resumed run), for the CSV.
        purge_step: as :class:`geomlab.training.log.ScalarLog`.
        wandb: ``None`` (no W&B), or the ``wandb.init`` mode (``""``: ``WANDB_MODE``, else online);
            :class:`~geomlab.core.extras.MissingExtraError` when ``wandb`` is not installed.
        name: the run's name (W&B's run name and project default).
    """

    def __init__(self, folder: Path | None, tensorboard_dir: Path | None, hparams: dict[str, Any], *,
                 history: list[dict[str, Any]] = (), purge_step: int | None = None, wandb: str | None = None,
                 name: str = "run"):
        self.hparams = hparams
        self.csv = CsvLog(folder, history) if folder is not None else None
        self.scalars = None
        if tensorboard_dir is not None:
            from geomlab.training.log import ScalarLog

            self.scalars = ScalarLog(tensorboard_dir, purge_step=purge_step)
        self.wandb = _wandb_run(wandb, hparams, folder, name) if wandb is not None else None

    def write(self, rec: dict[str, Any]) -> None:
        """One history record to every log (see :meth:`geomlab.training.log.ScalarLog.write` for its errors)."""
        if self.csv is not None:
            self.csv.write(rec)
        if self.scalars is not None:
            self.scalars.write(rec)
        if self.wandb is not None:
            self.wandb.log({k: v for k, v in rec.items() if k != "step" and not isinstance(v, bool)},
                           step=int(rec["step"]))

    def finish(self, metrics: dict[str, float]) -> None:
        """The end of a finished or stopped run: the hparams summary (its metrics the ``valid/*``/``test/*``
        scalar tags of ``metrics``, whose values TensorBoard takes from those scalars) and W&B's summary."""
        if self.scalars is not None:
            from torch.utils.tensorboard.summary import hparams

            from geomlab.training.log import scalar_tag

            shown = {scalar_tag(k): float(v) for k, v in metrics.items()
                     if scalar_tag(k) and isinstance(v, (int, float)) and math.isfinite(v)}
            self.scalars.write_summaries(hparams(self.hparams, shown))
            self.scalars.flush()
        if self.wandb is not None:
            self.wandb.summary.update(dict(metrics))

    def close(self) -> None:
        """Close the event file and the W&B run (see :meth:`geomlab.training.log.ScalarLog.close`)."""
        try:
            if self.scalars is not None:
                self.scalars.close()
        finally:
            if self.wandb is not None:
                self.wandb.finish()


def _wandb_run(mode: str, hparams: dict[str, Any], folder: Path | None, name: str):
    """A started ``wandb`` run (``wandb.init``): project ``WANDB_PROJECT`` or ``geomlab``, files under
    ``folder`` when there is one. Raises :class:`MissingExtraError` when ``wandb`` is not installed."""
    check_wandb()
    import wandb

    return wandb.init(project=os.environ.get("WANDB_PROJECT", "geomlab"), name=name, config=hparams,
                      mode=mode or os.environ.get("WANDB_MODE") or None,
                      dir=str(folder) if folder is not None else None)


def check_wandb() -> None:
    """Raise :class:`MissingExtraError` (one line) when the ``wandb`` package is not installed."""
    if not _installed("wandb"):
        raise MissingExtraError("--wandb needs the wandb package: pip install 'geomlab[wandb]' (nothing was trained)",
                                name="wandb")


def default_tensorboard_dir(folder: Path | None, tensorboard: bool) -> Path | None:
    """The event files' folder of a run without ``--log-dir``: its run folder when ``tensorboard`` is on and
    the package is installed; when it is missing, one info line (per process) and ``None``."""
    if folder is None or not tensorboard:
        return None
    if not tensorboard_available():
        _info_once("tensorboard is not installed: no TensorBoard logs (pip install 'geomlab[logging]'); "
                   "metrics.csv is written")
        return None
    return folder
