"""Move a plane: replace one 2-plane of a Grassmann layer (the plane of the pair ``(z_t, z_{t-D})`` of one offset
slot) by a plane moved along a geodesic of Gr(2, r), or by the plane of another pair, and run the model on.

The Causal Grassmann mixer (Zhang, arXiv 2512.19428; :class:`geomlab.models.grassmann.mixer.GrassmannMixer`)
averages the normalised Plücker vectors ``p_hat(t, D)`` of its offset slots and fuses the mean back with a
gate. Its hook point ``blocks.L.mixer.hook_plucker`` ``(B, m, T, P)`` is writable: the change written at one
entry ``(slot, t)`` is added, divided by the number of valid offsets at ``t``, to the mean the layer uses. The
planes are oriented as the model's: the frame of the pair is ``(z_t, z_{t-D})`` Gram-Schmidt orthonormalised,
so its Plücker vector is a positive multiple of ``z_t ^ z_{t-D}``.
"""

from __future__ import annotations

import numpy as np
import torch

from geomlab.geometry.planes import grassmann_exp, grassmann_log, plucker, principal_angles
from geomlab.models.grassmann.mixer import GrassmannMixer
from geomlab.models.hooks import run_with_cache, run_with_hooks
from geomlab.whatif.outcome import Outcome

__all__ = ["rotate_plane", "swap_plane", "pair_frame"]


def _mixer(model: torch.nn.Module, layer: int) -> GrassmannMixer:
    blocks = getattr(model, "blocks", None)
    if blocks is None or not 0 <= layer < len(blocks):
        n = "no" if blocks is None else len(blocks)
        raise ValueError(f"layer {layer} outside the model's blocks ({n} blocks)")
    mixer = getattr(blocks[layer], "mixer", None)
    if not isinstance(mixer, GrassmannMixer):
        raise ValueError(f"block {layer} has no Grassmann mixer (a grassmann model is needed)")
    return mixer


def _tokens(tokens) -> torch.Tensor:
    x = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    if x.dim() == 2 and x.shape[0] == 1:
        x = x[0]
    if x.dim() != 1:
        raise ValueError(f"tokens must be one text (T,) or (1, T), got shape {tuple(x.shape)}")
    return x[None]


def _check_pair(mixer: GrassmannMixer, slot: int, position: int, T: int, what: str = "position") -> int:
    if not 0 <= slot < len(mixer.offsets):
        raise ValueError(f"slot {slot} outside 0..{len(mixer.offsets) - 1} (the layer's offsets {mixer.offsets})")
    D = mixer.offsets[slot]
    if not D <= position < T:
        raise ValueError(f"{what} {position} has no pair at offset {D} in a text of {T} tokens (need {D}..{T - 1})")
    return D


def pair_frame(a, b, tol: float = 1e-6) -> torch.Tensor:
    """The oriented orthonormal frame ``(r, 2)`` (float64) of the pair ``(a, b)`` ``(r,)``: Gram-Schmidt,
    ``q1 = a / |a|``, ``q2 = (b - (b.q1) q1) / |...|``, so ``q1 ^ q2 = (a ^ b) / ||a ^ b||`` (the model's
    sign convention, current first). Raises ``ValueError`` when ``||a ^ b|| < tol`` (no plane). Design choice.
    """
    a = torch.as_tensor(a).detach().to(torch.float64)
    b = torch.as_tensor(b).detach().to(torch.float64)
    na = torch.linalg.vector_norm(a)
    area = torch.linalg.vector_norm(plucker(a, b))
    if float(na) == 0.0 or float(area) < tol:
        raise ValueError(f"the pair spans no plane (||a ^ b|| = {float(area):.3g} < {tol})")
    q1 = a / na
    r = b - (b @ q1) * q1
    return torch.stack([q1, r / torch.linalg.vector_norm(r)], dim=-1)


