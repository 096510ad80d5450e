"""U(d): complex unitary matrices, the skew-Hermitian coordinates that SU(d) shares, and the
realification ``rho`` of U(d) into SO(2d) (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import torch

from geomlab.geometry.groups._linalg import _SQRT2, GroupError, _batch_shape
from geomlab.geometry.groups.base import MatrixGroup


def real_embed(X: torch.Tensor) -> torch.Tensor:
    """Realification ``rho(X + iY) = [[X, -Y], [Y, X]]`` of complex matrices.

    Shapes/dtypes: ``(..., d, d)`` complex64/complex128 -> ``(..., 2d, 2d)`` float32/float64. Differentiable.
    ``rho`` is an algebra homomorphism, so ``rho(exp A) = exp(rho A)``, ``rho(U(d)) = SO(2d) ∩ {W: WJ = JW}``
    and ``Re tr(A^* B) = tr(rho(A)^T rho(B)) / 2``. Source: Nunley, arXiv 2602.18417.
    Raises :class:`GroupError` for a real tensor or a non-square trailing shape.
    """
    if not isinstance(X, torch.Tensor) or X.ndim < 2 or X.shape[-1] != X.shape[-2]:
        raise GroupError(f"real_embed needs a (..., d, d) tensor, got shape {tuple(getattr(X, 'shape', ()))}")
    if not X.is_complex():
        raise GroupError(f"real_embed needs a complex tensor, got {X.dtype}")
    re, im = X.real, X.imag
    top = torch.cat([re, -im], dim=-1)
    bottom = torch.cat([im, re], dim=-1)
    return torch.cat([top, bottom], dim=-2)


def from_real(W: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`real_embed` on its image; on any real ``(2d, 2d)`` matrix it returns the
    complex matrix of its complex-linear part ``(W - J W J)/2`` (the orthogonal projection onto the image).

    Shapes/dtypes: ``(..., 2d, 2d)`` float32/float64 -> ``(..., d, d)`` complex64/complex128. Differentiable.
    Source: Nunley, arXiv 2602.18417. Raises :class:`GroupError` for complex input or an odd/non-square shape.
    """
    if not isinstance(W, torch.Tensor) or W.ndim < 2 or W.shape[-1] != W.shape[-2] or W.shape[-1] % 2:
        raise GroupError(f"from_real needs a (..., 2d, 2d) tensor, got shape {tuple(getattr(W, 'shape', ()))}")
    if W.is_complex() or not W.is_floating_point():
        raise GroupError(f"from_real needs a real floating tensor, got {W.dtype}")
    d = W.shape[-1] // 2
    a, b = W[..., :d, :d], W[..., :d, d:]
    c, e = W[..., d:, :d], W[..., d:, d:]
    return torch.complex((a + e) / 2, (c - b) / 2)


class _UnitaryBase(MatrixGroup):
    """What U(d) and SU(d) share: the skew-Hermitian part, the off-diagonal coordinates, Haar sampling of U(d)."""

    is_complex = True

    def _skew_h(self, Y: torch.Tensor) -> torch.Tensor:
        return (Y - Y.mT.conj()) / 2

    def _offdiag_coords(self, S: torch.Tensor) -> torch.Tensor:
        r, c = self._triu(S.device)
        off = S[..., r, c]
        return torch.cat([off.real * _SQRT2, off.imag * _SQRT2], dim=-1)

    def _from_offdiag_and_diag(self, off_re, off_im, diag_im) -> torch.Tensor:
        d = self.d
        r, c = self._triu(off_re.device)
        re = off_re.new_zeros(*off_re.shape[:-1], d, d)
        im = off_re.new_zeros(*off_re.shape[:-1], d, d)
        re[..., r, c] = off_re / _SQRT2
        im[..., r, c] = off_im / _SQRT2
        re = re - re.mT  # skew-Hermitian: real part antisymmetric
        im = im + im.mT  # imaginary part symmetric
        im = im + torch.diag_embed(diag_im)
        return torch.complex(re, im)

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        return self._haar_unitary(shape, self.d, generator, device, complex_=True).to(dtype)

    random_point.__doc__ = MatrixGroup.random_point.__doc__


class UnitaryGroup(_UnitaryBase):
    """U(d): complex unitary matrices. Algebra: skew-Hermitian matrices, dim d^2 (Nunley, arXiv 2602.18417)."""

    name = "U"

    @property
    def dim(self) -> int:
        return self.d * self.d

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``(Y - Y^*)/2``; ``(..., d, d)`` complex. Idempotent, differentiable. Source: Nunley, arXiv 2602.18417."""
        self._check(Y, "Y")
        return self._skew_h(Y)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``[sqrt2 Re S_pq (p<q), sqrt2 Im S_pq (p<q), Im S_pp]`` with ``S = proj(A)``; ``(..., d^2)`` real.
        Source: Nunley, arXiv 2602.18417."""
        self._check(A, "A")
        S = self._skew_h(A)
        diag = torch.diagonal(S, dim1=-2, dim2=-1).imag
        return torch.cat([self._offdiag_coords(S), diag], dim=-1)

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        self._check_coords(c)
        n = self.d * (self.d - 1) // 2
        return self._from_offdiag_and_diag(c[..., :n], c[..., n : 2 * n], c[..., 2 * n :])

    from_coords.__doc__ = MatrixGroup.from_coords.__doc__

    def _log64(self, X: torch.Tensor) -> torch.Tensor:
        theta, V = self._unitary_log_angles(X)
        return self._skew_h(self._assemble_log(theta, V))
