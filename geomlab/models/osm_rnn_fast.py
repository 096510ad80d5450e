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

#: Matrix sizes whose batched products (batch 16, one thread, float32, MKL) ran faster zero-padded: bmm 19 x 19
#: 8.8 us, 20 x 20 7.6 us; 21-23 10.4-14.2 us, 24 x 24 8.9 us (issue 17 measurements); plus the sizes of
#: :data:`geomlab.groups._PAD_TO`. Padding is exact: the states are ``diag(H, I)`` and every step's algebra
#: element ``diag(Phi, 0)``. Design choice.
PAD_TO = {5: 8, 6: 8, 7: 8, 15: 16, 19: 20, 21: 24, 22: 24, 23: 24, 29: 32, 30: 32, 31: 32}

# the polynomial of groups._taylor8_bbc rearranged (same polynomial): Q' = X + q X2, L = x3 X2 + x1 X2 Q',
# R = x4 I + x5 X + r6 X2 + x7 L, C = I + X + y2 X2, T8 = C + L R
_Q = _BBC["x2"] / _BBC["x1"]
_R6 = _BBC["x6"] - _BBC["x3"] * _BBC["x7"]

_UPPER: dict[tuple[int, int, str], torch.Tensor] = {}


def _upper(n: int, m: int, device) -> torch.Tensor:
    """Flat indices ``r m + c`` (``r < c < n``) of the strict upper triangle of the top-left ``n x n`` block of
    an ``m x m`` matrix, row-major (the order of the O/SO algebra coordinates)."""
    key = (n, m, str(device))
    if key not in _UPPER:
        r, c = torch.triu_indices(n, n, 1, device=device)
        _UPPER[key] = r * m + c
    return _UPPER[key]


def _size(dim: int) -> int:
    """``n`` with ``n (n - 1) / 2 = dim``."""
    return int(round((1 + math.sqrt(1 + 8 * dim)) / 2))


def _squarings(nrm: float, theta: float) -> int:
    """Fewest ``s >= 0`` with ``nrm / 2^s <= theta`` (as :func:`geomlab.groups._taylor_degree`)."""
    return 0 if nrm <= theta else math.ceil(math.log2(nrm / theta))


def pad(X: torch.Tensor, group: bool = True) -> torch.Tensor:
    """``diag(X, I)`` (``group``: a group element) or ``diag(X, 0)`` (an algebra element): ``(..., n, n)`` ->
    ``(..., m, m)`` with ``m = PAD_TO.get(n, n)``; differentiable."""
    n = X.shape[-1]
    p = PAD_TO.get(n, n) - n
    if not p:
        return X
    Y = torch.nn.functional.pad(X, (0, p, 0, p))
    if not group:
        return Y
    E = torch.zeros(n + p, n + p, dtype=X.dtype, device=X.device)
    E.diagonal()[n:] = 1.0
    return Y + E


