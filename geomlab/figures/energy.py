"""CEM figures: energy descent over the recursion steps (Xu et al., arXiv 2605.07588).

For every layer and sub-block (attention, MLP): the energy of the iterate x^t at steps t = 0..T, token
mean as a line with a band over tokens (10th to 90th percentile, design choice), the displacement
``||x^t - h|| / rho`` alongside, and a flag (red triangle) at every step where the token-mean energy rose.
By default the change from step 0, ``eps(x^t) - eps(x^0)``, is plotted (``relative=True``): absolute levels
carry a ``log i`` offset per position and differ between layers (Xu et al., arXiv 2605.07588), so only
steps within one layer are compared. Energies are in arbitrary units (the model's energy scale); displacement is
dimensionless (RMS units of the layer input).

A step counts as a rise when ``mean_t - mean_{t-1} > RISE_TOL * max(1, |mean_{t-1}|)``.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import DIVERGING, HIGHLIGHT, add_cursor_line, hover_tokens, colour, token_ticks
from geomlab.figures._sampling import (
    WINDOW, check_cursor, check_index, window, window_note, blank, finite_abs_max, missing_note, nonfinite_count,
)
from geomlab.figures.catalog import CEM_SRC, Explanation, figure, is_cem
from geomlab.core.markup import md_label
from geomlab.trace import CEMTrace
from geomlab.trace.base import cached

BLOCK_NAMES = ("attention", "MLP")
RISE_TOL = 1e-6
BAND = (10, 90)
_BAND_FILL = ("rgba(0,114,178,0.18)", "rgba(230,159,0,0.22)")
_ROSE_MARKER = {"symbol": "triangle-up", "size": 13, "color": "#D55E00", "line": {"color": "black", "width": 1}}
_DASHES = ("solid", "dash", "dashdot", "longdash", "longdashdot")  # no "dot": the cursor token is dotted
# and a marker per layer: in a legend's short sample a long dash reads as a solid line (design choice)
_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x")


def _cem(tr) -> CEMTrace:
    if not isinstance(tr, CEMTrace):
        raise FigureError(f"this view needs a CEM trace, got {getattr(tr, 'kind', tr)!r}")
    return tr


def token_mean(E: np.ndarray) -> np.ndarray:
    """``[..., token]`` energies -> ``[...]``: the mean over the last (token) axis of the finite values only
    (NaN where a step has none): one token with a NaN energy must not blank the whole curve. Design choice."""
    E = blank(np.asarray(E, dtype=np.float64))
    ok = np.isfinite(E)
    n = ok.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.where(ok, E, 0.0).sum(-1) / n, np.nan)


def _token_percentile(E: np.ndarray, q: float) -> np.ndarray:
    E = blank(np.asarray(E, dtype=np.float64))
    out = np.full(E.shape[:-1], np.nan)
    some = np.isfinite(E).any(-1)
    if some.any():
        out[some] = np.nanpercentile(E[some], q, axis=-1)
    return out


def energy_rises(tr: CEMTrace) -> np.ndarray:
    """``[layer, block, step]`` bool: True at step t >= 1 where the token-mean energy (over tokens with finite
    values) rose from t - 1 (beyond ``RISE_TOL`` relative); step 0 is always False. Computed once per trace
    (:func:`geomlab.trace.base.cached`): the chart, its "look for" line and the page's facts all ask. Design
    choice (the tolerance)."""
    tr = _cem(tr)

    def rises() -> np.ndarray:
        m = token_mean(tr.energies)
        out = np.zeros(m.shape, dtype=bool)
        with np.errstate(invalid="ignore"):  # NaN where a step has no finite token: no rise
            out[..., 1:] = m[..., 1:] - m[..., :-1] > RISE_TOL * np.maximum(1.0, np.abs(m[..., :-1]))
        return out

    return cached(tr, ("energy_rises",), rises)


def token_rises(tr: CEMTrace) -> np.ndarray:
    """``[layer, block, step]`` number of tokens whose own energy rose at step t (same tolerance)."""
    tr = _cem(tr)
    e = tr.energies.astype(np.float64)
    out = np.zeros(e.shape[:3], dtype=int)
    with np.errstate(invalid="ignore"):  # inf - inf: no rise counted
        diff = e[..., 1:, :] - e[..., :-1, :]
    out[..., 1:] = (diff > RISE_TOL * np.maximum(1.0, np.abs(e[..., :-1, :]))).sum(-1)
    return out


def _block_name(b: int) -> str:
    return BLOCK_NAMES[b] if b < len(BLOCK_NAMES) else f"block {b}"


def _legend_entries(tr: CEMTrace, cursor: int | None, rose: bool, displacement: bool, layers: list[int]) -> list:
    """``[(label, style)]`` of the energy descent's legend: one legend-only trace per kind of series."""
    kinds = [("token mean", {"mode": "lines+markers", "line": {"color": colour(0)}, "legendgroup": "mean"}),
             (f"{BAND[0]}–{BAND[1]}% band over tokens", {"mode": "lines", "fill": "toself", "legendgroup": "band",
                                                         "fillcolor": _BAND_FILL[0], "line": {"width": 0}})]
    if rose:  # the legend names the red triangles only when there are some
        kinds.append(("energy rose", {"mode": "markers", "marker": _ROSE_MARKER, "legendgroup": "rose"}))
    if cursor is not None:
        kinds.append((f"position {cursor} '{tr.labels[cursor]}'",
                      {"mode": "lines", "line": {"color": HIGHLIGHT, "dash": "dot", "width": 2},
                       "legendgroup": "cursor"}))
    if displacement:
        kinds += [(f"displacement, layer {layer}",
                   {"mode": "lines+markers", "line": {"color": "#555555", "dash": _DASHES[layer % len(_DASHES)]},
                    "marker": {"symbol": _SYMBOLS[layer % len(_SYMBOLS)], "size": 7}})
                  for layer in layers[:len(_DASHES)]]
    return kinds


