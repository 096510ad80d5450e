"""Head ablation: one attention head of one layer switched off (its output zero) or made to look everywhere
alike (its weights uniform over the positions it may attend to), the model run on from there.

``transformer``, ``llama`` and ``grassmann-attn`` ablate through their attention's hook points
(:func:`geomlab.models.layers.attend`: ``hook_z`` per-head outputs, ``hook_pattern`` weights); ``osmformer``
through ``layers.l.hook_pattern`` (a head owns a block of the state's rows; its attention mean
``Hbar_i = sum_j alpha_ij H_j`` is zero in those rows when its weights are zero; the torus then runs its dense
path in both runs); ``cem``'s
attention is an energy summed over heads with step sizes ``eta_k``, so its head is ablated by ``eta_k = 0``
(``CEMAttention.head_scale``): the head then adds nothing to the energy or to any update step.

Source: head ablation (Michel, Levy & Neubig 2019, "Are Sixteen Heads Really Better than One?", §2: a head
masked to zero); uniform attention as a mean ablation of the pattern (design choice).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import numpy as np
import torch

from geomlab.models.hooks import hook_points, run_with_cache, run_with_hooks
from geomlab.whatif.outcome import Outcome
from geomlab.whatif.patching import _as_batch, _device, _eval

__all__ = ["ablate_head", "attention_heads", "MODES"]

MODES = ("zero", "uniform")


def attention_heads(model: torch.nn.Module) -> tuple[int, int]:
    """``(layers, heads)`` of a model whose heads :func:`ablate_head` can ablate; ``ValueError`` otherwise."""
    kind = getattr(model, "kind", None)
    if kind in ("transformer", "grassmann-attn"):
        return len(model.blocks), int(model.cfg.n_heads)
    if kind == "llama":
        return len(model.blocks), int(model.blocks[0].H)
    if kind == "cem":
        return len(model.stack.layers), int(model.stack.layers[0][0].w_q.shape[0])
    if kind == "osmformer" and model.n_layers:
        return int(model.n_layers), int(model.heads)
    raise ValueError(f"model kind {kind!r} has no attention heads to ablate (transformer, llama, "
                     "grassmann-attn, cem, osmformer)")


def _hook_name(model, layer: int, what: str) -> str:
    names = hook_points(model)
    if model.kind == "osmformer":  # the weights are the only per-head value: "zero" zeroes them
        what = "pattern"
    for name in (f"blocks.{layer}.hook_{what}", f"blocks.{layer}.mixer.hook_{what}", f"layers.{layer}.hook_{what}"):
        if name in names:
            return name
    raise ValueError(f"no hook point {what!r} in layer {layer}")


def uniform_pattern(T: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """``(T, T)`` causal uniform weights: ``1 / (i + 1)`` for ``j <= i``, 0 above the diagonal."""
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()
    rows = torch.arange(1, T + 1, dtype=dtype, device=device)[:, None]
    return causal.to(dtype) / rows


@contextmanager
def _cem_head_off(model, layer: int, head: int) -> Iterator[torch.Tensor]:
    attn = model.stack.layers[layer][0]
    eta = attn.eta.detach().clone()
    scale = torch.ones_like(eta)
    scale[head] = 0.0
    attn.head_scale = scale
    try:
        yield eta
    finally:
        attn.head_scale = None


def ablate_head(model: torch.nn.Module, tokens: Sequence[int], layer: int, head: int, mode: str = "zero",
                position: int | None = None) -> Outcome:
    """Run ``tokens`` with head ``head`` of layer ``layer`` ablated and return both runs.

    Args:
        model: ``transformer``, ``llama``, ``grassmann-attn``, ``osmformer`` (at least one layer) or ``cem``
            (run in eval mode, no gradients).
        tokens: 1-d token ids, length ``T``.
        layer, head: ``0 <= layer < L``, ``0 <= head < H``.
        mode: ``"zero"`` (the head's output ``z`` is 0; osmformer: its weights, so its rows of ``Hbar``) or
            ``"uniform"`` (its weights are ``1 / (i + 1)`` over ``j <= i``); ``cem``: ``"zero"`` only
            (``eta_head = 0``, in every recursion step).
        position: ablate only at this query position (None: at every position); not for ``cem``, whose
            step sizes are shared by all positions.

    Returns an :class:`~geomlab.whatif.outcome.Outcome`: ``before`` the logits ``(T, V)`` with the same hook
    point read (the same arithmetic: ``uniform`` forms the weights explicitly in both runs), ``after`` the
    ablated run's; ``geometry``: ``z_before`` ``(T, d_head)`` (zero), ``pattern_before`` / ``pattern_after``
    ``(T, T)`` (uniform; osmformer also zero) or ``eta_before`` / ``eta_after`` ``(H,)`` (cem). Raises
    ``ValueError`` for a kind without heads, a layer, head or position out of range, an unknown mode or one
    the kind does not offer.
    Source: Michel, Levy & Neubig (2019), §2; uniform: design choice."""
    L, H = attention_heads(model)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not 0 <= layer < L:
        raise ValueError(f"layer {layer} outside 0..{L - 1}")
    if not 0 <= head < H:
        raise ValueError(f"head {head} outside 0..{H - 1}")
    tok = _as_batch(tokens).to(_device(model))
    T = tok.shape[1]
    if position is not None and not 0 <= position < T:
        raise ValueError(f"position {position} outside 0..{T - 1}")
    where = "every position" if position is None else f"position {position}"
    what = f"layer {layer} head {head} ablated ({mode}) at {where}"
    with _eval(model):
        if model.kind == "cem":
            if mode != "zero" or position is not None:
                raise ValueError("cem ablates a head by eta_head = 0: mode 'zero' at every position only")
            before = model(tok)
            with _cem_head_off(model, layer, head) as eta:
                after = model(tok)
            kept = torch.arange(H, device=eta.device) != head
            geometry = {"eta_before": eta.cpu().numpy(), "eta_after": (eta * kept).cpu().numpy()}
        else:
            rows = slice(None) if position is None else slice(position, position + 1)
            name = _hook_name(model, layer, "z" if mode == "zero" else "pattern")
            before, cache = run_with_cache(model, tok, [name])
            seen = cache[name][0, head]

            def ablate(value: torch.Tensor, hook) -> torch.Tensor:
                out = value.clone()
                if mode == "zero":  # the head's output z, or (osmformer) its weights
                    out[:, head, rows] = 0.0
                else:
                    out[:, head, rows] = uniform_pattern(T, value.dtype, value.device)[rows]
                return out

            after = run_with_hooks(model, tok, [(name, ablate)])
            if name.endswith("hook_z"):
                geometry = {"z_before": seen.cpu().numpy()}
            else:
                new = seen.clone()
                new[rows] = 0.0 if mode == "zero" else uniform_pattern(T, seen.dtype, seen.device)[rows]
                geometry = {"pattern_before": seen.cpu().numpy(), "pattern_after": new.cpu().numpy()}
    return Outcome(tokens=tok[0].cpu().numpy(), before=before[0].float().cpu().numpy(),
                   after=after[0].float().cpu().numpy(), position=position, what=what,
                   geometry={k: np.asarray(v) for k, v in geometry.items()})
