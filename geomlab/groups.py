"""Matrix Lie groups for the orthogonal-state models: O(d), SO(d), U(d), SU(d), T^d, O(b)^m.

Every group is a closed subgroup ``G`` of ``U(d)`` represented by ``(..., d, d)`` matrices, real
(float32/float64) for O, SO and O-block, complex (complex64/complex128) for U, SU and the torus T.
The Lie algebra ``g`` is represented by matrices of the same shape and dtype, or by ``dim`` real
coordinates in a basis orthonormal for ``inner(A, B) = Re tr(A^* B)``.

Sources (paper notes ``osm.md``, Nunley 2026, arXiv:2602.18417): projections and exp §4.1; O vs SO §4.2;
coordinates §4.3; realification of U(d) §4.4; torus §4.5; block-diagonal O §4.6; ``pull`` §2.2;
drift and reprojection §7.3. Everything not stated there is a documented design choice.

Conventions
-----------
* ``A^*`` is the conjugate transpose (the transpose for real groups).
* Tangents are left-trivialised: a step from ``H`` is ``H @ exp(A)`` with ``A`` in the algebra (§7.4).
* Angles are in radians, in ``(-pi, pi]``.
* ``proj``, ``exp``, ``inner``, ``norm``, ``pull``, ``to_coords``, ``from_coords``, ``real_embed`` and
  ``from_real`` are differentiable (autograd) and run on any device; ``dist`` is differentiable with the
  gradient ``M log(M) / dist`` (0 at distance 0); ``log``, ``eigen_angles``, ``belongs`` and ``reproject`` are
  for analysis/maintenance and are not meant to be differentiated.
* Non-finite input (issue 15): NaN/inf never reach LAPACK; ``eigen_angles``, ``log``, ``dist``, ``reproject``
  and ``exp`` give NaN for a matrix with a non-finite entry, ``belongs`` False, the elementwise/linear
  operations propagate NaN (docs/groups.md, "Non-finite input").

Errors
------
Bad input raises :class:`GroupError` (a ``ValueError``): wrong shape, wrong dtype (a real tensor for a
complex group or the reverse, integer tensors), unknown group name or option, a block size that does not
divide ``d``, the log of a ``det = -1`` orthogonal matrix.

Example
-------
>>> g = get_group("SO", 3)
>>> A = g.proj(torch.randn(5, 3, 3))
>>> H = g.exp(A)
>>> bool(g.belongs(H).all())
True
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch
from torch.autograd.function import once_differentiable

__all__ = [
    "GroupError",
    "MatrixGroup",
    "GROUP_NAMES",
    "get_group",
    "real_embed",
    "from_real",
    "angles_to_matrix",
    "expm_skew",
    "expm_taylor",
    "expm_taylor_reference",
    "all_groups",
    "EXP_METHODS",
    "matrix_to_angles",
]

GROUP_NAMES = ("O", "SO", "U", "SU", "T", "O-block")
"""The names accepted by :func:`get_group`."""

_SQRT2 = math.sqrt(2.0)
_CUT_TOL = 1e-7  # radians: eigenvalue phases this close to +-pi count as the cut locus (real log)


class GroupError(ValueError):
    """Bad input to a group operation (shape, dtype, name, option or an undefined log)."""


# ----------------------------------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------------------------------


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

    This is what every eigenvalue-based analysis function works on (design choice, issue 15): LAPACK's eigen
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


def real_embed(X: torch.Tensor) -> torch.Tensor:
    """Realification ``rho(X + iY) = [[X, -Y], [Y, X]]`` of complex matrices.

    Shapes/dtypes: ``(..., d, d)`` complex64/complex128 -> ``(..., 2d, 2d)`` float32/float64. Differentiable.
    ``rho`` is an algebra homomorphism, so ``rho(exp A) = exp(rho A)``, ``rho(U(d)) = SO(2d) ∩ {W: WJ = JW}``
    and ``Re tr(A^* B) = tr(rho(A)^T rho(B)) / 2``. Source: osm.md §4.4.
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
    Source: osm.md §4.4. Raises :class:`GroupError` for complex input or an odd/non-square shape.
    """
    if not isinstance(W, torch.Tensor) or W.ndim < 2 or W.shape[-1] != W.shape[-2] or W.shape[-1] % 2:
        raise GroupError(f"from_real needs a (..., 2d, 2d) tensor, got shape {tuple(getattr(W, 'shape', ()))}")
    if W.is_complex() or not W.is_floating_point():
        raise GroupError(f"from_real needs a real floating tensor, got {W.dtype}")
    d = W.shape[-1] // 2
    a, b = W[..., :d, :d], W[..., :d, d:]
    c, e = W[..., d:, :d], W[..., d:, d:]
    return torch.complex((a + e) / 2, (c - b) / 2)


def angles_to_matrix(theta: torch.Tensor) -> torch.Tensor:
    """Torus element from its angles: ``diag(exp(i theta))``.

    ``theta``: ``(..., k)`` float32/float64, radians -> ``(..., k, k)`` complex64/complex128. Differentiable.
    Source: osm.md §4.5 (angle storage of T^k).
    """
    if not isinstance(theta, torch.Tensor) or theta.ndim < 1 or not theta.is_floating_point():
        raise GroupError("angles_to_matrix needs a real floating tensor of shape (..., k)")
    return torch.diag_embed(torch.polar(torch.ones_like(theta), theta))


def matrix_to_angles(H: torch.Tensor) -> torch.Tensor:
    """Angles (radians, in ``(-pi, pi]``) of the diagonal of a torus element, in diagonal order (not sorted).

    ``H``: ``(..., k, k)`` complex -> ``(..., k)`` real. Source: osm.md §4.5.
    """
    if not isinstance(H, torch.Tensor) or H.ndim < 2 or not H.is_complex():
        raise GroupError("matrix_to_angles needs a complex tensor of shape (..., k, k)")
    return _principal(torch.angle(torch.diagonal(H, dim1=-2, dim2=-1)))


# ----------------------------------------------------------------------------------------------------------------------
# the base class
# ----------------------------------------------------------------------------------------------------------------------


EXP_METHODS = ("auto", "eigh", "matrix_exp", "taylor")
"""Algorithms for ``exp`` of the full-matrix groups (see :func:`expm_skew`)."""


# Taylor exponential (moved from geomlab.models.osm, issue 17)

# (degree, largest Frobenius norm) pairs: the truncation bound theta^(m+1)/(m+1)! stays below the unit
# roundoff (2^-24 single, 2^-53 double) for ||X|| <= theta; larger norms are scaled into the last range.
_TAYLOR_SINGLE = ((8, 0.65),)  # degree 8 in three products (_taylor8_bbc), then squarings
_TAYLOR_DOUBLE = ((8, 0.015), (12, 0.33), (16, 0.82))


def _taylor_poly(X: torch.Tensor, m: int) -> torch.Tensor:
    """``sum_{k<=m} X^k / k!`` by Paterson-Stockmeyer (3, 4, 5 or 6 batched matmuls for m = 6, 8, 12, 16)."""
    c = [1.0 / math.factorial(k) for k in range(m + 1)]
    X2 = X @ X
    X3 = X2 @ X
    if m == 6:  # B0 + X^3 B1 with B0 = c0 + c1 X + c2 X2, B1 = c3 + c4 X + c5 X2 + c6 X3
        B1 = (c[4] * X).add(X2, alpha=c[5]).add(X3, alpha=c[6])
        B1.diagonal(dim1=-2, dim2=-1).add_(c[3])
        B0 = X.add(X2, alpha=c[2])
        B0.diagonal(dim1=-2, dim2=-1).add_(c[0])
        return _baddmm(B0, X3, B1)
    X4 = X2 @ X2

    def chunk(j: int) -> torch.Tensor:  # sum_{i=0..3} c_{4j+i} X^i (+ c_{4j+4} X^4 for the last chunk)
        B = (c[4 * j + 1] * X).add(X2, alpha=c[4 * j + 2]).add(X3, alpha=c[4 * j + 3])
        if 4 * j + 4 == m:
            B = B.add(X4, alpha=c[m])
        B.diagonal(dim1=-2, dim2=-1).add_(c[4 * j])
        return B

    n_chunks = m // 4  # m = 8: 2 chunks, 12: 3, 16: 4
    P = chunk(n_chunks - 1)
    for j in range(n_chunks - 2, -1, -1):
        P = _baddmm(chunk(j), X4, P)
    return P


_BBC_R = math.sqrt(177.0)
_BBC_X3 = 2.0 / 3.0
_BBC = {  # Bader, Blanes & Casas (2019), eq. (10): T_8 in three products
    "x1": _BBC_X3 * (1 + _BBC_R) / 88, "x2": _BBC_X3 * (1 + _BBC_R) / 352, "x3": _BBC_X3,
    "x4": (-271 + 29 * _BBC_R) / (315 * _BBC_X3), "x5": 11 * (-1 + _BBC_R) / (1260 * _BBC_X3),
    "x6": 11 * (-9 + _BBC_R) / (5040 * _BBC_X3), "x7": (89 - _BBC_R) / (5040 * _BBC_X3**2),
    "y2": (857 - 58 * _BBC_R) / 630,
}


def _taylor8_bbc(X: torch.Tensor) -> torch.Tensor:
    """``sum_{k<=8} X^k / k!`` in three batched matmuls (Bader, Blanes & Casas, "Computing the matrix
    exponential with an optimized Taylor polynomial approximation", Mathematics 7 (2019) 1174, eq. (10)):
    ``A4 = X2 (x1 X + x2 X2)``, ``A8 = (x3 X2 + A4)(x4 I + x5 X + x6 X2 + x7 A4)``,
    ``T8 = I + X + y2 X2 + A8`` (the identity of the coefficients with ``1/k!`` is checked in the tests)."""
    c = _BBC
    X2 = X @ X
    A4 = X2 @ (c["x1"] * X).add(X2, alpha=c["x2"])
    L = A4.add(X2, alpha=c["x3"])
    R = (c["x5"] * X).add(X2, alpha=c["x6"]).add(A4, alpha=c["x7"])
    R.diagonal(dim1=-2, dim2=-1).add_(c["x4"])
    C = X.add(X2, alpha=c["y2"])
    C.diagonal(dim1=-2, dim2=-1).add_(1.0)
    return _baddmm(C, L, R)


class _Taylor8Exp(torch.autograd.Function):
    """``T_8(X)^(2^s)`` with ``X = A / 2^s`` (:func:`_taylor8_bbc` then ``s`` squarings) and a hand-written
    backward: the reverse of the same 3 + s products, two matmuls each, with the linear combinations' adjoints
    accumulated directly (no autograd graph of ~20 nodes per call). Exactly the gradient autograd would give
    (checked against it in tests/test_speed.py). Double backward is not supported. Design choice (issue 17)."""

    @staticmethod
    def forward(ctx, A: torch.Tensor, s: int, A2: torch.Tensor | None = None) -> torch.Tensor:
        c = _BBC
        X = A * (2.0**-s) if s else A
        if A2 is None:
            X2 = X @ X
        else:  # A @ A computed by the caller for the norm bound: scaling by 4^-s is exact
            X2 = A2 * (4.0**-s) if s else A2
        Q = (c["x1"] * X).add_(X2, alpha=c["x2"])
        A4 = X2 @ Q
        R = (c["x5"] * X).add_(X2, alpha=c["x6"]).add_(A4, alpha=c["x7"])
        R.diagonal(dim1=-2, dim2=-1).add_(c["x4"])
        L = A4.add_(X2, alpha=c["x3"])  # in place (an out-of-place add with alpha is ~2x slower on CPU)
        C = (c["y2"] * X2).add_(X)
        C.diagonal(dim1=-2, dim2=-1).add_(1.0)
        P = C.baddbmm_(L, R)
        powers = [P]
        for _ in range(s):
            P = P @ P
            powers.append(P)
        ctx.save_for_backward(X, X2, Q, L, R, *powers[:-1])
        ctx.s = s
        return P

    @staticmethod
    @once_differentiable
    def backward(ctx, G: torch.Tensor):
        # Real: the adjoints in place, products with transposed views of the saved tensors (free for bmm).
        # Complex: a conjugate-transposed operand would be a copy, so the adjoints are propagated conjugate-
        # transposed, Gam = G^*, and every product takes the saved tensors as they are (G R^* -> R Gam); the
        # linear combinations have real coefficients, so they commute with ^*. Sums of products accumulate with
        # in-place baddbmm_ (out-of-place baddbmm copies its addend first).
        c = _BBC
        X, X2, Q, L, R, *powers = ctx.saved_tensors
        flip = G.is_complex()
        if flip:
            G = _ct(G).contiguous()

            def lm(S, Y):  # the frame's G S^*
                return S @ Y

            def rm(S, Y):  # the frame's S^* G
                return Y @ S

            def add_lm(acc, S, Y):
                return acc.baddbmm_(S, Y)

            def add_rm(acc, S, Y):
                return acc.baddbmm_(Y, S)
        else:
            def lm(S, Y):
                return Y @ S.mT

            def rm(S, Y):
                return S.mT @ Y

            def add_lm(acc, S, Y):
                return acc.baddbmm_(Y, S.mT)

            def add_rm(acc, S, Y):
                return acc.baddbmm_(S.mT, Y)

        for P in reversed(powers):  # Y = P P: dP = G P^* + P^* G
            G = add_rm(lm(P, G), P, G)
        GL = lm(R, G)  # P = C + L R: dL = G R^*, dR = L^* G
        GR = rm(L, G)
        GX2 = GL.mul(c["x3"]).add_(GR, alpha=c["x6"]).add_(G, alpha=c["y2"])
        GA4 = GL.add_(GR, alpha=c["x7"])
        GX2 = add_lm(GX2, Q, GA4)  # A4 = X2 Q
        GQ = rm(X2, GA4)
        GX2.add_(GQ, alpha=c["x2"])
        GX = GR.mul_(c["x5"]).add_(G).add_(GQ, alpha=c["x1"])
        GX = add_rm(add_lm(GX, X, GX2), X, GX2)  # X2 = X X: dX = G_X2 X^* + X^* G_X2
        if flip:
            GX = _ct(GX).contiguous()
        if ctx.s:
            GX = GX * (2.0**-ctx.s)
        return GX, None, None


def _baddmm(C: torch.Tensor, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``C + A @ B`` in one fused call for 3-d batches, broadcasting matmul otherwise."""
    if A.dim() == 3 and B.dim() == 3 and C.dim() == 3:
        return torch.baddbmm(C, A, B)
    return C + A @ B


#: Sizes whose batched matmuls run faster zero-padded (``exp(diag(X, 0)) = diag(exp X, I)`` exactly): measured with
#: ``torch.bmm`` on 2048 float32 matrices, one CPU thread (MKL): 5-7 -> 8 (~2x), 15 -> 16 (~1.5x), 29-31 -> 32
#: (~1.2x); every other size is faster unpadded (17 runs 2x faster than padded to 24). Design choice.
_PAD_TO = {5: 8, 6: 8, 7: 8, 15: 16, 29: 32, 30: 32, 31: 32}
#: The same for complex64 (``exp`` forward + backward, 1024 U(5) elements: unpadded ~1.2x faster).
_PAD_TO_COMPLEX = {k: v for k, v in _PAD_TO.items() if k != 5}
#: Smallest size at which :func:`expm_taylor` computes the spectral-norm bound (:func:`_norm2_bound`).
_BOUND_MIN_N = 5
#: Most squarings of the sync-free (non-CPU) path: Frobenius norms up to ``2^10 * 0.65`` in single precision.
_MAX_SQUARINGS = 10


def expm_taylor(A: torch.Tensor) -> torch.Tensor:
    """Matrix exponential by scaling and squaring of a truncated Taylor series, differentiable by autograd.

    ``A``: ``(..., n, n)`` float32/float64/complex64/complex128 -> ``exp(A)``, same shape and dtype.
    On CPU, from the largest norm in the batch it picks the degree ``m`` (8 in single precision, in three
    products, :func:`_taylor8_bbc`; 8, 12 or 16 in double) whose truncation bound ``||X||^(m+1)/(m+1)!`` is below
    the unit roundoff, scaling by ``2^-s`` first when the norm is beyond the last range (reading one scalar of a
    CPU tensor is no device synchronisation). The norm is the Frobenius norm, in single precision at ``n >= 5``
    replaced by the smaller upper bound on the spectral norm of :func:`_norm2_bound` (about half for skew
    matrices: one squaring fewer). On other devices (CUDA) nothing is read back to the host: the degree is the
    last one of the table and each matrix gets its own ``s_i`` (computed on the device, at most
    :data:`_MAX_SQUARINGS`; a larger norm gives NaN, which the trainer reports); the squarings are applied to
    the matrices that need them with ``torch.where``. The polynomial is evaluated by Paterson-Stockmeyer (3-6
    batched matmuls) and squared ``s`` times. Backward (hand-written in single precision,
    :class:`_Taylor8Exp`; autograd in double) costs about two matmuls per forward matmul, several times
    cheaper on CPU than the block-matrix backward of ``torch.linalg.matrix_exp`` (notes §7.1).
    For ``A`` in the Lie algebra of a closed subgroup the result lies in the group up to rounding
    (diagonal / block-diagonal structure is kept exactly). Sizes in :data:`_PAD_TO` are zero-padded (the
    top-left block is computed with the same arithmetic). A matrix with a non-finite entry gives NaN (the
    others of the batch are unaffected).
    Source: design choice (Moler & Van Loan 2003, "Nineteen dubious ways", method 3; Paterson & Stockmeyer
    1973 for the polynomial).
    """
    if A.numel() == 0:
        return A.clone()
    table = _TAYLOR_DOUBLE if A.dtype in (torch.float64, torch.complex128) else _TAYLOR_SINGLE
    shape = A.shape
    n = shape[-1]
    X = A.reshape(-1, n, n)  # 3-d batches use the fused baddbmm/bmm kernels
    with torch.no_grad():
        nrms = _fro(X.detach())
    if X.device.type != "cpu":
        return _expm_taylor_nosync(X, nrms, table, n).reshape(shape)
    nrm = float(nrms.max())
    if not math.isfinite(nrm):  # the matrices with a non-finite entry give NaN, the others their exponential
        ok = torch.isfinite(nrms)[:, None, None]
        out = expm_taylor(X.masked_fill(~ok, 0))
        nan = X.masked_fill(ok, 0) * float("nan")  # NaN value and NaN gradient for the bad matrices only
        return torch.where(ok, out, nan).reshape(shape)
    pad = (_PAD_TO_COMPLEX if X.is_complex() else _PAD_TO).get(n, n) - n
    if pad:
        X = torch.nn.functional.pad(X, (0, pad, 0, pad))
    if table is _TAYLOR_SINGLE:
        A2 = None
        # beyond the first range a tighter bound on ||X||_2 may save squarings; below n = 5 its dozen small passes
        # cost more than the squaring they can save (U(2..4), batch 1024: measured)
        if nrm > table[0][1] and n >= _BOUND_MIN_N:
            with torch.no_grad():
                A2 = X.detach() @ X.detach()
                nrm = min(nrm, _norm2_bound(X.detach(), A2, nrms))
        m, s = _taylor_degree(nrm, table)
        P = _Taylor8Exp.apply(X, s, A2)
    else:
        m, s = _taylor_degree(nrm, table)
        X = X / (2.0**s) if s else X
        P = _taylor_poly(X, m)
        for _ in range(s):
            P = P @ P
    if pad:
        P = P[:, :n, :n]
    return P.reshape(shape)


_TAYLOR_SINGLE_PS = ((6, 0.31), (8, 0.65), (12, 1.55))


def _fro(X: torch.Tensor) -> torch.Tensor:
    """Frobenius norms ``(N,)`` of ``X`` ``(N, n, n)``; for complex ``X`` on its real view (``matrix_norm`` of a
    complex64 batch is ~50x slower on CPU)."""
    return torch.linalg.vector_norm(torch.view_as_real(X) if X.is_complex() else X,
                                    dim=(-3, -2, -1) if X.is_complex() else (-2, -1))


def _norm2_bound(X: torch.Tensor, X2: torch.Tensor, fro: torch.Tensor) -> float:
    """An upper bound on ``max_i ||X_i||_2`` for ``X`` ``(N, n, n)``, given ``X2 = X @ X`` and the Frobenius
    norms ``fro`` ``(N,)``; far below ``||X||_F`` for (nearly) skew-symmetric / skew-Hermitian ``X``.

    With ``X = S + N`` (``S`` its skew(-Hermitian) part, ``N`` the (Hermitian) rest): ``S`` is normal, so
    ``||S||_2^2 = ||S^2||_2 <= ||S^2||_F / c`` with ``c = sqrt 2`` for real ``S`` (its eigenvalues ``+-i theta``
    come in pairs, so ``-theta_max^2`` is a double eigenvalue of ``S^2``) and ``c = 1`` for complex ``S``;
    ``S^2 = X2 - SN - NS - N^2`` gives ``||S^2||_F <= ||X2||_F + 2 ||X||_F ||N||_F + ||N||_F^2``; and
    ``||X||_2 <= ||S||_2 + ||N||_F``. The result is at most ``max ||X_i||_F`` (the bound used otherwise), so
    the Taylor truncation ``sum_{k>m} ||X||_2^k / k!`` stays below the unit roundoff in the spectral norm with
    the same table. Design choice (issue 17): at the norms of OSMFormer training it halves the bound (17 x 17:
    0.61 against 1.30) and saves one squaring (one product forward, two backward) per exponential. Meant for
    the norms where squarings are at stake (:func:`expm_taylor` calls it above 0.65): for entries below ~1e-19
    the float32 ``||X2||_F`` underflows."""
    # ||N||_F^2 = (||X||_F^2 + Re tr X2) / 2, plus the rounding of the float32 trace (each diagonal entry of X2
    # is a length-n dot product: error <= gamma_n sum_k |X_ik X_ki|, at most ~n u ||X||_F^2 in all)
    n = X.shape[-1]
    fro2 = fro.square()
    tr = X2.diagonal(dim1=-2, dim2=-1).sum(-1)
    tr = tr.real if tr.is_complex() else tr
    nN = ((fro2 + tr) * 0.5 + (2 * (n + 1) * 2.0**-24) * fro2).clamp_min(0).sqrt()
    s2 = _fro(X2) + nN * (2 * fro + nN)
    c = 1.0 if X.is_complex() else math.sqrt(2.0)
    return float(torch.minimum((s2 / c).sqrt() + nN, fro).max())


def _taylor_degree(nrm: float, table) -> tuple[int, int]:
    """``(m, s)``: the Taylor degree ``m`` of the first ``(m, theta)`` of ``table`` with ``nrm <= theta``, and
    ``s = 0`` squarings; past the table, its last degree with the fewest squarings ``s`` that bring ``nrm``
    under its ``theta`` (scaling and squaring). Shared by :func:`expm_taylor` and
    :func:`expm_taylor_reference`."""
    for m, theta in table:
        if nrm <= theta:
            return m, 0
    m, theta = table[-1]
    return m, math.ceil(math.log2(nrm / theta))


def expm_taylor_reference(A: torch.Tensor) -> torch.Tensor:
    """The Taylor exponential as it was before issue 17, kept as the *reference arithmetic* of evaluation mode.

    Same mathematics as :func:`expm_taylor` (equal to float32 rounding): Paterson-Stockmeyer degree 6, 8 or 12
    (single) / 8, 12, 16 (double) picked from the largest Frobenius norm, sizes above 8 zero-padded to a multiple
    of 8, autograd backward, whole batch NaN for a non-finite entry. The OSM models use it in eval mode so that
    traces and evaluations of saved checkpoints reproduce bit for bit what earlier versions wrote (the trace
    fixtures compare states exactly); training uses the faster :func:`expm_taylor`. Design choice (issue 17).
    """
    if A.numel() == 0:
        return A.clone()
    table = _TAYLOR_DOUBLE if A.dtype in (torch.float64, torch.complex128) else _TAYLOR_SINGLE_PS
    with torch.no_grad():
        nrm = float(torch.linalg.matrix_norm(A.detach(), ord="fro").max())
    if not math.isfinite(nrm):
        return A + float("nan")
    m, s = _taylor_degree(nrm, table)
    shape = A.shape
    n = shape[-1]
    X = A.reshape(-1, n, n)
    pad = (-n) % 8 if n > 8 else 0
    if pad:
        X = torch.nn.functional.pad(X, (0, pad, 0, pad))
    X = X / (2.0**s) if s else X
    P = _taylor_poly(X, m)
    for _ in range(s):
        P = P @ P
    if pad:
        P = P[:, :n, :n]
    return P.reshape(shape)


def _expm_taylor_nosync(X: torch.Tensor, nrms: torch.Tensor, table, n: int) -> torch.Tensor:
    """The device path of :func:`expm_taylor` for ``X`` ``(N, n, n)``: per-matrix scaling, fixed degree, masked
    squarings; no value is read back to the host."""
    m, theta = table[-1]
    s = torch.ceil(torch.log2(nrms / theta)).clamp(0, _MAX_SQUARINGS)
    s = torch.nan_to_num(s, nan=0.0, posinf=0.0)
    bad = ~torch.isfinite(nrms) | (nrms > theta * 2.0**_MAX_SQUARINGS)
    scale = torch.exp2(-s).to(X.real.dtype if X.is_complex() else X.dtype)
    X = X * scale[:, None, None]
    P = _taylor8_bbc(X) if m == 8 and table is _TAYLOR_SINGLE else _taylor_poly(X, m)
    for k in range(_MAX_SQUARINGS):
        P = torch.where((s > k)[:, None, None], P @ P, P)
    return torch.where(bad[:, None, None], torch.full_like(P, float("nan")), P)


class _SkewExp(torch.autograd.Function):
    """``exp`` of the skew(-Hermitian) part of ``A`` by a Hermitian eigendecomposition, with the exact
    Frechet-derivative backward ``V [(V^* G V) o Phi] V^*``, ``Phi_jk = e^{-i(mu_j+mu_k)/2} sinc((mu_j-mu_k)/2)``
    (divided differences of exp written without any division by eigenvalue gaps, so it is stable for
    repeated eigenvalues), followed by one Newton-Schulz polar step in forward. Design choice: cheaper than
    ``matrix_exp`` forward+backward on CPU (see ``python -m geomlab.bench groups``)."""

    @staticmethod
    def forward(ctx, A: torch.Tensor) -> torch.Tensor:
        real = not A.is_complex()
        Ac = A.to(_complex_dtype(A.dtype)) if real else A
        S = (Ac - Ac.mT.conj()) / 2
        # never hand a NaN/inf to LAPACK (eigh raises _LinAlgError on it, MKL may crash): such matrices are
        # exponentiated as 0 and their result (and gradient) set to NaN below
        ok = _finite(S)
        all_ok = bool(ok.all())  # the common case skips the masking passes
        if not all_ok:
            S = S.masked_fill(~ok[..., None, None], 0)
        lam, V = torch.linalg.eigh(1j * S)  # i S is Hermitian: S = V diag(-i lam) V^*
        mu = -lam
        E = torch.polar(torch.ones_like(mu), mu)
        H = (V * E.unsqueeze(-2)) @ V.mH
        if real:
            H = H.real.contiguous()
        # one Newton-Schulz polar step H (3I - H^*H)/2 (osm.md §7.3): float32 eigenvectors are unitary only to a
        # few d*eps, this brings exp(A) back to matrix_exp's unitarity; it changes H by O(eps), not the gradient
        H = 1.5 * H - 0.5 * H @ (_ct(H) @ H)
        if not all_ok:
            H = H.masked_fill(~ok[..., None, None], float("nan"))
        ctx.save_for_backward(V, mu, ok)
        ctx.real = real
        ctx.all_ok = all_ok
        return H

    @staticmethod
    @once_differentiable
    def backward(ctx, G: torch.Tensor) -> torch.Tensor:
        V, mu, ok = ctx.saved_tensors
        Gc = G.to(V.dtype)
        a, b = mu.unsqueeze(-1), mu.unsqueeze(-2)
        phi = torch.polar(torch.ones_like(a + b), -(a + b) / 2) * torch.sinc((a - b) / (2 * math.pi))
        grad = V @ ((V.mH @ Gc @ V) * phi) @ V.mH  # L(S^*, G): the adjoint of the Frechet derivative
        grad = (grad - grad.mT.conj()) / 2  # adjoint of the skew part taken in forward
        if not ctx.all_ok:
            grad = grad.masked_fill(~ok[..., None, None], float("nan"))
        return grad.real.contiguous() if ctx.real else grad


def expm_skew(A: torch.Tensor, method: str = "auto") -> torch.Tensor:
    """Matrix exponential of skew-symmetric / skew-Hermitian matrices ``(..., n, n)`` (same dtype). Differentiable.

    ``method``: ``"matrix_exp"`` (``torch.linalg.matrix_exp`` of ``A`` as given), ``"eigh"`` (exp of the
    skew(-Hermitian) part of ``A`` via ``torch.linalg.eigh`` and an analytic backward; unitary to working
    precision), ``"taylor"`` (:func:`expm_taylor` of ``A`` as given: scaling and squaring of a degree-8/16
    Taylor polynomial, autograd backward), ``"auto"`` (``"taylor"`` for float32/64/complex64/128 tensors on
    CPU, else ``"matrix_exp"``; design choice from ``python -m geomlab.bench groups``: at least 2x faster than
    ``matrix_exp`` forward+backward at every d from 2 to 32, where ``eigh`` gains 1.2-3x). Raises :class:`GroupError` for an unknown method.
    Double backward is not supported by ``"eigh"``. A matrix with a non-finite entry gives an all-NaN result
    (and gradient) with every method; ``eigh`` never sees it. Source: osm.md §4.1, §7.1 (cost of matrix_exp).
    """
    if method not in EXP_METHODS:
        raise GroupError(f"exp method must be one of {EXP_METHODS}, got {method!r}")
    if method == "auto":
        ok = A.device.type == "cpu" and A.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128)
        method = "taylor" if ok else "matrix_exp"
    if method == "taylor":
        return expm_taylor(A)
    if method == "eigh":
        return _SkewExp.apply(A)
    # matrix_exp has no LAPACK eigen call, but maps a -inf entry to a finite result: NaN for non-finite input
    bad = torch.where(_finite(A), 1.0, float("nan")).to(_real_dtype(A.dtype))
    return torch.linalg.matrix_exp(A) * bad[..., None, None]


