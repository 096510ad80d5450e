"""The training recipe of a run: its fields and their one set of defaults (:class:`Recipe`), and the checked
recipe with its schedules (:class:`TrainConfig`, which :class:`geomlab.training.trainer.Trainer` runs).

:class:`Recipe` is the plain description every run shares: :class:`geomlab.training.runs.RunSpec` is a recipe
plus a model and a task, so a training option is declared once, here. A caller whose values differ from these
defaults states them as a named preset (:data:`geomlab.training.runs.PRESETS`).

The learning rate at step ``s`` (1-based) is ``lr * s / warmup_steps`` during warm-up, then cosine from ``lr``
down to ``min_lr_ratio * lr`` at the last step (:meth:`TrainConfig.lr_at`); an optional sequence-length
curriculum trains shorter windows first (:meth:`TrainConfig.seq_len_at`). Design choices, documented in
``docs/pipeline.md``. The config is JSON-serialisable and stored in every checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

#: Largest seed: seeds are stored as signed 64-bit integers (torch's and numpy's generators).
SEED_MAX = 2**63 - 1

#: The range of each numeric recipe field: ``(lowest, highest, lowest_excluded)``; the one declaration the
#: command line checks its options against at parse time (:func:`recipe_option`). The caps are
#: design choices, far above any useful run: they refuse a typo before it costs memory or time, and a seed
#: outside signed 64 bits before torch says "Overflow when unpacking long long". ``eval_tokens`` 0 and
#: ``eval_every`` 0 are the command line's "all" and "only at the end".
RANGES: dict[str, tuple[float, float, bool]] = {
    "steps": (1, 10**9, False),
    "batch_size": (1, 2**20, False),
    "seq_len": (1, 2**20, False),
    "lr": (0.0, 1e6, True),
    "weight_decay": (0.0, 100.0, False),
    "warmup": (0.0, 10**9, False),
    "grad_clip": (0.0, 1e9, False),
    "seed": (0, SEED_MAX, False),
    "eval_every": (0, 10**9, False),
    "eval_tokens": (0, 2**50, False),
    "eval_stride": (1, 2**20, False),
    "log_every": (1, 10**9, False),
}


def recipe_option(name: str):
    """The argparse ``type=`` of the option of recipe field ``name`` (``train --steps``, ``bench gp --lr``): its
    range in :data:`RANGES` (the one declaration), checked by :func:`geomlab.core.argv.number`."""
    from geomlab.core.argv import number

    low, high, above = RANGES[name]
    return number(float if isinstance(low, float) else int, low, high, above=above)


@dataclass
class Recipe:
    """The training recipe's fields and their defaults (all JSON-serialisable; not checked here: a
    :class:`TrainConfig` built from them checks them).

    steps: optimizer steps in total. batch_size: windows per batch (across several processes the global
    batch, split evenly; :mod:`geomlab.training.distributed`). seq_len: window (context) length in
    tokens, also the evaluation window. lr: peak learning rate. weight_decay: AdamW decay (see module
    docstring). betas: AdamW betas. warmup: warm-up length as a fraction of ``steps`` (< 1) or a step
    count (>= 1, at most ``steps``). min_lr_ratio: final lr / peak lr of the cosine. grad_clip: max global
    gradient norm (0 = off). seed: seeds the batch sampler and the run's own generators for dropout
    (:class:`geomlab.core.rng.RunRNG`; never torch's global RNG). eval_every: validate (and checkpoint) every N
    steps (0 = only at the end). eval_tokens: targets used by the periodic validations (``None`` = the whole
    split; the final evaluation always uses the whole split). eval_stride: stride of the
    evaluation windows (``None`` = ``seq_len``, non-overlapping). log_every: progress callback period in
    steps. device: ``"auto"`` (CUDA, then MPS, then CPU) or a torch device string. final_eval: evaluate
    on the full valid and test splits at the end. length_curriculum: a sequence-length curriculum, pairs
    ``(seq_len, steps)`` trained in order before the remaining steps run at ``seq_len`` (e.g. ``((2, 1500),
    (4, 1500))``: 1500 steps on length-2 windows, then 1500 on length 4, then ``seq_len``); empty = off.
    Used for the S5 word problem, which OSM-RNN does not learn from random initialisation at full length
    (design choice, docs/zoo.md).
    """

    steps: int = 1000
    batch_size: int = 32
    seq_len: int = 128
    lr: float = 3e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    warmup: float = 0.02
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    eval_every: int = 200
    eval_tokens: int | None = 65536
    eval_stride: int | None = None
    log_every: int = 10
    device: str = "auto"
    final_eval: bool = True
    length_curriculum: tuple[tuple[int, int], ...] = ()

    def recipe_dict(self) -> dict[str, Any]:
        """The recipe's fields as a dict (``{name: value}`` of :class:`Recipe`'s fields only)."""
        return {f.name: getattr(self, f.name) for f in fields(Recipe)}


@dataclass
class TrainConfig(Recipe):
    """A checked :class:`Recipe` with its schedules (stored in every checkpoint). Raises ``ValueError`` for
    invalid values."""

    def __post_init__(self):
        self.betas = tuple(float(b) for b in self.betas)
        try:
            self.length_curriculum = tuple((int(n), int(k)) for n, k in self.length_curriculum)
        except (TypeError, ValueError):
            raise ValueError("length_curriculum must be a list of (seq_len, steps) pairs, got "
                             f"{self.length_curriculum!r}") from None
        for name in ("steps", "batch_size", "seq_len", "log_every"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if any(n < 1 or k < 1 for n, k in self.length_curriculum):
            raise ValueError(f"length_curriculum lengths and steps must be >= 1, got {self.length_curriculum}")
        if any(n > int(self.seq_len) for n, _ in self.length_curriculum):
            raise ValueError(f"length_curriculum lengths must be at most seq_len={self.seq_len} (the curriculum "
                             f"leads up to it), got {[n for n, _ in self.length_curriculum]}")
        if sum(k for _, k in self.length_curriculum) > int(self.steps):
            raise ValueError(f"length_curriculum has {sum(k for _, k in self.length_curriculum)} steps, more "
                             f"than steps={self.steps}")
        if not self.lr > 0 or not math.isfinite(self.lr):
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if not all(v >= 0 and math.isfinite(v) for v in (self.warmup, self.grad_clip, self.weight_decay)) \
                or self.eval_every < 0:
            raise ValueError("warmup, grad_clip, weight_decay and eval_every must be finite numbers >= 0")
        if self.warmup >= 1 and self.warmup_steps() > int(self.steps):
            raise ValueError(f"warmup of {self.warmup:g} steps is longer than the run ({self.steps} steps): give at "
                             f"most {self.steps} warm-up steps, or a fraction of the steps below 1")
        if self.eval_tokens is not None and int(self.eval_tokens) < 1:
            raise ValueError(f"eval_tokens must be None (whole split) or >= 1, got {self.eval_tokens}")
        if self.eval_stride is not None and not 1 <= int(self.eval_stride) <= int(self.seq_len):
            raise ValueError(f"eval_stride must be between 1 and seq_len={self.seq_len}, got {self.eval_stride}")
        if not 0 <= int(self.seed) <= SEED_MAX:
            raise ValueError(f"seed must be 0 to 2**63 - 1, got {self.seed}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """From a dict, ignoring unknown keys (older/newer checkpoints)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["betas"] = list(self.betas)
        d["length_curriculum"] = [list(pair) for pair in self.length_curriculum]
        return d

    def seq_len_at(self, step: int) -> int:
        """Training window length at 1-based ``step`` (``length_curriculum``, then ``seq_len``)."""
        done = 0
        for n, k in self.length_curriculum:
            done += k
            if step <= done:
                return n
        return int(self.seq_len)

    def tokens_through(self, step: int) -> int:
        """Training targets seen after ``step`` steps (per-step window lengths times ``batch_size``)."""
        total, done = 0, 0
        for n, k in self.length_curriculum:
            k = min(k, max(0, step - done))
            total, done = total + k * n, done + k
        return (total + max(0, step - done) * int(self.seq_len)) * int(self.batch_size)

    def warmup_steps(self) -> int:
        return int(round(self.warmup * self.steps)) if self.warmup < 1 else int(self.warmup)

    def lr_at(self, step: int) -> float:
        """Learning rate used for optimizer step ``step`` (1-based)."""
        w = self.warmup_steps()
        if w > 0 and step <= w:
            return self.lr * step / w
        span = max(1, self.steps - w)
        frac = min(1.0, max(0.0, (step - w) / span))
        return self.lr * (self.min_lr_ratio + (1 - self.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))
