"""``geomlab bench defaults``: how much each figure a view opens on shows, on the bundled checkpoints.

For every bundled checkpoint, every view page that shows its kind and every figure of that view's default
set (:func:`geomlab.teach.views.default_figures`), built with the view's default controls at the page's
default cursor (:func:`geomlab.trace.predictions.default_cursor`) on the app's default text (the demo
sentence when the vocabulary knows every character, else 48 characters drawn from it, as the app picks it),
it prints simple informativeness numbers read from the figure's plotly traces and layout:

* ``heat``: the shape ``rows x cols`` of the largest heatmap (``-`` without one), and ``blank`` the fraction
  of its cells that are empty (NaN / None);
* ``row cv``: the median over the heatmap's rows of the coefficient of variation ``std / |mean|`` along the
  row (how much a layer's row changes along the text);
* ``cv``: the smallest coefficient of variation over the figure's line traces (a flat curve has ``cv`` near
  0), and ``max/med`` the largest ``max / median`` of the absolute values of a line (a spike stands out as a
  large ratio; 1 = flat);
* ``ticks``: on the axis with the most distinct values, the tick labels and the values (``x:12/66``: 12
  labels for 66 columns; ``x:3/66`` is too few, ``66/66`` too many at half width; ``auto``: plotly thins
  them itself).

Design choice: a measurement, not a test (nothing is asserted); the thresholds a reader applies are in
docs/views.md ("Defaults").
"""

from __future__ import annotations

import math

import numpy as np

from geomlab.bench import run_benchmark
from geomlab.checkpoints import catalog
from geomlab.core.argv import Parser, name_list

DEFAULT_TEXT = catalog.DEMO_TEXT
default_text = catalog.demo_text

#: What the keys of the JSON (``--json``) mean (module docstring; unitless).
DEFINITIONS = {
    "rows": "one per checkpoint, view and default figure",
    "checkpoint": "the bundled checkpoint", "view": "the view page", "figure": "the figure's name",
    "heat": "[rows, cols] of the figure's largest heatmap; null without one",
    "blank": "share of that heatmap's cells that are empty (0 to 1)",
    "row_cv": "median over the heatmap's rows of std / |mean| along the row (how much a row changes)",
    "cv": "the smallest std / |mean| over the figure's line traces (near 0: a flat curve)",
    "max_over_median": "the largest max |y| / median |y| of a line (1 = flat; large: a spike)",
    "ticks": "the axis with the most values as AXIS:LABELS/VALUES (auto: plotly thins the labels); - for none",
}


def _array(a) -> np.ndarray:
    """A trace's array as float64 (plotly's base64 ``{"dtype", "bdata", "shape"}`` decoded; None -> NaN)."""
    if isinstance(a, dict) and "bdata" in a:
        import base64

        x = np.frombuffer(base64.b64decode(a["bdata"]), dtype=np.dtype(a["dtype"])).astype(np.float64)
        shape = a.get("shape")
        return x.reshape([int(s) for s in str(shape).split(",")]) if shape else x
    x = np.asarray(a, dtype=object)
    return np.where(x == None, np.nan, x).astype(np.float64)  # noqa: E711 (elementwise)


def _finite(a) -> np.ndarray:
    try:
        x = _array(a).ravel()
    except (TypeError, ValueError):
        return np.zeros(0)
    return x[np.isfinite(x)]


def line_spread(y) -> tuple[float, float]:
    """``(cv, max_over_median)`` of a curve ``y`` (any shape; NaNs dropped): the coefficient of variation
    ``std / |mean|`` and ``max |y| / median |y|`` (``inf`` when the median is 0 and the max is not; ``nan``
    for fewer than 2 finite values). Design choice."""
    x = _finite(y)
    if len(x) < 2:
        return math.nan, math.nan
    mean = abs(float(x.mean()))
    cv = float(x.std()) / mean if mean > 0 else (math.inf if x.std() > 0 else 0.0)
    a = np.abs(x)
    med, top = float(np.median(a)), float(a.max())
    ratio = top / med if med > 0 else (math.inf if top > 0 else 1.0)
    return cv, ratio


def _axis_categories(fig: dict, axis: str) -> int:
    """How many distinct values the traces put on layout axis ``axis`` (``"xaxis"``, ``"yaxis2"``...)."""
    letter, suffix = axis[0], axis[5:]
    ref = letter + suffix
    vals: set = set()
    for t in fig.get("data", []):
        if t.get(f"{letter}axis", letter) != ref:
            continue
        v = t.get(letter)
        if v is None:
            z = t.get("z")
            if z is not None and t.get("type") == "heatmap":
                shape = np.shape(z)
                n = shape[1] if letter == "x" else shape[0]
                vals.update(range(n))
            continue
        vals.update(str(a) for a in np.asarray(v, dtype=object).ravel().tolist())
    return len(vals)


