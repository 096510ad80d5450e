"""Layers shared by several model families: rotary position embeddings (RoPE).

``llama`` and ``cem`` rotate their queries and keys the same way; the tables and the rotation live here so
neither family imports the other for them.
"""

from __future__ import annotations

import torch

__all__ = ["rope_angles", "apply_rope", "RotaryTables"]


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
