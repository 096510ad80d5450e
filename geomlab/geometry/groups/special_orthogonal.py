"""SO(d): rotations (det = +1); the algebra and coordinates of O(d), plus the det conditions
(Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import torch

from geomlab.geometry.groups._linalg import _batch_shape, _finite, _finite_or_eye, _nan_where_bad
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.orthogonal import _OrthogonalBase


class SpecialOrthogonalGroup(_OrthogonalBase):
    """SO(d): rotations (det = +1). Same algebra, projection and coordinates as O(d) (Nunley, arXiv 2602.18417)."""

    name = "SO"

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        ok = super().belongs(H, atol)
        return ok & (torch.linalg.det(_finite_or_eye(H.to(torch.float64))) > 0)

    belongs.__doc__ = MatrixGroup.belongs.__doc__

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        self._check(H, "H")
        ok = _finite(H)
        U, _, Vh = torch.linalg.svd(_finite_or_eye(H, ok))
        P = U @ Vh
        neg = torch.linalg.det(P) < 0
        if bool(neg.any()):
            flip = torch.ones(*P.shape[:-1], dtype=P.dtype, device=P.device)
            flip[..., -1] = torch.where(neg, -1.0, 1.0).to(P.dtype)
            P = (U * flip.unsqueeze(-2)) @ Vh
        return _nan_where_bad(P, ok)

    reproject.__doc__ = (
        MatrixGroup.reproject.__doc__ + "\n        For det < 0 the smallest singular direction is flipped.\n"
    )

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary(shape, self.d, generator, device, complex_=False)
        det = torch.linalg.det(Q)
        flip = torch.ones(*Q.shape[:-1], dtype=Q.dtype, device=Q.device)
        flip[..., 0] = torch.where(det < 0, -1.0, 1.0).to(Q.dtype)
        return (Q * flip.unsqueeze(-2)).to(dtype)

    random_point.__doc__ = (
        MatrixGroup.random_point.__doc__ + "\n        Haar on O(d), then the first column is negated where det < 0.\n"
    )