def _planes(model, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logits (T, V), z (T, r), p_hat (m, T, P))`` of one text at ``layer``."""
    pre = f"blocks.{layer}.mixer."
    with torch.no_grad():
        logits, cache = run_with_cache(model, x, [pre + "hook_reduced", pre + "hook_plucker"])
    return logits[0], cache[pre + "hook_reduced"][0], cache[pre + "hook_plucker"][0]


def _run_changed(model, x: torch.Tensor, layer: int, slot: int, position: int, change=None,
                 source: int | None = None) -> torch.Tensor:
    """Logits ``(T, V)`` with ``change`` ``(P,)`` added to the Plücker vector of ``(slot, position)``, or that
    vector replaced by the one of ``(slot, source)``."""

    def move(value: torch.Tensor, hook) -> torch.Tensor:
        out = value.clone()
        if source is None:
            out[0, slot, position] += change.to(value.dtype)
        else:
            out[0, slot, position] = value[0, slot, source]
        return out

    with torch.no_grad():
        return run_with_hooks(model, x, [(f"blocks.{layer}.mixer.hook_plucker", move)])[0]


def _toward_frame(toward, r: int) -> torch.Tensor:
    Q = torch.as_tensor(np.asarray(toward), dtype=torch.float64)
    if Q.shape == (2, r):
        Q = Q.T
    if Q.shape != (r, 2):
        raise ValueError(f"toward must be a 2-frame (r, 2) or (2, r) with r = {r}, got {tuple(Q.shape)}")
    return pair_frame(Q[:, 0], Q[:, 1])


def _direction(Y: torch.Tensor, toward, seed: int) -> torch.Tensor:
    """Unit (Frobenius) horizontal tangent at ``Y`` ``(r, 2)``: toward span(``toward``), or seeded random of
    rank one (``u v^T``, ``u`` orthogonal to span(Y)), so the walk turns by exactly one principal angle."""
    r = Y.shape[0]
    if toward is not None:
        Delta = grassmann_log(Y, _toward_frame(toward, r))
        n = torch.linalg.matrix_norm(Delta)
        return Delta / n if float(n) > 1e-12 else Delta
    if r < 3:
        raise ValueError(f"Gr(2, {r}) is a single plane: nothing to rotate toward")
    gen = torch.Generator().manual_seed(int(seed))
    g = torch.randn(r, generator=gen, dtype=torch.float64)
    v = torch.randn(2, generator=gen, dtype=torch.float64)
    u = g - Y @ (Y.T @ g)
    u = u - Y @ (Y.T @ u)  # twice: orthogonal to span(Y) to rounding
    return torch.outer(u / torch.linalg.vector_norm(u), v / torch.linalg.vector_norm(v))


def rotate_plane(model, tokens, layer: int, position: int, slot: int, angle: float, toward=None,
                 seed: int = 0) -> Outcome:
    """Move the plane of the pair ``(position, position - D)`` of offset slot ``slot`` in Grassmann layer
    ``layer`` by ``angle`` radians along a geodesic of Gr(2, r) and run the model on from the moved plane.

    Args:
        model: a ``grassmann`` model (:class:`geomlab.models.grassmann.GrassmannLM`), in eval mode.
        tokens: one text, ``(T,)`` or ``(1, T)`` token ids.
        layer, slot: the block and its offset slot (``D = offsets[slot]`` of that layer's mixer).
        position: ``t``, with ``D <= t < T``.
        angle: arc length of the move in radians (geodesic metric of Gr(2, r)); the sign picks the direction.
        toward: None (a seeded random direction of rank one: the principal angles between the planes are
            ``(0, |angle|)`` for ``|angle| <= pi/2``), or a 2-frame ``(r, 2)`` (or ``(2, r)``) whose span the
            geodesic heads for (unit speed: ``angle`` equal to the distance reaches it).
        seed: the random direction's seed.

    Returns an :class:`Outcome` with ``geometry``: ``plucker_before``, ``plucker_after`` ``(P,)`` (the model's
    normalised Plücker vector and the moved plane's, unit norm, the model's sign convention),
    ``principal_angles`` ``(2,)`` ascending (radians) between the planes, ``frame_before``, ``frame_after``
    ``(r, 2)``. The layer is fed ``p_model + (p_after - p_frame)``, the moved plane's Plücker vector up to the
    rounding of ``p_model`` (so ``angle = 0`` leaves every logit bit-identical).

    Raises ``ValueError`` for a model without a Grassmann mixer at ``layer``, a slot or position out of range,
    a pair that spans no plane, a ``toward`` of the wrong shape; :class:`geomlab.geometry.planes.PlaneError`
    when ``toward`` is at pi/2 (no unique geodesic). Source: the Grassmann exponential map (Edelman, Arias &
    Smith 1998, Theorem 2.3) on the planes of Zhang, arXiv 2512.19428.
    """
    mixer = _mixer(model, layer)
    x = _tokens(tokens)
    T = x.shape[1]
    D = _check_pair(mixer, slot, position, T)
    before, z, p_hat = _planes(model, x, layer)
    Y = pair_frame(z[position], z[position - D])
    Y2 = grassmann_exp(Y, _direction(Y, toward, seed), float(angle))
    p_frame, p_after = plucker(Y[:, 0], Y[:, 1]), plucker(Y2[:, 0], Y2[:, 1])
    after = _run_changed(model, x, layer, slot, position, p_after - p_frame)
    where = "toward a given plane" if toward is not None else f"in a random direction (seed {seed})"
    return Outcome(
        tokens=x[0].numpy(), before=before.float().numpy(), after=after.float().numpy(), position=position,
        what=f"plane of ({position}, {position - D}) in layer {layer} (offset {D}) moved {angle:.4g} rad {where}",
        geometry={"plucker_before": p_hat[slot, position].double().numpy(), "plucker_after": p_after.numpy(),
                  "principal_angles": principal_angles(Y, Y2).numpy(), "frame_before": Y.numpy(),
                  "frame_after": Y2.numpy()})


def swap_plane(model, tokens, layer: int, position: int, slot: int, source_position: int) -> Outcome:
    """Put the plane of the pair ``(source_position, source_position - D)`` in place of the plane of
    ``(position, position - D)`` (offset slot ``slot``, Grassmann layer ``layer``) and run the model on.

    ``tokens``: ``(T,)`` or ``(1, T)``; both positions need ``D <= t < T``. The layer is fed the model's own
    normalised Plücker vector of the source pair at ``(slot, position)``; swapping a plane with itself
    changes nothing (bit-identical logits). ``geometry``: ``plucker_before``, ``plucker_after`` ``(P,)``
    and ``principal_angles`` ``(2,)`` (radians, ascending) between the two planes.

    Raises ``ValueError`` as :func:`rotate_plane`, and where either pair spans no plane. Design choice
    (activation patching of one plane, within one text).
    """
    mixer = _mixer(model, layer)
    x = _tokens(tokens)
    T = x.shape[1]
    D = _check_pair(mixer, slot, position, T)
    _check_pair(mixer, slot, source_position, T, "source_position")
    before, z, p_hat = _planes(model, x, layer)
    Y = pair_frame(z[position], z[position - D])
    Y2 = pair_frame(z[source_position], z[source_position - D])
    p0, p1 = p_hat[slot, position], p_hat[slot, source_position]
    after = _run_changed(model, x, layer, slot, position, source=source_position)
    return Outcome(
        tokens=x[0].numpy(), before=before.float().numpy(), after=after.float().numpy(), position=position,
        what=f"plane of ({position}, {position - D}) in layer {layer} (offset {D}) replaced by the plane of "
             f"({source_position}, {source_position - D})",
        geometry={"plucker_before": p0.double().numpy(), "plucker_after": p1.double().numpy(),
                  "principal_angles": principal_angles(Y, Y2).numpy()})
