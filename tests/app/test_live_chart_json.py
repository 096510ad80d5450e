"""What the live chart sends (``app_pages._live_chart.figure_json``): traces and layout apart, without the
caption kept in ``layout.meta``, and the plotly.js bundle the figure needs."""

from __future__ import annotations

import copy
import json

import plotly.graph_objects as go

from app_pages._live_chart import figure_json


def _fig() -> go.Figure:
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[3, 1, 2]))
    fig.update_layout(meta={"caption": "three points", "view": "dots"}, shapes=[{"type": "line", "x0": 1, "x1": 1, "y0": 0, "y1": 1}])
    return fig


def test_traces_and_layout_travel_apart_without_the_caption():
    out = figure_json(_fig())
    assert json.loads(out["data"])[0]["type"] == "scatter"
    layout = json.loads(out["layout"])["layout"]
    assert layout["meta"] == {"view": "dots"} and layout["shapes"][0]["x0"] == 1


def test_a_changed_layout_is_sent_with_the_same_traces():
    fig = _fig()
    first = figure_json(fig)
    moved = copy.deepcopy(fig)
    moved.update_layout(shapes=[{"type": "line", "x0": 2, "x1": 2, "y0": 0, "y1": 1}])
    again = figure_json(moved)
    assert again["data"] == first["data"] and again["layout"] != first["layout"]
    assert json.loads(again["layout"])["layout"]["shapes"][0]["x0"] == 2


def test_a_3d_figure_needs_the_full_bundle():
    assert figure_json(_fig())["bundle"] == "cartesian"
    assert figure_json(go.Figure(go.Scatter3d(x=[0], y=[0], z=[0])))["bundle"] == "full"
