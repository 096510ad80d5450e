"""View 3: attention similarity maps (osm.md §2.5-2.6; app_anchors.md §5).

For OSM models: the similarity ``S_ij = Re tr(H_i^* H_j)`` of the layer's input states (in [-d, d]) and the
attention weights, side by side; for other models with attention (CEM, transformer, llama,
grassmann-attn) the weights alone (head-averaged or one head). Rows are queries i, columns keys j; the
causal mask (j > i) is left blank on a grey background. Past :data:`MAX_MATRIX` positions an evenly spaced
subset of rows and columns is shown (the values are exact entries, not averages).
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._common import (
    DIVERGING, MASKED_BG, MAX_MATRIX, MAX_POINTS, SEQUENTIAL, FigureError, View, category_labels,
    FigureBuilder, add_cursor_line, check_cursor, check_index, colour, cursor_box, finish, finite_max,
    missing_note, subsample, subsample_note,
)
from geomlab.markup import md_label
from geomlab.trace import OSMTrace, Trace

#: The similarity of two states in figure text (plotly's sub/sup markup): osm.md §2.5.
SIMILARITY = "Re tr(H<sub>i</sub><sup>*</sup>H<sub>j</sub>)"


def _masked(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``rows`` ``[len(idx), T]`` (full key rows of the shown queries) -> the shown ``[idx, idx]`` block,
    float32 (half the JSON of float64), NaN where masked (j > i)."""
    sub = np.array(rows[:, idx], dtype=np.float32)
    sub[~np.isfinite(sub)] = np.nan  # an infinity would take the colour scale with it
    sub[idx[None, :] > idx[:, None]] = np.nan
    return sub


def _bad_rows(rows: np.ndarray, idx: np.ndarray) -> int:
    """Shown query rows with a non-finite value among their unmasked (j <= i) entries."""
    sub = np.asarray(rows[:, idx], dtype=np.float64)
    causal = idx[None, :] <= idx[:, None]
    return int((~np.isfinite(sub) & causal).any(1).sum())


def window_positions(n: int, cursor: int | None, window: int) -> np.ndarray:
    """``window`` consecutive positions ending at the cursor (clipped to ``0..n-1``; the last ones when no
    cursor): the full-resolution part of a long map around the cursor (design choice, issue 14)."""
    if window < 2:
        raise FigureError("window must be at least 2 positions")
    end = n - 1 if cursor is None else cursor
    stop = min(n, max(end + 1, min(window, n)))
    return np.arange(max(0, stop - window), stop)