class MatrixGroup:
    """A compact matrix Lie group ``G ⊂ U(d)`` with batched geometry on ``(..., d, d)`` tensors.

    Build instances with :func:`get_group`. Attributes:

    * ``name``: one of :data:`GROUP_NAMES`.
    * ``d``: matrix size.
    * ``is_complex``: True for U, SU, T (complex64/complex128 tensors), False for O, SO, O-block.
    * ``dim``: real dimension of the Lie algebra (number of coordinates): O/SO ``d(d-1)/2``, U ``d^2``,
      SU ``d^2-1``, T ``d``, O-block ``m b(b-1)/2`` (osm.md §1).
    * ``options``: the options passed to :func:`get_group` (``{"block": b}`` for O-block, else ``{}``).
    """

    name: str = ""
    is_complex: bool = False

    def __init__(self, d: int):
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise GroupError(f"d must be a positive int, got {d!r}")
        self.d = int(d)
        self.options: dict = {}

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

        Same shape and dtype as ``Y``; idempotent; differentiable. Source: osm.md §4.1.
        """
        raise NotImplementedError

    def inner(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        """``Re tr(A^* B)``: ``(..., d, d)`` x ``(..., d, d)`` -> ``(...)`` real (broadcasts). Differentiable.

        Source: osm.md §1 (the Frobenius inner product that makes the algebra bases orthonormal).
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
        Differentiable. Source: osm.md §2.2.
        """
        self._check(H, "H")
        self._check(X, "X")
        return self.proj(_ct(H) @ X)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """Coordinates ``(..., dim)`` (real dtype) of ``proj(A)`` in a basis orthonormal for ``inner``.

        For ``A`` in the algebra this is the coordinate vector; for any matrix it is the adjoint of
        ``from_coords``: ``to_coords(Y) @ c == inner(Y, from_coords(c))``. Differentiable.
        Source: osm.md §4.3.
        """
        raise NotImplementedError

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        """Algebra element ``(..., d, d)`` from coordinates ``(..., dim)`` (float32 -> float32/complex64,
        float64 -> float64/complex128). Inverse isometry of :meth:`to_coords`. Differentiable.
        Raises :class:`GroupError` if the last axis is not ``dim`` or ``c`` is not real floating.
        Source: osm.md §4.3.
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
        their own cheaper paths. Source: osm.md §4.1.
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
        raise NotImplementedError

    def dist(self, H1: torch.Tensor, H2: torch.Tensor) -> torch.Tensor:
        """Geodesic distance ``||log(H1^* H2)||_F`` (bi-invariant metric from ``inner``), shape ``(...)``.

        Computed in float64/complex128 from the eigenvalue phases ``theta`` of the polar factor of ``H1^* H2`` as
        ``sqrt(sum theta^2)``, which equals the Frobenius norm of the principal log and stays well defined on the
        cut locus. Broadcasts; the result has the real dtype of the input. NaN where ``H1^* H2`` has a non-finite
        entry (LAPACK never sees it).

        Differentiable (issue 15): the gradient with respect to ``M = H1^* H2`` is ``M log(M) / dist`` (the
        gradient of a spectral function of a unitary matrix), and 0 at distance 0 (the identity, where ``dist``
        has a kink like ``|x|``), 0 where the distance is ``inf``; the eigenvalue solver itself is not
        differentiated (its gradient is NaN at repeated eigenvalues).
        Source: issue #2 / osm.md §2.2 (``log`` as the geodesic direction).
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
        SVD ``H = U S V^*`` (with the group's extra fixes). Same shape/dtype. Source: osm.md §7.3 (polar/QR
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


# ----------------------------------------------------------------------------------------------------------------------
# O(d) and SO(d)
# ----------------------------------------------------------------------------------------------------------------------


class _OrthogonalBase(MatrixGroup):
    is_complex = False

    def __init__(self, d: int):
        super().__init__(d)
        self._triu_cache: dict = {}

    @property
    def dim(self) -> int:
        return self.d * (self.d - 1) // 2

    def _triu(self, device):
        key = str(device)
        if key not in self._triu_cache:
            self._triu_cache[key] = torch.triu_indices(self.d, self.d, 1, device=device)
        return self._triu_cache[key]

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``skew(Y) = (Y - Y^T)/2``; ``(..., d, d)`` real. Idempotent, differentiable. Source: osm.md §4.1."""
        self._check(Y, "Y")
        return (Y - Y.mT) / 2

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``sqrt(2) * skew(A)[p, q]`` for ``p < q`` (row-major), shape ``(..., d(d-1)/2)``. Source: osm.md §4.3."""
        self._check(A, "A")
        r, c = self._triu(A.device)
        return (A[..., r, c] - A[..., c, r]) / _SQRT2

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        """Scatter ``c / sqrt(2)`` into the upper triangle and subtract the transpose. Source: osm.md §4.3."""
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

    log.__doc__ = MatrixGroup.log.__doc__ + "\n        Raises :class:`GroupError` for ``det(H) < 0`` (osm.md §4.2).\n"

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

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        return super().reproject(H)

    reproject.__doc__ = MatrixGroup.reproject.__doc__

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary(shape, self.d, generator, device, complex_=False)
        return Q.to(dtype)

    random_point.__doc__ = MatrixGroup.random_point.__doc__


class OrthogonalGroup(_OrthogonalBase):
    """O(d): real orthogonal matrices (both components). Algebra: skew-symmetric matrices.

    ``exp`` lands in SO(d) (osm.md §4.2); ``random_point`` is Haar on all of O(d); ``log`` raises for det -1.
    """

    name = "O"


class SpecialOrthogonalGroup(_OrthogonalBase):
    """SO(d): rotations (det = +1). Same algebra, projection and coordinates as O(d) (osm.md §4.1-4.2)."""

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


# ----------------------------------------------------------------------------------------------------------------------
# U(d) and SU(d)
# ----------------------------------------------------------------------------------------------------------------------


class _UnitaryBase(MatrixGroup):
    is_complex = True

    def __init__(self, d: int):
        super().__init__(d)
        self._triu_cache: dict = {}

    def _triu(self, device):
        key = str(device)
        if key not in self._triu_cache:
            self._triu_cache[key] = torch.triu_indices(self.d, self.d, 1, device=device)
        return self._triu_cache[key]

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
        Q = self._haar_unitary(shape, self.d, generator, device, complex_=True)
        if self.name == "SU":
            phase = torch.angle(torch.linalg.det(Q)) / self.d
            Q = Q * torch.polar(torch.ones_like(phase), -phase)[..., None, None]
        return Q.to(dtype)

    random_point.__doc__ = (
        MatrixGroup.random_point.__doc__
        + "\n        SU: a Haar U(d) sample times ``det^{-1/d}`` (left-invariant, hence Haar on SU(d)).\n"
    )


class UnitaryGroup(_UnitaryBase):
    """U(d): complex unitary matrices. Algebra: skew-Hermitian matrices, dim d^2 (osm.md §4.1)."""

    name = "U"

    @property
    def dim(self) -> int:
        return self.d * self.d

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``(Y - Y^*)/2``; ``(..., d, d)`` complex. Idempotent, differentiable. Source: osm.md §4.1."""
        self._check(Y, "Y")
        return self._skew_h(Y)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``[sqrt2 Re S_pq (p<q), sqrt2 Im S_pq (p<q), Im S_pp]`` with ``S = proj(A)``; ``(..., d^2)`` real.
        Source: osm.md §4.3."""
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

    def log(self, H: torch.Tensor) -> torch.Tensor:
        self._check(H, "H")
        X, ok = self._prep(H.detach())
        return _nan_where_bad(self._log64(X), ok).to(H.dtype)

    log.__doc__ = MatrixGroup.log.__doc__


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
    """SU(d): unitary matrices with det = 1. Algebra: traceless skew-Hermitian, dim d^2 - 1 (osm.md §4.1)."""

    name = "SU"

    @property
    def dim(self) -> int:
        return self.d * self.d - 1

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``S - (tr S / d) I`` with ``S = (Y - Y^*)/2``. Idempotent, differentiable. Source: osm.md §4.1."""
        self._check(Y, "Y")
        S = self._skew_h(Y)
        tr = torch.diagonal(S, dim1=-2, dim2=-1).sum(-1) / self.d
        return S - tr[..., None, None] * torch.eye(self.d, dtype=S.dtype, device=S.device)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """U(d) off-diagonal coordinates followed by ``d-1`` Helmert coordinates of ``Im diag``;
        shape ``(..., d^2 - 1)``. Source: osm.md §4.3 (Helmert option)."""
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
        self._check(H, "H")
        X, ok = self._prep(H.detach())
        return _nan_where_bad(self._log64(X), ok).to(H.dtype)

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


