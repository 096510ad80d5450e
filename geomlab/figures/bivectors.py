"""Grassmann figures of the plane as a bivector (Zhang, arXiv 2512.19428): the plane at the cursor
as the antisymmetric matrix ``Â = bivector(p̂_t)`` beside the axis-pair energy over the text, and the
decomposability κ of the Plücker vectors averaged over a window of positions (1 = one plane). Geometry from
:mod:`geomlab.geometry.planes`; planes, masks and offsets read as in :mod:`geomlab.figures.grassmann`."""

from __future__ import annotations

import numpy as np
import torch

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import DIVERGING, SEQUENTIAL, add_cursor_line, hover_tokens, token_ticks
from geomlab.figures._sampling import (
    WINDOW, blank, check_cursor, check_index, missing_note, window as shown_window, window_note,
)
from geomlab.figures.catalog import GR_SRC, Explanation, figure, is_grassmann
from geomlab.figures.grassmann import _gr, _mask, _missing, _offset, check_slot
from geomlab.geometry import planes
from geomlab.trace import GrassmannTrace


@figure(click="position", label="decomposability of plane averages", applies=is_grassmann, wide=False, default=False,
        explain=Explanation(
    r"\kappa_t = \lambda_1^2 / \textstyle\sum_k \lambda_k^2",
    "Whether the planes of the last few positions average to a single plane (1) or a blend (lower).",
    "Drops where the layer's planes turn as the text goes on.",
    ("Decomposability",), f"{GR_SRC}"))
