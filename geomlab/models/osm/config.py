"""The config keys of ``osm-rnn`` and ``osmformer`` (Nunley, arXiv 2602.18417; [I] = inferred, a config option here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from geomlab.models.config import ConfigBase

__all__ = ["OSMConfigError", "OSMConfig", "OSMRNNConfig", "OSMFormerConfig", "MIXINGS", "POSITIONS", "PROTOTYPES"]

Mixing = Literal["identity", "scalar", "linear"]
Position = Literal["alibi", "rotation", "none"]
Prototypes = Literal["free", "group", "tied", "support"]
MIXINGS, POSITIONS, PROTOTYPES = get_args(Mixing), get_args(Position), get_args(Prototypes)


class OSMConfigError(ValueError):
    """An invalid OSM model configuration (unknown option value, bad size)."""


@dataclass(frozen=True, kw_only=True)
class OSMConfig(ConfigBase):
    """The keys both kinds share (module docstring of :mod:`geomlab.models.osm`)."""

    error = OSMConfigError
    absent = {"dropout": "OSM models have no dropout, by design: a group-valued state has no natural unit to "
                         "drop; weight decay (--weight-decay) regularises them (docs/osm.md, Regularisation)"}
    vocab_size: int                   # V, tokens in the vocabulary
    group: str = "O"                  # O, SO, U, SU, T or O-block (geomlab.geometry.groups.get_group)
    d: int = 16                       # states are d x d matrices
    block: int | None = None          # block size of group O-block (only there)
    mixing: Mixing = "linear"         # tangent mixing: fixed eta, learned eta, or a learned map on the algebra
    prototypes: Prototypes = "free"   # readout matrices: any matrix, exp of the algebra, the token matrices, or
    #                                   free values stored only where a state can be non-zero (support)
    tau: float = 1.0                  # readout temperature (init)
    token_init_std: float | None = None  # std of the token generators' coordinates (None = 1/sqrt(d))
    proto_init_std: float | None = None  # std of free prototypes (None = 1/sqrt(d))
    token_param: Literal["coords", "matrix"] = "coords"  # token generators as algebra coordinates or full matrices
    complex_mode: Literal["native", "real"] = "native"   # U/SU in complex tensors or on the realification
    expm: Literal["auto", "group", "taylor"] = "auto"    # which matrix exponential

    def validate(self) -> None:
        if self.vocab_size < 1 or self.d < 1:
            self.fail(f"vocab_size and d must be positive, got {self.vocab_size} and {self.d}")
        if self.group != "O-block" and self.block is not None:
            self.fail(f"block is only an option of group 'O-block', got group {self.group!r}")
        if self.group == "O-block" and self.block is None:
            self.fail("group 'O-block' needs a block size: config key 'block'")


@dataclass(frozen=True, kw_only=True)
class OSMRNNConfig(OSMConfig):
    """The ``osm-rnn`` keys (Nunley, arXiv 2602.18417)."""

    kind = "osm-rnn"
    d: int = 17
    step: float = 0.5                 # eta: the mixing's step (init of eta I for linear mixing)
    rnn_input: Literal["pull", "pull+token"] = "pull"  # Phi_t = Gamma(pull(H, M_x)) [+ Gamma_tok(A_x)] [I]
    token_step: float = 1.0           # init of Gamma_tok (pull+token)


@dataclass(frozen=True, kw_only=True)
class OSMFormerConfig(OSMConfig):
    """The ``osmformer`` keys (Nunley, arXiv 2602.18417)."""

    kind = "osmformer"
    n_layers: int = 2                 # layers of attention + grounding steps (0 allowed)
    heads: int = 1                    # row groups of H scored separately; divides d [design choice]
    attn_step: float = 1.0            # eta of the attention step's mixing
    ground_step: float = 1.0          # eta of the grounding step's mixing
    position: Position = "alibi"      # ALiBi bias [I], a rotation R^i of the inputs (the paper's second option), or none
    alibi_slope: float = 0.5          # init of each layer's slope (heads: times 2^(-8k/heads))
    learn_alibi: bool = True          # whether the slopes are trained
    rotation_init_std: float = 0.1    # std of the coordinates of A_pos (position='rotation')
    beta: float | None = 1.0          # attention inverse temperature init, learned as log beta (None = sqrt(d))

    def validate(self) -> None:
        super().validate()
        if self.n_layers < 0:
            self.fail(f"n_layers must be >= 0, got {self.n_layers}")
        if self.heads < 1 or self.d % self.heads:
            self.fail(f"heads={self.heads} must be >= 1 and divide d={self.d}")
        if self.beta is not None and self.beta <= 0:
            self.fail(f"beta must be positive, got {self.beta}")
