"""A phone's copies of the figures (``app_pages/_widgets.chart`` drawing ``app_pages/_relayout.phone_copy``) on
the real figures of bundled checkpoints: the torus angles' two panels stand under each other (side by side the square torus was
~130 px wide, its y-axis title over the heatmap and the two subplot titles ran together), a row's repeated
y-axis titles are dropped (the CEM energy grid's right column "Δε (a.u.)" ran into the left panels), and a
desktop gets the cached figure itself, untouched."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app_pages import _relayout, _widgets
from geomlab.checkpoints import io as checkpoint
from geomlab.teach.views import build_view
from geomlab.trace import trace_text

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
TEXT = "ROMEO: But soft, what light through yonder window breaks?"


@pytest.fixture(scope="module")
def views() -> dict:
    """``{figure name: Chart}`` of the torus OSMFormer's trajectories and the CEM model's energy page."""
    names = {"osmformer-torus-tinyshakespeare": "trajectories", "cem-t2-tinyshakespeare": "energy"}
    if not all((ASSETS / n).is_dir() for n in names):
        pytest.skip("bundled checkpoints not present")
    out: dict = {}
    for name, slug in names.items():
        ck = checkpoint.load(ASSETS / name)
        out.update(build_view(trace_text(ck.model, ck.vocab, TEXT), slug, cursor=5))
    return out


def drawn(fig, phone: bool, monkeypatch, narrow: bool = False) -> tuple:
    """The figure ``chart`` hands to ``live_chart`` (phone or desktop) and its layout as plotly JSON."""
    got = []
    monkeypatch.setattr(_widgets, "is_phone", lambda: phone)
    monkeypatch.setattr(_widgets, "live_chart", lambda f, **kw: got.append(f))
    _widgets.chart(fig, key="k", narrow=narrow)
    return got[0], got[0].layout.to_plotly_json()


def ytitle(lay: dict, axis: str) -> str | None:
    return (lay[axis].get("title") or {}).get("text")


def test_on_a_phone_the_torus_panels_stand_under_each_other(views, monkeypatch):
    fig = views["torus_angles"].figure
    before = copy.deepcopy(fig.layout.to_plotly_json())
    _, lay = drawn(fig, True, monkeypatch)
    assert fig.layout.to_plotly_json() == before  # the cached figure is shared: changed only in a copy
    # each panel at the full width, the heatmap above the torus with a gap for its ticks and axis title
    assert list(lay["xaxis"]["domain"]) == list(lay["xaxis2"]["domain"]) == [0, 1]
    top, bottom = lay["yaxis"]["domain"], lay["yaxis2"]["domain"]
    plot = lay["height"] - lay["margin"]["t"] - lay["margin"]["b"]
    assert top[1] == 1 and bottom[0] == 0
    assert (top[0] - bottom[1]) * plot == pytest.approx(_relayout.PHONE_GAP)
    for lo, hi in (top, bottom):
        assert (hi - lo) * plot == pytest.approx(_relayout.PHONE_PANEL)
    # each subplot title centred over its own panel, not side by side in one line
    titles = {a["text"]: a for a in lay["annotations"]}
    heat, torus = titles["each angle φ<sub>k</sub>"], titles["flat torus (φ<sub>1</sub>, φ<sub>2</sub>)"]
    assert heat["x"] == torus["x"] == 0.5
    assert (heat["y"], torus["y"]) == (pytest.approx(top[1]), pytest.approx(bottom[1]))
    # the axis titles stay (they name different things), the square torus stays square
    assert (ytitle(lay, "yaxis"), ytitle(lay, "yaxis2")) == ("angle k", "φ<sub>2</sub> (rad)")
    assert lay["yaxis2"]["scaleanchor"] == "x2"


def test_on_a_phone_a_row_names_its_y_axis_once(views, monkeypatch):
    fig = views["energy_descent"].figure
    desk = fig.layout.to_plotly_json()
    _, lay = drawn(fig, True, monkeypatch)
    rows: dict = {}
    for k, a in desk.items():
        if k.startswith("yaxis"):
            rows.setdefault(tuple(a["domain"]), []).append(k)
    pairs = [sorted(r, key=lambda k: desk["xaxis" + desk[k]["anchor"][1:]]["domain"][0]) for r in rows.values()]
    assert sum(len(p) == 2 for p in pairs) == 4  # L0..L3: attention | MLP
    for p in pairs:
        assert ytitle(lay, p[0]) == ytitle(desk, p[0]) and ytitle(lay, p[0])  # the row's first keeps it
        for k in p[1:]:
            assert ytitle(desk, k) == ytitle(desk, p[0]) == "Δε (a.u.)" and not ytitle(lay, k)
    assert ytitle(lay, "yaxis9") == "‖x<sup>t</sup> − h‖/ρ"  # the displacement panel alone in its row
    assert [lay[k]["domain"] for k in lay if k.endswith("axis")] == [desk[k]["domain"] for k in desk
                                                                      if k.endswith("axis")]


def test_different_y_titles_side_by_side_are_kept():
    """Only a repeat is dropped: panels that name different things keep their titles."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=3)
    for c, t in enumerate(("a", "b", "a"), start=1):
        fig.update_yaxes(title_text=t, row=1, col=c)
    assert _relayout.shared_titles(fig.layout.to_plotly_json()) == {"yaxis3": {"title": {"text": ""}}}


