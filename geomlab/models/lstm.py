"""``lstm``: a character LSTM baseline (``torch.nn.LSTM``).

Input is one-hot (``embedding_dim = 0``, the default) or a learned embedding of ``embedding_dim``; then
``layers`` LSTM layers of width ``hidden``; then a linear head to ``vocab_size`` logits.

Parameter count (PyTorch counting, ``shared/papers/osm.md`` §5.4): one-hot input, one layer:
``4h(V + h) + 8h + hV + V`` (V = 65, h = 78 gives 50,375); with a 32-dim embedding, h = 88 gives 50,809.
:meth:`LSTMModel.config_for_budget` varies ``hidden``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models import register
from geomlab.models.base import SequenceModel
from geomlab.models.budget import search_width


@register
class LSTMModel(SequenceModel):
    """Character LSTM.

    Config keys: ``hidden`` (int, default 78), ``layers`` (int, default 1), ``embedding_dim`` (int, 0 =
    one-hot input; default 0), ``dropout`` (between layers, default 0.0).

    ``forward(tokens)``: ``tokens`` ``LongTensor`` ``(B, T)`` -> logits ``(B, T, vocab_size)`` float32;
    ``logits[:, t]`` predicts token ``t + 1``; each call starts from a zero state. Raises ``ValueError``
    for invalid config values. Source: design choice (standard LSTM baseline, osm.md §5.4 sizing).
    """

    kind = "lstm"

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        return {"hidden": 78, "layers": 1, "embedding_dim": 0, "dropout": 0.0}

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        v, h = int(config["vocab_size"]), int(config["hidden"])
        layers, emb = int(config["layers"]), int(config["embedding_dim"])
        dropout = float(config["dropout"])
        if v < 1 or h < 1 or layers < 1 or emb < 0 or not 0.0 <= dropout < 1.0:
            raise ValueError(f"invalid lstm config: vocab_size={v}, hidden={h}, layers={layers}, "
                             f"embedding_dim={emb}, dropout={dropout}")
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
