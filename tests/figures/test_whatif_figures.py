"""The figures of an intervention read what the outcome says: the guesses' bars are the softmax of the
logits, the effect panels the outcome's KL and surprisal change at the positions drawn."""

import numpy as np
import pytest

from geomlab.figures import FigureError
from geomlab.figures.whatif import whatif_effect, whatif_guesses
from geomlab.whatif.outcome import Outcome


def _outcome(T=300, V=6, at=150, seed=0):
    rng = np.random.default_rng(seed)
    before = rng.normal(size=(T, V)).astype(np.float32)
    after = before.copy()
    after[at:] += rng.normal(size=(T - at, V)).astype(np.float32)
    return Outcome(rng.integers(0, V, size=T), before, after, at, "a test nudge")


def test_the_guesses_are_the_softmax_before_and_after_of_every_token_in_either_top_k():
    o = _outcome()
    names = list("abcdef")
    fig = whatif_guesses(o, 200, names, k=2).figure
    before = next(t for t in fig.data if t.name == "before")
    after = next(t for t in fig.data if t.name == "after")
    p = np.exp(o.before[200]) / np.exp(o.before[200]).sum()
    q = np.exp(o.after[200]) / np.exp(o.after[200]).sum()
    shown = {y.strip("“”") for y in after.y}
    assert shown == {names[i] for i in set(np.argsort(-p)[:2]) | set(np.argsort(-q)[:2])}
    for y, pb, pa in zip(after.y, before.x, after.x):
        i = names.index(y.strip("“”"))
        assert pb == pytest.approx(p[i], rel=1e-5) and pa == pytest.approx(q[i], rel=1e-5)
    with pytest.raises(FigureError):
        whatif_guesses(o, 300, names)


def test_the_effect_draws_the_window_around_the_intervention_with_its_kl_and_surprisal_change():
    o = _outcome()
    labels = ["x"] * 300
    fig = whatif_effect(o, labels).figure
    kl = next(t for t in fig.data if t.name == "KL")
    ds = next(t for t in fig.data if t.name == "surprisal change")
    x = np.asarray(kl.x)
    assert list(x) == list(range(x[0], x[0] + 128)) and x[0] <= 150 <= x[-1]  # 128 consecutive positions
    np.testing.assert_allclose(np.asarray(kl.y), o.kl_bits()[x], rtol=1e-6)
    want = np.append(o.surprisal_change_bits(), np.nan)[x]
    np.testing.assert_allclose(np.asarray(ds.y, dtype=float), want, rtol=1e-6)
    assert np.allclose(np.asarray(kl.y)[x < 150], 0.0, atol=1e-9)  # nothing changed before it
    with pytest.raises(FigureError):
        whatif_effect(o, labels[:-1])
