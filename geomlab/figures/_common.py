"""Shared pieces of the figure functions: the Chart they return, cursor checks, subsampling, hover text,
colour scales (all colour-blind safe) and layout defaults. Design choices, documented in docs/views.md."""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator, NamedTuple, Sequence

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
import plotly.io as pio


class FigureError(ValueError):
    """A figure cannot be drawn for this trace or these arguments (wrong family, layer out of range...)."""


class Chart(NamedTuple):
    """What every figure function returns: ``figure`` (a ``plotly.graph_objects.Figure``) and ``caption``
    (one or two plain sentences saying what is shown, for the app to print under the figure).

    The caption is also stored in ``figure.layout.meta["caption"]`` so it survives ``fig.to_json()``.
    Unpack as ``fig, caption = chart``.
    """

    figure: go.Figure
    caption: str


# Okabe-Ito qualitative palette (colour-blind safe) for lines per layer / head / block.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
# ColorBrewer RdBu (colour-blind safe), blue = negative, white = 0, red = positive; use with zmid=0.
DIVERGING = [[i / 10, c] for i, c in enumerate(reversed(pc.diverging.RdBu))]
# Sequential, perceptually uniform and colour-blind safe: Viridis, spelled out as plotly's validation
# would expand the name (unvalidated figures send what they are given).
SEQUENTIAL = [[i / (len(pc.sequential.Viridis) - 1), c] for i, c in enumerate(pc.sequential.Viridis)]
# Cyclic, for angles in (-pi, pi] (both ends the same colour): plotly's Twilight, spelled out likewise.
CYCLIC = [[i / (len(pc.cyclical.Twilight) - 1), c] for i, c in enumerate(pc.cyclical.Twilight)]
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
MAX_TICKS = 12         # token tick labels on an axis: thin enough for a half-width chart (hover names every token)

VALIDATE = False
"""Let plotly validate every property of every figure (data, layout and frames). Off by default: the views
build plain dicts and wrap them in a ``go.Figure`` without plotly's per-property checks, which took most of
the time of a view (2-10x the rest); the tests switch it on so every property is checked."""


def _merge(dst: dict, src: dict) -> dict:
    """Deep-merge ``src`` into ``dst`` (dicts merged key by key, anything else replaced); returns ``dst``.
    Keys ``title_text``/``title_standoff`` (plotly's "magic underscore" spelling) become ``title.text``..."""
    for k, v in src.items():
        if k.startswith("title_"):
            k, v = "title", {k[len("title_"):]: v}
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v) if isinstance(v, dict) else v
    return dst


@lru_cache(maxsize=64)
def _grid(key: str) -> tuple[dict, dict]:
    """(layout, refs) of ``make_subplots(**json.loads(key))`` without its template: refs maps (row, col)
    to the trace's axis references ``("x2", "y2")``. Computed once per grid shape."""
    from plotly.subplots import make_subplots

    kw = json.loads(key)
    fig = make_subplots(**kw)
    layout = fig.layout.to_plotly_json()
    layout.pop("template", None)
    refs = {}
    for r, row in enumerate(fig._grid_ref, start=1):
        for c, cell in enumerate(row, start=1):
            if cell:
                refs[(r, c)] = (cell[0].trace_kwargs["xaxis"], cell[0].trace_kwargs["yaxis"])
    return layout, refs


