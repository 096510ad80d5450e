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
    # the title names the position as the prediction panel does (its number, then its label)
    assert fig.layout.title.text == "Next token after position 200"  # no label given: none shown
    titled = whatif_guesses(o, 200, names, k=2, label="🙂→�").figure.layout.title.text
    assert titled.startswith("Next token after position 200 “🙂→�”"), titled


def test_the_effect_draws_the_window_around_the_intervention_with_its_kl_and_surprisal_change():
    o = _outcome()
    labels = ["x"] * 300
    fig = whatif_effect(o, labels).figure
    kl = next(t for t in fig.data if t.name == "KL")
    ds = next(t for t in fig.data if t.name == "surprisal change")
    x = np.asarray(kl.x)
    assert list(x) == list(range(x[0], x[0] + 128)) and x[0] <= 150 <= x[-1]  # 128 consecutive positions
    np.testing.assert_allclose(np.asarray(kl.y), o.kl_bits()[x], rtol=1e-6)
    want = o.surprisal_change_bits()[x]
    np.testing.assert_allclose(np.asarray(ds.y, dtype=float), want, rtol=1e-6)
    assert np.allclose(np.asarray(kl.y)[x < 150], 0.0, atol=1e-9)  # nothing changed before it
    assert fig.layout.hovermode == "x" and fig.layout.hoverdistance == -1  # a click anywhere in a column
    with pytest.raises(FigureError):
        whatif_effect(o, labels[:-1])


def test_the_geometry_ghost_draws_what_each_intervention_changed():
    """Eigenvalues on the unit circle for a steered OSM state (equal to numpy's of the state), Plücker
    coordinates before/after for a moved plane, the chosen layer's energies for CEM; nothing to draw is an
    error."""
    import torch

    from geomlab.figures.whatif import whatif_geometry
    from geomlab.whatif import catalog
    from tests.helpers.models import small_model

    torch.manual_seed(0)
    tokens = torch.randint(0, 10, (12,))
    o = catalog.apply("steer", small_model("osm-rnn").eval(), tokens, 5, 1.0)
    fig = whatif_geometry(o).figure
    after = next(t for t in fig.data if t.name == "after")
    lam = np.linalg.eigvals(np.asarray(o.geometry["state_after"], dtype=np.complex128))
    np.testing.assert_allclose(sorted(np.asarray(after.x)), sorted(lam.real), atol=1e-6)
    np.testing.assert_allclose(np.abs(np.asarray(after.x) + 1j * np.asarray(after.y)), 1.0, atol=1e-5)
    o = catalog.apply("rotate_plane", small_model("grassmann").eval(), tokens, 5, 0.7, layer=0)
    fig = whatif_geometry(o).figure
    np.testing.assert_allclose(np.asarray(next(t for t in fig.data if t.name == "after").y),
                               o.geometry["plucker_after"])
    cem = small_model("cem").eval()
    o = catalog.apply("energy_steps", cem, tokens, 5, 4, layer=1)
    fig = whatif_geometry(o, layer=1).figure
    got = np.asarray(next(t for t in fig.data if t.name == "MLP after (T = 4)").y, dtype=float)
    np.testing.assert_allclose(got, o.geometry["energy_after"][1, 1], equal_nan=True)
    o = catalog.apply("ablate_head", small_model("transformer").eval(), tokens, 5, 1, layer=0, head=0)
    with pytest.raises(FigureError):
        whatif_geometry(o)


def test_a_word_problem_outcome_titles_its_guesses_and_effect_by_the_running_product():
    o = _outcome(T=20, at=5)
    o = o.__class__(o.tokens % 6, o.before, o.after, 5, "a test nudge").scored_on({"task": "word-problem", "group": "S3"})
    guesses = whatif_guesses(o, 5, [str(i) for i in range(6)])
    assert "Running product at position 5" in guesses.figure.layout.title.text
    effect = whatif_effect(o, ["x"] * 20).figure
    ds = next(t for t in effect.data if t.name == "surprisal change")
    assert np.isfinite(np.asarray(ds.y, dtype=float)).all()  # the last position has a product to score
    assert "running product" in effect.layout.annotations[1].text


