"""Shared pieces of the figure functions: the View result, cursor checks, subsampling, hover text,
colour scales (all colour-blind safe) and layout defaults. Design choices, documented in docs/views.md."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
import plotly.io as pio


class FigureError(ValueError):
    """A view cannot be drawn for this trace or these arguments (wrong family, layer out of range...)."""


class View(NamedTuple):
    """What every figure function returns: ``figure`` (a ``plotly.graph_objects.Figure``) and ``caption``
    (one or two plain sentences saying what is shown, for the app to print under the figure).

    The caption is also stored in ``figure.layout.meta["caption"]`` so it survives ``fig.to_json()``.
    Unpack as ``fig, caption = view``.
    """

    figure: go.Figure
    caption: str


# Okabe-Ito qualitative palette (colour-blind safe) for lines per layer / head / block.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
# ColorBrewer RdBu (colour-blind safe), blue = negative, white = 0, red = positive; use with zmid=0.
DIVERGING = [[i / 10, c] for i, c in enumerate(reversed(pc.diverging.RdBu))]
# Sequential, perceptually uniform and colour-blind safe.
SEQUENTIAL = "Viridis"
HIGHLIGHT = "#D55E00"
MASKED_BG = "#d9d9d9"

# The parts of plotly's "plotly_white" layout that these views use: the full template (defaults for every
# trace type, geo, polar, ...) costs ~50 ms to copy into each figure and ~7 KB of JSON; this one ~5 ms.
_WHITE = pio.templates["plotly_white"].layout.to_plotly_json()
TEMPLATE = go.layout.Template(layout={k: _WHITE[k] for k in (
    "xaxis", "yaxis", "scene", "plot_bgcolor", "paper_bgcolor", "font", "colorway", "hovermode", "hoverlabel",
    "shapedefaults", "title", "annotationdefaults") if k in _WHITE})
pio.templates["geomlab"] = TEMPLATE

# default sizes past which views subsample (design choice; keeps pages responsive)
MAX_POINTS = 1024      # points on a line/scatter along positions
MAX_FRAMES = 96        # animation frames (2-D)
MAX_FRAMES_3D = 48     # animation frames of 3-D scenes (each frame rebuilds several 3-D traces)
MAX_MATRIX = 256       # rows/columns of a position x position map
MAX_TICKS = 48         # token tick labels on an axis

VALIDATE = False
"""Validate animated figures' frames with plotly's property checks. Off by default: building ~100 frames
with validation takes ~7x longer; the tests switch it on to check every frame property once."""


def animated_figure(data: list, frames: list[dict]) -> go.Figure:
    """A figure from trace dicts/objects ``data`` and frame dicts ``frames`` (each ``{"name", "data",
    "traces"}``), validated only when :data:`VALIDATE` is set (speed; see there)."""
    # the template object is set here: updating an unvalidated figure's template later is very slow
    return go.Figure(data=data, layout={"template": TEMPLATE}, frames=frames,
                     _validate=VALIDATE)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit BLAS/OpenMP to one thread for the small dense linear algebra of the views (PCA, SVD); with
    several threads on a busy machine a 256 x 128 SVD can take seconds instead of milliseconds."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def cached(tr, key: tuple, compute):
    """``compute()`` memoised on the trace object under ``key`` (traces are treated as immutable), so
    several views of one trace share their geometry (eigenvalues, logarithms, PCA)."""
    store = tr.__dict__.setdefault("_view_cache", {})
    if key not in store:
        store[key] = compute()
    return store[key]


def colour(i: int) -> str:
    """The i-th colour of :data:`PALETTE` (cycled)."""
    return PALETTE[i % len(PALETTE)]


def check_cursor(cursor: int | None, n: int) -> int | None:
    """``cursor`` as a non-negative position in ``0..n-1`` (negative counts from the end) or None.
    Raises :class:`FigureError` when out of range or not an integer."""
    if cursor is None:
        return None
    if isinstance(cursor, bool) or not isinstance(cursor, (int, np.integer)):
        raise FigureError(f"cursor must be an integer position, got {cursor!r}")
    c = int(cursor)
    if not -n <= c < n:
        raise FigureError(f"cursor {c} out of range: the trace has {n} positions")
    return c % n


def check_index(name: str, index: int, size: int) -> int:
    """``index`` in ``-size..size-1`` normalised to ``0..size-1``; :class:`FigureError` otherwise."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -size <= int(index) < size:
        raise FigureError(f"{name} {index!r} out of range: there are {size}")
    return int(index) % size


