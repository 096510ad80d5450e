"""Geometry of oriented 2-planes in R^r: Plücker coordinates and the Grassmannian Gr(2, r).

Used by :mod:`geomlab.models.grassmann` (the Plücker features of the Causal Grassmann layer) and by the
Grassmann figures (:mod:`geomlab.figures.grassmann`; their 3-D window geometry is in
:mod:`geomlab.figures.plane_scenes`). Everything works on ``torch`` tensors with any number of leading batch
axes ``...`` (array-likes are converted with ``torch.as_tensor``); float32 or float64, real.

Conventions (source: Zhang, arXiv 2512.19428, and its public reproductions):

* The Plücker vector of the pair ``(a, b)`` is ``p_ij = a_i b_j - a_j b_i`` for ``0 <= i < j < r`` in
  lexicographic order (``P = r (r - 1) / 2`` values), the strict upper triangle of ``a b^T - b a^T``.
  The order ``(a, b)`` = (current, past) fixes the orientation: swapping flips the sign.
* A plane is given either by a spanning pair ``(a, b)`` or by an orthonormal basis ``Q`` of shape
  ``(..., r, 2)`` (see :func:`plane_basis`).
* Angles are in radians.

Errors: a :class:`PlaneError` (a ``ValueError``) for inputs of the wrong shape.

Non-finite input: NaN/inf never reach LAPACK (SVD, det). Functions that solve (``principal_angles`` and the
distances, ``interpolate``, ``decomposability``, ``dominant_plane``) return NaN for every batch item with a
non-finite entry; elementwise ones (``plucker``, ``bivector``, ``normalize_plucker``...) propagate NaN to the
entries that depend on it; ``plane_basis`` gives NaN and ``ok = False``.
"""

from __future__ import annotations

import math
import operator

import torch

__all__ = [
    "PlaneError", "plucker_size", "plucker_rank", "plucker_indices", "plucker", "normalize_plucker",
    "bivector", "plucker_relations", "plane_basis", "principal_angles", "geodesic_distance",
    "chordal_distance", "fubini_study_distance", "binet_cauchy_distance", "dist", "interpolate",
    "grassmann_exp", "grassmann_log",
    "coordinate_energy", "decomposability", "dominant_plane",
]


class PlaneError(ValueError):
    """Bad input to a plane-geometry function (wrong shape or size)."""


def _finite_items(X: torch.Tensor, ndim: int) -> torch.Tensor:
    """bool over the batch axes: True where the trailing ``ndim`` axes of ``X`` are all finite."""
    ok = torch.isfinite(X)
    for _ in range(ndim):
        ok = ok.all(-1)
    return ok