class FigureBuilder:
    """A figure under construction as plain dicts, with the few ``go.Figure`` methods the views use
    (``add_trace`` with ``row``/``col``, ``update_layout``, ``update_xaxes``/``update_yaxes``, ``add_shape``).
    :meth:`build` (called by :func:`finish`) makes the ``go.Figure`` once, validated only under
    :data:`VALIDATE`: building through plotly's objects validated and deep-copied every property on every
    update, which cost most of a view's time."""

    def __init__(self, data: list | None = None, layout: dict | None = None, frames: list | None = None):
        self.data: list[dict] = [dict(t) for t in (data or [])]
        self.layout: dict = {}
        self.frames: list[dict] = list(frames or [])
        self.refs: dict[tuple[int, int], tuple[str, str]] | None = None
        if layout:
            _merge(self.layout, layout)

    @classmethod
    def grid(cls, rows: int = 1, cols: int = 1, subplot_titles=None, **kw) -> "FigureBuilder":
        """Like ``plotly.subplots.make_subplots`` (same layout), cached per grid shape."""
        titles = list(subplot_titles) if subplot_titles else None
        key = {"rows": rows, "cols": cols, **kw}
        if titles:  # placeholders: the annotations are created for non-empty titles, in order
            key["subplot_titles"] = [f"_{i}" if t else "" for i, t in enumerate(titles)]
        layout, refs = _grid(json.dumps(key, sort_keys=True))
        out = cls()
        out.layout = copy.deepcopy(layout)
        out.refs = refs
        if titles:
            texts = [t for t in titles if t]
            for ann, text in zip(out.layout.get("annotations", []), texts):
                ann["text"] = text
        return out

    def _ref(self, row: int | None, col: int | None) -> tuple[str, str]:
        if row is None or self.refs is None:
            return "x", "y"
        return self.refs[(row, col or 1)]

    def add_trace(self, trace: dict, row: int | None = None, col: int | None = None) -> None:
        trace = dict(trace)
        if row is not None and self.refs is not None:
            xr, yr = self._ref(row, col)
            if xr != "x":
                trace["xaxis"] = xr
            if yr != "y":
                trace["yaxis"] = yr
        self.data.append(trace)

    def update_layout(self, **kw) -> None:
        _merge(self.layout, kw)

    def _axes(self, letter: str, row: int | None, col: int | None) -> list[str]:
        if self.refs is None:
            return [f"{letter}axis"]
        i = 0 if letter == "x" else 1
        return [f"{letter}axis{ref[i][1:]}" for (r, c), ref in sorted(self.refs.items())
                if (row is None or r == row) and (col is None or c == col)]

    def update_xaxes(self, row: int | None = None, col: int | None = None, **kw) -> None:
        for name in self._axes("x", row, col):
            _merge(self.layout.setdefault(name, {}), kw)

    def update_yaxes(self, row: int | None = None, col: int | None = None, **kw) -> None:
        for name in self._axes("y", row, col):
            _merge(self.layout.setdefault(name, {}), kw)

    def add_shape(self, row: int | None = None, col: int | None = None, **shape) -> None:
        if row is not None:
            xr, yr = self._ref(row, col)
            shape = {**shape, "xref": xr, "yref": yr}
        self.layout.setdefault("shapes", []).append(shape)

    def build(self) -> go.Figure:
        """The ``go.Figure``: float64 arrays sent as float32 (half the JSON; plotly encodes numpy arrays as
        base64), the geomlab template set, validated only under :data:`VALIDATE`."""
        data = [_compact(t) for t in self.data]
        frames = [{**f, "data": [_compact(t) for t in f["data"]]} for f in self.frames]
        layout = {**self.layout, "template": TEMPLATE}
        if VALIDATE:
            return go.Figure(data=data, layout=layout, frames=frames or None)
        return _unvalidated(data, layout, frames)


def _unvalidated(data: list, layout: dict, frames: list) -> "Figure":
    fig = Figure(data=data, layout=layout, _validate=False)
    if frames:
        # plotly validates frames even for an unvalidated figure (~0.3 ms a frame); the tests build every
        # animated view with VALIDATE on as well, so these dicts are checked there
        fig._frame_objs = tuple(_Frame(_validate=False, **f) for f in frames)
    return fig


class Figure(go.Figure):
    """The ``go.Figure`` of an unvalidated view. Pickling (``st.cache_data``, ``copy.deepcopy``) rebuilds it
    without validation too: a plain ``go.Figure`` is unpickled through ``go.Figure(fig.to_dict())``, which
    validates every property again."""

    def __reduce__(self):
        return (_unvalidated, (self._data, self._layout, [f._props for f in self._frame_objs]))


