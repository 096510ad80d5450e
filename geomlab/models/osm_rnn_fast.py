"""The OSM-RNN recurrence on O(d) / SO(d) as one autograd node with a hand-written backward (issue 17).

The recurrence of :class:`geomlab.models.osm.OSMRNN` (notes §3.1) for a skew-symmetric algebra:
``H_0 = I``, ``H_{t+1} = H_t exp(Phi_t)``,
``Phi_t = Gamma(H_t^T X_t) + D_t``, with ``Gamma`` a linear map on the orthonormal algebra coordinates
(``Gamma(Y) = from_coords(W to_coords(Y))``; scalar and identity mixing are ``W = eta I``) and ``D_t`` an
optional state-independent drive (``rnn_input="pull+token"``). ``exp`` is the same scaling-and-squaring
Taylor exponential as :func:`geomlab.groups.expm_taylor` in single precision: degree 8 in three products
(Bader, Blanes & Casas 2019, eq. (10); coefficients :data:`geomlab.groups._BBC`) then ``s`` squarings, ``s``
the fewest that bring the largest Frobenius norm of the batch under ``theta``.

Why (design choice, measured in docs/speed.md): a training step at batch 16 x 128 with ``d = 19`` is bound
by the per-operation overhead of ~25 tiny batched ops per position, three times over with autograd.
Here the forward runs the loop without recording a graph (direct ``bmm``/``baddbmm`` calls, coordinates
by one ``index_select`` and back by one ``index_copy_`` into a preallocated zero buffer) and keeps what
the backward needs; the backward reverses the loop with the adjoint of every product written out (the
exponential's part is the backward of :class:`geomlab.groups._Taylor8Exp`), and the gradients of the
inputs ``X_t`` and of ``W`` are formed after the loop in one batched product each. Same mathematics as
the autograd path; the rounding differs (tests/test_osm_rnn_speed.py).
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from geomlab.groups import _BBC, _TAYLOR_DOUBLE, _TAYLOR_SINGLE

#: Largest Frobenius norm for the degree-8 polynomial without squaring: single / double precision (the
#: degree-8 rows of :data:`geomlab.groups._TAYLOR_SINGLE` / ``_TAYLOR_DOUBLE``).
_THETA = {torch.float32: _TAYLOR_SINGLE[0][1], torch.float64: _TAYLOR_DOUBLE[0][1]}
assert _TAYLOR_SINGLE[0][0] == 8 and _TAYLOR_DOUBLE[0][0] == 8

_UPPER: dict[tuple[int, str], torch.Tensor] = {}


def _upper(n: int, device) -> torch.Tensor:
    """Flat indices ``r n + c`` of the strict upper triangle of an ``n x n`` matrix, row-major (the order
    of the O/SO algebra coordinates)."""
    key = (n, str(device))
    if key not in _UPPER:
        r, c = torch.triu_indices(n, n, 1, device=device)
        _UPPER[key] = r * n + c
    return _UPPER[key]


def _squarings(nrm: float, theta: float) -> int:
    """Fewest ``s >= 0`` with ``nrm / 2^s <= theta`` (as :func:`geomlab.groups._taylor_degree`)."""
    return 0 if nrm <= theta else math.ceil(math.log2(nrm / theta))


def skew_recurrence_forward(X: torch.Tensor, W: torch.Tensor, D: torch.Tensor | None = None,
                            keep: list | None = None, record: dict | None = None) -> torch.Tensor:
    """The states ``H_1..H_T`` of the recurrence (no autograd graph is built here).

    ``X``: ``(T, B, n, n)`` real, the targets ``X_t`` (token matrices); ``W``: ``(dim, dim)`` with ``dim =
    n(n-1)/2``; ``D``: ``(T, B, n, n)`` skew or None. Returns ``(T, B, n, n)``. ``keep``: a list that receives
    per step what the backward needs. ``record``: a dict that receives ``raw`` (``proj(H_t^T X_t)``) and ``phi``
    (``Phi_t``), each ``(T, B, n, n)``. Source: notes §3.1; design choice (issue 17) for the evaluation order.
    """
    T, B, n, _ = X.shape
    theta = _THETA[X.dtype]
    c = _BBC
    up = _upper(n, X.device)
    Wt = (0.5 * W).mT  # half = coords @ Wt: coords are sqrt 2 * to_coords, from_coords(v) puts v / sqrt 2
    out = X.new_empty(T, B, n, n)
    U = X.new_zeros(B, n * n)  # the strict upper triangle of Phi (rest stays zero)
    Uv = U.view(B, n, n)
    coords = X.new_empty(T, B, up.numel())
    if record is not None:
        record["raw"], record["phi"] = [], []
    H = None  # H_0 = I
    for t in range(T):
        raw = X[t] if H is None else torch.bmm(H.mT, X[t])
        S = raw - raw.mT
        ct = torch.index_select(S.view(B, -1), 1, up, out=coords[t])
        U.index_copy_(1, up, torch.mm(ct, Wt))
        Phi = Uv - Uv.mT
        if D is not None:
            Phi.add_(D[t])
        nrms = torch.linalg.matrix_norm(Phi)
        nrm = float(nrms.max())
        if not math.isfinite(nrm):  # non-finite matrices give NaN; the others are scaled by their own norms
            nrm = float(torch.nan_to_num(nrms, nan=0.0, posinf=0.0).max())
        s = _squarings(nrm, theta)
        Xs = Phi * (2.0**-s) if s else Phi
        X2 = torch.bmm(Xs, Xs)
        Q = (c["x1"] * Xs).add_(X2, alpha=c["x2"])
        A4 = torch.bmm(X2, Q)
        L = A4.add(X2, alpha=c["x3"])
        R = (c["x5"] * Xs).add_(X2, alpha=c["x6"]).add_(A4, alpha=c["x7"])
        R.diagonal(dim1=-2, dim2=-1).add_(c["x4"])
        C = Xs.add(X2, alpha=c["y2"])
        C.diagonal(dim1=-2, dim2=-1).add_(1.0)
        P = torch.baddbmm(C, L, R)
        powers = [P]
        for _ in range(s):
            P = torch.bmm(P, P)
            powers.append(P)
        if H is None:
            out[t].copy_(P)
        else:
            torch.bmm(H, P, out=out[t])
        H = out[t]
        if keep is not None:
            keep.append((s, Xs, X2, Q, L, R, powers))
        if record is not None:
            record["raw"].append(0.5 * S)
            record["phi"].append(Phi)
    if keep is not None:
        keep.append(coords)
    if record is not None:
        record["raw"], record["phi"] = torch.stack(record["raw"]), torch.stack(record["phi"])
    return out


class SkewRecurrence(torch.autograd.Function):
    """``states = SkewRecurrence.apply(X, W, D)``: :func:`skew_recurrence_forward` with a hand-written backward
    (the loop reversed; per step the adjoints of ``H_{t+1} = H_t E``, of the squarings and of the three
    products of the polynomial, of the coordinate maps and of ``H_t^T X_t``). Gradients for ``X``, ``W`` and
    ``D``; double backward is not supported. Design choice (issue 17)."""

    @staticmethod
    def forward(ctx, X: torch.Tensor, W: torch.Tensor, D: torch.Tensor | None = None) -> torch.Tensor:
        keep: list = []
        out = skew_recurrence_forward(X, W, D, keep)
        ctx.keep = keep
        ctx.has_d = D is not None
        ctx.save_for_backward(X, W, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, G: torch.Tensor):
        X, W, out = ctx.saved_tensors
        *steps, coords = ctx.keep
        T, B, n, _ = X.shape
        c = _BBC
        up = _upper(n, X.device)
        W2 = 0.5 * W  # d coords = d half @ (W / 2)
        G = G.contiguous()
        graw_all = X.new_empty(T, B, n, n)
        ghalf_all = X.new_empty(T, B, up.numel())
        gD = X.new_empty(T, B, n, n) if ctx.has_d else None
        Gc = X.new_zeros(B, n * n)
        Gcv = Gc.view(B, n, n)
        gH = None
        for t in range(T - 1, -1, -1):
            s, Xs, X2, Q, L, R, powers = steps[t]
            gH = G[t].clone() if gH is None else gH.add_(G[t])
            E = powers[-1]
            if t:  # H_{t+1} = H_t E; H_0 = I is a constant
                H = out[t - 1]
                gP = torch.bmm(H.mT, gH)
                gH = torch.bmm(gH, E.mT)
            else:
                gP = gH
            for P in reversed(powers[:-1]):  # Y = P P
                gP = torch.baddbmm(torch.bmm(gP, P.mT), P.mT, gP)
            GL = torch.bmm(gP, R.mT)  # P = C + L R
            GR = torch.bmm(L.mT, gP)
            GA4 = GL.add(GR, alpha=c["x7"])
            GX2 = GL.mul_(c["x3"]).add_(GR, alpha=c["x6"]).add_(gP, alpha=c["y2"])
            GX2 = torch.baddbmm(GX2, GA4, Q.mT)  # A4 = X2 Q
            GQ = torch.bmm(X2.mT, GA4)
            GX2.add_(GQ, alpha=c["x2"])
            GX = gP.add(GR, alpha=c["x5"]).add_(GQ, alpha=c["x1"])
            GX = torch.baddbmm(torch.baddbmm(GX, GX2, Xs.mT), Xs.mT, GX2)  # X2 = X X
            if s:
                GX.mul_(2.0**-s)  # now the gradient of Phi_t
            if gD is not None:
                gD[t].copy_(GX)
            Gs = GX - GX.mT  # Phi = U - U^T with half at the upper positions of U
            gh = torch.index_select(Gs.view(B, -1), 1, up, out=ghalf_all[t])
            Gc.index_copy_(1, up, torch.mm(gh, W2))  # coords = (S)_upper with S = raw - raw^T
            graw = torch.sub(Gcv, Gcv.mT, out=graw_all[t])
            if t:
                gH = torch.baddbmm(gH, X[t], graw.mT)  # raw = H_t^T X_t
        # X_t: raw = H_t^T X_t -> H_t graw_t, all positions in one product (H_0 = I)
        gX = graw_all.clone()
        if T > 1:
            torch.bmm(out[:-1].reshape(-1, n, n), graw_all[1:].reshape(-1, n, n),
                      out=gX[1:].view(-1, n, n))
        # W: half = coords (W / 2)^T
        gW = 0.5 * ghalf_all.reshape(-1, up.numel()).mT @ coords.reshape(-1, up.numel())
        return gX, gW, gD


def fused_states(X: torch.Tensor, W: torch.Tensor, D: torch.Tensor | None = None) -> torch.Tensor:
    """``(T, B, n, n)`` states ``H_1..H_T`` of the O/SO recurrence (see the module docstring): the fused
    autograd node when a gradient is needed, the plain loop otherwise. Float32/float64 CPU tensors."""
    if torch.is_grad_enabled() and (X.requires_grad or W.requires_grad or (D is not None and D.requires_grad)):
        return SkewRecurrence.apply(X, W, D)
    return skew_recurrence_forward(X, W, D)
