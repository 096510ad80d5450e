"""The Train live page's charts (``app_pages._train_charts``) drawn for a run in progress."""

from __future__ import annotations

import json


def _script():
    """Train live's curves for a word-problem run at step 40 of 1,000 (a stand-in run: the charts read only
    its id, spec and snapshot)."""
    from types import SimpleNamespace

    from app_pages import _train_charts

    hist = [{"step": s, "loss": 2.0 - s / 50, "valid_nll": 2.1 - s / 50, "valid_accuracy": s / 50}
            for s in (10, 20, 30, 40)]
    spec = SimpleNamespace(kind="osm-rnn", group="SO", label=lambda: "osm-rnn · S5")
    snap = SimpleNamespace(history=hist, metric_name="accuracy", spec={"data": "word-problem:S5"}, total=1000,
                           active=True, state="running")
    run = SimpleNamespace(run_id="r1", spec=spec, snapshot=lambda: snap)
    _train_charts.curves(run, snap)


def _layouts(at) -> dict[str, dict]:
    """Each live chart's layout as sent, by its title."""
    from app_pages._live_chart import _NAME

    out = {}
    for node in at._tree:
        if node.type == "bidi_component" and node.proto.component_name == _NAME:
            layout = json.loads(json.loads(node.proto.json)["figure"]["layout"])["layout"]
            out[(layout.get("title") or {}).get("text", "")] = layout
    return out


def test_the_accuracy_chart_spans_the_steps_the_curves_show_not_the_planned_total():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_script).run()
    assert not at.exception, at.exception
    layouts = _layouts(at)
    acc = layouts["Validation accuracy"]["xaxis"]
    assert acc["range"] == [0, 40] and acc["dtick"] == 5, acc  # the last validation, whole ticks, not 1,000
    assert len(layouts) == 2
