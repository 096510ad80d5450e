"""The CEM layer: sub-blocks that take ``T`` gradient steps on an energy (attention, MLP), their learned
preconditioner and the stack of ``n_layers`` such layers."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models.cem.attention import _EXPLICIT_MAX_LEN, _heads, attention_vectors, interaction_energy, \
    interaction_update
from geomlab.models.cem.config import CEMStackConfig
from geomlab.models.cem.mlp import mlp_energy, mlp_gate, mlp_update
from geomlab.models.hooks import HookPoint
from geomlab.models.layers import RotaryTables, apply_rope


def rms_scale(h: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``rho = sqrt(mean_c h_c^2 + eps)``, shape ``(..., 1)`` for ``h`` of shape ``(..., d)``."""
    return torch.sqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)


def preconditioner_apply(g: torch.Tensor, p: torch.Tensor, u: torch.Tensor, v: torch.Tensor | None = None,
                         kind: str = "dlr") -> torch.Tensor:
    """``g P`` for ``g`` of shape ``(..., d)`` (``P`` is symmetric), cost ``O(d r)`` per token.

    ``dlr``: ``P = diag(softplus(p)) + U V^T + V U^T`` (; not positive definite in general);
    ``psd``: ``P = diag(softplus(p)) + U U^T`` (positive definite; design choice).
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


def _inv_softplus(x: float) -> float:
    return math.log(math.expm1(x))


class Preconditioner(nn.Module):
    """Learned ``P`` on one sub-block's update, initialised to ``P = I`` (or ``I + U U^T`` with
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
    """Shared recursion loop of a CEM sub-block.

    Subclasses define ``prepare(n, rope) -> ctx`` (fixed context), ``energy(y, n, ctx, rope) -> (B, J)`` and
    ``update(y, n, ctx, rope) -> (B, J, d)`` (``-grad_y`` of the energy).
    """

    def __init__(self, cfg: CEMStackConfig | Mapping[str, Any]):
        super().__init__()
        cfg = CEMStackConfig.coerce(cfg)
        d = cfg.d_model
        self.norm = cfg.norm
        self.norm_eps = float(cfg.norm_eps)
        self.anchor = float(cfg.anchor)
        self.precond = (Preconditioner(d, int(cfg.precond_rank), cfg.preconditioner)
                        if cfg.preconditioner != "none" else None)
        self.hook_iterate = HookPoint("(B, S+1, J, d) iterate x^t for t = 0..S (S recursion steps; x^0 is the "
                                      "sub-block input, x^S its output; a replacement carries on)", per_step=True)
        self.hook_energy = HookPoint("(B, S+1, J) token-wise energy of x^t (anchor included)", per_step=True,
                                     writable=False)
        self.hook_displacement = HookPoint("(B, S+1, J) ||x^t - x^0|| / rho", per_step=True, writable=False)

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

    def forward(self, h: torch.Tensor, steps: int, rope=None) -> torch.Tensor:
        rho = self._rho(h)
        n = h / rho
        ctx = self.prepare(n, rope)
        x = h
        for t in range(steps + 1):
            seen = self.hook_iterate(x)
            y = n if t == 0 and seen is x else seen / rho  # x^0 = h: y^0 is n (the same division, done once)
            x = seen
            if self.hook_energy.active:  # energy of iterate t (t == steps is the output)
                e = self.energy(y, n, ctx, rope)
                if self.anchor:
                    e = e + 0.5 * self.anchor * (y - n).pow(2).sum(-1)
                self.hook_energy(e)
            if self.hook_displacement.active:
                self.hook_displacement((x - h).norm(dim=-1) / rho.squeeze(-1))
            if t == steps - 1:
                self.observe(y, n, ctx, rope)
            if t == steps:
                break
            out = self.update(y, n, ctx, rope)
            if self.anchor:
                out = out - self.anchor * (y - n)
            x = x + (self.precond(out) if self.precond is not None else out)
        return x

    def observe(self, y, n, ctx, rope) -> None:
        """Pass what the last update step computes to the sub-block's own hook points (none here)."""


