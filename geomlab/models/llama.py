"""``llama``: the matched baseline of the CEM paper (pre-norm RMSNorm, RoPE, SwiGLU, untied Q/K/V/O).

Source: Touvron et al. (Llama) as used by the CEM paper's baselines (Xu et al., arXiv 2605.07588);
the tiny-scale settings (embedding std ``d^-0.5`` times ``sqrt(d)``, tied LM head after a final RMSNorm,
RoPE base 1e4) follow so that ``llama`` and ``cem`` differ only in their layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models import register
from geomlab.models.family import TRANSFORMER
from geomlab.models.base import LensStage, SequenceModel
from geomlab.models.budget import linear_width_search, search_width
from geomlab.models.config import ConfigBase
from geomlab.models.hooks import HookPoint
from geomlab.models.layers import RotaryTables, apply_rope, attend

__all__ = ["LlamaConfig", "LlamaModel", "LlamaBlock"]


@dataclass(frozen=True, kw_only=True)
class LlamaConfig(ConfigBase):
    """The ``llama`` keys."""

    kind = "llama"
    vocab_size: int           # V, tokens in the vocabulary
    d_model: int = 64         # width d; d / n_heads must be even (RoPE)
    n_layers: int = 4         # blocks
    n_heads: int = 4          # attention heads
    d_ff: int = 172           # SwiGLU width (8d/3 rounded to a multiple of 4: default_d_ff)
    rope_base: float = 10000.0  # RoPE base
    norm_eps: float = 1e-6    # RMSNorm epsilon

    def validate(self) -> None:
        self.positive("vocab_size", "d_model", "n_layers", "n_heads", "d_ff")
        d, H = self.d_model, self.n_heads
        if d % H or (d // H) % 2:
            self.fail(f"d_model={d} must split into n_heads={H} heads of even width (RoPE)")


def default_d_ff(d_model: int) -> int:
    """Llama's SwiGLU width ``8d/3`` rounded to a multiple of 4 (172 for d = 64; design choice)."""
    return max(4, int(round(8 * d_model / 3 / 4)) * 4)


class LlamaBlock(nn.Module):
    """``h + Attn(RMSNorm(h))`` then ``h + SwiGLU(RMSNorm(h))``; ``(B, J, d) -> (B, J, d)``.

    Input projections ~ N(0, 1/d); output projections ~ N(0, 1/(fan_in · 2 n_layers)) (design choice).
    """

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        d, H, f = cfg.d_model, cfg.n_heads, cfg.d_ff
        self.H, self.dh = H, d // H
        self.norm1 = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.norm2 = nn.RMSNorm(d, eps=cfg.norm_eps)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, f, bias=False)
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)
        out_scale = 1.0 / math.sqrt(2 * cfg.n_layers)
        for lin in (self.qkv, self.gate, self.up):
            nn.init.normal_(lin.weight, std=d ** -0.5)
        nn.init.normal_(self.o.weight, std=out_scale * d ** -0.5)
        nn.init.normal_(self.down.weight, std=out_scale * f ** -0.5)
        self.hook_q = HookPoint("(B, H, T, d_head) attention queries, RoPE applied (unscaled)")
        self.hook_k = HookPoint("(B, H, T, d_head) attention keys, RoPE applied")
        self.hook_pattern = HookPoint("(B, H, T, T) attention weights (formed only while a hook is attached)")
        self.hook_z = HookPoint("(B, H, T, d_head) per-head attention outputs, before the output projection")
        self.hook_resid_mid = HookPoint("(B, T, d) residual stream after the attention")
        self.hook_resid_post = HookPoint("(B, T, d) residual stream after the block")

    def forward(self, h: torch.Tensor, rope) -> torch.Tensor:
        B, J, d = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(B, J, 3, self.H, self.dh).permute(2, 0, 3, 1, 4)
        q, k = self.hook_q(apply_rope(q, *rope)), self.hook_k(apply_rope(k, *rope))
        o = attend(q, k, v, self.hook_pattern, self.hook_z)
        h = self.hook_resid_mid(h + self.o(o.transpose(1, 2).reshape(B, J, d)))
        z = self.norm2(h)
        return self.hook_resid_post(h + self.down(F.silu(self.gate(z)) * self.up(z)))


