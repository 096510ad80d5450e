"""The shared skeleton of both Grassmann-family kinds (Zhang, arXiv 2512.19428): embeddings (learned, sinusoidal
or no positions), the blocks, the final LayerNorm and the tied head, the closed-form parameter count and the
width search of ``config_for_budget``."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from geomlab.models.base import LensStage, SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase
from geomlab.models.grassmann.blocks import PlaneBlock


#: Root-mean-square of the fixed sinusoidal position code (design choice, measured on Tiny Shakespeare at the
#: converged recipe's 2,000-step tuning budget, lr 1e-2: valid BPC 2.981 at RMS 0.02, the embeddings' initial
#: scale; 2.728 at 0.5; 2.904 at 1.0; the learned table 2.689; docs/grassmann.md).
SINUSOID_RMS = 0.5


def sinusoidal_positions(start: int, length: int, d: int, dtype: torch.dtype = torch.float32,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """The fixed position code ``(length, d)`` of positions ``start .. start + length - 1`` (Vaswani et al.
    2017,: ``sin(t / 10000^(2i/d))`` in even and ``cos`` in odd columns), scaled to RMS
    :data:`SINUSOID_RMS`. Defined for any position, so a model using it reads any length; no parameters.
    Used by ``positions='sinusoidal'``: without any position input, equal characters have equal layer-0
    vectors, so their planes are degenerate (design choice, docs/grassmann.md)."""
    t = torch.arange(start, start + length, device=device, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, device=device, dtype=torch.float64)
    angle = t / torch.pow(10000.0, i / d)
    out = torch.zeros(length, d, device=device, dtype=torch.float64)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : d // 2])
    return (out * (SINUSOID_RMS * 2 ** 0.5)).to(dtype)


class PlaneLM(SequenceModel):
    """Shared skeleton of both kinds: embeddings, blocks, final LayerNorm, tied head (Zhang, arXiv 2512.19428)."""

    attn = False

    def __init__(self, config: ConfigBase | dict[str, Any]):
        super().__init__(config)
        c = self.config
        d = int(c["d_model"])
        self.d_model, self.vocab_size, self.max_len = d, int(c["vocab_size"]), int(c["max_len"])
        self.tok = nn.Embedding(self.vocab_size, d)
        self.pos = nn.Embedding(self.max_len, d) if c["positions"] == "learned" else None
        self.sinusoidal = c["positions"] == "sinusoidal"
        self.position_shift = int(c.get("position_shift", 0) or 0)
        self.drop = nn.Dropout(float(c["dropout"]))
        self.blocks = nn.ModuleList(
            PlaneBlock(self._mixer(i), d, int(c["d_ff"]), c["layout"], float(c["dropout"]), self.attn)
            for i in range(int(c["n_layers"])))
        self.ln_f = nn.LayerNorm(d)
        nn.init.normal_(self.tok.weight, std=0.02)
        if self.pos is not None:
            nn.init.normal_(self.pos.weight, std=0.02)

    @property
    def no_weight_decay(self) -> set[str]:
        """Parameter names the trainer exempts from weight decay: the embeddings (Zhang, arXiv 2512.19428 recipe;
        LayerNorm weights and biases are 1-d and exempt anyway)."""
        return {"tok.weight"} | ({"pos.weight"} if self.pos is not None else set())

    def _mixer(self, layer: int) -> nn.Module:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_tokens(self, tokens: torch.Tensor, start: int = 0) -> None:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if self.pos is not None and start + tokens.shape[1] > self.max_len:
            raise ValueError(f"sequence of length {start + tokens.shape[1]} exceeds max_len={self.max_len} "
                             "(learned positions); use a shorter context or positions='none'")

    def embed(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token (+ position) embedding ``(B, T, d)`` of ``tokens`` ``(B, T)`` starting at position ``start``."""
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(start, start + tokens.shape[1], device=tokens.device))
        elif self.sinusoidal:
            if self.training and self.position_shift:  # no absolute position is special: longer texts read
                start = start + int(torch.randint(0, self.position_shift + 1, ()))  # like the training windows
            x = x + sinusoidal_positions(start, tokens.shape[1], self.d_model, x.dtype, x.device)
        return self.drop(x)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """Tied output head: ``LN_f(x) @ E^T``, ``(..., d) -> (..., V)``."""
        return self.ln_f(x) @ self.tok.weight.t()

    def lens_stages(self) -> list[LensStage]:
        """The embedding (block 0's input, stage 0) and each block's output, through ``ln_f`` and the tied
        head (:meth:`head`); none without blocks."""
        if not len(self.blocks):
            return []
        return [LensStage("embedding", "blocks.0.hook_resid_pre", self.head)] + [
            LensStage(f"block {l}", f"blocks.{l}.hook_resid_post", self.head) for l in range(len(self.blocks))]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(B, T)`` long -> logits ``(B, T, V)``; ``logits[:, t]`` predicts token ``t + 1``."""
        self._check_tokens(tokens)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    @staticmethod
    def _analytic_block(c: dict[str, Any]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def analytic_param_count(cls, config: dict[str, Any]) -> int:
        """Trainable parameters of the full ``config`` from the closed form of Zhang, arXiv 2512.19428 (shared
        ``V d + max_len d + 2 d`` plus ``n_layers`` blocks). Equals ``count_params`` of the built model."""
        c = config
        d, V = int(c["d_model"]), int(c["vocab_size"])
        shared = V * d + 2 * d + (int(c["max_len"]) * d if c["positions"] == "learned" else 0)
        d_ff = int(c["d_ff"])
        ffn = 2 * d * d_ff + d_ff + d + 2 * d + 2 * d  # FFN + LN1 + LN2
        return shared + int(c["n_layers"]) * (ffn + cls._analytic_block(c))

    @classmethod
    def _budget(cls, n_params: int, vocab_size: int, fixed: dict[str, Any], derive) -> dict[str, Any]:
        """Search ``d_model`` (``derive(base, w)`` completes the config); if no width with the derived
        ``d_ff = 4 d_model`` is within 5% (coarse width steps at small sizes), also let ``d_ff`` range over
        ``[3 d, 5 d]`` in steps of 4. Candidates are pre-filtered with :meth:`analytic_param_count`."""
        base = {**cls.default_config(), **fixed, "kind": cls.kind}
        step = 1 if "d_model" in fixed else int(base.get("n_heads", 2))
        widths = [int(fixed["d_model"])] if "d_model" in fixed else range(step, 2049, step)

        def near(cands):
            return [c for c in cands if abs(cls.analytic_param_count({**c, "vocab_size": vocab_size}) - n_params)
                    <= 0.1 * n_params]

        cands = near([derive(base, w) for w in widths])
        try:
            if not cands:
                raise ValueError("no candidate")
            return search_width(lambda c: c, cands, n_params, vocab_size)
        except ValueError:
            if "d_ff" in fixed:
                raise ValueError(f"{cls.kind}: no d_model gives {n_params} parameters (±5%) with the fixed keys "
                                 f"{sorted(fixed)}") from None
        cands = near([{**derive(base, w), "d_ff": f} for w in widths for f in range(3 * w, 5 * w + 1, 4)])
        if not cands:
            raise ValueError(f"{cls.kind}: no d_model/d_ff gives ~{n_params} parameters with the fixed keys "
                             f"{sorted(fixed)}")
        return search_width(lambda c: c, cands, n_params, vocab_size)
