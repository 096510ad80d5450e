"""The overview of a long text: one compact strip over every position, with the window the per-position
figures draw (:func:`~geomlab.figures._sampling.window`) shaded on it and the cursor as a line.

Past :data:`~geomlab.figures._sampling.WINDOW` positions the per-position figures show only the window of
consecutive positions around the cursor, at full resolution; this strip is how the whole text stays in view
and how a page moves the window (each point's ``customdata`` is its position). It is not a catalogue figure
(:func:`~geomlab.figures.catalog.figure`): no view lists it; a page draws it above its figures when
:func:`needs_overview`. The quantity drawn is the
surprisal of each token in bits, ``-log2 p(token t | tokens before t)`` read from the model's output at
``t - 1`` (:func:`geomlab.trace.score_predictions`, the Compare page's surprisal): every trace has outputs.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import Chart, FigureBuilder, finish
from geomlab.figures._sampling import WINDOW, check_cursor, window as shown_window
from geomlab.figures._style import COLUMN_HOVER, add_cursor_line, hover_tokens, token_ticks
from geomlab.core.markup import md_label
from geomlab.trace import Trace

WINDOW_FILL = "rgba(0, 114, 178, 0.15)"
"""Fill of the shaded window (Okabe-Ito blue, translucent: the strip stays readable under it)."""

HEIGHT = 140
"""Height of the strip in pixels (design choice: a compact band above the figures)."""


def needs_overview(tr: Trace, window: int = WINDOW) -> bool:
    """Whether a page should draw :func:`text_overview` above its figures: the text is longer than the
    ``window`` its per-position figures show (``n_positions > window``). Design choice."""
    return int(tr.n_positions) > int(window)


def _surprisal(tr: Trace) -> tuple[np.ndarray, bool]:
    """``([position] float32 bits, any finite)``: the surprisal of token t from the output at t - 1 (NaN at
    position 0 and where an output is not finite)."""
    from geomlab.trace import score_predictions

    bits = np.asarray(score_predictions(tr).bits, dtype=np.float64)
    bits = np.where(np.isfinite(bits), bits, np.nan)
    return bits.astype(np.float32), bool(np.isfinite(bits).any())


def text_overview(tr: Trace, cursor: int | None = None, window: int = WINDOW) -> Chart:
    """A compact strip (:data:`HEIGHT` px) over every position of ``tr``: the surprisal in bits of each token
    (:func:`geomlab.trace.score_predictions`, a language-model reading of the outputs; NaN at position 0
    and at non-finite outputs, drawn blank), the ``window`` of positions the per-position figures draw
    (:func:`~geomlab.figures._sampling.window` around the cursor) as a shaded rectangle, the cursor as an
    orange line.

    Args:
        tr: any trace; cursor: the page's cursor (None: the window is the last ``window`` positions);
        window: the window size of the per-position figures.

    Traces: one ``"surprisal"`` line over all ``n`` positions, ``x`` = ``customdata`` = the position (a
    click maps to a position). Shapes: ``"window"`` (a rectangle from ``lo - 0.5`` to ``hi + 0.5``), then
    ``"cursor"``. Raises :class:`FigureError` for a cursor out of range or a window below 1. Design choice.
    """
    n = int(tr.n_positions)
    cursor = check_cursor(cursor, n)
    shown = shown_window(n, cursor, window)
    lo, hi = int(shown[0]), int(shown[-1])
    bits, finite = _surprisal(tr)
    pos = np.arange(n)
    fig = FigureBuilder()
    fig.add_trace({"type": "scatter", "x": pos, "y": bits, "customdata": pos, "mode": "lines",
                   "name": "surprisal", "showlegend": False, "line": {"color": "#555555", "width": 1},
                   "fill": "tozeroy", "fillcolor": "rgba(85, 85, 85, 0.25)",
                   "text": np.array(hover_tokens(tr.labels, pos)),
                   "hovertemplate": "position %{text}<br>%{y:.2f} bits<extra></extra>"})
    fig.add_shape(type="rect", x0=lo - 0.5, x1=hi + 0.5, xref="x", y0=0, y1=1, yref="y domain",
                  fillcolor=WINDOW_FILL, line={"color": "rgba(0, 114, 178, 0.8)", "width": 1}, layer="below",
                  name="window")
    add_cursor_line(fig, cursor)
    fig.update_xaxes(title_text=None, range=[-0.5, n - 0.5], showgrid=False, zeroline=False,
                     **token_ticks(tr.labels, pos, 10))
    fig.update_yaxes(title_text="bits", rangemode="tozero", nticks=3, showgrid=False, zeroline=False)
    cap = (f"The whole text, {n:,} positions: the surprisal of each token in bits (how unexpected the model "
           "found it, given the tokens before it).")
    if not finite:
        cap += " The model's outputs give no finite surprisal on this text: the strip is empty."
    cap += (f" Shaded: positions {lo:,}–{hi:,}, the window the figures show at full resolution"
            + (f"; orange line: the cursor, {cursor:,} '{md_label(tr.labels[cursor])}'." if cursor is not None else "."))
    return finish(fig, "Whole text", cap, "text_overview", height=HEIGHT,
                  margin={"l": 50, "r": 15, "t": 30, "b": 30}, **COLUMN_HOVER)