def test_a_desktop_gets_the_cached_figures_themselves(views, monkeypatch):
    for name in ("torus_angles", "energy_descent"):
        fig = views[name].figure
        before = fig.layout.to_plotly_json()
        got, lay = drawn(fig, False, monkeypatch)
        assert got is fig and lay == before, name
    lay = views["torus_angles"].figure.layout.to_plotly_json()  # side by side, as before
    assert lay["xaxis"]["domain"][1] < lay["xaxis2"]["domain"][0] and lay["height"] == 480


def test_on_a_phone_panels_side_by_side_get_smaller_titles_and_sparser_ticks(monkeypatch):
    """The tangent heatmap's "attention: before mixing" ran into "attention: after mixing", and the update
    generator's 0..11 ticks overlapped, each panel ~165 px wide."""
    name = "osmformer-u-tinyshakespeare"
    if not (ASSETS / name).is_dir():
        pytest.skip("bundled checkpoints not present")
    ck = checkpoint.load(ASSETS / name)
    built = build_view(trace_text(ck.model, ck.vocab, TEXT), "tangents", cursor=5)
    for fig_name in ("tangent_heatmap", "generator_heatmap"):
        fig = built[fig_name].figure
        desk = fig.layout.to_plotly_json()
        _, lay = drawn(fig, True, monkeypatch)
        assert [a["font"]["size"] for a in desk["annotations"]] == [16] * 4
        assert [a["font"]["size"] for a in lay["annotations"]] == [_relayout.PHONE_SUBTITLE] * 4
        assert [a["text"] for a in lay["annotations"]] == [a["text"] for a in desk["annotations"]]
        every = [k for k in desk if k[1:5] == "axis" and desk[k].get("dtick") == 1]
        assert bool(every) == (fig_name == "generator_heatmap")  # 12 x 12 maps label every row and column
        assert all(lay[k]["dtick"] == 2 for k in every)
        assert drawn(fig, False, monkeypatch)[1] == desk
    # one column (the tangent lines): nothing to do
    assert _relayout.subplot_titles(built["tangent_lines"].figure.layout.to_plotly_json()) == {}


def test_on_a_phone_a_long_subplot_title_is_smaller():
    """The Grassmann deformations' subtitle, two lines the second of which is ~75 characters, is set smaller
    on a phone (the browser wraps it to the chart's width); a short one over one column stays as it is."""
    from plotly.subplots import make_subplots

    long = ("along positions: d<sub>g</sub>(U<sub>t−1</sub>, U<sub>t</sub>)<br>offset slot 0: planes of pairs "
            "(t, t−Δ), Δ = 1, 2, 4, 8, 12, 16 in layers 0 to 5")
    fig = make_subplots(rows=2, cols=1, subplot_titles=(long, "across layers"))
    upd = _relayout.subplot_titles(fig.layout.to_plotly_json())
    first, second = upd["annotations"]
    assert first["font"]["size"] == _relayout.PHONE_SUBTITLE and first["text"] == long
    assert second["font"]["size"] == 16 and second["text"] == "across layers"  # short, one column: as it was


