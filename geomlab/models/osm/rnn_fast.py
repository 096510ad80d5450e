"""The OSM-RNN recurrence on O(d) / SO(d) as one autograd node with a hand-written backward.

The recurrence of :class:`geomlab.models.osm.OSMRNN` for a skew-symmetric algebra:
``H_0 = I``, ``H_{t+1} = H_t exp(Phi_t)``,
``Phi_t = Gamma(H_t^T X_t) + D_t``, with ``Gamma`` a linear map on the orthonormal algebra coordinates
(``Gamma(Y) = from_coords(W to_coords(Y))``; scalar and identity mixing are ``W = eta I``) and ``D_t`` an
optional state-independent drive (``rnn_input="pull+token"``). ``exp`` is a scaling-and-squaring Taylor
exponential as :func:`geomlab.geometry.groups.expm_taylor` in single precision: degree 8 in three products (Bader,
Blanes & Casas 2019, eq. (10); coefficients :data:`geomlab.geometry.groups.expm._BBC`) then ``s`` squarings, ``s`` the
fewest that bring ``nu = (||X^2||^4 ||X||)^(1/9)`` (largest over the batch, Frobenius) under the table's
``theta``; ``nu <= ||X||`` bounds every term of the remainder (``||X^k|| <= nu^k``, ``k >= 9``), so the
truncation bound of the table holds (a sharper form of the usual criterion; Al-Mohy & Higham 2009 use
norms of powers the same way).

Why (design choice, measured in docs/speed.md): a training step at batch 16 x 128 with ``d = 19`` was bound
by the per-operation overhead of ~25 tiny batched ops per position, three times over with autograd.
Here the forward runs the loop without recording a graph (direct ``bmm``/``baddbmm`` calls, coordinates
by one ``gather`` and back by one ``scatter_`` into a preallocated zero buffer) and keeps what the backward
needs; the backward reverses the loop with the adjoint of every product written out (the exponential's
part follows the backward of :class:`geomlab.geometry.groups.expm._Taylor8Exp`), and the gradients of the inputs and of
``W`` are formed after the loop in one batched product each. Both loops are compiled by TorchScript where
it is available (:func:`loops`). Same mathematics as the autograd path; the rounding differs
(tests/test_osm_rnn_speed.py)."""

from __future__ import annotations

import math
import warnings
from typing import Any, List, Optional, Tuple

import torch
from torch.autograd.function import once_differentiable

from geomlab.geometry.groups.expm import _BBC, _TAYLOR_DOUBLE, _TAYLOR_SINGLE

#: Largest ``nu`` (see the module docstring) for the degree-8 polynomial without squaring: single / double
#: precision (the degree-8 rows of :data:`geomlab.geometry.groups.expm._TAYLOR_SINGLE` / ``_TAYLOR_DOUBLE``).
_THETA = {torch.float32: _TAYLOR_SINGLE[0][1], torch.float64: _TAYLOR_DOUBLE[0][1]}
assert _TAYLOR_SINGLE[0][0] == 8 and _TAYLOR_DOUBLE[0][0] == 8

#: Sizes at which the whole OSM-RNN training step (batch 16 x 128, one thread) ran faster zero-padded, measured
#: interleaved (new/old step time, median of 9): 7 -> 8 0.75, 15 -> 16 0.90; 19 -> 20 1.01 and 23 -> 24 0.96 did
#: not pay (the products gain ~14%, the elementwise passes and the readout lose it). The other entries are those
#: of :data:`geomlab.geometry.groups.expm._PAD_TO`. Padding is exact: the states are ``diag(H, I)`` and every step's algebra
#: element ``diag(Phi, 0)``. Design choice.
PAD_TO = {5: 8, 6: 8, 7: 8, 15: 16, 29: 32, 30: 32, 31: 32}

# the polynomial of groups.expm._taylor8_bbc rearranged (same polynomial): Q' = X + q X2, L = x3 X2 + x1 X2 Q',
# R = x4 I + x5 X + r6 X2 + x7 L, C = I + X + y2 X2, T8 = C + L R (plain floats: TorchScript reads them)
_X1, _X3, _X4, _X5, _X6, _X7, _Y2 = (_BBC[k] for k in ("x1", "x3", "x4", "x5", "x6", "x7", "y2"))
_Q = _BBC["x2"] / _BBC["x1"]
_R6 = _X6 - _X3 * _X7
_LN2 = math.log(2.0)
#: The coefficients as the loops take them (TorchScript reads no module-level floats).
_COEF = [_X1, _X3, _X4, _X5, _X7, _Y2, _Q, _R6, _LN2]

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


