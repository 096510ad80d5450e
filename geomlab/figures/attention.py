"""Attention figures: similarity and attention maps (Nunley, arXiv 2602.18417).

The attention weights of any model with attention (OSM, CEM, transformer, llama, grassmann-attn; head-averaged
or one head) and, for OSMFormers, the similarity ``S_ij = Re tr(H_i^* H_j)`` of the layer's input states (in
[-d, d]), each its own square map (two figures, so a narrow page can put them under each other). Rows are queries i, columns keys j; the
causal mask (j > i) is left blank on a grey background. Past :data:`~geomlab.figures._sampling.WINDOW`
positions a map shows the window of consecutive positions around the cursor at full resolution (exact
entries, normalised over all earlier keys); the overview figure shows the whole text.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureError, Chart, FigureBuilder, finish
from geomlab.figures._style import (
    COLUMN_HOVER, DIVERGING, MASKED_BG, SEQUENTIAL, category_labels, add_cursor_line, colour, cursor_box,
)
from geomlab.figures._sampling import (
    WINDOW, check_cursor, check_index, finite_max, memo, missing_note, window, window_note,
)
from geomlab.figures.catalog import Explanation, figure, has_attention, is_osm
from geomlab.core.markup import md_label
from geomlab.trace import OSMTrace, Trace

#: The similarity of two states in figure text (plotly's sub/sup markup): Nunley, arXiv 2602.18417.
SIMILARITY = "Re tr(H<sub>i</sub><sup>*</sup>H<sub>j</sub>)"


def _masked(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``rows`` ``[len(idx), T]`` (full key rows of the shown queries) -> the shown ``[idx, idx]`` block,
    float32 (half the JSON of float64), NaN where masked (j > i)."""
    sub = np.array(rows[:, idx], dtype=np.float32)
    sub[~np.isfinite(sub)] = np.nan  # an infinity would take the colour scale with it
    sub[idx[None, :] > idx[:, None]] = np.nan
    return sub