def attention_maps(tr: Trace, layer: int = 0, head: int | None = None, cursor: int | None = None,
                   max_positions: int = MAX_MATRIX, window: int | None = None) -> View:
    """Token x token maps of one layer: for OSM traces with ``similarity``, the similarity
    ``Re tr(H_i^* H_j)`` (signed, colour-blind-safe diverging scale centred at 0, range [-d, d]) beside the
    attention weights (sequential scale, range [0, max]); otherwise the weights alone.

    Args:
        tr: any trace with ``attention`` (OSM, CEM, baseline transformers).
        layer: layer index; head: one head, or None for the head average.
        cursor: query position to outline (a box around its row).
        max_positions: past this many positions show an evenly spaced subset (the overview; exact entries).
        window: show instead the ``window`` consecutive positions ending at the cursor, at full resolution.

    Only the rows drawn are computed (``Trace.attention_rows`` / ``OSMTrace.similarity_rows``), so a long
    trace never forms its ``T x T`` matrices.

    Traces: ``similarity`` heatmap (OSM only) then ``weights`` heatmap; masked entries are NaN.
    Raises :class:`FigureError` if the trace has no attention or an index is out of range.
    """
    if not getattr(tr, "has_attention", False):
        raise FigureError(f"{tr.kind!r} has no attention to show")
    layer = check_index("layer", layer, tr.n_layers)
    if head is not None:
        head = check_index("head", head, max(int(tr.n_heads), 1))
    cursor = check_cursor(cursor, tr.n_positions)
    if window is not None:
        idx = window_positions(tr.n_positions, cursor, min(int(window), max_positions))
    else:
        idx = subsample(tr.n_positions, max_positions, cursor)
    weights = tr.attention_rows(layer, idx, head)
    sim = (tr.similarity_rows(layer, idx) if isinstance(tr, OSMTrace) and tr.has_similarity else None)
    cats = category_labels(tr.labels, idx)
    ci = None if cursor is None else int(np.searchsorted(idx, cursor))
    panels = []
    if sim is not None:
        d = float(tr.d)
        panels.append((f"similarity {SIMILARITY}", _masked(sim, idx), DIVERGING, -d, d,
                       "Re tr", "similarity"))
    w = _masked(weights, idx)
    head_txt = "mean over heads" if head is None and int(tr.n_heads) > 1 else (f"head {head}" if head is not None else "")
    panels.append((f"attention weights{' (' + head_txt + ')' if head_txt else ''}", w, SEQUENTIAL, 0.0,
                   finite_max(w), "weight", "weights"))
    n_bad = max(_bad_rows(weights, idx), _bad_rows(sim, idx) if sim is not None else 0)
    n = len(panels)
    spacing = 0.16
    # one panel: its name goes in the figure title (a subplot title is centred on the unconstrained domain
    # and lands on the top tick label once the square panel is narrower than the figure)
    fig = FigureBuilder.grid(rows=1, cols=n, subplot_titles=[p[0] for p in panels] if n > 1 else None,
                             horizontal_spacing=spacing)
    width = (1 - spacing * (n - 1)) / n
    for c, (title, z, scale, zmin, zmax, what, name) in enumerate(panels, start=1):
        hover = SIMILARITY if name == "similarity" else what
        # each colour bar just right of its own panel (the right panel shares the query axis and shows no
        # tick labels or title of its own, so nothing sits under the left colour bar)
        x_cb = (c - 1) * (width + spacing) + width + 0.012
        heat = {"type": "heatmap", "z": z, "x": cats, "y": cats, "colorscale": scale, "zmin": zmin, "zmax": zmax,
                "name": name, "hoverongaps": False,
                # the maps are square, so narrower than the plot area is tall once the figure is narrow: top-
                # aligned (constraintoward="top" below) with a half-height colour bar from their top edge, the
                # bar is about the map's height at a 1,000 px window (0.9 of the plot area was twice as tall)
                # no colour-bar title: the panel's title names the quantity, and at a narrow width (800 px
                # beside the sidebar) the left bar's side title ran over the right panel
                "colorbar": {"x": x_cb, "xanchor": "left", "len": 0.5, "y": 1.0, "yanchor": "top",
                             "thickness": 10, "tickfont": {"size": 10}},
                "hovertemplate": f"query %{{y}}<br>key %{{x}}<br>{hover} = %{{z:.4f}}<extra></extra>"}
        if zmin < 0:
            heat["zmid"] = 0
        fig.add_trace(heat, row=1, col=c)
        fig.update_xaxes(title={"text": "key position j (token)"}, type="category", nticks=8, row=1, col=c)
        if c == 1:
            fig.update_yaxes(title={"text": "query position i (token)"}, type="category", nticks=8,
                             autorange="reversed", row=1, col=c, scaleanchor="x", scaleratio=1,
                             constrain="domain", constraintoward="top")
            fig.update_xaxes(constrain="domain", constraintoward="right" if n > 1 else "left", row=1, col=c)
        else:
            # same ranges as the left panel (which is square), so its cells are square too
            fig.update_xaxes(matches="x", constrain="domain", constraintoward="right", row=1, col=c)
            fig.update_yaxes(type="category", matches="y", showticklabels=False, row=1, col=c,
                             scaleanchor=f"x{c}", scaleratio=1, constrain="domain", constraintoward="top")
        if ci is not None:  # category axes: shapes use the category index
            cursor_box(fig, ci, ci + 0.5, row=1, col=c)
    for ann in fig.layout.get("annotations", []):  # the panel titles clear of the top-aligned maps
        ann["yshift"] = 6
    fig.update_layout(plot_bgcolor=MASKED_BG)
    fig.update_xaxes(showgrid=False, zeroline=False)
    fig.update_yaxes(showgrid=False, zeroline=False)
    if sim is not None:
        cap = ("Left: how similar the states of two positions are, $\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$ "
               "(blue negative, red positive; at most $d$ when equal). Right: the attention weights the model put "
               "on each earlier position. Rows are queries, columns keys; grey cells are masked (future).")
    else:
        cap = ("Attention weights of each query position (row) on the earlier key positions (columns); grey "
               "cells are masked (future).")
    if window is not None and len(idx) < tr.n_positions:
        cap += (f" Positions {idx[0]}–{idx[-1]} (the {len(idx)} up to the cursor) at full resolution; weights "
                "are normalised over all earlier keys.")
    else:
        cap += subsample_note(tr.n_positions, len(idx))
    cap += missing_note(n_bad, "query rows")
    title = f"Attention, layer {layer}" if n > 1 else f"{panels[0][0].capitalize()}, layer {layer}"
    return finish(fig, title, cap, "attention_maps", height=520)