def skew_recurrence_forward(X: torch.Tensor, W: torch.Tensor, D: torch.Tensor | None = None,
                            keep: list | None = None, record: dict | None = None) -> torch.Tensor:
    """The states ``H_1..H_T`` of the recurrence (no autograd graph is built here).

    ``X``: ``(T, B, m, m)`` real, the targets ``X_t`` (token matrices), possibly padded to ``diag(X_t, I)``;
    ``W``: ``(dim, dim)``, ``dim = n(n-1)/2`` for the true size ``n <= m``; ``D``: ``(T, B, m, m)`` skew (zero
    outside the top-left block) or None. Returns ``(T, B, m, m)`` (``diag(H_t, I)`` when padded). ``keep``: a
    list that receives per step what the backward needs. ``record``: a dict that receives ``raw``
    (``proj(H_t^T X_t)``) and ``phi`` (``Phi_t``), each ``(T, B, m, m)``. Source: notes §3.1; design choice
    (issue 17) for the evaluation order.
    """
    T, B, m, _ = X.shape
    n = _size(W.shape[0])
    theta = _THETA[X.dtype]
    c = _BBC
    up = _upper(n, m, X.device).expand(B, -1)
    Wt = (0.5 * W).mT  # half = coords @ Wt: coords are sqrt 2 * to_coords, from_coords(v) puts v / sqrt 2
    eye = torch.eye(m, dtype=X.dtype, device=X.device).expand(B, m, m)
    I4 = (c["x4"] * eye).contiguous()
    out = X.new_empty(T, B, m, m)
    U = X.new_zeros(B, m * m)  # the strict upper triangle of Phi (the rest stays zero)
    Uv = U.view(B, m, m)
    coords = X.new_empty(T, B, W.shape[0])
    if record is not None:
        record["raw"], record["phi"] = [], []
    H = None  # H_0 = I
    for t in range(T):
        raw = X[t] if H is None else torch.bmm(H.mT, X[t])
        S = raw - raw.mT
        ct = torch.gather(S.view(B, -1), 1, up, out=coords[t])
        U.scatter_(1, up, torch.mm(ct, Wt))
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
        Qp = torch.add(Xs, X2, alpha=_Q)
        L = torch.baddbmm(X2, X2, Qp, beta=c["x3"], alpha=c["x1"])
        R = torch.add(I4, Xs, alpha=c["x5"]).add_(X2, alpha=_R6).add_(L, alpha=c["x7"])
        P = torch.add(eye, Xs).add_(X2, alpha=c["y2"]).baddbmm_(L, R)
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
            keep.append((s, Xs, X2, Qp, L, R, powers))
        if record is not None:
            record["raw"].append(0.5 * S)
            record["phi"].append(Phi)
    if keep is not None:
        keep.append(coords)
    if record is not None:
        record["raw"], record["phi"] = torch.stack(record["raw"]), torch.stack(record["phi"])
    return out