def _descent_caption(tr: CEMTrace, cursor: int | None, relative: bool, displacement: bool, n_rises: int,
                     n_bad: int) -> str:
    """The energy descent's caption: what the curves are, whether the mean energy rose, missing values."""
    cap = ("Energy of the layer's iterate at each recursion step (token mean, which leaves the band when a "
           f"few tokens dominate; band: {BAND[0]}th–{BAND[1]}th percentile over tokens")
    if cursor is not None:
        cap += f"; dotted: position {cursor} '{md_label(tr.labels[cursor])}'"
    cap += ")" + (", as the change from step 0, "
                  "$\\Delta\\varepsilon = \\varepsilon(x^t) - \\varepsilon(x^0)$" if relative else "")
    cap += ("; bottom: how far the iterate moved from the layer input, $\\lVert x^t - h\\rVert/\\rho$ "
            "(colour = sub-block, dash = layer). " if displacement else ". ")
    if n_rises:
        cap += (f"Red triangles: {n_rises} step(s) where the mean energy ROSE (the step size has left the "
                "descent regime). ")
    else:
        cap += "The mean energy fell (or stayed) at every step. "
        from geomlab.whatif.energy import overshoot

        if (over := overshoot(tr)) is not None:
            cap += (f"Past the trained T = {over.trained} it runs away, though (layer {over.layer}'s "
                    f"{_block_name(over.block)} falls {over.rate:,.0f}× faster per step than within the trained "
                    "steps): lower energy there is overshoot, not a better fit. ")
    cap += "Compare steps within a layer, not levels across layers."
    if n_bad:
        cap += (f" {n_bad:,} position{'s have' if n_bad > 1 else ' has'} non-finite energies (NaN or infinite), "
                "left out of the means and bands.")
    return cap


@figure(label="energy per step", applies=is_cem, explain=Explanation(
    r"\bar\varepsilon(x^t) - \bar\varepsilon(x^0),\quad \lVert x^t - h \rVert / \rho",
    "Top: token-mean energy change per recursion step, one line per layer and sub-block; bottom: how far the "
    "iterate moved from the input.",
    "Every line should go down; red triangles mark a step where it rose.",
    ("Energy", "Recursion step"), f"{CEM_SRC}"))
def energy_descent(tr: CEMTrace, cursor: int | None = None, relative: bool = True) -> Chart:
    """Energy per recursion step for each layer (rows) and sub-block (columns 1-2), displacement in
    column 3. Trace names: ``"L{l} {block} band"`` (two traces: lower edge, filled upper edge),
    ``"L{l} {block} mean"``, ``"L{l} {block} rose"`` (markers at rises, possibly empty),
    ``"L{l} {block} cursor"`` (the cursor token's own curve, if a cursor is given),
    ``"L{l} {block} displacement"`` (token mean).

    Raises :class:`FigureError` for a non-CEM trace or a bad cursor.
    """
    return _descent(tr, cursor, relative, None)


@figure(label="energy per step, one layer", applies=is_cem, controls=("layer",), replaces=("energy_descent",),
        explain=Explanation(
    r"\bar\varepsilon(x^t) - \bar\varepsilon(x^0),\quad \lVert x^t - h \rVert / \rho",
    "The energy per step of one layer: its two sub-blocks, and how far the iterate moved from the input.",
    "Both lines should go down; red triangles mark a step where it rose. The layer slider walks the layers.",
    ("Energy", "Recursion step"), f"{CEM_SRC}"))