@pytest.mark.parametrize("recovered", [True, False])
def test_the_patching_colour_scale_is_symmetric_so_nothing_restored_is_its_middle(recovered):
    """Plotly ignores zmid beside zmin/zmax: the range itself is symmetric about 0, whatever the data
    (here nothing below 0, where a range from the data's minimum put 0 at a saturated end)."""
    from geomlab.figures.whatif import patching_heatmap
    from geomlab.whatif.patching import Sweep

    values = np.array([[0.0, 0.2, 0.9], [0.0, 0.0, 0.4]]) * 3.0
    sweep = Sweep(values, ["a", "b"], np.arange(3), "logit_diff", clean=3.0, corrupt=0.0, target_position=2,
                  target_token=1)
    heat = patching_heatmap(sweep, list("xyz"), recovered=recovered).figure.data[0]
    assert heat.zmin == -heat.zmax
    assert heat.zmax == pytest.approx(1.0 if recovered else 3.0)  # raw: at least clean - corrupt


def test_an_energy_that_blows_up_keeps_the_plain_runs_range_in_view_and_says_how_far_it_went():
    from geomlab.figures.whatif import whatif_geometry

    before = np.array([[[3.0, 2.5, 2.2], [1.0, 0.8, 0.7]]])  # (layers, blocks, steps)
    after = np.array([[[3.0, 2.5, 2.1, 2.0, 1.9], [1.0, 0.8, 0.7, -4e3, -1.6e10]]])
    o = Outcome(np.zeros(4, dtype=int), np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32), None,
                "T = 4 in layer 0", {"energy_before": before, "energy_after": after})
    chart = whatif_geometry(o, layer=0)
    lo, hi = chart.figure.layout.yaxis.range
    assert lo < 0.7 and hi > 3.0 and lo > -10  # the plain run's 0.7..3.0, not -1.6e10
    assert "reaches -1.6e+10" in chart.caption
    tame = Outcome(o.tokens, o.before, o.after, None, "T = 3", {"energy_before": before, "energy_after": before - 0.1})
    chart = whatif_geometry(tame, layer=0)
    assert chart.figure.layout.yaxis.range is None and "leaves the axis" not in chart.caption


def test_a_swap_sweep_draws_from_the_swapped_token_to_the_target_around_nothing_restored():
    """With the swapped position given, the columns start there (orange line) and end at the target (dashed);
    the raw metric's neutral middle is the corrupted run's value, not 0."""
    from geomlab.figures.whatif import patching_heatmap
    from geomlab.whatif.patching import Sweep

    values = np.full((2, 6), 4.30)
    values[1, 3:5] = [4.20, 4.45]
    sweep = Sweep(values, ["a", "b"], np.arange(10, 16), "logit_diff", clean=4.28, corrupt=4.30,
                  target_position=14, target_token=1)
    chart = patching_heatmap(sweep, list("abcdefghijklmnop"), recovered=False, swapped=12)
    heat = chart.figure.data[0]
    assert list(heat.x) == [12, 13, 14]
    assert (heat.zmin + heat.zmax) / 2 == pytest.approx(4.30) and heat.zmax == pytest.approx(4.45)
    shapes = {s.name: s for s in chart.figure.layout.shapes}
    assert shapes["cursor"].x0 == 12 and shapes["target"].x0 == 14 and shapes["target"].line.dash == "dash"
    assert "before the swapped token at 12" in chart.caption