def _nan_where(X: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """``X`` with every batch item where ``ok`` is False set to NaN (``ok`` broadcasts over the leading axes)."""
    ok = ok.reshape(*ok.shape, *([1] * (X.ndim - ok.ndim))) if ok.ndim < X.ndim else ok
    return X.masked_fill(~ok, float("nan"))


def _safe_mat(M: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(M', ok)``: ``M`` with its non-finite matrices replaced by zeros, so that LAPACK (SVD, det) never sees a
    NaN or an infinity (it can fail to converge, raise a raw linear-algebra error or crash); callers set their
    results to NaN where ``ok`` is False (design choice)."""
    ok = _finite_items(M, 2)
    return M.masked_fill(~ok[..., None, None], 0), ok


def _safe_sqrt(x: torch.Tensor) -> torch.Tensor:
    """``sqrt(max(x, 0))`` with gradient 0 (not inf * 0 = NaN) where ``x <= 0``; NaN stays NaN."""
    pos = x > 0
    out = torch.where(pos, torch.sqrt(torch.where(pos, x, torch.ones_like(x))), torch.zeros_like(x))
    return torch.where(torch.isnan(x), x, out)


def _t(x) -> torch.Tensor:
    x = torch.as_tensor(x)
    if not torch.is_floating_point(x):
        x = x.to(torch.get_default_dtype())
    return x


def _count(n, what: str) -> int:
    """``n`` as an int (ints, numpy/torch integer scalars); :class:`PlaneError` for anything else (a float,
    NaN, inf)."""
    try:
        return operator.index(n)
    except TypeError:
        raise PlaneError(f"{what} must be an integer, got {n!r}") from None


def plucker_size(r: int) -> int:
    """``P = r (r - 1) / 2``: the number of Plücker coordinates of a 2-plane in R^r."""
    r = _count(r, "rank r")
    if r < 2:
        raise PlaneError(f"rank r must be >= 2 for 2-planes, got {r}")
    return r * (r - 1) // 2


def plucker_rank(P: int) -> int:
    """The ambient dimension ``r`` with ``r (r - 1) / 2 == P``; :class:`PlaneError` if there is none."""
    P = _count(P, "Plücker size P")
    if P < 1:
        raise PlaneError(f"{P} is not r(r-1)/2 for any integer r >= 2")
    r = int(round((1 + math.sqrt(1 + 8 * P)) / 2))
    if r < 2 or r * (r - 1) // 2 != P:
        raise PlaneError(f"{P} is not r(r-1)/2 for any integer r >= 2")
    return r


def plucker_indices(r: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Index tensors ``(I, J)``, each ``(P,)`` long, of the pairs ``i < j`` in lexicographic order
    (flat index ``k(i, j) = i r - i (i + 1) / 2 + (j - i - 1)``; Zhang, arXiv 2512.19428)."""
    plucker_size(r)
    I, J = torch.triu_indices(r, r, offset=1, device=device)
    return I, J


def plucker(a, b) -> torch.Tensor:
    """Plücker coordinates of the oriented plane spanned by ``(a, b)``.

    ``a``, ``b``: ``(..., r)`` (broadcastable). Returns ``(..., P)`` with ``p_ij = a_i b_j - a_j b_i``,
    i < j; ``plucker(a, b) == -plucker(b, a)``; ``||p||^2 = ||a||^2 ||b||^2 - (a.b)^2`` (Lagrange).
    Unnormalised; zero when ``a`` and ``b`` are parallel. Source: Zhang, arXiv 2512.19428.
    """
    a, b = _t(a), _t(b)
    if a.shape[-1] != b.shape[-1]:
        raise PlaneError(f"a and b must have the same last dimension, got {a.shape[-1]} and {b.shape[-1]}")
    I, J = plucker_indices(a.shape[-1], device=a.device)
    return a[..., I] * b[..., J] - a[..., J] * b[..., I]


def normalize_plucker(p, eps: float = 1e-6, mode: str = "clamp") -> torch.Tensor:
    """Unit Plücker vector ``p / max(||p||, eps)`` (``mode="clamp"``, as reported) or
    ``p / sqrt(||p||^2 + eps^2)`` (``mode="smooth"``, design choice: bounded gradient ``1/eps``).

    ``p``: ``(..., P)``. Returns ``(..., P)``, norm 1 unless ``||p|| < eps`` (then ``||p|| / eps``, never
    NaN). Source: Zhang, arXiv 2512.19428. :class:`PlaneError` for an unknown mode.
    """
    p = _t(p)
    n = torch.linalg.vector_norm(p, dim=-1, keepdim=True)
    if mode == "clamp":
        return p / n.clamp_min(eps)
    if mode == "smooth":
        return p * torch.rsqrt(n.square() + eps * eps)
    raise PlaneError(f"normalisation mode must be 'clamp' or 'smooth', got {mode!r}")


def bivector(p, r: int | None = None) -> torch.Tensor:
    """The antisymmetric ``(..., r, r)`` matrix ``A`` with strict upper triangle ``p`` (``A = a b^T - b a^T``
    when ``p = plucker(a, b)``). ``p``: ``(..., P)``; ``r`` is inferred from ``P`` if not given."""
    p = _t(p)
    r = plucker_rank(p.shape[-1]) if r is None else r
    if plucker_size(r) != p.shape[-1]:
        raise PlaneError(f"last dimension {p.shape[-1]} is not r(r-1)/2 for r={r}")
    I, J = plucker_indices(r, device=p.device)
    A = p.new_zeros(*p.shape[:-1], r, r)
    A[..., I, J] = p
    A[..., J, I] = -p
    return A


def plucker_relations(p, r: int | None = None) -> torch.Tensor:
    """Residuals of the quadratic Plücker relations ``p_ij p_kl - p_ik p_jl + p_il p_jk`` for all
    ``i < j < k < l``. ``p``: ``(..., P)``; returns ``(..., C(r, 4))`` (empty for r < 4). All zero iff
    ``p`` is decomposable, i.e. the bivector of one plane (Zhang, arXiv 2512.19428)."""
    p = _t(p)
    r = plucker_rank(p.shape[-1]) if r is None else r
    A = bivector(p, r)
    quads = torch.combinations(torch.arange(r, device=p.device), 4)
    if quads.numel() == 0:
        return p.new_zeros(*p.shape[:-1], 0)
    i, j, k, l = quads.unbind(-1)
    return A[..., i, j] * A[..., k, l] - A[..., i, k] * A[..., j, l] + A[..., i, l] * A[..., j, k]


def plane_basis(a, b, tol: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Orthonormal basis of span(a, b) by guarded Gram–Schmidt (Zhang, arXiv 2512.19428).

    ``a``, ``b``: ``(..., r)``. Returns ``(Q, ok)``: ``Q`` ``(..., r, 2)`` with ``q1 = a/||a||``,
    ``q2 = b'/||b'||``, ``b' = b - (q1.b) q1`` (so ``plucker(q1, q2)`` is the unit Plücker vector of
    ``(a, b)``, same orientation), and ``ok`` ``(...)`` bool, False where the pair is degenerate
    (``||a|| < tol`` or ``||b'|| < tol ||b||``); there ``Q`` is finite but meaningless. Where ``a`` or ``b`` has
    a non-finite entry ``ok`` is False and ``Q`` is NaN.
    """
    a, b = _t(a), _t(b)
    if a.shape[-1] != b.shape[-1]:
        raise PlaneError(f"a and b must have the same last dimension, got {a.shape[-1]} and {b.shape[-1]}")
    a, b = torch.broadcast_tensors(a, b)
    na = torch.linalg.vector_norm(a, dim=-1, keepdim=True)
    q1 = a / na.clamp_min(torch.finfo(a.dtype).tiny)
    bp = b - (q1 * b).sum(-1, keepdim=True) * q1
    nbp = torch.linalg.vector_norm(bp, dim=-1, keepdim=True)
    q2 = bp / nbp.clamp_min(torch.finfo(a.dtype).tiny)
    nb = torch.linalg.vector_norm(b, dim=-1, keepdim=True)
    finite = _finite_items(a, 1) & _finite_items(b, 1)
    ok = ((na >= tol) & (nbp >= tol * nb) & (nb > 0)).squeeze(-1) & finite
    return _nan_where(torch.stack([q1, q2], dim=-1), finite), ok


def _check_bases(Q1: torch.Tensor, Q2: torch.Tensor) -> None:
    if Q1.shape[-1] != 2 or Q2.shape[-1] != 2 or Q1.shape[-2] != Q2.shape[-2]:
        raise PlaneError(f"plane bases must be (..., r, 2) with the same r, got {tuple(Q1.shape)} and "
                         f"{tuple(Q2.shape)}")


def principal_angles(Q1, Q2) -> torch.Tensor:
    """Principal angles ``theta_1 <= theta_2`` in [0, pi/2] (radians) between the planes with orthonormal
    bases ``Q1``, ``Q2`` ``(..., r, 2)``. Returns ``(..., 2)``.

    Robust for small angles (Zhang, arXiv 2512.19428): the cosines are the singular values of ``Q1^T Q2``, the
    sines those of ``(I - Q1 Q1^T) Q2``; the smallest sine is paired with the largest cosine and
    ``theta = atan2(sin, cos)``, so nearly equal planes keep full relative precision (arccos alone would
    not). NaN for bases with a non-finite entry (the SVD never sees them).
    """
    Q1, Q2 = _t(Q1), _t(Q2)
    _check_bases(Q1, Q2)
    M, ok = _safe_mat(Q1.transpose(-1, -2) @ Q2)
    cos = torch.linalg.svdvals(M)  # descending
    R, ok_r = _safe_mat(Q2 - Q1 @ M)
    sin = torch.linalg.svdvals(R).flip(-1)  # ascending: pairs with descending cos
    return _nan_where(torch.atan2(sin, cos), ok & ok_r)


def geodesic_distance(Q1, Q2) -> torch.Tensor:
    """Arc-length distance on Gr(2, r): ``sqrt(theta_1^2 + theta_2^2)`` in radians, ``(...)``
    (max ``pi / sqrt 2``). ``Q1``, ``Q2``: ``(..., r, 2)`` orthonormal. Zhang, arXiv 2512.19428."""
    return torch.linalg.vector_norm(principal_angles(Q1, Q2), dim=-1)


def chordal_distance(Q1, Q2) -> torch.Tensor:
    """Projection (chordal) distance ``sqrt(sin^2 theta_1 + sin^2 theta_2)
    = ||Q1 Q1^T - Q2 Q2^T||_F / sqrt 2``, ``(...)``. Zhang, arXiv 2512.19428."""
    return torch.linalg.vector_norm(torch.sin(principal_angles(Q1, Q2)), dim=-1)


def fubini_study_distance(p1, p2, eps: float = 1e-12) -> torch.Tensor:
    """Fubini–Study distance ``arccos |<p1, p2>|`` (radians, in [0, pi/2]) between the unoriented planes
    with Plücker vectors ``p1``, ``p2`` ``(..., P)`` (normalised here; no SVD needed).
    ``|<p1, p2>| = cos theta_1 cos theta_2`` (Zhang, arXiv 2512.19428). Computed from the sign-free chord
    ``c = min(||p1 - p2||, ||p1 + p2||) = 2 sin(d / 2)`` for accuracy near 0 (arccos is ill-conditioned
    there). Zero vectors give pi/2-ish garbage: check ``||p|| > 0`` first."""
    p1 = normalize_plucker(p1, eps)
    p2 = normalize_plucker(p2, eps)
    c = (p1 * p2).sum(-1)
    # chord of the sign-free points: ||p1 - s p2|| = 2 sin(d/2) with s = sign(c)
    s = torch.where(c < 0, -1.0, 1.0).to(p1.dtype)
    chord = torch.linalg.vector_norm(p1 - s.unsqueeze(-1) * p2, dim=-1)
    return 2 * torch.asin((chord / 2).clamp(0, 1))


def binet_cauchy_distance(Q1, Q2) -> torch.Tensor:
    """Binet–Cauchy distance ``sqrt(1 - cos^2 theta_1 cos^2 theta_2)``, ``(...)``. Zhang, arXiv 2512.19428.
    Differentiable with gradient 0 at distance 0 (equal planes; a kink like ``|x|``), not NaN."""
    th = principal_angles(Q1, Q2)
    c = torch.cos(th).prod(-1)
    return _safe_sqrt(1 - c * c)


def dist(Q1, Q2, metric: str = "geodesic") -> torch.Tensor:
    """Distance between planes with orthonormal bases ``(..., r, 2)`` under ``metric``: ``"geodesic"``,
    ``"chordal"``, ``"fubini_study"`` or ``"binet_cauchy"`` (radians for the angle-valued ones).
    :class:`PlaneError` for an unknown metric."""
    if metric == "geodesic":
        return geodesic_distance(Q1, Q2)
    if metric == "chordal":
        return chordal_distance(Q1, Q2)
    if metric == "fubini_study":
        Q1, Q2 = _t(Q1), _t(Q2)
        return fubini_study_distance(plucker(Q1[..., 0], Q1[..., 1]), plucker(Q2[..., 0], Q2[..., 1]))
    if metric == "binet_cauchy":
        return binet_cauchy_distance(Q1, Q2)
    raise PlaneError(f"unknown metric {metric!r}; use geodesic, chordal, fubini_study or binet_cauchy")


def interpolate(Q1, Q2, s, tol: float = 1e-10) -> torch.Tensor:
    """Point at fraction ``s`` along the Gr(2, r) geodesic from span(Q1) to span(Q2) (Zhang, arXiv 2512.19428).

    ``Q1``, ``Q2``: ``(..., r, 2)`` orthonormal; ``s``: float or tensor ``(S,)`` of fractions in [0, 1].
    Returns an orthonormal basis ``(..., r, 2)`` (float ``s``) or ``(S, ..., r, 2)`` (tensor ``s``).
    ``gamma(0)`` spans U1 with Q1's orientation; ``gamma(1)`` spans U2 (orientation not tracked: the
    Grassmannian is unoriented). Constant speed: ``d_g(U1, gamma(s)) = s d_g(U1, U2)``.
    Method: SVD ``Q1^T Q2 = U cos(Theta) V^T``, ``Y1 = Q1 U``, ``Y2 = Q2 V``,
    ``G = (Y2 - Y1 cos Theta) / sin Theta`` (column kept zero where ``theta < tol``),
    ``gamma(s) = Y1 cos(s Theta) + G sin(s Theta)``. NaN where ``Q1`` or ``Q2`` has a non-finite entry.
    """
    Q1, Q2 = _t(Q1), _t(Q2)
    _check_bases(Q1, Q2)
    Q1, Q2 = torch.broadcast_tensors(Q1, Q2)
    finite = _finite_items(Q1, 2) & _finite_items(Q2, 2)
    Q1 = Q1.masked_fill(~finite[..., None, None], 0)
    Q2 = Q2.masked_fill(~finite[..., None, None], 0)
    U, cos, Vh = torch.linalg.svd(Q1.transpose(-1, -2) @ Q2)
    V = Vh.transpose(-1, -2)
    # keep Q1's orientation at s = 0: flip one principal pair where det U < 0 (U diag V^T unchanged)
    flip = torch.linalg.det(U) < 0
    sign = torch.ones_like(cos)
    sign[..., 1] = torch.where(flip, -1.0, 1.0).to(cos.dtype)
    U = U * sign.unsqueeze(-2)
    V = V * sign.unsqueeze(-2)
    Y1, Y2 = Q1 @ U, Q2 @ V
    theta = principal_angles(Q1, Q2)  # ascending, pairs with descending cos
    sin = torch.sin(theta)
    R = Y2 - Y1 * cos.unsqueeze(-2)
    small = theta < tol
    G = torch.where(small.unsqueeze(-2), torch.zeros_like(R), R / torch.where(small, 1.0, sin).unsqueeze(-2))
    s_t = torch.as_tensor(s, dtype=Q1.dtype, device=Q1.device)
    if s_t.dim() == 0:
        st = s_t * theta
        out = Y1 @ torch.diag_embed(torch.cos(st)) + G @ torch.diag_embed(torch.sin(st))
        return _nan_where(out, finite)
    st = s_t.reshape(-1, *([1] * theta.dim())) * theta  # (S, ..., 2)
    out = Y1 * torch.cos(st).unsqueeze(-2) + G * torch.sin(st).unsqueeze(-2)
    return _nan_where(out, finite.expand(out.shape[:-2]))


def _check_tangent(Y: torch.Tensor, Delta: torch.Tensor) -> None:
    if Y.dim() < 2 or Y.shape[-1] != 2 or Delta.shape[-2:] != Y.shape[-2:]:
        raise PlaneError(f"expected a frame Y (..., r, 2) and a tangent of the same shape, got "
                         f"{tuple(Y.shape)} and {tuple(Delta.shape)}")


def grassmann_exp(Y, Delta, t=1.0) -> torch.Tensor:
    """The Grassmann exponential map: the point at time ``t`` of the geodesic of Gr(2, r) through span(Y)
    with initial velocity ``Delta`` (Edelman, Arias & Smith 1998, Theorem 2.3).

    ``Y``: ``(..., r, 2)`` orthonormal; ``Delta``: ``(..., r, 2)`` horizontal tangent (``Y^T Delta = 0``; the
    part along ``Y`` is not removed here); ``t``: float (radians of arc per unit of ``||Delta||_F``).
    Returns the orthonormal frame ``(..., r, 2)``
    ``Y(t) = Y V cos(S t) V^T + U sin(S t) V^T`` for the thin SVD ``Delta = U S V^T``, evaluated as
    ``Y + Y V (cos(S t) - I) V^T + U sin(S t) V^T`` so that ``t = 0`` returns ``Y`` bit for bit. The
    orientation of ``Y`` is carried along continuously. The principal angles between span(Y) and span(Y(t))
    are ``S |t|`` (folded into [0, pi/2]); the geodesic distance ``||S t||`` while every ``s_i |t| <= pi/2``.
    Raises :class:`PlaneError` for shapes that do not match.
    """
    Y, Delta = _t(Y), _t(Delta)
    _check_tangent(Y, Delta)
    U, S, Vh = torch.linalg.svd(Delta, full_matrices=False)
    V = Vh.transpose(-1, -2)
    st = S * float(t)
    cos_m1 = torch.cos(st) - 1.0
    return Y + (Y @ V) @ (cos_m1.unsqueeze(-1) * Vh) + U @ (torch.sin(st).unsqueeze(-1) * Vh)


def grassmann_log(Y1, Y2) -> torch.Tensor:
    """The Grassmann logarithm: the horizontal tangent ``Delta`` ``(..., r, 2)`` at span(Y1) with
    ``grassmann_exp(Y1, Delta, 1)`` spanning span(Y2) (Edelman, Arias & Smith 1998, section 3.8; Absil,
    Mahony & Sepulchre 2004). ``Y1``, ``Y2``: ``(..., r, 2)`` orthonormal.

    Method: ``(I - Y1 Y1^T) Y2 (Y1^T Y2)^{-1} = U Sigma V^T`` (thin SVD), ``Delta = U atan(Sigma) V^T``;
    ``||Delta||_F`` is the geodesic distance and the singular values of ``Delta`` the principal angles.
    Raises :class:`PlaneError` where ``Y1^T Y2`` is singular (a principal angle of pi/2: the geodesic is not
    unique) or for shapes that do not match.
    """
    Y1, Y2 = _t(Y1), _t(Y2)
    _check_bases(Y1, Y2)
    M = Y1.transpose(-1, -2) @ Y2
    sv = torch.linalg.svdvals(M)
    if bool((sv[..., -1] < 1e-12).any()):
        raise PlaneError("a principal angle is pi/2: the logarithm (shortest geodesic) is not unique")
    A = Y2 - Y1 @ M
    N = torch.linalg.solve(M.transpose(-1, -2), A.transpose(-1, -2)).transpose(-1, -2)  # A M^{-1}
    U, S, Vh = torch.linalg.svd(N, full_matrices=False)
    return U @ (torch.atan(S).unsqueeze(-1) * Vh)


def coordinate_energy(p, r: int | None = None) -> torch.Tensor:
    """Coordinate energy ``E_ij = mean p_ij^2`` over all leading axes as a symmetric ``(r, r)`` map
    (zero diagonal): which axis pairs the planes use (Zhang, arXiv 2512.19428). ``p``: ``(..., P)``."""
    p = _t(p)
    A = bivector(p, r)
    return A.square().reshape(-1, A.shape[-2], A.shape[-1]).mean(0)


def decomposability(p, r: int | None = None) -> torch.Tensor:
    """Decomposability ratio ``kappa = lambda_1^2 / sum_k lambda_k^2`` of a bivector (Zhang, arXiv 2512.19428).

    ``p``: ``(..., P)``, e.g. the offset-averaged Plücker vector. The antisymmetric matrix has singular
    values in pairs ``(lambda_1, lambda_1, lambda_2, lambda_2, ...)``, so
    ``kappa = 2 sigma_max^2 / ||A||_F^2``: 1 for a single plane, down to ``1 / floor(r/2)`` for a
    maximally spread blend. Returns ``(...)``; NaN where ``p`` is zero (no plane at all) or non-finite.
    """
    A, ok = _safe_mat(bivector(p, r))
    sv = torch.linalg.svdvals(A)
    total = sv.square().sum(-1)
    kappa = 2 * sv[..., 0].square() / total.clamp_min(torch.finfo(sv.dtype).tiny)
    return torch.where((total > 0) & ok, kappa.clamp(max=1.0), torch.full_like(total, float("nan")))


def dominant_plane(p, r: int | None = None) -> torch.Tensor:
    """The dominant plane of a bivector: orthonormal basis ``(..., r, 2)`` of the top singular pair of its
    antisymmetric matrix (the "effective subspace", Zhang, arXiv 2512.19428). For a decomposable ``p`` this is
    its own plane, with the orientation of ``p``. NaN where ``p`` has a non-finite entry."""
    A, ok = _safe_mat(bivector(p, r))
    U, S, Vh = torch.linalg.svd(A)
    # A = sum sigma u v^T; for a unit plane A = q1 q2^T - q2 q1^T the top pair is (u, v) = (q1, q2) up to
    # a rotation inside the plane, and u ^ v keeps the orientation of q1 ^ q2.
    q1 = U[..., :, 0]
    q2 = Vh[..., 0, :]
    q2 = q2 - (q1 * q2).sum(-1, keepdim=True) * q1
    q2 = q2 / torch.linalg.vector_norm(q2, dim=-1, keepdim=True).clamp_min(torch.finfo(A.dtype).tiny)
    return _nan_where(torch.stack([q1, q2], dim=-1), ok)
