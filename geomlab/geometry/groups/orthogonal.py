"""O(d): real orthogonal matrices, and the skew-symmetric algebra, coordinates and real log that SO(d)
and O-block share (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import math

import torch

from geomlab.geometry.groups._linalg import _SQRT2, GroupError, _batch_shape, _nan_where_bad
from geomlab.geometry.groups.base import MatrixGroup

_CUT_TOL = 1e-7  # radians: eigenvalue phases this close to +-pi count as the cut locus (real log)


class _OrthogonalBase(MatrixGroup):
    """What O(d) and SO(d) share: the skew-symmetric algebra, its coordinates, the real log (O-block uses it per
    block), ``dist`` with ``inf`` across components."""

    is_complex = False

    @property
    def dim(self) -> int:
        return self.d * (self.d - 1) // 2

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``skew(Y) = (Y - Y^T)/2``; ``(..., d, d)`` real. Idempotent, differentiable. Source: Nunley, arXiv 2602.18417."""
        self._check(Y, "Y")
        return (Y - Y.mT) / 2

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``sqrt(2) * skew(A)[p, q]`` for ``p < q`` (row-major), shape ``(..., d(d-1)/2)``. Source: Nunley, arXiv 2602.18417."""
        self._check(A, "A")
        r, c = self._triu(A.device)
        return (A[..., r, c] - A[..., c, r]) / _SQRT2

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        """Scatter ``c / sqrt(2)`` into the upper triangle and subtract the transpose. Source: Nunley, arXiv 2602.18417."""
        self._check_coords(c)
        r, col = self._triu(c.device)
        X = c.new_zeros(*c.shape[:-1], self.d, self.d)
        X[..., r, col] = c / _SQRT2
        return X - X.mT

    def _log_real(self, H: torch.Tensor) -> torch.Tensor:
        """Real principal log (float64) of prepared (finite, float64, exactly orthogonal: :func:`_unitary64`)
        ``(..., n, n)`` rotations (any n: also used per block by O-block).

        The real eigen solver returns complex eigenvalues in exact conjugate pairs with conjugate eigenvectors,
        so away from the cut the pairs assemble into a real logarithm directly. Eigenvalues whose phase is
        within ``_CUT_TOL`` of ``+-pi`` (the cut locus; a pair is in or out as a whole) are handled together: an
        orthonormal basis of the real invariant subspace they span (from the real and imaginary parts of their
        eigenvectors, by an SVD) is paired into planes rotated by ``pi`` (a real logarithm of minimal norm),
        because the eigenvectors of a real ``-1`` eigenvalue cannot be paired by conjugation. (Taking that
        subspace from the symmetric part ``(H + H^T)/2`` instead mixed in a second pair just outside the
        tolerance, whose symmetric-part eigenvalue agrees to ~1e-15: a wrong log.)
        """
        w, V = torch.linalg.eig(H)
        theta = torch.angle(w)  # not _principal: angle(conj z) = -angle(z) keeps every pair's log real
        cut = theta.abs() > math.pi - _CUT_TOL
        L = self._assemble_log(torch.where(cut, torch.zeros_like(theta), theta), V).real
        if bool(cut.any()):
            n = H.shape[-1]
            Lf = L.reshape(-1, n, n).clone()
            Vf = V.reshape(-1, n, n)
            cf = cut.reshape(-1, n)
            counts = cf.sum(-1)
            for i in torch.nonzero(counts).flatten().tolist():
                k = int(counts[i])
                if k % 2:
                    raise GroupError(f"{self!r}: log is undefined for det = -1 (odd number of eigenvalues -1)")
                Vc = Vf[i][:, cf[i]]
                v = torch.linalg.svd(torch.cat([Vc.real, Vc.imag], dim=1)).U[:, :k]  # the real k-dim subspace
                a, b = v[:, 0::2], v[:, 1::2]
                Lf[i] = Lf[i] + math.pi * (b @ a.mT - a @ b.mT)
            L = Lf.reshape(L.shape)
        return (L - L.mT) / 2

    def _check_det(self, H: torch.Tensor) -> None:
        det = torch.linalg.det(H.to(torch.float64))
        if bool((det < 0).any()):
            raise GroupError(
                f"{self!r}: log is undefined on the det = -1 component of O(d) "
                f"({int((det < 0).sum())} matrices with det < 0); exp maps only onto SO(d)"
            )

    def _log64(self, X: torch.Tensor) -> torch.Tensor:
        return self._log_real(X)

    def log(self, H: torch.Tensor) -> torch.Tensor:
        self._check(H, "H")
        X, ok = self._prep(H.detach())
        self._check_det(X)
        return _nan_where_bad(self._log_real(X), ok).to(H.dtype)

    log.__doc__ = MatrixGroup.log.__doc__ + "\n        Raises :class:`GroupError` for ``det(H) < 0`` (Nunley, arXiv 2602.18417).\n"

    def dist(self, H1: torch.Tensor, H2: torch.Tensor) -> torch.Tensor:
        self._check(H1, "H1")
        self._check(H2, "H2")
        M = H1.mT @ H2
        X, ok = self._prep(M.detach())
        neg = torch.linalg.det(X) < 0
        X = torch.where(neg[..., None, None], torch.eye(self.d, dtype=X.dtype, device=X.device), X)
        f = self._angles64(X).square().sum(-1).sqrt()
        return self._finish_dist(M, ok, f, lambda: X @ self._log_real(X), far=neg)

    dist.__doc__ = (
        MatrixGroup.dist.__doc__
        + "\n        O(d): ``inf`` where ``H1`` and ``H2`` lie in different components (``det(H1^T H2) < 0``).\n"
    )

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary(shape, self.d, generator, device, complex_=False)
        return Q.to(dtype)



class OrthogonalGroup(_OrthogonalBase):
    """O(d): real orthogonal matrices (both components). Algebra: skew-symmetric matrices.

    ``exp`` lands in SO(d) (Nunley, arXiv 2602.18417); ``random_point`` is Haar on all of O(d); ``log`` raises for det -1.
    """

    name = "O"
