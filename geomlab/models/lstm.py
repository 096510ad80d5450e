"""``lstm``: a character LSTM baseline (``torch.nn.LSTM``).

Input is one-hot (``embedding_dim = 0``, the default) or a learned embedding of ``embedding_dim``; then
``layers`` LSTM layers of width ``hidden``; then a linear head to ``vocab_size`` logits. ``dropout`` acts on the
non-recurrent connections (Zaremba et al., arXiv 1409.2329): the first layer's input, between layers and the
last layer's output before the head, so it regularises a single-layer LSTM too.

Parameter count (PyTorch counting, Nunley, arXiv 2602.18417): one-hot input, one layer:
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
from geomlab.models.base import LensStage, SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase
from geomlab.models.hooks import HookPoint, any_active


@dataclass(frozen=True, kw_only=True)
class LSTMConfig(ConfigBase):
    """The ``lstm`` keys (defaults: 50,375 parameters at V = 65)."""

    kind = "lstm"
    vocab_size: int         # V, tokens in the vocabulary
    hidden: int = 78        # LSTM width h
    layers: int = 1         # stacked LSTM layers
    embedding_dim: int = 0  # learned input embedding width; 0 = one-hot input
    dropout: float = 0.0    # dropout on the input, between layers and before the head, in [0, 1)

    def validate(self) -> None:
        self.positive("vocab_size", "hidden", "layers")
        if self.embedding_dim < 0:
            self.fail(f"embedding_dim must be >= 0, got {self.embedding_dim!r}")
        self.fraction("dropout")


class _LayerHooks(nn.Module):
    """The hook points of one LSTM layer (no parameters)."""

    def __init__(self):
        super().__init__()
        self.hook_c = HookPoint("(B, T, hidden) cell state c_t after token t", per_step=True)
        self.hook_h = HookPoint("(B, T, hidden) hidden state h_t after token t", per_step=True)


@register
class LSTMModel(SequenceModel):
    """Character LSTM.

    Config: :class:`LSTMConfig`.

    ``forward(tokens)``: ``tokens`` ``LongTensor`` ``(B, T)`` -> logits ``(B, T, vocab_size)`` float32;
    ``logits[:, t]`` predicts token ``t + 1``; each call starts from a zero state. Raises ``ValueError``
    for invalid config values. Source: design choice (standard LSTM baseline, Nunley, arXiv 2602.18417 sizing).

    Hook points (``model.hook_points()``; l = 0..layers-1): ``hook_input`` ``(B, T, input)`` (one-hot or
    embedded tokens); ``layers.l.hook_c`` and ``layers.l.hook_h`` ``(B, T, hidden)``, per step: the cell and
    hidden state after token t (``h_t = o_t tanh(c_t)`` is computed from the hooked ``c_t``; the hooked
    ``h_t`` feeds step t + 1, the next layer and the head). While a hook on a layer's states is active the
    recurrence runs step by step (:meth:`_steps`: the same mathematics as ``torch.nn.LSTM``, equal to float
    rounding); otherwise the fused ``nn.LSTM`` runs.
    """

    kind = "lstm"
    family = RECURRENT
    recurrent = True
    hooks_change_arithmetic = True
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
        self.dropout = dropout
        self.head = nn.Linear(h, v)
        self.hook_input = HookPoint("(B, T, input) one-hot or embedded tokens, the input of layer 0")
        self.layers = nn.ModuleList(_LayerHooks() for _ in range(layers))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if self.embedding is not None:
            x = self.embedding(tokens)
        else:
            x = F.one_hot(tokens, self.vocab_size).to(self.head.weight.dtype)
        x = F.dropout(self.hook_input(x), self.dropout, self.training)
        out = self._steps(x) if any_active(self.layers) else self.lstm(x)[0]
        # contiguous: the fused output's strides would order dropout's draws otherwise than the stepped path's
        return self.head(F.dropout(out.contiguous(), self.dropout, self.training))

    def lens_stages(self) -> list[LensStage]:
        """Each layer's hidden states ``h`` through the head (every layer has the head's width ``hidden``;
        the input is left out: its width is the vocabulary's or the embedding's)."""
        return [LensStage(f"layer {l}", f"layers.{l}.hook_h", self.head) for l in range(len(self.layers))]

    def _steps(self, x: torch.Tensor) -> torch.Tensor:
        """The stacked LSTM one step at a time through the state hook points: ``x`` ``(B, T, input)`` ->
        top-layer hidden states ``(B, T, hidden)``. Gates ``i, f, g, o`` in ``torch.nn.LSTM``'s order and
        formulas; dropout between layers as there. Source: Hochreiter & Schmidhuber (1997), PyTorch's LSTM."""
        lstm = self.lstm
        B, T, _ = x.shape
        for l, hooks in enumerate(self.layers):
            if l:
                x = F.dropout(x, lstm.dropout, self.training)
            xw = F.linear(x, getattr(lstm, f"weight_ih_l{l}"), getattr(lstm, f"bias_ih_l{l}"))
            w_hh, b_hh = getattr(lstm, f"weight_hh_l{l}"), getattr(lstm, f"bias_hh_l{l}")
            h = c = x.new_zeros(B, lstm.hidden_size)
            out = []
            for t in range(T):
                i, f, g, o = (xw[:, t] + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
                c = hooks.hook_c(torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g))
                h = hooks.hook_h(torch.sigmoid(o) * torch.tanh(c))
                out.append(h)
            x = torch.stack(out, dim=1)
        return x

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Config with ``hidden`` chosen so the parameter count is nearest ``n_params`` (within 5%);
        ``layers``/``embedding_dim``/``dropout`` from ``fixed`` or the defaults; a ``hidden`` in ``fixed`` is
        kept, as every kind keeps its fixed keys. ``ValueError`` if impossible (with a fixed ``hidden``: when
        that width misses the budget by more than 5%)."""
        fixed = dict(fixed)
        hidden = fixed.pop("hidden", None)

        def make(h: int) -> dict[str, Any]:
            return {"kind": cls.kind, **fixed, "hidden": h}

        if hidden is not None:
            try:
                return search_width(make, [int(hidden)], n_params, vocab_size)
            except ValueError as exc:
                raise ValueError(f"lstm: hidden={hidden} is fixed and {exc}; leave hidden out to let the budget "
                                 "choose it, or leave the budget out to keep it") from None

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
