"""Figures relaid for a narrow screen: a phone's copy of a figure (panels stacked or titled smaller, 3-D
scenes and legends moved; the browser wraps titles to the chart's width) and Compare's half-width column
(fewer ticks, one row's top).

Every function reads a figure's plotly JSON and returns layout updates, or works on a copy (:func:`relaid`):
a cached figure is shared by every session and never changed. No streamlit here: ``_widgets.chart`` decides
when a copy is drawn. Source: design choice (each constant says what it fixed on a ~390 px phone).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import plotly.graph_objects as go

from geomlab.core.cache import IdentityMemo


def relaid(fig: go.Figure, updates: list[dict]) -> go.Figure:
    """A copy of ``fig`` with the layout ``updates`` applied in order, or ``fig`` itself when none changes
    anything (a deep copy: the unvalidated views copy without plotly's validation)."""
    updates = [u for u in updates if u]
    if not updates:
        return fig
    fig = copy.deepcopy(fig)
    for upd in updates:
        fig.update_layout(upd)
    return fig


def _paper_map(domains: list[tuple[float, float]], h_old: float, h_new: float):
    """``y -> y'`` in paper coordinates for a plot area ``h_old`` px high drawn ``h_new`` px high, the gaps
    between the ``domains`` kept in px (the panels take the loss); None when the panels would be left under
    a fifth of their height (then a plain height change is the better choice)."""
    cuts = sorted({0.0, 1.0, *[v for d in domains for v in d]})
    segs = [(a, b, any(d0 <= a and b <= d1 for d0, d1 in domains)) for a, b in zip(cuts, cuts[1:])]
    gaps = sum((b - a) * h_old for a, b, panel in segs if not panel)
    f = (h_new - gaps) / max(h_old - gaps, 1e-9)
    if f < 0.2:
        return None
    ends, acc = [0.0], 0.0
    for a, b, panel in segs:
        acc += (b - a) * h_old * (f if panel else 1.0)
        ends.append(acc / h_new)

    def to_new(y: float) -> float:
        if y <= 0.0:
            return y * h_old / h_new
        if y >= 1.0:
            return 1.0 + (y - 1.0) * h_old / h_new
        for (a, b, _), lo, hi in zip(segs, ends, ends[1:]):
            if a <= y <= b:
                return lo + (hi - lo) * (y - a) / (b - a)
        return y
    return to_new


_SHORTER = IdentityMemo()


def shorter(fig: go.Figure, px: int) -> go.Figure:
    """A copy of ``fig`` drawn ``px`` high (``fig`` itself when it is not taller). Stacked panels keep the gaps
    between them in px and give up their own height: a plain height change shrinks the gaps too, and an
    axis title then runs into the subtitle of the panel below. Subplot titles (paper annotations) and the
    traces' colour bars move with their panels. Made once per figure object and height, while the figure
    lives: the figures of the app's cache are shared by every session and never changed, and a class's
    students all draw the same one (a copy per run was a seventh of a following student's run). Neither
    ``fig`` nor the copy may be changed afterwards. Design choice."""
    return _SHORTER.get(fig, px, lambda: _shorter(fig, px))


def _shorter(fig: go.Figure, px: int) -> go.Figure:
    lay = fig.layout.to_plotly_json()
    h = float(lay.get("height") or 450)
    if h <= px:
        return fig
    margin = lay.get("margin") or {}
    t, b = float(margin.get("t", 100)), float(margin.get("b", 80))
    axes = {k: v for k, v in lay.items() if k.startswith("yaxis") and isinstance(v, dict) and not v.get("overlaying")}
    domains = sorted({tuple(v.get("domain") or (0.0, 1.0)) for v in axes.values()})
    to_new = _paper_map(domains, h - t - b, px - t - b) if len(domains) > 1 and px - t - b > 40 else None
    out = copy.deepcopy(fig)
    out.update_layout(height=px)
    if to_new is None:
        return out
    out.update_layout({k: {"domain": [to_new(d0), to_new(d1)]} for k, v in axes.items()
                       for d0, d1 in [tuple(v.get("domain") or (0.0, 1.0))]})
    for ann in out.layout.annotations or ():
        if ann.yref == "paper" and ann.y is not None:
            ann.y = to_new(float(ann.y))
    for trace in out.data:
        bar = getattr(trace, "colorbar", None)
        if bar is not None and bar.y is not None and bar.len is not None and (bar.lenmode or "fraction") == "fraction":
            lo, hi = float(bar.y) - float(bar.len) / 2, float(bar.y) + float(bar.len) / 2
            if (bar.yanchor or "middle") == "middle":
                lo, hi = to_new(lo), to_new(hi)
                bar.y, bar.len = (lo + hi) / 2, hi - lo
    return out


#: On a phone a subplot title longer than this many visible characters (a ~360 px chart) is set smaller
#: (:func:`subplot_titles`). Design choice.
PHONE_TITLE = 32


def visible_len(text: str) -> int:
    """Characters of ``text`` a reader sees: Plotly's markup tags (``<sub>``, ``<b>``, ...) left out."""
    import re

    return len(re.sub(r"<[^>]*>", "", text))


PHONE_PANEL, PHONE_GAP = 230, 110
"""On a phone a figure whose layout ``meta`` asks for it (``{"phone": "stack"}``: side-by-side panels too
different to share an axis title, e.g. the torus angles' heatmap and square torus) has its panels stacked,
each this many px high (a square map narrows to it), this far apart (the upper panel's tick labels and axis
title, the next subplot title). Design choice."""


def stacked(layout: dict) -> dict:
    """Layout update that puts the panels of a one-row figure (``layout``: its plotly JSON) under each other,
    left to right becoming top to bottom, each at the full width, with their subplot titles over them and the
    height grown to fit: on a phone two panels side by side would be ~130 px wide each."""
    xs = sorted((a["domain"][0], k) for k, a in layout.items() if k.startswith("xaxis") and a.get("domain"))
    plot = len(xs) * PHONE_PANEL + (len(xs) - 1) * PHONE_GAP
    margin = layout.get("margin") or {}
    anns = [dict(a) for a in layout.get("annotations") or []]
    upd: dict = {"height": plot + margin.get("t", 60) + margin.get("b", 50), "annotations": anns}
    for i, (_, xk) in enumerate(xs):
        above = i * (PHONE_PANEL + PHONE_GAP)  # px above the panel in the plot area
        top = 1 - above / plot
        upd[xk] = {"domain": [0, 1]}
        upd["yaxis" + layout[xk].get("anchor", "y")[1:]] = {"domain": [1 - (above + PHONE_PANEL) / plot, top]}
        centre = sum(layout[xk]["domain"]) / 2
        for a in anns:  # the panel's subplot title: centred over it on the paper
            if a.get("yref") == "paper" and abs(a.get("x", -1) - centre) < 1e-6:
                a.update(x=0.5, y=top)
    return upd


def colorbar_holders(fig: go.Figure) -> list[tuple[Any, Any]]:
    """``[(trace, holder)]`` for each colour bar a trace of ``fig`` sets: the trace itself (unless its
    ``showscale`` is off) or its ``marker``. Read from the JSON, as reading ``t.marker.colorbar`` would
    create a bar."""
    out = []
    for t in fig.data:
        j = t.to_plotly_json()
        where = t if "colorbar" in j and j.get("showscale") is not False else t.marker if "colorbar" in (
            j.get("marker") or {}) else None
        if where is not None:
            out.append((t, where))
    return out


def has_scene(layout: dict) -> bool:
    """Whether a figure's layout (its plotly JSON) holds a 3-D scene."""
    return any(k.startswith("scene") for k in layout)


def stack_colorbars(fig: go.Figure) -> None:
    """After :func:`stacked` (on the phone's copy ``fig``): each trace's colour bar just right of the plot,
    as tall as its own panel (a bar placed between two panels side by side would sit over the full-width panel)."""
    for t, where in colorbar_holders(fig):
        lo, hi = fig.layout["yaxis" + (t.yaxis or "y")[1:]].domain
        where.colorbar.update(x=1.02, xanchor="left", y=hi, yanchor="top", len=hi - lo, lenmode="fraction")


def shared_titles(layout: dict) -> dict:
    """Layout update that drops the y-axis title of every panel right of a row's first one where it repeats
    that one's (``layout``: a figure's plotly JSON): on a phone the gap between two panels holds just their
    tick labels, so a second "Δε (a.u.)" would run over the panel on its left; the row's first title names them all."""
    rows: dict[tuple, list] = {}
    for k, a in layout.items():
        if k.startswith("yaxis") and isinstance(a, dict):
            x = layout.get("xaxis" + str(a.get("anchor", "x"))[1:]) or {}
            rows.setdefault(tuple(a.get("domain") or (0, 1)), []).append(((x.get("domain") or [0])[0], k))

    def title(k: str) -> str | None:
        return (layout[k].get("title") or {}).get("text")

    return {k: {"title": {"text": ""}} for row in rows.values() for _, k in sorted(row)[1:]
            if title(k) and title(k) == title(sorted(row)[0][1])}


PHONE_SUBTITLE = 11
"""Font size (px) of a subplot title on a phone where panels stand side by side or the title is longer than
:data:`PHONE_TITLE` characters (Plotly's 16 px runs two titles together over ~165 px panels: "attention:
before mixattention: after mixing", and a long one takes three lines). Design choice."""


def subplot_titles(layout: dict) -> dict:
    """Layout update of a figure's subplot titles and ticks on a phone (``layout``: its plotly JSON): with
    panels side by side, titles at :data:`PHONE_SUBTITLE` px and every second tick where a small map labels
    each row and column (``dtick`` 1: 0 to 11 overlapped at ~165 px); a title over :data:`PHONE_TITLE`
    characters also smaller. The browser wraps a title to the width its chart has (``fitNotes`` in
    ``js/live_chart.js``). ``{}`` when nothing changes."""
    starts = {round((a.get("domain") or [0])[0], 3) for k, a in layout.items() if k.startswith("xaxis")}
    side = len(starts) > 1
    anns, changed = [], False
    for a in layout.get("annotations") or []:
        text = a.get("text") or ""
        if a.get("yanchor") == "bottom" and (a.get("font") or {}).get("size") == 16 and (
                side or visible_len(text) > PHONE_TITLE):  # Plotly's subplot titles: 16 px, over their panel
            a = dict(a, font={**a["font"], "size": PHONE_SUBTITLE})
            changed = True
        anns.append(a)
    upd: dict = {"annotations": anns} if changed else {}
    if side:
        upd.update({k: {"dtick": 2} for k, a in layout.items() if k[1:5] == "axis" and a.get("dtick") == 1})
    return upd


PHONE_SCENE, PHONE_EYE, PHONE_SCENE_B = 340, 2.6, 30
"""On a phone a 3-D scene is this many px high (its column is ~340 px wide: at the desktop's 560 px height
~250 px would stand blank over it) and spans the full width, its camera at least this far from the centre (the
sphere's, at ~2.4, cuts its axis titles: "xis 8"), with smaller axis titles and no tick labels; the bottom
margin when the figure sets none. Design choice."""


def scenes(layout: dict) -> dict:
    """Layout update of a figure's 3-D scenes on a phone (``layout``: its plotly JSON); ``{}`` without one:
    each scene over the full width (a colour bar goes under it, :func:`scene_colorbars`) with its camera at
    least :data:`PHONE_EYE` away and smaller axis fonts, the height one :data:`PHONE_SCENE` px scene plus
    the margins."""
    names = [k for k in layout if k.startswith("scene") and isinstance(layout[k], dict)]
    if not names:
        return {}
    upd: dict = {}
    axes = {a: {"title": {"font": {"size": 11}}, "showticklabels": False} for a in ("xaxis", "yaxis", "zaxis")}
    for k in names:
        eye = (layout[k].get("camera") or {}).get("eye") or {"x": 1.25, "y": 1.25, "z": 1.25}  # plotly's default
        far = PHONE_EYE / max(math.sqrt(sum(v * v for v in eye.values())), 1e-9)
        upd[k] = {"domain": {"x": [0, 1], "y": [0, 1]}, "camera": {"eye": {a: v * far for a, v in eye.items()}},
                  **axes}
    margin = layout.get("margin") or {}
    top = margin.get("t", 60)
    legend = layout.get("legend") or {}
    if legend.get("orientation") == "h" and legend.get("y", 1) >= 1:  # a legend over the scene: a gap under
        top += 16  # the title's second line (they touched on a phone)
        upd["margin"] = {"t": top}
    upd["height"] = top + margin.get("b", PHONE_SCENE_B) + PHONE_SCENE
    return upd


PHONE_BAR = 56
"""Px under a phone's 3-D scene for its horizontal colour bar and the bar's title. Design choice."""


def scene_colorbars(fig: go.Figure) -> None:
    """After :func:`scenes` (on the phone's copy ``fig``): a colour bar of a 3-D figure lies under the scene,
    horizontal and titled above, the figure :data:`PHONE_BAR` px taller (upright at the right it takes ~80 px
    of a ~340 px width and cuts the scene at the right)."""
    bars = colorbar_holders(fig)
    for _, where in bars:
        where.colorbar.update(orientation="h", x=0.5, xanchor="center", y=0, yanchor="top", len=0.8,
                              lenmode="fraction", thickness=10, title={"side": "top"})
    if bars:
        m = fig.layout.margin
        fig.update_layout(margin={"b": (m.b if m.b is not None else 30) + PHONE_BAR},
                          height=(fig.layout.height or 450) + PHONE_BAR)


PHONE_LEGEND_ROW, PHONE_LEGEND_WIDTH = 20, 330
"""On a phone a legend beside the plot goes under it: px per legend row, and the px a row holds (a phone's
column, less a little). Design choice."""


def legend_below(fig: go.Figure, layout: dict | None = None) -> dict:
    """Layout update of the phone's copy of a 2-D figure ``fig`` whose legend stands beside the plot
    (Plotly's default, right of it): under the figure instead, horizontal, the figure taller by its rows
    (beside it, a six-entry legend takes ~45% of a phone's width, leaving the plot ~170 px and its tick labels
    turned upright; a lone entry, e.g. Trajectories' "state", takes ~90 px). ``{}`` for 3-D figures,
    horizontal legends, and figures whose legend shows no entry.
    ``layout``: ``fig``'s plotly JSON when the caller has it already."""
    lay, js = fig.layout, fig.layout.to_plotly_json() if layout is None else layout
    if js.get("showlegend") is False or (js.get("legend") or {}).get("orientation") == "h" or has_scene(js):
        return {}
    names = [str(t.name) for t in fig.data if t.name and t.type not in ("heatmap", "contour", "histogram2d")
             and (t.showlegend is True or (t.showlegend is None and len(fig.data) > 1))]
    if not names:
        return {}
    rows, used = 1, 0.0
    for name in names:  # pack the entries into rows: ~40 px of symbol and gap plus ~6.5 px a character
        w = 40 + 6.5 * visible_len(name)
        if used and used + w > PHONE_LEGEND_WIDTH:
            rows, used = rows + 1, 0.0
        used += w
    extra = rows * PHONE_LEGEND_ROW + 10
    b = lay.margin.b if lay.margin.b is not None else 80
    return {"legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                       "xanchor": "left"}, "margin": {"b": b + extra}, "height": (lay.height or 450) + extra}


def phone_layout(layout: dict) -> list[dict]:
    """The layout updates a phone's copy of a figure gets (``layout``: its plotly JSON), in order; empty when
    it is drawn as it is: panels stacked where the figure asks (:func:`stacked`), else repeated y-axis titles
    of a row dropped (:func:`shared_titles`) and smaller subplot titles, sparser ticks side by side
    (:func:`subplot_titles`), 3-D scenes at the full width and a phone's height (:func:`scenes`); one
    square map shortened to its width. The figure's title is wrapped in the browser, to the width the chart
    has, as on a desktop (``fitTitle`` in ``js/live_chart.js``)."""
    stack = stacked(layout) if (layout.get("meta") or {}).get("phone") == "stack" else {}
    # stacked, each panel has a row of its own: no title to share, nothing side by side
    scene = {} if stack else scenes(layout)
    rows = [stack] if stack else [shared_titles(layout), subplot_titles(layout), scene]
    if (layout.get("yaxis") or {}).get("scaleanchor") and "xaxis2" not in layout and (layout.get("height") or 0) > 400:
        rows.append({"height": 400})  # one square map ~330 px wide: its full height would leave ~200 px blank under it
    return [u for u in rows if u]


def phone_copy(fig: go.Figure, layout: dict | None = None) -> go.Figure:
    """``fig`` as a phone draws it: :func:`phone_layout`'s updates, the colour bars of stacked panels and 3-D
    scenes moved with them (:func:`stack_colorbars`, :func:`scene_colorbars`), a legend beside the plot put
    under it (:func:`legend_below`); ``fig`` itself when nothing changes. ``layout``: ``fig``'s plotly JSON
    when the caller has it already."""
    lay = fig.layout.to_plotly_json() if layout is None else layout
    ups = phone_layout(lay)
    if ups:
        fig = relaid(fig, ups)
        if (lay.get("meta") or {}).get("phone") == "stack":
            stack_colorbars(fig)
        if has_scene(lay):
            scene_colorbars(fig)
    below = legend_below(fig, lay)
    if below and ups:  # a copy already
        fig.update_layout(below)
    elif below:
        fig = relaid(fig, [below])
    return fig


#: at most this many ticks on a category axis (token labels) of a figure in a half-width Compare column
NARROW_NTICKS = 8


def square_width(fig: Any) -> int:
    """Width in px at which a square single-panel figure's plot area is square at the figure's height: the
    height less the top and bottom margins, plus the side margins and room for a colour bar (design
    choice: full width left the map at the left and its colour bar at the far right on a wide window, or
    in a Compare column that wrapped under the other)."""
    lay = fig.layout.to_plotly_json()
    m = lay.get("margin") or {}
    bar = any((t.get("colorbar") or (t.get("marker") or {}).get("colorbar")) and t.get("showscale", True)
              for t in (d.to_plotly_json() if hasattr(d, "to_plotly_json") else d for d in fig.data))
    side = int(lay.get("height") or 450) - m.get("t", 60) - m.get("b", 50)
    return side + m.get("l", 60) + m.get("r", 20) + (90 if bar else 0)


def same_row(figs: dict[str, Any], row: str) -> dict[str, Any]:
    """Figures drawn side by side (``figs``; ``None`` entries kept) marked as one row, ``layout.meta["row"] =
    row``: the browser gives them the row's largest top margin, their titles wrapped to their widths
    (``js/live_chart.js``), so their plots start at one height. Copies (:func:`relaid`); one figure alone is
    left as it is. Design choice: Compare's A and B otherwise stood at different heights, the one with the
    longer title lower."""
    shown = {k: f for k, f in figs.items() if f is not None}
    if len(shown) < 2:
        return figs
    out = dict(figs)
    for k, f in shown.items():
        meta = f.layout.meta if isinstance(f.layout.meta, dict) else {}
        out[k] = relaid(f, [{"meta": {**meta, "row": row}}])
    return out


def narrow_copy(fig: Any) -> Any:
    """``fig`` for a half-width Compare column: its category axes (token labels) and axes with a tick count
    get at most :data:`NARROW_NTICKS` ticks, so rotated token labels do not run into each other (its title
    wraps in the browser, to the width it has); a copy (:func:`relaid`), ``fig`` itself when nothing changes
    or it is None. Compare's own layout choice: the view pages draw the same figures at full or half of a
    wider area."""
    if fig is None:
        return fig
    lay = fig.layout.to_plotly_json()
    upd = {k: {"nticks": min(int(ax.get("nticks") or NARROW_NTICKS), NARROW_NTICKS)} for k, ax in lay.items()
           if k.startswith(("xaxis", "yaxis")) and isinstance(ax, dict)
           and (ax.get("type") == "category" or ax.get("nticks"))}
    return relaid(fig, [upd])
