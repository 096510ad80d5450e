"""share_scales: two drawings of one figure on one colour scale and one value axis (Compare)."""

import numpy as np
import plotly.graph_objects as go

from geomlab.figures.shared_scales import PAD, share_scales


def _heat(z, **kw):
    return go.Figure(go.Heatmap(z=z, **kw))


def test_heatmaps_with_different_ranges_end_on_one_range_covering_both():
    a = _heat([[0.0, 2.0], [1.0, 10.0]])
    b = _heat([[-5.0, 50.0], [np.nan, 100.0]])  # a NaN cell is ignored, not the whole range
    sa, sb = share_scales(a, b)
    for f in (sa, sb):
        assert (f.data[0].zmin, f.data[0].zmax) == (-5.0, 100.0)
        assert f.data[0].zauto is False
    # copies: the inputs keep their own (automatic) scales
    assert a.data[0].zmin is None and b.data[0].zmax is None


def test_a_diverging_map_keeps_its_middle_at_zero_and_is_symmetric():
    a = _heat([[-10.0, 10.0]], zmid=0, zmin=-10, zmax=10)
    b = _heat([[-30.0, 100.0]], zmid=0, zmin=-100, zmax=100)
    sa, sb = share_scales(a, b)
    for f in (sa, sb):
        t = f.data[0]
        assert (t.zmin, t.zmid, t.zmax) == (-100.0, 0.0, 100.0)


def test_panels_given_one_range_keep_sharing_it():
    # two panels of side A on one explicit range (+-2), side B's panels on +-7 and data up to 7
    a = go.Figure([go.Heatmap(z=[[1.0, -2.0]], zmin=-2, zmax=2, zmid=0),
                   go.Heatmap(z=[[0.5]], zmin=-2, zmax=2, zmid=0, xaxis="x2", yaxis="y2")])
    b = go.Figure([go.Heatmap(z=[[7.0]], zmin=-7, zmax=7, zmid=0),
                   go.Heatmap(z=[[-3.0]], zmin=-7, zmax=7, zmid=0, xaxis="x2", yaxis="y2")])
    sa, sb = share_scales(a, b)
    assert {(t.zmin, t.zmax) for f in (sa, sb) for t in f.data} == {(-7.0, 7.0)}


def test_a_coloraxis_is_shared():
    a = go.Figure(go.Heatmap(z=[[0.0, 0.2]], coloraxis="coloraxis"))
    a.update_layout(coloraxis={"cmin": 0, "cmax": 0.2})
    b = go.Figure(go.Heatmap(z=[[0.0, 0.9]], coloraxis="coloraxis"))
    b.update_layout(coloraxis={"cmin": 0, "cmax": 0.9})
    sa, sb = share_scales(a, b)
    assert [(f.layout.coloraxis.cmin, f.layout.coloraxis.cmax) for f in (sa, sb)] == [(0.0, 0.9)] * 2


def test_line_charts_get_one_y_range_over_both_sides():
    a = go.Figure(go.Scatter(x=[0, 1, 2], y=[1.0, 3.0, 2.0], mode="lines"))
    b = go.Figure(go.Scatter(x=[0, 1, 2, 3, 4], y=[-20.0, 40.0, 0.0, 5.0, np.nan], mode="lines"))
    sa, sb = share_scales(a, b)
    lo, hi = -20.0, 40.0
    pad = PAD * (hi - lo)
    for f in (sa, sb):
        assert list(f.layout.yaxis.range) == [lo - pad, hi + pad]
    assert a.layout.yaxis.range is None


def test_second_y_axes_are_shared_axis_by_axis():
    def fig(y1, y2):
        f = go.Figure([go.Scatter(y=y1), go.Scatter(y=y2, yaxis="y2")])
        f.update_layout(yaxis2={"overlaying": "y", "side": "right"})
        return f
    sa, sb = share_scales(fig([0.0, 1.0], [100.0, 200.0]), fig([0.0, 2.0], [50.0, 100.0]))
    for f in (sa, sb):
        assert list(f.layout.yaxis.range) == [0 - 0.1, 2 + 0.1]
        assert list(f.layout.yaxis2.range) == [50 - 7.5, 200 + 7.5]


def test_a_map_s_position_axis_is_not_given_a_value_range():
    a = _heat([[1.0, 2.0]])
    a.update_yaxes(autorange="reversed", scaleanchor="x")
    b = _heat([[3.0, 4.0]])
    b.update_yaxes(autorange="reversed", scaleanchor="x")
    sa, sb = share_scales(a, b)
    assert sa.layout.yaxis.range is None and sb.layout.yaxis.autorange == "reversed"


def test_figures_whose_traces_do_not_pair_up_are_left_alone():
    a = go.Figure([go.Heatmap(z=[[0.0, 1.0]])])
    b = go.Figure([go.Heatmap(z=[[0.0, 9.0]]), go.Scatter(y=[1.0, 2.0])])
    sa, sb = share_scales(a, b)
    assert sa.to_plotly_json() == a.to_plotly_json() and sb.to_plotly_json() == b.to_plotly_json()
    c = go.Figure(go.Scatter(y=[0.0, 1.0]))
    sa, sc = share_scales(a, c)  # same count, different types
    assert sa.data[0].zmin is None and sc.layout.yaxis.range is None


def test_dicts_are_accepted_and_strings_do_not_break_it():
    a = {"data": [{"type": "bar", "x": ["p", "q"], "y": [2.0, 3.0]}], "layout": {}}
    b = {"data": [{"type": "bar", "x": ["p", "q"], "y": [1.0, 5.0]}], "layout": {}}
    sa, sb = share_scales(a, b)
    assert list(sa.layout.yaxis.range) == [0 - 0.25, 5 + 0.25] == list(sb.layout.yaxis.range)
    s1, s2 = share_scales(go.Figure(go.Scatter(y=["a", "b"])), go.Figure(go.Scatter(y=["c"])))
    assert s1.layout.yaxis.range is None and s2.layout.yaxis.range is None


def test_a_line_per_layer_still_shares_the_axis_when_the_depths_differ():
    a = go.Figure([go.Scatter(y=[1.0, 2.0]), go.Scatter(y=[3.0, 4.0])])  # two layers
    b = go.Figure([go.Scatter(y=[0.0, 1.0]), go.Scatter(y=[1.0, 9.0]), go.Scatter(y=[2.0, 2.0])])  # three
    sa, sb = share_scales(a, b)
    assert list(sa.layout.yaxis.range) == [-0.45, 9.45] == list(sb.layout.yaxis.range)


def test_an_axis_drawn_from_zero_keeps_zero_as_its_floor():
    a = go.Figure(go.Scatter(y=[0.5, 2.0]))
    a.update_yaxes(rangemode="tozero")
    b = go.Figure(go.Scatter(y=[1.0, 10.0]))
    b.update_yaxes(rangemode="tozero")
    sa, sb = share_scales(a, b)
    assert list(sa.layout.yaxis.range) == [0.0, 10.0 + PAD * 9.5] == list(sb.layout.yaxis.range)
