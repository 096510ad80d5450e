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


def _session_charts():
    """A script drawing one live chart whose traces follow ``st.session_state.y`` and whose mark moves on
    every run; the test reads the element's JSON data."""
    import plotly.graph_objects as go
    import streamlit as st

    from app_pages._live_chart import live_chart

    st.session_state.setdefault("runs", 0)
    st.session_state.runs += 1
    fig = go.Figure(go.Scatter(y=st.session_state.get("y", [1, 3, 2])))
    fig.update_layout(shapes=[{"type": "line", "x0": st.session_state.runs, "x1": st.session_state.runs,
                               "y0": 0, "y1": 1}])
    live_chart(fig, key="dots", config={})


def _sent(at) -> dict:
    from app_pages._live_chart import _NAME

    [node] = [n for n in at._tree if n.type == "bidi_component" and n.proto.component_name == _NAME]
    return json.loads(node.proto.json)["figure"]


def test_a_session_is_sent_a_charts_traces_once_until_they_change(monkeypatch):
    """Unchanged traces travel as their digest; changed ones whole; with ``ALWAYS_SEND_TRACES`` (the
    AppTest suite's setting) every run sends them."""
    from streamlit.testing.v1 import AppTest

    from app_pages import _live_chart

    monkeypatch.setattr(_live_chart, "ALWAYS_SEND_TRACES", False)
    at = AppTest.from_function(_session_charts).run()
    first = _sent(at)
    assert json.loads(first["data"])[0]["y"] == [1, 3, 2]
    at.run()
    again = _sent(at)
    assert again["data"] is None and again["digest"] == first["digest"] and again["layout"] != first["layout"]
    at.session_state["y"] = [2, 2, 2]
    at.run()
    changed = _sent(at)
    assert json.loads(changed["data"])[0]["y"] == [2, 2, 2] and changed["digest"] != first["digest"]
    monkeypatch.setattr(_live_chart, "ALWAYS_SEND_TRACES", True)
    at.run()
    assert _sent(at)["data"] == changed["data"]


def test_an_element_carries_a_loader_of_the_charts_script_not_the_script():
    """The chart's 14 KB script is served from its folder, at an address with its version; each element
    carries only a loader that imports it (an element sends its component's script on every run)."""
    from streamlit.testing.v1 import AppTest

    from app_pages import _live_chart

    at = AppTest.from_function(_session_charts).run()
    [node] = [n for n in at._tree if n.type == "bidi_component"]
    loader = node.proto.js_content
    assert len(loader) < 1000 and _live_chart.js_url("") in loader and "import(SRC)" in loader
    assert _live_chart.js_url("lab").startswith("/lab/component/app_pages._live_chart.livechartjs/live_chart.js?v=")
    assert (_live_chart._JS.parent / _live_chart.js_url("").split("/")[-1].split("?")[0]).is_file()
