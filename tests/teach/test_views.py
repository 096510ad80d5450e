"""The view registry (geomlab.teach.views): consistent with geomlab.figures, decides which figures apply, builds
figures with only the arguments they take, and drives ``python -m geomlab trace --html``. The app pages'
use of it is checked in tests/test_app.py."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest

from geomlab import figures
from geomlab.checkpoints import io as checkpoint
from geomlab.teach import views
from geomlab.trace import from_record, trace_text

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
TEXT = "ROMEO: But soft, what light"


def test_registry_is_consistent_with_the_figures():
    assert views.check_views() == []
    for view in views.VIEWS.values():
        assert view.figures and view.kinds and view.title and view.short and view.blurb
        assert view.icon.startswith(":material/")
        for name in view.figures:
            assert name in figures.FIGURES
            spec = figures.FIGURES[name]
            assert spec.draw is getattr(figures, name)
            params = set(inspect.signature(spec.draw).parameters)
            # the declared controls are exactly the controls the figure function takes
            assert set(spec.controls) == {c for c in views.CONTROLS if c in params}, spec.name
            if spec.cursor_arg:
                assert spec.cursor_arg in params, spec.name
    per_trace = set(figures.FIGURES) - {"training_curves"}
    assert per_trace == set(views.FIGURE_ORDER)  # every per-trace figure is on some page


def test_check_views_names_problems():
    problems = views.check_views(names={"phase_circle"})
    assert any("'attention_maps' is not declared in geomlab.figures.FIGURES" in p for p in problems)


@pytest.fixture(scope="module")
def traces():
    out = {}
    for name in ("osmformer-o-linear-tinyshakespeare", "cem-t2-tinyshakespeare", "grassmann-tinyshakespeare",
                 "osm-rnn-torus-s5", "transformer-alibi-tinyshakespeare", "lstm-tinyshakespeare"):
        ck = checkpoint.load(ASSETS / name, device="cpu")
        text = TEXT if ck.vocab.level == "char" else "01234 10234 21034 01234"
        out[name] = trace_text(ck.model, ck.vocab, text)
    return out


def test_which_figures_apply(traces):
    osmf = views.figures_for(traces["osmformer-o-linear-tinyshakespeare"])
    assert "attention_maps" in osmf and "torus_angles" not in osmf and "energy_descent" not in osmf
    assert "torus_angles" in views.figures_for(traces["osm-rnn-torus-s5"])
    assert "attention_maps" not in views.figures_for(traces["osm-rnn-torus-s5"])  # an RNN: no attention
    assert views.figures_for(traces["transformer-alibi-tinyshakespeare"]) == ["attention_overview", "attention_maps",
                                                                                "attends_to", "attention_row",
                                                                                "lens_heatmap", "lens_table"]
    assert views.figures_for(traces["lstm-tinyshakespeare"]) == []
    assert [v.slug for v in views.views_of_trace(traces["cem-t2-tinyshakespeare"])] == ["attention", "energy"]
    tr = from_record({"logits": np.zeros((3, 2))}, "newkind", np.arange(3))
    assert views.figures_for(tr) == [] and views.views_of_trace(tr) == []


def test_default_views_and_kinds():
    assert views.default_view("cem").slug == "energy"
    assert views.default_view("osmformer").slug == "trajectories"
    assert views.default_view("transformer").slug == "attention"
    assert views.default_view("grassmann").slug == "planes"
    assert views.default_view("lstm") is None
    assert [v.slug for v in views.views_for_kind("osm-rnn")] == ["trajectories", "tangents"]


def test_controls_come_from_the_trace(traces):
    cem = traces["cem-t2-tinyshakespeare"]
    opts = views.control_options("energy", cem)
    assert opts["block"] == [0, 1]
    assert views.default_controls("energy", cem) == {"layer": views.n_layers(cem) - 1, "block": 0}
    att = views.control_options("attention", cem)
    assert att.get("head", [None])[0] is None
    osm = traces["osmformer-o-linear-tinyshakespeare"]
    assert views.control_options("tangents", osm)["substep"] == [0, 1]
    assert views.control_label("substep", 1) == "grounding" and views.control_label("head", None) == \
        "mean over heads"
    gr = traces["grassmann-tinyshakespeare"]
    # Planes opens on the layer whose output draws most on its planes (the bundled model's first), not the
    # last, whose gate keeps nearly all of its input
    from geomlab.figures.grassmann import most_geometric_layer

    share = (1 - gr.gates.astype(float)).mean(axis=(1, 2))
    assert views.default_controls("planes", gr)["layer"] == most_geometric_layer(gr) == int(share.argmax())
    assert share.argmax() != views.n_layers(gr) - 1
    if "slot" in views.control_options("planes", gr):
        assert views.control_label("slot", 0, gr, {"layer": 0}).startswith(("offset", "slot"))
    # clamping: a layer past the end and a head the trace lacks fall back
    c = views.clamp_controls("attention", cem, {"layer": 99, "head": 99})
    assert c["layer"] == views.n_layers(cem) - 1 and c.get("head") is None
    lo, hi = views.steps_range({"recursion_steps": 2})
    assert (lo, hi) == (1, 16) and views.trained_steps({"inference_recursion_steps": 3}) == 3


def test_build_figure_passes_only_the_arguments_a_figure_takes(traces):
    gr = traces["grassmann-tinyshakespeare"]
    ctl = {"layer": 0, "slot": 0, "head": 3, "block": 1, "substep": 1}  # extra controls are ignored
    for spec in views.view_figures("planes", gr):
        kw = views.figure_kwargs(spec.name, ctl, 2)
        assert set(kw) <= set(spec.controls) | {spec.cursor_arg}
        fig, caption = views.build_figure(gr, spec.name, ctl, 2)
        assert caption
    # the plane interpolation falls back to its default position when the cursor has no plane pair
    fig, _ = views.build_figure(gr, "plane_interpolation", {"layer": 0}, 0)
    assert fig is not None
    with pytest.raises(figures.FigureError):
        views.build_figure(gr, "energy_descent", {}, 0)


@pytest.mark.parametrize("slug", list(views.VIEWS))
def test_every_view_builds_for_a_fitting_trace(traces, slug):
    tr = next(t for t in traces.values() if t.kind in views.VIEWS[slug].kinds)
    built = views.build_view(tr, slug, cursor=3)
    assert list(built) == [f.name for f in views.view_figures(slug, tr)]


def test_trace_html_writes_the_registry_figures(tmp_path):
    from geomlab.commands import cli

    out = tmp_path / "views"
    rc = cli.main(["trace", str(ASSETS / "cem-t2-tinyshakespeare"), "--text", TEXT,
                   "--out", str(tmp_path / "t.npz"), "--html", str(out), "--cursor", "4"])
    assert rc == 0
    ck = checkpoint.load(ASSETS / "cem-t2-tinyshakespeare", device="cpu")
    tr = trace_text(ck.model, ck.vocab, TEXT)
    expected = {f.name for v in views.views_of_trace(tr) for f in views.view_figures(v.slug, tr)}
    assert sorted(p.stem for p in out.glob("*.html") if p.stem != "index") == sorted(expected)
    index = (out / "index.html").read_text()
    assert "CEM energy" in index and "Attention similarity" in index and 'href="energy_descent.html"' in index


def test_trace_html_captions_say_nothing_of_the_app_s_controls(tmp_path):
    """A static page has no token cursor to move and no "More figures" switch: the captions the app shows
    (which say both) lose those sentences in ``trace --html`` (a trial user followed them there)."""
    from geomlab.commands import cli

    out = tmp_path / "views"
    assert cli.main(["trace", str(ASSETS / "osm-rnn-o-tinyshakespeare"), "--text", TEXT, "--html", str(out)]) == 0
    ck = checkpoint.load(ASSETS / "osm-rnn-o-tinyshakespeare", device="cpu")
    tr = trace_text(ck.model, ck.vocab, TEXT)
    app = " ".join(f.caption for v in views.views_of_trace(tr) for f in views.build_view(tr, v.slug).values())
    assert "token cursor" in app and "More figures" in app  # what the app says, so the check below can fail
    index = (out / "index.html").read_text()
    assert "token cursor" not in index and "More figures" not in index
    assert "projected on their first two principal components" in index  # the captions themselves are there


# ---------------------------------------------------------------- curated default sets
def test_every_view_opens_on_a_small_default_set(traces):
    """Each view opens on at most MAX_DEFAULT (4) figures that apply to the trace; the rest are "more";
    both together are exactly the view's applicable figures, in display order, and no 3-D scene is a
    default (their redraw cost)."""
    assert views.MAX_DEFAULT <= 4
    for slug, view in views.VIEWS.items():
        assert any(figures.FIGURES[name].default for name in view.figures), slug
        for tr in traces.values():
            if not views.view_figures(slug, tr):
                continue
            default = views.default_figures(slug, tr)
            more = views.more_figures(slug, tr)
            assert 1 <= len(default) <= views.MAX_DEFAULT, (slug, tr.kind)
            assert all(views.applies(tr, f.name) for f in default + more)
            assert [f.name for f in default] + [f.name for f in more] != []
            assert sorted(f.name for f in default + more) == sorted(f.name for f in views.view_figures(slug, tr))
            assert not {f.name for f in default} & {"pca_trajectory", "so3_frame", "plane_sphere",
                                                  "plane_interpolation"}, (slug, tr.kind)
    torus = traces["osm-rnn-torus-s5"]
    names = [f.name for f in views.default_figures("trajectories", torus)]
    # the torus angles (a colour per angle) replace the redundant phase timeline and eigenvalue circle (on the
    # torus the eigenvalues are the diagonal entries), which go under "more"
    assert names == ["pca_projection", "distance_profile", "torus_angles"]
    assert {"phase_timeline", "phase_circle"} <= {f.name for f in views.more_figures("trajectories", torus)}
    other = traces["osmformer-o-linear-tinyshakespeare"]
    assert [f.name for f in views.default_figures("trajectories", other)][-1] == "phase_timeline"
    for view in views.VIEWS.values():  # a replaced figure is in the same view
        for name in view.figures:
            assert set(figures.FIGURES[name].replaces) <= set(view.figures), name


def test_every_figure_takes_the_page_cursor(traces):
    """One cursor per page: every figure of every view receives the page's cursor (the 3-D scenes too) and
    none comes with an animation (frames, a slider or Play buttons) of its own."""
    for slug, view in views.VIEWS.items():
        for name in view.figures:
            assert figures.FIGURES[name].cursor_arg is not None, name
        tr = next(t for t in traces.values() if t.kind in view.kinds)
        for name, (fig, _) in views.build_view(tr, slug, cursor=3).items():
            assert not fig.frames and not fig.layout.sliders and not fig.layout.updatemenus, name


def test_every_figure_has_a_short_readable_label():
    """"More figures" lists labels, not identifiers: one distinct label per figure, no underscores."""
    specs = {name: figures.FIGURES[name] for v in views.VIEWS.values() for name in v.figures}
    assert set(specs) == set(figures.FIGURES)
    labels = [f.label for f in specs.values()]
    assert len(set(labels)) == len(labels) and not any("_" in x for x in labels)


def test_match_layer_maps_by_relative_depth():
    from decimal import ROUND_HALF_UP, Decimal
    from fractions import Fraction

    import pytest

    assert views.match_layer(1, 2, 4) == 3 and views.match_layer(0, 2, 4) == 0  # first to first, last to last
    assert views.match_layer(2, 3, 2) == 1 and views.match_layer(1, 3, 2) == 1  # the middle of 3 rounds up
    assert views.match_layer(3, 4, 3) == 2 and views.match_layer(1, 4, 3) == 1 and views.match_layer(2, 4, 3) == 1
    for n in range(1, 7):
        assert [views.match_layer(l, n, n) for l in range(n)] == list(range(n))  # equal counts: unchanged
        assert views.match_layer(0, 1, n) == 0 and views.match_layer(n - 1, n, 1) == 0  # one layer: layer 0
    for n_from in range(2, 8):
        for n_to in range(2, 8):
            for l in range(n_from):
                exact = Fraction(l * (n_to - 1), n_from - 1)
                want = int(Decimal(exact.numerator / exact.denominator).quantize(Decimal(1), ROUND_HALF_UP))
                assert views.match_layer(l, n_from, n_to) == want, (l, n_from, n_to)
    with pytest.raises(ValueError):
        views.match_layer(0, 0, 3)
