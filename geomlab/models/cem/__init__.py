"""Causal Energy Minimisation (CEM): Transformer layers as gradient steps on causal energies.

Source: J. Xu et al., "Revisiting Transformer Layer Parameterization Through Causal Energy Minimization",
arXiv 2605.07588. No official code exists; every detail the paper leaves open is a config option here
(see ``docs/cem.md``).

Every sub-block (attention, MLP) maps its input ``h`` (shape ``(B, J, d)``) to ``x^T`` by ``T`` steps

    x^{t+1} = x^t + P · u(y^t),     y^t = x^t / rho,     u(y) = -grad_y eps(y | h_{1:i})

starting at ``x^0 = h``. ``rho`` (shape ``(B, J, 1)``) is the RMS of the sub-block input, frozen over the
steps (, inferred), so ``x - rho P grad_x eps = x + P u``: one step is exactly pre-norm attention /
SwiGLU with tied weights. Context (keys, the MLP gate ``c``, ``n = h / rho``, ``rho``) is computed once from the
sub-block input and held fixed during the recursion, so each position descends a fixed energy.

Public energy functions (all shapes per batch; ``H`` heads of width ``d_h``, MLP width ``F``):

* :func:`interaction_energy` / :func:`interaction_update`: the log-sum-exp attention energy and its
  closed-form negative gradient (tied multi-head attention, optional diagonal-plus-low-rank, RoPE).
* :func:`silu_integral` (``Phi``), :func:`mlp_energy` / :func:`mlp_update`: the element-wise energy and its
  negative gradient (tied SwiGLU, or the quadratic reading of).
* :func:`preconditioner_apply` / :func:`preconditioner_matrix`: ``P = diag(softplus(p)) + U V^T + V U^T``
  (``dlr``) or ``diag(softplus(p)) + U U^T`` (``psd``).

Energies are in the model's own (dimensionless) units, comparable between the steps of one sub-block only
(: levels carry a ``log i`` offset and scales differ between layers).
"""

from geomlab.models.cem.attention import (attention_vectors, causal_logsumexp, interaction_energy,
                                          interaction_scores, interaction_update)
from geomlab.models.cem.blocks import (CEMMLP, CEMAttention, CEMStack, Preconditioner, preconditioner_apply,
                                       preconditioner_matrix, rms_scale)
from geomlab.models.cem.config import (DIAGONALS, MLP_ENERGIES, NORMS, POSITIONALS, PRECONDITIONERS, CEMConfig,
                                       CEMStackConfig)
from geomlab.models.cem.mlp import mlp_energy, mlp_gate, mlp_update, silu_integral
from geomlab.models.cem.model import CEMModel, CEMRegressor

__all__ = [
    "rms_scale",
    "interaction_scores", "interaction_energy", "interaction_update", "attention_vectors", "causal_logsumexp",
    "silu_integral", "mlp_gate", "mlp_energy", "mlp_update",
    "preconditioner_apply", "preconditioner_matrix",
    "CEMAttention", "CEMMLP", "Preconditioner", "CEMStack", "CEMModel", "CEMRegressor", "CEMConfig", "CEMStackConfig",
    "DIAGONALS", "PRECONDITIONERS", "MLP_ENERGIES", "POSITIONALS", "NORMS",
]