def subsample(n: int, max_points: int, cursor: int | None = None) -> np.ndarray:
    """Sorted positions to show out of ``n``: all when ``n <= max_points``, else about ``max_points``
    evenly spaced ones, always with the first, the last and the cursor."""
    if max_points < 2:
        raise FigureError("max_points must be at least 2")
    if n <= max_points:
        return np.arange(n)
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(int))
    if cursor is not None and cursor not in idx:
        idx = np.unique(np.append(idx, cursor))
    return idx


def subsample_note(n: int, shown: int) -> str:
    """Caption suffix when a view shows only part of the positions."""
    return "" if shown >= n else f" Long text: {shown} of {n} positions shown, evenly spaced."


def token_ticks(labels: Sequence[str], positions: np.ndarray, max_ticks: int = MAX_TICKS) -> dict:
    """Axis settings that put ``"t:token"`` tick labels on a numeric position axis (at most
    ``max_ticks`` of them)."""
    positions = np.asarray(positions)
    step = max(1, int(np.ceil(len(positions) / max_ticks)))
    vals = positions[::step]
    return {"tickmode": "array", "tickvals": vals.tolist(),
            "ticktext": [f"{p}:{labels[p]}" for p in vals.tolist()]}


def category_labels(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """Unique ``"t:token"`` category names for a categorical position axis (hover shows them via
    ``%{x}``/``%{y}``, so large heatmaps need no per-cell hover array)."""
    return [f"{p} '{labels[p]}'" for p in np.asarray(positions).tolist()]


def hover_tokens(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """``"t 'c'"`` strings for hover text."""
    return [f"{p} '{labels[p]}'" for p in np.asarray(positions).tolist()]


def finish(fig: go.Figure, title: str, caption: str, name: str, height: int | None = None) -> View:
    """Apply the common layout (white template, title, caption in ``layout.meta``) and wrap in a View."""
    if getattr(fig, "_validate", True):  # animated_figure sets the template itself
        fig.update_layout(template=TEMPLATE)
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left"},
        font={"size": 13},
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
        meta={"caption": caption, "view": name},
        hoverlabel={"namelength": -1},
    )
    if height is not None:
        fig.update_layout(height=height)
    return View(fig, caption)


def add_cursor_line(fig: go.Figure, x: float | None, row: int | None = None, col: int | None = None,
                    axis: str = "x") -> None:
    """Mark the cursor position with a dashed vertical (``axis="x"``) or horizontal line spanning the
    subplot at ``row``/``col`` (a plain layout shape: ``add_vline`` is ~100x slower on subplots)."""
    if x is None:
        return
    if row is None:
        xref, yref = "x", "y"
    else:
        sp = fig.get_subplot(row, col)
        xref, yref = sp.xaxis.plotly_name.replace("axis", ""), sp.yaxis.plotly_name.replace("axis", "")
    line = {"color": HIGHLIGHT, "width": 1.5, "dash": "dash"}
    if axis == "x":
        shape = {"type": "line", "x0": x, "x1": x, "xref": xref, "y0": 0, "y1": 1, "yref": f"{yref} domain"}
    else:
        shape = {"type": "line", "y0": x, "y1": x, "yref": yref, "x0": 0, "x1": 1, "xref": f"{xref} domain"}
    fig.add_shape(line=line, opacity=0.8, **shape)


def animation_controls(labels: Sequence[str], frame_names: Sequence[str], active: int,
                       duration_ms: int = 120, prefix: str = "position ") -> dict:
    """``updatemenus`` (Play/Pause) and ``sliders`` layout entries for frames named ``frame_names``,
    played in the browser (no server round trip)."""
    play = {"label": "▶ Play", "method": "animate",
            "args": [None, {"frame": {"duration": duration_ms, "redraw": True}, "fromcurrent": True,
                            "transition": {"duration": 0}}]}
    pause = {"label": "❚❚ Pause", "method": "animate",
             "args": [[None], {"frame": {"duration": 0, "redraw": False}, "mode": "immediate",
                               "transition": {"duration": 0}}]}
    steps = [{"label": lab, "method": "animate",
              "args": [[name], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate",
                                "transition": {"duration": 0}}]}
             for lab, name in zip(labels, frame_names)]
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "buttons": [play, pause],
                         "x": 0.0, "y": -0.08, "xanchor": "left", "yanchor": "top", "showactive": False}],
        "sliders": [{"active": int(active), "steps": steps, "x": 0.18, "len": 0.82, "y": -0.04,
                     "currentvalue": {"prefix": prefix, "font": {"color": "#333"}, "xanchor": "right"}, "pad": {"t": 30},
                     # past ~20 steps the per-step labels overlap: hide them, the current value names the step
                     "font": {"color": "#333" if len(steps) <= 20 else "rgba(0,0,0,0)"},
                     "ticklen": 4 if len(steps) <= 20 else 0, "minorticklen": 2 if len(steps) <= 20 else 0}],
    }