@register
class LlamaModel(SequenceModel):
    """``llama``: Llama-style character LM (the CEM paper's baseline).

    Config: :class:`LlamaConfig`. ``model(tokens)``: ``(B, T)`` long -> logits ``(B, T, V)``; ``record`` adds the
    attention queries and keys. Raises ``ValueError`` for an invalid config.

    Hook points (``model.hook_points()``; l = 0..n_layers-1, H heads of width d_head = d / H):
    ``hook_embed`` ``(B, T, d)`` (the scaled embedding, the residual stream into block 0);
    ``blocks.l.hook_q`` / ``blocks.l.hook_k`` ``(B, H, T, d_head)`` (RoPE applied, queries unscaled);
    ``blocks.l.hook_pattern`` ``(B, H, T, T)`` (the attention weights, formed only for an active hook);
    ``blocks.l.hook_z`` ``(B, H, T, d_head)`` (per-head outputs before the output projection);
    ``blocks.l.hook_resid_mid`` ``(B, T, d)`` (after the attention); ``blocks.l.hook_resid_post``
    ``(B, T, d)`` (after the block).
    """

    kind = "llama"
    family = TRANSFORMER
    attention = True
    config_class = LlamaConfig

    def __init__(self, config: LlamaConfig | dict[str, Any]):
        super().__init__(config)
        cfg = self.cfg
        d, H = cfg.d_model, cfg.n_heads
        self.embed = nn.Embedding(cfg.vocab_size, d)
        nn.init.normal_(self.embed.weight, std=d ** -0.5)
        self.blocks = nn.ModuleList(LlamaBlock(cfg) for _ in range(cfg.n_layers))
        self.norm_f = nn.RMSNorm(d, eps=cfg.norm_eps)
        self._rope = RotaryTables(d // H, cfg.rope_base)
        self.hook_embed = HookPoint("(B, T, d) scaled token embedding: the residual stream into block 0")

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        h = self.hook_embed(self.embed(tokens) * math.sqrt(self.cfg.d_model))
        rope = self._rope(tokens.shape[1], h.dtype, h.device)
        for block in self.blocks:
            h = block(h, rope)
        return self.norm_f(h) @ self.embed.weight.T

    def lens_stages(self) -> list[LensStage]:
        """The scaled embedding (stage 0) and the residual stream after each block, through ``norm_f`` and
        the tied head."""
        def readout(h: torch.Tensor) -> torch.Tensor:
            return self.norm_f(h) @ self.embed.weight.T
        return [LensStage("embedding", "hook_embed", readout)] + [
            LensStage(f"block {l}", f"blocks.{l}.hook_resid_post", readout) for l in range(len(self.blocks))]

    def record_hooks(self) -> list[str]:
        """The queries and keys of every block."""
        return [f"blocks.{l}.hook_{a}" for l in range(len(self.blocks)) for a in "qk"]

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """``logits`` ``(T, V)`` and ``attention_q`` / ``attention_k`` ``[layer, head, position, d_head]``
        (RoPE applied, ``1/sqrt(d_head)`` folded into ``q``) of sequence ``b``; ``geomlab.trace`` turns them
        into attention weights on demand."""
        L = len(self.blocks)
        scale = self.blocks[0].dh ** -0.5
        return {"logits": logits[b],
                "attention_q": torch.stack([cache[f"blocks.{l}.hook_q"][b] * scale for l in range(L)]),
                "attention_k": torch.stack([cache[f"blocks.{l}.hook_k"][b] for l in range(L)])}

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Notes: ``n_layers = 4``, ``n_heads = 4`` (unless fixed); ``d_model`` the multiple of
        ``2 n_heads`` whose default-width model (``d_ff = 8d/3``) is nearest the budget; then ``d_ff`` is
        tuned to land within 5% (unless fixed). Raises ``ValueError`` when unreachable."""
        L = fixed.get("n_layers", LlamaConfig.defaults()["n_layers"])
        H = fixed.get("n_heads", LlamaConfig.defaults()["n_heads"])
        base = {"kind": cls.kind, **fixed, "n_layers": L, "n_heads": H}
        if "d_model" in fixed:
            d = fixed["d_model"]
        else:
            # count ~ L (4 d^2 + 3 d d_ff) + V d: solve the quadratic for a first guess, then search nearby
            a = L * (4 + 3 * 8 / 3)
            d0 = (-vocab_size + math.sqrt(vocab_size ** 2 + 4 * a * n_params)) / (2 * a)
            step = 2 * H
            centre = max(1, round(d0 / step))
            widths = [m * step for m in range(max(1, centre - 3), centre + 4)]
            d = search_width(lambda w: {**base, "d_model": w, "d_ff": fixed.get("d_ff", default_d_ff(w))},
                              widths, n_params, vocab_size, tol=1.0)["d_model"]
        if "d_ff" in fixed:
            return search_width(lambda _: {**base, "d_model": d}, [0], n_params, vocab_size)
        return linear_width_search(lambda f: {**base, "d_model": d, "d_ff": f}, n_params, vocab_size)