class _Frame(go.Frame):
    """An unvalidated ``go.Frame`` whose ``data`` can be read (plotly builds a frame's trace objects only
    while validating)."""

    def __getitem__(self, prop):
        if prop == "data" and self._compound_array_props.get("data") is None:
            from plotly.validator_cache import ValidatorCache

            validator = ValidatorCache.get_validator("frame", "data")
            self._compound_array_props["data"] = list(
                validator.validate_coerce(self._props.get("data", []), _validate=False))
        return super().__getitem__(prop)


_F32_KEYS = frozenset({"x", "y", "z", "customdata", "color", "i", "j", "k"})


def _compact(trace: dict) -> dict:
    """``trace`` without None values and with float64 numpy arrays (also inside ``marker``/``line``) as
    float32."""
    out = {}
    for k, v in trace.items():
        if v is None:  # unset, as plotly's validation would leave it
            continue
        if isinstance(v, np.ndarray) and v.dtype == np.float64 and k in _F32_KEYS:
            v = v.astype(np.float32)
        elif isinstance(v, dict) and k in ("marker", "line"):
            v = _compact(v)
        out[k] = v
    return out


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def animated_figure(data: list, frames: list[dict]) -> FigureBuilder:
    """A figure builder from trace dicts ``data`` and frame dicts ``frames`` (each ``{"name", "data",
    "traces"}``); see :class:`FigureBuilder`.

    Frames carry only what changes: plotly.js merges a frame's trace into the trace it animates, so a
    property that has the base trace's value in every frame (style, name, mesh triangles) is left out of
    all frames (``type`` stays, for validation)."""
    frames = [dict(f) for f in frames]
    slots: dict[int, list[tuple[int, int]]] = {}  # animated trace index -> [(frame, position in frame)]
    for fi, f in enumerate(frames):
        f["data"] = [dict(t) for t in f["data"]]
        for j, ti in enumerate(f.get("traces", range(len(f["data"])))):
            slots.setdefault(ti, []).append((fi, j))
    for ti, where in slots.items():
        base = data[ti]
        keys = set.intersection(*(set(frames[fi]["data"][j]) for fi, j in where)) - {"type"}
        for key in keys:
            if key in base and all(_same(frames[fi]["data"][j][key], base[key]) for fi, j in where):
                for fi, j in where:
                    del frames[fi]["data"][j][key]
    return FigureBuilder(data=data, frames=frames)


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


def cached_positions(tr, key: tuple, n: int, positions, compute, axis: int = 0) -> np.ndarray:
    """A per-position quantity of the trace (``n`` positions along ``axis``) at ``positions`` only:
    ``compute(missing)`` gets the sorted positions not computed yet and returns their values stacked along
    ``axis``; computed positions are memoised on the trace under ``key``. Long texts show a subsample, so
    the views compute the geometry (eigenvalues, logarithms) of the positions they draw, not of all."""
    store = tr.__dict__.setdefault("_view_cache", {})
    positions = np.asarray(positions, dtype=np.int64)
    entry = store.get(key)
    missing = positions if entry is None else positions[~entry[1][positions]]
    missing = np.unique(missing)
    if len(missing):
        vals = np.asarray(compute(missing))
        if entry is None:
            shape = list(vals.shape)
            shape[axis] = n
            dtype = vals.dtype if vals.dtype.kind in "fc" else np.float64
            entry = (np.full(shape, np.nan, dtype=dtype), np.zeros(n, dtype=bool))
            store[key] = entry
        arr, done = entry
        index = [slice(None)] * arr.ndim
        index[axis] = missing
        arr[tuple(index)] = vals
        done[missing] = True
    if entry is None:  # nothing asked for
        return np.asarray(compute(positions))
    return np.take(entry[0], positions, axis=axis)


def colour(i: int) -> str:
    """The i-th colour of :data:`PALETTE` (cycled)."""
    return PALETTE[i % len(PALETTE)]


