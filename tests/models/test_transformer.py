"""Tests of the ``transformer`` baseline (pre-norm GPT decoder with ALiBi)."""

from __future__ import annotations

import json

import pytest
import torch

from geomlab.models import build_model, config_for_budget, count_params
from geomlab.models.transformer import alibi_bias, alibi_slopes


def test_param_count_formula():
    for D, L, V in [(52, 3, 65), (44, 4, 65), (16, 1, 7)]:
        m = build_model({"kind": "transformer", "vocab_size": V, "d_model": D, "n_layers": L, "n_heads": 4})
        assert count_params(m) == L * (12 * D * D + 13 * D) + 2 * V * D + V + 2 * D
        assert count_params(m, "stored") == count_params(m)


def test_causal_and_record():
    torch.manual_seed(0)
    m = build_model({"kind": "transformer", "vocab_size": 9, "d_model": 16, "n_layers": 2, "n_heads": 2})
    x = torch.randint(0, 9, (2, 12))
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % 9
    a, b = m(x), m(y)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-6)
    assert not torch.allclose(a[:, 6:], b[:, 6:], atol=1e-4)
    before = m(x[:1]).detach()
    rec = m.record(x[:1])
    assert torch.equal(rec["logits"], before[0])
    assert torch.equal(m(x[:1]).detach(), before)
    from geomlab.trace import dense_attention

    A = torch.as_tensor(dense_attention(rec)).float()
    assert A.shape == (2, 2, 12, 12)
    assert torch.allclose(A.sum(-1), torch.ones(2, 2, 12), atol=1e-5)
    assert float(A.triu(1).max()) == 0.0
    # equal to the explicit softmax(q k^T / sqrt(d_head) + ALiBi) of the first block
    blk = m.blocks[0]
    with torch.no_grad():
        h = blk.ln1(m.embed(x[:1]))
        D = h.shape[-1]
        H = blk.n_heads
        q, k, _ = blk.qkv(h).view(1, 12, 3, H, D // H).permute(2, 0, 3, 1, 4)
        ref = torch.softmax(q @ k.transpose(-1, -2) / (D // H) ** 0.5 + alibi_bias(m.slopes, 12), dim=-1)[0]
    torch.testing.assert_close(A[0], ref, atol=1e-5, rtol=1e-5)


def test_alibi():
    s = alibi_slopes(4)
    assert torch.allclose(s, torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]))
    bias = alibi_bias(s, 5)
    assert bias.shape == (4, 5, 5)
    assert bias[1, 4, 1] == -3 * s[1]
    assert torch.isinf(bias[0, 1, 2])


def test_alibi_changes_outputs_by_distance():
    """With ALiBi the model is not permutation-invariant over the prefix (positional information exists)."""
    torch.manual_seed(1)
    m = build_model({"kind": "transformer", "vocab_size": 9, "d_model": 16, "n_layers": 1, "n_heads": 2})
    x = torch.tensor([[1, 2, 3, 4, 5]])
    y = torch.tensor([[2, 1, 3, 4, 5]])
    assert not torch.allclose(m(x)[0, -1], m(y)[0, -1], atol=1e-5)


def test_budget_and_round_trip():
    cfg = config_for_budget("transformer", 104_000, 65)
    m = build_model(cfg)
    assert abs(count_params(m) - 104_000) <= 5_200
    m2 = build_model(json.loads(json.dumps(m.config)))
    m2.load_state_dict(m.state_dict())
    x = torch.randint(0, 65, (1, 7))
    assert torch.equal(m(x), m2(x))
    fixed = config_for_budget("transformer", 50_000, 65, n_layers=2, n_heads=2)
    assert fixed["n_layers"] == 2 and fixed["n_heads"] == 2


@pytest.mark.parametrize("bad", [{"d_model": 10, "n_heads": 4}, {"n_layers": 0}, {"dropout": 1.5}, {"foo": 1}])
def test_bad_config(bad):
    with pytest.raises(ValueError):
        build_model({"kind": "transformer", "vocab_size": 9, **bad})


def test_training_lowers_loss(tiny_text):
    torch.manual_seed(2)
    chars = sorted(set(tiny_text))
    data = torch.tensor([chars.index(c) for c in tiny_text])
    m = build_model({"kind": "transformer", "vocab_size": len(chars), "d_model": 32, "n_layers": 1, "n_heads": 2})
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(100):
        ix = torch.randint(0, len(data) - 33, (8,), generator=g)
        x = torch.stack([data[i:i + 32] for i in ix])
        y = torch.stack([data[i + 1:i + 33] for i in ix])
        loss = torch.nn.functional.cross_entropy(m(x).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 1.0


def test_budget_between_two_widths_falls_back_to_fewer_heads():
    """100K at V = 65 lies between d_model 48 and 52 with 4 heads (widths step by 4); the search then tries
    2 heads (widths step by 2) and meets the budget; a fixed n_heads is kept and reports the miss."""
    from geomlab.models import build_model, config_for_budget, count_params
    from geomlab.models.budget import resolve_config

    for cfg in (config_for_budget("transformer", 100_000, 65), resolve_config("transformer", 65, 100_000, {})):
        assert cfg["n_heads"] == 2 and cfg["d_model"] % 2 == 0
        assert abs(count_params(build_model(cfg), "effective") - 100_000) <= 5_000
    assert config_for_budget("transformer", 104_000, 65)["n_heads"] == 4  # the default when it fits
    with pytest.raises(ValueError, match="within 5%"):
        config_for_budget("transformer", 100_000, 65, n_heads=4)
