"""Figures of an intervention (:class:`geomlab.whatif.outcome.Outcome`): the guesses (next token, or a word
problem's running product) before and after at one position, and the effect along the text (KL divergence and
the change in surprisal of what really follows). They take an outcome, not a trace, so they are not catalogue figures
(:func:`~geomlab.figures.catalog.figure`); the app's "What if" panel draws them. Design choice."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from geomlab.figures._chart import Chart, FigureBuilder, FigureError, finish
from geomlab.figures._sampling import WINDOW, window as shown_window
from geomlab.figures._style import COLUMN_HOVER, add_cursor_line, colour, hover_tokens, pale, thin_ticks, token_ticks
from geomlab.core.markup import md_label
from geomlab.whatif.outcome import fmt_bits
from geomlab.whatif.patching import METRIC_WORDS

BEFORE, AFTER = "#999999", colour(0)
"""Colours of the plain run (grey) and the intervened run (the first index colour)."""
UP, DOWN = "#b2182b", "#2166ac"
"""A surprisal that rose (red) or fell (blue): neither is the cursor's orange."""
PATCH_SCALE = [[0.0, (5, 10, 172)], [0.35, (106, 137, 247)], [0.5, (190, 190, 190)], [0.6, (220, 170, 132)],
               [0.7, (230, 145, 90)], [1.0, (178, 10, 28)]]
"""The patching heatmap's colour scale: Plotly's ``RdBu`` (blue, grey middle, red), spelled out so that it can
be muted."""
MUTED = 0.7
"""How far a sweep that barely changes its prediction (:attr:`geomlab.whatif.patching.Sweep.barely_changes`)
moves each colour of :data:`PATCH_SCALE` toward its grey middle: its strongest cell is pale, so no cell reads
as a strong result (design choice)."""


def _patch_scale(muted: bool) -> list:
    """:data:`PATCH_SCALE` as Plotly colours, each moved :data:`MUTED` of the way to grey when ``muted``."""
    grey = PATCH_SCALE[2][1]
    k = MUTED if muted else 0.0
    return [[at, "rgb({},{},{})".format(*(round(c + (g - c) * k) for c, g in zip(rgb, grey)))]
            for at, rgb in PATCH_SCALE]


def whatif_guesses(outcome, position: int, token_names: Sequence[str], k: int = 5,
                   label: str | None = None) -> Chart:
    """The ``k`` most likely next tokens after ``position`` (running products at it, for a word problem's
    outcome: ``outcome.predicts``) before and after the intervention, as grouped
    horizontal bars (probabilities in [0, 1]): every token in either top-k, ordered by its probability
    after. ``token_names``: the vocabulary's names by id (``token_names[i]``); ``label``: the position's name
    (:func:`geomlab.trace.position_labels`), quoted after its number in the title as the app's prediction
    panel writes it (``Next token after position 2 “🙂→�”``). Traces ``"before"``, ``"after"``. Raises
    :class:`FigureError` for a position outside the text or ``k < 1``. Design choice."""
    T = len(outcome.before)
    if not 0 <= position < T:
        raise FigureError(f"position {position} out of range: the text has {T} positions")
    if k < 1:
        raise FigureError("k must be at least 1")
    from geomlab.whatif.outcome import log_softmax

    p = np.exp(log_softmax(outcome.before[position]))
    q = np.exp(log_softmax(outcome.after[position]))
    ids = list(dict.fromkeys([int(i) for i in np.argsort(-q, kind="stable")[:k]]
                             + [int(i) for i in np.argsort(-p, kind="stable")[:k]]))
    ids.sort(key=lambda i: -q[i])
    wp = outcome.predicts != "next token"
    names = [f"“{token_names[i] if i < len(token_names) else i}”" for i in ids][::-1]
    fig = FigureBuilder()
    for name, probs, col in (("before", p, BEFORE), ("after", q, AFTER)):
        vals = [float(probs[i]) for i in ids][::-1]
        fig.add_trace({"type": "bar", "orientation": "h", "x": vals, "y": names, "name": name,
                       "marker": {"color": col}, "text": [f"{100 * v:.1f}%" for v in vals],
                       "textposition": "outside", "cliponaxis": False,
                       "hovertemplate": f"{name}: %{{y}} %{{x:.3f}}<extra></extra>"})
    # the legend in one row at the left, between the title and the plot: at the top right, the toolbar a
    # hover shows covered it
    fig.update_layout(barmode="group", legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0,
                                               "xanchor": "left"})
    fig.update_xaxes(title_text=f"probability of the {outcome.predicts}", range=[0, 1.15], tickformat=".0%")
    kl = float(outcome.kl_bits()[position])
    what = f"running products at position {position}" if wp else f"next tokens after position {position}"
    cap = (f"The model's most likely {what} ({len(ids)}: the {k} likeliest before and the {k} likeliest after, "
           f"together), before (grey) and after (colour) the intervention ({outcome.what}); KL divergence there "
           f"{kl:.3f} bits.")
    title = (f"Running product at position {position}" if wp else f"Next token after position {position}") + (
        f" “{label}”" if label is not None else "")
    return finish(fig, title, cap, "whatif_guesses",
                  height=158 + 34 * len(ids), margin={"l": 70, "r": 30, "t": 78, "b": 60})


