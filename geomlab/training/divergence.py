"""A run that went numerically bad: :class:`TrainingError` and the checks that name the culprit (the loss,
the gradient of a named parameter, an overflowing gradient norm, or a named parameter). Design choice: a
diverged run stops with nothing written after the failure, so its last good checkpoint, if it wrote one,
stays on disk; the trainer adds which one (:attr:`TrainingError.kept`)."""

from __future__ import annotations

import math

import torch


class TrainingError(RuntimeError):
    """A run that went numerically bad. ``reason`` names the step and the quantity (loss, the gradient of a
    named parameter, or a named parameter) and ends "stopped"; ``kept``, set by the trainer that stopped,
    says what is left on disk ("the last good checkpoint (step 150) is kept", or that none was written).
    ``str()`` is both, joined by "; "."""

    def __init__(self, message: str, step: int | None = None, quantity: str | None = None,
                 kept: str | None = None):
        super().__init__(message)
        self.step = step
        self.quantity = quantity
        self.kept = kept

    @property
    def reason(self) -> str:
        """The failure alone, without what is kept."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return f"{self.reason}; {self.kept}" if self.kept else self.reason


#: A global gradient norm (before clipping) above this is a diverged run although every value is finite
#: (design choice: the fair campaign's healthy runs stay below 2 at every logged step; three runs whose norm
#: grew past 1e9 ended near-uniform, 5.2-5.8 valid BPC against a unigram's 4.8, with clipping keeping each
#: update finite).
EXPLODED_GRAD_NORM = 1e6


def check_step(step: int, lval: float, gval: float, params: list) -> None:
    """:class:`TrainingError` naming the culprit of a diverged step: a non-finite loss, the gradient of the
    first parameter whose gradient is non-finite (found before clipping spreads the NaN), a global gradient
    norm that overflows float32 although every gradient is finite, or one above :data:`EXPLODED_GRAD_NORM`.
    ``lval``, ``gval``: the step's loss and global gradient norm; ``params``: the trained ``(name,
    parameter)`` pairs."""
    if not math.isfinite(lval):
        raise TrainingError(f"step {step}: the training loss is {lval} (non-finite); stopped", step, "loss")
    if math.isfinite(gval):
        if gval > EXPLODED_GRAD_NORM:
            raise TrainingError(f"step {step}: the gradient norm exploded ({gval:.3g}, above "
                                f"{EXPLODED_GRAD_NORM:g}: lower the learning rate); stopped", step, "gradient norm")
        return
    bad = next((n for n, p in params if p.grad is not None and not torch.isfinite(p.grad).all()), None)
    if bad is None:  # every gradient is finite, but their global norm overflows float32
        raise TrainingError(f"step {step}: the gradient norm overflowed ({gval}; every "
                            "gradient is finite but huge: lower the learning rate); stopped", step, "gradient norm")
    raise TrainingError(f"step {step}: the gradient of parameter {bad!r} is non-finite; stopped", step,
                        f"gradient of {bad}")


def check_weights(model: torch.nn.Module, step: int) -> None:
    """:class:`TrainingError` naming the first parameter of ``model`` with a non-finite value (at ``step``)."""
    for name, p in model.named_parameters():
        if not torch.isfinite(p.detach()).all():
            raise TrainingError(f"step {step}: parameter {name!r} has non-finite values; stopped", step,
                                f"parameter {name}")