def test_a_whole_text_interventions_effect_follows_the_pages_cursor():
    o = _outcome()
    o = o.__class__(o.tokens, o.before, o.after, None, "a head ablated")
    fig = whatif_effect(o, ["x"] * 300, cursor=20).figure
    x = np.asarray(next(t for t in fig.data if t.name == "KL").x)
    assert x[0] <= 20 <= x[-1] and x[-1] < 299  # the window is the cursor's, not the text's end
    assert {s.x0 for s in fig.layout.shapes if s.name == "cursor"} == {20}
    assert all(s.layer == "below" for s in fig.layout.shapes if s.name == "cursor")  # its bar stays in view
    with pytest.raises(FigureError):
        whatif_effect(o, ["x"] * 300, cursor=300)


def test_a_swap_that_hardly_matters_stays_pale_and_blue_means_toward_the_clean_run():
    from geomlab.figures.whatif import patching_heatmap
    from geomlab.whatif.patching import Sweep

    values = np.full((1, 4), 1.607)
    values[0, 2] = 1.606
    sweep = Sweep(values, ["state"], np.arange(4), "logit_diff", clean=1.606, corrupt=1.607, target_position=3,
                  target_token=1)
    chart = patching_heatmap(sweep, list("abcd"), recovered=False, swapped=1)
    heat = chart.figure.data[0]
    assert heat.zmax - heat.zmin == pytest.approx(0.1)  # the 0.001 difference is a pale cell, not a full colour
    assert heat.reversescale is False  # clean below corrupted: lower values are the restored ones
    assert "With one recurrent state" in chart.caption


def test_the_two_plain_runs_of_the_energy_chart_are_drawn_and_named_apart():
    """Each sub-block's plain run (before) has a line of its own, not one grey dotted style for both, and a
    legend name that says which block and which run it is, with the steps each ran."""
    from geomlab.figures.whatif import whatif_geometry

    before = np.array([[[3.0, 2.5, 2.2], [1.0, 0.8, 0.7]]])  # (layers, blocks, steps)
    after = np.array([[[3.0, 2.5, 2.1, 2.0, 1.9], [1.0, 0.8, 0.7, 0.6, 0.5]]])
    o = Outcome(np.zeros(4, dtype=int), np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32), None,
                "T = 4 in layer 0", {"energy_before": before, "energy_after": after,
                                     "steps_before": np.array([2]), "steps_after": np.array([4])})
    fig = whatif_geometry(o, layer=0).figure
    names = [t.name for t in fig.data]
    assert names == ["attention before (T = 2)", "attention after (T = 4)", "MLP before (T = 2)",
                     "MLP after (T = 4)"]
    style = {t.name: (t.line.color, t.line.dash, t.marker.symbol) for t in fig.data}
    assert len(set(style.values())) == 4  # no two lines alike
    att, mlp = style["attention before (T = 2)"], style["MLP before (T = 2)"]
    assert att[0] != mlp[0] and att[1] != mlp[1]  # another shade and another dash
    for block in ("attention", "MLP"):  # a plain run is a pale shade of its block's colour, not solid
        b, a = style[f"{block} before (T = 2)"], style[f"{block} after (T = 4)"]
        assert b[0] != a[0] and b[1] != "solid" and a[1] == "solid"
    np.testing.assert_allclose(np.asarray(fig.data[2].y, dtype=float), before[0, 1])


def test_an_effect_of_nothing_says_so_in_its_caption():
    o = _outcome(T=40, at=20)
    same = Outcome(o.tokens, o.before, o.before.copy(), 20, "a test nudge")
    cap = whatif_effect(same, [str(i) for i in range(40)], cursor=20).caption
    assert "changed nothing" in cap and "largest" not in cap
    assert "changed nothing" not in whatif_effect(o, [str(i) for i in range(40)], cursor=20).caption


def test_the_effect_puts_the_cursor_line_under_its_bars_unless_asked_for_on_top():
    o = _outcome(T=40, at=20)
    labels = [str(i) for i in range(40)]
    for on_top, layer in ((False, "below"), (True, "above")):
        fig = whatif_effect(o, labels, cursor=20, line_on_top=on_top).figure
        lines = [sh for sh in fig.layout.shapes if sh.name == "cursor"]
        assert len(lines) == 2 and {sh.layer for sh in lines} == {layer}
