"""Line charts along the token positions answer a click anywhere in a position's column: every figure whose
click picks a position and that draws lines over a position axis hovers by x with no distance cutoff
(plotly's "closest" picks a point only within 20 px of it: a click above a line would choose nothing)."""

from __future__ import annotations

import pytest

from geomlab.figures.catalog import FIGURES
from geomlab.teach import views
from helpers.models import get_trace

KINDS = ["osm-rnn-SO3", "osmformer-U3", "cem", "grassmann-r3"]


def _lines_along_positions(fig) -> bool:
    """Whether a trace of ``fig`` is a line over an x axis titled as a position (``"position t (token)"``,
    ``"key position j"``; a shared axis's title stands on its lowest panel)."""
    lay = fig.layout.to_plotly_json()
    titled = any("position" in ((ax.get("title") or {}).get("text") or "")
                 for k, ax in lay.items() if k.startswith("xaxis") and isinstance(ax, dict))
    return titled and any(t.type == "scatter" and "lines" in (t.mode or "") for t in fig.data)


@pytest.mark.parametrize("kind", KINDS)
def test_position_line_charts_pick_the_clicked_column(kind):
    charts = views.all_figures(get_trace(kind), cursor=5)
    found = {name for name, (fig, _) in charts.items()
             if FIGURES[name].click == "position" and _lines_along_positions(fig)}
    assert found, kind
    for name in found:
        lay = charts[name].figure.layout
        assert lay.hovermode in ("x", "x unified") and lay.hoverdistance == -1, (name, lay.hovermode)
    heatmaps = {name for name, (fig, _) in charts.items() if all(t.type == "heatmap" for t in fig.data)}
    assert not any(charts[n].figure.layout.hovermode == "x" for n in heatmaps)  # a map keeps its cells