def whatif_effect(outcome, labels: Sequence[str], window: int = WINDOW, cursor: int | None = None,
                  line_on_top: bool = False) -> Chart:
    """The intervention's effect along the text, two panels over the positions around it (at most ``window``
    consecutive positions, full resolution): top, the KL divergence of the predicted distribution (next token,
    or a word problem's running product: ``outcome.predicts``) before -> after at each position (bits);
    bottom, the change in surprisal of what really follows (the correct running product), in bits,
    positive: the real text became harder to predict. The intervention's position is the orange line.
    ``labels``: the tokens of the text; ``cursor``: the page's cursor, which the window follows and the orange
    line marks (default the intervention's position, else the last); ``line_on_top``: the line over the bars
    (a printed copy, where no hover names the position) instead of under them (the app: the cursor's bar stays
    whole). Traces ``"KL"``, ``"surprisal change"``.
    Raises :class:`FigureError` when ``labels`` and the outcome differ in length or the cursor is outside the
    text. Design choice."""
    T = len(outcome.before)
    if len(labels) != T:
        raise FigureError(f"{len(labels)} labels for {T} positions")
    at = outcome.position
    mark = cursor if cursor is not None else at
    if mark is not None and not 0 <= mark < T:
        raise FigureError(f"cursor {mark} out of range: the text has {T} positions")
    idx = shown_window(T, mark if mark is not None else T - 1, window)
    kl = outcome.kl_bits()
    ds = outcome.surprisal_change_bits()  # NaN where nothing is scored (a text's last next token)
    real = "real next token" if outcome.predicts == "next token" else f"correct {outcome.predicts}"
    text = np.array(hover_tokens(labels, idx))
    fig = FigureBuilder.grid(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.16,
                             subplot_titles=[f"KL(before ‖ after) of the {outcome.predicts} (bits)",
                                             f"change in surprisal of the {real} (bits)"])
    fig.add_trace({"type": "bar", "x": idx, "y": kl[idx], "customdata": idx, "name": "KL",
                   "marker": {"color": AFTER}, "text": text, "textposition": "none", "showlegend": False,
                   "hovertemplate": "position %{text}<br>KL %{y:.4f} bits<extra></extra>"}, row=1, col=1)
    vals = ds[idx]
    fig.add_trace({"type": "bar", "x": idx, "y": vals, "customdata": idx, "name": "surprisal change",
                   "marker": {"color": np.where(np.nan_to_num(vals) >= 0, UP, DOWN)},
                   "text": text, "textposition": "none", "showlegend": False,
                   "hovertemplate": "position %{text}<br>%{y:+.3f} bits<extra></extra>"}, row=2, col=1)
    for row in (1, 2):
        add_cursor_line(fig, mark, row=row, col=1, below=not line_on_top)
    fig.update_xaxes(title_text="position t (token)", row=2, col=1, **token_ticks(labels, idx))
    fig.update_yaxes(title_text="bits", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="bits", row=2, col=1)
    fig.update_layout(**COLUMN_HOVER)  # a hover or click anywhere in a position's column picks its bar
    after = slice(at, None) if at is not None else slice(None)
    total = float(np.nansum(ds[after]))
    where = f"at position {at} '{md_label(labels[at])}'" if at is not None else "on every position"
    span = f"from position {at} on" if at is not None else "over the text"
    if outcome.changes_nothing():
        cap = (f"The intervention ({outcome.what}) {where} changed nothing: the {outcome.predicts} distribution is "
               f"the same before and after at every position. Positions {int(idx[0])}–{int(idx[-1])} of {T}.")
        return finish(fig, "Effect along the text", cap, "whatif_effect", height=420)
    cap = (f"What the intervention ({outcome.what}) {where} changed: the KL divergence of the {outcome.predicts} "
           f"distribution, largest {fmt_bits(np.nanmax(kl))} bits at position {int(np.nanargmax(kl))}; and the "
           f"surprisal of the {real}, {fmt_bits(total, sign=True)} bits in all {span} (positive: harder to "
           "predict). "
           f"Positions {int(idx[0])}–{int(idx[-1])} of {T}.")
    return finish(fig, "Effect along the text", cap, "whatif_effect", height=420)




