"""The GP regression task (shared/papers/cem.md §4.2) and the CEM regressor that trains on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from geomlab.data.errors import DataError
from geomlab.data.gp import GPRegressionTask, gp_posterior_mean_next, gp_tokens, rbf_kernel, sample_gp
from geomlab.models.cem import CEMRegressor


@given(seed=st.integers(0, 10_000), i=st.integers(1, 11))
def test_floor_equals_sklearn_gp_posterior_mean(seed, i):
    gpr_mod = pytest.importorskip("sklearn.gaussian_process")
    kernels = pytest.importorskip("sklearn.gaussian_process.kernels")
    s = sample_gp(2, 12, torch.Generator().manual_seed(seed))
    m = gp_posterior_mean_next(s["y"], s["chol"])
    for b in range(2):
        t, y, ls = s["t"][b].numpy(), s["y"][b].numpy(), float(s["lengthscale"][b])
        gpr = gpr_mod.GaussianProcessRegressor(kernels.RBF(length_scale=ls), alpha=0.1 ** 2, optimizer=None)
        gpr.fit(t[:i, None], y[:i])
        expected = gpr.predict(np.array([[t[i]]]))[0]
        assert abs(m[b, i].item() - expected) < 1e-8
    assert torch.all(m[:, 0] == 0)


def test_samples_have_the_stated_distribution():
    s = sample_gp(4000, 6, torch.Generator().manual_seed(0))
    assert s["t"].min() >= 0 and s["t"].max() < 1
    ls = s["lengthscale"]
    assert ls.min() >= 0.05 and ls.max() <= 0.5
    # log-uniform: mean of log l is the midpoint of the log range
    assert abs(ls.log().mean().item() - 0.5 * (math.log(0.05) + math.log(0.5))) < 0.03
    assert abs(s["y"].var().item() - 1.01) < 0.05  # signal variance 1 + noise 0.01
    # covariance of two points matches the kernel + noise, checked through the whitened residuals
    z = torch.linalg.solve_triangular(s["chol"], s["y"].unsqueeze(-1), upper=False).squeeze(-1)
    assert abs(z.var().item() - 1.0) < 0.05 and abs(z.mean().item()) < 0.05
    K = rbf_kernel(s["t"], s["t"], ls) + 0.01 * torch.eye(6, dtype=torch.float64)
    torch.testing.assert_close(s["chol"] @ s["chol"].transpose(-1, -2), K)


def test_tokens_are_aligned():
    s = sample_gp(3, 7, torch.Generator().manual_seed(1))
    x, y = gp_tokens(s["t"], s["y"])
    assert x.shape == (3, 6, 3) and y.shape == (3, 6)
    assert torch.equal(x[:, 2, 0], s["t"][:, 2]) and torch.equal(x[:, 2, 1], s["y"][:, 2])
    assert torch.equal(x[:, 2, 2], s["t"][:, 3]) and torch.equal(y[:, 2], s["y"][:, 3])


class _Oracle(torch.nn.Module):
    """Predicts the floor of the cached eval set (to check ``evaluate``)."""

    def __init__(self, floor):
        super().__init__()
        self.floor = floor

    def forward(self, x):
        return self.floor[: x.shape[0]]


def test_task_batches_eval_and_errors():
    task = GPRegressionTask(n_eval=64)
    a = task.sample_batch(4, 9, torch.Generator().manual_seed(3))
    b = task.sample_batch(4, 9, torch.Generator().manual_seed(3))
    assert a[0].shape == (4, 9, 3) and a[1].shape == (4, 9) and a[0].dtype == torch.float32
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    es = task.eval_set("valid", 15)
    assert torch.equal(task.eval_set("valid", 15)["targets"], es["targets"])
    assert not torch.equal(task.eval_set("test", 15)["targets"][:4], es["targets"][:4])
    es = task.eval_set("valid", 15)
    m = task.evaluate(_Oracle(es["floor"]), "valid", seq_len=15)
    assert m["rmse"] == pytest.approx(m["gp_rmse"], rel=1e-6)
    zero = task.evaluate(_Oracle(torch.zeros_like(es["floor"])), "valid", seq_len=15)
    assert zero["rmse"] > 1.5 * zero["gp_rmse"]
    with pytest.raises(DataError):
        task.eval_set("dev", 15)
    with pytest.raises(DataError):
        sample_gp(2, 1, torch.Generator())


def test_regressor_is_causal_and_records():
    torch.manual_seed(0)
    model = CEMRegressor({"d_model": 16, "n_heads": 2, "d_ff": 12, "recursion_steps": 3}).double().eval()
    x = torch.randn(2, 10, 3, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 6:] += 1.0
    a, b = model(x), model(x2)
    assert a.shape == (2, 10)
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-12)
    assert (a[:, 6:] - b[:, 6:]).abs().max() > 1e-6
    rec = model.record(x[:1])
    assert torch.equal(rec["prediction"], model(x[:1])[0])
    from geomlab.trace import dense_attention

    assert rec["energies"].shape == (2, 2, 4, 10) and dense_attention(rec).shape == (2, 2, 10, 10)
    with pytest.raises(ValueError):
        CEMRegressor({"bogus": 1})


def test_short_training_beats_the_zero_predictor():
    from geomlab.training.trainer import TrainConfig, Trainer

    torch.manual_seed(0)
    task = GPRegressionTask(n_eval=64)
    model = CEMRegressor({"d_model": 16, "n_heads": 2, "d_ff": 16, "n_layers": 1})
    cfg = TrainConfig(steps=60, batch_size=16, seq_len=31, lr=1e-2, warmup=0.1, eval_every=0, device="cpu",
                      final_eval=False)
    result = Trainer(model, task, cfg).run()
    zero = task.evaluate(_Oracle(torch.zeros(64, 31)), "valid", seq_len=31)["rmse"]
    assert result.metrics["valid_rmse"] < 0.9 * zero


def test_bench_gp_runs_end_to_end(tmp_path, capsys):
    import json

    from geomlab.bench import gp as bench_gp

    out = tmp_path / "gp.json"
    assert bench_gp.main(["--T", "1", "2", "--steps", "3", "--n-eval", "16", "--points", "12", "--d-model", "8",
                          "--n-heads", "2", "--d-ff", "8", "--batch-size", "4", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["T"] for r in rows] == [1, 2]
    assert rows[0]["params"] == rows[1]["params"]  # same parameters for every T
    assert all(0 < r["test_gp_rmse"] < 1.0 and 0 <= r["energy_fall_fraction"] <= 1 for r in rows)
    assert "| T | params |" in capsys.readouterr().out
