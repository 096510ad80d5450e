"""The matrix exponential of the Lie algebras: Taylor scaling and squaring, the eigh path, the method switch.

:func:`expm_skew` is what :meth:`MatrixGroup.exp` calls (method ``"auto"``, ``"eigh"``, ``"matrix_exp"``,
``"taylor"``); :func:`expm_taylor` is the training path (degree 8 in three products in single precision, a
hand-written backward, a device path with no host read); :func:`expm_taylor_reference` is the arithmetic of
evaluation mode that reproduces the traces of earlier versions bit for bit. The tables and helpers with a
leading underscore are shared with :mod:`geomlab.models.osm.rnn_fast` (the fused OSM-RNN recurrence).
Sources: Nunley, arXiv 2602.18417; the algorithms' papers are cited in each docstring.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from geomlab.geometry.groups._linalg import GroupError, _complex_dtype, _ct, _finite, _real_dtype

EXP_METHODS = ("auto", "eigh", "matrix_exp", "taylor")
"""Algorithms for ``exp`` of the full-matrix groups (see :func:`expm_skew`)."""


# Taylor exponential

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
    (checked against it in tests/test_speed.py). Double backward is not supported. Design choice."""

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
    cheaper on CPU than the block-matrix backward of ``torch.linalg.matrix_exp``.
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
        P = _scaled_taylor(X, m, s)
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
    the same table. Design choice: at the norms of OSMFormer training it halves the bound (17 x 17:
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
    """The plain Taylor exponential: the *reference arithmetic* of evaluation mode.

    Same mathematics as :func:`expm_taylor` (equal to float32 rounding): Paterson-Stockmeyer degree 6, 8 or 12
    (single) / 8, 12, 16 (double) picked from the largest Frobenius norm, sizes above 8 zero-padded to a multiple
    of 8, autograd backward, whole batch NaN for a non-finite entry. The OSM models use it in eval mode so that
    traces and evaluations of saved checkpoints reproduce bit for bit what earlier versions wrote (the trace
    fixtures compare states exactly); training uses the faster :func:`expm_taylor`. Design choice.
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
    P = _scaled_taylor(X, m, s)
    if pad:
        P = P[:, :n, :n]
    return P.reshape(shape)


def _scaled_taylor(X: torch.Tensor, m: int, s: int) -> torch.Tensor:
    """Scaling and squaring with autograd: the degree-``m`` Taylor polynomial of ``X / 2^s``, squared ``s``
    times (``X`` a batch ``(N, n, n)``). Source: Moler & Van Loan 2003, method 3."""
    X = X / (2.0**s) if s else X
    P = _taylor_poly(X, m)
    for _ in range(s):
        P = P @ P
    return P


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
    ``matrix_exp`` forward+backward on CPU (see ``geomlab bench groups``)."""

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
        # one Newton-Schulz polar step H (3I - H^*H)/2 (Nunley, arXiv 2602.18417): float32 eigenvectors are unitary only to a
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
    CPU, else ``"matrix_exp"``; design choice from ``geomlab bench groups``: at least 2x faster than
    ``matrix_exp`` forward+backward at every d from 2 to 32, where ``eigh`` gains 1.2-3x). Raises :class:`GroupError` for an unknown method.
    Double backward is not supported by ``"eigh"``. A matrix with a non-finite entry gives an all-NaN result
    (and gradient) with every method; ``eigh`` never sees it. Source: Nunley, arXiv 2602.18417 (cost of matrix_exp).
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