def patching_heatmap(sweep, labels: Sequence[str], token_names: Sequence[str] = (), recovered: bool = True,
                     swapped: int | None = None) -> Chart:
    """The activation-patching picture of a sweep (:class:`geomlab.whatif.patching.Sweep`): layers (rows) x
    positions (columns), each cell the prediction at the target with that layer's state at that position
    taken from the clean text, as the share of the clean prediction it restores (``recovered``: 0 nothing,
    1 all, :meth:`Sweep.recovered`) or as the raw metric. ``labels``: the corrupted text's tokens;
    ``swapped``: the position of the token the corrupted text changed (the cursor: an orange line, and the
    columns start there, the earlier ones holding the same state in both texts), None for a sweep of any two
    texts. The target is a dashed line. The colour scale's neutral middle is "nothing restored" (0 restored,
    or the corrupted run's metric). When the swap barely changes the prediction
    (:attr:`~geomlab.whatif.patching.Sweep.barely_changes`) the colours are muted (:data:`MUTED`) and the
    caption says so. Trace ``"patching"`` (x = positions, ``customdata`` = the position).
    Raises :class:`FigureError` when the labels do not match the sweep. Source: activation patching (Meng et
    al. 2022); the layout is a design choice."""
    vals = np.asarray(sweep.recovered() if recovered else sweep.values, dtype=np.float64)
    L, T = vals.shape
    pos = np.asarray(sweep.positions, dtype=np.int64)
    if len(labels) < int(pos.max(initial=-1)) + 1:
        raise FigureError(f"{len(labels)} labels for positions up to {int(pos.max())}")
    shown = pos[(pos <= sweep.target_position) & (pos >= (swapped if swapped is not None else pos[0]))]
    cols = np.searchsorted(pos, shown)
    z = vals[:, cols]
    fin = z[np.isfinite(z)]
    # symmetric about "nothing restored", so it is the scale's neutral middle whatever the data (plotly
    # ignores zmid beside zmin and zmax); the share restored spans at least -1..1
    mid = 0.0 if recovered else float(sweep.corrupt)
    # a raw metric's range is at least the difference that counts (a swap that hardly matters stays pale)
    floor = 1.0 if recovered else max(abs(sweep.clean - sweep.corrupt), 0.05)
    lim = max(float(np.abs(fin - mid).max()) if fin.size else 1.0, floor)
    fig = FigureBuilder()
    fig.add_trace({"type": "heatmap", "z": z, "x": shown, "y": list(range(L)), "name": "patching",
                   "customdata": np.broadcast_to(shown, z.shape), "colorscale": _patch_scale(sweep.barely_changes),
                   "zmin": mid - lim, "zmax": mid + lim,
                   # blue toward the clean prediction, red away from it, in either reading
                   "reversescale": recovered or sweep.clean >= sweep.corrupt,
                   "text": np.broadcast_to(np.array(hover_tokens(labels, shown), dtype=object), z.shape),
                   "hovertemplate": "layer %{y}, position %{text}<br>%{z:.3f}<extra></extra>",
                   "colorbar": {"title": {"text": "restored" if recovered else sweep.metric.replace("_", " ")}}})
    add_cursor_line(fig, swapped)
    fig.add_shape(type="line", x0=sweep.target_position, x1=sweep.target_position, y0=0, y1=1, yref="y domain",
                  line={"color": "#333333", "width": 2, "dash": "dash"}, name="target")
    fig.update_xaxes(title_text="position patched (token)", **token_ticks(labels, shown))
    fig.update_yaxes(title_text="layer", tickmode="array", tickvals=list(range(L)),
                     ticktext=[str(n) for n in sweep.layers] if L <= 12 else None, autorange="reversed")
    y = sweep.target_token
    target = f"“{token_names[y]}”" if 0 <= y < len(token_names) else f"token {y}"
    metric = METRIC_WORDS.get(sweep.metric, sweep.metric)
    what = (f"the share of the clean prediction restored, by the {metric}" if recovered
            else f"the {metric}; grey: the corrupted run's {sweep.corrupt:.3f}, nothing restored")
    cap = (f"Activation patching: each cell runs the corrupted text with one layer's state at one position taken "
           f"from the clean text, and reads the prediction of {target} at position {sweep.target_position}, the "
           f"dashed line ({what}; clean {sweep.clean:.3f}, corrupted {sweep.corrupt:.3f}). Positions after the "
           "target cannot change it and are left out"
           + (f"; so are those before the swapped token at {swapped} (the orange line), whose states the two "
              "texts share." if swapped is not None else ".")
           + (" With one recurrent state, patching it anywhere from the swap to the target restores everything: "
              "that state is all the model carries." if L == 1 else "")
           + (" The swap barely changes this prediction, so the colours are muted: even the strongest cell is "
              "pale." if sweep.barely_changes else ""))
    return finish(fig, "Patching: where the difference lives", cap, "patching_heatmap",
                  height=max(260, 120 + 34 * L), margin={"l": 120 if L <= 12 else 60, "r": 20, "t": 50, "b": 60})