def energy_layer(tr: CEMTrace, layer: int = -1, cursor: int | None = None, relative: bool = True) -> Chart:
    """:func:`energy_descent` of layer ``layer`` only (negative counts from the last): one row of
    sub-blocks over that layer's displacement, compact enough to be a page's first chart. Same trace names.
    Raises :class:`FigureError` for a non-CEM trace, a bad layer or cursor. Design choice."""
    tr = _cem(tr)
    layer = check_index("layer", layer, tr.energies.shape[0])
    return _descent(tr, cursor, relative, [layer])


def _descent(tr: CEMTrace, cursor: int | None, relative: bool, layers: list[int] | None) -> Chart:
    """The energy descent of ``layers`` (None: all), one row each (see :func:`energy_descent`)."""
    tr = _cem(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    E = tr.energy_change() if relative else tr.energies
    E = E.astype(np.float64)
    L, B, S, _ = E.shape
    layers = list(range(L)) if layers is None else layers
    steps = np.arange(S)
    mean = token_mean(E)  # NaN-safe reductions over the finite tokens
    lo, hi = _token_percentile(E, BAND[0]), _token_percentile(E, BAND[1])
    n_bad = nonfinite_count(tr.energies, axis=-1)
    rises = energy_rises(tr)
    n_rise_tok = token_rises(tr)
    disp = tr.displacement
    # Layout (readable at half width too): rows = layers, columns = sub-blocks; one extra row at the bottom
    # with the displacement of every layer and sub-block (colour = sub-block, dash = layer).
    rows = len(layers) + 1 if disp is not None else len(layers)
    titles = [f"L{layer} {_block_name(b)}" for layer in layers for b in range(B)]
    specs = [[{} for _ in range(B)] for _ in layers]
    if disp is not None:
        titles.append("displacement from the layer input")
        specs.append([{"colspan": B}] + [None] * (B - 1))
    row_px, gap_px = 190, 74
    plot_px = rows * row_px + (rows - 1) * gap_px
    fig = FigureBuilder.grid(rows=rows, cols=B, subplot_titles=titles, specs=specs, horizontal_spacing=0.13,
                        vertical_spacing=gap_px / plot_px if rows > 1 else 0.0)
    ylab = "Δε (a.u.)" if relative else "ε (a.u.)"
    for row, layer in enumerate(layers):
        for b in range(B):
            r, c, name = row + 1, b + 1, f"L{layer} {_block_name(b)}"
            col = colour(b)
            fig.add_trace(dict(type="scatter",
                x=steps, y=lo[layer, b], mode="lines", line={"width": 0}, name=f"{name} band",
                showlegend=False, hoverinfo="skip"), row=r, col=c)
            fig.add_trace(dict(type="scatter", x=steps, y=hi[layer, b], mode="lines", line={"width": 0}, fill="tonexty",
                                               fillcolor=_BAND_FILL[b % 2], legendgroup="band",
                                               name=f"{name} band", showlegend=False,
                                               hovertemplate=f"{BAND[0]}–{BAND[1]}th percentile over tokens"
                                                   "<extra></extra>"), row=r, col=c)
            fig.add_trace(dict(type="scatter",
                x=steps, y=mean[layer, b], mode="lines+markers", line={"color": col}, name=f"{name} mean",
                showlegend=False, customdata=n_rise_tok[layer, b], legendgroup="mean",
                hovertemplate=(f"{name}<br>step %{{x}}<br>token mean = %{{y:.4g}}<br>tokens whose energy rose: "
                               "%{customdata}<extra></extra>")), row=r, col=c)
            rs = steps[rises[layer, b]]
            fig.add_trace(dict(type="scatter",
                x=rs, y=mean[layer, b][rises[layer, b]], mode="markers", name=f"{name} rose",
                marker=_ROSE_MARKER, legendgroup="rose",
                showlegend=False, hovertemplate="energy ROSE at step %{x}<extra></extra>"), row=r, col=c)
            if cursor is not None:
                fig.add_trace(dict(type="scatter",
                    x=steps, y=blank(E[layer, b, :, cursor]), mode="lines", name=f"{name} cursor", showlegend=False,
                    meta="cursor",
                    line={"color": HIGHLIGHT, "dash": "dot", "width": 2}, legendgroup="cursor",
                    hovertemplate=(f"position {cursor} '{tr.labels[cursor]}'<br>step %{{x}}: %{{y:.4g}}"
                                   "<extra></extra>")), row=r, col=c)
            fig.update_yaxes(title_text=ylab, row=r, col=c, title_standoff=4)
            if disp is not None:
                fig.add_trace(dict(type="scatter",
                    x=steps, y=token_mean(disp[layer, b]), mode="lines+markers",
                    line={"color": col, "dash": _DASHES[layer % len(_DASHES)]},
                    marker={"symbol": _SYMBOLS[layer % len(_SYMBOLS)], "size": 7},
                    name=f"{name} displacement", legendgroup="displacement", showlegend=False,
                    hovertemplate=(f"layer {layer} {_block_name(b)}, step %{{x}}<br>mean ‖x<sup>t</sup> − h‖/ρ = "
                                   "%{y:.4g}<extra></extra>")), row=rows, col=1)
    if disp is not None:
        fig.update_yaxes(title_text="‖x<sup>t</sup> − h‖/ρ", row=rows, col=1, rangemode="tozero", title_standoff=4)
    # legend: one entry per kind of series (legend-only traces, drawn nowhere)
    # (clicking an entry toggles every trace of its legendgroup)
    kinds = _legend_entries(tr, cursor, bool(rises[layers].any()), disp is not None, layers)
    for label, style in kinds:
        fig.add_trace(dict(type="scatter", x=[None], y=[None], name=label, showlegend=True, hoverinfo="skip", **style),
                      row=1, col=1)
    x_range = [-0.5, S - 0.5]
    dtick = 1 if S <= 9 else int(np.ceil((S - 1) / 8))
    fig.update_xaxes(tickmode="linear", tick0=0, dtick=dtick, range=x_range, title_standoff=2)
    fig.update_xaxes(title_text="step t")  # every axis is labelled; the bottom row says it in full
    fig.update_xaxes(title_text="recursion step t", row=rows)
    cap = _descent_caption(tr, cursor, relative, disp is not None, int(rises[layers].sum()), n_bad)
    legend_rows = int(np.ceil(len(kinds) / 3))
    bottom = 56 + 22 * legend_rows
    title = f"CEM energy descent (T = {tr.recursion_steps})" + (f", layer {layers[0]}" if len(layers) == 1 and L > 1 else "")
    return finish(fig, title, cap, "energy_descent" if len(layers) == L else "energy_layer",
                  height=plot_px + 70 + bottom, margin={"l": 64, "r": 16, "t": 70, "b": bottom},
                  legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 0, "yanchor": "bottom",
                          "yref": "container", "font": {"size": 12}, "traceorder": "normal"})


