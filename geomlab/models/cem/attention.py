"""The interaction (attention) energy of a CEM layer and its closed-form update: tied
multi-head attention with values = keys and output = the transposed query map, an optional diagonal-plus-low-rank
score, RoPE; computed without a ``J x J`` matrix except in the explicit short-window kernel."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from geomlab.models.layers import apply_rope


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
    Returns ``(B, H, J, J)`` with ``-inf`` where ``j > i``; ``beta = d_h**-0.5``.
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
    chunked log-sum-exp instead of an explicit ``J x J`` softmax. Source:.
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
    ``J x J`` score matrix. Source: (log-sum-exp energy, modern-Hopfield form) and the diagonal-plus-low-rank score.
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
   ). ``explicit`` (shared diagonal only; ignored otherwise): form the weights explicitly with the
    shared score computed once (:class:`_SharedDiagonalAttention`, hand-written backward) instead of the fused
    call on ``d_h + d``-wide augmented vectors; the same function (to rounding), forward + backward about 1.6x
    faster on CPU at 16 x 128 (docs/speed.md), ``O(B H J^2)`` memory. Source:.
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
