"""One colour scale and one value axis for the same figure drawn for two checkpoints (Compare's two sides).

Each side's figure scales itself to its own data, so side by side a map of ±10 and one of ±100 show the same
colours. :func:`share_scales` returns copies of two figures of the same kind with one colour range per colour
scale (a diverging scale keeps its middle, e.g. 0) and one range per value axis of line, scatter and bar
charts, each covering both sides' data. Figures whose traces do not pair up keep their own colour scales;
figures on different y axes keep their own value axes.

Backend only (plotly, numpy); no streamlit.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import plotly.graph_objects as go

#: Trace types whose ``z`` is drawn through a colour scale (``zmin``/``zmax``/``zmid``).
Z_TYPES = ("heatmap", "heatmapgl", "contour", "histogram2d", "histogram2dcontour")
#: Trace types whose ``y`` values are the quantity read off a value axis.
Y_TYPES = ("scatter", "scattergl", "bar")
#: Padding added on each side of a shared value-axis range, as a fraction of its span (design choice, close
#: to plotly's own autorange padding of lines).
PAD = 0.05


def _finite(values: Any) -> np.ndarray:
    """The finite numbers of ``values`` (nested lists, tuples or arrays; None is skipped) as a flat array;
    an empty array when ``values`` is None or holds non-numbers (strings, dates)."""
    if values is None:
        return np.zeros(0)
    try:
        arr = np.asarray(values, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        return np.zeros(0)
    return arr[np.isfinite(arr)]


def _same_structure(a: go.Figure, b: go.Figure) -> bool:
    """Whether the two figures' traces pair up one to one: the same number, types and axes, in order."""
    if len(a.data) != len(b.data):
        return False
    for ta, tb in zip(a.data, b.data):
        if ta.type != tb.type:
            return False
        for attr in ("xaxis", "yaxis", "coloraxis"):
            if getattr(ta, attr, None) != getattr(tb, attr, None):
                return False
    return True


def _z_groups(fig: go.Figure) -> list[list[int]]:
    """Indices of the colour-scaled traces of ``fig`` grouped by the colour scale they share: traces on one
    ``coloraxis`` form one group; traces with the same explicit ``(zmin, zmax)`` form one group (a figure
    that gave several panels one range keeps it); an automatically scaled trace is a group of its own."""
    groups: dict[Any, list[int]] = {}
    for i, t in enumerate(fig.data):
        if t.type not in Z_TYPES:
            continue
        axis = getattr(t, "coloraxis", None)
        if axis:
            key: Any = ("axis", axis)
        elif t.zmin is not None and t.zmax is not None:
            key = ("range", float(t.zmin), float(t.zmax), t.zmid)
        else:
            key = ("own", i)
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _share_colour(a: go.Figure, b: go.Figure) -> None:
    """Give every colour-scale group of ``a`` and the paired traces of ``b`` one range (in place)."""
    groups_b = {tuple(g) for g in _z_groups(b)}
    for group in _z_groups(a):
        if tuple(group) not in groups_b:
            continue  # the two figures split their maps into scales differently: leave this group alone
        axis = getattr(a.data[group[0]], "coloraxis", None)
        vals, mids = [], []
        for fig in (a, b):
            for i in group:
                t = fig.data[i]
                vals.append(_finite(t.z))
                vals.append(_finite([t.zmin, t.zmax]))  # an explicit range, e.g. [0, 1], stays covered
                mids.append(t.zmid)
            if axis:
                ca = fig.layout[axis]
                vals.append(_finite([ca.cmin, ca.cmax]))
                mids.append(ca.cmid)
        v = np.concatenate(vals)
        if not v.size:
            continue
        lo, hi = float(v.min()), float(v.max())
        mid = next((float(m) for m in mids if m is not None), None)
        if mid is not None:  # diverging: symmetric about its middle, so equal colours mean equal distances
            half = max(abs(lo - mid), abs(hi - mid))
            lo, hi = mid - half, mid + half
        for fig in (a, b):
            if axis:
                fig.layout[axis].update(cmin=lo, cmax=hi, cauto=False,
                                        **({"cmid": mid} if mid is not None else {}))
            for i in group:
                fig.data[i].update(zmin=lo, zmax=hi, zauto=False, **({"zmid": mid} if mid is not None else {}))


def _axis_key(ref: str | None) -> str:
    """``"y2"`` -> ``"yaxis2"`` (the layout key of a trace's axis reference; None or ``"y"`` -> ``"yaxis"``)."""
    ref = ref or "y"
    return "yaxis" + ref[1:]


