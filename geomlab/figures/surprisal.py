"""Per-position surprisal of one or more models on the same text (the Compare page's first chart).

Scores come from :func:`geomlab.trace.score_predictions` (bits, ``-log2 p``): language models are scored on
token t from their output at t - 1, group word-problem models on the running product g_1...g_t from their
output at t (docs/app.md, "Compare's surprisal").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import plotly.graph_objects as go

from geomlab.figures._chart import Chart
from geomlab.figures._sampling import missing_note
from geomlab.figures._style import COLUMN_HOVER, add_cursor_line
from geomlab.core.markup import md_label


@dataclass(frozen=True)
class SurprisalSide:
    """One line of the chart: a ``trace``, its legend ``name`` (e.g. ``"A: osm-rnn-o-s5"``; the part before
    ``":"`` names the side in the chance line's label), its ``colour``, the checkpoint's ``task`` (card
    ``task`` dict, or None for language modelling) and ``n_outputs`` (|G| of a word problem, for chance)."""

    trace: Any
    name: str
    colour: str
    task: Any = None
    n_outputs: int | None = None


def surprisal_figure(sides: Sequence[SurprisalSide], cursor: int | None = None) -> Chart:
    """Surprisal along the text of every side, the cursor as an orange line, chance (log2 |G|) as a dotted
    line with its own legend entry for word-problem sides. Returns a :class:`Chart`; y in bits, x positions.
    Mixed tasks (a word problem beside a language model) get a y axis titled "bits (see legend)" and a
    caption saying the lines measure different things."""
    from geomlab import trace as trace_mod

    fig = go.Figure()
    scores = [trace_mod.score_predictions(s.trace, s.task) for s in sides]
    whats = [sc.what for sc in scores]
    mixed = len(set(whats)) > 1
    chances: dict[int, list[tuple[str, int]]] = {}  # |G| -> [(side, positions)]
    n_missing = 0
    for sc, s in zip(scores, sides):
        tr = s.trace
        bits = np.asarray(sc.bits, dtype=np.float64)
        bad = (sc.target >= 0) & ~np.isfinite(bits)  # scored positions a non-finite output left blank
        n_missing += int(bad.sum())
        bits = np.where(np.isfinite(bits), bits, np.nan)
        ok = np.isfinite(bits)
        stat = f"mean {bits[ok].mean():.2f} bits" if ok.any() else "no finite score"
        if sc.what == "running product":
            stat += f", {sc.accuracy:.0%} right"
            if s.n_outputs:
                chances.setdefault(s.n_outputs, []).append((s.name.split(":")[0], tr.n_positions))
        if mixed:
            stat = f"{sc.what}: {stat}"
        fig.add_trace(go.Scatter(
            x=np.arange(tr.n_positions), y=bits, mode="lines+markers" if tr.n_positions <= 64 else "lines",
            name=f"{s.name} ({stat})", line={"color": s.colour}, marker={"size": 4}, customdata=tr.labels,
            hovertemplate="position %{x} '%{customdata}'<br>%{y:.2f} bits<extra>" + s.name + "</extra>"))
    for n, sides_n in sorted(chances.items()):
        who = [w for w, _ in sides_n]
        n_max = max(k for _, k in sides_n)  # along the texts of the models it applies to
        # chance as a dotted line with its own legend entry (a label on the plot could hide the lines)
        fig.add_trace(go.Scatter(
            x=[0, n_max - 1], y=[math.log2(n)] * 2, mode="lines", line={"color": "#999999", "dash": "dot", "width": 1},
            name=(f"{' and '.join(who)}: " if mixed else "") + f"chance: log<sub>2</sub> {n} = {math.log2(n):.2f} bits",
            hoverinfo="skip", meta="chance"))
    if cursor is not None:
        add_cursor_line(fig, cursor)
    if set(whats) == {"running product"}:
        title, ytitle = "Surprisal of the correct running product", "bits of the correct product"
        caption = ("Word problems: how many bits each model gives the correct running product $g_1 \\cdots g_t$ "
                   "at each position $t$, read from its output at $t$ (position 0 included; lower is better; the "
                   "dotted line is chance, $\\log_2 \\lvert G\\rvert$). The legend gives the mean and the share of "
                   "positions where the model's top choice is the right product.")
    elif set(whats) == {"next token"}:
        title, ytitle = "Surprisal of each token", "bits to predict the token"
        caption = ("How many bits each model needs for each token of this text given the tokens before it "
                   "(lower is better); the legend gives the mean, i.e. the bits per character on this text.")
    else:
        title, ytitle = "Surprisal of what each model predicts", "bits (see legend)"
        lm = [s.name for s, w in zip(sides, whats) if w == "next token"]
        wp = [s.name for s, w in zip(sides, whats) if w == "running product"]
        caption = (f"Different tasks: {', '.join(map(md_label, wp))} is a group word-problem model, scored on the "
                   f"running product $g_1 \\cdots g_t$ at each position $t$ (from its output at $t$); "
                   f"{', '.join(map(md_label, lm))} is a language model, scored on token $t$ given the tokens before "
                   "it. The two lines measure different things: compare each line's shape along the text, not "
                   "their levels.")
    caption += missing_note(n_missing)
    fig.update_layout(title={"text": title, "x": 0.01}, template="plotly_white", height=320,
                      margin={"l": 60, "r": 20, "t": 60, "b": 50}, **{**COLUMN_HOVER, "hovermode": "x unified"},
                      # at the bottom of the figure (not of the plot): the margin grows to fit it however many
                      # rows it wraps into, so a narrow screen's 3 rows no longer cover the x axis's title
                      legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
                      meta={"caption": caption})
    fig.update_xaxes(title_text="position")
    fig.update_yaxes(title_text=ytitle, rangemode="tozero")
    return Chart(fig, caption)
