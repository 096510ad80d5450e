"""The measures read off an intervention's outcome, against direct computations."""

import numpy as np
import pytest

from geomlab.whatif.outcome import Outcome


def _outcome(seed=0, T=6, V=5):
    rng = np.random.default_rng(seed)
    before = rng.normal(size=(T, V)).astype(np.float32)
    after = before.copy()
    after[3:] += rng.normal(size=(T - 3, V)).astype(np.float32)
    return Outcome(rng.integers(0, V, size=T), before, after, 3, "test")


def test_kl_is_zero_where_nothing_changed_and_matches_a_direct_sum():
    o = _outcome()
    kl = o.kl_bits()
    assert np.allclose(kl[:3], 0.0, atol=1e-12) and (kl[3:] > 0).all()
    p = np.exp(o.before[4]) / np.exp(o.before[4]).sum()
    q = np.exp(o.after[4]) / np.exp(o.after[4]).sum()
    assert kl[4] == pytest.approx(float((p * np.log2(p / q)).sum()), rel=1e-5)


def test_surprisal_change_is_the_difference_of_minus_log2_p_of_the_next_token():
    o = _outcome(1)
    d = o.surprisal_change_bits()
    t = 4
    p = np.exp(o.before[t]) / np.exp(o.before[t]).sum()
    q = np.exp(o.after[t]) / np.exp(o.after[t]).sum()
    nxt = o.tokens[t + 1]
    assert d[t] == pytest.approx(float(np.log2(p[nxt]) - np.log2(q[nxt])), rel=1e-5)
    assert np.allclose(d[:2], 0.0, atol=1e-12)


def test_top_k_lists_the_most_likely_tokens_in_order():
    o = _outcome(2)
    before, after = o.top_k(4, k=3)
    p = np.exp(o.before[4]) / np.exp(o.before[4]).sum()
    assert [i for i, _ in before] == list(np.argsort(-p)[:3])
    assert sum(pr for _, pr in before) <= 1.0 and len(after) == 3
    with pytest.raises(IndexError):
        o.top_k(6)
