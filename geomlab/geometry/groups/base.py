"""The shared verbs of every group: :class:`MatrixGroup` (design after geotorch: one class per group, the
same verbs everywhere).

``proj``, ``inner``, ``norm``, ``pull``, ``to_coords``/``from_coords``, ``exp``, ``log``, ``dist``,
``belongs``, ``reproject``, ``identity``, ``random_point``, ``eigen_angles``, with the input checks and the
numerics the groups share (Haar sampling, the principal log assembled from an eigendecomposition, the
gradient of ``dist``). Each group module overrides what differs. Source: Nunley, arXiv 2602.18417.
"""

from __future__ import annotations

import torch

from geomlab.geometry.groups._linalg import (_SQRT2, GroupError, _batch_shape, _complex_dtype, _ct, _finite, _finite_or_eye,
                                    _nan_where_bad, _principal, _real_dtype, _unitary64)
from geomlab.geometry.groups.expm import expm_skew


class MatrixGroup:
    """A compact matrix Lie group ``G ⊂ U(d)`` with batched geometry on ``(..., d, d)`` tensors.

    Build instances with :func:`get_group`. Attributes:

    * ``name``: one of :data:`GROUP_NAMES`.
    * ``d``: matrix size.
    * ``is_complex``: True for U, SU, T (complex64/complex128 tensors), False for O, SO, O-block.
    * ``dim``: real dimension of the Lie algebra (number of coordinates): O/SO ``d(d-1)/2``, U ``d^2``,
      SU ``d^2-1``, T ``d``, O-block ``m b(b-1)/2`` (Nunley, arXiv 2602.18417).
    * ``options``: the options passed to :func:`get_group` (``{"block": b}`` for O-block, else ``{}``).
    """

    name: str = ""
    is_complex: bool = False

    def __init__(self, d: int):
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise GroupError(f"d must be a positive int, got {d!r}")
        self.d = int(d)
        self.options: dict = {}
        self._triu_cache: dict = {}

    # -- description -------------------------------------------------------------------------------------------------

    @property
    def dim(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def spec(self) -> dict:
        """JSON-serialisable description: ``get_group(**g.spec)`` rebuilds the group."""
        return {"name": self.name, "d": self.d, **self.options}

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v}" for k, v in self.options.items())
        return f"MatrixGroup({self.name!r}, d={self.d}{opts})"

    def __eq__(self, other) -> bool:
        return isinstance(other, MatrixGroup) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.spec.items())))

    @property
    def default_dtype(self) -> torch.dtype:
        """complex64 for complex groups, float32 otherwise."""
        return torch.complex64 if self.is_complex else torch.float32

    # -- validation --------------------------------------------------------------------------------------------------

    def _check(self, X, what: str = "input") -> torch.Tensor:
        """Validate a ``(..., d, d)`` tensor of the group's kind (real/complex); return it unchanged."""
        if not isinstance(X, torch.Tensor):
            raise GroupError(f"{self!r}: {what} must be a torch.Tensor, got {type(X).__name__}")
        if X.ndim < 2 or X.shape[-1] != self.d or X.shape[-2] != self.d:
            raise GroupError(
                f"{self!r}: {what} must have shape (..., {self.d}, {self.d}), got {tuple(X.shape)}"
            )
        if self.is_complex:
            if not X.is_complex():
                raise GroupError(
                    f"{self!r}: {what} must be complex (complex64/complex128), got {X.dtype}; "
                    "a real matrix X can be passed as X.to(torch.complex64)"
                )
        else:
            if X.is_complex():
                raise GroupError(f"{self!r}: {what} must be real (float32/float64), got {X.dtype}")
            if not X.is_floating_point():
                raise GroupError(f"{self!r}: {what} must be floating point (float32/float64), got {X.dtype}")
        return X

    def _resolve_dtype(self, dtype: torch.dtype | None) -> torch.dtype:
        if dtype is None:
            return self.default_dtype
        if self.is_complex:
            if dtype in (torch.float32, torch.float64):
                dtype = _complex_dtype(dtype)
            if dtype not in (torch.complex64, torch.complex128):
                raise GroupError(f"{self!r}: dtype must be complex64/complex128, got {dtype}")
        elif dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise GroupError(f"{self!r}: dtype must be a real floating dtype, got {dtype}")
        return dtype

    # -- algebra -----------------------------------------------------------------------------------------------------

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """Orthogonal projection (for ``inner``) of any ``(..., d, d)`` matrix onto the Lie algebra.

        Same shape and dtype as ``Y``; idempotent; differentiable. Source: Nunley, arXiv 2602.18417.
        """
        raise NotImplementedError

    def inner(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """``Re tr(A^* B)``: ``(..., d, d)`` x ``(..., d, d)`` -> ``(...)`` real (broadcasts). Differentiable.

        Source: Nunley, arXiv 2602.18417 (the Frobenius inner product that makes the algebra bases orthonormal).
        """
        self._check(A, "A")
        self._check(B, "B")
        if A.is_complex():
            return (A.real * B.real + A.imag * B.imag).sum(dim=(-2, -1))
        return (A * B).sum(dim=(-2, -1))

    def norm(self, A: torch.Tensor) -> torch.Tensor:
        """Frobenius norm ``sqrt(inner(A, A))``, shape ``(...)`` real. Differentiable, with gradient 0 at
        ``A = 0`` (``torch.linalg.vector_norm``'s convention; ``sqrt`` of the inner product would give NaN there).
        NaN/inf entries give NaN/inf."""
        self._check(A, "A")
        return torch.linalg.vector_norm(A, dim=(-2, -1))

    def pull(self, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """Left-trivialised pull of ``H`` toward a target ``X``: ``proj(H^* X)``, shape ``(..., d, d)``.

        ``X`` need not lie in the group (a convex combination of group elements is fine). It is the Riemannian
        gradient of ``Re tr(H^* X)``: ``d/de Re tr((H exp(eA))^* X)|_{e=0} = inner(A, pull(H, X))``.
        Differentiable. Source: Nunley, arXiv 2602.18417.
        """
        self._check(H, "H")
        self._check(X, "X")
        return self.proj(_ct(H) @ X)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """Coordinates ``(..., dim)`` (real dtype) of ``proj(A)`` in a basis orthonormal for ``inner``.

        For ``A`` in the algebra this is the coordinate vector; for any matrix it is the adjoint of
        ``from_coords``: ``to_coords(Y) @ c == inner(Y, from_coords(c))``. Differentiable.
        Source: Nunley, arXiv 2602.18417.
        """
        raise NotImplementedError

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        """Algebra element ``(..., d, d)`` from coordinates ``(..., dim)`` (float32 -> float32/complex64,
        float64 -> float64/complex128). Inverse isometry of :meth:`to_coords`. Differentiable.
        Raises :class:`GroupError` if the last axis is not ``dim`` or ``c`` is not real floating.
        Source: Nunley, arXiv 2602.18417.
        """
        raise NotImplementedError

    def _check_coords(self, c) -> torch.Tensor:
        if not isinstance(c, torch.Tensor) or c.ndim < 1 or c.shape[-1] != self.dim:
            shape = tuple(getattr(c, "shape", ()))
            raise GroupError(f"{self!r}: coordinates must have shape (..., {self.dim}), got {shape}")
        if c.is_complex() or not c.is_floating_point():
            raise GroupError(f"{self!r}: coordinates must be real floating point, got {c.dtype}")
        return c

    # -- group -------------------------------------------------------------------------------------------------------

    def exp(self, A: torch.Tensor, method: str = "auto") -> torch.Tensor:
        """Matrix exponential, algebra -> group: ``(..., d, d)`` -> ``(..., d, d)`` same dtype. Differentiable.

        ``A`` must lie in the algebra (use ``exp(proj(Y))`` otherwise). ``method`` picks the algorithm for the
        full-matrix groups (see :func:`expm_skew`: ``"auto"``, ``"eigh"``, ``"matrix_exp"``); T and O-block use
        their own cheaper paths. Source: Nunley, arXiv 2602.18417.
        """
        self._check(A, "A")
        return expm_skew(A, method)

    def log(self, H: torch.Tensor) -> torch.Tensor:
        """Principal logarithm, group -> algebra: ``(..., d, d)`` -> ``(..., d, d)`` same dtype.

        Computed in float64/complex128 by an eigendecomposition of the (normal) matrix, with every eigenvalue
        phase taken in ``(-pi, pi]``, then projected onto the algebra. ``exp(log(H)) = H`` away from the cut
        locus (an eigenvalue ``-1``, where the principal log is not unique; there the result is one of the
        logarithms for U/T and unreliable for the real groups). Not meant for autograd.
        Source: design choice (standard principal log of a unitary matrix).
        """
        self._check(H, "H")
        X, ok = self._prep(H.detach())
        return _nan_where_bad(self._log64(X), ok).to(H.dtype)

    def dist(self, H1: torch.Tensor, H2: torch.Tensor) -> torch.Tensor:
        """Geodesic distance ``||log(H1^* H2)||_F`` (bi-invariant metric from ``inner``), shape ``(...)``.

        Computed in float64/complex128 from the eigenvalue phases ``theta`` of the polar factor of ``H1^* H2`` as
        ``sqrt(sum theta^2)``, which equals the Frobenius norm of the principal log and stays well defined on the
        cut locus. Broadcasts; the result has the real dtype of the input. NaN where ``H1^* H2`` has a non-finite
        entry (LAPACK never sees it).

        Differentiable: the gradient with respect to ``M = H1^* H2`` is ``M log(M) / dist`` (the
        gradient of a spectral function of a unitary matrix), and 0 at distance 0 (the identity, where ``dist``
        has a kink like ``|x|``), 0 where the distance is ``inf``; the eigenvalue solver itself is not
        differentiated (its gradient is NaN at repeated eigenvalues).
        Source: Nunley, arXiv 2602.18417 (``log`` as the geodesic direction).
        """
        self._check(H1, "H1")
        self._check(H2, "H2")
        M = _ct(H1) @ H2
        X, ok = self._prep(M.detach())
        f = self._angles64(X).square().sum(-1).sqrt()
        return self._finish_dist(M, ok, f, lambda: self._grad_half_sq(X))

    def _finish_dist(self, M, ok, f, grad_m, far=None) -> torch.Tensor:
        """``f`` (float64 ``(...)``) as the distance: NaN where not ``ok``, inf where ``far``; cast to the real dtype
        of ``M``; with the gradient ``grad_m() / f`` with respect to ``M`` attached when ``M`` requires grad."""
        f = f.masked_fill(~ok, float("nan"))
        if far is not None:
            f = f.masked_fill(far & ok, float("inf"))
        out = f.to(_real_dtype(M.dtype))
        if torch.is_grad_enabled() and M.requires_grad:
            usable = ok & torch.isfinite(f) & (f > 0)
            G = grad_m() / torch.where(usable, f, torch.ones_like(f))[..., None, None]
            G = G.masked_fill(~usable[..., None, None], 0).to(M.dtype)
            dM = M - M.detach()  # value 0, gradient identity: ``out`` keeps its value, gains d out / dM = G
            lin = (G.conj() * dM).real.sum((-2, -1)) if M.is_complex() else (G * dM).sum((-2, -1))
            out = out + lin
        return out

    def _prep(self, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(X, ok)``: the float64 polar factor of ``H`` with non-finite matrices replaced by ``I`` (see
        :func:`_unitary64`), and where ``H`` was finite."""
        return _unitary64(H)

    def _angles64(self, X: torch.Tensor) -> torch.Tensor:
        """Phases of the principal log of the prepared ``X`` (float64, ``(..., d)``, unsorted)."""
        return torch.angle(torch.linalg.eigvals(X))

    def _log64(self, X: torch.Tensor) -> torch.Tensor:
        """Principal log of the prepared ``X`` (float64/complex128)."""
        raise NotImplementedError

    def _grad_half_sq(self, X: torch.Tensor) -> torch.Tensor:
        """Gradient of ``||log M||^2 / 2`` with respect to ``M`` at the prepared ``X``: ``X log(X)``."""
        return X @ self._log64(X)

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        """Membership test, bool ``(...)``: ``max |H^* H - I| <= atol`` entrywise, plus the group's extra
        conditions (SO: ``det > 0``; SU: ``|det - 1| <= atol * d``; T: off-diagonal entries ``<= atol``;
        O-block: entries outside the blocks ``<= atol``). Source: design choice.
        """
        self._check(H, "H")
        eye = torch.eye(self.d, dtype=H.dtype, device=H.device)
        err = (_ct(H) @ H - eye).abs().amax(dim=(-2, -1))
        return (err <= atol) & _finite(H)

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        """Nearest group element (Frobenius), to remove floating-point drift: the polar factor ``U V^*`` of the
        SVD ``H = U S V^*`` (with the group's extra fixes). Same shape/dtype. Source: Nunley, arXiv 2602.18417 (polar/QR
        re-orthonormalisation); SVD polar is a design choice. NaN where ``H`` has a non-finite entry.
        """
        self._check(H, "H")
        ok = _finite(H)
        U, _, Vh = torch.linalg.svd(_finite_or_eye(H, ok))
        return _nan_where_bad(U @ Vh, ok)

    def identity(self, *batch, dtype: torch.dtype | None = None, device=None) -> torch.Tensor:
        """Identity, shape ``(*batch, d, d)``; dtype defaults to float32 (real groups) / complex64 (complex)."""
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        eye = torch.eye(self.d, dtype=dtype, device=device)
        return eye.expand(*shape, self.d, self.d).clone()

    def random_point(self, *batch, generator: torch.Generator | None = None, dtype=None, device=None) -> torch.Tensor:
        """Random group element, shape ``(*batch, d, d)``, Haar-distributed (uniform angles for T; Haar on
        each block for O-block). Uses QR of a Gaussian matrix with the sign/phase fix of Mezzadri (2007).
        ``generator`` must live on ``device``. Source: design choice (standard Haar sampling).
        """
        raise NotImplementedError

    def eigen_angles(self, H: torch.Tensor) -> torch.Tensor:
        """Eigenvalue phases of ``H`` in radians, ``(-pi, pi]``, sorted ascending; shape ``(..., d)``, real dtype.

        Computed in float64/complex128 (real matrices by the real solver, so complex eigenvalues come in exact
        conjugate pairs); the angle ``-pi`` (a ``-1`` eigenvalue with imaginary part ``-0``) is returned as ``+pi``
        after rounding to the output dtype. All NaN where ``H`` has a non-finite entry. Not meant for autograd.
        Source: issue #2 (the app's spectrum views).
        """
        self._check(H, "H")
        X = H.detach().to(torch.complex128 if H.is_complex() else torch.float64)
        ok = _finite(X)
        w = torch.linalg.eigvals(X.masked_fill(~ok[..., None, None], 0))
        theta = _principal(torch.angle(w), _real_dtype(H.dtype)).sort(dim=-1).values
        return _nan_where_bad(theta, ok)

    # -- shared numerics -----------------------------------------------------------------------------------------

    def _triu(self, device):
        """Row-major ``(rows, cols)`` indices of the strict upper triangle (``p < q``) on ``device``, cached: the
        off-diagonal coordinates of O, SO and U/SU (Nunley, arXiv 2602.18417)."""
        key = str(device)
        if key not in self._triu_cache:
            self._triu_cache[key] = torch.triu_indices(self.d, self.d, 1, device=device)
        return self._triu_cache[key]

    @staticmethod
    def _haar_unitary(shape, n, generator, device, complex_: bool) -> torch.Tensor:
        """Haar O(n) (real) or U(n) (complex) in float64/complex128, shape ``(*shape, n, n)``."""
        if complex_:
            re = torch.randn(*shape, n, n, generator=generator, dtype=torch.float64, device=device)
            im = torch.randn(*shape, n, n, generator=generator, dtype=torch.float64, device=device)
            Z = torch.complex(re, im) / _SQRT2
        else:
            Z = torch.randn(*shape, n, n, generator=generator, dtype=torch.float64, device=device)
        Q, R = torch.linalg.qr(Z)
        diag = torch.diagonal(R, dim1=-2, dim2=-1)
        if complex_:
            phase = diag / diag.abs().clamp_min(1e-300)
        else:
            phase = torch.where(diag < 0, -1.0, 1.0).to(Q.dtype)
        return Q * phase.unsqueeze(-2)

    @staticmethod
    def _unitary_log_angles(X: torch.Tensor):
        """Eigendecomposition of a prepared (finite, float64/complex128, unitary) matrix: returns (theta, V),
        ``theta`` in ``(-pi, pi]``."""
        w, V = torch.linalg.eig(X)
        return _principal(torch.angle(w)), V

    @staticmethod
    def _assemble_log(theta: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """``Q diag(i theta) Q^*`` in complex128, with ``Q`` the QR orthonormalisation of the eigenvectors ``V``.

        For a normal matrix eigenvectors of distinct eigenvalues are orthogonal, so Gram-Schmidt only
        orthonormalises inside (near-)degenerate eigenspaces: ``Q`` still diagonalises ``H`` and the result is
        exactly skew-Hermitian even when one eigenspace receives different logarithm branches (SU shift).
        """
        Q = torch.linalg.qr(V).Q
        D = torch.complex(torch.zeros_like(theta), theta)
        return (Q * D.unsqueeze(-2)) @ Q.mH
