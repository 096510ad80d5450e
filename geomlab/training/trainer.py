"""One training loop for every model kind and task.

:class:`Trainer` runs AdamW with linear warm-up and cosine decay, gradient clipping, random-window batches
(from a :class:`geomlab.data.Task`), periodic validation and checkpoints. It serves both the command line
(a ``tqdm`` bar) and the app (a background thread: a progress callback receiving :class:`Progress`, a
thread-safe :meth:`Trainer.stop`). A run can be stopped and resumed from its checkpoint with identical
results for the same seed (model, optimizer, batch RNG, the run's own dropout RNG and step are saved).
A run never draws from torch's global RNG (:mod:`geomlab.core.rng`), so it is reproducible while another run
trains in the same process.

A non-finite loss, gradient or weight stops the run cleanly: no checkpoint is written after the failure
(the last good one stays on disk) and a :class:`TrainingError` names the step and the quantity
(:mod:`geomlab.training.divergence`).

The recipe (:class:`TrainConfig`, the learning-rate schedule and the length curriculum) is
:mod:`geomlab.training.config`; sampling from a trained model (:func:`generate`) is :mod:`geomlab.training.sampling`;
building a run (task, model, trainer) from one description is :mod:`geomlab.training.runs`; the checkpoint
a run writes and resumes from is :mod:`geomlab.training.checkpointing`; :func:`bpc` and :func:`evaluate` are
:mod:`geomlab.training.evaluate`.

Design choice (documented in ``docs/pipeline.md``): weight decay applies only to parameters with >= 2
dimensions that the model does not list in an optional ``no_weight_decay`` attribute (a set of parameter
names).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from geomlab.core.rng import RunRNG, draws_in_training
from geomlab.data.tasks import LN2, Task
from geomlab.training.checkpointing import Checkpointing, CheckpointWriteError
from geomlab.training.config import TrainConfig
from geomlab.training.distributed import Replicas
from geomlab.training.divergence import TrainingError, check_step, check_weights
from geomlab.training.evaluate import bpc, evaluate

__all__ = ["TrainingError", "CheckpointWriteError", "Progress", "TrainResult", "resolve_device", "disable_tf32",
           "bpc", "evaluate", "Trainer", "TrainConfig"]


@dataclass
class Progress:
    """What the progress callback receives.

    event: ``"start"``, ``"step"`` (every ``log_every`` steps), ``"eval"``, ``"done"``, ``"stopped"`` or
    ``"failed"``. loss: mean training loss (nats) over the last logging interval. train_bpc: ``loss / ln 2``
    for character LM tasks, else ``None``. valid: the latest validation metrics (``{}`` until the first);
    valid_bpc: ``valid["bpc"]`` if present. tokens_per_s: training targets per second over the last
    interval. eta_s: estimated seconds to the end. lr: current learning rate. message: a human line for
    ``"failed"``/``"done"``; checkpoint: path of the checkpoint just written, if any.
    """

    event: str
    step: int
    total: int
    loss: float | None = None
    train_bpc: float | None = None
    valid_bpc: float | None = None
    valid: dict[str, float] = field(default_factory=dict)
    tokens_per_s: float | None = None
    eta_s: float | None = None
    lr: float | None = None
    elapsed_s: float = 0.0
    message: str = ""
    checkpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TrainResult:
    """Outcome of :meth:`Trainer.run`: ``status`` ``"done"``, ``"stopped"`` or ``"failed"``; the final
    step; ``metrics`` = the final evaluation (``valid_*``/``test_*`` keys); ``checkpoint`` path or ``None``;
    ``error`` the :class:`TrainingError` of a failed run."""

    status: str
    step: int
    metrics: dict[str, float]
    checkpoint: Path | None
    error: TrainingError | None = None
    history: list[dict[str, Any]] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ helpers
def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/``None`` -> CUDA if available, else Apple MPS, else CPU; anything else as given.
    Raises ``ValueError`` for an unavailable or unknown device."""
    if device is None or str(device) == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device 'mps' requested but MPS is not available")
    return dev


