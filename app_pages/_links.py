"""Linked charts: a click on a chart moves the page's cursor (or opens a layer and head), so every chart
follows. Each figure declares what its click chooses (``click=`` in its ``@figure``, read by
:func:`geomlab.figures.catalog.click_target`); this module applies it to the page's state."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages import _state as state
from geomlab.teach import views


def follow_click(key: str, rule: str | None, tr: Any) -> None:
    """``on_click`` of a figure: the click on chart ``key`` moves the page's cursor to the position it
    stands for, or opens the layer and head of the panel clicked (the figure's declared ``click`` rule,
    :func:`geomlab.figures.catalog.click_target`); every chart then follows."""
    from app_pages._live_chart import clicked
    from geomlab.figures.catalog import click_target

    heads = int(views.n_heads(tr)) if tr is not None and rule == "layer_head" else 1
    target = click_target(rule, clicked(key), heads)
    n = int(tr.n_positions) if tr is not None else None
    if "position" in target and (n is None or 0 <= target["position"] < n):
        st.session_state[state.K_POS] = target["position"]
    if "layer" in target:
        st.session_state[state.K_LAYER] = target["layer"]
        st.session_state[state.K_HEAD] = target["head"]
