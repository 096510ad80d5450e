"""Informative defaults: the shared tick thinning, the figures a one-layer model opens on, and captions that
say how much a curve varies (checked against the numbers drawn, and on the bundled checkpoints)."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
import plotly.graph_objects as go

from geomlab import figures
from geomlab.bench import available
from geomlab.bench import defaults as bench_defaults
from geomlab.figures import _spread, _style
from geomlab.teach import views
from helpers.models import get_trace, small_model

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"


# ---------------------------------------------------------------- the tick helper
@pytest.mark.parametrize("max_ticks", [1, 2, 5, 12])
def test_thin_ticks_labels_at_most_n_from_the_first_evenly(max_ticks):
    for n in range(0, 140):
        cats = [f"c{i}" for i in range(n)]
        t = _style.thin_ticks(cats, max_ticks)
        assert t["tickmode"] == "array" and t["ticktext"] == t["tickvals"]
        assert len(t["tickvals"]) <= max_ticks
        if not n:
            assert t["tickvals"] == []
            continue
        # the smallest step k that keeps the labels within max_ticks, counted independently
        k = next(k for k in range(1, n + 1) if len(range(0, n, k)) <= max_ticks)
        assert t["tickvals"] == cats[::k] and t["tickvals"][0] == "c0"
        if n >= max_ticks:  # a readable number, not a token few: at least half the allowed labels
            assert len(t["tickvals"]) >= max_ticks / 2


def test_thin_ticks_rejects_no_labels():
    with pytest.raises(ValueError):
        _style.thin_ticks(["a", "b"], 0)


def test_plucker_heatmap_labels_a_readable_share_of_its_66_columns():
    """Rank 12: 66 coordinates; the old axis named 3 of them. Now 6..12 labels from the first, every column
    still a category (named on hover by %{x})."""
    model = small_model("grassmann", d_model=24, rank=12, offsets=[1, 2], n_layers=1)
    from helpers.models import TEXT, VOCAB
    from geomlab.trace import trace_text

    tr = trace_text(model, VOCAB, TEXT)
    fig = figures.plucker_heatmap(tr, layer=0, slot=0, cursor=3).figure
    heat = fig.data[0]
    names = list(heat.x)
    assert len(names) == 66 == len(set(names))
    ticks = list(fig.layout.xaxis.tickvals)
    assert 6 <= len(ticks) <= 12 and ticks[0] == names[0] and set(ticks) <= set(names)
    assert "%{x}" in heat.hovertemplate


# ---------------------------------------------------------------- default figures of a one-layer model
def _heatmap_rows(chart) -> list[int]:
    return [np.shape(t.z)[0] for t in chart.figure.data if t.type == "heatmap"]


def test_one_layer_tangents_open_on_no_one_row_heatmap():
    tr = get_trace("osm-rnn-SO3")
    assert views.n_layers(tr) == 1
    # the layers x positions heatmap of one layer is one row (why it is not opened on)
    assert set(_heatmap_rows(figures.tangent_heatmap(tr, cursor=2))) == {1}
    names = [f.name for f in views.default_figures("tangents", tr)]
    assert "tangent_heatmap" not in names and "generator_heatmap" in names
    assert "tangent_heatmap" in [f.name for f in views.more_figures("tangents", tr)]
    built = views.build_view(tr, "tangents", views.default_controls("tangents", tr), cursor=2)
    for name in names:
        assert all(r > 1 for r in _heatmap_rows(built[name])), name


def test_several_layers_keep_the_layer_heatmap_first():
    tr = get_trace("osmformer-U3")
    names = [f.name for f in views.default_figures("tangents", tr)]
    assert names[:2] == ["tangent_lines", "tangent_heatmap"] and "generator_heatmap" not in names
    assert min(_heatmap_rows(figures.tangent_heatmap(tr, cursor=2))) == 2


# ---------------------------------------------------------------- captions that say how much a curve varies
def test_variation_is_the_coefficient_of_variation_per_row():
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 2.0, size=(3, 17))
    a[1, 4] = np.nan
    a[2, :] = np.nan
    a[2, 0] = 1.0
    got = _spread.variation(a)
    for i in range(2):
        row = [float(v) for v in a[i] if not math.isnan(v)]
        assert got[i] == pytest.approx(statistics.pstdev(row) / abs(statistics.fmean(row)), rel=1e-12)
    assert math.isnan(got[2])
    assert _spread.variation([0.0, 0.0, 0.0])[0] == 0.0 and _spread.variation([-1.0, 1.0])[0] == math.inf
    assert _spread.spread_note(np.full((2, 3), np.nan)) == ""


def _percents(caption: str) -> list[float]:
    m = re.search(r"varies by ([\d.]+)%(?:–([\d.]+)%)? of its mean", caption)
    assert m, caption
    return [float(g) / 100 for g in m.groups() if g]


def test_distance_profile_caption_gives_the_spread_of_the_drawn_step_curves():
    tr = get_trace("osmformer-U3")
    chart = figures.distance_profile(tr, cursor=3)
    fig = chart.figure
    steps = [t for t in fig.data if t.yaxis == "y2"]
    assert len(steps) == views.n_layers(tr)
    cvs = []
    for t in steps:
        y = [float(v) for v in t.y if v is not None and math.isfinite(v)]
        cvs.append(statistics.pstdev(y) / abs(statistics.fmean(y)))
    want = sorted({round(min(cvs), 2), round(max(cvs), 2)})
    assert _percents(chart.caption) == pytest.approx(want, abs=0.006)
    assert "Spikes" not in figures.FIGURES["distance_profile"].explanation.look
    # the step axis zoomed to its curves (from 0 they read as a flat line)
    assert fig.layout.yaxis2.rangemode == "normal" and fig.layout.yaxis.rangemode == "tozero"


def test_plane_distances_caption_gives_the_spread_of_each_row():
    tr = get_trace("grassmann-r3")
    chart = figures.plane_distances(tr, cursor=3)
    z = np.asarray(chart.figure.data[0].z, dtype=float)
    cvs = []
    for row in z:
        y = [float(v) for v in row if math.isfinite(v)]
        cvs.append(statistics.pstdev(y) / abs(statistics.fmean(y)))
    want = sorted({round(min(cvs), 2), round(max(cvs), 2)})
    assert _percents(chart.caption) == pytest.approx(want, abs=0.006)
    assert "Spikes" not in figures.FIGURES["plane_distances"].explanation.look


# ---------------------------------------------------------------- the claims measured on the bundled models
def _bundled(name: str):
    path = ASSETS / name
    if not path.is_dir():
        pytest.skip(f"bundled checkpoint {name} not present")
    from geomlab.checkpoints import io as checkpoint
    from geomlab.trace import trace_text

    ck = checkpoint.load(path)
    ck.model.eval()
    return trace_text(ck.model, ck.vocab, bench_defaults.DEFAULT_TEXT)


def _letters_vs_others(row: np.ndarray, text: str) -> float:
    ok = np.isfinite(row)
    other = np.array([not c.isalpha() for c in text[:len(row)]])
    return float(row[ok & other].mean() / row[ok & ~other].mean())


@pytest.mark.parametrize("name", ["osm-rnn-o-tinyshakespeare", "osmformer-u-tinyshakespeare",
                                  "osmformer-torus-tinyshakespeare", "osmformer-o-linear-tinyshakespeare"])
def test_bundled_osm_steps_are_nearly_flat_as_the_explanation_says(name):
    """The explanation: a trained model turns the state by about the same angle per token (docs/views.md:
    coefficient of variation 4–9 %, spaces and punctuation within ±15 % of letters)."""
    from geomlab.figures.trajectory import step_distances

    tr = _bundled(name)
    d = np.asarray(step_distances(tr, np.arange(tr.n_positions)))
    assert np.nanmax(_spread.variation(d)) <= 0.10
    for row in d:
        assert abs(_letters_vs_others(row, bench_defaults.DEFAULT_TEXT) - 1) < 0.15


def test_bundled_grassmann_rows_vary_as_the_explanation_says():
    from geomlab.figures.grassmann import position_distances

    tr = _bundled("grassmann-tinyshakespeare")
    d = np.asarray(position_distances(tr, 0))
    cv = _spread.variation(d)
    assert 0.05 <= np.nanmin(cv) and np.nanmax(cv) <= 0.25  # docs/views.md: 8–23 %
    for row in d:
        assert abs(_letters_vs_others(row, bench_defaults.DEFAULT_TEXT) - 1) < 0.15


# ---------------------------------------------------------------- the measurement
def test_measure_figure_reads_shape_blanks_spread_and_ticks():
    z = np.arange(12, dtype=float).reshape(3, 4) + 1
    z[0, 0] = np.nan
    y = [1.0, 1.0, 1.0, 5.0]
    fig = go.Figure([go.Heatmap(z=z, x=list("abcd")), go.Scatter(y=y, mode="lines", xaxis="x2", yaxis="y2")])
    fig.update_layout(xaxis={"tickmode": "array", "tickvals": ["a", "c"]})
    m = bench_defaults.measure_figure(fig)
    assert m["heat"] == (3, 4) and m["blank"] == pytest.approx(1 / 12)
    assert m["cv"] == pytest.approx(statistics.pstdev(y) / statistics.fmean(y))
    assert m["ratio"] == pytest.approx(5.0)
    assert m["axes"]["xaxis"] == (2, 4)
    assert "defaults" in available()


def test_bench_default_text_is_the_apps():
    pytest.importorskip("streamlit")
    from app_pages import _data

    assert bench_defaults.DEFAULT_TEXT == _data.DEFAULT_TEXT


def test_plane_distances_say_what_the_slot_is_and_outline_the_chosen_layer():
    """The heatmaps draw every layer, so the Layer control above them seemed to do nothing, and their subtitle
    read "slot 0 (Δ=1, Δ=2)": the subtitle says it in words, and the chosen layer's rows are outlined."""
    tr = get_trace("grassmann-r3")  # offsets (1, 2): slot 0 is Δ = 1 in every layer
    L = tr.n_layers
    fig = figures.plane_distances(tr, cursor=3, layer=L - 1).figure
    top = fig.layout.annotations[0].text
    assert "offset slot 0: planes of pairs (t, t−Δ), Δ = 1 in every layer" in top and "Δ=" not in top
    marks = [s for s in fig.layout.shapes if s.name == "layer"]
    assert [(s.yref, s.y0, s.y1) for s in marks][0] == ("y", L - 1.5, L - 0.5)
    assert list(fig.layout.yaxis.ticktext)[-1] == f"<b>▸ {L - 1}</b>" and list(fig.layout.yaxis.ticktext)[0] == "0"
    assert f"the outlined row (▸) is layer {L - 1}" in figures.plane_distances(tr, cursor=3, layer=L - 1).caption
    assert not [s for s in figures.plane_distances(tr, cursor=3).figure.layout.shapes if s.name == "layer"]
    with pytest.raises(figures.FigureError, match="layer"):
        figures.plane_distances(tr, cursor=3, layer=L)
    assert "layer" in figures.FIGURES["plane_distances"].controls  # the view passes its Layer control


def test_tangent_lines_draw_the_chosen_layer_thick():
    """The update sizes draw every layer, so the Layer control above them seemed to do nothing: the chosen
    layer's lines are thick and its legend entries marked."""
    tr = get_trace("osmformer-U3")
    L = views.n_layers(tr)
    assert L > 1
    fig = figures.tangent_lines(tr, cursor=3, layer=1).figure
    thick = {t.name for t in fig.data if t.line.width == 3.5}
    assert thick == {"▸ layer 1 after mixing", "▸ layer 1 before mixing"}, thick
    assert all(t.line.width == 1.5 for t in fig.data if t.name not in thick)
    assert "the thick lines (▸) are layer 1" in figures.tangent_lines(tr, cursor=3, layer=1).caption
    assert not any("▸" in t.name for t in figures.tangent_lines(tr, cursor=3).figure.data)
    with pytest.raises(figures.FigureError, match="layer"):
        figures.tangent_lines(tr, cursor=3, layer=L)
    assert "layer" in figures.FIGURES["tangent_lines"].controls