def disable_tf32() -> None:
    """Full fp32 matmuls (TF32 changes matrix exponentials and orthogonality noticeably)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


# ------------------------------------------------------------------------------------------------ trainer
@dataclass
class _Interval:
    """Sums over the steps since the last logging step (loss, gradient norm, targets; ``start`` its wall
    clock) and the moving average of a step's wall time (for the ETA)."""

    start: float
    loss: float = 0.0
    gnorm: float = 0.0
    n: int = 0
    tokens: int = 0
    step_time_ema: float | None = None

    def add(self, loss: float, gnorm: float, tokens: int, dt: float) -> None:
        self.loss += loss
        self.gnorm += gnorm
        self.n += 1
        self.tokens += tokens
        self.step_time_ema = dt if self.step_time_ema is None else 0.9 * self.step_time_ema + 0.1 * dt

    def reset(self, now: float) -> None:
        self.loss, self.gnorm, self.n, self.tokens, self.start = 0.0, 0.0, 0, 0, now


def decayed(model: torch.nn.Module) -> list[str]:
    """Names of the trainable parameters of ``model`` that AdamW's weight decay acts on: those with >= 2
    dimensions that the model does not list in its optional ``no_weight_decay``. Source: design choice."""
    skip = set(getattr(model, "no_weight_decay", set()) or set())
    return [n for n, p in model.named_parameters() if p.requires_grad and p.dim() >= 2 and n not in skip]


