"""Energy steps: a CEM model run with other numbers of recursion steps per layer, or with its descent stopped
early, against the run as the model is set.

A CEM layer is ``S`` gradient steps on an energy (attention sub-block, then MLP sub-block, each ``S`` steps
from its input ``x^0``; Xu et al., arXiv 2605.07588). Here the recursion count of the whole stack is set with
``set_inference_steps`` (test-time recursion, restored afterwards, also on an error), and a layer asked to
take fewer steps than the stack keeps its iterate ``x^k`` from step ``k`` on: its iterate hook point
(``stack.layers.{l}.{0,1}.hook_iterate``) returns ``x^k`` again at every later step, so the sub-block returns
``x^k`` exactly, computed with the same arithmetic as a run of ``k`` steps (an iterate depends on its step,
never on the count).

Run past its trained steps, a descent can run away: the energy is unbounded below, and each step then falls
faster than the last while the iterate drifts off what the next layers were trained on. :func:`overshoot`
tells such a run from one that only keeps going down at its trained pace (the CEM energy page warns with it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np
import torch

from geomlab.models.hooks import hooks_attached, run_with_cache
from geomlab.trace.tracing import MODEL_LOCK  # the one lock around every run of a model (hooks are shared)
from geomlab.whatif.outcome import Outcome
from geomlab.whatif.run import as_tokens

__all__ = ["energy_steps", "RUNAWAY_RATE", "Overshoot", "runaway_rates", "overshoot"]

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


RUNAWAY_RATE = 10.0
"""A descent past its trained steps runs away when its energy falls, per step, more than this many times as
fast as it moved per step within the trained steps (:func:`runaway_rates`). Design choice: a descent that
keeps its trained pace stays near 1 however many steps it runs (the bundled ``cem-t2`` model's attention
sub-blocks: 1.1 to 1.2 at T = 16), one that accelerates passes 10 within a step or two (its layer-0 MLP: 37
at T = 3, 180 at T = 4, 10,629 at T = 16, where the demo text's surprisal is worse than a uniform guess's)."""


def runaway_rates(energy: np.ndarray, trained: int) -> np.ndarray:
    """``(L, B)`` how fast each layer's and sub-block's energy falls past the trained steps, relative to its
    pace within them: the fall below the lowest energy of steps ``0..trained``, per later step, over the
    range of steps ``0..trained`` per trained step (that range at least ``1e-6`` of the largest ``|energy|``,
    or 1). NaN where the run has no step past ``trained`` or no finite energy; 0 or less where the energy
    stays within or above that range. Above :data:`RUNAWAY_RATE`: the descent runs away.

    ``energy``: ``(L, B, S + 1)`` token-mean energy per recursion step (its change from step 0 gives the same
    rates); ``trained``: the recursion steps the model was trained with, at least 1. Raises ``ValueError``
    for another shape or ``trained < 1``. Source: Xu et al., arXiv 2605.07588 (a layer as ``T`` descent
    steps); the measure is a design choice."""
    e = np.asarray(energy, dtype=np.float64)
    if e.ndim != 3:
        raise ValueError(f"energy must be (layers, sub-blocks, steps + 1), got shape {e.shape}")
    k = int(trained)
    if k < 1:
        raise ValueError(f"trained must be at least 1 step, got {trained}")
    S = e.shape[2] - 1
    out = np.full(e.shape[:2], np.nan)
    if S <= k:
        return out
    with np.errstate(all="ignore"):
        e = np.where(np.isfinite(e), e, np.nan)
        head, tail = e[..., : k + 1], e[..., k + 1:]
        lo = np.nanmin(np.where(np.isnan(head), np.inf, head), axis=-1)
        hi = np.nanmax(np.where(np.isnan(head), -np.inf, head), axis=-1)
        low = np.nanmin(np.where(np.isnan(tail), np.inf, tail), axis=-1)
        scale = np.maximum(np.nanmax(np.where(np.isnan(e), 0.0, np.abs(e)), axis=-1), 1.0)
        pace = np.maximum(hi - lo, 1e-6 * scale) / k
        rate = (lo - low) / (S - k) / pace
    ok = np.isfinite(lo) & np.isfinite(low)
    out[ok] = rate[ok]
    return out


@dataclass(frozen=True)
class Overshoot:
    """A CEM trace whose descent runs away past its trained steps (:func:`overshoot`): ``trained`` and
    ``steps`` the trained T and this trace's; ``layer``, ``block`` (0 attention, 1 MLP) the sub-block that
    runs away fastest and ``rate`` its :func:`runaway_rates` value; ``others`` the ``(layer, block)`` of the
    others that run away, in depth order;
    ``lowest`` its lowest token-mean energy change from step 0 (a.u.) and ``trained_lowest`` the lowest
    within the trained steps; ``moved`` and ``trained_moved`` its token-mean displacement ``||x^t - h|| /
    rho`` at the last step and at step ``trained`` (NaN without a record of it); ``bits`` the trace's mean
    surprisal of what it is scored on (NaN where it cannot be scored) and ``uniform_bits`` a uniform guess's,
    ``log2 V``."""

    trained: int
    steps: int
    layer: int
    block: int
    rate: float
    others: tuple[tuple[int, int], ...]
    lowest: float
    trained_lowest: float
    moved: float
    trained_moved: float
    bits: float
    uniform_bits: float


def overshoot(tr: Any, task: Any = None, trained: int | None = None) -> Overshoot | None:
    """Whether CEM trace ``tr`` (a :class:`geomlab.trace.CEMTrace`) runs its descent past the trained steps
    into a runaway: some layer's sub-block above :data:`RUNAWAY_RATE` (:func:`runaway_rates` of its
    token-mean energy over the finite tokens); the :class:`Overshoot` of the fastest one, or None (also for a
    trace that is not CEM, or runs no step past ``trained``). ``trained``: the recursion steps the model was
    trained with (default ``tr.config["recursion_steps"]``: a trace at other inference steps records them
    as ``inference_recursion_steps``); ``task``: the checkpoint card's task, what the surprisal is scored on
    (:func:`geomlab.trace.scoring.score_predictions`). Computed once per trace, ``trained`` and scoring
    (:func:`geomlab.trace.base.cached`): the energy chart's caption, its "look for" line and the page's facts
    all ask. Design choice."""
    from geomlab.trace.base import cached
    from geomlab.trace.scoring import is_word_problem

    E = getattr(tr, "energies", None)
    k = trained if trained is not None else (getattr(tr, "config", None) or {}).get("recursion_steps")
    if E is None or not k or int(k) < 1:
        return None
    k = int(k)
    # a task that is not a word problem scores as None does: one entry for both
    scored = json.dumps(task, sort_keys=True, default=str) if is_word_problem(task) else None
    return cached(tr, ("overshoot", k, scored), lambda: _overshoot(tr, task, k))


def _overshoot(tr: Any, task: Any, k: int) -> Overshoot | None:
    """:func:`overshoot` of a trace with energies and ``k`` trained steps, computed."""
    E = np.asarray(tr.energies, dtype=np.float64)
    change = E - E[:, :, :1, :]
    with np.errstate(all="ignore"):
        mean = np.nanmean(np.where(np.isfinite(change), change, np.nan), axis=-1)
    rates = runaway_rates(mean, k)
    hit = np.nan_to_num(rates, nan=-np.inf) > RUNAWAY_RATE
    if not hit.any():
        return None
    l, b = np.unravel_index(int(np.argmax(np.where(hit, rates, -np.inf))), rates.shape)
    D = getattr(tr, "displacement", None)
    if D is not None:
        with np.errstate(all="ignore"):
            moved = np.nanmean(np.asarray(D, dtype=np.float64)[l, b], axis=-1)
    else:
        moved = np.full(E.shape[2], np.nan)
    from geomlab.trace.scoring import score_predictions

    logits = np.asarray(tr.logits)
    try:
        bits = score_predictions(tr, task).mean_bits
    except (IndexError, ValueError):  # tokens the outputs cannot score: the energies still say it
        bits = float("nan")
    return Overshoot(trained=k, steps=E.shape[2] - 1, layer=int(l), block=int(b), rate=float(rates[l, b]),
                     others=tuple((int(i), int(j)) for i, j in zip(*np.nonzero(hit)) if (i, j) != (l, b)),
                     lowest=float(np.nanmin(mean[l, b, k + 1:])),
                     trained_lowest=float(np.nanmin(mean[l, b, : k + 1])), moved=float(moved[-1]),
                     trained_moved=float(moved[k]), bits=bits,
                     uniform_bits=float(np.log2(logits.shape[-1])))
