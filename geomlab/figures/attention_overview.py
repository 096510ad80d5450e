"""The attention of every layer and head at once: a grid of small maps, one per (layer, head), on one colour
scale (the "model view" of Vig, arXiv 1906.05714, BertViz).

Rows of the grid are layers (0 at the top), columns heads. Each small map is the causal attention matrix of
its layer and head: rows are query positions i (top down), columns key positions j, the causal mask (j > i)
left blank on a grey background. A text longer than :data:`WINDOW` positions
shows the window of positions up to the cursor in every map (never a dense ``T x T`` matrix), and the
caption says which positions are shown.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import Chart, FigureBuilder, FigureError, finish
from geomlab.figures._sampling import check_cursor, check_index, finite_max, missing_note
from geomlab.figures._style import MASKED_BG, SEQUENTIAL, category_labels, cursor_box
from geomlab.figures.attention import _bad_rows, _masked
from geomlab.figures.catalog import Explanation, figure, has_attention
from geomlab.trace import Trace

CHOSEN = "#000000"
"""Outline colour of the panel(s) of the chosen layer and head (the cursor's row is outlined in orange)."""

WINDOW = 64
"""Positions every small map shows of a longer text (design choice: a grid of maps, each a few hundred
pixels wide, reads 64 positions, not the figures' 128)."""

PANEL_HEIGHT = 150
"""Height in pixels of one layer's row of maps (design choice: small multiples, details on hover)."""


def overview_positions(n: int, cursor: int | None, window: int = WINDOW) -> np.ndarray:
    """The positions every map of the overview shows, ``[m]`` int: all ``n`` when ``n <= window``, else the
    ``window`` consecutive positions ending at the cursor (the last ones without a cursor), so the cursor
    is always shown and no position inside the range is dropped. Raises :class:`FigureError` for a window
    below 2. Design choice (up to the cursor: a query attends to earlier keys only)."""
    if window < 2:
        raise FigureError("window must be at least 2 positions")
    if n <= window:
        return np.arange(n)
    stop = n if cursor is None else max(int(cursor) + 1, window)
    return np.arange(stop - window, stop)


def _chosen_heads(layer: int | None, head: int | None, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """The (layer, head) panels to outline: the chosen head of the chosen layer, or every head of that layer
    when the head is None (the head mean); none without a chosen layer."""
    if layer is None:
        return []
    layer = check_index("layer", layer, n_layers)
    if head is None:
        return [(layer, h) for h in range(n_heads)]
    return [(layer, check_index("head", head, n_heads))]


def _outline_panel(fig: FigureBuilder, row: int, col: int) -> None:
    """A thick outline around the whole panel at ``row``/``col`` (its axes' domain)."""
    xr, yr = fig._ref(row, col)
    fig.add_shape(type="rect", xref=f"{xr} domain", yref=f"{yr} domain", x0=0, x1=1, y0=0, y1=1,
                  line={"color": CHOSEN, "width": 3}, name="chosen")


def _caption(tr: Trace, idx: np.ndarray, bad: int) -> str:
    """What the grid shows, the window in words when the text is longer than it, and missing rows."""
    cap = ("The attention weights of every layer (rows of the grid, layer 0 at the top) and every head "
           "(columns), on one colour scale: in each small map row i is a query position, column j a key "
           "position, and colour the weight the query puts on the key; grey cells are masked (future). The "
           "cursor's row is outlined in orange, the chosen layer and head in black.")
    n = tr.n_positions
    if len(idx) < n:
        cap += (f" The text has {n:,} positions: every map shows only positions {idx[0]}–{idx[-1]}, the "
                f"{len(idx)} up to the cursor (a full {n:,} × {n:,} map per head would be too large); the "
                "weights are normalised over all earlier keys, so a row's shown part can sum to less than 1.")
    return cap + missing_note(bad, "query rows")


# not in the view's default set: Compare draws the default sets side by side, where a grid of panels side by
# side would need the full width (tests/app/test_app.py); the page lists it first under "More figures"
@figure(click="layer_head", label="all layers and heads", applies=has_attention, controls=("layer", "head"), default=False,
        explain=Explanation(
    r"\alpha^{(\ell, h)}_{ij} = \operatorname{softmax}_{j \le i} S^{(\ell, h)}_{ij}, \quad "
    r"\ell = 0, \dots, L - 1,\ h = 0, \dots, H - 1",
    "One small map per layer (row of the grid) and head (column), all on one colour scale: in each map row $i$ "
    "is a query position and column $j$ a key position; a row sums to 1. The cursor's row is outlined, and the "
    "layer and head chosen above are framed.",
    "Heads that look alike, a bright diagonal (the position itself), a band below it (the previous token), "
    "vertical stripes (anchor tokens); changes with depth.",
    ("Attention",), "Vig, arXiv 1906.05714 (BertViz model view); design choice"))
def attention_overview(tr: Trace, layer: int | None = None, head: int | None = None, cursor: int | None = None,
                       window: int = WINDOW) -> Chart:
    """The attention weights of every layer and head as a grid of small heatmaps on one shared colour scale
    (sequential, range [0, the largest shown weight]).

    Args:
        tr: any trace with attention (OSM, CEM, baseline transformers).
        layer, head: the page's chosen layer and head, outlined in the grid (head None: every head of the
            layer, whose mean the other attention figures show); layer None: nothing outlined.
        cursor: the query position whose row is outlined in every map; the window ends here.
        window: past this many positions every map shows the ``window`` positions up to the cursor
            (:func:`overview_positions`); the caption says so.

    Only the shown rows are computed (``Trace.attention_rows``), so a long trace never forms its ``T x T``
    matrices. Traces: one heatmap per (layer, head), named ``"layer l head h"``, row-major (layer by layer),
    ``z`` ``[m, m]`` float32 with NaN where masked; its ``x``/``y`` are the shown positions as
    ``"t 'token'"`` categories and its hover gives layer, head, query, key and weight. Raises
    :class:`FigureError` for a trace without attention or an index out of range. Source: Vig, arXiv
    1906.05714 (the grid of all heads); softmax attention; design choice.
    """
    if not has_attention(tr):
        raise FigureError(f"{tr.kind!r} has no attention to show")
    L, H = int(tr.n_layers), int(tr.n_heads)
    chosen = _chosen_heads(layer, head, L, H)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = overview_positions(tr.n_positions, cursor, int(window))
    cats = category_labels(tr.labels, idx)
    maps, bad = [], 0
    for l in range(L):
        for h in range(H):
            rows = tr.attention_rows(l, idx, h)
            maps.append(_masked(rows, idx))
            bad += _bad_rows(rows, idx)
    fig = FigureBuilder.grid(rows=L, cols=H, shared_xaxes=True, shared_yaxes=True,
                             horizontal_spacing=min(0.02, 0.5 / max(H - 1, 1)),
                             vertical_spacing=min(0.3 / L, 0.5 / max(L - 1, 1)))
    ci = None if cursor is None else int(np.searchsorted(idx, cursor))
    for k, z in enumerate(maps):
        l, h = divmod(k, H)
        fig.add_trace({"type": "heatmap", "z": z, "x": cats, "y": cats, "coloraxis": "coloraxis",
                       "name": f"layer {l} head {h}", "hoverongaps": False,
                       "hovertemplate": f"layer {l}, head {h}<br>query %{{y}}<br>key %{{x}}<br>weight "
                                        "%{z:.4f}<extra></extra>"}, row=l + 1, col=h + 1)
        if ci is not None:
            cursor_box(fig, ci, ci + 0.5, row=l + 1, col=h + 1)
    for l, h in chosen:
        _outline_panel(fig, l + 1, h + 1)
    axis = {"type": "category", "showticklabels": False, "showgrid": False, "zeroline": False, "ticks": ""}
    fig.update_xaxes(**axis)
    fig.update_yaxes(autorange="reversed", **axis)
    for h in range(H):
        fig.update_xaxes(row=L, col=h + 1, title={"text": f"head {h}", "standoff": 4, "font": {"size": 11}})
    for l in range(L):
        fig.update_yaxes(row=l + 1, col=1, title={"text": f"layer {l}", "standoff": 4, "font": {"size": 11}})
    fig.update_layout(plot_bgcolor=MASKED_BG, coloraxis={
        "colorscale": SEQUENTIAL, "cmin": 0.0, "cmax": finite_max(*maps),
        "colorbar": {"title": {"text": "weight", "side": "right"}, "thickness": 10, "y": 1.0, "yanchor": "top",
                     "len": min(1.0, 300 / (L * PANEL_HEIGHT)), "tickfont": {"size": 10}}})
    span = f", positions {idx[0]}–{idx[-1]}" if len(idx) < tr.n_positions else ""
    return finish(fig, f"Attention of every layer and head{span}", _caption(tr, idx, bad), "attention_overview",
                  height=80 + PANEL_HEIGHT * L, margin={"l": 60, "r": 20, "t": 50, "b": 40})
