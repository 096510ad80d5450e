"""The residual stream of a Transformer drawn: how far each block moves each token's vector
(:func:`residual_updates`) and each token's path through the blocks in the stream's two main directions
(:func:`residual_paths`). They read the trace's ``residual`` extra ``[stage, position, D]`` (the embedding, then
the stream after each block), recorded by kinds that declare it (``hf-gpt2``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from geomlab.figures._chart import Chart, FigureBuilder, FigureError, finish
from geomlab.figures._sampling import WINDOW, blank, check_cursor, window, window_note
from geomlab.figures._style import SEQUENTIAL, add_cursor_line, hover_tokens, index_colours, token_ticks
from geomlab.figures.catalog import Explanation, figure
from geomlab.trace.base import cached

RESID_SRC = "residual stream (Elhage et al. 2021, 'A Mathematical Framework for Transformer Circuits'); design choice"


def has_residual(tr: Any) -> bool:
    """A trace whose ``extras`` hold the residual stream ``residual`` ``[stage, position, D]`` with two or more
    stages."""
    r = (getattr(tr, "extras", None) or {}).get("residual")
    return r is not None and np.ndim(r) == 3 and np.shape(r)[0] >= 2


def _residual(tr) -> np.ndarray:
    if not has_residual(tr):
        raise FigureError(f"{getattr(tr, 'kind', 'this')!r} trace has no residual stream")
    return np.asarray(tr.extras["residual"], dtype=np.float64)


def residual_update_norms(tr) -> tuple[np.ndarray, np.ndarray]:
    """``(update, relative)``, both ``[block, position]`` float64: ``||h^(l+1)_t - h^(l)_t||_2`` (block ``l``'s
    change of the stream at ``t``) and that divided by ``||h^(l)_t||_2`` (NaN where the input is 0).
    :class:`FigureError` for a trace without a residual stream. Cached on the trace."""
    def compute():
        r = _residual(tr)
        upd = np.linalg.norm(np.diff(r, axis=0), axis=-1)
        base = np.linalg.norm(r[:-1], axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(base > 0, upd / base, np.nan)
        return upd, rel
    return cached(tr, ("residual_update_norms",), compute)


@figure(click="position", label="residual updates per block", applies=has_residual, explain=Explanation(
    r"\lVert h^{(l+1)}_t - h^{(l)}_t \rVert_2 \ \text{per block and position}",
    "Colour = how far block $l$ (its attention and MLP together) moves the residual-stream vector of each "
    "token; hover for the size relative to the vector it started from.",
    "Blocks that barely touch the stream, tokens (the first one, punctuation) every block rewrites.",
    (), RESID_SRC))
def residual_updates(tr, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Heatmap of :func:`residual_update_norms` (rows = blocks, earliest at the bottom; columns = the window
    of ``size`` positions around the cursor).

    Traces: one heatmap ``"update size"`` ``[block, position]``; hover adds the relative size. Raises
    :class:`FigureError` for a trace without a residual stream or a cursor out of range."""
    upd, rel = residual_update_norms(tr)
    n = tr.n_positions
    cursor = check_cursor(cursor, n)
    idx = window(n, cursor, size)
    z = blank(upd[:, idx])
    text = np.broadcast_to(np.array(hover_tokens(tr.labels, idx)), z.shape)
    fig = FigureBuilder([dict(
        type="heatmap", z=z, x=idx, y=np.arange(z.shape[0]), colorscale=SEQUENTIAL, zmin=0,
        text=text, customdata=blank(rel[:, idx]), name="update size", colorbar={"title": {"text": "‖Δh‖"}},
        hovertemplate="position %{text}<br>block %{y}<br>‖Δh‖ = %{z:.3g} (%{customdata:.2f} of ‖h‖)<extra></extra>")])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    fig.update_yaxes(title_text="block", tickmode="array", tickvals=list(range(z.shape[0])),
                     ticktext=[f"block {l}" for l in range(z.shape[0])])
    add_cursor_line(fig, cursor)
    cap = ("Residual stream: the length of each block's change to each token's vector (attention and MLP "
           "together)." + window_note(n, idx))
    return finish(fig, "Residual-stream updates per block", cap, "residual_updates",
                  height=max(300, 140 + 22 * z.shape[0]))


