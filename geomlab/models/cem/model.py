"""The ``cem`` language model and the CEM regressor of the GP task, around a :class:`CEMStack`."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from geomlab.models import register
from geomlab.models.family import CEM
from geomlab.models.hooks import HookedModule, HookPoint, run_with_cache
from geomlab.models.base import LensStage, SequenceModel
from geomlab.models.budget import linear_width_search, search_width
from geomlab.models.cem.blocks import CEMStack
from geomlab.models.cem.config import CEMConfig, CEMStackConfig


@register
class CEMModel(SequenceModel):
    """``cem``: a character language model of CEM blocks.

    Embedding (std ``d^-0.5``, multiplied by ``sqrt(d)`` so the residual starts at RMS about 1),
    ``n_layers`` CEM blocks, final RMSNorm with gain, LM head tied to the embedding.

    Config: :class:`geomlab.models.cem.config.CEMConfig`. Raises ``ValueError`` for an invalid value.

    Hook points (``model.hook_points()``): ``hook_embed`` ``(B, T, d)`` and those of the stack under
    ``stack.`` (:class:`geomlab.models.cem.blocks.CEMStack`): ``stack.layers.l.{0,1}.hook_iterate``
    ``(B, S+1, T, d)``, ``.hook_energy`` / ``.hook_displacement`` ``(B, S+1, T)`` and
    ``stack.layers.l.0.hook_q`` / ``hook_k`` ``(B, H, T, e)`` (+ ``_shared`` ``(B, T, d)``).
    """

    kind = "cem"
    family = CEM
    attention = True
    config_class = CEMConfig

    def __init__(self, config: CEMConfig | dict[str, Any]):
        super().__init__(config)
        cfg = self.cfg
        d = cfg.d_model
        self.stack = CEMStack(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.norm_f = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.hook_embed = HookPoint("(B, T, d) scaled token embedding: the input of the first CEM block")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(B, T)`` long -> logits ``(B, T, V)``."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        h = self.hook_embed(self.embed(tokens) * math.sqrt(self.cfg.d_model))
        h = self.stack(h)
        return self.norm_f(h) @ self.embed.weight.T

    def lens_stages(self) -> list[LensStage]:
        """The scaled embedding (stage 0) and the iterate after each recursion step ``t = 1..S`` of each
        sub-block (attention, then MLP, layer by layer; ``S`` the current mode's recursion count), through
        ``norm_f`` and the tied head. An iterate's step 0 is the previous sub-block's output, so it is not
        repeated."""
        def readout(h: torch.Tensor) -> torch.Tensor:
            return self.norm_f(h) @ self.embed.weight.T
        S = self.stack.steps
        stages = [LensStage("embedding", "hook_embed", readout)]
        for l in range(len(self.stack.layers)):
            for b, name in ((0, "attn"), (1, "mlp")):
                stages += [LensStage(f"L{l} {name} t={t}", f"stack.layers.{l}.{b}.hook_iterate", readout, step=t)
                           for t in range(1, S + 1)]
        return stages

    def record_hooks(self) -> list[str]:
        """Energies, displacements and the attention of the last step (:func:`_record_hooks`)."""
        return _record_hooks(self.stack, "stack.")

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """Energies of every iterate for sequence ``b``: ``logits`` ``(T, V)`` (the same computation as
        ``forward``), ``energies`` and ``displacement`` ``[layer, block, step, position]`` (block 0 attention,
        1 MLP; step 0..T where T is the recursion count of the current train/eval mode) and the attention of the
        last update step as ``attention_q`` / ``attention_k`` ``[layer, head, position, e]`` (scores
        ``q_i·k_j``, ``beta`` folded in) plus, with a shared diagonal, ``attention_q_shared`` /
        ``attention_k_shared`` ``[layer, position, d]`` (added to every head's score); ``geomlab.trace`` turns
        them into weights."""
        return _pack_record(self.stack, "stack.", cache, logits[b], b)

    def set_inference_steps(self, steps: int | None) -> int | None:
        """Test-time recursion: ``steps`` recursion steps in eval mode from now on (``None`` = the training
        ``recursion_steps``), also in ``cfg`` and ``config``; returns the previous setting (used by
        :func:`geomlab.trace.trace_cem_steps`). Raises ``ValueError`` for an invalid ``steps``."""
        previous = self.stack.set_inference_steps(steps)
        self.cfg = self.stack.cfg
        self.config = self.cfg.to_dict()
        return previous

    @torch.no_grad()
    def diagnostics(self) -> dict[str, torch.Tensor]:
        """Monitoring values of: ``eta_attention`` ``[layer, head]``, ``eta_mlp`` ``[layer]``,
        ``diag_norm`` ``[layer]`` (Frobenius norm of the diagonal, 0 when off) and ``precond_min_eig``
        ``[layer, block]`` (``lambda_min(P)``; 1 when there is no preconditioner, i.e. ``P = I``)."""
        return _diagnostics(self.stack)

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Parameter matching as in: the same ``d_model``/``n_layers``/``n_heads`` as the ``llama``
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


def _record_hooks(stack: CEMStack, prefix: str) -> list[str]:
    """The hook points a CEM record reads under ``prefix``: every sub-block's energies and displacements, every
    attention sub-block's queries and keys (and shared ones)."""
    names = []
    for l, (attn, _) in enumerate(stack.layers):
        for blk in (0, 1):
            names += [f"{prefix}layers.{l}.{blk}.hook_energy", f"{prefix}layers.{l}.{blk}.hook_displacement"]
        names += [f"{prefix}layers.{l}.0.hook_{w}" for w in (("q", "k", "q_shared", "k_shared") if attn.shared
                                                              else ("q", "k"))]
    return names


def _pack_record(stack: CEMStack, prefix: str, cache: dict, logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
    """The record of sequence ``b`` from the cache of :func:`_record_hooks` (``logits`` already sequence b's)."""
    L = len(stack.layers)

    def per_block(what):
        return torch.stack([torch.stack([cache[f"{prefix}layers.{l}.{blk}.hook_{what}"][b] for blk in (0, 1)])
                            for l in range(L)])

    out = {"logits": logits, "energies": per_block("energy"), "displacement": per_block("displacement")}
    keys = ("q", "k") + (("q_shared", "k_shared") if stack.layers[0][0].shared else ())
    for key in keys:
        out[f"attention_{key}"] = torch.stack([cache[f"{prefix}layers.{l}.0.hook_{key}"][b] for l in range(L)])
    return out


#: The regressor's defaults where they differ from a stack's (a smaller stack; its inputs carry their own
#: coordinates, so no RoPE).
_REGRESSOR_DEFAULTS = {"d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "positional": "none"}


class CEMRegressor(HookedModule, nn.Module):
    """A CEM stack on continuous inputs with a scalar read-out (the GP task; design choice).

    ``forward(x)``: ``x`` ``(B, J, in_features)`` float -> ``(B, J)`` predictions. Input map
    ``Linear(in_features, d_model)``, the CEM stack (:class:`geomlab.models.cem.config.CEMStackConfig`; default
    ``positional='none'`` since the inputs carry their own coordinates), final RMSNorm, ``Linear(d_model, 1)``.
    ``record(x)`` returns ``prediction`` ``(J,)``, ``energies``/``displacement`` ``[layer, block, step, position]``
    and ``attention`` for ``x`` of shape ``(1, J, in_features)``.
    """

    def __init__(self, config: dict[str, Any], in_features: int = 3):
        super().__init__()
        cfg = CEMStackConfig.from_dict({**_REGRESSOR_DEFAULTS, **config})
        self.cfg, self.config = cfg, cfg.to_dict()
        self.inp = nn.Linear(in_features, cfg.d_model)
        self.stack = CEMStack(cfg)
        self.norm_f = nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
        self.out = nn.Linear(cfg.d_model, 1)

    def set_inference_steps(self, steps: int | None) -> int | None:
        """As :meth:`CEMModel.set_inference_steps`."""
        previous = self.stack.set_inference_steps(steps)
        self.cfg = self.stack.cfg
        self.config = self.cfg.to_dict()
        return previous

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[-1] != self.inp.in_features:
            raise ValueError(f"inputs must have shape (B, J, {self.inp.in_features}), got {tuple(x.shape)}")
        h = self.stack(self.inp(x))
        return self.out(self.norm_f(h)).squeeze(-1)

    @torch.no_grad()
    def record(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Like :meth:`CEMModel.record_from_cache`, with ``prediction`` ``(J,)`` in place of ``logits``, read
        from the stack's hook points (``stack.``)."""
        if x.dim() != 3 or x.shape[0] != 1:
            raise ValueError(f"record expects inputs of shape (1, J, F), got {tuple(x.shape)}")
        pred, cache = run_with_cache(self, x, _record_hooks(self.stack, "stack."))
        out = _pack_record(self.stack, "stack.", cache, pred.unsqueeze(-1)[0], 0)
        out["prediction"] = out.pop("logits")[:, 0]
        return out
