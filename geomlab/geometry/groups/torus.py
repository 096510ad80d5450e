"""T^d: diagonal unitary matrices, with elementwise exp/log and the angle storage conversions
(Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import math

import torch

from geomlab.geometry.groups._linalg import GroupError, _batch_shape, _finite, _nan_where_bad, _principal
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.expm import EXP_METHODS


def angles_to_matrix(theta: torch.Tensor) -> torch.Tensor:
    """Torus element from its angles: ``diag(exp(i theta))``.

    ``theta``: ``(..., k)`` float32/float64, radians -> ``(..., k, k)`` complex64/complex128. Differentiable.
    Source: Nunley, arXiv 2602.18417 (angle storage of T^k).
    """
    if not isinstance(theta, torch.Tensor) or theta.ndim < 1 or not theta.is_floating_point():
        raise GroupError("angles_to_matrix needs a real floating tensor of shape (..., k)")
    return torch.diag_embed(torch.polar(torch.ones_like(theta), theta))


def matrix_to_angles(H: torch.Tensor) -> torch.Tensor:
    """Angles (radians, in ``(-pi, pi]``) of the diagonal of a torus element, in diagonal order (not sorted).

    ``H``: ``(..., k, k)`` complex -> ``(..., k)`` real. Source: Nunley, arXiv 2602.18417.
    """
    if not isinstance(H, torch.Tensor) or H.ndim < 2 or not H.is_complex():
        raise GroupError("matrix_to_angles needs a complex tensor of shape (..., k, k)")
    return _principal(torch.angle(torch.diagonal(H, dim1=-2, dim2=-1)))


class TorusGroup(MatrixGroup):
    """T^d: diagonal unitary matrices ``diag(exp(i theta))``, abelian, dim d (Nunley, arXiv 2602.18417).

    Fast paths: ``exp`` and ``log`` are elementwise on the diagonal; :func:`angles_to_matrix` and
    :func:`matrix_to_angles` convert to/from angle storage.
    """

    name = "T"
    is_complex = True

    @property
    def dim(self) -> int:
        return self.d

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``i * Im(diag Y)`` as a diagonal matrix. Idempotent, differentiable. Source: Nunley, arXiv 2602.18417.
        A non-finite diagonal entry (real part included) gives NaN; off-diagonal entries are not read."""
        self._check(Y, "Y")
        z = torch.diagonal(Y, dim1=-2, dim2=-1)
        im = z.imag + 0 * z.real  # 0 * (NaN or inf) keeps a non-finite real part visible
        return torch.diag_embed(torch.complex(torch.zeros_like(im), im))

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``Im diag(A)``, the angle increments, shape ``(..., d)`` (NaN for a non-finite real part too).
        Source: Nunley, arXiv 2602.18417."""
        self._check(A, "A")
        z = torch.diagonal(A, dim1=-2, dim2=-1)
        return z.imag + 0 * z.real

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        self._check_coords(c)
        return torch.diag_embed(torch.complex(torch.zeros_like(c), c))

    from_coords.__doc__ = MatrixGroup.from_coords.__doc__

    def exp(self, A: torch.Tensor, method: str = "auto") -> torch.Tensor:
        """Elementwise ``diag(exp(A_pp))``; only the diagonal of ``A`` is read (``A`` must be in the algebra).
        ``method`` is accepted for interface compatibility and ignored. Differentiable. A non-finite diagonal
        entry gives NaN there (elementwise). Source: Nunley, arXiv 2602.18417."""
        self._check(A, "A")
        if method not in EXP_METHODS:
            raise GroupError(f"exp method must be one of {EXP_METHODS}, got {method!r}")
        z = torch.diagonal(A, dim1=-2, dim2=-1)
        # exp(-inf) would be a finite 0: a non-finite entry gives NaN instead (value and gradient)
        bad = torch.where(torch.isfinite(z), 1.0, float("nan")).to(z.real.dtype)
        return torch.diag_embed(torch.exp(z) * bad)

    def log(self, H: torch.Tensor) -> torch.Tensor:
        """``diag(i * angle(H_pp))``, angles in ``(-pi, pi]``; only the diagonal's values are used, but the whole
        result is NaN when any entry of ``H`` is non-finite. Source: Nunley, arXiv 2602.18417."""
        self._check(H, "H")
        ang = _principal(torch.angle(torch.diagonal(H.detach(), dim1=-2, dim2=-1)))
        return _nan_where_bad(torch.diag_embed(torch.complex(torch.zeros_like(ang), ang)), _finite(H))

    def eigen_angles(self, H: torch.Tensor) -> torch.Tensor:
        self._check(H, "H")
        ang = _principal(torch.angle(torch.diagonal(H.detach(), dim1=-2, dim2=-1)))
        return _nan_where_bad(ang, _finite(H)).sort(dim=-1).values

    eigen_angles.__doc__ = MatrixGroup.eigen_angles.__doc__

    def _prep(self, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """T: ``X`` is the unit diagonal ``(..., d)`` (complex128), not a matrix."""
        ok = _finite(H)
        z = torch.diagonal(H, dim1=-2, dim2=-1).to(torch.complex128).masked_fill(~ok[..., None], 1)
        a = z.abs()
        z = torch.where(a > 0, z / a.clamp_min(1e-300), torch.ones_like(z))
        return z, ok

    def _angles64(self, X: torch.Tensor) -> torch.Tensor:
        return torch.angle(X)

    def _grad_half_sq(self, X: torch.Tensor) -> torch.Tensor:
        ang = _principal(torch.angle(X))
        return torch.diag_embed(X * torch.complex(torch.zeros_like(ang), ang))

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        ok = super().belongs(H, atol)
        eye = torch.eye(self.d, dtype=torch.bool, device=H.device)
        off = H.masked_fill(eye, 0).abs().amax(dim=(-2, -1))
        return ok & (off <= atol)

    belongs.__doc__ = MatrixGroup.belongs.__doc__

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        """Nearest torus element: ``diag(H_pp / |H_pp|)`` (entries that are exactly 0 become 1); NaN where ``H``
        has a non-finite entry (never a unit entry made up from a NaN). Source: design choice."""
        self._check(H, "H")
        z = torch.diagonal(H, dim1=-2, dim2=-1)
        a = z.abs()
        unit = torch.where(a > 0, z / a.clamp_min(torch.finfo(a.dtype).tiny), torch.ones_like(z))
        return _nan_where_bad(torch.diag_embed(unit), _finite(H))

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        """Uniform angles in ``[-pi, pi)``: Haar on T^d. Shape ``(*batch, d, d)``."""
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        u = torch.rand(*shape, self.d, generator=generator, dtype=torch.float64, device=device)
        return angles_to_matrix((2 * u - 1) * math.pi).to(dtype)