def index_colours(n: int) -> list[str]:
    """``n`` distinct colour-blind-safe colours for ``n`` indexed series (eigenvalue or angle k): the
    Okabe-Ito :data:`PALETTE` for up to 8, else ``n`` evenly spaced samples of Viridis (never a repeat: a torus can
    have 26 angles). Design choice."""
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
    """Sorted positions to show out of ``n``: all when ``n <= max_points``, else at most ``max_points``
    evenly spaced ones, always with the first, the last and the cursor (which replaces its nearest
    neighbour in the even spacing)."""
    if max_points < 2:
        raise FigureError("max_points must be at least 2")
    if n <= max_points:
        return np.arange(n)
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(int))
    if cursor is not None and cursor not in idx:
        # the cursor replaces its nearest inner neighbour, so the cap holds exactly (first and last kept)
        inner = np.arange(1, len(idx) - 1)
        drop = inner[np.argmin(np.abs(idx[inner] - cursor))] if inner.size else None
        idx = np.unique(np.append(np.delete(idx, drop) if drop is not None else idx, cursor))
    return idx


def blank(a) -> np.ndarray:
    """``a`` as a float array with every non-finite value (NaN, +-inf) as NaN: plotly leaves NaN cells and
    points blank, but would colour an infinity or break a line scale on it."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return a.astype(np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def finite_max(*arrays, floor: float = 1e-12) -> float:
    """The largest finite value over ``arrays`` (NaN and +-inf ignored), at least ``floor``: a NaN-safe colour
    range (``max`` of an array with one NaN is NaN, and a ``nanmax`` that then falls back to ``floor`` would
    saturate every finite cell)."""
    out = float(floor)
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        fin = a[np.isfinite(a)]
        if fin.size:
            out = max(out, float(fin.max()))
    return out


def finite_abs_max(*arrays, floor: float = 1e-12) -> float:
    """:func:`finite_max` of the absolute values (a symmetric range for a diverging scale)."""
    return finite_max(*(np.abs(np.asarray(a)) for a in arrays), floor=floor)


def nonfinite_count(a, axis) -> int:
    """How many slices along ``axis`` (e.g. positions) of ``a`` hold at least one non-finite value."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc" or a.size == 0:
        return 0
    bad = ~np.isfinite(a)
    other = tuple(i for i in range(a.ndim) if i != axis % a.ndim)
    return int(bad.any(axis=other).sum()) if other else int(bad.sum())


def missing_note(n: int, what: str = "positions") -> str:
    """Caption suffix when recorded values are missing, e.g. ``" 3 positions have non-finite values (NaN or
    infinite) and are left blank."``; empty for ``n == 0``."""
    if n <= 0:
        return ""
    if n == 1:
        one = what[:-1] if what.endswith("s") else what
        return f" 1 {one} has non-finite values (NaN or infinite) and is left blank."
    return f" {n:,} {what} have non-finite values (NaN or infinite) and are left blank."


def ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``..."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def subsample_note(n: int, shown: int, what: str = "positions", verb: str = "shown") -> str:
    """Caption suffix when a view shows only part of the positions (the cap said in words), e.g.
    ``" Long text: 1,024 of 2,048 positions shown (about every 2nd, evenly spaced)."``."""
    if shown >= n:
        return ""
    ratio = (n - 1) / max(shown - 1, 1)
    every = f"about every {ordinal(round(ratio))}, " if ratio >= 1.5 else ""
    return f" Long text: {shown:,} of {n:,} {what} {verb} ({every}evenly spaced)."


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


