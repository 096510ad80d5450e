"""The layer lens drawn: how the next-token prediction forms stage by stage (after each block, layer,
recursion step or group-state layer), read out through the model's own final norm and head
(:attr:`geomlab.trace.Trace.lens`, computed by :func:`geomlab.trace.lens.layer_lens`).

:func:`lens_heatmap`: stages x positions, the probability each stage gives the token that actually follows.
:func:`lens_table`: at the cursor, each stage's top-k tokens with their probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlab.figures._chart import Chart, FigureBuilder, FigureError, finish
from geomlab.figures._sampling import (
    WINDOW, blank, check_cursor, window, window_note,
)
from geomlab.figures._style import SEQUENTIAL, add_cursor_line, hover_tokens, token_ticks
from geomlab.figures.catalog import Explanation, figure

LENS_SRC = "logit lens (nostalgebraist 2020); stages per kind: design choice"


def has_lens(tr: Any) -> bool:
    """A trace with a layer lens (``tr.lens``)."""
    return getattr(tr, "lens", None) is not None


def _lens(tr):
    if not has_lens(tr):
        raise FigureError(f"{getattr(tr, 'kind', 'this')!r} trace has no layer lens")
    return tr.lens


@figure(click="position", label="layer lens: next-token probability", applies=has_lens, default=False, shared=True, explain=Explanation(
    r"p_s(x_{t+1} \mid x_{\le t}) = \mathrm{softmax}\big(\mathrm{head}(\mathrm{norm}(h_t^{(s)}))\big)_{x_{t+1}}",
    "Each row is one stage of the model (the embedding, then each block, layer or recursion step), read out "
    "through the model's own final norm and head as if the model ended there; each cell is the probability "
    "that stage gives the token that actually comes next. The last row is the model's prediction.",
    "Where along the depth the right answer appears: rows that brighten only near the top, positions "
    "(spaces, repeated words) that are easy from the first stage.",
    (), LENS_SRC))
def lens_heatmap(tr, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Heatmap of the actual next token's probability per stage (rows, earliest at the bottom) and position
    (columns); the last position (no next token) is blank.

    Args:
        tr: a trace with a layer lens (``tr.lens``); cursor: a position to mark (None: none);
        size: the window of consecutive positions around the cursor drawn (all of a shorter text; said in
            the caption).

    Traces: one heatmap ``"next-token probability"`` ``[stage, position]`` in [0, 1]; hover names the
    position's token, the next token, the stage, the probability and the rank (1 = the stage's top guess).
    Raises :class:`FigureError` for a trace without a lens or a cursor out of range. Source: the logit lens.
    """
    lens = _lens(tr)
    n = tr.n_positions
    cursor = check_cursor(cursor, n)
    idx = window(n, cursor, size)
    z = blank(lens.next_prob[:, idx].astype(np.float64))
    rank = lens.next_rank[:, idx]
    nxt = [f"'{tr.labels[p + 1]}'" if p + 1 < n else "none" for p in idx.tolist()]
    rank_txt = np.where(np.isfinite(rank), np.nan_to_num(rank, nan=0).astype(int).astype(str), "-")
    custom = np.stack([np.broadcast_to(np.array(nxt), z.shape), rank_txt], axis=-1)
    text = np.broadcast_to(np.array(hover_tokens(tr.labels, idx)), z.shape)
    fig = FigureBuilder([dict(
        type="heatmap", z=z, x=idx, y=np.arange(lens.n_stages), colorscale=SEQUENTIAL, zmin=0, zmax=1,
        text=text, customdata=custom, name="next-token probability",
        colorbar={"title": {"text": "p(next)"}},
        hovertemplate="position %{text}, next %{customdata[0]}<br>stage %{y}<br>p = %{z:.3f}, rank "
                      "%{customdata[1]}<extra></extra>")])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    fig.update_yaxes(title_text="stage", tickmode="array", tickvals=list(range(lens.n_stages)),
                     ticktext=list(lens.labels))
    add_cursor_line(fig, cursor)
    cap = ("Layer lens: the probability each stage, read out through the model's final norm and head, gives "
           "the token that actually comes next; the top row is the model's own prediction."
           + window_note(n, idx))
    return finish(fig, "Layer lens: probability of the actual next token", cap, "lens_heatmap",
                  height=max(300, 140 + 22 * lens.n_stages))


@figure(label="layer lens: top tokens at the cursor", applies=has_lens, default=False, wide=False, shared=True,
        explain=Explanation(
    r"\mathrm{top}_k\ \mathrm{softmax}\big(\mathrm{head}(\mathrm{norm}(h_t^{(s)}))\big),\ t = \text{cursor}",
    "At the cursor, one row per stage: the stage's most likely next tokens, left to right, coloured by "
    "probability. The last row is the model's prediction (the token panel's list).",
    "Where the final answer first reaches the top, and which guesses earlier stages make and later drop.",
    (), LENS_SRC))
def lens_table(tr, cursor: int | None = None) -> Chart:
    """Table-like heatmap of each stage's top-k next tokens at the cursor: rows = stages (earliest at the
    bottom), columns = rank 1..k, cell text = token and probability.

    Args:
        tr: a trace with a layer lens; cursor: the position read (default: the last).

    Traces: one heatmap ``"top tokens after t 'token'"`` (``meta="cursor"``: it is the cursor's) ``[stage, k]`` of probabilities in [0, 1] with the tokens as cell
    text; the y tick labels add the actual next token's probability and rank per stage. Raises
    :class:`FigureError` for a trace without a lens or a cursor out of range. Source: the logit lens.
    """
    lens = _lens(tr)
    n = tr.n_positions
    c = check_cursor(cursor, n)
    c = n - 1 if c is None else c
    probs = lens.top_probs[:, c].astype(np.float64)
    names = np.array([[lens.name(i) for i in row] for row in lens.top_ids[:, c].tolist()])
    cells = np.char.add(np.char.add(names, "<br>"), np.char.mod("%.2f", probs))
    nxt = tr.labels[c + 1] if c + 1 < n else None
    ticks = [f"{label} (p {lens.next_prob[s, c]:.2f}, #{int(lens.next_rank[s, c])})" if nxt is not None else label
             for s, label in enumerate(lens.labels)]
    fig = FigureBuilder([dict(
        type="heatmap", z=blank(probs), x=np.arange(1, lens.k + 1), y=np.arange(lens.n_stages), text=cells,
        texttemplate="%{text}", colorscale=SEQUENTIAL, zmin=0, zmax=1, customdata=names,
        name=f"top tokens after {c} '{tr.labels[c]}'", meta="cursor",
        colorbar={"title": {"text": "p"}},
        hovertemplate="stage %{y}<br>rank %{x}: '%{customdata}'<br>p = %{z:.3f}<extra></extra>")])
    fig.update_xaxes(title_text="rank", tickmode="linear", dtick=1)
    fig.update_yaxes(title_text="stage", tickmode="array", tickvals=list(range(lens.n_stages)), ticktext=ticks)
    after = f"'{tr.labels[c]}'"
    cap = (f"Layer lens at position {c} {after}: each stage's {lens.k} most likely next tokens"
           + (f"; the tick labels give the actual next token '{nxt}' its probability and rank at each stage."
              if nxt is not None else " (the last position: no next token to score)."))
    return finish(fig, f"Layer lens: top tokens after position {c} {after}", cap, "lens_table",
                  height=max(300, 140 + 30 * lens.n_stages), margin={"l": 170, "r": 20, "t": 60, "b": 50})
