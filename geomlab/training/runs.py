"""One run: what to train (:class:`RunSpec`) and the one way to build and run it.

A run is a model kind with a parameter budget or a config, a task in the one task syntax
(:mod:`geomlab.data.registry`: ``corpus:NAME``, ``word-problem:GROUP[:LENGTH]``, ``gp``, ``text`` or a file
path) and a training recipe (:class:`geomlab.training.config.Recipe`, one set of defaults; a caller with values of its
own names a preset, :data:`PRESETS`). Every caller describes its run with a :class:`RunSpec` and builds it here:

* ``python -m geomlab train`` (:mod:`geomlab.commands.train`): :func:`build_task`, :func:`build_model`,
  :func:`build` (the trainer writes the checkpoint folder);
* the zoo and the report (:func:`geomlab.training.zoo.train_and_evaluate`): :func:`run` (train, evaluate, time);
* the app's live runs (:class:`geomlab.live.runner.LiveRun`): :func:`build_task`, :func:`build_model`,
  :meth:`RunSpec.train_config` (the thread, probes and saves are the live run's);
* the GP benchmark (``geomlab.bench.gp``): :func:`run` with its own regressor model;
* sweeps (:func:`geomlab.training.sweep.train_trial`): :func:`build` of :func:`geomlab.training.sweep.trial_spec` per seed on
  the sweep's task (the trial's trainer is stopped by the pruner).

``build_*`` raise ``ValueError`` for a bad request (:class:`RunError`, :class:`geomlab.data.DataError`);
nothing here imports streamlit. Source: design choice.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from geomlab.training.config import Recipe, TrainConfig

#: Evaluation sequences per split of a run's synthetic task (word problem, GP): the app, the zoo and the
#: report (design choice: 256 keep an evaluation under a second on a CPU; the task's own default is 512).
N_EVAL = 256
#: Most steps a spec from the app may ask for (design choice: the app trains *tiny* models).
MAX_STEPS = 100_000
#: Bytes of memory each stored parameter needs while training: float32 weights, gradients and AdamW's two
#: moments (activations come on top). A model whose parameters need more than the machine's memory is
#: refused before it is allocated (:func:`check_model_fits`).
TRAIN_BYTES_PER_PARAM = 16


class RunError(ValueError):
    """A run request that cannot be honoured: a bad spec, a device this machine lacks (for the app's live runs
    also a wrong state or too many runs; ``geomlab.live.runner.LiveError`` is this class)."""


def is_osm(kind: str) -> bool:
    """Whether ``kind`` takes a matrix group: a kind of the OSM family (:mod:`geomlab.models.family`)."""
    from geomlab.models import kinds_of
    from geomlab.models.family import OSM

    return kind in kinds_of(OSM)


#: The preset values of each caller whose run differs from the one set of defaults (the fields of
#: :class:`RunSpec`: the model and task fields below, the recipe's in :class:`geomlab.training.config.Recipe`).
#: ``app``: the Train page's form and its live runs (the form's starting values are these; a short warm-up and a
#: cheap periodic validation). ``cli``: ``python -m geomlab train`` (the budget met within 5%, the task's own
#: evaluation size). ``zoo``: the zoo's and the report's recipes (:func:`geomlab.training.zoo.recipe`).
#: ``strict``: the budget met within 5% and the task's own evaluation size, nothing else (sweeps and the GP
#: bench). Source: design choice.
PRESETS: dict[str, dict[str, Any]] = {
    "app": {"data": "word-problem:Z5", "steps": 200, "batch_size": 16, "seq_len": 8, "lr": 5e-3, "warmup": 0.05,
            "eval_tokens": 4096},
    "cli": {"nearest_budget": False, "eval_sequences": None},
    "zoo": {"data": "corpus:tinyshakespeare", "steps": 1500, "batch_size": 16, "eval_tokens": 16384,
            "nearest_budget": False},
    "strict": {"nearest_budget": False},
}


def step_rules(preset: str, steps: int) -> dict[str, int]:
    """The recipe values a preset derives from the step count (each at least 1; design choice): ``app``:
    ``eval_every`` ``steps // 10`` (about ten validations per run) and ``log_every`` ``min(10, steps // 50)``;
    ``zoo``: ``eval_every`` ``steps // 5`` and ``log_every`` ``min(50, steps)``; other presets: none."""
    steps = int(steps)
    if preset == "app":
        return {"eval_every": max(1, steps // 10), "log_every": max(1, min(10, steps // 50 or 1))}
    if preset == "zoo":
        return {"eval_every": max(1, steps // 5), "log_every": max(1, min(50, steps))}
    return {}


@dataclass
class RunSpec(Recipe):
    """What to train: a training recipe (every field of :class:`geomlab.training.config.Recipe`, with its
    defaults: steps, batch_size, seq_len, lr, warmup, seed, eval_every, device, ...), a model and a task. All
    fields are plain values (the spec is shown, and stored on the app's cards). A caller with values of its own
    starts from a named preset (:meth:`preset`, :data:`PRESETS`).

    Model: kind: a registered model kind. group: matrix group for the OSM kinds (``O``, ``SO``, ``U``,
    ``SU``, ``T``, ``O-block``), ignored by others. params: target effective parameter count (the kind's
    ``config_for_budget``), or ``None`` for the kind's default size with ``model_overrides``.
    model_overrides: model config keys (fixed while the budget varies the width, or the whole config).
    nearest_budget: when the kind cannot meet ``params`` within 5%, build the nearest budget it can meet
    (±10% steps) or its default size and say so in the note (the app); ``False`` raises ``ValueError``
    (the command line, the zoo).

    Task: data: the task string (:mod:`geomlab.data.registry`). text: the text of ``data="text"``; text_name: the name of
    the file it came from (``None``: pasted), which names its corpus on the card. eval_sequences: evaluation sequences per split of a synthetic
    task (``None``: the task's default, 512). A word problem without ``:LENGTH`` is evaluated at ``seq_len``.

    Running: threads: torch CPU threads for the run (0 = leave torch's setting). nan_lr_factor: learning-rate
    factor when a live run resumes after a NaN. Nothing is checked on construction: :meth:`validate` (the app's
    requests) and :meth:`train_config` check.
    """

    kind: str = "lstm"
    group: str | None = None
    params: int | None = 20_000
    data: str = "word-problem:S3"
    text: str | None = None
    text_name: str | None = None
    threads: int = 0
    nan_lr_factor: float = 0.5
    model_overrides: dict[str, Any] = field(default_factory=dict)
    eval_sequences: int | None = N_EVAL
    nearest_budget: bool = True

    @classmethod
    def preset(cls, name: str, **values: Any) -> "RunSpec":
        """The spec of preset ``name`` (:data:`PRESETS`) with ``values`` over it; recipe values the preset
        derives from the steps (:func:`step_rules`) apply unless given. ``KeyError`` for an unknown preset,
        ``TypeError`` for an unknown field."""
        values = {**PRESETS[name], **values}
        derived = step_rules(name, values.get("steps", Recipe.steps))
        return cls(**{**derived, **values})

    def validate(self) -> None:
        """Check a request from the app: :class:`RunError` with a readable message for an impossible spec
        (steps outside 1..:data:`MAX_STEPS`, a budget under 100, a bad batch, length, learning rate or NaN
        factor, a task string that is not one of the forms without a file path, the GP task, an empty text)."""
        from geomlab.data.registry import parse_task

        if not 1 <= int(self.steps) <= MAX_STEPS:
            raise RunError(f"steps must be between 1 and {MAX_STEPS:,}, got {self.steps}")
        if self.params is not None and int(self.params) < 100:
            raise RunError(f"the parameter budget must be at least 100, got {self.params}")
        if int(self.batch_size) < 1 or int(self.seq_len) < 2:
            raise RunError("batch size must be >= 1 and sequence length >= 2")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise RunError(f"the learning rate must be a positive number, got {self.lr}")
        if not 0 < self.nan_lr_factor <= 1:
            raise RunError("nan_lr_factor must be in (0, 1]")
        try:
            form = parse_task(self.data, paths=False).form
        except ValueError as exc:
            raise RunError(str(exc)) from None
        if form == "gp":
            raise RunError("the Gaussian-process regression task trains a CEM regressor, not a token model: run "
                           "`geomlab bench gp`")
        if self.data == "text" and not (self.text or "").strip():
            raise RunError("the uploaded text is empty: paste or upload some text to train on")

    def label(self) -> str:
        """Short human description, e.g. ``osm-rnn · O · 20k · word-problem:S3 · 200 steps`` or ``lstm · 50k ·
        tinyshakespeare · 3,000 steps`` (a registered corpus by its name alone: a narrow box cuts the end)."""
        parts = [self.kind] + ([self.group] if self.group and is_osm(self.kind) else [])
        if self.params is not None:
            parts.append(f"{self.params // 1000}k" if self.params >= 1000 else str(self.params))
        parts += [self.data.removeprefix("corpus:") if self.data != "text" else self.text_label(),
                  f"{self.steps:,} steps"]
        return " · ".join(parts)

    def text_label(self) -> str:
        """What ``data="text"`` trains on, in words: the uploaded file's name or ``"pasted text"``."""
        return (self.text_name or "").strip() or "pasted text"

    def train_config(self) -> TrainConfig:
        """The checked recipe of this run (:class:`geomlab.training.config.TrainConfig` of the recipe fields).
        ``ValueError`` for invalid values."""
        return TrainConfig(**self.recipe_dict())

    def fixed_config(self) -> dict[str, Any]:
        """The model config keys the spec fixes: :attr:`model_overrides`, plus ``group`` for the OSM kinds."""
        fixed = dict(self.model_overrides)
        if self.group and is_osm(self.kind):
            fixed.setdefault("group", self.group)
        return fixed


# ---------------------------------------------------------------------------------------------- devices
def available_devices() -> list[str]:
    """Devices this machine can train on, ``"cpu"`` always last."""
    out = []
    if torch.cuda.is_available():
        out.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out + ["cpu"]


def check_device(device: str) -> str:
    """``device`` if this machine has it (``"auto"`` is always fine); else :class:`RunError` with a
    readable message (e.g. "no GPU")."""
    if device in ("auto", "cpu"):
        return device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RunError("No GPU (CUDA) on this machine: choose 'auto' or 'cpu'.")
    if device == "mps" and "mps" not in available_devices():
        raise RunError("Apple MPS is not available on this machine: choose 'auto' or 'cpu'.")
    return device


# ---------------------------------------------------------------------------------------------- building
def build_task(spec: RunSpec, *, download: bool = True):
    """The :class:`geomlab.data.Task` of ``spec.data`` (:func:`geomlab.data.registry.make_task`; a word
    problem without a length is evaluated at ``spec.seq_len``; synthetic tasks get ``spec.eval_sequences``
    evaluation sequences). ``download=False`` never fetches a corpus (the app). Raises ``ValueError``
    (:class:`geomlab.data.DataError`) for an unknown task, a corpus that is not on this machine, or a text
    that is empty or too short."""
    from geomlab.data.registry import make_task

    return make_task(spec.data, download=download, length=int(spec.seq_len), n_eval=spec.eval_sequences,
                     text=spec.text, text_name=spec.text_name)


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is a failed memory allocation (``MemoryError``, ``torch.OutOfMemoryError``, or the
    ``RuntimeError`` of torch's CPU allocator, "can't allocate memory")."""
    oom = getattr(torch, "OutOfMemoryError", None)
    if isinstance(exc, MemoryError) or (oom is not None and isinstance(exc, oom)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``), or ``None`` where it cannot be read."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def too_large(kind: str, n_params: int | None, detail: str = "") -> RunError:
    """The one-line :class:`RunError` of a model too large for this machine's memory (``n_params``: its stored
    parameter count when known)."""
    size = f" has {n_params:,} parameters and" if n_params else ""
    return RunError(f"{kind} with this config{size} is too large for this machine's memory{detail}; choose a "
                    "smaller config (or --params); nothing was trained")


def check_model_fits(config: dict[str, Any]) -> int | None:
    """Refuse a model config too large to train here, before any memory is allocated: the model is built on
    the ``meta`` device (no memory, no random draws) and :data:`TRAIN_BYTES_PER_PARAM` times its stored
    parameter count is compared with :func:`machine_memory`. Returns the stored parameter count, or ``None``
    when the kind cannot be built on ``meta`` (then nothing is checked here; :func:`build_model` still turns a
    failed allocation into one line). Raises :class:`RunError` (:func:`too_large`) for a model that does not
    fit, or whose tensors have more elements than torch can count; ``ValueError`` for an invalid config."""
    from geomlab.models import build_model as build, count_params

    kind = str(config.get("kind"))
    try:
        with torch.device("meta"):
            n = count_params(build(config), "stored")
    except ValueError:
        raise
    except RuntimeError as exc:
        if "overflow" in str(exc):  # e.g. "numel: integer multiplication overflow"
            raise too_large(kind, None, " (its tensors have more elements than can be counted)") from None
        return None
    except Exception:  # a kind whose construction needs real tensors: not checked here
        return None
    need, have = TRAIN_BYTES_PER_PARAM * n, machine_memory()
    if have is not None and need > have:
        raise too_large(kind, n, f": training needs about {need / 2**30:,.1f} GiB (float32 weights, gradients and "
                                 f"AdamW moments), the machine has {have / 2**30:,.1f} GiB")
    return n


def build_model(spec: RunSpec, vocab_size: int):
    """A freshly initialised model for ``spec``, built under :func:`geomlab.core.rng.seeded` with ``spec.seed`` (the
    weights ``torch.manual_seed(seed)`` would give; torch's global RNG is left as it was, and the same spec
    gives the same weights even while other runs train or build).

    Returns ``(model, note)``; ``note`` is ``""`` or says why the budget was not met. With
    ``spec.nearest_budget`` the config is :func:`geomlab.models.budget.config_near_budget` (the budget, else
    the nearest one the kind meets, else its default size; the trial builds of that search are seeded too);
    otherwise :func:`geomlab.models.budget.resolve_config` (the budget within 5%, or the default size when
    ``params`` is None). Raises ``ValueError`` (:class:`RunError` for an unknown kind with a budget) for an
    unknown kind, a bad config or (strict) a budget the kind cannot meet; :class:`RunError` for a model too
    large for this machine's memory (:func:`check_model_fits`, or a failed allocation), before training."""
    from geomlab.models import build_model as build, count_params, kinds
    from geomlab.models.budget import config_near_budget, resolve_config
    from geomlab.core.rng import seeded

    note = ""
    nearest = spec.nearest_budget and spec.params is not None
    if nearest:
        if spec.kind not in kinds():
            raise RunError(f"unknown model kind {spec.kind!r}; available: {', '.join(kinds())}")
        with seeded(int(spec.seed)):  # sizing builds trial models: their draws must not touch the global RNG
            cfg, note = config_near_budget(spec.kind, int(spec.params), vocab_size, **spec.fixed_config())
    else:
        cfg = resolve_config(spec.kind, vocab_size, spec.params, spec.fixed_config())
    n_params = check_model_fits(cfg)
    try:
        with seeded(int(spec.seed)):  # the run's own seeded init, never disturbed by (or disturbing) another run
            model = build(cfg)
    except (RuntimeError, MemoryError) as exc:
        if not out_of_memory(exc):
            raise
        raise too_large(spec.kind, n_params) from None
    if nearest and not note:
        n = count_params(model)
        if abs(n - spec.params) > 0.05 * spec.params:
            note = f"{spec.kind} cannot be built with exactly {spec.params:,} parameters; it has {n:,}"
    return model, note


@dataclass
class Run:
    """A built run: the task, the model, the :class:`geomlab.training.trainer.Trainer` and the budget note."""

    spec: RunSpec
    task: Any
    model: Any
    trainer: Any
    note: str = ""


def build(spec: RunSpec, *, task=None, model=None, out=None, card: dict[str, Any] | None = None,
          callback: Callable | None = None, progress_bar: bool = False, log_dir=None, download: bool = True,
          **logs) -> Run:
    """Build ``spec``'s task (unless ``task`` is given), model (unless ``model`` is given) and trainer
    (:class:`geomlab.training.trainer.Trainer` with :meth:`RunSpec.train_config`; ``out``, ``card``, ``callback``,
    ``progress_bar``, ``log_dir`` and ``logs``: ``tensorboard``, ``wandb`` as there). Raises ``ValueError`` as :func:`build_task`,
    :func:`build_model` and the trainer do."""
    from geomlab.training.trainer import Trainer

    task = task if task is not None else build_task(spec, download=download)
    note = ""
    if model is None:
        model, note = build_model(spec, task.vocab_size)
    trainer = Trainer(model, task, spec.train_config(), out=out, card=card, callback=callback,
                      progress_bar=progress_bar, log_dir=log_dir, **logs)
    return Run(spec, task, model, trainer, note)


# ---------------------------------------------------------------------------------------------- running
@dataclass
class RunOutcome:
    """What :func:`run` returns.

    model: the trained model (eval mode). task: the task it was trained on. config: the full model config.
    train_config: the :class:`geomlab.training.trainer.TrainConfig` used. metrics: final ``valid_*``/``test_*`` metrics
    of the task (full splits for corpora). train_time_s: wall-clock seconds of the training loop (no
    evaluation). tokens_per_s: training targets per second (``tokens_through(steps) / train_time_s``).
    history: the trainer's metrics history. cpu_time_s: process CPU seconds of the training loop (all
    threads; on a shared machine a steadier measure of cost than wall time). result: the trainer's
    :class:`geomlab.training.trainer.TrainResult`. wall_s: wall seconds of ``trainer.run()`` (training and evaluation).
    """

    model: Any
    task: Any
    config: dict[str, Any]
    train_config: Any
    metrics: dict[str, float]
    train_time_s: float
    tokens_per_s: float
    history: list[dict[str, Any]]
    cpu_time_s: float = 0.0
    result: Any = None
    wall_s: float = 0.0


def run(spec: RunSpec, *, task=None, model=None, final_eval_tokens: int | None = None,
        callback: Callable | None = None, progress_bar: bool = False) -> RunOutcome:
    """Build ``spec`` (:func:`build`, no files), train it and evaluate.

    Evaluation is the task's own (:meth:`geomlab.data.Task.evaluate`; for corpora: BPC over
    non-overlapping windows of ``seq_len`` with fresh state per window). ``final_eval_tokens=None`` leaves
    the final evaluation to the trainer (``final_eval`` of the train config); an integer evaluates both
    splits capped at that many targets (quick reports on large corpora). ``train_time_s`` counts only
    training steps. Raises ``ValueError`` for a bad spec and :class:`geomlab.training.trainer.TrainingError` for a
    diverged run."""
    marks: dict[str, float] = {}

    def _on_progress(p) -> None:  # CPU time at the last training step (before the final evaluation)
        if p.event == "step" and p.step >= p.total:
            marks["train_cpu"] = time.process_time()
        if callback is not None:
            callback(p)

    built = build(spec, task=task, model=model, callback=_on_progress, progress_bar=progress_bar)
    task, model, trainer = built.task, built.model, built.trainer
    tcfg = trainer.config
    t0, c0 = time.perf_counter(), time.process_time()
    result = trainer.run()
    wall = time.perf_counter() - t0
    train_time = float(trainer.elapsed_s) if trainer.elapsed_s > 0 else wall
    metrics = dict(result.metrics)
    if final_eval_tokens is not None:  # capped evaluation of both splits, same protocol
        for split in ("valid", "test"):
            m = task.evaluate(model, split, seq_len=int(tcfg.seq_len), device=trainer.device,
                              max_tokens=int(final_eval_tokens))
            metrics.update({f"{split}_{k}": v for k, v in m.items()})
    tokens = tcfg.tokens_through(int(tcfg.steps))
    model.eval()
    return RunOutcome(model=model, task=task, config=dict(getattr(model, "config", {}) or {}), train_config=tcfg,
                      metrics=metrics, train_time_s=train_time, tokens_per_s=tokens / max(train_time, 1e-9),
                      history=list(result.history), cpu_time_s=marks.get("train_cpu", time.process_time()) - c0,
                      result=result, wall_s=wall)


__all__ = ["MAX_STEPS", "N_EVAL", "PRESETS", "Run", "RunError", "RunOutcome", "RunSpec", "available_devices", "build",
           "build_model", "build_task", "check_device", "is_osm", "run", "step_rules"]
