"""Steer an OSM model's state along its group: the state ``H_t`` of one layer at one position replaced by
``H_t exp(eps X)``, ``X`` a unit vector of the group's Lie algebra, and the forward pass carried on from it.

``osm-rnn``: the per-step hook point ``hook_state`` at step ``position`` (``H_{t+1}`` after token ``t``; the
recurrence carries the steered state to every later token). ``osmformer``: ``layers.{layer}.hook_state`` at
``position`` (the torus's diagonal path: ``diag.layers.{layer}.hook_state``, the ``(B, T, d)`` complex
diagonals); later layers and, through attention, later positions read the steered state. The product is
taken in float64 from the group's own exponential (:mod:`geomlab.geometry.groups`) and cast back, so the
steered state stays on the group to float32 rounding. Source: Nunley, arXiv 2602.18417 (the state update
``H <- H exp(Phi)``); the intervention is a design choice.
"""

from __future__ import annotations

from typing import Union

import numpy as np
import torch

from geomlab.models.hooks import hook_points, run_with_cache, run_with_hooks
from geomlab.trace.tracing import MODEL_LOCK  # the one lock around every run of a model (hooks are shared)
from geomlab.whatif.outcome import Outcome
from geomlab.whatif.run import as_tokens

__all__ = ["steer_state", "steer_directions", "Direction"]

Direction = Union[str, tuple]
OSM_KINDS = ("osm-rnn", "osmformer")


def _check_osm(model) -> None:
    kind = (getattr(model, "config", None) or {}).get("kind")
    if kind not in OSM_KINDS or not hasattr(model, "group"):
        raise ValueError(f"steering on the group needs an OSM model ({', '.join(OSM_KINDS)}), got {kind!r}")


def steer_directions(model) -> list[str]:
    """Names of the group's Lie-algebra basis elements, index ``k`` for ``("generator", k)``: ``"rotation
    (p,q)"`` (real skew part in the plane of axes ``p, q``), ``"i-symmetric (p,q)"`` (imaginary symmetric
    part), ``"phase p"`` (one diagonal entry, ``i E_pp``), ``"diagonal k"`` (SU's traceless diagonal basis),
    counting axes from 1; a list of ``group.dim`` strings (for a UI). Raises ``ValueError`` for a model that
    is not OSM. Design choice."""
    _check_osm(model)
    g = model.group
    basis = g.from_coords(torch.eye(g.dim, dtype=torch.float64))
    names = []
    for k, G in enumerate(basis):
        off = torch.nonzero(torch.triu(G.abs() > 1e-12, 1))
        if not len(off):  # diagonal only: one phase, or SU's traceless combinations
            on = torch.nonzero(torch.diagonal(G).abs() > 1e-12).flatten()
            names.append(f"diagonal {k}" if len(on) > 1 else f"phase {int(on[0]) + 1}")
            continue
        p, q = (int(i) for i in off[0])
        imag = G.is_complex() and abs(float(G[p, q].imag)) > 1e-12
        names.append(f"{'i-symmetric' if imag else 'rotation'} ({p + 1},{q + 1})")
    return names


def _points(model, layer: int) -> tuple[str, list[str], str]:
    """``(state point, tangent points, how the state is held)``: ``"step"`` (osm-rnn, per-step ``(B, n, n)``),
    ``"dense"`` (``(B, T, n, n)``) or ``"diagonal"`` (``(B, T, d)`` complex diagonals, the torus). The
    tangent points in order of preference (osmformer: attention, then grounding)."""
    if model.config["kind"] == "osm-rnn":
        if layer != 0:
            raise ValueError(f"osm-rnn has one layer (0), got layer {layer}")
        return "hook_state", ["hook_tangent"], "step"
    L = model.n_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < L:
        raise ValueError(f"layer must be an int in 0..{L - 1}, got {layer!r}")
    if getattr(model, "_diagonal", False) and model.config["position"] != "rotation":
        pre = f"diag.layers.{layer}."
        return pre + "hook_state", [pre + "hook_attn_tangent", pre + "hook_ground_tangent"], "diagonal"
    pre = f"layers.{layer}."
    return pre + "hook_state", [pre + "hook_attn_tangent", pre + "hook_ground_tangent"], "dense"