def pad(X: torch.Tensor, group: bool = True) -> torch.Tensor:
    """``diag(X, I)`` (``group``: a group element) or ``diag(X, 0)`` (an algebra element): ``(..., n, n)`` ->
    ``(..., m, m)`` with ``m = PAD_TO.get(n, n)``; differentiable."""
    n = X.shape[-1]
    p = PAD_TO.get(n, n) - n
    if not p:
        return X
    Y = torch.nn.functional.pad(X, (0, p, 0, p))
    return Y + padding_identity(n, X.dtype, X.device) if group else Y


def padding_identity(n: int, dtype, device) -> torch.Tensor:
    """``diag(0_n, I)`` of size ``m = PAD_TO.get(n, n)``: ``pad(X, group=True) = pad(X, group=False) + this``."""
    m = PAD_TO.get(n, n)
    E = torch.zeros(m, m, dtype=dtype, device=device)
    E.diagonal()[n:] = 1.0
    return E


def _forward_loop(X: torch.Tensor, W: torch.Tensor, D: Optional[torch.Tensor], up: torch.Tensor, theta: float,
                  keep: bool, record: bool, coef: List[float]
                  ) -> Tuple[torch.Tensor, torch.Tensor, List[torch.Tensor], List[int], List[torch.Tensor]]:
    """The loop of :func:`skew_recurrence_forward` (TorchScript-compatible): states ``(T, B, m, m)``, the
    coordinates ``(T, B, dim)``, per step ``[X, X2, Q', L, R, T8, T8^2, ...]`` (``X = 2^-s Phi``) and ``s`` (if
    ``keep``), and per step ``[proj(raw), Phi]`` (if ``record``)."""
    x1, x3, x4, x5, x7 = coef[0], coef[1], coef[2], coef[3], coef[4]
    y2, q, r6, ln2 = coef[5], coef[6], coef[7], coef[8]
    T, B, m = X.shape[0], X.shape[1], X.shape[2]
    Wt = (0.5 * W).transpose(0, 1)  # half = coords @ Wt: coords are sqrt 2 * to_coords, from_coords puts v / sqrt 2
    eye = torch.eye(m, dtype=X.dtype, device=X.device).expand(B, m, m)
    I4 = (x4 * eye).contiguous()
    out = torch.empty((T, B, m, m), dtype=X.dtype, device=X.device)
    U = torch.zeros((B, m * m), dtype=X.dtype, device=X.device)  # strict upper triangle of Phi (rest stays 0)
    Uv = U.view(B, m, m)
    coords = torch.empty((T, B, W.shape[0]), dtype=X.dtype, device=X.device)
    saved: List[torch.Tensor] = []
    ss: List[int] = []
    rec: List[torch.Tensor] = []
    H = eye
    for t in range(T):
        raw = X[t] if t == 0 else torch.bmm(H.transpose(1, 2), X[t])
        S = raw - raw.transpose(1, 2)
        ct = torch.gather(S.view(B, m * m), 1, up, out=coords[t])
        U.scatter_(1, up, torch.mm(ct, Wt))
        Phi = Uv - Uv.transpose(1, 2)
        if D is not None:
            Phi.add_(D[t])
        # the truncation bound of the degree-8 series on ||X^2||^4 ||X|| >= ||X^9|| (Frobenius, submultiplicative)
        # instead of ||X||^9: nu = (||X^2||^4 ||X||)^(1/9) <= ||X|| bounds every term ||X^k|| <= nu^k, k >= 9, so
        # nu <= theta keeps the error of the table's criterion; at the norms of training it saves one squaring
        Phi2 = torch.bmm(Phi, Phi)
        nrms = torch.linalg.matrix_norm(Phi)
        nu9 = float((torch.linalg.matrix_norm(Phi2).pow(4) * nrms).max())
        if math.isfinite(nu9):
            nrm = nu9 ** (1.0 / 9.0)
        else:  # overflow or non-finite matrices (these give NaN): the others by their Frobenius norms
            nrm = float(torch.nan_to_num(nrms, nan=0.0, posinf=0.0).max())
        s = 0 if nrm <= theta else int(math.ceil(math.log(nrm / theta) / ln2))
        if s > 0:
            k = 2.0 ** float(-s)
            Xs = Phi * k
            X2 = Phi2 * (k * k)
        else:
            Xs, X2 = Phi, Phi2
        Qp = torch.add(Xs, X2, alpha=q)
        L = torch.baddbmm(X2, X2, Qp, beta=x3, alpha=x1)
        R = torch.add(I4, Xs, alpha=x5).add_(X2, alpha=r6).add_(L, alpha=x7)
        P = torch.add(eye, Xs).add_(X2, alpha=y2).baddbmm_(L, R)
        if keep:
            saved += [Xs, X2, Qp, L, R, P]
            ss.append(s)
        for _ in range(s):
            P = torch.bmm(P, P)
            if keep:
                saved.append(P)
        if t == 0:
            out[0] = P
        else:
            torch.bmm(H, P, out=out[t])
        H = out[t]
        if record:
            rec += [0.5 * S, Phi]
    if keep:
        ss.append(len(saved))  # sentinel: saved[k] starts step t at sum of the earlier lengths
    return out, coords, saved, ss, rec


