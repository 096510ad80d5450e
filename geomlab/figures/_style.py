"""How the figures look along a text: colour scales (all colour-blind safe), colours per layer or index,
token tick labels thinned to round positions, hover labels, and the marks of the token cursor.
Design choices, documented in docs/views.md."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go

from geomlab.figures._chart import FigureBuilder

# The token cursor's colour (its lines, rings and boxes); no series colour below is this one.
HIGHLIGHT = "#D55E00"
# Lines per layer / head / block: the Okabe-Ito qualitative palette (colour-blind safe) without its vermilion,
# the cursor's colour, so that no series reads as the cursor; the pale yellow last (weakest on white).
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#000000", "#F0E442"]
# ColorBrewer RdBu (colour-blind safe), blue = negative, white = 0, red = positive; use with zmid=0.
DIVERGING = [[i / 10, c] for i, c in enumerate(reversed(pc.diverging.RdBu))]
# Sequential, perceptually uniform and colour-blind safe: Viridis, spelled out as plotly's validation
# would expand the name (unvalidated figures send what they are given).
SEQUENTIAL = [[i / (len(pc.sequential.Viridis) - 1), c] for i, c in enumerate(pc.sequential.Viridis)]
# Cyclic, for angles in (-pi, pi] (both ends the same colour): plotly's Twilight, spelled out likewise.
CYCLIC = [[i / (len(pc.cyclical.Twilight) - 1), c] for i, c in enumerate(pc.cyclical.Twilight)]
MASKED_BG = "#d9d9d9"

MAX_TICKS = 12         # token tick labels on an axis: thin enough for a half-width chart (hover names every token)

COLUMN_HOVER = {"hovermode": "x", "hoverdistance": -1}
"""Layout of a chart whose x axis is the token position: a hover or a click anywhere in a position's column,
above or below its lines too, picks that position (plotly's default, "closest", picks a point only within
20 px of it). Design choice."""


def colour(i: int) -> str:
    """The i-th colour of :data:`PALETTE` (cycled)."""
    return PALETTE[i % len(PALETTE)]


def pale(hex_colour: str, amount: float = 0.5) -> str:
    """``hex_colour`` (``"#rrggbb"``) mixed with white, ``amount`` of the way (0: itself, 1: white): a
    lighter shade of one series' colour, e.g. its plain run beside the intervened one."""
    rgb = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02x}" for c in rgb)


def index_colours(n: int) -> list[str]:
    """``n`` distinct colour-blind-safe colours for ``n`` indexed series (eigenvalue or angle k, layer): the
    :data:`PALETTE` for up to 7, else ``n`` evenly spaced samples of Viridis (never a repeat: a torus can
    have 26 angles; never the cursor's :data:`HIGHLIGHT`). Design choice."""
    n = max(int(n), 1)
    if n <= len(PALETTE):
        return PALETTE[:n]
    return pc.sample_colorscale(SEQUENTIAL, np.linspace(0, 1, n).tolist(), colortype="rgb")


def index_colorscale(n: int, title: str, x: float = 1.02, length: float = 0.8) -> tuple[list, dict]:
    """``(colorscale, colorbar)`` for a marker colour array holding an index ``0..n-1``: a step scale of
    :func:`index_colours` (each index one flat band, so no two indices share a colour), and a colour bar
    titled ``title`` with the indices 1..n as ticks (thinned past 12). Used instead of a legend with one
    entry per index, which runs past the title at 26 entries."""
    n = max(int(n), 1)
    cols = index_colours(n)
    scale: list = []
    for k, c in enumerate(cols):
        scale += [[k / n, c], [(k + 1) / n, c]]
    step = nice_step(n - 1, 12)
    ticks = [k for k in range(n) if k % step == 0 or (k == n - 1 and n <= 12)]
    bar = {"title": {"text": title, "side": "right"}, "tickmode": "array", "tickvals": ticks,
           "ticktext": [str(k + 1) for k in ticks], "x": x, "xanchor": "left", "len": length, "thickness": 12,
           "tickfont": {"size": 11}}
    return scale, bar


def index_colour_range(n: int) -> dict:
    """``cmin``/``cmax`` placing index k in the middle of its band of :func:`index_colorscale`."""
    return {"cmin": -0.5, "cmax": max(int(n), 1) - 0.5}


