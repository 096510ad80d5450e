"""Grassmann figures of how the planes move (Zhang, arXiv 2512.19428; geometry from
:mod:`geomlab.geometry.planes`): distances and principal angles between planes, plane similarity, the
Plücker strip and the gate share; and the planes, masks and offsets of a trace that every Grassmann figure
reads (the bivector figures are in :mod:`geomlab.figures.bivectors`, the 3-D scenes in
:mod:`geomlab.figures.plane_scenes`).

Planes: in layer l and offset slot k (offset Delta = ``offsets[l, k]``), the reduced plane at position t is
``U_t = span(z_t, z_{t-Delta})`` in R^r (valid where ``plucker_mask`` is True and the pair is not
degenerate). Reduced spaces of different layers are not comparable (each layer has its own W_red), so
across layers the residual planes ``H_t^(l) = span(h_t^(l), h_{t-Delta}^(l))`` in R^d_model of the layer
inputs are compared instead (Zhang, arXiv 2512.19428).

Conventions (design choice): a distance "at position t" compares t - 1 with t (how far the plane moved
when token t arrived); NaN where a plane is missing or degenerate. Angles and geodesic distances are in
radians; Plücker coordinates and gates are dimensionless.
"""

from __future__ import annotations

import numpy as np
import torch

from geomlab.geometry import planes
from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import (
    COLUMN_HOVER, DIVERGING, SEQUENTIAL, add_cursor_line, cursor_box, category_labels, colour, hover_tokens, index_colours,
    thin_ticks, token_ticks,
)
from geomlab.figures._sampling import (
    WINDOW, check_cursor, check_index, window, window_note, blank, memo, missing_note, nonfinite_count,
)
from geomlab.figures._spread import spread_note
from geomlab.figures.catalog import GR_SRC, Explanation, figure, is_grassmann
from geomlab.core.markup import md_label
from geomlab.trace import GrassmannTrace

#: The geodesic distance's name in figure text (plotly's subscript markup).
DG = "d<sub>g</sub>"


def _gr(tr) -> GrassmannTrace:
    if not isinstance(tr, GrassmannTrace):
        raise FigureError(f"this view needs a Grassmann trace, got {getattr(tr, 'kind', tr)!r}")
    return tr


def _offset(tr: GrassmannTrace, layer: int, slot: int) -> int:
    if tr.offsets is None:
        return slot + 1
    return int(tr.offsets[layer, slot])


def _mask(tr: GrassmannTrace, layer: int, slot: int) -> np.ndarray:
    """Positions with a plane: recorded (mask), non-zero and finite (a NaN Plücker vector is no plane)."""
    p = np.asarray(tr.plucker[layer, slot])
    finite = np.isfinite(p).all(-1)
    if tr.plucker_mask is not None:
        return tr.plucker_mask[layer, slot].astype(bool) & finite
    return (np.abs(np.where(np.isfinite(p), p, 0)).sum(-1) > 0) & finite


def _missing(tr: GrassmannTrace, idx: np.ndarray, layers=None) -> int:
    """Shown positions whose recorded reduced vectors (any layer, or ``layers``) hold a non-finite value (or,
    for all layers, whose layer inputs do)."""
    z = np.asarray(tr.reduced if layers is None else tr.reduced[layers])
    bad = ~np.isfinite(z[..., idx, :]).all(-1)
    bad = bad.reshape(-1, len(idx)).any(0)
    if layers is None and tr.inputs is not None:
        bad |= ~np.isfinite(np.asarray(tr.inputs)[:, idx]).all(-1).any(0)
    return int(bad.sum())


def _few_planes_note(tr: GrassmannTrace, layer: int, slot: int) -> str:
    """A caption sentence when the offset of ``layer``/``slot`` leaves a plane at fewer than half of the
    positions (a text not much longer than the offset), naming a smaller offset the trace has; else ``""``
    (design choice: the planes view opens on the last layer, whose offset is the longest with one offset per
    layer)."""
    n, T = int(_mask(tr, layer, slot).sum()), tr.n_positions
    if 2 * n >= T:
        return ""
    D = _offset(tr, layer, slot)
    offs = np.asarray(tr.offsets) if tr.offsets is not None else np.zeros((0, 0), int)
    shorter = sorted({int(o) for o in offs.ravel() if 0 < o < D})[:3]

    def place(o: int) -> str:  # the same layer's slot when it has that offset, else the first layer that does
        here = np.flatnonzero(offs[layer] == o)
        return f"offset slot {int(here[0])}" if len(here) else f"layer {int(np.argwhere(offs == o)[0][0])}"

    where = (" A smaller offset shows more of this text: " + ", ".join(f"Δ={o} ({place(o)})" for o in shorter)
             + "." if shorter else "")
    return (f" Only {n} of {T} positions have a plane here: each is paired with the position {D} back, so the "
            f"first {D} have no partner." + where)