# ----------------------------------------------------------------------------------------------------------------------
# the torus T^d (diagonal unitary)
# ----------------------------------------------------------------------------------------------------------------------


class TorusGroup(MatrixGroup):
    """T^d: diagonal unitary matrices ``diag(exp(i theta))``, abelian, dim d (osm.md §4.5).

    Fast paths: ``exp`` and ``log`` are elementwise on the diagonal; :func:`angles_to_matrix` and
    :func:`matrix_to_angles` convert to/from angle storage.
    """

    name = "T"
    is_complex = True

    @property
    def dim(self) -> int:
        return self.d

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``i * Im(diag Y)`` as a diagonal matrix. Idempotent, differentiable. Source: osm.md §4.1.
        A non-finite diagonal entry (real part included) gives NaN; off-diagonal entries are not read."""
        self._check(Y, "Y")
        z = torch.diagonal(Y, dim1=-2, dim2=-1)
        im = z.imag + 0 * z.real  # 0 * (NaN or inf) keeps a non-finite real part visible
        return torch.diag_embed(torch.complex(torch.zeros_like(im), im))

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """``Im diag(A)``, the angle increments, shape ``(..., d)`` (NaN for a non-finite real part too).
        Source: osm.md §4.3."""
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
        entry gives NaN there (elementwise). Source: osm.md §4.5."""
        self._check(A, "A")
        if method not in EXP_METHODS:
            raise GroupError(f"exp method must be one of {EXP_METHODS}, got {method!r}")
        z = torch.diagonal(A, dim1=-2, dim2=-1)
        # exp(-inf) would be a finite 0: a non-finite entry gives NaN instead (value and gradient)
        bad = torch.where(torch.isfinite(z), 1.0, float("nan")).to(z.real.dtype)
        return torch.diag_embed(torch.exp(z) * bad)

    def log(self, H: torch.Tensor) -> torch.Tensor:
        """``diag(i * angle(H_pp))``, angles in ``(-pi, pi]``; only the diagonal's values are used, but the whole
        result is NaN when any entry of ``H`` is non-finite. Source: osm.md §4.5."""
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