def measure_figure(fig) -> dict:
    """Informativeness numbers of one plotly figure (a ``go.Figure`` or its dict): ``heat`` (rows, cols) of
    the largest heatmap or None, ``blank`` its empty-cell fraction, ``row_cv`` the median over its rows of
    :func:`line_spread`'s CV (how much a row varies along the position axis), ``cv`` the smallest CV and
    ``ratio`` the largest ``max/median`` over line traces (a flat curve: small CV and ratio near 1),
    ``axes`` ``{axis: (labels or None for plotly's own, categories)}`` for every axis with more than one
    distinct value. Design choice."""
    d = fig.to_plotly_json() if hasattr(fig, "to_plotly_json") else fig
    heat, blank, row_cv, cv, ratio = None, math.nan, math.nan, math.nan, math.nan
    for t in d.get("data", []):
        if t.get("type") == "heatmap" and t.get("z") is not None:
            z = _array(t["z"])
            if z.ndim == 2 and (heat is None or z.size > heat[0] * heat[1]):
                heat, blank = z.shape, float(np.isnan(z).mean())
                cvs = [line_spread(r)[0] for r in z]
                cvs = [c for c in cvs if not math.isnan(c)]
                row_cv = float(np.median(cvs)) if cvs else math.nan
        elif t.get("type") in ("scatter", "scattergl") and t.get("y") is not None and \
                "lines" in str(t.get("mode", "lines")):
            c, r = line_spread(t["y"])
            if not math.isnan(c):
                cv = c if math.isnan(cv) else min(cv, c)
                ratio = r if math.isnan(ratio) else max(ratio, r)
    axes = {}
    layout = d.get("layout", {})
    for axis in sorted(k for k in layout if k.startswith(("xaxis", "yaxis"))):
        n = _axis_categories(d, axis)
        tv = layout[axis].get("tickvals")
        if n > 1:
            axes[axis] = (None if tv is None else len(tv), n)
    return {"heat": heat, "blank": blank, "row_cv": row_cv, "cv": cv, "ratio": ratio, "axes": axes}


def _ticks(axes: dict) -> str:
    """The axis with the most values as ``x:12/66`` (labels/values), an axis with explicit labels first;
    ``-`` without one."""
    if not axes:
        return "-"
    name, (labels, n) = max(axes.items(), key=lambda kv: (kv[1][0] is not None, kv[1][1]))
    return f"{name[0]}{name[5:]}:{'auto' if labels is None else labels}/{n}"


def measure_checkpoint(entry, slug: str) -> list[tuple[str, dict]]:
    """``[(figure name, measure_figure numbers)]`` for the default figures of view ``slug`` on checkpoint
    listing ``entry`` (its default text, default controls and default cursor)."""
    from geomlab.checkpoints import io as checkpoint
    from geomlab.trace import trace_text
    from geomlab.trace.predictions import default_cursor
    from geomlab.teach import views

    ck = checkpoint.load(entry.path)
    ck.model.eval()
    tr = trace_text(ck.model, ck.vocab, default_text(entry))
    controls = views.default_controls(slug, tr)
    cursor = default_cursor(tr)
    out = []
    for spec in views.default_figures(slug, tr):
        chart = views.build_figure(tr, spec.name, controls, cursor)
        out.append((spec.name, measure_figure(chart.figure)))
    return out


def _fmt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}" if x < 1e4 else "inf"


def main(argv: list[str] | None = None) -> int:
    """Command line; prints one row per bundled checkpoint, view and default figure. Returns 0."""
    bundled = catalog.list_checkpoints(user=False)
    p = Parser(prog="geomlab bench defaults", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", type=name_list([e.name for e in bundled], "bundled checkpoint"), default=None,
                   help="comma-separated checkpoint names (default: every bundled one): "
                   + ", ".join(e.name for e in bundled))
    return run_benchmark(p, argv, lambda args: _measure(args, bundled), DEFINITIONS)


def _measure(args, bundled) -> dict:
    """Measure the default figures of every view of the listings ``bundled`` chosen by ``args``; print the
    table; its rows (:func:`measure_figure`'s numbers; ``heat`` as ``[rows, cols]``, ``None`` without one)."""
    import torch

    from geomlab.teach import views

    torch.set_num_threads(1)
    entries = [e for e in bundled if args.only is None or e.name in args.only]
    print(f"{'checkpoint':34s} {'view':12s} {'figure':20s} {'heat':>7s} {'blank':>5s} {'row cv':>6s} "
          f"{'cv':>6s} {'max/med':>7s} {'ticks':>10s}")
    rows = []
    for e in entries:
        for view in views.views_for_kind(e.kind):
            for name, m in measure_checkpoint(e, view.slug):
                heat = "-" if m["heat"] is None else f"{m['heat'][0]}x{m['heat'][1]}"
                print(f"{e.name:34s} {view.slug:12s} {name:20s} {heat:>7s} {_fmt(m['blank']):>5s} "
                      f"{_fmt(m['row_cv']):>6s} {_fmt(m['cv']):>6s} {_fmt(m['ratio']):>7s} {_ticks(m['axes']):>10s}")
                rows.append({"checkpoint": e.name, "view": view.slug, "figure": name, "heat": m["heat"],
                             "blank": m["blank"], "row_cv": m["row_cv"], "cv": m["cv"], "max_over_median": m["ratio"],
                             "ticks": _ticks(m["axes"])})
    return {"rows": rows}
