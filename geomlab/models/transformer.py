"""The ``transformer`` baseline: a pre-norm GPT decoder with ALiBi positions (no positional embedding).

Source: the OSM paper's baseline ("Transformer (ALiBi)", Nunley 2026, notes ``osm.md`` §5.1) sized as in
notes §5.4: pre-LayerNorm blocks ``x + Attn(LN(x))``, ``x + MLP(LN(x))`` with a GELU MLP of width
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
from geomlab.models.base import SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase


@dataclass(frozen=True, kw_only=True)
class TransformerConfig(ConfigBase):
    """The ``transformer`` keys. Defaults give 106.3K parameters at V = 65, the ~104K budget of the OSM
    paper's baseline (notes §5.4)."""

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

    def forward(self, x: torch.Tensor, bias: torch.Tensor, rec: list | None) -> torch.Tensor:
        B, T, D = x.shape
        H = self.n_heads
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
                                           dropout_p=self.drop.p if self.training else 0.0)
        if rec is not None:  # queries (score scale folded in) and keys: the trace computes weight rows
            rec.append((q[0] / math.sqrt(D // H), k[0]))
        x = x + self.drop(self.out(y.transpose(1, 2).reshape(B, T, D)))
        return x + self.drop(self.proj(F.gelu(self.fc(self.ln2(x)))))


@register
class Transformer(SequenceModel):
    """Pre-norm GPT decoder with ALiBi (kind ``transformer``).

    Config: :class:`TransformerConfig`. ``forward(tokens (B, T) long) -> logits (B, T, V) float32``;
    ``record`` adds the attention queries and keys. Raises ``ValueError`` for an invalid config.
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
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        # GPT-2 style initialisation (design choice)
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def _run(self, tokens: torch.Tensor, rec: list | None) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        x = self.embed(tokens)
        bias = alibi_bias(self.slopes, tokens.shape[1]).to(x.dtype)
        for block in self.blocks:
            x = block(x, bias, rec)
        return self.head(self.ln_f(x))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._run(tokens, None)

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """``logits`` ``(T, V)``, ``attention_q`` / ``attention_k`` ``(layer, head, T, d_head)`` (scores
        ``q_i·k_j``, the ``1/sqrt(d_head)`` scale folded into ``q``) and ``attention_slopes`` ``(layer, head)``
        (ALiBi bias ``-m (i - j)``) for ``tokens`` of shape ``(1, T)``; ``geomlab.trace`` turns them into
        attention weights on demand (docs/architecture.md)."""
        if tokens.dim() != 2 or tokens.shape[0] != 1:
            raise ValueError(f"record expects tokens of shape (1, T), got {tuple(tokens.shape)}")
        rec: list[tuple[torch.Tensor, torch.Tensor]] = []
        logits = self._run(tokens, rec)[0]
        return {"logits": logits, "attention_q": torch.stack([q for q, _ in rec]),
                "attention_k": torch.stack([k for _, k in rec]),
                "attention_slopes": self.slopes.to(logits.dtype).expand(len(rec), -1).clone()}
