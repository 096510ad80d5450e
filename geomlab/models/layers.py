"""Layers shared by several model families: rotary position embeddings (RoPE) and hooked attention.

``llama`` and ``cem`` rotate their queries and keys the same way; the tables and the rotation live here so
neither family imports the other for them. ``transformer``, ``llama`` and ``grassmann-attn`` run their
attention through :func:`attend`, whose weights and per-head outputs pass hook points.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["rope_angles", "apply_rope", "RotaryTables", "attend"]


def rope_angles(length: int, dim: int, base: float = 10000.0, *, dtype=torch.float32,
                device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position tables ``(cos, sin)``, each of shape ``(length, dim)``; angles in radians.

    Position ``i`` rotates channel pair ``(c, c + dim/2)`` by ``i * base**(-2c/dim)`` (rotate-half
    convention, as in Llama). Raises ``ValueError`` for an odd ``dim``. Source: RoFormer (Su et al. 2021,
    eq. 34); CEM.
    """
    if dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {dim}")
    inv = base ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    ang = torch.arange(length, dtype=torch.float64, device=device)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate ``x`` (shape ``(..., J, dim)``) by ``R_i`` (or ``R_i^T`` when ``inverse``) at position ``i``.

    ``cos``/``sin`` come from :func:`rope_angles` with at least ``J`` rows. Source: RoFormer.
    """
    J = x.shape[-2]
    c, s = cos[:J], sin[:J]
    return x * c + _rotate_half(x) * (-s if inverse else s)


class RotaryTables:
    """The :func:`rope_angles` tables of head width ``dim`` for the last ``(length, dtype, device)`` asked
    for, kept until another is asked for (a model's forward passes reuse one length). Design choice."""

    def __init__(self, dim: int, base: float):
        self.dim, self.base = int(dim), base
        self._cache: dict = {}

    def __call__(self, length: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)``, each ``(length, dim)`` of ``dtype`` on ``device``."""
        key = (length, dtype, str(device))
        if key not in self._cache:
            self._cache = {key: rope_angles(length, self.dim, self.base, dtype=dtype, device=device)}
        return self._cache[key]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, hook_pattern, hook_z, *,
           attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0) -> torch.Tensor:
    """Causal multi-head attention ``softmax(q k^T / sqrt(d_head) + mask) v`` through two hook points.

    ``q``, ``k``, ``v`` ``(B, H, T, d_head)``; ``attn_mask``: an additive ``(H, T, T)`` bias that holds the
    causal mask (``-inf`` above the diagonal), or None for the plain causal mask. Returns the per-head
    outputs ``(B, H, T, d_head)`` after ``hook_z``. While ``hook_pattern`` is active the weights
    ``(B, H, T, T)`` are formed explicitly and pass it (a replacement is used for the product with ``v``);
    otherwise one fused ``F.scaled_dot_product_attention`` call runs, so the numbers with no hook attached are
    those of that call. Source: Vaswani et al. (2017), eq. 1; the hook points are a design choice.
    """
    if not hook_pattern.active:
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                           is_causal=attn_mask is None)
        return hook_z(z)
    T = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if attn_mask is None:
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    else:
        scores = scores + attn_mask
    w = hook_pattern(torch.softmax(scores, dim=-1))
    if dropout_p:
        w = F.dropout(w, dropout_p)
    return hook_z(w @ v)
