"""SU(d): unitary matrices with det = 1; traceless algebra with Helmert coordinates of the diagonal, the
traceless logarithm (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import math

import torch

from geomlab.geometry.groups._linalg import _batch_shape, _finite_or_eye
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.unitary import _UnitaryBase


def _helmert(d: int, dtype, device) -> torch.Tensor:
    """``(d-1, d)`` Helmert matrix: orthonormal rows, each orthogonal to the all-ones vector."""
    H = torch.zeros(d - 1, d, dtype=torch.float64)
    for k in range(1, d):
        H[k - 1, :k] = 1.0
        H[k - 1, k] = -float(k)
        H[k - 1] /= math.sqrt(k * (k + 1))
    return H.to(dtype=dtype, device=device)


def _traceless_angles(theta: torch.Tensor) -> torch.Tensor:
    """Shift the principal angles ``(..., d)`` so they sum to 0: when they sum to ``2 pi k`` (k != 0), the ``|k|``
    angles nearest the cut move by ``-/+ 2 pi`` (the smallest-norm logarithm in su(d); the principal one if k = 0)."""
    k = torch.round(theta.sum(-1) / (2 * math.pi)).unsqueeze(-1)
    rank_desc = theta.argsort(dim=-1, descending=True).argsort(dim=-1)
    rank_asc = theta.argsort(dim=-1).argsort(dim=-1)
    down = (k > 0) & (rank_desc < k)
    up = (k < 0) & (rank_asc < -k)
    return theta - 2 * math.pi * down.to(theta.dtype) + 2 * math.pi * up.to(theta.dtype)


class SpecialUnitaryGroup(_UnitaryBase):
    """SU(d): unitary matrices with det = 1. Algebra: traceless skew-Hermitian, dim d^2 - 1 (Nunley, arXiv 2602.18417)."""

    name = "SU"

    @property
    def dim(self) -> int:
        return self.d * self.d - 1

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``S - (tr S / d) I`` with ``S = (Y - Y^*)/2``. Idempotent, differentiable. Source: Nunley, arXiv 2602.18417."""
        self._check(Y, "Y")
        S = self._skew_h(Y)
        tr = torch.diagonal(S, dim1=-2, dim2=-1).sum(-1) / self.d
        return S - tr[..., None, None] * torch.eye(self.d, dtype=S.dtype, device=S.device)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """U(d) off-diagonal coordinates followed by ``d-1`` Helmert coordinates of ``Im diag``;
        shape ``(..., d^2 - 1)``. Source: Nunley, arXiv 2602.18417 (Helmert option)."""
        self._check(A, "A")
        S = self._skew_h(A)
        diag = torch.diagonal(S, dim1=-2, dim2=-1).imag
        hel = _helmert(self.d, diag.dtype, diag.device)
        return torch.cat([self._offdiag_coords(S), diag @ hel.mT], dim=-1)

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        self._check_coords(c)
        n = self.d * (self.d - 1) // 2
        hel = _helmert(self.d, c.dtype, c.device)
        return self._from_offdiag_and_diag(c[..., :n], c[..., n : 2 * n], c[..., 2 * n :] @ hel)

    from_coords.__doc__ = MatrixGroup.from_coords.__doc__

    def _log64(self, X: torch.Tensor) -> torch.Tensor:
        theta, V = self._unitary_log_angles(X)
        theta = _traceless_angles(theta)
        L = self._assemble_log(theta, V)
        S = self._skew_h(L)
        tr = torch.diagonal(S, dim1=-2, dim2=-1).sum(-1) / self.d
        return S - tr[..., None, None] * torch.eye(self.d, dtype=S.dtype, device=S.device)

    def log(self, H: torch.Tensor) -> torch.Tensor:
        return super().log(H)

    log.__doc__ = (
        MatrixGroup.log.__doc__
        + "\n        SU: if the principal angles sum to 2*pi*k != 0, the k angles nearest the cut are shifted by"
        "\n        2*pi so the result is traceless (design choice).\n"
    )

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        ok = super().belongs(H, atol)
        det = torch.linalg.det(_finite_or_eye(H.to(torch.complex128)))
        return ok & ((det - 1).abs() <= atol * self.d)

    belongs.__doc__ = MatrixGroup.belongs.__doc__

    def _angles64(self, X: torch.Tensor) -> torch.Tensor:
        return _traceless_angles(super()._angles64(X))

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        P = super().reproject(H)
        phase = torch.angle(torch.linalg.det(_finite_or_eye(P))) / self.d
        return P * torch.polar(torch.ones_like(phase), -phase)[..., None, None]

    reproject.__doc__ = (
        MatrixGroup.reproject.__doc__ + "\n        SU: the polar factor times ``det^{-1/d}`` (principal root).\n"
    )

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary(shape, self.d, generator, device, complex_=True)
        phase = torch.angle(torch.linalg.det(Q)) / self.d
        Q = Q * torch.polar(torch.ones_like(phase), -phase)[..., None, None]
        return Q.to(dtype)

    random_point.__doc__ = (
        MatrixGroup.random_point.__doc__
        + "\n        SU: a Haar U(d) sample times ``det^{-1/d}`` (left-invariant, hence Haar on SU(d)).\n"
    )
