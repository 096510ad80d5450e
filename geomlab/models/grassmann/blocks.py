"""One block of either Grassmann-family kind in its configured layout (Zhang, arXiv 2512.19428; the layouts are
described in :mod:`geomlab.models.grassmann`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models.hooks import HookPoint


class PlaneBlock(nn.Module):
    """One block in the configured layout (package docstring of :mod:`geomlab.models.grassmann`); ``mixer`` is
    a GrassmannMixer or attention."""

    def __init__(self, mixer: nn.Module, d_model: int, d_ff: int, layout: str, dropout: float, attn: bool):
        super().__init__()
        self.mixer, self.layout, self.attn = mixer, layout, attn
        self.ln1 = nn.LayerNorm(d_model)
        self.ln_in = nn.LayerNorm(d_model) if (layout == "pre_norm" and not attn) else None
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.hook_resid_pre = HookPoint("(B, T, d_model) block input (the residual stream)")
        self.hook_resid_post = HookPoint("(B, T, d_model) block output")

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.ff2(F.gelu(self.ff1(x))))

    def _mix_post(self, x, mix):
        if self.layout == "post_norm_residual" or self.attn:
            return x + self.drop(mix(x))
        return self.drop(mix(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        if self.layout == "pre_norm":
            y = self.mixer(self.ln1(x))
            x = x + self.drop(self.ln_in(y) if self.ln_in is not None else y)
            return self.hook_resid_post(x + self.ffn(self.ln2(x)))
        v = self.ln1(self._mix_post(x, self.mixer))
        return self.hook_resid_post(self.ln2(v + self.ffn(v)))

    def step(self, x: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Grassmann block at one position: ``x`` ``(B, d)``; see :meth:`GrassmannMixer.step`. Evaluation
        only (no dropout is applied)."""
        if self.layout == "pre_norm":
            y, past = self.mixer.step(self.ln1(x), past)
            x = x + self.ln_in(y)
            return x + self.ffn(self.ln2(x)), past
        m, past = self.mixer.step(x, past)
        if self.layout == "post_norm_residual":
            m = x + m
        v = self.ln1(m)
        return self.ln2(v + self.ffn(v)), past