def _block(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """:func:`_masked` of ``rows`` with one more row holding :func:`_bad_rows` (what an attention map keeps of
    a window, kept on the trace: :func:`~geomlab.figures._sampling.memo`)."""
    w = _masked(rows, idx)
    return np.vstack([w, np.full((1, w.shape[1]), _bad_rows(rows, idx), dtype=w.dtype)])


def _bad_rows(rows: np.ndarray, idx: np.ndarray) -> int:
    """Shown query rows with a non-finite value among their unmasked (j <= i) entries."""
    sub = np.asarray(rows[:, idx], dtype=np.float64)
    causal = idx[None, :] <= idx[:, None]
    return int((~np.isfinite(sub) & causal).any(1).sum())


def _positions(tr: Trace, layer: int, cursor: int | None, size: int) -> tuple[int, int | None, np.ndarray]:
    """Checked ``(layer, cursor)`` and the positions a map shows: the window of ``size`` consecutive positions
    around the cursor (:func:`~geomlab.figures._sampling.window`; every position of a short text)."""
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    return layer, cursor, window(tr.n_positions, cursor, size)


def _square_map(tr: Trace, idx: np.ndarray, cursor: int | None, z: np.ndarray, scale, zmin: float,
                zmax: float, hover: str, name: str, title: str, cap: str, view: str) -> Chart:
    """One token x token map: a square panel of category axes at the left, rows = queries (top down),
    columns = keys, its colour bar beside it; the cursor's row boxed."""
    cats = category_labels(tr.labels, idx)
    heat = {"type": "heatmap", "z": z, "x": cats, "y": cats, "colorscale": scale, "zmin": zmin, "zmax": zmax,
            "name": name, "hoverongaps": False,  # a click reads its row (the query) from the label (click="row")
            # the map is square, so narrower than the plot area is tall once the figure is narrow: top-aligned
            # (constraintoward="top" below) with a half-height colour bar from its top edge; no colour-bar
            # title (the figure's title names the quantity)
            "colorbar": {"len": 0.5, "y": 1.0, "yanchor": "top", "thickness": 10, "tickfont": {"size": 10},
                         "tickformat": ".3~g"},  # 0.0005, not plotly's SI "500µ"
            "hovertemplate": f"query %{{y}}<br>key %{{x}}<br>{hover} = %{{z:.4f}}<extra></extra>"}
    if zmin < 0:
        heat["zmid"] = 0
    fig = FigureBuilder()
    fig.add_trace(heat)
    fig.update_xaxes(title={"text": "key position j (token)"}, type="category", nticks=8, constrain="domain",
                     constraintoward="left", showgrid=False, zeroline=False)
    fig.update_yaxes(title={"text": "query position i (token)"}, type="category", nticks=8, autorange="reversed",
                     scaleanchor="x", scaleratio=1, constrain="domain", constraintoward="top", showgrid=False,
                     zeroline=False)
    if cursor is not None:  # category axes: shapes use the category index
        ci = int(np.searchsorted(idx, cursor))
        cursor_box(fig, ci, ci + 0.5)
    fig.update_layout(plot_bgcolor=MASKED_BG)
    return finish(fig, title, cap, view, height=520)


@figure(click="row", label="attention weights map", applies=has_attention, controls=("layer", "head"), wide=False,
        explain=Explanation(
    r"\alpha_{ij} = \operatorname{softmax}_{j\le i} S_{ij}",
    "Rows are query positions, columns key positions; colour = the weight each query puts on each earlier key (a "
    "row sums to 1).",
    "Diagonal bands (fixed look-back) and vertical stripes (anchor tokens).",
    ("Attention",), "Nunley, arXiv 2602.18417; design choice"))
def attention_maps(tr: Trace, layer: int = 0, head: int | None = None, cursor: int | None = None,
                   size: int = WINDOW) -> Chart:
    """Token x token attention weights of one layer (sequential scale, range [0, max]; the head average or one
    head); an OSMFormer's state similarity these weights come from is :func:`similarity_map`.

    Args:
        tr: any trace with ``attention`` (OSM, CEM, baseline transformers).
        layer: layer index; head: one head, or None for the head average.
        cursor: query position to outline (a box around its row).
        size: the map shows this many consecutive positions around the cursor at full resolution (all of a
            text no longer than it; :func:`~geomlab.figures._sampling.window`).

    Only the rows drawn are computed (``Trace.attention_rows``), so a long trace never forms its ``T x T``
    matrices. Traces: one ``weights`` heatmap; masked entries are NaN; the category labels start with the
    positions (a click reads its row). Raises :class:`FigureError` if the
    trace has no attention or an index is out of range. Source: Nunley, arXiv 2602.18417 (the weights);
    design choice.
    """
    if not getattr(tr, "has_attention", False):
        raise FigureError(f"{tr.kind!r} has no attention to show")
    if head is not None:
        head = check_index("head", head, max(int(tr.n_heads), 1))
    layer, cursor, idx = _positions(tr, layer, cursor, size)
    block = memo(tr, ("attention_block", layer, head, int(idx[0]), len(idx)),
                 lambda: _block(tr.attention_rows(layer, idx, head), idx), keep=16)
    w, bad = block[:-1], int(block[-1, 0])
    head_txt = "mean over heads" if head is None and int(tr.n_heads) > 1 else (f"head {head}" if head is not None else "")
    cap = ("Attention weights of each query position (row) on the earlier key positions (columns; each row sums "
           "to 1); grey cells are masked (future).")
    if getattr(tr, "has_similarity", False):
        cap += " The similarity map gives the state similarity these weights come from."
    cap += window_note(tr.n_positions, idx) + _outside_note(tr, layer, head, idx, cursor, w)
    cap += missing_note(bad, "query rows")
    title = f"Attention weights{' (' + head_txt + ')' if head_txt else ''}, layer {layer}"
    # a floor keeps a window that holds almost none of its rows' weight dark, not its noise at full colour
    return _square_map(tr, idx, cursor, w, SEQUENTIAL, 0.0, finite_max(w, floor=1e-3), "weight", "weights",
                       title, cap, "attention_maps")


def _outside_note(tr: Trace, layer: int, head: int | None, idx: np.ndarray, cursor: int | None,
                  w: np.ndarray) -> str:
    """A caption sentence when the window drawn holds less than half of the cursor row's weight (the last row
    drawn without a cursor): how much it holds and the key the row weighs most. Empty otherwise."""
    at = int(idx[-1]) if cursor is None else int(cursor)
    share = float(np.nansum(w[int(np.searchsorted(idx, at))]))
    if share >= 0.5 or int(idx[0]) == 0:
        return ""
    row = tr.attention_rows(layer, np.array([at]), head)[0]
    j = int(np.nanargmax(row))
    where = ", left of the window" if j < int(idx[0]) else ""
    held = "under 0.1%" if share < 1e-3 else f"{share:.1%}"
    return (f" The window holds {held} of row {at}'s weight: the row weighs key {j} "
            f"'{md_label(tr.labels[j])}' most ({float(row[j]):.2g}{where}).")


@figure(click="row", label="state similarity map", applies=lambda tr: is_osm(tr) and bool(getattr(tr, "has_similarity", False)),
        controls=("layer",), wide=False, explain=Explanation(
    r"\mathrm{Re}\,\mathrm{tr}(H_i^* H_j) \in [-d, d]",
    "Rows are query positions, columns key positions; colour = how alike the two states on the group are (red "
    "alike, d when equal; blue opposed). The attention score is this, scaled, minus a distance penalty.",
    "Red cells off the diagonal: equal or related tokens far apart, which attention can then pick out.",
    ("Similarity", "Attention"), "Nunley, arXiv 2602.18417"))
def similarity_map(tr: Trace, layer: int = 0, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Token x token state similarity ``Re tr(H_i^* H_j)`` of one OSMFormer layer's input states: signed,
    colour-blind-safe diverging scale centred at 0, range [-d, d] (d when the states are equal). The
    attention score is this similarity, scaled, minus the ALiBi distance penalty (Nunley, arXiv 2602.18417).

    Args: as :func:`attention_maps` (no head: the similarity is one per layer). Only the rows drawn are
    computed (``OSMTrace.similarity_rows``). Traces: one ``similarity`` heatmap; masked (j > i) entries NaN.
    Raises :class:`FigureError` for a trace without similarity (not an OSMFormer) or an index out of range.
    """
    if not (isinstance(tr, OSMTrace) and tr.has_similarity):
        raise FigureError(f"{tr.kind!r} has no state similarity to show (an OSMFormer has)")
    layer, cursor, idx = _positions(tr, layer, cursor, size)
    rows = tr.similarity_rows(layer, idx)
    d = float(tr.d)
    cap = ("How similar the states of two positions are, $\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$ (blue negative, "
           "red positive; at most $d$, when the states are equal). Rows are queries, columns keys; grey cells are "
           "masked (future).")
    cap += window_note(tr.n_positions, idx) + missing_note(_bad_rows(rows, idx), "query rows")
    return _square_map(tr, idx, cursor, _masked(rows, idx), DIVERGING, -d, d, SIMILARITY, "similarity",
                       f"Similarity {SIMILARITY}, layer {layer}", cap, "similarity_map")


@figure(click="position", label="attention row at the cursor", applies=has_attention, controls=("layer",), explain=Explanation(
    r"\alpha_{i,j},\ j \le i \ (i = \text{cursor})",
    "Where the cursor token looks: its weight on every earlier position, one line per head and their mean.",
    "Which earlier tokens get the most weight; with several heads, where they disagree.",
    ("Attention",), "design choice"))
def attention_row(tr: Trace, layer: int = 0, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """What the cursor token attends to: the cursor's row of attention weights over every earlier key
    position, one line per head plus their mean (thick) (design choice: the cursor's row of a long map
    without forming the map). Past ``size`` keys the ``size`` keys up to the cursor are drawn, at full
    resolution; the caption's heaviest key is over all earlier keys.

    Args:
        tr: any trace with attention; layer: layer index; cursor: the query position (default: the last).
        size: most keys drawn (the last ones before and at the cursor).

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
    idx = window(q + 1, q, size)  # the keys up to the query: the window ends at it
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
    fig.update_xaxes(title={"text": "key position j"}, tickformat="d", range=[float(idx[0]) - 0.5, q + 0.5],
                     **({"dtick": 1} if q < 12 else {}))
    fig.update_yaxes(title={"text": "attention weight"}, rangemode="tozero")
    if cursor is not None:  # the query's own position, the right end of the row
        add_cursor_line(fig, q)
    cap = (f"Where position {q} '{md_label(tr.labels[q])}' looks in layer {layer}: its attention weight on "
           "every earlier position (they sum to 1).")
    if np.isfinite(mean).any():
        top = int(np.nanargmax(mean))
        cap += f" Most weight on position {top} '{md_label(tr.labels[top])}' ({mean[top]:.2f})."
    cap += window_note(q + 1, idx, what="Keys")
    cap += missing_note(int((~np.isfinite(mean[idx])).sum()), "key positions")
    return finish(fig, f"What position {q} '{tr.labels[q]}' attends to, layer {layer}", cap, "attention_row",
                  height=360, **COLUMN_HOVER)
