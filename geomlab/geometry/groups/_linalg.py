"""GroupError and the small batched helpers every group module shares (private to :mod:`geomlab.geometry.groups`).

Conjugate transpose, the real/complex dtype pairs, finite masks, principal angles, the float64 polar factor
the analysis functions work on (LAPACK never sees a NaN/inf), block-diagonal embedding, and the
batch-shape argument convention of ``identity``/``random_point``.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

_SQRT2 = math.sqrt(2.0)


class GroupError(ValueError):
    """Bad input to a group operation (shape, dtype, name, option or an undefined log)."""


def _batch_shape(args: Sequence) -> tuple[int, ...]:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f(torch.Size([2, 3]))`` as the same batch shape."""
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise GroupError(f"batch sizes must be non-negative ints, got {args!r}")
        out.append(int(a))
    return tuple(out)


def _ct(X: torch.Tensor) -> torch.Tensor:
    """Conjugate transpose of the last two axes (the transpose for real tensors)."""
    return X.mT.conj() if X.is_complex() else X.mT


def _real_dtype(dtype: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(dtype, dtype)


def _complex_dtype(dtype: torch.dtype) -> torch.dtype:
    return {torch.float32: torch.complex64, torch.float64: torch.complex128}.get(dtype, dtype)


def _finite(X: torch.Tensor) -> torch.Tensor:
    """bool ``(...)``: True where every entry of the ``(..., n, n)`` matrix is finite (no NaN, no +-inf)."""
    return torch.isfinite(X).all(-1).all(-1)


def _principal(theta: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Angles in ``(-pi, pi]`` *in the output dtype*: cast to ``dtype`` first, then every value at or below
    ``-pi`` (as rounded in that dtype; ``torch.angle`` gives ``-pi`` for ``-1 - 0j``) becomes ``+pi``.
    NaN stays NaN. One convention for every dtype (float32 rounds ``-pi + 1e-8`` to ``-pi``)."""
    if dtype is not None:
        theta = theta.to(dtype)
    pi = torch.tensor(math.pi, dtype=theta.dtype, device=theta.device)
    return torch.where(theta <= -pi, pi, theta)


def _finite_or_eye(H: torch.Tensor, ok: torch.Tensor | None = None) -> torch.Tensor:
    """``H`` with its non-finite matrices replaced by the identity (safe to hand to LAPACK)."""
    ok = _finite(H) if ok is None else ok
    eye = torch.eye(H.shape[-1], dtype=H.dtype, device=H.device)
    return torch.where(ok[..., None, None], H, eye)


def _nan_where_bad(X: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """``X`` ``(..., *tail)`` with the entries of the batch elements where ``ok`` ``(...)`` is False set to NaN."""
    mask = ok.reshape(*ok.shape, *([1] * (X.ndim - ok.ndim)))
    return X.masked_fill(~mask, float("nan"))


def _unitary64(H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X, ok)``: ``H`` ``(..., n, n)`` in float64/complex128, non-finite matrices replaced by the identity
    (``ok`` False there), then projected onto O(n)/U(n) by its polar factor ``U V^*`` (SVD).

    This is what every eigenvalue-based analysis function works on (design choice): LAPACK's eigen
    routines are never given a NaN or an infinity (MKL can crash the process on them), and a float32 rotation,
    which is orthogonal only to ~1e-7, becomes exactly normal, so eigenvalues near ``-1`` (the cut locus)
    move by ~1e-7 instead of the ~sqrt(1e-7) a non-normal rounding error can move a nearly double one."""
    X = H.to(torch.complex128 if H.is_complex() else torch.float64)
    ok = _finite(X)
    eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    X = torch.where(ok[..., None, None], X, eye)
    U, _, Vh = torch.linalg.svd(X)
    return U @ Vh, ok


def _diag_embed_blocks(blocks: torch.Tensor) -> torch.Tensor:
    """``(..., m, b, b)`` blocks -> ``(..., m*b, m*b)`` block-diagonal matrix (differentiable)."""
    *batch, m, b, _ = blocks.shape
    moved = blocks.movedim(-3, -1)  # (..., b, b, m)
    full = torch.diag_embed(moved, dim1=-4, dim2=-2)  # (..., m, b, m, b)
    return full.reshape(*batch, m * b, m * b)


def _extract_blocks(X: torch.Tensor, b: int) -> torch.Tensor:
    """``(..., m*b, m*b)`` -> its ``m`` diagonal ``(b, b)`` blocks, shape ``(..., m, b, b)``."""
    *batch, d, _ = X.shape
    m = d // b
    Y = X.reshape(*batch, m, b, m, b)
    return torch.diagonal(Y, dim1=-4, dim2=-2).movedim(-1, -3)
