"""The ``transformer`` baseline: a pre-norm GPT decoder with ALiBi positions (no positional embedding).

Source: the OSM paper's baseline ("Transformer (ALiBi)", Nunley, arXiv 2602.18417) sized to the paper's
parameter counts: pre-LayerNorm blocks ``x + Attn(LN(x))``, ``x + MLP(LN(x))`` with a GELU MLP of width
``mlp_ratio * d_model``, a final LayerNorm and an untied linear head. ALiBi (Press et al. 2022) adds
``-m_h (i - j)`` to the attention scores of head ``h`` with the standard geometric slopes
``m_h = 2^(-8 (h + 1) / H)``. Parameter count (PyTorch ``numel``, V = vocabulary, D = ``d_model``,
L = ``n_layers``, ratio 4): ``L (12 D^2 + 13 D) + 2 V D + V + 2 D``.
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
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase
from geomlab.models.hooks import HookPoint
from geomlab.models.layers import attend


@dataclass(frozen=True, kw_only=True)
class TransformerConfig(ConfigBase):
    """The ``transformer`` keys. Defaults give 106.3K parameters at V = 65, the ~104K budget of the OSM
    paper's baseline."""

    kind = "transformer"
    vocab_size: int       # V, tokens in the vocabulary
    d_model: int = 52     # width D, divisible by n_heads
    n_layers: int = 3     # decoder blocks L
    n_heads: int = 4      # attention heads H
    mlp_ratio: int = 4    # MLP width / D
    dropout: float = 0.0  # dropout probability in [0, 1)

    def validate(self) -> None:
        self.positive("vocab_size", "d_model", "n_layers", "n_heads", "mlp_ratio")
        if self.d_model % self.n_heads:
            self.fail(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        self.fraction("dropout")


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """The standard ALiBi slopes ``2^(-8 (h+1) / H)`` for ``h = 0..H-1``, float32 shape ``(H,)``.

    Source: Press, Smith & Lewis, "Train Short, Test Long" (2022), §3 (geometric sequence starting at
    ``2^(-8/H)``). Raises ``ValueError`` for ``n_heads < 1``.
    """
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)])


def alibi_bias(slopes: torch.Tensor, T: int) -> torch.Tensor:
    """Additive causal ALiBi mask of shape ``(H, T, T)``: ``-m_h (i - j)`` for ``j <= i``, ``-inf`` above
    the diagonal. ``slopes`` float shape ``(H,)`` (design choice: the bias is on the score logits)."""
    pos = torch.arange(T, device=slopes.device)
    rel = (pos[:, None] - pos[None, :]).to(slopes.dtype)  # i - j
    bias = -slopes[:, None, None] * rel
    return bias.masked_fill(rel < 0, float("-inf"))


