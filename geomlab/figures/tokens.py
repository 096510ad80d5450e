"""Token-level inspection: what the cursor token attends to, drawn over the text.

:func:`attends_to` shows the text's tokens in a window around the cursor (at most :data:`WINDOW` of them,
so each token's label stays readable) with one bar per token: the attention weight the cursor position puts
on it (mean over heads, or the chosen head), and under the bars one heatmap row per head. Keys after the
cursor are masked by causal attention and shaded grey. The weights come from
:meth:`geomlab.trace.Trace.attention_rows` for the cursor's row only (``O(T e)`` per head; no ``T x T``
matrix).
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import COLUMN_HOVER, HIGHLIGHT, MASKED_BG, SEQUENTIAL
from geomlab.figures._sampling import check_cursor, check_index, finite_max, missing_note
from geomlab.figures.catalog import Explanation, figure, has_attention
from geomlab.trace import Trace

WINDOW = 48
"""Tokens of the text shown around the cursor (design choice: 12-25 px per token label from a laptop's
full page width down to a half-width Compare column; the issue asks for at most ~80)."""


def window_after(size: int) -> int:
    """How many of a ``size``-token window follow the cursor: an eighth (6 of 48), so the reader sees what
    comes next while most of the window holds the earlier tokens the cursor can attend to (causal attention
    puts no weight after it). Design choice."""
    return size // 8


def token_window(n: int, cursor: int, window: int = WINDOW) -> np.ndarray:
    """``min(window, n)`` consecutive positions ending :func:`window_after` tokens after ``cursor`` (the rest
    before it), shifted inwards at either end of the text so the window stays full. Design choice.
    Raises :class:`FigureError` for ``window < 1`` or a cursor outside ``0..n-1``."""
    if window < 1:
        raise FigureError("window must be at least 1 position")
    if not 0 <= cursor < n:
        raise FigureError(f"cursor {cursor} out of range: the trace has {n} positions")
    size = min(int(window), int(n))
    start = max(0, min(int(cursor) - (size - 1 - window_after(size)), n - size))
    return np.arange(start, start + size)


def cursor_row(tr: Trace, layer: int, cursor: int) -> np.ndarray:
    """``[head, position]`` float64 attention weights of query ``cursor`` on every key in ``layer``, one row
    per head (0 on keys after the cursor; NaN kept where a weight is not finite)."""
    H = max(int(tr.n_heads), 1)
    return np.stack([np.asarray(tr.attention_rows(layer, [cursor], h)[0], dtype=np.float64) for h in range(H)])


@figure(click="position", label="what the cursor attends to", applies=has_attention, controls=("layer", "head"), explain=Explanation(
    r"\alpha_{i,j},\ j \le i \ (i = \text{cursor}),\ \text{per head and mean}",
    "The text around the cursor, with the cursor's attention weight on each token as a bar (mean over heads, or "
    "the chosen head) and one row per head below; later tokens are greyed (the model cannot see them).",
    "Which words the cursor token reads: the previous character, the start of the word, a matching letter earlier "
    "on; heads that specialise.",
    ("Attention",), "design choice"))
def attends_to(tr: Trace, cursor: int | None = None, layer: int = 0, head: int | None = None,
               window: int = WINDOW) -> Chart:
    """What the cursor token attends to, drawn over the text around it.

    Args:
        tr: a trace with attention (OSMFormer, CEM, transformer, llama, grassmann-attn).
        cursor: the query position (default: the last).
        layer: layer index; head: the head whose weights the bars show (None: the mean over heads).
        window: how many tokens around the cursor to show (mostly before it, see :func:`token_window`).

    Traces: ``bars`` (a bar per token of the window: the weight, y in [0, 1]) then, with several heads,
    ``heads`` (heatmap ``[head, window]`` of every head's weights, NaN for the masked keys after the
    cursor). The x axis is the position, its tick labels the tokens; the cursor's column is outlined.
    Raises :class:`FigureError` for a trace without attention or an index out of range.
    Source: softmax attention weights; layout design choice.
    """
    if not getattr(tr, "has_attention", False):
        raise FigureError(f"{tr.kind!r} has no attention to show")
    layer = check_index("layer", layer, tr.n_layers)
    H = max(int(tr.n_heads), 1)
    if head is not None:
        head = check_index("head", head, H)
    cursor = check_cursor(cursor, tr.n_positions)
    q = tr.n_positions - 1 if cursor is None else cursor
    idx = token_window(tr.n_positions, q, window)
    rows = cursor_row(tr, layer, q)  # [H, T]
    with np.errstate(invalid="ignore"):
        full = rows.mean(axis=0) if head is None else rows[head]
    bars = np.where(np.isfinite(full[idx]), full[idx], np.nan)
    per_head = rows[:, idx].copy()
    per_head[:, idx > q] = np.nan  # masked (future) keys: blank cells, not zeros
    per_head[~np.isfinite(per_head)] = np.nan
    labels = [tr.labels[i] for i in idx]
    hover = [f"position {i} '{lab}'" for i, lab in zip(idx.tolist(), labels)]
    x = idx.astype(np.float64)
    multi = H > 1
    fig = FigureBuilder.grid(rows=2 if multi else 1, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                             **({"row_heights": [0.62, 0.38]} if multi else {}))
    what = "mean over heads" if head is None and multi else (f"head {head}" if head is not None else "weight")
    colours = [HIGHLIGHT if i == q else ("#bbbbbb" if i > q else "#0072B2") for i in idx.tolist()]
    fig.add_trace({"type": "bar", "x": x, "y": np.nan_to_num(bars), "name": "bars", "marker": {"color": colours},
                   "customdata": np.array(hover), "showlegend": False,
                   "hovertemplate": f"%{{customdata}}<br>{what}: %{{y:.3f}}<extra></extra>"}, row=1, col=1)
    if multi:
        fig.add_trace({"type": "heatmap", "x": x, "y": np.arange(H), "z": per_head,
                       "name": "heads", "colorscale": SEQUENTIAL, "zmin": 0.0, "zmax": finite_max(per_head),
                       "hoverongaps": False, "showscale": False, "xgap": 1, "ygap": 1,
                       "hovertemplate": "head %{y}, position %{x}<br>weight %{z:.3f}<extra></extra>"}, row=2, col=1)
        fig.update_yaxes(autorange="reversed", row=2, col=1, tickfont={"size": 10}, title={"text": "head"},
                         tickmode="array", tickvals=list(range(H)), showgrid=False, zeroline=False)
        if head is not None:  # the chosen head's row outlined
            fig.add_shape(type="rect", x0=idx[0] - 0.5, x1=idx[-1] + 0.5, y0=head - 0.5, y1=head + 0.5,
                          line={"color": "#000000", "width": 1.5}, row=2, col=1)
    # the text under the bars: one tick per token, the cursor's in bold colour
    ticktext = [f"<b style='color:{HIGHLIGHT}'>{lab}</b>" if i == q else lab for i, lab in zip(idx.tolist(), labels)]
    bottom = 2 if multi else 1
    fig.update_xaxes(range=[idx[0] - 0.5, idx[-1] + 0.5], showgrid=False, zeroline=False)
    fig.update_xaxes(tickmode="array", tickvals=x, ticktext=ticktext, tickangle=0, tickfont={"size": 13},
                     title={"text": f"the text, positions {idx[0]}–{idx[-1]} (cursor {q} in orange)"},
                     row=bottom, col=1)
    fig.update_yaxes(title={"text": "weight"}, rangemode="tozero", row=1, col=1)
    fig.update_layout(**COLUMN_HOVER)  # a hover or click anywhere in a token's column picks its bar, a short one too
    xr, yr = fig._ref(1, 1)
    # the cursor's column (through both panels) and the masked future, shaded
    fig.add_shape(type="rect", xref=xr, yref="paper", x0=q - 0.5, x1=q + 0.5, y0=0, y1=1,
                  line={"color": HIGHLIGHT, "width": 2}, fillcolor="rgba(0,0,0,0)", layer="above", name="cursor")
    if idx[-1] > q:
        fig.add_shape(type="rect", xref=xr, yref="paper", x0=q + 0.5, x1=idx[-1] + 0.5, y0=0, y1=1,
                      line={"width": 0}, fillcolor=MASKED_BG, opacity=0.35, layer="below")
    inside = float(np.nansum(full[idx[idx <= q]]))
    total = float(np.nansum(full[: q + 1]))
    cap = (f"The text around the cursor (positions {idx[0]}–{idx[-1]} of {tr.n_positions}; at most {window} "
           f"tokens so each stays readable). Bar height: the attention weight position {q} '{tr.labels[q]}' "
           f"puts on each earlier token in layer {layer} ({what}; the weights sum to 1)")
    cap += ("; below, one row per head (colour: weight, yellow the largest)." if multi else ".")
    cap += " Tokens after the cursor are masked (grey)."
    if np.isfinite(full[: q + 1]).any():
        top = int(np.nanargmax(full[: q + 1]))
        cap += f" Most weight: position {top} '{tr.labels[top]}' ({full[top]:.2f})."
    if total > 0 and idx[0] > 0:
        cap += f" This window holds {inside / total:.0%} of the weight; the rest is on earlier tokens."
    cap += missing_note(int((~np.isfinite(rows[:, idx[idx <= q]])).any(0).sum()), "key positions")
    height = 300 + (min(H, 16) * 16 if multi else 0)
    title = f"Over the text: what position {q} '{tr.labels[q]}' attends to, layer {layer}"
    return finish(fig, title, cap, "attends_to", height=height, bargap=0.15)
