"""The ``llama`` baseline and the RoPE helpers it shares with ``cem``."""

from __future__ import annotations

import pytest
import torch

from geomlab.trace import dense_attention
from hypothesis import given
from hypothesis import strategies as st

from geomlab.models import build_model, config_for_budget, count_params
from geomlab.models.layers import apply_rope, rope_angles


def test_param_count_matches_notes_and_budget():
    assert count_params(build_model({"kind": "llama", "vocab_size": 96})) == 204_352  # notes §3.2
    for budget in (50_000, 200_000, 800_000):
        cfg = config_for_budget("llama", budget, 65)
        assert abs(count_params(build_model(cfg)) - budget) <= 0.05 * budget
    assert config_for_budget("llama", 200_000, 65, d_model=48)["d_model"] == 48


def test_causal_and_record():
    torch.manual_seed(0)
    model = build_model({"kind": "llama", "vocab_size": 9, "d_model": 16, "n_heads": 2, "d_ff": 24,
                         "n_layers": 2}).double().eval()
    tokens = torch.randint(0, 9, (1, 10))
    other = tokens.clone()
    other[:, 5:] = (other[:, 5:] + 1) % 9
    a, b = model(tokens), model(other)
    assert a.shape == (1, 10, 9)
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=1e-12)
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-6
    rec = model.record(tokens)
    assert torch.equal(rec["logits"], a[0])
    A = torch.as_tensor(dense_attention(rec))
    assert A.shape == (2, 2, 10, 10)
    torch.testing.assert_close(A.sum(-1), torch.ones(2, 2, 10, dtype=torch.float64))
    assert torch.all(A.triu(1) == 0)


def test_bad_config_raises():
    for bad in ({"d_model": 10, "n_heads": 4}, {"d_model": 12, "n_heads": 4}, {"n_layers": 0}):
        with pytest.raises(ValueError):
            build_model({"kind": "llama", "vocab_size": 5, **bad})
    with pytest.raises(ValueError):
        build_model({"kind": "llama", "vocab_size": 5, "dropout": 0.1})


@given(i=st.integers(0, 30), j=st.integers(0, 30), shift=st.integers(0, 30), seed=st.integers(0, 1000))
def test_rope_scores_depend_on_offset_only_and_inverse(i, j, shift, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 8, generator=g, dtype=torch.float64), torch.randn(1, 8, generator=g, dtype=torch.float64)
    cos, sin = rope_angles(64, 8, dtype=torch.float64)

    def at(x, pos):
        return apply_rope(x, cos[pos:pos + 1], sin[pos:pos + 1])

    s1 = (at(q, i) * at(k, j)).sum()
    s2 = (at(q, i + shift) * at(k, j + shift)).sum()
    assert abs(s1 - s2) < 1e-10
    back = apply_rope(at(q, i), cos[i:i + 1], sin[i:i + 1], inverse=True)
    torch.testing.assert_close(back, q)
    torch.testing.assert_close(at(q, i).norm(), q.norm())


def test_shared_layers_leave_no_import_cycle():
    """llama takes RoPE from geomlab.models.layers (not from cem), osm its budget search from
    geomlab.models.budget (not from transformer): importing one family loads no other."""
    import subprocess
    import sys

    code = ("import sys, geomlab.models.llama, geomlab.models.osm; "
            "print(sorted(m for m in sys.modules if m in ('geomlab.models.cem', 'geomlab.models.transformer')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