def test_on_a_phone_stacked_maps_keep_their_colour_bars_beside_them(monkeypatch):
    """The plane matrix's left colour bar sat between the two maps, over the right map's ticks."""
    name = "grassmann-tinyshakespeare"
    if not (ASSETS / name).is_dir():
        pytest.skip("bundled checkpoints not present")
    ck = checkpoint.load(ASSETS / name)
    fig = build_view(trace_text(ck.model, ck.vocab, TEXT), "planes", cursor=20)["plane_matrix"].figure
    got, lay = drawn(fig, True, monkeypatch)
    assert list(lay["xaxis"]["domain"]) == list(lay["xaxis2"]["domain"]) == [0, 1]
    for t in got.data:  # each bar right of the plot, as tall as its own map
        lo, hi = lay["yaxis" + (t.yaxis or "y")[1:]]["domain"]
        assert (t.colorbar.x, t.colorbar.y, t.colorbar.len) == (1.02, hi, pytest.approx(hi - lo))
    assert fig.data[0].colorbar.x < 0.5  # the cached figure keeps its side-by-side bars


def test_on_a_phone_stacking_adds_no_colour_bar(monkeypatch):
    """Moving the stacked panels' colour bars once gave the torus's cursor ring a colour bar of its own."""
    name = "osm-rnn-torus-s5"
    if not (ASSETS / name).is_dir():
        pytest.skip("bundled checkpoints not present")
    ck = checkpoint.load(ASSETS / name)
    fig = build_view(trace_text(ck.model, ck.vocab, "01234 10234 21034 01234 41023"), "trajectories",
                              cursor=3)["torus_angles"].figure

    def bars(f) -> list:
        out = []
        for t in f.data:
            j = t.to_plotly_json()
            out += [t.name] if "colorbar" in j or "colorbar" in (j.get("marker") or {}) else []
        return out

    got, _ = drawn(fig, True, monkeypatch)
    assert bars(got) == bars(fig) == ["colour bar", "(φ<sub>1</sub>, φ<sub>2</sub>)"]


def test_on_a_phone_a_3d_scene_takes_the_width_and_a_phone_height(monkeypatch):
    """The 3-D PCA and the Grassmann sphere on a phone had ~250 px blank over the scene (560 px high for a
    ~340 px wide column), the sphere's axis titles cut ("xis 8") and the PCA's colour bar took ~80 px of the
    width; the half-width column's legend under the scene ran into the window note."""
    import math

    names = {"osm-rnn-o-tinyshakespeare": ("trajectories", "pca_trajectory"),
             "grassmann-tinyshakespeare": ("planes", "plane_sphere")}
    if not all((ASSETS / n).is_dir() for n in names):
        pytest.skip("bundled checkpoints not present")
    for name, (slug, key) in names.items():
        ck = checkpoint.load(ASSETS / name)
        fig = build_view(trace_text(ck.model, ck.vocab, TEXT), slug, cursor=20)[key].figure
        before = copy.deepcopy(fig.layout.to_plotly_json())
        got, lay = drawn(fig, True, monkeypatch, narrow=True)
        assert fig.layout.to_plotly_json() == before, name  # the cached figure is untouched
        assert list(lay["scene"]["domain"]["x"]) == [0, 1], name
        eye = lay["scene"]["camera"]["eye"]
        assert math.sqrt(sum(v * v for v in eye.values())) == pytest.approx(_relayout.PHONE_EYE), name
        # no tick labels: ~5 px at a phone's scale, and they ran together at a corner ("-1 -1")
        assert all(lay["scene"][a]["showticklabels"] is False for a in ("xaxis", "yaxis", "zaxis")), name
        assert lay["legend"] == before["legend"], name  # where the desktop's full-width figure has it
        bars = [t.marker.colorbar for t in got.data if "colorbar" in (t.to_plotly_json().get("marker") or {})]
        room = lay["margin"]["t"] + lay["margin"]["b"]
        assert lay["height"] - room == _relayout.PHONE_SCENE, name  # the scene's height, whatever the margins
        assert lay["height"] < before["height"], name
        if name.startswith("osm-rnn"):  # its colour bar lies under the scene, in the room added for it
            assert len(bars) == 1 and bars[0].orientation == "h" and bars[0].yanchor == "top", name
            assert lay["margin"]["b"] == before["margin"]["b"] + _relayout.PHONE_BAR
        else:
            assert not bars
        _, desk = drawn(fig, False, monkeypatch, narrow=True)  # a desktop's half-width column: as before,
        assert desk["legend"]["y"] < 0 and desk["scene"] == before["scene"], name  # the legend under the scene


