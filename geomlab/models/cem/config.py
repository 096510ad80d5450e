"""The config keys of a CEM stack and of the ``cem`` language model (Xu et al., arXiv 2605.07588; every detail
the paper leaves open is a key here, docs/cem.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from geomlab.models.config import ConfigBase

__all__ = ["CEMStackConfig", "CEMConfig", "DIAGONALS", "PRECONDITIONERS", "MLP_ENERGIES", "POSITIONALS", "NORMS",
           "ETA_PARAMS"]

Diagonal = Literal["none", "shared", "per_head"]
Preconditioning = Literal["none", "dlr", "psd"]
MLPEnergy = Literal["swiglu", "quadratic"]
Positional = Literal["rope", "none"]
Norm = Literal["frozen_rms", "none"]
EtaParam = Literal["softplus", "sigmoid"]
DIAGONALS, PRECONDITIONERS, MLP_ENERGIES = get_args(Diagonal), get_args(Preconditioning), get_args(MLPEnergy)
POSITIONALS, NORMS, ETA_PARAMS = get_args(Positional), get_args(Norm), get_args(EtaParam)


@dataclass(frozen=True, kw_only=True)
class CEMStackConfig(ConfigBase):
    """The keys of a stack of CEM layers (:class:`geomlab.models.cem.CEMStack`, also the GP regressor's)."""

    d_model: int = 64                 # width d
    n_layers: int = 4                 # CEM layers (attention then MLP sub-block)
    n_heads: int = 4                  # attention heads; d_model / n_heads even with RoPE
    d_ff: int = 322                   # CEM MLP width F
    recursion_steps: int = 1          # T, gradient steps per sub-block in training
    inference_recursion_steps: int | None = None  # T in eval mode (test-time recursion); None = T
    diagonal: Diagonal = "shared"     # diagonal part of the attention score: none, shared by heads, per head
    preconditioner: Preconditioning = "none"  # P = I, diag + U V^T + V U^T, or diag + U U^T
    precond_rank: int = 8             # rank of the preconditioner's low-rank part
    mlp_energy: MLPEnergy = "swiglu"  # tied SwiGLU or the quadratic reading
    positional: Positional = "rope"   # RoPE in the exact rotated-value form, or none
    rope_base: float = 10000.0        # RoPE base
    norm: Norm = "frozen_rms"         # rho: the RMS of the sub-block input frozen over the steps, or 1
    norm_eps: float = 1e-6            # epsilon of rho and of the final RMSNorm, > 0
    eta_param: EtaParam = "softplus"  # step sizes as softplus(raw) or eta_max * sigmoid(raw)
    eta_init: float = 0.5             # initial step size, > 0 (< eta_max with sigmoid)
    eta_max: float = 1.0              # bound of the sigmoid parametrisation
    anchor: float = 0.0               # proximal term lambda >= 0 (0 = off)

    def validate(self) -> None:
        self.positive("d_model", "n_layers", "n_heads", "d_ff", "recursion_steps", "precond_rank")
        t_inf = self.inference_recursion_steps
        if t_inf is not None and t_inf < 1:
            self.fail(f"inference_recursion_steps must be null or a positive integer, got {t_inf!r}")
        if self.d_model % self.n_heads:
            self.fail(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "rope" and (self.d_model // self.n_heads) % 2:
            self.fail("RoPE needs an even head dimension d_model / n_heads")
        if self.eta_param == "sigmoid" and not 0 < self.eta_init < self.eta_max:
            self.fail("with eta_param='sigmoid' need 0 < eta_init < eta_max")
        if self.eta_init <= 0 or self.anchor < 0 or self.norm_eps <= 0:
            self.fail("eta_init and norm_eps must be positive and anchor non-negative")


@dataclass(frozen=True, kw_only=True)
class CEMConfig(CEMStackConfig):
    """The ``cem`` keys: the stack's and the vocabulary."""

    kind = "cem"
    vocab_size: int                   # V, tokens in the vocabulary

    def validate(self) -> None:
        self.positive("vocab_size")
        super().validate()
