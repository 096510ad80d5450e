"""The group arithmetic of the OSM models: conjugate transposes, the reference exponential, and the
realification of a complex group (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import torch

from geomlab.geometry.groups import MatrixGroup, from_real, real_embed
from geomlab.models.osm.config import OSMConfigError


def _ct(X: torch.Tensor) -> torch.Tensor:
    """Conjugate transpose of the last two axes."""
    return X.mT.conj() if X.is_complex() else X.mT


def _group_exp_reference(geo, A: torch.Tensor) -> torch.Tensor:
    """The group's ``exp`` with the reference algorithm (``eigh`` on CPU), which evaluation mode keeps."""
    if isinstance(geo, MatrixGroup):
        ok = A.device.type == "cpu" and A.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128)
        return geo.exp(A, method="eigh" if ok else "matrix_exp")
    return geo.exp(A)


class RealifiedGroup:
    """A complex group (U, SU) acting on its realification ``rho(X + iY) = [[X, -Y], [Y, X]]``.

    Same interface subset as :class:`geomlab.geometry.groups.MatrixGroup` that the models use (``d`` is ``2 d_base``,
    ``dim`` and coordinates are the base group's): ``proj(W) = rho(base.proj(from_real(W)))`` (the
    orthogonal projection, since ``rho`` is a scaled isometry), ``exp`` = real ``matrix_exp`` / Taylor on
    ``2d x 2d``, ``pull(H, X) = proj(H^T X)``. ``Re tr(A^* B) = tr(rho(A)^T rho(B)) / 2``, so callers scale
    similarities by :attr:`sim_scale` ``= 1/2``. Source: Nunley, arXiv 2602.18417; the wrapper is a design choice.
    """

    is_complex = False
    sim_scale = 0.5

    def __init__(self, base: MatrixGroup):
        if not base.is_complex:
            raise OSMConfigError(f"complex_mode='real' needs a complex group (U, SU, T), got {base.name}")
        self.base = base
        self.name = base.name
        self.d = 2 * base.d
        self.dim = base.dim

    def proj(self, W: torch.Tensor) -> torch.Tensor:
        return real_embed(self.base.proj(from_real(W)))

    def pull(self, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return self.proj(H.mT @ X)

    def exp(self, A: torch.Tensor) -> torch.Tensor:
        return torch.linalg.matrix_exp(A)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        return self.base.to_coords(from_real(A))

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        return real_embed(self.base.from_coords(c))

    def identity(self, *batch, dtype=None, device=None) -> torch.Tensor:
        eye = torch.eye(self.d, dtype=dtype or torch.float32, device=device)
        return eye.expand(*batch, self.d, self.d).clone()