def category_labels(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """Unique ``"t 'token'"`` category names for a categorical position axis (and the tick labels of a
    numeric one, :func:`token_ticks`: one format everywhere); hover shows them via ``%{x}``/``%{y}``, so
    large heatmaps need no per-cell hover array."""
    return [f"{p} '{labels[p]}'" for p in np.asarray(positions).tolist()]


def hover_tokens(labels: Sequence[str], positions: np.ndarray) -> list[str]:
    """``"t 'c'"`` strings for hover text (the format of :func:`category_labels`)."""
    return category_labels(labels, positions)


def finish(fig: FigureBuilder | go.Figure, title: str, caption: str, name: str, height: int | None = None,
           **layout) -> Chart:
    """Apply the common layout (white template, title, caption in ``layout.meta``, then any ``layout``
    overrides such as ``margin``) and wrap in a Chart; a :class:`FigureBuilder` is built here."""
    common = {
        "title": {"text": title, "x": 0.01, "xanchor": "left"},
        "font": {"size": 13},
        "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
        "meta": {"caption": caption, "view": name},
        "hoverlabel": {"namelength": -1},
    }
    if height is not None:
        common["height"] = height
    if isinstance(fig, FigureBuilder):
        fig.update_layout(**common)
        fig.update_layout(**layout)
        return Chart(fig.build(), caption)
    if getattr(fig, "_validate", True):
        fig.update_layout(template=TEMPLATE)
    fig.update_layout(**common)
    if layout:
        fig.update_layout(**layout)
    return Chart(fig, caption)


def add_cursor_line(fig: FigureBuilder | go.Figure, x: float | None, row: int | None = None,
                    col: int | None = None, axis: str = "x") -> None:
    """Mark the cursor position with a dashed vertical (``axis="x"``) or horizontal line spanning the
    subplot at ``row``/``col`` (a plain layout shape: ``add_vline`` is ~100x slower on subplots)."""
    if x is None:
        return
    if row is None:
        xref, yref = "x", "y"
    elif isinstance(fig, FigureBuilder):
        xref, yref = fig._ref(row, col)
    else:
        sp = fig.get_subplot(row, col)
        xref, yref = sp.xaxis.plotly_name.replace("axis", ""), sp.yaxis.plotly_name.replace("axis", "")
    line = {"color": HIGHLIGHT, "width": 1.5, "dash": "dash"}
    if axis == "x":
        shape = {"type": "line", "x0": x, "x1": x, "xref": xref, "y0": 0, "y1": 1, "yref": f"{yref} domain"}
    else:
        shape = {"type": "line", "y0": x, "y1": x, "yref": yref, "x0": 0, "x1": 1, "xref": f"{xref} domain"}
    fig.add_shape(line=line, opacity=0.8, name="cursor", **shape)


def cursor_box(fig: FigureBuilder, row_index: int, x1: float, row: int | None = None, col: int | None = None) -> None:
    """Outline row ``row_index`` of a categorical heatmap (the cursor's row, from column 0 to ``x1``; shapes on
    category axes use the category index). Named ``"cursor"`` like :func:`add_cursor_line`."""
    fig.add_shape(type="rect", x0=-0.5, x1=x1, y0=row_index - 0.5, y1=row_index + 0.5,
                  line={"color": HIGHLIGHT, "width": 2}, name="cursor", row=row, col=col)


_PLAY_SENTENCES = (
    (" Press Play or drag the slider to move along the text.", " Move the token cursor to move along the text."),
    (" Press Play to watch the frame turn token by token.", " Move the token cursor to turn it token by token."),
    (" Play moves along the text.", " The token cursor moves it along the text."),
    (" Play moves along the text", " The token cursor moves it along the text"),
    (" animated (", " drawn ("),
)


#: a view page's pointer to a figure it keeps under "More figures" (the PCA trajectory's 3-D form)
MORE_FIGURES_3D = " The 3-D projection is under More figures."


def without_cursor(caption: str) -> str:
    """``caption`` of a static figure shown outside a view page, with no token cursor and no "More figures"
    (the Train page's probe, ``geomlab trace --html``): the sentence :func:`without_play` put there about
    moving the cursor, and :data:`MORE_FIGURES_3D`, are dropped. Source: design choice."""
    for _, sentence in _PLAY_SENTENCES[:-1]:
        caption = caption.replace(sentence, "")
    return caption.replace(MORE_FIGURES_3D, "")


def without_play(caption: str, animate: bool) -> str:
    """``caption`` of a figure that can be animated, for its static form (``animate=False``, the app's: one
    cursor per page): its Play/slider sentence says the token cursor moves it instead. The caption
    strings stay as written (and as translated elsewhere); unknown wording is left alone."""
    if animate:
        return caption
    for old, new in _PLAY_SENTENCES:
        caption = caption.replace(old, new)
    return caption


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
