"""What the live chart sends (``app_pages._live_chart.figure_json``): traces and layout apart, without the
caption kept in ``layout.meta``, computed once per figure object and never carried into a changed copy."""

from __future__ import annotations

import copy
import json

import plotly.graph_objects as go

from app_pages._live_chart import figure_json


def _fig() -> go.Figure:
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[3, 1, 2]))
    fig.update_layout(meta={"caption": "three points"}, shapes=[{"type": "line", "x0": 1, "x1": 1, "y0": 0, "y1": 1}])
    return fig


def test_traces_and_layout_travel_apart_without_the_caption():
    out = figure_json(_fig())
    assert json.loads(out["data"])[0]["type"] == "scatter"
    layout = json.loads(out["layout"])["layout"]
    assert "meta" not in layout and layout["shapes"][0]["x0"] == 1


def test_the_json_is_made_once_per_figure_and_a_changed_copy_gets_its_own():
    fig = _fig()
    first = figure_json(fig)
    assert figure_json(fig) is first
    moved = copy.deepcopy(fig)
    moved.update_layout(shapes=[{"type": "line", "x0": 2, "x1": 2, "y0": 0, "y1": 1}])
    again = figure_json(moved)
    assert again is not first and again["data"] == first["data"]
    assert json.loads(again["layout"])["layout"]["shapes"][0]["x0"] == 2


def test_what_is_kept_on_a_cached_figure_is_charged_to_its_cache_entry():
    from geomlab.core.cache import ByteLRU, figure_nbytes

    fig = _fig()
    cache = ByteLRU(budget=10**7)
    cache.put("k", fig)
    before = cache.stats().nbytes
    fig.__dict__["_geomlab_grown"] = lambda: cache.remeasure("k")
    out = figure_json(fig)
    assert figure_nbytes(fig) >= before + len(out["data"]) + len(out["layout"])
    assert cache.stats().nbytes == figure_nbytes(fig) > before
