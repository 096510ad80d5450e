"""The Plotly charts an AppTest run drew, whichever element carries them: ``st.plotly_chart``
(``plotly_chart``) or the app's live chart component (``bidi_component`` named
:data:`app_pages._live_chart._NAME`, its figure in the component's JSON data)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app_pages._live_chart import _NAME as LIVE_CHART


@dataclass(frozen=True)
class Chart:
    """One drawn chart: its element ``key``, the figure as Plotly JSON text (``spec``, as Plotly writes it),
    the Plotly config as JSON text, and the AppTest node."""

    key: str | None
    spec: str
    config: str
    node: Any


def _chart(node: Any) -> Chart | None:
    if node.type == "plotly_chart":
        return Chart(node.key, node.proto.spec, node.proto.config, node)
    if node.type == "bidi_component" and node.proto.component_name == LIVE_CHART:
        data = json.loads(node.proto.json)
        return Chart(node.key, _joined(data["figure"]), json.dumps(data["config"]), node)
    return None


def _joined(parts: dict) -> str:
    """The live chart's two JSON texts (traces, the rest) as one figure's JSON text."""
    rest = parts["layout"].strip()
    return '{"data":' + parts["data"] + ("," + rest[1:] if rest != "{}" else "}")


def charts(where: Any) -> list[Chart]:
    """Every chart under ``where`` (an ``AppTest`` or one of its blocks: ``at.main``, a column), in page
    order."""
    root = getattr(where, "_tree", where)
    return [c for c in map(_chart, root) if c is not None]


def figures(where: Any) -> list[dict]:
    """The figures of :func:`charts` as Plotly JSON dicts."""
    return [json.loads(c.spec) for c in charts(where)]
