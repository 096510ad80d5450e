"""What every figure function builds and returns: the :class:`Chart` ``(figure, caption)``, the
:class:`FigureError` it raises, the :class:`FigureBuilder` that assembles a figure as plain dicts (validated
by plotly only under :data:`VALIDATE`), the white template and :func:`finish`, the common layout.
Design choices, documented in docs/views.md."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import NamedTuple

import numpy as np
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


# The parts of plotly's "plotly_white" layout that these views use: the full template (defaults for every
# trace type, geo, polar, ...) costs ~50 ms to copy into each figure and ~7 KB of JSON; this one ~5 ms.
_WHITE = pio.templates["plotly_white"].layout.to_plotly_json()
TEMPLATE = go.layout.Template(layout={k: _WHITE[k] for k in (
    "xaxis", "yaxis", "scene", "plot_bgcolor", "paper_bgcolor", "font", "colorway", "hovermode", "hoverlabel",
    "shapedefaults", "title", "annotationdefaults") if k in _WHITE})
pio.templates["geomlab"] = TEMPLATE

VALIDATE = False
"""Let plotly validate every property of every figure (data, layout and frames). Off by default: the views
build plain dicts and wrap them in a ``go.Figure`` without plotly's per-property checks, which take most of
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
    :data:`VALIDATE`: building through plotly's objects validates and deep-copies every property on every
    update, which costs most of a view's time."""

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