def _held_state(value: torch.Tensor, position: int) -> torch.Tensor:
    """The state at ``position`` of sequence 0 as the model holds it: ``(n, n)`` in the arithmetic
    representation (realified ``2d x 2d`` for ``complex_mode="real"``), or ``(d,)`` complex on the torus's
    diagonal path (cached per-step values have the steps on axis 1, like the others their positions)."""
    return value[0, position]


def _native(model, held: torch.Tensor, how: str) -> torch.Tensor:
    """A held state as a native ``(d, d)`` matrix (complex for U/SU/T)."""
    return torch.diag_embed(held) if how == "diagonal" else model._to_native(held)


def _direction(model, direction: Direction, tangents: list[torch.Tensor], how: str, position: int,
               seed: int) -> tuple[torch.Tensor, str]:
    """A unit algebra element ``X`` (native ``(d, d)``, float64/complex128; unit for ``Re tr(A^* B)``) and
    its description."""
    g = model.group
    if isinstance(direction, tuple) and len(direction) == 2 and direction[0] == "generator":
        k = direction[1]
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= int(k) < g.dim:
            raise ValueError(f"generator index must be an int in 0..{g.dim - 1}, got {k!r}")
        c = torch.zeros(g.dim, dtype=torch.float64)
        c[int(k)] = 1.0
        what = f"generator {int(k)} ({steer_directions(model)[int(k)]})"
    elif direction == "random":
        gen = torch.Generator().manual_seed(int(seed))
        c = torch.randn(g.dim, generator=gen, dtype=torch.float64)
        c = c / c.norm()
        what = f"a random unit direction (seed {seed})"
    elif direction == "tangent":
        # the first non-zero of the layer's tangents (osmformer's attention tangent is 0 where a position
        # attends only to itself, e.g. position 0: then its grounding tangent)
        for i, tangent in enumerate(tangents):
            phi = tangent[0, position]
            if how == "diagonal":  # the diagonal path's tangents are algebra coordinates already
                c = phi.to(torch.float64)
            else:
                c = g.to_coords(model._to_native(phi)).to(torch.float64)
            n = c.norm()
            if torch.isfinite(n) and float(n) > 0.0:
                break
        else:
            raise ValueError(f"the layer's own update at position {position} is zero or not finite: no direction "
                             "(an osmformer's position 0 has no update in any layer: steer a later one)")
        c = c / n
        what = "the layer's own update (normalised)" if len(tangents) == 1 else (
            f"the layer's {('attention', 'grounding')[i]} tangent (normalised)")
    else:
        raise ValueError(f"direction must be ('generator', k), 'tangent' or 'random', got {direction!r}")
    return g.from_coords(c.cpu()), what


def _steered(model, held: torch.Tensor, X: torch.Tensor, eps: float, how: str) -> torch.Tensor:
    """``H exp(eps X)`` for a held state (:func:`_held_state`), in the representation it is held in: the
    product is taken in float64/complex128 and cast back to the state's dtype; ``exp(0) = I`` exactly, so
    ``eps = 0`` returns the state bit for bit."""
    wide = torch.complex128 if X.is_complex() else torch.float64
    E = torch.eye(X.shape[-1], dtype=wide) if eps == 0 else model.group.exp((eps * X).to(wide))
    if how == "diagonal":  # diagonal unitaries multiply entrywise
        out = held.to(torch.complex128).cpu() * torch.diagonal(E)
    else:
        Eg = model._to_geo(E)
        out = held.to(Eg.dtype).cpu() @ Eg
    return out.to(held.dtype).to(held.device)


