"""Energy steps: a CEM model run with other numbers of recursion steps per layer, or with its descent stopped
early, against the run as the model is set.

A CEM layer is ``S`` gradient steps on an energy (attention sub-block, then MLP sub-block, each ``S`` steps
from its input ``x^0``; Xu et al., arXiv 2605.07588). Here the recursion count of the whole stack is set with
``set_inference_steps`` (test-time recursion, restored afterwards, also on an error), and a layer asked to
take fewer steps than the stack keeps its iterate ``x^k`` from step ``k`` on: its iterate hook point
(``stack.layers.{l}.{0,1}.hook_iterate``) returns ``x^k`` again at every later step, so the sub-block returns
``x^k`` exactly, computed with the same arithmetic as a run of ``k`` steps (an iterate depends on its step,
never on the count).
"""

from __future__ import annotations

from typing import Sequence, Union

import numpy as np
import torch

from geomlab.models.hooks import hooks_attached, run_with_cache
from geomlab.trace.tracing import MODEL_LOCK  # the one lock around every run of a model (hooks are shared)
from geomlab.whatif.outcome import Outcome
from geomlab.whatif.run import as_tokens

__all__ = ["energy_steps"]

Steps = Union[int, Sequence[int], None]
MAX_STEPS = 64


def _stack(model):
    stack = getattr(model, "stack", None)
    if stack is None or not hasattr(stack, "set_inference_steps") or not hasattr(model, "set_inference_steps"):
        kind = (getattr(model, "config", None) or {}).get("kind", type(model).__name__)
        raise ValueError(f"energy steps need a CEM model, got {kind!r}")
    return stack


def _per_layer(steps: Steps, stop_at: int | None, current: int, L: int) -> list[int]:
    """The number of steps each layer takes (its iterate ``x^k`` is what it returns)."""
    def check(k, what):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) <= MAX_STEPS:
            raise ValueError(f"{what} must be an int in 0..{MAX_STEPS}, got {k!r}")
        return int(k)

    if steps is None:
        ks = [current] * L
    elif isinstance(steps, (int, np.integer, bool)) or not isinstance(steps, (list, tuple, np.ndarray)):
        ks = [check(steps, "steps")] * L
    else:
        ks = [check(k, "each layer's steps") for k in steps]
        if len(ks) != L:
            raise ValueError(f"steps lists one count per layer: {L} layers, got {len(ks)}")
    if stop_at is not None:
        k = check(stop_at, "stop_at")
        if k > max(ks):
            raise ValueError(f"stop_at={k} is past the {max(ks)} steps the layers take")
        ks = [min(k, s) for s in ks]
    return ks


def _energy_names(L: int) -> list[str]:
    return [f"stack.layers.{l}.{b}.hook_energy" for l in range(L) for b in (0, 1)]


def _mean_energies(cache: dict, L: int, ks: list[int], S: int) -> np.ndarray:
    """``(L, 2, S + 1)`` token-mean energy of each iterate (NaN past a layer's own steps)."""
    out = np.full((L, 2, S + 1), np.nan)
    for l in range(L):
        for b in (0, 1):
            e = cache[f"stack.layers.{l}.{b}.hook_energy"][0].double().mean(-1).cpu().numpy()  # (S+1,)
            out[l, b, : ks[l] + 1] = e[: ks[l] + 1]
    return out


def _run(model, tokens, ks: list[int], S: int) -> tuple[torch.Tensor, dict]:
    """One run with ``S`` steps in the stack and layer ``l`` stopped at ``ks[l]``; ``(logits, cache)`` of its
    energies."""
    held: dict = {}
    hooks = []
    for l, k in enumerate(ks):
        if k >= S:
            continue
        for b in (0, 1):
            name = f"stack.layers.{l}.{b}.hook_iterate"

            def freeze(value, hook, k=k, name=name):
                if hook.step == k:
                    held[name] = value
                return held[name] if hook.step > k else None
            hooks.append((name, freeze))
    with hooks_attached(model, hooks):
        return run_with_cache(model, tokens, _energy_names(len(ks)))


def energy_steps(model, tokens, steps: Steps = None, stop_at: int | None = None) -> Outcome:
    """Run ``tokens`` with other recursion steps: ``steps`` per layer, or the descent stopped at ``stop_at``.

    Args:
        model: a ``cem`` model (a ``stack`` with ``set_inference_steps``).
        tokens: one text's ids, ``(T,)`` or ``(1, T)``.
        steps: ``None`` (the model's current count), an int (every layer), or a list of one int per layer;
            each in ``0..64`` (0: the layer returns its input).
        stop_at: stop every layer's descent at step ``stop_at`` (the iterate ``x^stop_at`` is what the layer
            returns; a layer with fewer steps keeps its own); ``None``: no stop.

    Returns:
        :class:`Outcome` (``position`` None: every position) with ``geometry``: ``energy_before``
        ``(L, 2, S_b + 1)`` and ``energy_after`` ``(L, 2, S_a + 1)`` the token-mean energy (anchor included)
        of each iterate ``x^t``, per layer and sub-block (0 attention, 1 MLP), NaN past a layer's own steps;
        ``steps_before`` ``(L,)`` and ``steps_after`` ``(L,)``.

    The "before" run is the model as set (eval mode: ``inference_recursion_steps`` or the trained
    ``recursion_steps``). The model runs in eval mode, without gradients, under the trace lock; its mode and
    its inference steps are restored afterwards, also on an error. Raises ``ValueError`` for a model that is
    not CEM, a batch, or counts outside ``0..64`` / a list of the wrong length. Source: Xu et al., arXiv
    2605.07588 (the layer as ``S`` descent steps); the intervention is a design choice.
    """
    stack = _stack(model)
    dev = next(model.parameters()).device
    tokens = as_tokens(tokens).to(dev)
    if tokens.shape[0] != 1:
        raise ValueError(f"energy_steps takes one text, got a batch of {tokens.shape[0]}")
    L = len(stack.layers)
    with MODEL_LOCK, torch.no_grad():
        was_training = model.training
        previous = stack.cfg.inference_recursion_steps
        model.eval()
        try:
            current = stack.steps
            ks = _per_layer(steps, stop_at, current, L)
            before, cache_b = _run(model, tokens, [current] * L, current)
            S = max(ks)
            if S != current:
                model.set_inference_steps(max(S, 1))
            after, cache_a = _run(model, tokens, ks, stack.steps)
        finally:
            model.set_inference_steps(previous)
            model.train(was_training)
    geometry = {"energy_before": _mean_energies(cache_b, L, [current] * L, current),
                "energy_after": _mean_energies(cache_a, L, ks, S),
                "steps_before": np.full(L, current), "steps_after": np.asarray(ks)}
    what = f"recursion steps per layer {ks} (the model's: {current})"
    return Outcome(tokens[0].cpu().numpy(), before[0].float().cpu().numpy(), after[0].float().cpu().numpy(),
                   None, what, geometry)