class CEMAttention(_EnergyBlock):
    """CEM attention sub-block: ``T`` steps on :func:`interaction_energy` (tied MHA;).

    Parameters: ``w_q``, ``w_k`` ``(H, d_h, d)`` ~ N(0, 1/d); step sizes ``eta_k > 0`` (``(H,)``, softplus or
    ``eta_max``·sigmoid of a raw parameter, init ``eta_init``); diagonal ``(d,)`` / ``(H, d)`` init 0.
    """

    def __init__(self, cfg: CEMStackConfig | Mapping[str, Any]):
        cfg = CEMStackConfig.coerce(cfg)
        super().__init__(cfg)
        d, H = cfg.d_model, cfg.n_heads
        dh = d // H
        self.eta_param, self.eta_max = cfg.eta_param, float(cfg.eta_max)
        self.w_q = nn.Parameter(torch.randn(H, dh, d) / math.sqrt(d))
        self.w_k = nn.Parameter(torch.randn(H, dh, d) / math.sqrt(d))
        self.eta_raw = nn.Parameter(torch.full((H,), _eta_raw_init(cfg)))
        diag = cfg.diagonal
        self.diag = (None if diag == "none" else
                     nn.Parameter(torch.zeros(d) if diag == "shared" else torch.zeros(H, d)))
        self.shared = diag == "shared"
        # per-head factors (H,) on eta, None in every ordinary run (geomlab.whatif.heads sets one for the
        # length of an ablation); the energy and its update are sums over heads weighted by eta
        self.head_scale: torch.Tensor | None = None
        e = "d_h + d" if diag == "per_head" else "d_h"
        self.hook_q = HookPoint(f"(B, H, J, {e}) queries of the last update step, beta folded in (RoPE applied)",
                                writable=False)
        self.hook_k = HookPoint(f"(B, H, J, {e}) keys of the last update step (RoPE applied)", writable=False)
        if self.shared:
            self.hook_q_shared = HookPoint("(B, J, d) shared-diagonal queries d * y, beta folded in", writable=False)
            self.hook_k_shared = HookPoint("(B, J, d) shared-diagonal keys n", writable=False)

    @property
    def eta(self) -> torch.Tensor:
        """Per-head step sizes, shape ``(H,)``, positive; times :attr:`head_scale` when one is set (a head
        whose scale is 0 is ablated: it adds nothing to the energy or the update)."""
        eta = _eta(self.eta_raw, self.eta_param, self.eta_max)
        return eta if self.head_scale is None else eta * self.head_scale

    def prepare(self, n, rope):
        k = _heads(n, self.w_k)
        return apply_rope(k, *rope) if rope is not None else k

    def energy(self, y, n, ctx, rope):
        return interaction_energy(y, n, self.w_q, self.w_k, self.eta, self.diag, rope)

    def update(self, y, n, ctx, rope):
        explicit = self.training and y.device.type == "cpu" and y.shape[1] <= _EXPLICIT_MAX_LEN
        return interaction_update(y, n, self.w_q, self.w_k, self.eta, self.diag, rope, keys=ctx,
                                  explicit=explicit)

    def observe(self, y, n, ctx, rope) -> None:
        """The attention of the last update step as queries and keys (scores ``q_i·k_j (+ q_shared_i·
        k_shared_j)``, ``beta`` folded into the queries), computed only for active hook points: the trace
        computes weight rows from them on demand."""
        hooks = [self.hook_q, self.hook_k] + ([self.hook_q_shared, self.hook_k_shared] if self.shared else [])
        if not any(hp.active for hp in hooks):
            return
        beta = self.w_q.shape[1] ** -0.5
        q, k, qs, ks = attention_vectors(y, n, self.w_q, self.w_k, self.diag, rope, ctx)
        self.hook_q(beta * q)
        self.hook_k(k)
        if self.shared:
            self.hook_q_shared(beta * qs)
            self.hook_k_shared(ks)