def _value_axis(fig: go.Figure, key: str) -> bool:
    """Whether layout axis ``key`` of ``fig`` is a plain linear value axis whose range can be set: not
    anchored to another axis's scale (a square map or circle), not matched, reversed, logarithmic,
    categorical or a date."""
    ax = fig.layout[key]
    return (ax.scaleanchor is None and ax.matches is None and ax.autorange != "reversed"
            and ax.type in (None, "-", "linear"))


def _value_axes(fig: go.Figure) -> dict[str, list[int]]:
    """Layout y-axis key -> indices of the traces of ``fig`` drawn on it."""
    by_axis: dict[str, list[int]] = {}
    for i, t in enumerate(fig.data):
        by_axis.setdefault(_axis_key(getattr(t, "yaxis", None)), []).append(i)
    return by_axis


def _share_values(a: go.Figure, b: go.Figure) -> None:
    """Give every value axis that holds only line, scatter or vertical bar traces in both figures one range
    (in place). The traces need not pair up (a chart with a line per layer has more lines for a deeper
    model), but both figures must use the same axes; an axis with any other trace (a map's position axis)
    is left alone."""
    axes = {"a": _value_axes(a), "b": _value_axes(b)}
    if set(axes["a"]) != set(axes["b"]):
        return
    for key in axes["a"]:
        traces = [a.data[i] for i in axes["a"][key]] + [b.data[i] for i in axes["b"][key]]
        if any(t.type not in Y_TYPES or getattr(t, "orientation", None) == "h" for t in traces):
            continue  # a map on this axis, or horizontal bars (y is the category, not the value)
        if not (_value_axis(a, key) and _value_axis(b, key)):
            continue
        vals = [_finite(t.y) for t in traces] + [_finite([0.0]) for t in traces if t.type == "bar"]
        vals += [_finite(fig.layout[key].range) for fig in (a, b) if fig.layout[key].range is not None]
        v = np.concatenate(vals) if vals else np.zeros(0)
        if not v.size:
            continue
        lo, hi = float(v.min()), float(v.max())
        pad = PAD * (hi - lo) if hi > lo else max(abs(lo), 1.0) * PAD
        # an axis drawn from 0 (rangemode "tozero"/"nonnegative", e.g. a magnitude) keeps 0 as its floor
        floor = 0.0 if lo >= 0 and any(fig.layout[key].rangemode in ("tozero", "nonnegative")
                                       for fig in (a, b)) else lo - pad
        for fig in (a, b):
            fig.layout[key].update(range=[min(floor, lo), hi + pad], autorange=False)


def share_scales(fig_a: Any, fig_b: Any) -> tuple[go.Figure, go.Figure]:
    """Copies of two drawings of the same figure (plotly figures or their dicts), on one scale.

    Colour: each colour scale of ``fig_a`` (a ``coloraxis``, a set of heatmaps given one explicit
    ``zmin``/``zmax``, or one automatically scaled heatmap) and the same traces of ``fig_b`` get one
    ``zmin``/``zmax`` from the smallest to the largest finite value of both sides' data and explicit ranges;
    where either side sets a middle (``zmid``/``cmid``: a diverging scale, e.g. a tangent generator or an
    energy change map) the range is made symmetric about it and the middle kept. Values: each y axis whose
    traces are all lines, markers or vertical bars in both figures gets one range over both sides' finite y
    values (bars from 0), padded by :data:`PAD` of its span (an axis drawn from 0 keeps 0 as its floor), also when the number of lines differs (a line
    per layer); axes of maps (scale-anchored, reversed), log, category and date axes keep their own. Source: design choice (Compare's sides read on one scale).

    Returns ``(a, b)``, new :class:`plotly.graph_objects.Figure` objects; the inputs are not changed (a
    figure is deep-copied, so a cached figure is never touched). Colour scales are shared only when the
    traces pair up (the same number, types and axes in order), value axes only when both figures use the
    same y axes; otherwise that part of the copies is left as drawn.
    Raises nothing for figures of the same shape; ``TypeError``/``ValueError`` from plotly if an input is not
    a figure.
    """
    a, b = (copy.deepcopy(f) if isinstance(f, go.Figure) else go.Figure(f) for f in (fig_a, fig_b))
    if _same_structure(a, b):
        _share_colour(a, b)
    _share_values(a, b)
    return a, b