def attention_row(tr: Trace, layer: int = 0, cursor: int | None = None, max_points: int = MAX_POINTS) -> View:
    """What the cursor token attends to: the cursor's row of attention weights over every earlier key
    position, one line per head plus their mean (thick), in full (design choice, issue 14: the cursor's
    row of a long map without forming the map).

    Args:
        tr: any trace with attention; layer: layer index; cursor: the query position (default: the last).
        max_points: keys past this many are subsampled evenly (the cursor's neighbourhood kept).

    The hover of an OSMFormer trace also gives each key's similarity ``Re tr(H_i^* H_j)`` with the query.
    Traces: ``head h`` lines (when several heads) then ``mean``. Raises :class:`FigureError` for a trace
    without attention or an index out of range.
    """
    if not getattr(tr, "has_attention", False):
        raise FigureError(f"{tr.kind!r} has no attention to show")
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    q = tr.n_positions - 1 if cursor is None else cursor
    H = max(int(tr.n_heads), 1)
    per_head = [np.asarray(tr.attention_rows(layer, [q], h)[0, : q + 1], dtype=np.float64) for h in range(H)]
    per_head = [np.where(np.isfinite(w), w, np.nan) for w in per_head]
    mean = np.mean(per_head, axis=0)  # NaN where a head's weight is missing: left blank
    idx = subsample(q + 1, max_points, q)
    labels = [tr.labels[i] for i in idx]
    hover = [f"key {i} '{lab}'" for i, lab in zip(idx, labels)]
    if getattr(tr, "has_similarity", False):  # OSMFormer: the score's geometric part, readable on hover
        sim = tr.similarity_rows(layer, [q])[0, : q + 1]
        hover = [f"{h}<br>similarity {SIMILARITY} = {sim[i]:.2f}"
                 for h, i in zip(hover, idx)]
    fig = FigureBuilder()
    x = idx.astype(np.float32)
    if H > 1:
        for h, w in enumerate(per_head):
            fig.add_trace({"type": "scatter", "x": x, "y": w[idx].astype(np.float32), "mode": "lines",
                           "name": f"head {h}", "line": {"width": 1, "color": colour(h)}, "opacity": 0.7,
                           "text": np.array(hover), "hovertemplate": f"%{{text}}<br>head {h}: %{{y:.4f}}<extra></extra>"})
    fig.add_trace({"type": "scatter", "x": x, "y": mean[idx].astype(np.float32),
                   "mode": "lines+markers" if len(idx) <= 64 else "lines",
                   "name": "mean over heads" if H > 1 else "weight", "line": {"width": 3, "color": "#000000"},
                   "text": np.array(hover), "hovertemplate": "%{text}<br>weight %{y:.4f}<extra></extra>"})
    fig.update_xaxes(title={"text": "key position j"}, tickformat="d", range=[-0.5, q + 0.5],
                     **({"dtick": 1} if q < 12 else {}))
    fig.update_yaxes(title={"text": "attention weight"}, rangemode="tozero")
    if cursor is not None:  # the query's own position, the right end of the row
        add_cursor_line(fig, q)
    cap = (f"Where position {q} '{md_label(tr.labels[q])}' looks in layer {layer}: its attention weight on "
           "every earlier position (they sum to 1).")
    if np.isfinite(mean).any():
        top = int(np.nanargmax(mean))
        cap += f" Most weight on position {top} '{md_label(tr.labels[top])}' ({mean[top]:.2f})."
    cap += subsample_note(q + 1, len(idx))
    cap += missing_note(int((~np.isfinite(mean[idx])).sum()), "key positions")
    return finish(fig, f"What position {q} '{tr.labels[q]}' attends to, layer {layer}", cap, "attention_row",
                  height=360)


WINDOW = 64
"""Positions the full-resolution window of a long attention map shows (design choice)."""


def attention_window(tr: Trace, layer: int = 0, head: int | None = None, cursor: int | None = None,
                     window: int = WINDOW) -> View:
    """The attention map (and OSM similarity) of the ``window`` positions up to the cursor at full
    resolution: for a long text, beside the overview of :func:`attention_maps` (which shows an evenly
    spaced subset). Same traces and arguments as :func:`attention_maps`; raises :class:`FigureError` like it.
    Design choice (issue 14: the cursor's row, a window around it, a downsampled overview)."""
    fig, caption = attention_maps(tr, layer=layer, head=head, cursor=cursor, window=window)
    idx = window_positions(tr.n_positions, check_cursor(cursor, tr.n_positions), window)
    fig.update_layout(title={"text": f"Attention near the cursor: positions {idx[0]}–{idx[-1]}, layer "
                                     f"{check_index('layer', layer, tr.n_layers)}"},
                      meta={"caption": caption, "view": "attention_window"})
    return View(fig, caption)