def _backward_loop(G: torch.Tensor, X: torch.Tensor, out: torch.Tensor, W: torch.Tensor, up: torch.Tensor,
                   saved: List[torch.Tensor], ss: List[int], has_d: bool, coef: List[float]
                   ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """The reversed loop of :class:`SkewRecurrence` (TorchScript-compatible): ``graw`` ``(T, B, m, m)``
    (gradient of ``H_t^T X_t``), the gradient of the unscaled mixing output ``(T, B, dim)`` and, with drives,
    the skew part of the gradient of ``D`` ``(T, B, m, m)``."""
    x1, x3, x5, x7 = coef[0], coef[1], coef[3], coef[4]  # x4 = coef[2], ln 2 = coef[8]: forward only
    y2, q, r6 = coef[5], coef[6], coef[7]
    T, B, m = X.shape[0], X.shape[1], X.shape[2]
    dim = W.shape[0]
    W2 = 0.5 * W  # d coords = d half @ (W / 2)
    graw_all = torch.empty((T, B, m, m), dtype=X.dtype, device=X.device)
    ghalf_all = torch.empty((T, B, dim), dtype=X.dtype, device=X.device)
    gD = torch.empty((T, B, m, m), dtype=X.dtype, device=X.device) if has_d else None
    Gc = torch.zeros((B, m * m), dtype=X.dtype, device=X.device)
    Gcv = Gc.view(B, m, m)
    starts: List[int] = [0]
    for t in range(T):
        starts.append(starts[t] + 6 + ss[t])
    gH = G[T - 1].clone()
    for t in range(T - 1, -1, -1):
        s = ss[t]
        k0 = starts[t]
        Xs, X2, Qp, L, R = saved[k0], saved[k0 + 1], saved[k0 + 2], saved[k0 + 3], saved[k0 + 4]
        if t < T - 1:
            gH.add_(G[t])
        E = saved[k0 + 5 + s]
        if t > 0:  # H_{t+1} = H_t E; H_0 = I is a constant
            gP = torch.bmm(out[t - 1].transpose(1, 2), gH)
            gH = torch.bmm(gH, E.transpose(1, 2))
        else:
            gP = gH
        for j in range(s - 1, -1, -1):  # squaring Y = P P with P = saved[k0 + 5 + j]
            P = saved[k0 + 5 + j]
            Pt = P.transpose(1, 2)
            gP = torch.baddbmm(torch.bmm(gP, Pt), Pt, gP)
        GL = torch.bmm(gP, R.transpose(1, 2))  # T8 = C + L R
        GR = torch.bmm(L.transpose(1, 2), gP)
        GL.add_(GR, alpha=x7)  # R = ... + x7 L
        GQ = torch.bmm(X2, GL)  # L = x3 X2 + x1 X2 Q' (times x1 below); X2 = X2^T for skew X
        GX2 = torch.mul(GL, x3).add_(GR, alpha=r6).add_(gP, alpha=y2).add_(GQ, alpha=x1 * q)
        GX2.baddbmm_(GL, Qp.transpose(1, 2), alpha=x1)
        GX = torch.add(gP, GR, alpha=x5).add_(GQ, alpha=x1)
        # X2 = X X contributes GX2 X^T + X^T GX2 = -(GX2 X + X GX2). Only the skew part of the gradient of
        # Phi_t is used below (Phi_t is skew), and that of this term is the skew part of -2 sym(GX2) X: one
        # product instead of two. The factor 2^-s makes it the gradient of Phi_t.
        k = 2.0 ** float(-s)
        GX.baddbmm_(GX2 + GX2.transpose(1, 2), Xs, beta=k, alpha=-k)
        Gs = GX - GX.transpose(1, 2)  # 2 skew(gradient of Phi_t); Phi = U - U^T, half at the upper positions
        if gD is not None:
            torch.mul(Gs, 0.5, out=gD[t])
        gh = torch.gather(Gs.view(B, m * m), 1, up, out=ghalf_all[t])
        Gc.scatter_(1, up, torch.mm(gh, W2))  # coords = (S)_upper with S = raw - raw^T
        graw = torch.sub(Gcv, Gcv.transpose(1, 2), out=graw_all[t])
        if t > 0:
            gH.baddbmm_(X[t], graw.transpose(1, 2))  # raw = H_t^T X_t
    return graw_all, ghalf_all, gD


#: The two loops compiled by TorchScript (``None``: not tried yet; then the compiled functions, or the plain ones
#: when scripting is unavailable or fails). Design choice: the loops are bound by the per-operation
#: overhead of ~70 small operations per position; TorchScript runs them without the Python interpreter: the
#: whole training step 0.88x (interleaved, median of 9), 0.02 s to script; ``torch.compile`` measured slower
#: (62 vs 39 us per step of the polynomial) after 90 s of compilation.
_LOOPS: Optional[Tuple[Any, Any]] = None
#: Set to False to run the plain Python loops (same operations, same results).
USE_TORCHSCRIPT = True


def loops() -> Tuple[Any, Any]:
    """``(forward_loop, backward_loop)``: scripted when :data:`USE_TORCHSCRIPT` and TorchScript works here, else
    the plain functions (silently: TorchScript is deprecated in torch 2.x and may go)."""
    global _LOOPS
    if not USE_TORCHSCRIPT:
        return _forward_loop, _backward_loop
    if _LOOPS is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _LOOPS = (torch.jit.script(_forward_loop), torch.jit.script(_backward_loop))
        except Exception:  # noqa: BLE001 - any failure of the optional compiler means: run the Python loops
            _LOOPS = (_forward_loop, _backward_loop)
    return _LOOPS


def skew_recurrence_forward(X: torch.Tensor, W: torch.Tensor, D: torch.Tensor | None = None,
                            keep: list | None = None, record: dict | None = None) -> torch.Tensor:
    """The states ``H_1..H_T`` of the recurrence (no autograd graph is built here).

    ``X``: ``(T, B, m, m)`` real, the targets ``X_t`` (token matrices), possibly padded to ``diag(X_t, I)``;
    ``W``: ``(dim, dim)``, ``dim = n(n-1)/2`` for the true size ``n <= m``; ``D``: ``(T, B, m, m)`` skew (zero
    outside the top-left block) or None. Returns ``(T, B, m, m)`` (``diag(H_t, I)`` when padded). ``keep``: a
    list that receives what the backward needs. ``record``: a dict that receives ``raw`` (``proj(H_t^T X_t)``)
    and ``phi`` (``Phi_t``), each ``(T, B, m, m)``. Source:; design choice for the
    evaluation order.
    """
    T, B, m, _ = X.shape
    n = _size(W.shape[0])
    up = _upper(n, m, X.device).expand(B, -1).contiguous()
    fwd, _ = loops()
    out, coords, saved, ss, rec = fwd(X, W, D, up, _THETA[X.dtype], keep is not None, record is not None, _COEF)
    if keep is not None:
        keep += [coords, saved, ss]
    if record is not None:
        record["raw"], record["phi"] = torch.stack(rec[0::2]), torch.stack(rec[1::2])
    return out


class SkewRecurrence(torch.autograd.Function):
    """``states = SkewRecurrence.apply(M, idx, W, Dv)``: :func:`skew_recurrence_forward` of ``X = M[idx]`` and
    ``D = Dv[idx]`` (``M``, ``Dv``: ``(V, m, m)``; ``idx``: ``(T, B)`` token ids) with a hand-written backward
    (the loop reversed; per step the adjoints of ``H_{t+1} = H_t E``, of the squarings and of the three
    products of the polynomial, of the coordinate maps and of ``H_t^T X_t``; the rows of ``M`` and ``Dv``
    collect their gradients by one ``index_add_``). Gradients for ``M``, ``W`` and ``Dv``; that of ``Dv`` is
    its skew part (``Dv`` lies in the algebra: the symmetric part never reaches its parameters). Double
    backward is not supported. Design choice."""

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
        coords, saved, ss = ctx.keep
        T, B, m, _ = X.shape
        dim = W.shape[0]
        up = _upper(_size(dim), m, X.device).expand(B, -1).contiguous()
        _, bwd = loops()
        graw_all, ghalf_all, gD = bwd(G.contiguous(), X, out, W, up, saved, ss, ctx.has_d, _COEF)
        # X_t: raw = H_t^T X_t -> H_t graw_t, all positions in one product (H_0 = I); rows of M by index_add_
        gM = X.new_zeros(ctx.V, m * m)
        gM.index_add_(0, flat[:B], graw_all[0].reshape(B, -1))
        if T > 1:
            gX = torch.bmm(out[:-1].reshape(-1, m, m), graw_all[1:].reshape(-1, m, m))
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
