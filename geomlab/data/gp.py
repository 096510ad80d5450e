"""Gaussian-process regression, the CEM paper's synthetic task (reconstruction of Xu et al., arXiv 2605.07588).

The paper's exact set-up is not available; this follows the notes' proposal (all of it a design choice):

* per sequence: lengthscale ``l ~ LogUniform[0.05, 0.5]``, signal variance 1, noise ``sigma_n = 0.1``;
  ``J`` points ``t_j ~ U[0, 1]`` (unsorted), ``y ~ N(0, K_l(t, t) + sigma_n^2 I)`` (so ``y_j = f(t_j) + e_j``);
* token ``i`` (``i = 0..J-2``) is the vector ``[t_i, y_i, t_{i+1}]``, its target ``y_{i+1}``;
* the floor is the exact one-step-ahead GP posterior mean with the true hyperparameters,
  ``m_{i+1} = k(t_{i+1}, t_{1:i}) (K_{1:i} + sigma_n^2 I)^{-1} y_{1:i}`` (0 for the first target), whose
  RMSE against ``y`` is the best any predictor can do in expectation.

:class:`GPRegressionTask` plugs this into :class:`geomlab.training.trainer.Trainer` (kind ``"regression"``, metric
``"rmse"``); the model maps inputs ``(B, J-1, 3)`` to predictions ``(B, J-1)``
(e.g. :class:`geomlab.models.cem.CEMRegressor`). No download.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from geomlab.data.errors import DataError
from geomlab.data.tasks import Task

__all__ = ["rbf_kernel", "sample_gp", "gp_tokens", "gp_posterior_mean_next", "GPRegressionTask"]


def rbf_kernel(s: torch.Tensor, t: torch.Tensor, lengthscale: torch.Tensor, variance: float = 1.0) -> torch.Tensor:
    """Squared-exponential kernel ``variance * exp(-(s_i - t_j)^2 / (2 l^2))``.

    ``s`` ``(B, I)``, ``t`` ``(B, J)``, ``lengthscale`` ``(B,)`` (same units as ``t``) -> ``(B, I, J)``.
    """
    diff = s.unsqueeze(-1) - t.unsqueeze(-2)
    return variance * torch.exp(-0.5 * (diff / lengthscale.view(-1, 1, 1)) ** 2)


def sample_gp(batch: int, length: int, generator: torch.Generator, *, lengthscale_range=(0.05, 0.5),
              noise: float = 0.1, variance: float = 1.0) -> dict[str, torch.Tensor]:
    """Draw ``batch`` GP sequences of ``length`` points (float64, CPU), drawn with ``generator`` only.

    Returns ``t`` ``(B, J)`` in ``[0, 1)``, ``y`` ``(B, J)`` noisy observations, ``lengthscale`` ``(B,)``,
    ``chol`` ``(B, J, J)`` the Cholesky factor of ``K + noise^2 I`` (reused by the floor). Raises
    :class:`DataError` for ``length < 2``, a non-positive noise or an invalid lengthscale range.
    """
    lo, hi = lengthscale_range
    if length < 2 or not noise > 0 or not 0 < lo <= hi:
        raise DataError(f"GP task needs length >= 2, noise > 0 and 0 < lo <= hi; got length={length}, "
                        f"noise={noise}, lengthscale_range={lengthscale_range}")
    t = torch.rand(batch, length, generator=generator, dtype=torch.float64)
    u = torch.rand(batch, generator=generator, dtype=torch.float64)
    ls = torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    K = rbf_kernel(t, t, ls, variance) + noise ** 2 * torch.eye(length, dtype=torch.float64)
    L = torch.linalg.cholesky(K)
    z = torch.randn(batch, length, 1, generator=generator, dtype=torch.float64)
    y = (L @ z).squeeze(-1)
    return {"t": t, "y": y, "lengthscale": ls, "chol": L}


def gp_posterior_mean_next(y: torch.Tensor, chol: torch.Tensor) -> torch.Tensor:
    """One-step-ahead posterior means ``m_i = E[y_i | y_{<i}]`` for every ``i``, shape ``(B, J)`` (``m_0 = 0``).

    ``chol`` ``(B, J, J)`` is the Cholesky factor of ``K + sigma_n^2 I`` over all ``J`` points. Because the
    leading block of a Cholesky factor factors the leading block of the matrix, with ``z = L^{-1} y``:
    ``m_i = sum_{j<i} L_ij z_j`` (derivation: ``L_{i,<i}^T = L_{<i}^{-1} k(t_{<i}, t_i)``). Exact GP
    regression with the true hyperparameters (Rasmussen & Williams eq. 2.25).
    """
    z = torch.linalg.solve_triangular(chol, y.unsqueeze(-1), upper=False)
    return (chol.tril(-1) @ z).squeeze(-1)


def gp_tokens(t: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[t_i, y_i, t_{i+1}]`` ``(B, J-1, 3)`` and targets ``y_{i+1}`` ``(B, J-1)``."""
    return torch.stack([t[:, :-1], y[:, :-1], t[:, 1:]], dim=-1), y[:, 1:]