def whatif_geometry(outcome, layer: int = 0) -> Chart:
    """The geometry an intervention changed, after over before (the plain run a ghost: grey, or for CEM's two
    sub-blocks a pale shade of each one's colour): the eigenvalues of the steered state ``H_t`` on the unit
    circle (OSM; a torus state's diagonal entries), the Plücker coordinates of the moved plane (Grassmann), or
    the token-mean energy per recursion step of layer ``layer`` (CEM; traces ``"attention before (T = 2)"``,
    ``"attention after (T = 4)"``, ``"MLP before ..."``, ``"MLP after ..."``, the steps where the outcome
    records them). Raises :class:`FigureError` when the outcome holds none of these (e.g. a head ablated).
    Design choice."""
    g = outcome.geometry
    fig = FigureBuilder()
    if "state_before" in g:
        theta = np.linspace(0, 2 * np.pi, 181)
        fig.add_trace({"type": "scatter", "x": np.cos(theta), "y": np.sin(theta), "mode": "lines",
                       "line": {"color": "#cccccc", "width": 1}, "hoverinfo": "skip", "showlegend": False})
        for name, key, col, sym in (("before", "state_before", BEFORE, "circle-open"),
                                    ("after", "state_after", AFTER, "circle")):
            H = np.asarray(g[key])
            lam = H.astype(np.complex128) if H.ndim == 1 else np.linalg.eigvals(H.astype(np.complex128))
            fig.add_trace({"type": "scatter", "x": lam.real, "y": lam.imag, "mode": "markers", "name": name,
                           "marker": {"color": col, "size": 11, "symbol": sym, "line": {"width": 2, "color": col}},
                           "hovertemplate": f"{name}: λ = %{{x:.3f}} + %{{y:.3f}}i<extra></extra>"})
        fig.update_xaxes(range=[-1.25, 1.25], title_text="Re λ", zeroline=False)
        fig.update_yaxes(range=[-1.25, 1.25], title_text="Im λ", scaleanchor="x", zeroline=False)
        return finish(fig, "Eigenvalues of the state, before and after", "The eigenvalues of the state at the "
                      "intervention before (open grey) and after (filled): a step along the group turns them on "
                      "the unit circle and never moves one off it.", "whatif_geometry", height=380,
                      legend={"orientation": "h", "y": -0.2})
    if "plucker_before" in g:
        p0, p1 = np.asarray(g["plucker_before"]), np.asarray(g["plucker_after"])
        P = len(p0)
        r = int(round((1 + np.sqrt(1 + 8 * P)) / 2))
        pairs = [f"({i},{j})" for i in range(r) for j in range(i + 1, r)][:P]
        for name, vals, col in (("before", p0, BEFORE), ("after", p1, AFTER)):
            fig.add_trace({"type": "bar", "x": pairs, "y": vals, "name": name, "marker": {"color": col},
                           "hovertemplate": f"{name}: p%{{x}} = %{{y:.3f}}<extra></extra>"})
        fig.update_layout(barmode="group", legend={"orientation": "h", "y": -0.3})
        fig.update_xaxes(title_text="Plücker coordinate p_ij", **thin_ticks(pairs))
        angles = np.asarray(g.get("principal_angles", [np.nan, np.nan]))
        return finish(fig, "Plücker coordinates of the plane, before and after",
                      f"The moved plane's normalised Plücker vector after (colour) over before (grey); principal "
                      f"angles between the two planes {angles[0]:.3f} and {angles[-1]:.3f} rad.", "whatif_geometry",
                      height=340)
    if "energy_before" in g:
        E0, E1 = np.asarray(g["energy_before"], float), np.asarray(g["energy_after"], float)
        if not 0 <= layer < E0.shape[0]:
            raise FigureError(f"layer {layer} out of range: there are {E0.shape[0]}")
        steps = {"before": g.get("steps_before"), "after": g.get("steps_after")}
        for b, block in enumerate(("attention", "MLP")):
            # each block in its own colour and marker; its plain run pale, dotted (attention) or dashed (MLP),
            # with open markers, so neither plain run reads as the other
            col, sym = colour(b), ("circle", "square")[b]
            for when, E, line, marker in (
                    ("before", E0, {"color": pale(col), "dash": ("dot", "dash")[b]},
                     {"color": col, "symbol": f"{sym}-open"}),
                    ("after", E1, {"color": col, "dash": "solid"}, {"color": col, "symbol": sym})):
                y = E[layer, b]
                n = steps[when]
                name = f"{block} {when}" + (f" (T = {int(n[layer])})" if n is not None else "")
                fig.add_trace({"type": "scatter", "x": np.arange(len(y)), "y": y, "mode": "lines+markers",
                               "name": name, "line": {**line, "width": 2}, "marker": {**marker, "size": 7},
                               "hovertemplate": f"{name}: step %{{x}}, ε = %{{y:.4g}}<extra></extra>"})
        fig.update_xaxes(title_text="recursion step t", dtick=1)
        fig.update_yaxes(title_text="token-mean energy ε (a.u.)")
        cap = ("The layer's token-mean energy at each recursion step with its own steps (before: pale, dotted for "
               "attention, dashed for the MLP) and with the steps of the intervention (after: solid): more steps "
               "should keep it going down, at about the pace of its own steps. The MLP starts from the attention "
               "block's output, which the intervention changed, so its curves differ at step 0 too.")
        trained = steps["before"]
        if trained is not None and int(trained[layer]) >= 1:
            from geomlab.whatif.energy import RUNAWAY_RATE, runaway_rates

            rates = runaway_rates(E1[layer][None], int(trained[layer]))[0]
            away = [(block, r) for block, r in zip(("attention", "MLP"), rates) if r > RUNAWAY_RATE]
            if away:
                cap += (" Past its own T the descent runs away: the " + " and the ".join(
                    f"{block} energy falls {r:,.0f}× faster per step than within its own steps" for block, r in away)
                    + ". That is an overshoot, not a better fit.")
        e0, e1 = E0[layer][np.isfinite(E0[layer])], E1[layer][np.isfinite(E1[layer])]
        if e0.size and e1.size:
            lo, hi = float(e0.min()), float(e0.max())
            pad = max(hi - lo, 1e-6 * max(abs(lo), abs(hi), 1.0))
            if e1.min() < lo - 20 * pad or e1.max() > hi + 20 * pad:
                # a descent run far past its trained steps can blow up by orders of magnitude: the axis keeps
                # the plain run's range in view and the caption gives the extremes it cuts off
                far = e1.min() if lo - e1.min() > e1.max() - hi else e1.max()
                fig.update_yaxes(range=[lo - 2 * pad, hi + 2 * pad])
                cap += (f" The intervened energy leaves the axis (it reaches {far:.3g}): the axis keeps the plain "
                        "run's range.")
        return finish(fig, f"Energy of layer {layer} per step, before and after", cap,
                      "whatif_geometry", height=360, legend={"orientation": "h", "y": -0.25})
    raise FigureError("this intervention changes no geometry to draw (its effect is in the predictions)")