class SkewRecurrence(torch.autograd.Function):
    """``states = SkewRecurrence.apply(M, idx, W, Dv)``: :func:`skew_recurrence_forward` of ``X = M[idx]`` and
    ``D = Dv[idx]`` (``M``, ``Dv``: ``(V, m, m)``; ``idx``: ``(T, B)`` token ids) with a hand-written backward
    (the loop reversed; per step the adjoints of ``H_{t+1} = H_t E``, of the squarings and of the three
    products of the polynomial, of the coordinate maps and of ``H_t^T X_t``; the rows of ``M`` and ``Dv``
    collect their gradients by one ``index_add_``). Gradients for ``M``, ``W`` and ``Dv``; double backward is
    not supported. Design choice (issue 17)."""

    @staticmethod
    def forward(ctx, M: torch.Tensor, idx: torch.Tensor, W: torch.Tensor,
                Dv: torch.Tensor | None = None) -> torch.Tensor:
        T, B = idx.shape
        flat = idx.reshape(-1)
        X = M.index_select(0, flat).view(T, B, *M.shape[-2:])
        D = Dv.index_select(0, flat).view(T, B, *Dv.shape[-2:]) if Dv is not None else None
        keep: list = []
        out = skew_recurrence_forward(X, W, D, keep)
        ctx.keep = keep
        ctx.has_d = D is not None
        ctx.V = M.shape[0]
        ctx.save_for_backward(X, flat, W, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, G: torch.Tensor):
        X, flat, W, out = ctx.saved_tensors
        *steps, coords = ctx.keep
        ctx.keep = None
        T, B, m, _ = X.shape
        n, dim = _size(W.shape[0]), W.shape[0]
        c = _BBC
        up = _upper(n, m, X.device).expand(B, -1)
        W2 = 0.5 * W  # d coords = d half @ (W / 2)
        G = G.contiguous()
        graw_all = X.new_empty(T, B, m, m)
        ghalf_all = X.new_empty(T, B, dim)
        gD = X.new_empty(T, B, m, m) if ctx.has_d else None
        Gc = X.new_zeros(B, m * m)
        Gcv = Gc.view(B, m, m)
        gH = None
        for t in range(T - 1, -1, -1):
            s, Xs, X2, Qp, L, R, powers = steps[t]
            gH = G[t].clone() if gH is None else gH.add_(G[t])
            E = powers[-1]
            if t:  # H_{t+1} = H_t E; H_0 = I is a constant
                gP = torch.bmm(out[t - 1].mT, gH)
                gH = torch.bmm(gH, E.mT)
            else:
                gP = gH
            for P in reversed(powers[:-1]):  # Y = P P
                gP = torch.baddbmm(torch.bmm(gP, P.mT), P.mT, gP)
            GL = torch.bmm(gP, R.mT)  # T8 = C + L R
            GR = torch.bmm(L.mT, gP)
            GL.add_(GR, alpha=c["x7"])  # R = ... + x7 L
            GQ = torch.bmm(X2.mT, GL)  # L = x3 X2 + x1 X2 Q'  (times x1 below)
            GX2 = torch.mul(GL, c["x3"]).add_(GR, alpha=_R6).add_(gP, alpha=c["y2"]).add_(GQ, alpha=c["x1"] * _Q)
            GX2.baddbmm_(GL, Qp.mT, alpha=c["x1"])
            GX = torch.add(gP, GR, alpha=c["x5"]).add_(GQ, alpha=c["x1"])
            k = 2.0**-s  # X2 = X X with X^T = -X exactly; the factor makes it the gradient of Phi_t
            GX.baddbmm_(GX2, Xs, beta=k, alpha=-k).baddbmm_(Xs, GX2, alpha=-k)
            if gD is not None:
                gD[t].copy_(GX)
            Gs = GX - GX.mT  # Phi = U - U^T with half at the upper positions of U
            gh = torch.gather(Gs.view(B, -1), 1, up, out=ghalf_all[t])
            Gc.scatter_(1, up, torch.mm(gh, W2))  # coords = (S)_upper with S = raw - raw^T
            graw = torch.sub(Gcv, Gcv.mT, out=graw_all[t])
            if t:
                gH.baddbmm_(X[t], graw.mT)  # raw = H_t^T X_t
        # X_t: raw = H_t^T X_t -> H_t graw_t, all positions in one product (H_0 = I); rows of M by index_add_
        gM = X.new_zeros(ctx.V, m * m)
        gM.index_add_(0, flat[:B], graw_all[0].view(B, -1))
        if T > 1:
            gX = torch.bmm(out[:-1].reshape(-1, m, m), graw_all[1:].view(-1, m, m))
            gM.index_add_(0, flat[B:], gX.view(-1, m * m))
        gDv = X.new_zeros(ctx.V, m * m).index_add_(0, flat, gD.view(-1, m * m)).view(-1, m, m) if ctx.has_d else None
        # W: half = coords (W / 2)^T
        gW = 0.5 * ghalf_all.view(-1, dim).mT @ coords.view(-1, dim)
        return gM.view(-1, m, m), None, gW, gDv


def fused_states(M: torch.Tensor, idx: torch.Tensor, W: torch.Tensor, Dv: torch.Tensor | None = None) -> torch.Tensor:
    """``(T, B, m, m)`` states of the O/SO recurrence for the inputs ``X = M[idx]`` and drives ``D = Dv[idx]``
    (see the module docstring, :func:`skew_recurrence_forward` and :class:`SkewRecurrence`): the fused
    autograd node when a gradient is needed, the plain loop otherwise. Float32/float64 CPU tensors."""
    if torch.is_grad_enabled() and (M.requires_grad or W.requires_grad or (Dv is not None and Dv.requires_grad)):
        return SkewRecurrence.apply(M, idx, W, Dv)
    X, D = M[idx], (Dv[idx] if Dv is not None else None)
    return skew_recurrence_forward(X, W, D)