# ----------------------------------------------------------------------------------------------------------------------
# block-diagonal O(b)^m
# ----------------------------------------------------------------------------------------------------------------------


class BlockOrthogonalGroup(MatrixGroup):
    """O(b)^m: block-diagonal real orthogonal matrices with ``m = d / b`` blocks of size ``b`` (osm.md §4.6).

    Algebra: block-diagonal skew-symmetric matrices, dim ``m b(b-1)/2``. ``exp``/``log`` act per block
    (batched ``matrix_exp`` on ``(..., m, b, b)``); coordinates are the per-block O(b) coordinates, block-major.
    """

    name = "O-block"
    is_complex = False

    def __init__(self, d: int, block: int):
        super().__init__(d)
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise GroupError(f"O-block: option block must be a positive int, got {block!r}")
        if d % block:
            raise GroupError(f"O-block: block={block} does not divide d={d}")
        self.block = int(block)
        self.m = d // block
        self.options = {"block": self.block}
        self._inner = OrthogonalGroup(self.block)
        self._mask_cache: dict = {}

    @property
    def dim(self) -> int:
        return self.m * self.block * (self.block - 1) // 2

    def _mask(self, device, dtype) -> torch.Tensor:
        key = (str(device), dtype)
        if key not in self._mask_cache:
            ones = torch.ones(self.m, self.block, self.block, dtype=dtype, device=device)
            self._mask_cache[key] = _diag_embed_blocks(ones)
        return self._mask_cache[key]

    def blocks(self, X: torch.Tensor) -> torch.Tensor:
        """The diagonal blocks of ``X``: ``(..., d, d)`` -> ``(..., m, b, b)`` (a differentiable view)."""
        self._check(X, "X")
        return _extract_blocks(X, self.block)

    def from_blocks(self, blocks: torch.Tensor) -> torch.Tensor:
        """Block-diagonal matrix from blocks: ``(..., m, b, b)`` -> ``(..., d, d)``. Differentiable."""
        if blocks.ndim < 3 or tuple(blocks.shape[-3:]) != (self.m, self.block, self.block):
            raise GroupError(f"{self!r}: blocks must have shape (..., {self.m}, {self.block}, {self.block})")
        return _diag_embed_blocks(blocks)

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``skew`` of each diagonal block, zero elsewhere. Idempotent, differentiable. Source: osm.md §4.1."""
        self._check(Y, "Y")
        return (Y - Y.mT) / 2 * self._mask(Y.device, Y.dtype)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """Per-block O(b) coordinates, block-major, shape ``(..., m b(b-1)/2)``. Source: osm.md §4.3."""
        B = self.blocks(A)
        return self._inner.to_coords(B).flatten(-2)

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        self._check_coords(c)
        per = self.block * (self.block - 1) // 2
        B = self._inner.from_coords(c.reshape(*c.shape[:-1], self.m, per))
        return _diag_embed_blocks(B)

    from_coords.__doc__ = MatrixGroup.from_coords.__doc__

    def exp(self, A: torch.Tensor, method: str = "auto") -> torch.Tensor:
        """Batched exponential of the diagonal blocks ``(..., m, b, b)`` (off-block entries of ``A`` are ignored),
        cost ``O(m b^3)``; ``method`` as in :func:`expm_skew`. Differentiable. Source: osm.md §4.6."""
        B = self.blocks(A).contiguous()  # matrix_exp rejects this strided view
        return _diag_embed_blocks(expm_skew(B, method))

    def log(self, H: torch.Tensor) -> torch.Tensor:
        """Per-block principal log (see :meth:`MatrixGroup.log`); off-block entries are ignored.
        Raises :class:`GroupError` if a block has det < 0. Source: osm.md §4.6 + design choice."""
        self._check(H, "H")
        ok = _finite(H)
        X, _ = _unitary64(self.blocks(_finite_or_eye(H.detach(), ok)))
        self._inner._check_det(X)
        return _nan_where_bad(_diag_embed_blocks(self._inner._log_real(X)), ok).to(H.dtype)

    def dist(self, H1: torch.Tensor, H2: torch.Tensor) -> torch.Tensor:
        """Geodesic distance ``||log(H1^T H2)||_F`` computed per block; ``inf`` where some block of
        ``H1^T H2`` has det < 0 (different components). Shape ``(...)``. Source: issue #2 + design choice."""
        self._check(H1, "H1")
        self._check(H2, "H2")
        M = H1.mT @ H2
        ok = _finite(M.detach())
        X, _ = _unitary64(_extract_blocks(_finite_or_eye(M.detach(), ok), self.block))  # (..., m, b, b)
        neg = torch.linalg.det(X) < 0
        eye = torch.eye(self.block, dtype=X.dtype, device=X.device)
        X = torch.where(neg[..., None, None], eye, X)
        theta = torch.angle(torch.linalg.eigvals(X))  # (..., m, b)
        f = theta.square().sum(dim=(-2, -1)).sqrt()
        return self._finish_dist(M, ok, f, lambda: _diag_embed_blocks(X @ self._inner._log_real(X)),
                                 far=neg.any(-1))

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        ok = super().belongs(H, atol)
        off = (H * (1 - self._mask(H.device, H.dtype))).abs().amax(dim=(-2, -1))
        return ok & (off <= atol)

    belongs.__doc__ = MatrixGroup.belongs.__doc__

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        """Polar factor of each diagonal block; off-block entries are dropped (NaN everywhere when any entry is
        non-finite). Source: design choice."""
        self._check(H, "H")
        ok = _finite(H)
        U, _, Vh = torch.linalg.svd(_finite_or_eye(self.blocks(_finite_or_eye(H, ok))))
        return _nan_where_bad(_diag_embed_blocks(U @ Vh), ok)

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        """Haar on each O(b) block independently (Haar on O(b)^m). Shape ``(*batch, d, d)``."""
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary((*shape, self.m), self.block, generator, device, complex_=False)
        return _diag_embed_blocks(Q).to(dtype)


