"""Causal Energy Minimisation (CEM): Transformer layers as gradient steps on causal energies.

Source: J. Xu et al., "Revisiting Transformer Layer Parameterization Through Causal Energy Minimization",
arXiv 2605.07588; implementation notes ``shared/papers/cem.md`` (cited below as "notes §x"). No official
code exists; everything tagged *inferred* in the notes is a config option here (see ``docs/cem.md``).

Every sub-block (attention, MLP) maps its input ``h`` (shape ``(B, J, d)``) to ``x^T`` by ``T`` steps

    x^{t+1} = x^t + P · u(y^t),     y^t = x^t / rho,     u(y) = -grad_y eps(y | h_{1:i})

starting at ``x^0 = h``. ``rho`` (shape ``(B, J, 1)``) is the RMS of the sub-block input, frozen over the
steps (notes §1.1, inferred), so ``x - rho P grad_x eps = x + P u``: one step is exactly pre-norm attention /
SwiGLU with tied weights. Context (keys, the MLP gate ``c``, ``n = h / rho``, ``rho``) is computed once from the
sub-block input and held fixed during the recursion (notes §2.3), so each position descends a fixed energy.

Public energy functions (all shapes per batch; ``H`` heads of width ``d_h``, MLP width ``F``):

* :func:`interaction_energy` / :func:`interaction_update`: the log-sum-exp attention energy and its
  closed-form negative gradient (tied multi-head attention, optional diagonal-plus-low-rank, RoPE).
* :func:`silu_integral` (``Phi``), :func:`mlp_energy` / :func:`mlp_update`: the element-wise energy and its
  negative gradient (tied SwiGLU, or the quadratic reading of notes §1.3).
* :func:`preconditioner_apply` / :func:`preconditioner_matrix`: ``P = diag(softplus(p)) + U V^T + V U^T``
  (``dlr``) or ``diag(softplus(p)) + U U^T`` (``psd``), notes §2.2.

Energies are in the model's own (dimensionless) units, comparable between the steps of one sub-block only
(notes §2.4: levels carry a ``log i`` offset and scales differ between layers).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from geomlab.models import register
from geomlab.models.base import SequenceModel
from geomlab.models.budget import linear_width_search, search_width
from geomlab.models.layers import RotaryTables, apply_rope

__all__ = [
    "rms_scale",
    "interaction_scores", "interaction_energy", "interaction_update", "attention_vectors", "causal_logsumexp",
    "silu_integral", "mlp_gate", "mlp_energy", "mlp_update",
    "preconditioner_apply", "preconditioner_matrix",
    "CEMAttention", "CEMMLP", "Preconditioner", "CEMStack", "CEMModel", "CEMRegressor",
    "DIAGONALS", "PRECONDITIONERS", "MLP_ENERGIES", "POSITIONALS", "NORMS",
]

DIAGONALS = ("none", "shared", "per_head")
PRECONDITIONERS = ("none", "dlr", "psd")
MLP_ENERGIES = ("swiglu", "quadratic")
POSITIONALS = ("rope", "none")
NORMS = ("frozen_rms", "none")
ETA_PARAMS = ("softplus", "sigmoid")


# ----------------------------------------------------------------------------------------------------
# normalisation (RoPE: geomlab.models.layers)
# ----------------------------------------------------------------------------------------------------

def rms_scale(h: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``rho = sqrt(mean_c h_c^2 + eps)``, shape ``(..., 1)`` for ``h`` of shape ``(..., d)`` (notes §1.1)."""
    return torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)


def _causal(J: int, device) -> torch.Tensor:
    return torch.ones(J, J, dtype=torch.bool, device=device).tril()


