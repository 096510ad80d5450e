"""The configs of the Grassmann family: ``grassmann`` (:class:`GrassmannConfig`) and ``grassmann-attn``
(:class:`GrassmannAttentionConfig`), their shared rules, and the offsets each layer uses (Zhang, arXiv 2512.19428)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from geomlab.models.config import ConfigBase


class GrassmannConfigError(ValueError):
    """An invalid configuration value for a Grassmann-family model."""



def check_plane_lm(c) -> None:
    """The rules both kinds share (sizes, dropout)."""
    c.positive("vocab_size", "d_model", "n_layers", "d_ff", "max_len")
    c.fraction("dropout")


@dataclass(frozen=True, kw_only=True)
class GrassmannConfig(ConfigBase):
    """The ``grassmann`` keys (Zhang, arXiv 2512.19428). Defaults = the paper's G-XS config (216,000 parameters at
    V = 96)."""

    kind = "grassmann"
    error = GrassmannConfigError
    vocab_size: int                   # V, tokens in the vocabulary
    d_model: int = 64                 # width d
    n_layers: int = 4                 # blocks
    rank: int = 16                    # reduced dimension r >= 2 (planes in R^r, P = r(r-1)/2 coordinates)
    offsets: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 12, 16])  # causal offsets D of the pairs
    offset_schedule: Literal["all", "per_layer"] = "all"  # every layer every offset, or offsets[l] in layer l
    layout: Literal["post_norm", "post_norm_residual", "pre_norm"] = "post_norm"  # block layout
    d_ff: int = 256                   # FFN width
    max_len: int = 128                # rows of the learned position table (positions='learned' only)
    positions: Literal["learned", "none", "sinusoidal"] = "learned"  # learned table up to max_len; none or
    # sinusoidal: any length
    position_shift: int = 0           # sinusoidal only: training windows start at a random position in [0, this]
    dropout: float = 0.0              # dropout probability in [0, 1)
    eps: float = 1e-6                 # Plücker normalisation floor, > 0
    normalize: Literal["clamp", "smooth"] = "clamp"  # p / max(|p|, eps) or p / sqrt(|p|^2 + eps^2)
    gate: Literal["concat", "input"] = "concat"      # sigmoid(W [h; g] + b) or sigmoid(W h + b)
    impl: Literal["fused", "explicit"] = "fused"     # the same mixer computed two ways

    def validate(self) -> None:
        check_plane_lm(self)
        if self.rank < 2:
            self.fail(f"rank must be >= 2 (planes need two dimensions), got {self.rank!r}")
        if not self.offsets or min(self.offsets) < 1:
            self.fail(f"offsets must be a non-empty list of positive integers, got {self.offsets!r}")
        if self.offset_schedule == "per_layer" and len(self.offsets) != self.n_layers:
            self.fail(f"offset_schedule 'per_layer' needs one offset per layer: {len(self.offsets)} offsets for "
                      f"{self.n_layers} layers")
        if not self.eps > 0:
            self.fail(f"eps must be > 0, got {self.eps!r}")
        if self.position_shift < 0 or self.position_shift and self.positions != "sinusoidal":
            self.fail(f"position_shift must be >= 0 and needs positions='sinusoidal', got {self.position_shift!r} "
                      f"with positions={self.positions!r}")


@dataclass(frozen=True, kw_only=True)
class GrassmannAttentionConfig(ConfigBase):
    """The ``grassmann-attn`` keys (Zhang, arXiv 2512.19428). Defaults = the paper's T-XS config (214,400 parameters at V = 96)."""

    kind = "grassmann-attn"
    error = GrassmannConfigError
    vocab_size: int                   # V, tokens in the vocabulary
    d_model: int = 64                 # width d, a multiple of n_heads
    n_layers: int = 4                 # blocks
    n_heads: int = 4                  # attention heads
    layout: Literal["post_norm", "post_norm_residual", "pre_norm"] = "post_norm"  # block layout
    d_ff: int = 256                   # FFN width
    max_len: int = 128                # rows of the learned position table (positions='learned' only)
    positions: Literal["learned", "none", "sinusoidal"] = "learned"  # learned table up to max_len; none or
    # sinusoidal: any length
    dropout: float = 0.0              # dropout probability in [0, 1)

    def validate(self) -> None:
        check_plane_lm(self)
        if self.n_heads < 1 or self.d_model % self.n_heads:
            self.fail(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")


def offsets_per_layer(offsets: list[int], schedule: str, n_layers: int) -> list[list[int]]:
    """The offsets each layer uses. ``all``: the sorted set of ``offsets`` for every layer; ``per_layer``:
    ``[offsets[l]]`` for layer ``l`` (the config checks ``len(offsets) == n_layers``). Zhang, arXiv 2512.19428."""
    if schedule == "all":
        return [sorted(set(offsets)) for _ in range(n_layers)]
    return [[d] for d in offsets]