@figure(click="position", label="energy per token", applies=is_cem, controls=("layer", "block"), explain=Explanation(
    r"\varepsilon(x_i^t) - \varepsilon(x_i^0)",
    "Per-token energy change for one layer and sub-block: blue fell, red rose.",
    "Tokens whose energy rises while the mean falls.",
    ("Energy",), f"{CEM_SRC}"))
def energy_tokens(tr: CEMTrace, layer: int = 0, block: int = 0, cursor: int | None = None,
                  size: int = WINDOW) -> Chart:
    """Heatmap of each token's energy change from step 0 (rows = recursion steps, columns = positions)
    for one layer and sub-block over the window of ``size`` positions around the cursor; diverging scale
    centred at 0 (blue = fell, red = rose), its range over every position.
    Traces: one heatmap ``"energy change"``."""
    tr = _cem(tr)
    layer = check_index("layer", layer, tr.energies.shape[0])
    block = check_index("block", block, tr.energies.shape[1])
    cursor = check_cursor(cursor, tr.n_positions)
    idx = window(tr.n_positions, cursor, size)
    change = tr.energy_change()[layer, block]
    z = blank(change[:, idx].astype(np.float64))
    # over every position (the scale stays put as the window moves) and finite values only (a NaN cell stays
    # blank, the others keep their colours)
    lim = finite_abs_max(blank(change))
    text = np.broadcast_to(np.array(hover_tokens(tr.labels, idx)), z.shape)
    fig = FigureBuilder([dict(type="heatmap",
        z=z, x=idx, y=np.arange(z.shape[0]), colorscale=DIVERGING, zmid=0, zmin=-lim,
        zmax=lim, text=text, name="energy change",
        colorbar={"title": {"text": "Δε (a.u.)"}},
        hovertemplate="position %{text}<br>step %{y}<br>ε(x<sup>t</sup>) − ε(x<sup>0</sup>) = %{z:.4g}"
                                             "<extra></extra>")])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    fig.update_yaxes(title_text="recursion step", tickmode="linear", dtick=1)
    add_cursor_line(fig, cursor)
    cap = (f"Per-token energy change from step 0 in layer {layer}, {_block_name(block)} sub-block: blue where "
           "the token's energy fell, red where it rose." + window_note(tr.n_positions, idx)
           + missing_note(nonfinite_count(z, axis=-1)))
    return finish(fig, f"Energy change per token (layer {layer}, {_block_name(block)})", cap, "energy_tokens")
