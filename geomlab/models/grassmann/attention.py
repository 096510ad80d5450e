"""Causal multi-head self-attention: the mixer of the ``grassmann-attn`` baseline (Zhang, arXiv 2512.19428)."""

from __future__ import annotations

import torch
from torch import nn

from geomlab.models.hooks import HookPoint
from geomlab.models.layers import attend


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention (the matched baseline's mixer, Zhang, arXiv 2512.19428): fused QKV
    ``Linear(d, 3d)``, output ``Linear(d, d)`` (``4 d^2 + 4 d`` parameters). ``(B, T, d) -> (B, T, d)``.
    Hook points: ``hook_q`` / ``hook_k`` ``(B, H, T, d_head)``, ``hook_pattern`` ``(B, H, T, T)`` (the
    weights, formed only for an active hook) and ``hook_z`` ``(B, H, T, d_head)`` (per-head outputs before
    ``out``): :func:`geomlab.models.layers.attend`."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.hook_q = HookPoint("(B, H, T, d_head) attention queries (unscaled)")
        self.hook_k = HookPoint("(B, H, T, d_head) attention keys")
        self.hook_pattern = HookPoint("(B, H, T, T) attention weights (formed only while a hook is attached)")
        self.hook_z = HookPoint("(B, H, T, d_head) per-head attention outputs, before the output projection")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = self.hook_q(q), self.hook_k(k)
        y = attend(q, k, v, self.hook_pattern, self.hook_z)
        return self.out(y.transpose(1, 2).reshape(B, T, D))
