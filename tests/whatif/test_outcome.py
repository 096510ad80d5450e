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


def test_surprisal_change_has_one_entry_per_position_and_nothing_after_the_last():
    o = _outcome(3)
    d = o.surprisal_change_bits()
    assert d.shape == (len(o.tokens),) and np.isnan(d[-1]) and np.isfinite(d[:-1]).all()


def test_a_word_problem_outcome_is_scored_on_the_running_product_not_the_next_input():
    """A word-problem model predicts g_0 ... g_t at position t: the surprisal change reads that id at the
    same position, and the summary names it, where a language model's reads the next input."""
    import torch

    from geomlab.data.word_problem import get_group

    rng = np.random.default_rng(4)
    group = get_group("S3")
    T, V = 7, group.order
    tokens = rng.integers(0, V, size=T)
    before = rng.normal(size=(T, V)).astype(np.float32)
    after = before + rng.normal(size=(T, V)).astype(np.float32)
    plain = Outcome(tokens, before, after, 2, "test")
    assert plain.scored_on(None) is plain and plain.scored_on({"task": "lm"}) is plain
    wp = plain.scored_on({"task": "word-problem", "group": "S3"})
    prod = group.running_product(torch.as_tensor(tokens)).numpy()
    np.testing.assert_array_equal(wp.targets, prod)
    d = wp.surprisal_change_bits()
    assert np.isfinite(d).all()  # every position, the last included, has a product to score
    for t in range(T):
        p = np.exp(before[t]) / np.exp(before[t]).sum()
        q = np.exp(after[t]) / np.exp(after[t]).sum()
        assert d[t] == pytest.approx(float(np.log2(p[prod[t]]) - np.log2(q[prod[t]])), rel=1e-4, abs=1e-6)
    assert wp.predicts == "running product" and "surprisal of the correct running product" in wp.summary(2)
    assert f"{np.nansum(d[2:]):+.3g} bits from the cursor on" in wp.summary(2)
    assert "real text" in plain.summary(2)
    with pytest.raises(IndexError):
        wp.summary(T)


def test_the_summary_writes_large_numbers_of_bits_in_full():
    o = _outcome(5)
    o = Outcome(o.tokens, o.before, o.before + 0, 3, "test")
    o.after[4:, :] = o.before[4:, :] - 5000 * np.eye(o.before.shape[1])[o.tokens[5:]]
    line = o.summary(3)
    assert "e+0" not in line and "bits from the cursor on" in line
    assert f"{np.nansum(o.surprisal_change_bits()[3:]):+,.0f}" in line


def test_an_intervention_that_changes_nothing_says_so():
    """At its neutral size (CEM's trained T) an intervention leaves every prediction as it was: the summary
    says "no change" instead of "largest 0 bits at position 0"."""
    o = _outcome()
    same = Outcome(o.tokens, o.before, o.before.copy(), 3, "test")
    assert same.summary(3) == "test: no change: the predictions before and after are the same at every position."
    assert "no change" not in o.summary(3) and "largest" in o.summary(3)