def decomposability_map(tr: GrassmannTrace, cursor: int | None = None, window: int = 8,
                        size: int = WINDOW) -> Chart:
    """Decomposability ratio κ (``planes.decomposability``; Zhang, arXiv 2512.19428) of the bivector
    averaged over a causal window of positions, per layer and position: 1 = the window's planes agree on one
    plane, lower = a blend of planes.

    Design choice: the per-position offset average that a layer feeds forward is always a single plane
    (every pair plane at position t contains z_t, so the mean is z_t ∧ Σ c_k z_{t-k} and κ ≡ 1), so the view
    averages the normalised Plücker vectors of every used slot over positions ``max(0, t-window+1)..t``.
    ``window`` >= 1 (``FigureError`` otherwise); ``window=1`` shows the (trivial) per-position κ.
    ``size``: the window of consecutive positions around the cursor drawn
    (:func:`~geomlab.figures._sampling.window`). Traces: one heatmap ``"kappa"`` of shape ``[layer, position]``."""
    tr = _gr(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    if int(window) < 1:
        raise FigureError(f"window must be at least 1, got {window}")
    window = int(window)
    m = np.stack([[_mask(tr, l, k) for k in range(tr.plucker.shape[1])] for l in range(tr.n_layers)])
    # masked (incl. non-finite) vectors are zeroed, not multiplied by 0 (NaN * 0 = NaN would poison the cumsum)
    summed = np.where(m[..., None], blank(tr.plucker.astype(np.float64)), 0.0).sum(1)  # [layer, position, P]
    counts = m.sum(1).astype(np.float64)                                   # [layer, position]
    csum = np.cumsum(summed, axis=1)
    ccnt = np.cumsum(counts, axis=1)
    lag_sum = np.concatenate([np.zeros_like(csum[:, :window]), csum[:, :-window]], axis=1)[:, :csum.shape[1]]
    lag_cnt = np.concatenate([np.zeros_like(ccnt[:, :window]), ccnt[:, :-window]], axis=1)[:, :ccnt.shape[1]]
    pm = (csum - lag_sum) / np.maximum(ccnt - lag_cnt, 1)[..., None]
    idx = shown_window(tr.n_positions, cursor, size)
    kappa = planes.decomposability(torch.as_tensor(pm[:, idx]), tr.rank).numpy()  # only where drawn
    text = np.broadcast_to(np.array(hover_tokens(tr.labels, idx)), (kappa.shape[0], len(idx)))
    fig = FigureBuilder([dict(type="heatmap",
        z=kappa, x=idx, y=np.arange(kappa.shape[0]), colorscale=SEQUENTIAL,
        zmin=0, zmax=1, text=text, name="kappa", hoverongaps=False,
        colorbar={"title": {"text": "κ"}},
        hovertemplate="layer %{y}, position %{text}<br>κ = %{z:.3f}<extra></extra>")])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    fig.update_yaxes(title_text="layer", tickmode="linear", dtick=1)
    add_cursor_line(fig, cursor)
    cap = (f"Decomposability $\\kappa$ (dimensionless) of the Plücker vectors averaged over the last {window} "
           "positions and the layer's offsets: 1 = these planes agree on a single plane, lower = the layer's planes "
           "turn as the text goes on (minimum $1/\\lfloor r/2 \\rfloor$). The average over offsets at one position "
           "is always a single plane, because every pair plane at $t$ contains $z_t$; so is the first position "
           "with a plane in each row (an average of one)." + window_note(tr.n_positions, idx)
           + missing_note(_missing(tr, idx)))
    return finish(fig, f"Decomposability of the plane average over {window} positions", cap,
                  "decomposability_map")


@figure(label="plane matrix and axis usage", applies=is_grassmann, controls=("layer", "slot"), default=False,
        explain=Explanation(
    r"\hat A = (a b^\top - b a^\top)/\lVert a \wedge b \rVert",
    r"$\hat A$: the plane at the cursor as an antisymmetric matrix; axis-pair energy: how much each axis pair is "
    "used over the text.",
    "A few bright axis pairs: the layer works in a small subspace.",
    ("Plücker coordinates",), f"{GR_SRC}"))
def plane_matrix(tr: GrassmannTrace, layer: int = 0, slot: int = 0, cursor: int | None = None) -> Chart:
    """Left: the oriented-plane matrix ``Â = bivector(p̂_t)`` (r x r, antisymmetric, ``||Â||_F = √2``) of
    the plane at ``cursor`` (default: the first position with a plane), signed diverging scale in [-1, 1];
    right: the coordinate energy ``E_ij = mean_t p̂_ij²`` over the positions with a plane (which axis pairs
    the layer uses; ``planes.coordinate_energy``). Zhang, arXiv 2512.19428. Traces: ``"plane matrix"``,
    ``"coordinate energy"``. Raises :class:`FigureError` when no position has a plane."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    cursor = check_cursor(cursor, tr.n_positions)
    valid = _mask(tr, layer, slot)
    if not valid.any():
        raise FigureError(f"layer {layer}, slot {slot} has no plane at any position")
    t = cursor if cursor is not None and valid[cursor] else int(np.flatnonzero(valid)[0])
    r = tr.rank
    p = torch.as_tensor(tr.plucker[layer, slot], dtype=torch.float64)
    A = planes.bivector(p[t], r).numpy()
    E = planes.coordinate_energy(p[torch.as_tensor(valid)], r).numpy()
    D = _offset(tr, layer, slot)
    spacing = 0.17
    fig = FigureBuilder.grid(rows=1, cols=2, horizontal_spacing=spacing,
                        subplot_titles=(f"Â at {t} '{tr.labels[t]}'", "axis-pair energy E<sub>ij</sub>"))
    width = (1 - spacing) / 2
    ax = np.arange(r)
    # each colour bar just right of its own panel; the right panel shares the left one's axis i (no second
    # set of tick labels or title under the left colour bar)
    fig.add_trace(dict(type="heatmap",
        z=A, x=ax, y=ax, colorscale=DIVERGING, zmid=0, zmin=-1, zmax=1, name="plane matrix",
        meta="cursor" if t == cursor else None,
        colorbar={"title": {"text": "Â<sub>ij</sub>", "side": "right"}, "x": width + 0.012,
        "xanchor": "left", "thickness": 12, "len": 0.8},
        hovertemplate=(f"position {t} '{tr.labels[t]}'<br>Â[%{{y}}, %{{x}}] = %{{z:.4f}}"
             "<extra></extra>")), row=1, col=1)
    fig.add_trace(dict(type="heatmap",
        z=E, x=ax, y=ax, colorscale=SEQUENTIAL, zmin=0, name="coordinate energy",
        colorbar={"title": {"text": "E<sub>ij</sub>", "side": "right"}, "x": 1.012, "xanchor": "left",
        "thickness": 12, "len": 0.8},
        hovertemplate="E[%{y}, %{x}] = %{z:.4f} (mean over positions)<extra></extra>"),
                  row=1, col=2)
    dtick = 1 if r <= 12 else 2 if r <= 24 else None
    fig.update_xaxes(title_text="reduced axis j", dtick=dtick, constrain="domain", constraintoward="right",
                     row=1, col=1)
    fig.update_yaxes(title_text="reduced axis i", dtick=dtick, autorange="reversed", scaleanchor="x",
                     scaleratio=1, constrain="domain", row=1, col=1)
    fig.update_xaxes(title_text="reduced axis j", dtick=dtick, matches="x", constrain="domain",
                     constraintoward="right", row=1, col=2)
    fig.update_yaxes(matches="y", showticklabels=False, scaleanchor="x2", scaleratio=1, constrain="domain",
                     row=1, col=2)
    cap = (f"$\\hat A$: the plane $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ of layer {layer} as an antisymmetric matrix "
           "$(a b^\\top - b a^\\top)/\\lVert a \\wedge b\\rVert$ (dimensionless; sign = orientation). "
           "*Axis-pair energy*: how "
           "much each pair of reduced axes is used on average over the text.")
    # on a phone the app stacks the two maps (side by side the left colour bar sits on the right map's ticks)
    return finish(fig, f"Plane matrix and axis usage (layer {layer}, Δ={D})", cap, "plane_matrix", height=460,
                  meta={"phone": "stack"})