def _replace(how: str, value: torch.Tensor, held: torch.Tensor, position: int) -> torch.Tensor:
    """The hook's value with the held state ``held`` put at ``position`` (osm-rnn: the step's whole value)."""
    if how == "step":
        return held.expand_as(value).contiguous()
    new = value.clone()
    new[:, position] = held
    return new


def steer_state(model, tokens, layer: int, position: int, direction: Direction, eps: float,
                seed: int = 0) -> Outcome:
    """Run ``tokens`` with the state of ``layer`` at ``position`` replaced by ``H_t exp(eps X)``.

    Args:
        model: an ``osm-rnn`` or ``osmformer`` (any group: O, SO, U, SU, T, O-block; either complex mode).
        tokens: one text's ids, ``(T,)`` or ``(1, T)``.
        layer: the layer (osm-rnn: 0). position: the token index ``0..T-1``.
        direction: ``("generator", k)`` the ``k``-th orthonormal basis element of the algebra
            (:func:`steer_directions` names them); ``"tangent"`` the layer's own update at ``position``
            (osm-rnn: ``Phi_t`` at ``hook_tangent``; osmformer: the attention tangent, or where it is 0 (a
            position attending only to itself) the grounding tangent), normalised;
            ``"random"`` a unit direction drawn with ``seed`` (Gaussian coordinates, normalised).
        eps: the step along the one-parameter subgroup (the geodesic through ``H_t``), in units of the
            bi-invariant metric (``||eps X||_F = |eps|``).

    Returns:
        :class:`Outcome` with ``before`` / ``after`` ``(T, V)`` logits and ``geometry``: ``state_before``,
        ``state_after`` native ``(d, d)`` (complex for U/SU/T), ``direction`` ``X`` ``(d, d)`` and
        ``direction_coords`` ``(dim,)``.

    The model runs in eval mode (restored afterwards), without gradients, under the trace lock. Raises
    ``ValueError`` for a model that is not OSM, a bad layer, position, direction or batch, or a zero
    tangent. Source: Nunley, arXiv 2602.18417 (``H exp(Phi)``); the intervention is a design choice.
    """
    _check_osm(model)
    dev = next(model.parameters()).device
    tokens = as_tokens(tokens).to(dev)
    if tokens.shape[0] != 1:
        raise ValueError(f"steer_state takes one text, got a batch of {tokens.shape[0]}")
    T = tokens.shape[1]
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= int(position) < T:
        raise ValueError(f"position must be an int in 0..{T - 1}, got {position!r}")
    position, eps = int(position), float(eps)
    if not np.isfinite(eps):
        raise ValueError(f"eps must be finite, got {eps}")
    state_name, tangent_names, how = _points(model, layer)
    names = [state_name] + (tangent_names if direction == "tangent" else [])
    with MODEL_LOCK, torch.no_grad():
        was_training = model.training
        model.eval()
        try:
            before, cache = run_with_cache(model, tokens, names)
            held = _held_state(cache[state_name], position)
            tangents = [cache[n] for n in tangent_names if n in cache]
            X, what = _direction(model, direction, tangents, how, position, seed)
            held_new = _steered(model, held, X, eps, how)

            def fn(value, hook):
                if how == "step" and hook.step != position:
                    return None
                return _replace(how, value, held_new, position)

            after = run_with_hooks(model, tokens, [(state_name, fn)])
        finally:
            model.train(was_training)
    H, H_new = (_native(model, s, how).cpu() for s in (held, held_new))
    geometry = {"state_before": H.numpy(), "state_after": H_new.numpy(),
                "direction": X.cpu().numpy(), "direction_coords": model.group.to_coords(X).numpy()}
    return Outcome(tokens[0].cpu().numpy(), before[0].float().cpu().numpy(), after[0].float().cpu().numpy(),
                   position, f"layer {layer}, position {position}: H -> H exp({eps:g} X), X {what}", geometry)