def residual_pca(tr) -> tuple[np.ndarray, np.ndarray]:
    """``(coords [stage, position, 2], explained [2])``: the residual stream projected on its two principal
    directions, fitted over every stage and position (centred; SVD), and the share of the variance each
    explains. :class:`FigureError` for a trace without a residual stream. Cached on the trace."""
    def compute():
        r = _residual(tr)
        S, T, D = r.shape
        flat = r.reshape(S * T, D)
        centred = flat - flat.mean(axis=0)
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        k = min(2, vt.shape[0])
        coords = np.zeros((S * T, 2))
        coords[:, :k] = centred @ vt[:k].T
        var = s ** 2
        explained = np.zeros(2)
        explained[:k] = var[:k] / var.sum() if var.sum() > 0 else 0.0
        return coords.reshape(S, T, 2), explained
    return cached(tr, ("residual_pca",), compute)


@figure(click="position", label="residual-stream paths (PCA)", applies=has_residual, wide=False, default=False, explain=Explanation(
    r"\big(\langle h^{(s)}_t - \bar h, u_1\rangle,\ \langle h^{(s)}_t - \bar h, u_2\rangle\big),\ s = 0..L",
    "Each token's vector after the embedding and after every block, on the two directions along which the "
    "stream varies most (PCA over all stages and positions); a marker per stage, coloured by stage, the "
    "cursor's token drawn as a line through its stages.",
    "Stages that move all tokens the same way (a shared drift), tokens that leave the crowd late.",
    (), RESID_SRC))
def residual_paths(tr, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Scatter of :func:`residual_pca` for the window of ``size`` positions around the cursor: one marker
    trace per stage (``"embedding"``, ``"block l"``), and the cursor's token as a line through its stages
    (``meta="cursor"``). Raises :class:`FigureError` for a trace without a residual stream or a cursor out of
    range."""
    coords, explained = residual_pca(tr)
    n = tr.n_positions
    cursor = check_cursor(cursor, n)
    idx = window(n, cursor, size)
    S = coords.shape[0]
    names = ["embedding"] + [f"block {l}" for l in range(S - 1)]
    colours = index_colours(S)
    hover = hover_tokens(tr.labels, idx)
    fig = FigureBuilder()
    for s in range(S):
        fig.add_trace(dict(type="scatter", mode="markers", x=coords[s, idx, 0], y=coords[s, idx, 1], name=names[s],
                           customdata=idx, text=hover, marker={"color": colours[s], "size": 6, "opacity": 0.7},
                           hovertemplate=f"{names[s]}<br>position %{{text}}<extra></extra>"))
    if cursor is not None:
        fig.add_trace(dict(type="scatter", mode="lines+markers", x=coords[:, cursor, 0], y=coords[:, cursor, 1],
                           name=f"t = {cursor}", meta="cursor", text=names, customdata=[cursor] * S,
                           line={"color": "black", "width": 2}, marker={"color": colours, "size": 9},
                           hovertemplate="%{text} (cursor)<extra></extra>"))
    fig.update_xaxes(title_text=f"PC 1 ({explained[0]:.0%} of the variance)")
    fig.update_yaxes(title_text=f"PC 2 ({explained[1]:.0%})")
    cap = ("Residual stream on its two principal directions: each token's vector after the embedding and "
           "after each block" + (f"; the line is the cursor token's path through the blocks" if cursor is not None
                                 else "") + "." + window_note(n, idx))
    return finish(fig, "Residual-stream paths through the blocks", cap, "residual_paths")