class _Block(nn.Module):
    """One pre-norm block, ``(B, T, D) -> (B, T, D)``, with its hook points (the module docstring)."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, mlp_ratio * d_model)
        self.proj = nn.Linear(mlp_ratio * d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.hook_q = HookPoint("(B, H, T, d_head) attention queries (unscaled)")
        self.hook_k = HookPoint("(B, H, T, d_head) attention keys")
        self.hook_pattern = HookPoint("(B, H, T, T) attention weights (formed only while a hook is attached)")
        self.hook_z = HookPoint("(B, H, T, d_head) per-head attention outputs, before the output projection")
        self.hook_resid_mid = HookPoint("(B, T, D) residual stream after the attention")
        self.hook_resid_post = HookPoint("(B, T, D) residual stream after the block")

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        H = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = self.hook_q(q), self.hook_k(k)
        y = attend(q, k, v, self.hook_pattern, self.hook_z, attn_mask=bias,
                   dropout_p=self.drop.p if self.training else 0.0)
        x = self.hook_resid_mid(x + self.drop(self.out(y.transpose(1, 2).reshape(B, T, D))))
        return self.hook_resid_post(x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x))))))


@register
class Transformer(SequenceModel):
    """Pre-norm GPT decoder with ALiBi (kind ``transformer``).

    Config: :class:`TransformerConfig`. ``forward(tokens (B, T) long) -> logits (B, T, V) float32``;
    ``record`` adds the attention queries and keys. Raises ``ValueError`` for an invalid config.

    Hook points (``model.hook_points()``; l = 0..n_layers-1, H heads of width d_head = D / H):
    ``hook_embed`` ``(B, T, D)`` (the token embedding, the residual stream into block 0);
    ``blocks.l.hook_q`` / ``blocks.l.hook_k`` ``(B, H, T, d_head)`` (queries unscaled);
    ``blocks.l.hook_pattern`` ``(B, H, T, T)`` (the attention weights, formed only for an active hook);
    ``blocks.l.hook_z`` ``(B, H, T, d_head)`` (per-head outputs before the output projection);
    ``blocks.l.hook_resid_mid`` ``(B, T, D)`` (after the attention); ``blocks.l.hook_resid_post``
    ``(B, T, D)`` (after the block).
    """

    kind = "transformer"
    family = TRANSFORMER
    attention = True
    config_class = TransformerConfig

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d_model`` (multiples of ``n_heads``) at fixed depth to meet the budget (±5%). When no width
        fits with the default 4 heads (widths step by 4, so some budgets fall between two widths: e.g. 100K at
        V = 65 lies between d_model 48 and 52), 2 and then 1 head are tried, unless ``n_heads`` is fixed
        (design choice). Raises ``ValueError`` with the closest miss."""
        base = {**cls.default_config(), **fixed, "kind": cls.kind}
        heads = [int(base["n_heads"])] + ([] if "n_heads" in fixed else [h for h in (2, 1) if h != base["n_heads"]])
        first_error = None
        for h in heads:
            cfg = {**base, "n_heads": h}
            widths = [fixed["d_model"]] if "d_model" in fixed else range(h, 1025, h)
            try:
                return search_width(lambda w, cfg=cfg: {**cfg, "d_model": w}, widths, n_params, vocab_size,
                                    monotone=True)
            except ValueError as exc:
                first_error = first_error or exc
        raise first_error

    def __init__(self, config: TransformerConfig | dict[str, Any]):
        super().__init__(config)
        c = self.cfg
        V, D, L, H, ratio, dropout = (int(c.vocab_size), int(c.d_model), int(c.n_layers), int(c.n_heads),
                                      int(c.mlp_ratio), float(c.dropout))
        self.embed = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(_Block(D, H, ratio, dropout) for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)
        self.register_buffer("slopes", alibi_slopes(H), persistent=False)
        self.hook_embed = HookPoint("(B, T, D) token embedding: the residual stream into block 0")
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        # GPT-2 style initialisation (design choice)
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        x = self.hook_embed(self.embed(tokens))
        bias = alibi_bias(self.slopes, tokens.shape[1]).to(x.dtype)
        for block in self.blocks:
            x = block(x, bias)
        return self.head(self.ln_f(x))

    def lens_stages(self) -> list[LensStage]:
        """The embedding (stage 0) and the residual stream after each block, through ``ln_f`` and the head."""
        def readout(x: torch.Tensor) -> torch.Tensor:
            return self.head(self.ln_f(x))
        return [LensStage("embedding", "hook_embed", readout)] + [
            LensStage(f"block {l}", f"blocks.{l}.hook_resid_post", readout) for l in range(len(self.blocks))]

    def record_hooks(self) -> list[str]:
        """The queries and keys of every block."""
        return [f"blocks.{l}.hook_{a}" for l in range(len(self.blocks)) for a in "qk"]

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """``logits`` ``(T, V)``, ``attention_q`` / ``attention_k`` ``(layer, head, T, d_head)`` (scores
        ``q_i·k_j``, the ``1/sqrt(d_head)`` scale folded into ``q``) and ``attention_slopes`` ``(layer, head)``
        (ALiBi bias ``-m (i - j)``) of sequence ``b``; ``geomlab.trace`` turns them into attention weights on
        demand."""
        L = len(self.blocks)
        d_head = self.blocks[0].qkv.in_features // self.blocks[0].n_heads
        q = torch.stack([cache[f"blocks.{l}.hook_q"][b] / math.sqrt(d_head) for l in range(L)])
        return {"logits": logits[b], "attention_q": q,
                "attention_k": torch.stack([cache[f"blocks.{l}.hook_k"][b] for l in range(L)]),
                "attention_slopes": self.slopes.to(logits.dtype).expand(L, -1).clone()}