# ----------------------------------------------------------------------------------------------------------------------
# factory
# ----------------------------------------------------------------------------------------------------------------------

_CLASSES = {
    "O": OrthogonalGroup,
    "SO": SpecialOrthogonalGroup,
    "U": UnitaryGroup,
    "SU": SpecialUnitaryGroup,
    "T": TorusGroup,
}


def get_group(name: str, d: int, **options) -> MatrixGroup:
    """Build a group by name: ``"O"``, ``"SO"``, ``"U"``, ``"SU"``, ``"T"`` or ``"O-block"`` (option ``block``).

    ``d`` is the matrix size (for T it is the torus dimension k). Raises :class:`GroupError` for an unknown
    name, a non-positive ``d``, an unknown option, or (O-block) a missing ``block`` / one that does not divide d.
    Source: issue #2; osm.md §4.
    """
    if name not in GROUP_NAMES:
        raise GroupError(f"unknown group {name!r}; choose one of {', '.join(GROUP_NAMES)}")
    if name == "O-block":
        unknown = set(options) - {"block"}
        if unknown:
            raise GroupError(f"O-block: unknown option(s) {sorted(unknown)}; the only option is block")
        if "block" not in options:
            raise GroupError("O-block needs the option block (the block size b, dividing d)")
        return BlockOrthogonalGroup(d, options["block"])
    if options:
        raise GroupError(f"group {name!r} takes no options, got {sorted(options)}")
    return _CLASSES[name](d)


def all_groups(dims: Iterable[int] = (1, 2, 3, 4, 8)) -> list[MatrixGroup]:
    """Every group kind for each ``d`` in ``dims`` (O-block with b = 2 and b = d/2 where they divide d).
    Convenience for tests and benchmarks."""
    out: list[MatrixGroup] = []
    for d in dims:
        for name in ("O", "SO", "U", "SU", "T"):
            out.append(get_group(name, d))
        for b in sorted({2, d // 2} - {0}):
            if d % b == 0 and b < d:
                out.append(get_group("O-block", d, block=b))
    return out