class GPRegressionTask(Task):
    """GP regression for :class:`geomlab.training.trainer.Trainer`: ``sample_batch(B, seq_len)`` draws fresh sequences of
    ``seq_len + 1`` points (``seq_len`` tokens); ``evaluate`` uses a fixed set of ``n_eval`` sequences per split
    (seeded by ``seed`` and the split) and returns ``rmse``, ``mse`` and ``gp_rmse`` (the floor on the same
    sequences), all in units of ``y``. Inputs/targets are float32.
    """

    name = "gp-regression"
    kind = "regression"
    metric = "rmse"
    higher_is_better = False
    vocab = None
    vocab_size = 1

    def __init__(self, *, noise: float = 0.1, lengthscale_range=(0.05, 0.5), n_eval: int = 512, seed: int = 1234):
        self.noise = float(noise)
        self.lengthscale_range = tuple(float(v) for v in lengthscale_range)
        self.n_eval = int(n_eval)
        self.seed = int(seed)
        self._eval_cache: dict = {}

    def sample_batch(self, batch_size, seq_len, generator):
        s = sample_gp(batch_size, seq_len + 1, generator, lengthscale_range=self.lengthscale_range,
                      noise=self.noise)
        x, y = gp_tokens(s["t"], s["y"])
        return x.float(), y.float()

    def loss(self, outputs, targets):
        """Mean squared error (units of ``y`` squared)."""
        return F.mse_loss(outputs.float(), targets.float())

    def eval_set(self, split: str, seq_len: int) -> dict[str, torch.Tensor]:
        """The fixed sequences of ``split``: ``inputs`` ``(N, seq_len, 3)``, ``targets`` ``(N, seq_len)`` and
        ``floor`` ``(N, seq_len)`` (the GP posterior mean of each target). Raises :class:`DataError` for an
        unknown split."""
        if split not in ("train", "valid", "test"):
            raise DataError(f"unknown split {split!r}; use train, valid or test")
        key = (split, seq_len)
        if key not in self._eval_cache:
            g = torch.Generator().manual_seed(self.seed + {"train": 0, "valid": 1, "test": 2}[split])
            s = sample_gp(self.n_eval, seq_len + 1, g, lengthscale_range=self.lengthscale_range, noise=self.noise)
            x, y = gp_tokens(s["t"], s["y"])
            floor = gp_posterior_mean_next(s["y"], s["chol"])[:, 1:]
            self._eval_cache = {key: {"inputs": x.float(), "targets": y.float(), "floor": floor.float(),
                                      "lengthscale": s["lengthscale"]}}
        return self._eval_cache[key]

    @torch.no_grad()
    def predict(self, model: torch.nn.Module, inputs: torch.Tensor, device="cpu", batch: int = 128) -> torch.Tensor:
        """Model predictions ``(N, seq_len)`` in eval mode, in batches."""
        was = model.training
        model.eval()
        try:
            out = [model(inputs[i:i + batch].to(device)).float().cpu() for i in range(0, len(inputs), batch)]
        finally:
            model.train(was)
        return torch.cat(out)

    def evaluate(self, model, split="valid", *, seq_len=63, device="cpu", max_tokens=None, stride=None):
        es = self.eval_set(split, seq_len)
        pred = self.predict(model, es["inputs"], device)
        mse = float(((pred - es["targets"]) ** 2).mean())
        floor = float(((es["floor"] - es["targets"]) ** 2).mean())
        return {"rmse": math.sqrt(mse), "mse": mse, "gp_rmse": math.sqrt(floor),
                "tokens": float(es["targets"].numel())}

    def spec(self) -> dict[str, Any]:
        return {"task": "gp-regression", "name": self.name, "noise": self.noise,
                "lengthscale_range": list(self.lengthscale_range), "n_eval": self.n_eval, "seed": self.seed}
