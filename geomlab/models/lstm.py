"""``lstm``: a character LSTM baseline (``torch.nn.LSTM``).

Input is one-hot (``embedding_dim = 0``, the default) or a learned embedding of ``embedding_dim``; then
``layers`` LSTM layers of width ``hidden``; then a linear head to ``vocab_size`` logits.

Parameter count (PyTorch counting, ``shared/papers/osm.md`` §5.4): one-hot input, one layer:
``4h(V + h) + 8h + hV + V`` (V = 65, h = 78 gives 50,375); with a 32-dim embedding, h = 88 gives 50,809.
:meth:`LSTMModel.config_for_budget` varies ``hidden``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models import register
from geomlab.models.family import RECURRENT
from geomlab.models.base import SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase


@dataclass(frozen=True, kw_only=True)
class LSTMConfig(ConfigBase):
    """The ``lstm`` keys (defaults: 50,375 parameters at V = 65)."""

    kind = "lstm"
    vocab_size: int         # V, tokens in the vocabulary
    hidden: int = 78        # LSTM width h
    layers: int = 1         # stacked LSTM layers
    embedding_dim: int = 0  # learned input embedding width; 0 = one-hot input
    dropout: float = 0.0    # dropout between layers, in [0, 1)

    def validate(self) -> None:
        self.positive("vocab_size", "hidden", "layers")
        if self.embedding_dim < 0:
            self.fail(f"embedding_dim must be >= 0, got {self.embedding_dim!r}")
        self.fraction("dropout")


@register
class LSTMModel(SequenceModel):
    """Character LSTM.

    Config: :class:`LSTMConfig`.

    ``forward(tokens)``: ``tokens`` ``LongTensor`` ``(B, T)`` -> logits ``(B, T, vocab_size)`` float32;
    ``logits[:, t]`` predicts token ``t + 1``; each call starts from a zero state. Raises ``ValueError``
    for invalid config values. Source: design choice (standard LSTM baseline, osm.md §5.4 sizing).
    """

    kind = "lstm"
    family = RECURRENT
    recurrent = True
    config_class = LSTMConfig

    def __init__(self, config: LSTMConfig | dict[str, Any]):
        super().__init__(config)
        c = self.cfg
        v, h, layers, emb, dropout = (int(c.vocab_size), int(c.hidden), int(c.layers), int(c.embedding_dim),
                                      float(c.dropout))
        self.vocab_size = v
        self.embedding = nn.Embedding(v, emb) if emb > 0 else None
        self.lstm = nn.LSTM(emb if emb > 0 else v, h, num_layers=layers, batch_first=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.head = nn.Linear(h, v)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if self.embedding is not None:
            x = self.embedding(tokens)
        else:
            x = F.one_hot(tokens, self.vocab_size).to(self.head.weight.dtype)
        out, _ = self.lstm(x)
        return self.head(out)

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Config with ``hidden`` chosen so the parameter count is nearest ``n_params`` (within 5%);
        ``layers``/``embedding_dim``/``dropout`` from ``fixed`` or the defaults. ``ValueError`` if
        impossible."""
        fixed = {k: v for k, v in fixed.items() if k != "hidden"}

        def make(h: int) -> dict[str, Any]:
            return {"kind": cls.kind, **fixed, "hidden": h}

        def count(h: int) -> int:
            cfg = {**cls.default_config(), **make(h), "vocab_size": vocab_size}
            return sum(p.numel() for p in cls(cfg).parameters())

        lo, hi = 1, 4096  # the count grows with hidden: bisect, then let search_width pick the nearest
        while lo < hi:
            mid = (lo + hi) // 2
            if count(mid) < n_params:
                lo = mid + 1
            else:
                hi = mid
        return search_width(make, range(max(1, lo - 1), lo + 2), n_params, vocab_size)