class Trainer(Checkpointing):
    """Train ``model`` on ``task``.

    Args:
        model: a registered :class:`geomlab.models.SequenceModel` (its ``config`` is saved).
        task: a :class:`geomlab.data.Task` (:class:`~geomlab.data.LMTask`, word problem, GP, ...).
        config: a :class:`TrainConfig` (or dict).
        out: checkpoint location ``DIR/NAME`` (a folder ``DIR/NAME/`` in the layout of
            :mod:`geomlab.checkpoints.io`: config.json, model.safetensors, vocab.json, training_state.*,
            README.md and geomlab.json; an existing flat pair ``NAME.json`` + ``NAME.safetensors`` stays flat)
            or ``None`` for no files.
        card: extra card fields saved with every checkpoint.
        callback: ``f(Progress)`` called from the training thread; it may call :meth:`stop`.
        progress_bar: show a ``tqdm`` bar (command line).
        log_dir: a folder for TensorBoard event files of the metrics history (:mod:`geomlab.training.log`), or
            ``None`` (then the run folder ``out/`` has them when ``tensorboard`` and the package is installed).
            Checked here: :class:`geomlab.training.log.LogDirError` (a ``ValueError``) for a file, an
            unwritable folder or a missing ``tensorboard`` package.
        tensorboard: write TensorBoard event files to the run folder when ``log_dir`` is ``None``.
        run_dir: the run folder of a run without ``out`` (a sweep's trial): its logs only.
        wandb: ``None``, or log to Weights & Biases in this ``wandb.init`` mode (``""``: ``WANDB_MODE``).
            The run folder (a folder-layout ``out``) always gets ``metrics.csv``; see
            :mod:`geomlab.training.run_logs`.

    Across several processes (``torchrun``, :mod:`geomlab.training.distributed`) the trainer uses the default process
    group: ``config.batch_size`` is the global batch, split evenly across the ranks (``ValueError`` when it
    cannot be), the model trains wrapped in ``DistributedDataParallel``, and only rank 0 writes checkpoints,
    logs and the progress bar.

    ``run()`` returns a :class:`TrainResult`; with ``raise_errors=True`` (default) a failed run raises its
    :class:`TrainingError` after the ``"failed"`` callback. After a stop, ``run()`` again continues in the same
    process; :meth:`from_checkpoint` resumes from the saved files.
    """

    def __init__(self, model, task: Task, config: TrainConfig | dict | None = None, *,
                 out: str | Path | None = None, card: dict[str, Any] | None = None,
                 callback: Callable[[Progress], None] | None = None, progress_bar: bool = False,
                 log_dir: str | Path | None = None, tensorboard: bool = True, wandb: str | None = None,
                 run_dir: str | Path | None = None):
        self.config = config if isinstance(config, TrainConfig) else TrainConfig.from_dict(config or {})
        self.replicas = Replicas.current()
        self.replicas.check_batch(self.config.batch_size)
        self.model = model
        self.task = task
        self.out = Path(out) if out is not None else None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.card = dict(card or {})
        self.callbacks: list[Callable[[Progress], None]] = [callback] if callback else []
        self.progress_bar = progress_bar and self.replicas.is_main
        self.device = self.replicas.place(resolve_device(self.config.device))
        if log_dir is not None:  # checked on every rank, so a bad folder stops them all alike
            from geomlab.training.log import check_log_dir

            check_log_dir(log_dir)
        self.log_dir = Path(log_dir) if log_dir is not None and self.replicas.is_main else None  # rank 0 writes
        if self.replicas.is_main and self.log_dir is None:
            from geomlab.training.run_logs import default_tensorboard_dir

            self.log_dir = default_tensorboard_dir(self.run_folder(), tensorboard)
        self.wandb = wandb if self.replicas.is_main else None
        if self.wandb is not None:
            from geomlab.training.run_logs import check_wandb

            check_wandb()
        self.step = 0
        self.elapsed_s = 0.0
        self.history: list[dict[str, Any]] = []
        self.last_valid: dict[str, float] = {}
        self.last_checkpoint: Path | None = None
        self.last_checkpoint_step: int | None = None  # the step last_checkpoint holds
        self._stop = threading.Event()
        self._abort = threading.Event()  # set by abort(): no more steps, no more writes
        self._stop_agreed = False  # across processes: a stop asked on some rank, agreed on by all
        self._log = None  # the open logs while run() runs (geomlab.training.run_logs.RunLogs)
        self._net: torch.nn.Module = model  # what the training step calls: the model, or its DDP wrapper
        if hasattr(task, "check_context"):  # refuse a context the data cannot fill, before any step
            task.check_context(self.config.seq_len)
        self.model.to(self.device)
        self.optimizer = self._make_optimizer()
        self.generator = torch.Generator().manual_seed(int(self.config.seed))
        # the run's own generators for dropout and any other draw in the model (never torch's global RNG,
        # so a run is reproducible while another trains in the same process; geomlab.core.rng)
        self.rng = RunRNG(int(self.config.seed))
        self._draws = draws_in_training(self.model)  # only then does training route through the run's RNG

    # ------------------------------------------------------------------ public API
    def stop(self) -> None:
        """Ask the run to stop after the current step (thread-safe). ``run`` then saves a resumable
        checkpoint (if ``out``) and returns with status ``"stopped"``."""
        self._stop.set()

    def abort(self) -> None:
        """Ask the run to end now, writing nothing more (thread-safe; the CLI's second Ctrl-C): the next step
        boundary or checkpoint write raises ``KeyboardInterrupt`` (design choice: a ``KeyboardInterrupt``
        raised by a signal handler inside a finalizer is printed and dropped by Python; this flag is not)."""
        self._abort.set()

    def _check_abort(self) -> None:
        if self._abort.is_set():
            raise KeyboardInterrupt("training aborted")

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def add_callback(self, fn: Callable[[Progress], None]) -> None:
        self.callbacks.append(fn)

    def run(self, raise_errors: bool = True) -> TrainResult:
        """Train until ``config.steps``, :meth:`stop` or a numerical failure (see class docstring)."""
        self._net = self.replicas.wrap(self.model, self.device)
        self._stop_agreed = False
        self._log = self._open_log()
        try:
            return self._run(raise_errors)
        finally:
            if self._log is not None:
                self._log.close()
            self._log, self._net = None, self.model

    def _run(self, raise_errors: bool) -> TrainResult:
        """The run in four parts: the training steps (:meth:`_train_steps`), the failure report of a run that
        diverged (:meth:`_fail`), the final evaluation (:meth:`_final_evaluation`) and the last checkpoint
        (:meth:`_finish`)."""
        cfg = self.config
        disable_tf32()
        bar = None
        if self.progress_bar:
            from tqdm.auto import tqdm

            # a log file (no terminal) gets a line every 30 s, not one per refresh
            bar = tqdm(total=cfg.steps, initial=self.step, unit="step", dynamic_ncols=True,
                       mininterval=0.1 if sys.stderr.isatty() else 30.0)
        self._emit(Progress("start", self.step, cfg.steps, lr=cfg.lr_at(max(1, self.step + 1)),
                            elapsed_s=self.elapsed_s))
        error = None
        try:
            status = self._train_steps(bar)
        except TrainingError as exc:
            status, error = "failed", exc
        finally:
            if bar is not None:
                bar.close()
        if error is not None:
            return self._fail(error, raise_errors, checkpoint=True)
        try:
            check_weights(self.model, self.step)
        except TrainingError as exc:
            return self._fail(exc, raise_errors, checkpoint=False)
        metrics = self._final_evaluation() if status == "done" else {}
        return self._finish(status, metrics)

    def _train_steps(self, bar) -> str:
        """Optimizer steps until ``config.steps`` (``"done"``) or an agreed stop (``"stopped"``), with the
        periodic logging (:meth:`_log_interval`) and validation (:meth:`_validate`). Raises
        :class:`TrainingError` at the first non-finite loss, gradient or weight."""
        cfg = self.config
        t_run, elapsed0 = time.perf_counter(), self.elapsed_s
        meter = _Interval(time.perf_counter())
        params = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        while self.step < cfg.steps:
            self._check_abort()
            if self._stop_now():
                return "stopped"
            t0 = time.perf_counter()
            step = self.step + 1
            lr = cfg.lr_at(step)
            lval, gval, tokens = self._optimizer_step(step, lr, params)
            meter.add(lval, gval, tokens, time.perf_counter() - t0)
            self.elapsed_s = elapsed0 + (time.perf_counter() - t_run)
            if bar is not None:
                bar.update(1)
            is_last = step == cfg.steps
            if step % cfg.log_every == 0 or is_last:
                self._log_interval(step, lr, meter, bar)
            if (cfg.eval_every and step % cfg.eval_every == 0) and not is_last:
                self._validate(step, lr, lval)
                meter.start = time.perf_counter()  # evaluation time is not training time
        return "done"

    def _optimizer_step(self, step: int, lr: float, params: list) -> tuple[float, float, int]:
        """One optimizer step (1-based ``step`` at learning rate ``lr``): draw this rank's rows of the batch,
        forward and backward under the run's own generators, the gradient norm, the non-finite checks
        (:func:`~geomlab.training.divergence.check_step`), clipping, the AdamW update. Returns ``(loss,
        gradient norm, targets scored across the ranks)``; ``self.step`` becomes ``step``."""
        cfg = self.config
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        x, y = self.task.sample_batch(cfg.batch_size, cfg.seq_len_at(step), self.generator)
        x, y = self.replicas.shard(x, y)  # this rank's rows of the global batch
        x, y = x.to(self.device), y.to(self.device)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with self.rng.scope() if self._draws else contextlib.nullcontext():  # dropout: the run's generators
            loss = self.task.loss(self._net(x), y)
            loss.backward()
        with_grad = [p for _, p in params if p.grad is not None]
        gnorm = torch.nn.utils.get_total_norm([p.grad for p in with_grad])
        lval, gval = self._step_values(loss, gnorm)
        check_step(step, lval, gval, params)
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(with_grad, cfg.grad_clip, gnorm)
        self.optimizer.step()
        self.step = step
        return lval, gval, self.task.tokens_per_batch(x.shape[0] * self.replicas.world_size, x.shape[1])


    def _log_interval(self, step: int, lr: float, meter: "_Interval", bar) -> None:
        """A logging step: the interval's mean loss, gradient norm and tokens/s into the history (and
        TensorBoard), a ``"step"`` progress event, the bar's numbers; then a new interval."""
        cfg = self.config
        now = time.perf_counter()
        mean_loss = meter.loss / max(1, meter.n)
        tps = meter.tokens / max(1e-9, now - meter.start)
        eta = (cfg.steps - step) * (meter.step_time_ema or 0.0)
        rec = {"step": step, "loss": mean_loss, "lr": lr, "tokens_per_s": tps,
               "grad_norm": meter.gnorm / max(1, meter.n), "elapsed_s": self.elapsed_s}
        self._record(rec)
        self._emit(Progress("step", step, cfg.steps, loss=mean_loss, train_bpc=self._bpc(mean_loss),
                            valid_bpc=self.last_valid.get("bpc"), valid=dict(self.last_valid),
                            tokens_per_s=tps, eta_s=eta, lr=lr, elapsed_s=self.elapsed_s))
        if bar is not None:
            post = {"loss": f"{mean_loss:.3f}"}
            if "bpc" in self.last_valid:
                post["valid_bpc"] = f"{self.last_valid['bpc']:.3f}"
            bar.set_postfix(post)
        meter.reset(time.perf_counter())

    def _validate(self, step: int, lr: float, lval: float) -> None:
        """A periodic validation: weights checked finite, the valid split (``eval_tokens`` targets) evaluated
        and recorded, a checkpoint saved, an ``"eval"`` progress event."""
        cfg = self.config
        check_weights(self.model, step)
        self.last_valid = self.task.evaluate(self.model, "valid", seq_len=cfg.seq_len, device=self.device,
                                             max_tokens=cfg.eval_tokens, stride=cfg.eval_stride)
        self._record({"step": step, **{f"valid_{k}": v for k, v in self.last_valid.items()}})
        path = self._save()
        self._emit(Progress("eval", step, cfg.steps, loss=lval, train_bpc=self._bpc(lval),
                            valid_bpc=self.last_valid.get("bpc"), valid=dict(self.last_valid),
                            lr=lr, elapsed_s=self.elapsed_s, checkpoint=str(path) if path else None))

    def _fail(self, error: TrainingError, raise_errors: bool, checkpoint: bool) -> TrainResult:
        """A diverged run: ``error`` told what is on disk (:attr:`TrainingError.kept`: the last good checkpoint
        and its step, or that none was written yet), the ``"failed"`` progress event (naming the last good
        checkpoint when ``checkpoint``), nothing written; raises ``error`` when ``raise_errors``, else returns
        the ``"failed"`` result."""
        cfg = self.config
        if self.out is not None:
            error.kept = (f"the last good checkpoint (step {self.last_checkpoint_step:,}) is kept"
                          if self.last_checkpoint is not None and self.last_checkpoint_step is not None else
                          "no checkpoint of this run was written before it" + (
                              f" (the first comes with the validation at step {cfg.eval_every:,})"
                              if cfg.eval_every else ""))
        where = str(self.last_checkpoint) if checkpoint and self.last_checkpoint else None
        self._emit(Progress("failed", self.step, cfg.steps, elapsed_s=self.elapsed_s, message=str(error),
                            checkpoint=where))
        if raise_errors:
            raise error
        return TrainResult("failed", self.step, {}, self.last_checkpoint, error, self.history)

    def _final_evaluation(self) -> dict[str, float]:
        """The evaluation of a finished run: the full valid and test splits (``final_eval``), else the valid
        split capped at ``eval_tokens``; recorded in the history. Returns ``{"valid_*": ..., "test_*": ...}``."""
        cfg = self.config
        metrics: dict[str, float] = {}
        splits = ("valid", "test") if cfg.final_eval else ("valid",)
        for split in splits:
            m = self.task.evaluate(self.model, split, seq_len=cfg.seq_len, device=self.device,
                                   max_tokens=None if cfg.final_eval else cfg.eval_tokens, stride=cfg.eval_stride)
            metrics.update({f"{split}_{k}": v for k, v in m.items()})
            if split == "valid":
                self.last_valid = m
        self._record({"step": self.step, "final": True, **metrics})
        return metrics

    def _finish(self, status: str, metrics: dict[str, float]) -> TrainResult:
        """The end of a finished or stopped run: the checkpoint (resumable), the stop flag cleared (calling
        :meth:`run` again continues a stopped run), the ``"done"``/``"stopped"`` event, the result."""
        cfg = self.config
        path = self._save(final_metrics=metrics)
        if self._log is not None:
            self._log.finish(metrics or {f"valid_{k}": v for k, v in self.last_valid.items()})
        self._stop.clear()
        msg = (f"finished {self.step} steps" if status == "done" else f"stopped at step {self.step}")
        self._emit(Progress(status, self.step, cfg.steps, valid_bpc=self.last_valid.get("bpc"),
                            valid=dict(self.last_valid), elapsed_s=self.elapsed_s, message=msg,
                            checkpoint=str(path) if path else None))
        return TrainResult(status, self.step, metrics, path, None, self.history)

    # ------------------------------------------------------------------ internals
    def _bpc(self, loss: float) -> float | None:
        if self.task.kind == "lm" and self.task.vocab is not None and self.task.vocab.level == "char":
            return loss / LN2
        return None

    def _emit(self, progress: Progress) -> None:
        for fn in self.callbacks:
            fn(progress)

    def _step_values(self, loss: torch.Tensor, gnorm: torch.Tensor) -> tuple[float, float]:
        """The step's one host read (on an accelerator every read is a synchronisation): the loss
        (the mean over the ranks) and the gradient norm (the same on every rank after DDP's all-reduce)
        together. Across processes a stop asked on any rank travels in the same all-reduce and stops every
        rank after this step (:mod:`geomlab.training.distributed`)."""
        if not self.replicas.distributed:
            lval, gval = torch.stack([loss.detach().float(), gnorm.detach().float()]).tolist()
            return lval, gval
        stop = torch.tensor(float(self._stop.is_set()), device=loss.device)
        lmean, stop_any = self.replicas.mean(torch.stack([loss.detach().float(), stop]))
        lval, gval, stop_any = torch.stack([lmean, gnorm.detach().float(), stop_any]).tolist()
        self._stop_agreed = stop_any > 0
        return lval, gval

    def _stop_now(self) -> bool:
        """Whether to stop at this step boundary: :meth:`stop` was called; across processes, a stop asked on
        any rank and agreed on in the last step's all-reduce (never one rank alone: the others would wait
        for it in the next all-reduce)."""
        return self._stop_agreed if self.replicas.distributed else self._stop.is_set()

    def _record(self, rec: dict[str, Any]) -> None:
        """Append ``rec`` to the metrics history and to the run's logs when it has them."""
        self.history.append(rec)
        if self._log is not None:
            self._log.write(rec)

    def run_folder(self) -> Path | None:
        """The folder of the run's logs, on rank 0: ``out/`` in the folder layout, else ``run_dir``; ``None``
        without either, for a flat pair and on the other ranks."""
        if not self.replicas.is_main:
            return None
        if self.out is None or (self.out.parent / (self.out.name + ".json")).is_file():
            return self.run_dir
        return self.out

    def _open_log(self):
        """The run's :class:`geomlab.training.run_logs.RunLogs` (rank 0 only), or ``None`` when it has none.
        A resumed run purges events after its step that an earlier writer left (a run that went on past the
        checkpoint) and rewrites the CSV from its history."""
        folder = self.run_folder()
        if folder is None and self.log_dir is None and self.wandb is None:
            return None
        from geomlab.training.run_logs import RunLogs, hparams_of

        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        return RunLogs(folder, self.log_dir, hparams_of(dict(self.model.config), self.config.to_dict()),
                       history=self.history, purge_step=self.step + 1 if self.step else None, wandb=self.wandb,
                       name=folder.name if folder is not None else "run")

    def _save(self, final_metrics: dict[str, float] | None = None) -> Path | None:
        """:meth:`save_checkpoint` on rank 0; other ranks write nothing (``None``)."""
        self._check_abort()
        if not self.replicas.is_main:
            return None
        return self.save_checkpoint(final_metrics=final_metrics)

    def _make_optimizer(self) -> torch.optim.Optimizer:
        cfg = self.config
        names = set(decayed(self.model)) if cfg.weight_decay > 0 else set()
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            if p.requires_grad:
                (decay if name in names else no_decay).append(p)
        if cfg.weight_decay > 0 and not decay:
            raise ValueError(f"weight_decay {cfg.weight_decay:g} would act on no parameter of this "
                             f"{getattr(self.model, 'kind', 'model')} (every matrix is in its no_weight_decay)")
        groups = [g for g in ({"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}) if g["params"]]
        if not groups:
            raise ValueError("the model has no trainable parameters")
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)