def nice_step(span: float, max_ticks: int) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... with at most ``max_ticks`` multiples in a range of ``span``."""
    step = 1
    while span / step + 1 > max_ticks:
        step = _next_nice(step)
    return step


def _next_nice(step: int) -> int:
    """1 -> 2 -> 5 -> 10 -> 20 -> 50 -> 100 ..."""
    mag = 10 ** int(np.floor(np.log10(step)))
    lead = step // mag
    return {1: 2, 2: 5}.get(lead, 10) * mag


def token_ticks(labels: Sequence[str], positions: np.ndarray, max_ticks: int = MAX_TICKS) -> dict:
    """Axis settings that put ``"t 'token'"`` tick labels (:func:`category_labels`) on a numeric position
    axis: at most ``max_ticks`` of them, at round positions (multiples of 1, 2, 5, 10, 20, 50, ...), so
    that they stay readable at half width (thinned ticks, details on hover; design choice)."""
    positions = np.asarray(positions)
    if not len(positions):
        return {"tickmode": "array", "tickvals": [], "ticktext": []}
    lo, hi = int(positions.min()), int(positions.max())
    step = nice_step(hi - lo, max(int(max_ticks), 2))
    vals = [int(v) for v in range(-(-lo // step) * step, hi + 1, step)]
    return {"tickmode": "array", "tickvals": vals,
            "ticktext": category_labels(labels, vals)}


def thin_ticks(categories: Sequence, max_ticks: int = MAX_TICKS) -> dict:
    """Axis settings that label at most ``max_ticks`` of the ``n`` values ``categories`` of a categorical
    axis: every ``k``-th one from the first, ``k = ceil(n / max_ticks)`` (so the first is always labelled and
    the labelled ones are evenly spaced); every value is still named on hover (a trace's hovertemplate shows
    ``%{x}`` / ``%{y}``, the category itself). Plotly rotates the labels when they would overlap. Raises
    ``ValueError`` for ``max_ticks < 1``. Design choice (readable at half width, details on hover)."""
    if int(max_ticks) < 1:
        raise ValueError(f"max_ticks must be at least 1, got {max_ticks}")
    cats = list(categories)
    step = max(1, -(-len(cats) // int(max_ticks)))
    shown = cats[::step]
    return {"tickmode": "array", "tickvals": shown, "ticktext": [str(c) for c in shown]}


def category_labels(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """Unique ``"t 'token'"`` category names for a categorical position axis (and the tick labels of a
    numeric one, :func:`token_ticks`: one format everywhere); hover shows them via ``%{x}``/``%{y}``, so
    large heatmaps need no per-cell hover array."""
    return [f"{p} '{labels[p]}'" for p in np.asarray(positions).tolist()]


def hover_tokens(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """``"t 'c'"`` strings for hover text (the format of :func:`category_labels`)."""
    return category_labels(labels, positions)


def add_cursor_line(fig: FigureBuilder | go.Figure, x: float | None, row: int | None = None,
                    col: int | None = None, axis: str = "x", below: bool = False,
                    span: tuple[float, float] | None = None) -> None:
    """Mark the cursor position with a solid vertical (``axis="x"``) or horizontal line spanning the
    subplot at ``row``/``col`` (a plain layout shape: ``add_vline`` is ~100x slower on subplots); ``below``:
    under the traces (a bar chart's bar at the cursor stays in view; a heatmap would hide it). ``span``: the
    line's ends along the other axis in data units instead (a panel whose range pads its values, a share in
    [0, 1] drawn on [-0.02, 1.02], ends the line at 0 and 1, not past its top and bottom gridlines)."""
    if x is None:
        return
    if row is None:
        xref, yref = "x", "y"
    elif isinstance(fig, FigureBuilder):
        xref, yref = fig._ref(row, col)
    else:
        sp = fig.get_subplot(row, col)
        xref, yref = sp.xaxis.plotly_name.replace("axis", ""), sp.yaxis.plotly_name.replace("axis", "")
    # solid and opaque: a dashed, translucent line is lost among a heatmap's cells
    line = {"color": HIGHLIGHT, "width": 2}
    lo, hi = span if span is not None else (0, 1)
    if axis == "x":
        shape = {"type": "line", "x0": x, "x1": x, "xref": xref, "y0": lo, "y1": hi,
                 "yref": yref if span is not None else f"{yref} domain"}
    else:
        shape = {"type": "line", "y0": x, "y1": x, "yref": yref, "x0": lo, "x1": hi,
                 "xref": xref if span is not None else f"{xref} domain"}
    fig.add_shape(line=line, name="cursor", layer="below" if below else "above", **shape)


def cursor_box(fig: FigureBuilder, row_index: int, x1: float, row: int | None = None, col: int | None = None) -> None:
    """Outline row ``row_index`` of a categorical heatmap (the cursor's row, from column 0 to ``x1``; shapes on
    category axes use the category index). Named ``"cursor"`` like :func:`add_cursor_line`."""
    fig.add_shape(type="rect", x0=-0.5, x1=x1, y0=row_index - 0.5, y1=row_index + 0.5,
                  line={"color": HIGHLIGHT, "width": 2}, name="cursor", row=row, col=col)