class CEMMLP(_EnergyBlock):
    """CEM MLP sub-block: ``T`` steps on :func:`mlp_energy` (tied SwiGLU;).

    Parameters: ``w`` (inside the nonlinearity, tied to the read-out) and ``v`` (gate), both ``(F, d)``
    ~ N(0, 1/d); one scalar step size ``eta > 0``.
    """

    def __init__(self, cfg: CEMStackConfig | Mapping[str, Any]):
        cfg = CEMStackConfig.coerce(cfg)
        super().__init__(cfg)
        d, f = cfg.d_model, cfg.d_ff
        self.kind = cfg.mlp_energy
        self.eta_param, self.eta_max = cfg.eta_param, float(cfg.eta_max)
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
    e0 = float(cfg.eta_init)
    if cfg.eta_param == "softplus":
        return _inv_softplus(e0)
    r = e0 / float(cfg.eta_max)
    return math.log(r / (1 - r))


def _eta(raw: torch.Tensor, param: str, eta_max: float) -> torch.Tensor:
    return F.softplus(raw) if param == "softplus" else eta_max * torch.sigmoid(raw)


class CEMStack(nn.Module):
    """``n_layers`` CEM blocks (attention sub-block then MLP sub-block) on ``(B, J, d)`` vectors.

    Uses ``recursion_steps`` in training mode and ``inference_recursion_steps`` (when not null) in eval mode
    (test-time recursion). ``forward(h)``: ``(B, J, d) -> (B, J, d)``.

    Hook points (l = 0..n_layers-1; sub-block 0 attention, 1 MLP; S recursion steps of the current mode):
    ``layers.l.0.hook_iterate`` / ``layers.l.1.hook_iterate`` ``(B, S+1, J, d)`` (the iterates, per step),
    ``layers.l.{0,1}.hook_energy`` and ``layers.l.{0,1}.hook_displacement`` ``(B, S+1, J)`` (read-only), and
    the attention of the last update step ``layers.l.0.hook_q`` / ``hook_k`` ``(B, H, J, e)`` (``e = d_h``,
    ``d_h + d`` with a per-head diagonal; ``beta`` folded into ``q``), with a shared diagonal also
    ``layers.l.0.hook_q_shared`` / ``hook_k_shared`` ``(B, J, d)`` (read-only).
    """

    def __init__(self, cfg: CEMStackConfig | Mapping[str, Any]):
        super().__init__()
        cfg = CEMStackConfig.coerce(cfg)
        self.cfg = cfg
        self.layers = nn.ModuleList(
            nn.ModuleList([CEMAttention(cfg), CEMMLP(cfg)]) for _ in range(cfg.n_layers))
        self._rope = RotaryTables(cfg.d_model // cfg.n_heads, cfg.rope_base)

    @property
    def steps(self) -> int:
        """The number of recursion steps used in the current mode."""
        t_inf = self.cfg.inference_recursion_steps
        return self.cfg.recursion_steps if self.training or t_inf is None else int(t_inf)

    def set_inference_steps(self, steps: int | None) -> int | None:
        """Use ``steps`` recursion steps in eval mode from now on (test-time recursion; ``None`` = the training
        ``recursion_steps``) and return the previous setting. Raises ``ValueError`` unless ``steps`` is
        ``None`` or a positive integer."""
        previous = self.cfg.inference_recursion_steps
        self.cfg = dataclasses.replace(self.cfg, inference_recursion_steps=steps)
        return previous

    def rope(self, J: int, dtype, device):
        return self._rope(J, dtype, device) if self.cfg.positional == "rope" else None

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        rope = self.rope(h.shape[1], h.dtype, h.device)
        T = self.steps
        for attn, mlp in self.layers:
            h = attn(h, T, rope)
            h = mlp(h, T, rope)
        return h