def _heads(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``(B, J, d) x (H, d_h, d) -> (B, H, J, d_h)``."""
    return torch.einsum("bjd,hed->bhje", x, w)


def _check_attention_args(y, n, w_q, w_k, eta, diag):
    if y.dim() != 3 or y.shape != n.shape:
        raise ValueError(f"y and n must both have shape (B, J, d); got {tuple(y.shape)} and {tuple(n.shape)}")
    if w_q.dim() != 3 or w_q.shape != w_k.shape or w_q.shape[-1] != y.shape[-1]:
        raise ValueError(f"w_q and w_k must have shape (H, d_h, d={y.shape[-1]}); got "
                         f"{tuple(w_q.shape)} and {tuple(w_k.shape)}")
    if eta.shape != (w_q.shape[0],):
        raise ValueError(f"eta must have shape (H,) = ({w_q.shape[0]},), got {tuple(eta.shape)}")
    if diag is not None and diag.shape not in ((y.shape[-1],), (w_q.shape[0], y.shape[-1])):
        raise ValueError(f"diag must have shape (d,) or (H, d); got {tuple(diag.shape)}")


# ----------------------------------------------------------------------------------------------------
# interaction (attention) energy
# ----------------------------------------------------------------------------------------------------

def _diag_scores(y: torch.Tensor, n: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
    """``sum_c d_c y_ic n_jc``: shape ``(B, 1, J, J)`` (shared ``d``) or ``(B, H, J, J)`` (per head)."""
    if diag.dim() == 1:
        return ((y * diag) @ n.transpose(-1, -2)).unsqueeze(1)
    return torch.einsum("bid,hd,bjd->bhij", y, diag, n)


def interaction_scores(y: torch.Tensor, n: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                       diag: torch.Tensor | None = None, rope: tuple[torch.Tensor, torch.Tensor] | None = None
                       ) -> torch.Tensor:
    """Causal attention scores ``S^k_ij = beta [ (R_i W^Q_k y_i)·(R_j W^K_k n_j) + sum_c d_kc y_ic n_jc ]``.

    Shapes: ``y``, ``n`` ``(B, J, d)``; ``w_q``, ``w_k`` ``(H, d_h, d)``; ``diag`` ``None``, ``(d,)`` (shared)
    or ``(H, d)`` (per head); ``rope`` ``(cos, sin)`` from :func:`geomlab.models.layers.rope_angles` or ``None``.
    Returns ``(B, H, J, J)`` with ``-inf`` where ``j > i``; ``beta = d_h**-0.5``. Notes §1.2, §2.1
    (RoPE on the low-rank part only, the diagonal part unrotated: a design choice).
    """
    H, dh, _ = w_q.shape
    beta = dh ** -0.5
    q, k = _heads(y, w_q), _heads(n, w_k)
    if rope is not None:
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
    s = q @ k.transpose(-1, -2)
    if diag is not None:
        s = s + _diag_scores(y, n, diag)
    J = y.shape[1]
    return (beta * s).masked_fill(~_causal(J, y.device), float("-inf"))


def attention_vectors(y: torch.Tensor, n: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                      diag: torch.Tensor | None = None,
                      rope: tuple[torch.Tensor, torch.Tensor] | None = None, keys: torch.Tensor | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Queries and keys whose dot products are the scores of :func:`interaction_scores` before ``beta``.

    Returns ``(q, k, q_shared, k_shared)``: ``q``/``k`` ``(B, H, J, e)`` with ``q_i·k_j`` the per-head part
    (``e = d_h``, or ``d_h + d`` with a per-head diagonal: ``q = [R W^Q y, d_k ⊙ y]``, ``k = [R W^K n, n]``) and,
    for a shared diagonal ``(d,)``, ``q_shared = d ⊙ y`` / ``k_shared = n`` ``(B, J, d)`` whose dot product is
    added to every head (``None`` otherwise). ``keys`` (rotated ``W^K n``, ``(B, H, J, d_h)``) may be passed.
    Exact algebra (design choice): it lets the diagonal-plus-low-rank scores go through fused attention and
    chunked log-sum-exp instead of an explicit ``J x J`` softmax. Source: notes §1.2, §2.1.
    """
    q = _heads(y, w_q)
    if keys is None:
        keys = _heads(n, w_k)
        if rope is not None:
            keys = apply_rope(keys, *rope)
    if rope is not None:
        q = apply_rope(q, *rope)
    if diag is None:
        return q, keys, None, None
    if diag.dim() == 1:
        return q, keys, y * diag, n
    H = w_q.shape[0]
    qd = y.unsqueeze(1) * diag.view(1, H, 1, -1)
    kd = n.unsqueeze(1).expand(-1, H, -1, -1)
    return torch.cat([q, qd], dim=-1), torch.cat([keys, kd], dim=-1), None, None


def causal_logsumexp(q: torch.Tensor, k: torch.Tensor, q_shared: torch.Tensor | None = None,
                     k_shared: torch.Tensor | None = None, scale: float = 1.0, chunk: int = 256) -> torch.Tensor:
    """``logsumexp_{j <= i} scale * (q_i·k_j + q_shared_i·k_shared_j)`` per head, shape ``(B, H, J)``.

    ``q``, ``k`` ``(B, H, J, e)``; ``q_shared``/``k_shared`` ``(B, J, s)`` or ``None``. Computed in blocks of
    ``chunk`` query rows against the keys up to the block's last row, so memory is ``O(chunk * J)`` per head
    instead of ``O(J^2)`` (design choice; equals ``torch.logsumexp`` of the masked scores).
    """
    B, H, J, _ = q.shape
    out = []
    for a in range(0, J, chunk):
        b = min(J, a + chunk)
        s = q[:, :, a:b] @ k[:, :, :b].transpose(-1, -2)
        if q_shared is not None:
            s = s + (q_shared[:, a:b] @ k_shared[:, :b].transpose(-1, -2)).unsqueeze(1)
        rows = torch.arange(a, b, device=q.device)[:, None]
        cols = torch.arange(b, device=q.device)[None, :]
        s = (scale * s).masked_fill(cols > rows, float("-inf"))
        out.append(torch.logsumexp(s, dim=-1))
    return torch.cat(out, dim=-1) if out else q.new_zeros(B, H, 0)


def interaction_energy(y: torch.Tensor, n: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                       eta: torch.Tensor, diag: torch.Tensor | None = None,
                       rope: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Token-wise interaction energy ``eps_i = -sum_k (eta_k / beta) logsumexp_{j<=i} S^k_ij``, shape ``(B, J)``.

    ``y`` is the iterate in query coordinates (``x / rho``), ``n`` the normalised context (``h / rho``),
    ``eta`` ``(H,)`` the positive per-head step sizes; see :func:`interaction_scores` for the other
    arguments. The log-sum-exp runs in blocks of query rows (:func:`causal_logsumexp`), never on a full
    ``J x J`` score matrix. Source: notes §1.2 (log-sum-exp energy, modern-Hopfield form) and §2.1 (D+LR).
    Raises ``ValueError`` on inconsistent shapes.
    """
    _check_attention_args(y, n, w_q, w_k, eta, diag)
    beta = w_q.shape[1] ** -0.5
    lse = causal_logsumexp(*attention_vectors(y, n, w_q, w_k, diag, rope), scale=beta)  # (B, H, J)
    return -(eta.view(1, -1, 1) * lse).sum(dim=1) / beta


#: Longest window trained with explicit attention weights (``interaction_update(explicit=True)``): their
#: memory is ``B H J^2`` per recursion step and layer (design choice). Used on CPU in training mode only (where it
#: was measured faster, docs/speed.md); eval mode and accelerators keep the fused call.
_EXPLICIT_MAX_LEN = 512


def _causal_bias(J: int, dtype, device) -> torch.Tensor:
    """``(J, J)``: 0 on and below the diagonal, ``-inf`` above (added to scores: the causal mask)."""
    return torch.zeros(J, J, dtype=dtype, device=device).masked_fill_(~_causal(J, device), float("-inf"))


class _SharedDiagonalAttention(torch.autograd.Function):
    """Causal attention with values = keys and a score shared by all heads, with a hand-written backward.

    Forward ``(q, k, qs, ks, eta, scale) -> (o, an)``: ``q``, ``k`` ``(B, H, J, e)``, ``qs``, ``ks`` ``(B, J, s)``,
    ``eta`` ``(H,)``; ``a^h = softmax_j(scale (q^h_i·k^h_j + qs_i·ks_j))`` over ``j <= i``,
    ``o^h = a^h k^h`` ``(B, H, J, e)`` and ``an = sum_h eta_h a^h ks`` ``(B, J, s)``. The shared score
    ``qs·ks`` is formed once (not once per head as in the augmented fused call), and the read-out of ``ks``
    is summed over heads before the product with ``ks`` (it enters the update only through
    ``sum_h eta_h a^h``). Backward: the gradient of the softmax in closed form,
    ``dS = a ⊙ (dA - rowsum(a ⊙ dA))`` with ``dA^h = do^h k^h^T + eta_h dan ks^T``. The weights are stored:
    ``O(B H J^2)`` memory. Exact algebra (design choice, for short training windows on CPU).
    """

    @staticmethod
    def forward(ctx, q, k, qs, ks, eta, scale):
        B, H, J, e = q.shape
        bias = _causal_bias(J, q.dtype, q.device)
        q_ = (q * scale).reshape(B * H, J, e)  # batch and heads flattened: 3-d products, no copies
        k = k.reshape(B * H, J, e)
        qs_ = qs * scale
        o, an = q.new_empty(B * H, J, e), q.new_empty(qs.shape)
        eta_row = eta.view(1, 1, H)
        saved = []
        for sl in _batch_chunks(B, H * J * J):  # a few batch rows at a time: the J x J blocks stay in cache
            b = sl.stop - sl.start
            hs = slice(sl.start * H, sl.stop * H)
            shared = torch.baddbmm(bias, qs_[sl], ks[sl].transpose(-1, -2))  # (b, J, J), formed once
            a = torch.bmm(q_[hs], k[hs].transpose(-1, -2)).view(b, H, J, J).add_(shared.unsqueeze(1))
            a = a.softmax(dim=-1).view(b * H, J, J)
            torch.bmm(a, k[hs], out=o[hs])
            a_sum = torch.bmm(eta_row.expand(b, 1, H), a.view(b, H, J * J)).view(b, J, J)  # sum_h eta_h a^h
            torch.bmm(a_sum, ks[sl], out=an[sl])
            saved += [a, a_sum]
        ctx.save_for_backward(q_, k, qs_, ks, eta, *saved)
        ctx.scale = scale
        return o.view(B, H, J, e), an

    @staticmethod
    @once_differentiable
    def backward(ctx, d_o, d_an):
        q_, k, qs_, ks, eta, *saved = ctx.saved_tensors
        scale = ctx.scale
        B, J, _ = ks.shape
        H = eta.shape[0]
        d_o = d_o.reshape(B * H, J, -1)
        d_q, d_k, d_qs, d_ks = (torch.empty_like(t) for t in (q_, k, qs_, ks))
        d_eta = eta.new_zeros(H)
        eta4 = eta.view(1, H, 1, 1)
        for c, sl in enumerate(_batch_chunks(B, H * J * J)):
            b = sl.stop - sl.start
            hs = slice(sl.start * H, sl.stop * H)
            a, a_sum = saved[2 * c], saved[2 * c + 1]
            g = torch.bmm(d_an[sl], ks[sl].transpose(-1, -2))  # (b, J, J): d an / d a^h = eta_h g
            d_a = torch.bmm(d_o[hs], k[hs].transpose(-1, -2)).view(b, H, J, J).addcmul_(g.unsqueeze(1), eta4)
            d_eta += torch.bmm(g.view(b, 1, J * J), a.view(b, H, J * J).transpose(1, 2)).sum(dim=0).view(H)
            d_s = torch._softmax_backward_data(d_a, a.view(b, H, J, J), -1, a.dtype)
            d_shared = d_s.sum(dim=1)
            d_s = d_s.view(b * H, J, J)
            torch.bmm(d_s, k[hs], out=d_q[hs])
            torch.baddbmm(torch.bmm(a.transpose(-1, -2), d_o[hs]), d_s.transpose(-1, -2), q_[hs], out=d_k[hs])
            torch.bmm(d_shared, ks[sl], out=d_qs[sl])
            torch.baddbmm(torch.bmm(a_sum.transpose(-1, -2), d_an[sl]), d_shared.transpose(-1, -2), qs_[sl],
                          out=d_ks[sl])
        return (d_q.mul_(scale).view(B, H, J, -1), d_k.view(B, H, J, -1), d_qs.mul_(scale), d_ks, d_eta, None)


#: Elements of the ``(b, H, J, J)`` weight block processed at once by :class:`_SharedDiagonalAttention` (1 MB in
#: float32: the block stays in cache between its products, measured 1.3x faster than the whole batch at once).
_CHUNK_ELEMENTS = 2 ** 18


def _batch_chunks(B: int, per_row: int) -> list[slice]:
    """Slices of ``range(B)`` of at most ``_CHUNK_ELEMENTS // per_row`` rows each (at least one row)."""
    step = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    return [slice(i, min(B, i + step)) for i in range(0, B, step)]


def interaction_update(y: torch.Tensor, n: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                       eta: torch.Tensor, diag: torch.Tensor | None = None,
                       rope: tuple[torch.Tensor, torch.Tensor] | None = None,
                       keys: torch.Tensor | None = None, explicit: bool = False) -> torch.Tensor:
    """Closed-form ``-grad_y`` of :func:`interaction_energy` (summed over tokens), shape ``(B, J, d)``.

    ``out_i = sum_k eta_k [ W^Q_k^T R_i^T sum_j a^k_ij R_j W^K_k n_j + d_k ⊙ sum_j a^k_ij n_j ]``: causal
    multi-head attention with values = (rotated) keys and output = transposed query projection, computed with
    ``F.scaled_dot_product_attention``. With a diagonal the same fused call runs on augmented vectors
    (:func:`attention_vectors`: the diagonal score is one more dot product, and the value ``[R W^K n, n]``
    also returns ``sum_j a^k_ij n_j``), so no ``J x J`` matrix is formed.
    ``keys`` (``(B, H, J, d_h)``, already rotated) may be passed to avoid recomputing them (fixed context,
    notes §2.3). ``explicit`` (shared diagonal only; ignored otherwise): form the weights explicitly with the
    shared score computed once (:class:`_SharedDiagonalAttention`, hand-written backward) instead of the fused
    call on ``d_h + d``-wide augmented vectors; the same function (to rounding), forward + backward about 1.6x
    faster on CPU at 16 x 128 (docs/speed.md), ``O(B H J^2)`` memory. Source: notes §1.2, §2.1.
    """
    _check_attention_args(y, n, w_q, w_k, eta, diag)
    B, J, d = y.shape
    H, dh, _ = w_q.shape
    beta = dh ** -0.5
    eta4 = eta.view(1, H, 1, 1)
    q, k, qs, ks = attention_vectors(y, n, w_q, w_k, diag, rope, keys)
    if explicit and qs is not None:
        o, an = _SharedDiagonalAttention.apply(q, k, qs, ks, eta, beta)
        if rope is not None:
            o = apply_rope(o, *rope, inverse=True)
        return torch.einsum("bhje,hed->bjd", eta4 * o, w_q) + diag * an
    if qs is not None:  # shared diagonal: the same extra score in every head
        q = torch.cat([q, qs.unsqueeze(1).expand(-1, H, -1, -1)], dim=-1)
        k = torch.cat([k, ks.unsqueeze(1).expand(-1, H, -1, -1)], dim=-1)
    # values = keys (augmented with n under a diagonal): o = a @ (R W^K n), a @ n in one fused call
    o = F.scaled_dot_product_attention(q, k, k, is_causal=True, scale=beta)
    extra = None
    if diag is not None:
        o, an = o[..., :dh], o[..., dh:]  # an: (B, H, J, d) = sum_j a_ij n_j per head
        if diag.dim() == 1:
            extra = diag * (eta4 * an).sum(dim=1)
        else:
            extra = torch.einsum("bhjd,hd->bjd", eta4 * an, diag)
    if rope is not None:
        o = apply_rope(o, *rope, inverse=True)
    out = torch.einsum("bhje,hed->bjd", eta4 * o, w_q)
    return out if extra is None else out + extra


# ----------------------------------------------------------------------------------------------------
# element-wise (MLP) energy
# ----------------------------------------------------------------------------------------------------

_GL_CACHE: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _gauss_legendre01(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if nodes not in _GL_CACHE:
        x, w = np.polynomial.legendre.leggauss(nodes)
        _GL_CACHE[nodes] = ((x + 1) / 2, w / 2)
    return _GL_CACHE[nodes]


def silu_integral(z: torch.Tensor, panels: int | None = None, nodes: int | None = None) -> torch.Tensor:
    """``Phi(z) = int_0^z SiLU(t) dt`` element-wise (same shape and dtype as ``z``).

    Stable form (design choice): with ``G(u) = int_0^u s·sigmoid(-s) ds`` (increasing to ``pi^2/12``),
    ``Phi(z) = z^2/2 - G(z)`` for ``z > 0`` and ``Phi(z) = G(-z)`` for ``z <= 0``. ``G`` is integrated by
    composite Gauss-Legendre (``panels`` x ``nodes``) on ``[0, min(u, cap)]``. Defaults by dtype: float64
    uses 8 x 16 nodes and cap 40 (tail below 1e-15; equals ``z softplus(z) + Li2(-e^z) + pi^2/12``, notes
    §1.3, to ~1e-13); lower precisions use 2 x 12 nodes and cap 20 (tail below 5e-8), which is as accurate
    as float32 arithmetic allows (measured: relative error 2.4e-7, the same as the float64 rule evaluated in
    float32) at a fifth of the cost (it dominates a CEM trace).
    """
    wide = z.dtype == torch.float64
    panels = panels or (8 if wide else 2)
    nodes = nodes or (16 if wide else 12)
    u = z.abs().clamp(max=40.0 if wide else 20.0)
    s01, w01 = _gauss_legendre01(nodes)
    s01 = torch.as_tensor(s01, dtype=z.dtype, device=z.device)
    w01 = torch.as_tensor(w01, dtype=z.dtype, device=z.device)
    width = u / panels
    g = torch.zeros_like(z)
    for p in range(panels):
        s = (p + s01) * width.unsqueeze(-1)  # (..., nodes)
        g = g + (w01 * s * torch.sigmoid(-s)).sum(dim=-1) * width
    return torch.where(z > 0, 0.5 * z * z - g, g)


def mlp_gate(n: torch.Tensor, v: torch.Tensor, kind: str = "swiglu") -> torch.Tensor:
    """Conditioning gate ``c(h)``, shape ``(B, J, F)``, from the normalised sub-block input ``n`` ``(B, J, d)``
    and ``v`` ``(F, d)``: ``V n`` for ``swiglu``, ``SiLU(V n)`` for ``quadratic`` (notes §1.3). It is held fixed
    during the recursion (notes §6.6)."""
    if kind not in MLP_ENERGIES:
        raise ValueError(f"mlp_energy must be one of {MLP_ENERGIES}, got {kind!r}")
    c = n @ v.transpose(-1, -2)
    return c if kind == "swiglu" else F.silu(c)


def mlp_energy(y: torch.Tensor, c: torch.Tensor, w: torch.Tensor, eta: torch.Tensor | float,
               kind: str = "swiglu") -> torch.Tensor:
    """Token-wise element-wise energy, shape ``(B, J)``.

    ``swiglu``: ``eps_i = -eta sum_m c_im Phi(w_m·y_i)``; ``quadratic``: ``eps_i = -eta/2 sum_m c_im (w_m·y_i)^2``.
    ``y`` ``(B, J, d)`` the iterate in query coordinates, ``c`` ``(B, J, F)`` from :func:`mlp_gate`,
    ``w`` ``(F, d)``, ``eta`` a positive scalar. Source: notes §1.3 (both readings).
    """
    if kind not in MLP_ENERGIES:
        raise ValueError(f"mlp_energy must be one of {MLP_ENERGIES}, got {kind!r}")
    z = y @ w.transpose(-1, -2)
    if kind == "swiglu":
        return -eta * (c * silu_integral(z)).sum(dim=-1)
    return -0.5 * eta * (c * z * z).sum(dim=-1)


def mlp_update(y: torch.Tensor, c: torch.Tensor, w: torch.Tensor, eta: torch.Tensor | float,
               kind: str = "swiglu") -> torch.Tensor:
    """Closed-form ``-grad_y`` of :func:`mlp_energy`, shape ``(B, J, d)``.

    ``swiglu``: ``eta W^T [SiLU(W y) ⊙ c]`` (tied SwiGLU: gate = ``W``, down = ``W^T``, up = ``V``);
    ``quadratic``: ``eta W^T [c ⊙ W y]``. Source: notes §1.3.
    """
    if kind not in MLP_ENERGIES:
        raise ValueError(f"mlp_energy must be one of {MLP_ENERGIES}, got {kind!r}")
    z = y @ w.transpose(-1, -2)
    act = F.silu(z) if kind == "swiglu" else z
    return eta * ((act * c) @ w)


# ----------------------------------------------------------------------------------------------------
# preconditioner
# ----------------------------------------------------------------------------------------------------

def preconditioner_apply(g: torch.Tensor, p: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None,
                         kind: str = "dlr") -> torch.Tensor:
    """``g P`` for ``g`` of shape ``(..., d)`` (``P`` is symmetric), cost ``O(d r)`` per token.

    ``dlr``: ``P = diag(softplus(p)) + U V^T + V U^T`` (notes §2.2; not positive definite in general);
    ``psd``: ``P = diag(softplus(p)) + U U^T`` (positive definite; design choice, notes §2.2).
    ``p`` ``(d,)``, ``u``/``v`` ``(d, r)``. Raises ``ValueError`` for an unknown ``kind`` or a missing ``v``.
    """
    out = g * F.softplus(p)
    if kind == "dlr":
        if v is None:
            raise ValueError("the 'dlr' preconditioner needs v")
        return out + (g @ v) @ u.T + (g @ u) @ v.T
    if kind == "psd":
        return out + (g @ u) @ u.T
    raise ValueError(f"preconditioner kind must be 'dlr' or 'psd', got {kind!r}")


def preconditioner_matrix(p: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None,
                          kind: str = "dlr") -> torch.Tensor:
    """The dense ``(d, d)`` matrix ``P`` of :func:`preconditioner_apply` (for ``lambda_min`` monitoring)."""
    return preconditioner_apply(torch.eye(p.shape[0], dtype=p.dtype, device=p.device), p, u, v, kind)


# ----------------------------------------------------------------------------------------------------
# modules
# ----------------------------------------------------------------------------------------------------

def _inv_softplus(x: float) -> float:
    return math.log(math.expm1(x))


class Preconditioner(nn.Module):
    """Learned ``P`` on one sub-block's update (notes §2.2), initialised to ``P = I`` (or ``I + U U^T`` with
    ``U ~ N(0, 1e-2^2)`` for ``psd``): ``softplus(p) = 1``, ``V = 0``, ``U ~ N(0, 1e-4)``."""

    def __init__(self, d: int, rank: int, kind: str):
        super().__init__()
        self.kind = kind
        self.p = nn.Parameter(torch.full((d,), _inv_softplus(1.0)))
        self.u = nn.Parameter(torch.randn(d, rank) * 1e-2)
        self.v = nn.Parameter(torch.zeros(d, rank)) if kind == "dlr" else None

    def forward(self, g: torch.Tensor) -> torch.Tensor:
        return preconditioner_apply(g, self.p, self.u, self.v, self.kind)

    def matrix(self) -> torch.Tensor:
        """Dense ``(d, d)`` ``P``."""
        return preconditioner_matrix(self.p, self.u, self.v, self.kind)


class _EnergyBlock(nn.Module):
    """Shared recursion loop of a CEM sub-block (notes §2.3, §2.4).

    Subclasses define ``prepare(n, rope) -> ctx`` (fixed context), ``energy(y, n, ctx, rope) -> (B, J)`` and
    ``update(y, n, ctx, rope) -> (B, J, d)`` (``-grad_y`` of the energy).
    """

    def __init__(self, cfg: dict[str, Any]):
        super().__init__()
        d = cfg["d_model"]
        self.norm = cfg["norm"]
        self.norm_eps = float(cfg["norm_eps"])
        self.anchor = float(cfg["anchor"])
        self.precond = (Preconditioner(d, int(cfg["precond_rank"]), cfg["preconditioner"])
                        if cfg["preconditioner"] != "none" else None)

    def _rho(self, h: torch.Tensor) -> torch.Tensor:
        if self.norm == "none":
            return torch.ones_like(h[..., :1])
        return rms_scale(h, self.norm_eps)

    def total_energy(self, x: torch.Tensor, h: torch.Tensor, rope=None) -> torch.Tensor:
        """Token-wise energy ``(B, J)`` of iterate ``x`` given sub-block input ``h`` (both ``(B, J, d)``),
        including the optional anchor ``(lambda/2) ||(x - h)/rho||^2``. Used by tests and recording."""
        rho = self._rho(h)
        n = h / rho
        ctx = self.prepare(n, rope)
        y = x / rho
        e = self.energy(y, n, ctx, rope)
        if self.anchor:
            e = e + 0.5 * self.anchor * (y - n).pow(2).sum(-1)
        return e

    def forward(self, h: torch.Tensor, steps: int, rope=None, rec: list | None = None) -> torch.Tensor:
        rho = self._rho(h)
        n = h / rho
        ctx = self.prepare(n, rope)
        x = h
        energies, disps, extras = [], [], {}
        for t in range(steps + 1):
            y = n if t == 0 else x / rho  # x^0 = h: y^0 is n (the same division, done once)
            if rec is not None:  # logging pass: energy of iterate t (t == steps is the output)
                e = self.energy(y, n, ctx, rope)
                if self.anchor:
                    e = e + 0.5 * self.anchor * (y - n).pow(2).sum(-1)
                energies.append(e)
                disps.append((x - h).norm(dim=-1) / rho.squeeze(-1))
                if t == steps - 1:
                    extras = self.extras(y, n, ctx, rope)
            if t == steps:
                break
            out = self.update(y, n, ctx, rope)
            if self.anchor:
                out = out - self.anchor * (y - n)
            x = x + (self.precond(out) if self.precond is not None else out)
        if rec is not None:
            rec.append({"energies": torch.stack(energies), "displacement": torch.stack(disps), **extras})
        return x

    def extras(self, y, n, ctx, rope) -> dict[str, torch.Tensor]:
        return {}


class CEMAttention(_EnergyBlock):
    """CEM attention sub-block: ``T`` steps on :func:`interaction_energy` (tied MHA; notes §1.2, §2.1).

    Parameters: ``w_q``, ``w_k`` ``(H, d_h, d)`` ~ N(0, 1/d); step sizes ``eta_k > 0`` (``(H,)``, softplus or
    ``eta_max``·sigmoid of a raw parameter, init ``eta_init``); diagonal ``(d,)`` / ``(H, d)`` init 0.
    """

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg)
        d, H = cfg["d_model"], cfg["n_heads"]
        dh = d // H
        self.eta_param, self.eta_max = cfg["eta_param"], float(cfg["eta_max"])
        self.w_q = nn.Parameter(torch.randn(H, dh, d) / math.sqrt(d))
        self.w_k = nn.Parameter(torch.randn(H, dh, d) / math.sqrt(d))
        self.eta_raw = nn.Parameter(torch.full((H,), _eta_raw_init(cfg)))
        diag = cfg["diagonal"]
        self.diag = (None if diag == "none" else
                     nn.Parameter(torch.zeros(d) if diag == "shared" else torch.zeros(H, d)))

    @property
    def eta(self) -> torch.Tensor:
        """Per-head step sizes, shape ``(H,)``, positive."""
        return _eta(self.eta_raw, self.eta_param, self.eta_max)

    def prepare(self, n, rope):
        k = _heads(n, self.w_k)
        return apply_rope(k, *rope) if rope is not None else k

    def energy(self, y, n, ctx, rope):
        return interaction_energy(y, n, self.w_q, self.w_k, self.eta, self.diag, rope)

    def update(self, y, n, ctx, rope):
        explicit = self.training and y.device.type == "cpu" and y.shape[1] <= _EXPLICIT_MAX_LEN
        return interaction_update(y, n, self.w_q, self.w_k, self.eta, self.diag, rope, keys=ctx,
                                  explicit=explicit)

    def extras(self, y, n, ctx, rope):
        """The attention of this step as queries and keys (scores ``q_i·k_j (+ q_shared_i·k_shared_j)``,
        ``beta`` folded into the queries): the trace computes weight rows from them on demand."""
        beta = self.w_q.shape[1] ** -0.5
        q, k, qs, ks = attention_vectors(y, n, self.w_q, self.w_k, self.diag, rope, ctx)
        out = {"attention_q": beta * q, "attention_k": k}
        if qs is not None:
            out.update(attention_q_shared=beta * qs, attention_k_shared=ks)
        return out


class CEMMLP(_EnergyBlock):
    """CEM MLP sub-block: ``T`` steps on :func:`mlp_energy` (tied SwiGLU; notes §1.3).

    Parameters: ``w`` (inside the nonlinearity, tied to the read-out) and ``v`` (gate), both ``(F, d)``
    ~ N(0, 1/d); one scalar step size ``eta > 0``.
    """

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg)
        d, f = cfg["d_model"], cfg["d_ff"]
        self.kind = cfg["mlp_energy"]
        self.eta_param, self.eta_max = cfg["eta_param"], float(cfg["eta_max"])
        self.w = nn.Parameter(torch.randn(f, d) / math.sqrt(d))
        self.v = nn.Parameter(torch.randn(f, d) / math.sqrt(d))
        self.eta_raw = nn.Parameter(torch.tensor(_eta_raw_init(cfg)))

    @property
    def eta(self) -> torch.Tensor:
        """Scalar step size (0-dim tensor), positive."""
        return _eta(self.eta_raw, self.eta_param, self.eta_max)

    def prepare(self, n, rope):
        return mlp_gate(n, self.v, self.kind)

    def energy(self, y, n, ctx, rope):
        return mlp_energy(y, ctx, self.w, self.eta, self.kind)

    def update(self, y, n, ctx, rope):
        return mlp_update(y, ctx, self.w, self.eta, self.kind)


def _eta_raw_init(cfg) -> float:
    e0 = float(cfg["eta_init"])
    if cfg["eta_param"] == "softplus":
        return _inv_softplus(e0)
    r = e0 / float(cfg["eta_max"])
    return math.log(r / (1 - r))


def _eta(raw: torch.Tensor, param: str, eta_max: float) -> torch.Tensor:
    return F.softplus(raw) if param == "softplus" else eta_max * torch.sigmoid(raw)


_DEFAULTS: dict[str, Any] = {
    "d_model": 64,
    "n_layers": 4,
    "n_heads": 4,
    "d_ff": 322,
    "recursion_steps": 1,
    "inference_recursion_steps": None,
    "diagonal": "shared",
    "preconditioner": "none",
    "precond_rank": 8,
    "mlp_energy": "swiglu",
    "positional": "rope",
    "rope_base": 10000.0,
    "norm": "frozen_rms",
    "norm_eps": 1e-6,
    "eta_param": "softplus",
    "eta_init": 0.5,
    "eta_max": 1.0,
    "anchor": 0.0,
}


def _validate(cfg: dict[str, Any]) -> None:
    for key, allowed in (("diagonal", DIAGONALS), ("preconditioner", PRECONDITIONERS),
                         ("mlp_energy", MLP_ENERGIES), ("positional", POSITIONALS), ("norm", NORMS),
                         ("eta_param", ETA_PARAMS)):
        if cfg[key] not in allowed:
            raise ValueError(f"cem: {key} must be one of {allowed}, got {cfg[key]!r}")
    for key in ("d_model", "n_layers", "n_heads", "d_ff", "recursion_steps", "precond_rank"):
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise ValueError(f"cem: {key} must be a positive integer, got {cfg[key]!r}")
    t_inf = cfg["inference_recursion_steps"]
    if t_inf is not None and (not isinstance(t_inf, int) or isinstance(t_inf, bool) or t_inf < 1):
        raise ValueError(f"cem: inference_recursion_steps must be null or a positive integer, got {t_inf!r}")
    if cfg["d_model"] % cfg["n_heads"]:
        raise ValueError(f"cem: d_model={cfg['d_model']} is not divisible by n_heads={cfg['n_heads']}")
    if cfg["positional"] == "rope" and (cfg["d_model"] // cfg["n_heads"]) % 2:
        raise ValueError("cem: RoPE needs an even head dimension d_model / n_heads")
    if cfg["eta_param"] == "sigmoid" and not 0 < cfg["eta_init"] < cfg["eta_max"]:
        raise ValueError("cem: with eta_param='sigmoid' need 0 < eta_init < eta_max")
    if cfg["eta_init"] <= 0 or cfg["anchor"] < 0 or cfg["norm_eps"] <= 0:
        raise ValueError("cem: eta_init and norm_eps must be positive and anchor non-negative")


class CEMStack(nn.Module):
    """``n_layers`` CEM blocks (attention sub-block then MLP sub-block, notes §1.4) on ``(B, J, d)`` vectors.

    Uses ``recursion_steps`` in training mode and ``inference_recursion_steps`` (when not null) in eval mode
    (test-time recursion). ``forward(h, rec=None)``: when ``rec`` is a list, one dict per sub-block is
    appended (``energies``/``displacement`` ``(T+1, B, J)``; attention also ``attention`` ``(B, H, J, J)``).
    """

    def __init__(self, cfg: dict[str, Any]):
        super().__init__()
        _validate(cfg)
        self.cfg = cfg
        self.layers = nn.ModuleList(
            nn.ModuleList([CEMAttention(cfg), CEMMLP(cfg)]) for _ in range(cfg["n_layers"]))
        self._rope = RotaryTables(cfg["d_model"] // cfg["n_heads"], cfg["rope_base"])

    @property
    def steps(self) -> int:
        """The number of recursion steps used in the current mode."""
        t_inf = self.cfg["inference_recursion_steps"]
        return self.cfg["recursion_steps"] if self.training or t_inf is None else int(t_inf)

    def rope(self, J: int, dtype, device):
        return self._rope(J, dtype, device) if self.cfg["positional"] == "rope" else None

    def forward(self, h: torch.Tensor, rec: list | None = None) -> torch.Tensor:
        rope = self.rope(h.shape[1], h.dtype, h.device)
        T = self.steps
        for attn, mlp in self.layers:
            h = attn(h, T, rope, rec)
            h = mlp(h, T, rope, rec)
        return h


@register
class CEMModel(SequenceModel):
    """``cem``: a character language model of CEM blocks (notes §1-§3).

    Embedding (std ``d^-0.5``, multiplied by ``sqrt(d)`` so the residual starts at RMS about 1, notes §3.3),
    ``n_layers`` CEM blocks, final RMSNorm with gain, LM head tied to the embedding.

    Config keys (defaults in ``_DEFAULTS``): ``d_model``, ``n_layers``, ``n_heads``, ``d_ff`` (CEM MLP width),
    ``recursion_steps`` (T), ``inference_recursion_steps`` (null = T), ``diagonal`` (none|shared|per_head),
    ``preconditioner`` (none|dlr|psd) with ``precond_rank``, ``mlp_energy`` (swiglu|quadratic),
    ``positional`` (rope|none; RoPE in the exact rotated-value form), ``rope_base``, ``norm``
    (frozen_rms|none), ``norm_eps``, ``eta_param`` (softplus|sigmoid), ``eta_init``, ``eta_max``,
    ``anchor`` (proximal term lambda, notes §2.5; 0 = off). Raises ``ValueError`` for an invalid value.
    """

    kind = "cem"

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        return dict(_DEFAULTS)

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        cfg = self.config
        d = cfg["d_model"]
        self.stack = CEMStack(cfg)
        self.embed = nn.Embedding(cfg["vocab_size"], d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.norm_f = nn.RMSNorm(d, eps=cfg["norm_eps"])

    def _run(self, tokens: torch.Tensor, rec: list | None) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        h = self.embed(tokens) * math.sqrt(self.config["d_model"])
        h = self.stack(h, rec)
        return self.norm_f(h) @ self.embed.weight.T

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(B, T)`` long -> logits ``(B, T, V)``."""
        return self._run(tokens, None)

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Energies of every iterate (see ``docs/architecture.md``, CEM table).

        Returns ``logits`` ``(T, V)`` (the same computation as ``forward``), ``energies`` and
        ``displacement`` ``[layer, block, step, position]`` (block 0 attention, 1 MLP; step 0..T where T is
        the recursion count of the current train/eval mode) and the attention of the last update step as
        ``attention_q`` / ``attention_k`` ``[layer, head, position, e]`` (scores ``q_i·k_j``, ``beta``
        folded in) plus, with a shared diagonal, ``attention_q_shared`` / ``attention_k_shared``
        ``[layer, position, d]`` (added to every head's score); ``geomlab.trace`` turns them into weights. Raises ``ValueError`` unless ``tokens`` is ``(1, T)``.
        """
        if tokens.dim() != 2 or tokens.shape[0] != 1:
            raise ValueError(f"record expects tokens of shape (1, T), got {tuple(tokens.shape)}")
        rec: list = []
        logits = self._run(tokens, rec)
        return _pack_record(rec, logits)

    @torch.no_grad()
    def diagnostics(self) -> dict[str, torch.Tensor]:
        """Monitoring values of notes §3.4/§6: ``eta_attention`` ``[layer, head]``, ``eta_mlp`` ``[layer]``,
        ``diag_norm`` ``[layer]`` (Frobenius norm of the diagonal, 0 when off) and ``precond_min_eig``
        ``[layer, block]`` (``lambda_min(P)``; 1 when there is no preconditioner, i.e. ``P = I``)."""
        return _diagnostics(self.stack)

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Parameter matching as in notes §3.2: the same ``d_model``/``n_layers``/``n_heads`` as the ``llama``
        config for this budget (unless given in ``fixed``), then the CEM MLP width ``d_ff`` is chosen so the
        parameter count matches ``n_params`` (within 5%). Raises ``ValueError`` if impossible."""
        from geomlab.models.llama import LlamaModel

        base = {k: fixed[k] for k in ("d_model", "n_layers", "n_heads") if k in fixed}
        if "d_model" not in fixed:
            lcfg = LlamaModel.config_for_budget(n_params, vocab_size,
                                                **{k: v for k, v in base.items() if k != "d_model"})
            base = {"d_model": lcfg["d_model"], "n_layers": lcfg["n_layers"], "n_heads": lcfg["n_heads"]}
        if "d_ff" in fixed:
            return search_width(lambda _: {"kind": cls.kind, **fixed, **base}, [0], n_params, vocab_size)
        return linear_width_search(lambda f: {"kind": cls.kind, **fixed, **base, "d_ff": f},
                                   n_params, vocab_size)


def _diagnostics(stack: CEMStack) -> dict[str, torch.Tensor]:
    eta_a, eta_m, dnorm, lam = [], [], [], []
    for attn, mlp in stack.layers:
        eta_a.append(attn.eta.detach().float().cpu())
        eta_m.append(mlp.eta.detach().float().cpu())
        dnorm.append(attn.diag.detach().float().norm().cpu() if attn.diag is not None else torch.tensor(0.0))
        lam.append(torch.stack([
            torch.linalg.eigvalsh(b.precond.matrix().detach().double()).min().float().cpu()
            if b.precond is not None else torch.tensor(1.0) for b in (attn, mlp)]))
    return {"eta_attention": torch.stack(eta_a), "eta_mlp": torch.stack(eta_m), "diag_norm": torch.stack(dnorm),
            "precond_min_eig": torch.stack(lam)}


def _pack_record(rec: list, logits: torch.Tensor) -> dict[str, torch.Tensor]:
    L = len(rec) // 2
    energies = torch.stack([torch.stack([rec[2 * l]["energies"][:, 0], rec[2 * l + 1]["energies"][:, 0]])
                            for l in range(L)])
    disp = torch.stack([torch.stack([rec[2 * l]["displacement"][:, 0], rec[2 * l + 1]["displacement"][:, 0]])
                        for l in range(L)])
    out = {"logits": logits[0], "energies": energies, "displacement": disp}
    for key in ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared"):
        if key in rec[0]:
            out[key] = torch.stack([rec[2 * l][key][0] for l in range(L)])
    return out


class CEMRegressor(nn.Module):
    """A CEM stack on continuous inputs with a scalar read-out (the GP task, notes §4.2; design choice).

    ``forward(x)``: ``x`` ``(B, J, in_features)`` float -> ``(B, J)`` predictions. Input map
    ``Linear(in_features, d_model)``, the CEM stack (config keys as :class:`CEMModel`; default
    ``positional='none'`` since the inputs carry their own coordinates), final RMSNorm, ``Linear(d_model, 1)``.
    ``record(x)`` returns ``prediction`` ``(J,)``, ``energies``/``displacement`` ``[layer, block, step, position]``
    and ``attention`` for ``x`` of shape ``(1, J, in_features)``.
    """

    def __init__(self, config: dict[str, Any], in_features: int = 3):
        super().__init__()
        cfg = {**_DEFAULTS, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "positional": "none",
               **config}
        unknown = set(cfg) - set(_DEFAULTS)
        if unknown:
            raise ValueError(f"CEMRegressor: unknown config keys {sorted(unknown)}")
        self.config = cfg
        self.inp = nn.Linear(in_features, cfg["d_model"])
        self.stack = CEMStack(cfg)
        self.norm_f = nn.RMSNorm(cfg["d_model"], eps=cfg["norm_eps"])
        self.out = nn.Linear(cfg["d_model"], 1)

    def forward(self, x: torch.Tensor, rec: list | None = None) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.inp.in_features:
            raise ValueError(f"inputs must have shape (B, J, {self.inp.in_features}), got {tuple(x.shape)}")
        h = self.stack(self.inp(x), rec)
        return self.out(self.norm_f(h)).squeeze(-1)

    @torch.no_grad()
    def record(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Like :meth:`CEMModel.record`, with ``prediction`` ``(J,)`` in place of ``logits``."""
        if x.dim() != 3 or x.shape[0] != 1:
            raise ValueError(f"record expects inputs of shape (1, J, F), got {tuple(x.shape)}")
        rec: list = []
        pred = self(x, rec)
        out = _pack_record(rec, pred.unsqueeze(-1))
        out["prediction"] = out.pop("logits")[:, 0]
        return out