def check_slot(tr: GrassmannTrace, slot: int) -> int:
    """``slot`` normalised to ``0..n_slots-1``; :class:`FigureError` when out of range."""
    return check_index("offset slot", slot, tr.plucker.shape[1])


def plane_bases(tr: GrassmannTrace, layer: int, slot: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """``(Q, valid, offset)``: orthonormal bases ``[position, rank, 2]`` (float64) of the reduced planes
    ``span(z_t, z_{t-offset})`` of ``layer`` and ``slot`` (``planes.plane_basis``), ``valid`` ``[position]``
    bool (pair exists, slot used, not degenerate), and the slot's offset (0 = unused slot)."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    D = _offset(tr, layer, slot)
    T = tr.n_positions
    z = torch.as_tensor(tr.reduced[layer], dtype=torch.float64)
    valid = _mask(tr, layer, slot).copy()
    Q = np.zeros((T, tr.rank, 2))
    if D <= 0 or D >= T:
        return Q, np.zeros(T, dtype=bool), D
    Qt, ok = planes.plane_basis(z[D:], z[:-D])
    Q[D:] = Qt.numpy()
    valid[:D] = False
    valid[D:] &= ok.numpy()
    return Q, valid, D


def consecutive_angles(tr: GrassmannTrace, layer: int, slot: int = 0) -> np.ndarray:
    """``[position, 2]`` principal angles (radians, ``planes.principal_angles``) between the reduced planes
    at t - 1 and t of ``layer``/``slot``; NaN at t = 0 and where either plane is invalid. Computed once per
    trace (read-only, :func:`~geomlab.figures._sampling.memo`)."""
    return memo(tr, ("consecutive_angles", layer, slot), lambda: _consecutive_angles(tr, layer, slot))


def _consecutive_angles(tr: GrassmannTrace, layer: int, slot: int) -> np.ndarray:
    Q, valid, _ = plane_bases(tr, layer, slot)
    out = np.full((len(Q), 2), np.nan)
    if len(Q) > 1:
        th = planes.principal_angles(torch.from_numpy(Q[:-1]), torch.from_numpy(Q[1:])).numpy()
        both = valid[:-1] & valid[1:]
        out[1:][both] = th[both]
    return out


def position_distances(tr: GrassmannTrace, slot: int = 0) -> np.ndarray:
    """``D_pos[layer, position]``: geodesic distance on Gr(2, r) between the reduced planes at t - 1 and t
    (radians; Zhang, arXiv 2512.19428); NaN where undefined. Computed once per trace (read-only)."""
    tr = _gr(tr)
    slot = check_slot(tr, slot)
    return memo(tr, ("position_distances", slot), lambda: np.stack([np.linalg.norm(consecutive_angles(tr, layer, slot), axis=-1)
                     for layer in range(tr.n_layers)]))


def layer_distances(tr: GrassmannTrace, offset: int = 1) -> np.ndarray:
    """``D_layer[layer, position]`` for layer = 0..L-2: geodesic distance between the residual planes
    ``span(h_t, h_{t-offset})`` of the inputs of layers l and l + 1 (radians; Zhang, arXiv 2512.19428);
    NaN for t < offset or degenerate pairs. Computed once per trace and offset (read-only). Raises
    :class:`FigureError` without recorded ``inputs`` or for ``offset < 1``."""
    tr = _gr(tr)
    if tr.inputs is None:
        raise FigureError("this Grassmann trace has no layer inputs")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 1:
        raise FigureError(f"offset must be a positive integer, got {offset!r}")
    return memo(tr, ("layer_distances", int(offset)), lambda: _layer_distances(tr, int(offset)))


def _layer_distances(tr: GrassmannTrace, offset: int) -> np.ndarray:
    L, T = tr.inputs.shape[:2]
    out = np.full((max(L - 1, 0), T), np.nan)
    if offset >= T or L < 2:
        return out
    h = torch.as_tensor(tr.inputs, dtype=torch.float64)
    Q, ok = planes.plane_basis(h[:, offset:], h[:, :-offset])  # [L, T - offset, d, 2]
    d = planes.geodesic_distance(Q[:-1], Q[1:]).numpy()
    both = (ok[:-1] & ok[1:]).numpy()
    out[:, offset:] = np.where(both, d, np.nan)
    return out


def most_geometric_layer(tr: GrassmannTrace) -> int:
    """The layer whose output draws most on its planes: the largest mean, over positions and channels, of the
    gate's share of geometry ``1 - alpha`` (:func:`gate_share`; non-finite gates left out); layer 0 without
    recorded gates or without a finite one. Design choice: a layer whose gate keeps its input (a share near 0)
    has planes that hardly change what the model predicts."""
    tr = _gr(tr)
    if tr.gates is None:
        return 0
    share = 1.0 - blank(tr.gates.astype(np.float64)).reshape(tr.gates.shape[0], -1)
    ok = np.isfinite(share)
    n = ok.sum(-1)
    if not n.any():
        return 0
    mean = np.where(n > 0, np.where(ok, share, 0.0).sum(-1) / np.maximum(n, 1), -np.inf)
    return int(np.argmax(mean))


def _default_offset(tr: GrassmannTrace) -> int:
    if tr.offsets is not None and (tr.offsets > 0).any():
        return int(tr.offsets[tr.offsets > 0].min())
    return 1


def _pos_heatmap(fig, z, idx, labels, row, col, name, what, zmax, colorbar_y, colorbar_len):
    text = np.broadcast_to(np.array(hover_tokens(labels, idx)), z.shape)
    fig.add_trace(dict(type="heatmap",
        z=z, x=idx, y=np.arange(z.shape[0]), colorscale=SEQUENTIAL, zmin=0, zmax=zmax, text=text, name=name,
        hoverongaps=False, colorbar={"title": {"text": "rad"}, "y": colorbar_y, "len": colorbar_len},
        hovertemplate=f"{what}<br>layer %{{y}}, position %{{text}}<br>{DG} = %{{z:.4f}} rad<extra></extra>"),
        row=row, col=col)


def _mark_layer(fig: FigureBuilder, layer: int, n_rows: int, idx: np.ndarray, row: int) -> None:
    """Outline heatmap row ``layer`` of subplot ``row`` (one row per layer, ``n_rows`` of them, columns ``idx``)
    and point its tick label at it: the layer the one-layer figures below show. Nothing when it has no row."""
    if not 0 <= layer < n_rows:
        return
    fig.add_shape(type="rect", x0=idx[0] - 0.5, x1=idx[-1] + 0.5, y0=layer - 0.5, y1=layer + 0.5,
                  line={"color": "#000000", "width": 2}, name="layer", row=row, col=1)
    fig.update_yaxes(tickmode="array", tickvals=list(range(n_rows)),
                     ticktext=[f"<b>▸ {l}</b>" if l == layer else str(l) for l in range(n_rows)], row=row, col=1)


@figure(click="position", label="distances between planes", applies=is_grassmann, controls=("layer", "slot"), explain=Explanation(
    r"d_g(U_{t-1}, U_t) = \sqrt{\theta_1^2 + \theta_2^2}",
    "Geodesic distance between consecutive planes (top) and between a layer's input and output planes (bottom), "
    "radians.",
    "Brighter rows (layers that turn the plane more) and positions that stand out in a row; the caption says how "
    "much each row varies.",
    ("Geodesic distance", "Grassmannian"), f"{GR_SRC}"))
def plane_distances(tr: GrassmannTrace, slot: int = 0, offset: int | None = None, cursor: int | None = None,
                    size: int = WINDOW, layer: int | None = None) -> Chart:
    """Two layer x position heatmaps of geodesic distances (radians): top, how far the reduced plane of
    offset slot ``slot`` moved from t - 1 to t within each layer (:func:`position_distances`); bottom, how
    far the residual plane ``span(h_t, h_{t-offset})`` moved from one layer's input to the next
    (:func:`layer_distances`; ``offset`` defaults to the smallest used offset). ``layer``: the row of each
    heatmap outlined, with ``▸`` at its tick (the layer the view's one-layer figures show; the heatmaps draw
    every layer); None, or a model of one layer, outlines none. :class:`FigureError` when ``layer`` is out of range.
    Traces: ``"along positions"`` heatmap, then ``"across layers"`` heatmap (if inputs were recorded)."""
    tr = _gr(tr)
    slot = check_slot(tr, slot)
    if layer is not None:
        layer = check_index("layer", layer, tr.n_layers)
        layer = layer if tr.n_layers > 1 else None  # one layer: nothing to tell apart
    cursor = check_cursor(cursor, tr.n_positions)
    offset = _default_offset(tr) if offset is None else offset
    idx = window(tr.n_positions, cursor, size)
    dpos = position_distances(tr, slot)
    dlay = layer_distances(tr, offset) if tr.inputs is not None else None
    rows = 2 if dlay is not None and len(dlay) else 1
    layer_offs = [_offset(tr, l, slot) for l in range(tr.n_layers)]
    offs = (f"Δ = {layer_offs[0]} in every layer" if len(set(layer_offs)) == 1  # one offset: said once
            else "Δ = " + ", ".join(str(o) for o in layer_offs) + f" in layers 0 to {tr.n_layers - 1}")
    titles = [f"along positions: {DG}(U<sub>t−1</sub>, U<sub>t</sub>)<br>"
              f"offset slot {slot}: planes of pairs (t, t−Δ), {offs}"]
    if rows == 2:
        titles.append(f"across layers: {DG}(H<sub>t</sub><sup>(l)</sup>, H<sub>t</sub><sup>(l+1)</sup>), Δ={offset}")
    fig = FigureBuilder.grid(rows=rows, cols=1, subplot_titles=titles, vertical_spacing=0.18)
    zmax = np.pi / np.sqrt(2)
    _pos_heatmap(fig, dpos[:, idx], idx, tr.labels, 1, 1, "along positions", "along positions", zmax,
                 1 - 0.5 / rows, 1 / rows)
    fig.update_yaxes(title_text="layer", tickmode="linear", dtick=1, row=1, col=1)
    if rows == 2:
        _pos_heatmap(fig, dlay[:, idx], idx, tr.labels, 2, 1, "across layers", "layer l → l+1", zmax, 0.22, 0.45)
        fig.update_yaxes(title_text="layer l (to l+1)", tickmode="linear", dtick=1, row=2, col=1)
    if layer is not None:
        _mark_layer(fig, layer, tr.n_layers, idx, 1)
        if rows == 2:
            _mark_layer(fig, layer, len(dlay), idx, 2)
    for r in range(1, rows + 1):
        fig.update_xaxes(title_text="position t (token)", row=r, col=1, **token_ticks(tr.labels, idx))
        add_cursor_line(fig, cursor, row=r, col=1)
    cap = ("Geodesic distance on the Grassmannian (radians, at most $\\pi/\\sqrt{2} \\approx 2.22$). Top: how far "
           "the plane $U_t = \\mathrm{span}(z_t, z_{t-\\Delta})$ turned from $U_{t-1}$ when token $t$ arrived, per "
           "layer. Bottom: how much a layer turned the plane of its residual vectors "
           "$\\mathrm{span}(h_t, h_{t-\\Delta})$. Blank: no plane (no partner, or a degenerate pair)."
           + (f" Every layer is drawn; the outlined row (▸) is layer {layer}, the one the Layer control picks for "
              "the figures below." if layer is not None else "")
           + spread_note(dpos[:, idx], "layer's top row") + window_note(tr.n_positions, idx) + missing_note(_missing(tr, idx)))
    # the top margin holds the title and, under it, the two-line subtitle of the upper panel
    return finish(fig, "Grassmann plane deformations", cap, "plane_distances", height=300 * rows + 110,
                  margin={"l": 60, "r": 20, "t": 100, "b": 50})


@figure(click="position", label="principal angles", applies=is_grassmann, controls=("layer", "slot"), wide=False, explain=Explanation(
    r"0 \le \theta_1 \le \theta_2 \le \pi/2",
    "The two principal angles between the plane at $t-1$ and at $t$.",
    r"$\theta_1 = 0$: the planes share a line, always for offset $\Delta = 1$ (both hold $z_{t-1}$) and for $r = "
    "3$.",
    ("Principal angles",), f"{GR_SRC}"))
def plane_angles(tr: GrassmannTrace, layer: int = 0, slot: int = 0, cursor: int | None = None,
                 size: int = WINDOW) -> Chart:
    """Principal angles θ1 <= θ2 and geodesic distance ``sqrt(θ1² + θ2²)`` between the reduced planes at
    t - 1 and t of one layer/slot, against position (radians). Traces: θ1, θ2 and the geodesic distance
    :data:`DG`, named in plotly's subscript markup (``θ<sub>1</sub>``)."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    cursor = check_cursor(cursor, tr.n_positions)
    th = consecutive_angles(tr, layer, slot)
    idx = window(tr.n_positions, cursor, size)
    hov = hover_tokens(tr.labels, idx)
    flat = np.isfinite(th[:, 0]).any() and np.nanmax(np.abs(th[:, 0])) < 1e-6  # θ1 = 0: d_g = θ2 throughout
    fig = FigureBuilder()
    for k, (name, y) in enumerate((("θ<sub>1</sub>", th[idx, 0]), ("θ<sub>2</sub>", th[idx, 1]),
                                   (DG, np.linalg.norm(th[idx], axis=-1)))):
        # markers only while they stay apart (an SVG marker per point is most of this chart's draw time);
        # where d_g = θ2 the θ2 line is drawn wide and pale under the dotted d_g, so both stay visible
        wide = flat and k == 1
        fig.add_trace(dict(type="scatter", x=idx, y=y, mode="lines+markers" if len(idx) <= 200 else "lines",
                           marker={"size": 4}, name=name, opacity=0.45 if wide else 1.0,
                           line={"color": colour(k), "dash": "dot" if name == DG else "solid",
                                 "width": 6 if wide else 2},
                           text=hov, hovertemplate=f"position %{{text}}<br>{name} = %{{y:.4f}} rad<extra></extra>"))
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx, 6))  # a half-width chart
    fig.update_yaxes(title_text="angle between planes at t−1 and t (rad)", rangemode="tozero")
    # legend in one row above the plot (at the right it takes half of a half-width chart)
    fig.update_layout(legend={"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}})
    add_cursor_line(fig, cursor)
    D = _offset(tr, layer, slot)
    cap = (f"Principal angles between consecutive planes $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ in layer {layer} "
           "(radians; $\\theta_1 = 0$ means the planes share a line) and their geodesic distance."
           + (" Here $\\theta_1 = 0$ at every position (consecutive planes share a line), so the geodesic "
              "distance equals $\\theta_2$: its dotted line runs along the wide $\\theta_2$ line." if flat else "")
           + _few_planes_note(tr, layer, slot)
           + window_note(tr.n_positions, idx) + missing_note(_missing(tr, idx, layer)))
    return finish(fig, f"Principal angles (layer {layer}, Δ={D})", cap, "plane_angles", height=480,
                  margin={"t": 95}, **COLUMN_HOVER)


@figure(click="row", label="plane similarity", applies=is_grassmann, controls=("layer", "slot"), wide=False, default=False,
        explain=Explanation(
    r"\lvert\langle \hat p_t, \hat p_s \rangle\rvert = \cos\theta_1\cos\theta_2",
    "How alike the planes at two positions are (1 = the same plane).",
    "Bright cells off the diagonal (early layers: a pair of characters that recurs), stripes along it (a position "
    "code), blocks (a phrase).",
    ("Plücker coordinates", "Principal angles"), f"{GR_SRC}"))
def plane_similarity(tr: GrassmannTrace, layer: int = 0, slot: int = 0, cursor: int | None = None,
                     size: int = WINDOW) -> Chart:
    """Position x position map ``|<p̂_t, p̂_s>| = cos θ1 cos θ2`` of the normalised Plücker vectors of one
    layer/slot (Zhang, arXiv 2512.19428): 1 = same plane, 0 = a plane orthogonal in some direction.
    Symmetric, no causal mask; blank where a plane is missing; the window of ``size`` positions around the
    cursor (:func:`~geomlab.figures._sampling.window`). Traces: one heatmap ``"similarity"`` whose category
    labels start with the positions (a click reads its row)."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = window(tr.n_positions, cursor, size)
    p = tr.plucker[layer, slot][idx].astype(np.float64)
    valid = _mask(tr, layer, slot)[idx]
    S = np.abs(p @ p.T)
    S[~valid, :] = np.nan
    S[:, ~valid] = np.nan
    cats = category_labels(tr.labels, idx)
    fig = FigureBuilder([dict(type="heatmap",
        z=S, x=cats, y=cats, colorscale=SEQUENTIAL, zmin=0, zmax=1, name="similarity",
        hoverongaps=False, colorbar={"title": {"text": "|⟨p̂<sub>t</sub>, p̂<sub>s</sub>⟩|"}},
        hovertemplate="t = %{y}<br>s = %{x}<br>|⟨p̂<sub>t</sub>, p̂<sub>s</sub>⟩| = %{z:.4f}<extra></extra>")])
    # constrain="domain": the axes shrink to the square matrix (ticks right under it, no padding)
    fig.update_xaxes(title_text="position s (token)", type="category", nticks=8, showgrid=False,
                     constrain="domain")
    fig.update_yaxes(title_text="position t (token)", type="category", nticks=10, autorange="reversed",
                     scaleanchor="x", scaleratio=1, showgrid=False, constrain="domain")
    no_plane = cursor is not None and not valid[int(np.searchsorted(idx, cursor))]
    if cursor is not None and not no_plane:  # no box around an empty row
        ci = int(np.searchsorted(idx, cursor))
        cursor_box(fig, ci, len(idx) - 0.5)
    D = _offset(tr, layer, slot)
    cap = (f"How alike the planes $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ of layer {layer} are at two positions: "
           "$\\lvert\\langle \\hat p_t, \\hat p_s\\rangle\\rvert = "
           "\\cos\\theta_1 \\cos\\theta_2$ (1 = the same plane). A geometric comparison, not attention weights."
           + _few_planes_note(tr, layer, slot) + missing_note(_missing(tr, idx, layer))
           + (f" Position {cursor} '{md_label(tr.labels[cursor])}' has no plane (no partner {D} back); its row "
              "is empty."
              if no_plane else "")
           + window_note(tr.n_positions, idx))
    return finish(fig, f"Plane similarity (layer {layer}, Δ={D})", cap, "plane_similarity", height=560)


@figure(click="row", label="Plücker coordinates", applies=is_grassmann, controls=("layer", "slot"), wide=False,
        explain=Explanation(
    r"\hat p_{ij}(t),\ 0 \le i < j < r",
    "The normalised Plücker coordinates of the plane at each position; colour = value and sign.",
    "Columns (axis pairs) that dominate; sign flips (the orientation turns).",
    ("Plücker coordinates",), f"{GR_SRC}"))
def plucker_heatmap(tr: GrassmannTrace, layer: int = 0, slot: int = 0, cursor: int | None = None,
                    size: int = WINDOW) -> Chart:
    """The normalised Plücker vectors of one layer/slot as a strip: rows = positions, columns = the
    P = r(r-1)/2 coordinates p_ij (i < j, lexicographic); signed diverging scale in [-1, 1]; blank rows
    where masked; the window of ``size`` positions around the cursor. Traces: one heatmap ``"plucker"`` whose
    row labels start with the positions (a click reads its row)."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = window(tr.n_positions, cursor, size)
    p = tr.plucker[layer, slot][idx].astype(np.float64)
    p[~_mask(tr, layer, slot)[idx]] = np.nan
    r = tr.rank
    I, J = planes.plucker_indices(r)
    names = [f"p{i}{j}" if r <= 10 else f"p{i},{j}" for i, j in zip(I.tolist(), J.tolist())]
    cats = category_labels(tr.labels, idx)
    fig = FigureBuilder([dict(type="heatmap", z=p, x=names, y=cats, colorscale=DIVERGING, zmin=-1, zmax=1, zmid=0,
                                              name="plucker", hoverongaps=False,  # a click reads its row label
                                              colorbar={"title": {"text": "p̂<sub>ij</sub>"}, "thickness": 12},
                                              hovertemplate="position %{y}<br>%{x} = %{z:.4f}<extra></extra>")])
    # thinned ticks (a half-width chart; every coordinate and position named on hover)
    fig.update_xaxes(title_text="Plücker coordinate p<sub>ij</sub> (i < j)", type="category", showgrid=False,
                     **thin_ticks(names))
    fig.update_yaxes(title_text="position t (token)", type="category", nticks=12, autorange="reversed",
                     showgrid=False)
    if cursor is not None:
        add_cursor_line(fig, int(np.searchsorted(idx, cursor)), axis="y")
    D = _offset(tr, layer, slot)
    cap = (f"Normalised Plücker coordinates of $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ in layer {layer}: which pairs "
           f"of the {r} reduced axes the plane at each position uses, and with which orientation (blue/red sign)."
           + _few_planes_note(tr, layer, slot)
           + window_note(tr.n_positions, idx) + missing_note(_missing(tr, idx, layer)))
    return finish(fig, f"Plücker coordinates (layer {layer}, Δ={D})", cap, "plucker_heatmap",
                  height=min(640, 300 + 7 * len(idx)))


@figure(click="position", label="gate share", applies=lambda tr: is_grassmann(tr) and getattr(tr, "gates", None) is not None,
        wide=False, default=False, explain=Explanation(
    r"1 - \bar\alpha_t",
    "Share of each layer's output that comes from the plane branch.",
    "Layers that ignore the planes (near 0) or rely on them.",
    ("Gate",), f"{GR_SRC}"))
def gate_share(tr: GrassmannTrace, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Share of geometry in the gated blend, ``mean_k (1 - alpha_{t,k})`` (Zhang, arXiv 2512.19428), as a
    layer x position heatmap (top) and one line per layer (bottom), in [0, 1].
    Traces: ``"gate share"`` heatmap, then one line per layer ``"layer l"``.
    Raises :class:`FigureError` without recorded gates."""
    tr = _gr(tr)
    if tr.gates is None:
        raise FigureError("this Grassmann trace has no gates")
    cursor = check_cursor(cursor, tr.n_positions)
    share = blank((1.0 - blank(tr.gates.astype(np.float64))).mean(-1))  # a NaN gate blanks its cell only
    idx = window(tr.n_positions, cursor, size)
    hov = hover_tokens(tr.labels, idx)
    fig = FigureBuilder.grid(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1, row_heights=[0.45, 0.55])
    text = np.broadcast_to(np.array(hov), (share.shape[0], len(idx)))
    fig.add_trace(dict(type="heatmap",
        z=share[:, idx], x=idx, y=np.arange(share.shape[0]), colorscale=SEQUENTIAL, zmin=0,
        zmax=1, text=text, name="gate share",
        colorbar={"title": {"text": "1 − α"}, "y": 0.78, "len": 0.45},
        hovertemplate="layer %{y}, position %{text}<br>share of geometry = %{z:.3f}"
            "<extra></extra>"), row=1, col=1)
    cols = index_colours(share.shape[0])  # one colour per layer, never the cursor's
    for layer in range(share.shape[0]):
        fig.add_trace(dict(type="scatter", x=idx, y=share[layer, idx], mode="lines", name=f"layer {layer}",
                                           line={"color": cols[layer]}, text=hov,
                                           hovertemplate=f"layer {layer}<br>position %{{text}}<br>1 − α = %{{y:.3f}}"
                                               "<extra></extra>"), row=2, col=1)
    fig.update_yaxes(title_text="layer", tickmode="linear", dtick=1, row=1, col=1)
    fig.update_yaxes(title_text="mean (1 − α) (fraction)", range=[-0.02, 1.02], row=2, col=1)
    fig.update_xaxes(title_text="position t (token)", row=2, col=1, **token_ticks(tr.labels, idx))
    add_cursor_line(fig, cursor, row=1, col=1)
    add_cursor_line(fig, cursor, row=2, col=1, span=(0, 1))  # the shares' bounds, inside the padded range
    cap = ("How much of each layer's output comes from the Grassmann (plane) branch rather than the "
           "residual: mean over channels of $1 - \\alpha$, per layer and position (0 = gate keeps $h$, 1 = all "
           "geometry)."
           + window_note(tr.n_positions, idx) + missing_note(nonfinite_count(share[:, idx], axis=-1)))
    fig.update_layout(legend={"x": 1.02, "y": 0.5, "yanchor": "top"})
    return finish(fig, "Gate share per layer", cap, "gate_share", height=560, **COLUMN_HOVER)