def test_on_a_phone_a_legend_beside_the_plot_goes_under_it(monkeypatch):
    """Tangent updates on a phone: the six-entry legend right of the plot took ~45% of the width, the plot
    was left ~170 px and its tick labels turned upright."""
    name = "osmformer-o-linear-tinyshakespeare"
    if not (ASSETS / name).is_dir():
        pytest.skip("bundled checkpoints not present")
    ck = checkpoint.load(ASSETS / name)
    figs = build_view(trace_text(ck.model, ck.vocab, TEXT), "tangents", cursor=20)
    fig = figs["tangent_lines"].figure
    before = copy.deepcopy(fig.layout.to_plotly_json())
    assert (before.get("legend") or {}).get("orientation") != "h"  # beside the plot on a desktop
    _, lay = drawn(fig, True, monkeypatch)
    assert fig.layout.to_plotly_json() == before  # the cached figure is untouched
    leg = lay["legend"]
    assert (leg["orientation"], leg["yref"], leg["y"], leg["yanchor"]) == ("h", "container", 0, "bottom")
    grown = lay["height"] - (before.get("height") or 450)
    assert grown >= _relayout.PHONE_LEGEND_ROW + 10 and lay["margin"]["b"] - before["margin"]["b"] == grown
    _, desk = drawn(fig, False, monkeypatch)
    assert desk == before  # a desktop: as it was
    # a figure whose legend is already horizontal, or one without two entries, keeps its layout
    for f in (figs["tangent_lines"].figure.update_layout(legend_orientation="h"),):
        assert _relayout.legend_below(f) == {}
    import plotly.graph_objects as go

    assert _relayout.legend_below(go.Figure(go.Scatter(y=[1, 2], name="one"))) == {}  # Plotly shows none
    # a lone entry shown beside the plot (Trajectories' distances: "state", ~90 px of a phone) goes under too
    rnn = checkpoint.load(ASSETS / "osm-rnn-o-tinyshakespeare")
    dist = build_view(trace_text(rnn.model, rnn.vocab, TEXT), "trajectories", cursor=20)["distance_profile"]
    assert [t.name for t in dist.figure.data if t.showlegend is True] == ["state"]
    _, lay = drawn(dist.figure, True, monkeypatch)
    assert lay["legend"]["orientation"] == "h" and lay["legend"]["yref"] == "container"


def test_a_first_chart_drawn_shorter_keeps_the_gaps_between_its_panels():
    """shorter(): the figure is px high, each gap between stacked panels keeps its height in px (so an
    axis title does not run into the subtitle below), the panels share the loss, subplot titles stay on
    their panels' tops, colour bars with their panels; a figure not taller is returned as it is."""
    from app_pages._relayout import shorter
    from geomlab.teach import views as views_mod
    from tests.helpers.models import get_trace

    tr = get_trace("grassmann-r3")
    fig = views_mod.build_figure(tr, "plane_distances", {}, cursor=2).figure
    lay = fig.to_plotly_json()["layout"]
    m = lay["margin"]
    h0, h1 = lay["height"] - m["t"] - m["b"], 460 - m["t"] - m["b"]
    out = shorter(fig, 460)
    new = out.to_plotly_json()["layout"]
    assert new["height"] == 460 and lay["height"] > 460
    (a0, a1), (b0, b1) = sorted(lay[k]["domain"] for k in ("yaxis", "yaxis2"))
    (c0, c1), (d0, d1) = sorted(new[k]["domain"] for k in ("yaxis", "yaxis2"))
    assert abs((b0 - a1) * h0 - (d0 - c1) * h1) < 1e-6  # the gap in px
    assert (c1 - c0) * h1 < (a1 - a0) * h0 and c0 == 0.0 and d1 == 1.0
    tops = sorted(a["y"] for a in new["annotations"])
    assert abs(tops[0] - c1) < 1e-9 and abs(tops[1] - d1) < 1e-9
    bars = [t.colorbar for t in out.data if t.colorbar is not None and t.colorbar.y is not None]
    assert len(bars) == 2
    for bar, (lo, hi) in zip(sorted(bars, key=lambda b: b.y), [(c0, c1), (d0, d1)]):
        assert lo <= bar.y <= hi  # each colour bar beside its own panel
    small = views_mod.build_figure(get_trace("cem"), "attention_row", {}, cursor=2).figure
    assert shorter(small, 460) is small
