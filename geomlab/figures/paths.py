"""OSM path figures: how far the state H_t travels on its group (geodesic distance from the identity and
between consecutive states, Nunley, arXiv 2602.18417) and its path through the first principal
components of ``vec(H_t)`` in 2-D and 3-D (quantities of :mod:`geomlab.figures.trajectory`)."""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, Chart, finish
from geomlab.figures._style import (
    COLUMN_HOVER, HIGHLIGHT, SEQUENTIAL, add_cursor_line, colour, hover_tokens, token_ticks,
)
from geomlab.figures._sampling import WINDOW, check_cursor, check_index, window, window_note
from geomlab.figures._spread import spread_note
from geomlab.figures._animation import MORE_FIGURES_3D
from geomlab.figures.catalog import OSM_SRC, Explanation, figure, is_osm
from geomlab.figures.trajectory import _layer_name, _osm, distance_from_identity, pca_coords, step_distances
from geomlab.trace import OSMTrace


@figure(click="position", label="geodesic distances", applies=is_osm, explain=Explanation(
    r"\lVert \log H_t \rVert_F,\qquad \lVert \log(H_{t-1}^* H_t) \rVert_F",
    "Top: geodesic distance of each state from the identity; bottom: how far the state moved when token $t$ "
    "arrived (radians).",
    "Tokens above the rest in the zoomed bottom panel (a trained model turns the state by about the same angle "
    "per token); a top curve that saturates.",
    ("Geodesic distance", "Matrix logarithm"), f"{OSM_SRC}"))
def distance_profile(tr: OSMTrace, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Two panels, one line per layer: geodesic distance from the identity ``||log H_t||_F`` and between
    consecutive states ``dist(H_{t-1}, H_t)`` (radians) against position, over the window of ``size``
    positions around the cursor (:func:`~geomlab.figures._sampling.window`).
    Traces: for each layer l, ``from identity`` then ``step`` (2 per layer, in layer order)."""
    tr = _osm(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = window(tr.n_positions, cursor, size)
    d0 = distance_from_identity(tr, idx)
    d1 = step_distances(tr, idx)
    hov = hover_tokens(tr.labels, idx)
    fig = FigureBuilder.grid(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("distance from the identity", "distance between consecutive states"))
    for layer in range(tr.n_layers):
        name = _layer_name(tr, layer)
        for row, (vals, what) in enumerate(((d0, "‖log H<sub>t</sub>‖"), (d1, "dist(H<sub>t−1</sub>, H<sub>t</sub>)")), start=1):
            fig.add_trace(dict(type="scatter",
                x=idx, y=vals[layer], mode="lines", name=name, legendgroup=name, showlegend=row == 1,
                line={"color": colour(layer)}, text=hov,
                hovertemplate=f"{name}<br>position %{{text}}<br>{what} = %{{y:.3f}} rad<extra></extra>"),
                row=row, col=1)
    fig.update_yaxes(title_text="‖log H<sub>t</sub>‖<sub>F</sub> (rad)", row=1, col=1, rangemode="tozero")
    # the step distances of a trained model vary by a few per cent around a large level: the axis is zoomed
    # to the curve (not from 0, where it would read as a flat line); the caption says so
    fig.update_yaxes(title_text="‖log(H<sub>t−1</sub><sup>*</sup> H<sub>t</sub>)‖<sub>F</sub> (rad)", row=2, col=1,
                     rangemode="normal")
    fig.update_xaxes(title_text="position t (token)", row=2, col=1, **token_ticks(tr.labels, idx))
    for row in (1, 2):
        add_cursor_line(fig, cursor, row=row, col=1)
    cap = ("Top: how far each state $H_t$ is from the identity along the group (geodesic length, radians). "
           "Bottom: how far the state moved when token $t$ arrived (axis zoomed to the curve, not from 0)."
           + spread_note(d1, "step curve") + window_note(tr.n_positions, idx))
    return finish(fig, "Geodesic distances of the state trajectory", cap, "distance_profile", height=560,
                  **COLUMN_HOVER)


def _pca_inputs(tr: OSMTrace, layer: int, cursor: int | None, size: int):
    """The checked trace, layer and cursor of a PCA figure, the PCA coordinates and variance ratios
    (:func:`pca_coords`: fitted on every position, so the axes stay put as the window moves), the drawn
    positions (the window of ``size`` around the cursor) and their hover labels. Raises :class:`FigureError` for a trace without states or an index out of range."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    coords, ratio = pca_coords(tr, layer)
    idx = window(tr.n_positions, cursor, size)
    return tr, layer, cursor, coords, ratio, idx, hover_tokens(tr.labels, idx)


@figure(click="position", label="2-D PCA of the path", applies=is_osm, controls=("layer",), wide=False, explain=Explanation(
    r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2})",
    "The path of the states projected on their first two principal components (the axis titles give the share of "
    "variance each keeps); the last steps into the cursor are drawn darker.",
    "Loops (the state comes back), drifts, clusters of similar states; if the two axes keep little variance, the "
    "path is higher-dimensional than this picture.",
    ("PCA",), "design choice"))
def pca_projection(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   size: int = WINDOW) -> Chart:
    """2-D PCA of ``vec(H_t)`` (the first two components of :func:`pca_coords`): the path through the
    positions, coloured by position (colour bar), tokens on hover, the cursor as a large ring. The axis
    titles give each component's share of the variance (a 2-D projection by default, the 3-D one
    optional). The components are fitted on every position and the window of ``size`` positions around the
    cursor drawn, colour = position over the window. Traces: 0 = path (line), 1 = markers (both with
    ``customdata`` = position); with a cursor, layout shapes: the last 8 steps into it (a darker path) and
    the cursor (a ring named ``cursor <position> '<token>'``; not in the legend, whose redraw on every cursor
    move cost more than the rest of the move: the caption names it)."""
    tr, layer, cursor, coords, ratio, idx, hov = _pca_inputs(tr, layer, cursor, size)
    # the path as one light SVG line through every drawn position, markers coloured by position at each of
    # them (at most WINDOW SVG markers, the costly part of a redraw; no WebGL in a default set, see angle_lines)
    midx = idx
    data = [dict(type="scatter", x=coords[idx, 0], y=coords[idx, 1], mode="lines", name="path", showlegend=False,
                 line={"color": "rgba(120,120,120,0.22)", "width": 1}, text=hov, customdata=idx,
                 hovertemplate="position %{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>"),
            dict(type="scatter", x=coords[midx, 0], y=coords[midx, 1], mode="markers", name="trajectory",
                 showlegend=False,
                 marker={"size": 6, "color": midx, "colorscale": SEQUENTIAL, "cmin": int(idx[0]),
                         "cmax": max(int(idx[-1]), int(idx[0]) + 1),
                         "colorbar": {"title": {"text": "position", "side": "right"}, "thickness": 12, "len": 0.8,
                                      "tickfont": {"size": 11}}},
                 text=hover_tokens(tr.labels, midx), customdata=midx,
                 hovertemplate="position %{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>")]
    shapes = []
    if cursor is not None:
        # the last steps into the cursor, darker (where the state came from: the whole path is a light tangle),
        # and the cursor as a ring: layout shapes, so a cursor move within the window keeps the traces and the
        # browser only moves the marks (their points keep their hover in the markers trace)
        recent = np.arange(max(0, cursor - 8), cursor + 1)
        steps = " L ".join(f"{x:.7g},{y:.7g}" for x, y in coords[recent, :2])
        shapes.append(dict(type="path", path=f"M {steps}", xref="x", yref="y", name="last steps",
                           line={"color": "rgba(60,60,60,0.8)", "width": 1.5}))
        shapes.append(dict(type="circle", xref="x", yref="y", xsizemode="pixel", ysizemode="pixel",
                           xanchor=float(coords[cursor, 0]), yanchor=float(coords[cursor, 1]), x0=-7, x1=7, y0=-7,
                           y1=7, line={"width": 3, "color": HIGHLIGHT}, name=f"cursor {cursor} '{tr.labels[cursor]}'",
                           showlegend=False))
    fig = FigureBuilder(data=data)
    if shapes:
        fig.update_layout(shapes=shapes)
    # one unit is as long on PC1 as on PC2 (the spread along each is its variance; unequal scales would
    # misstate it), the plot area shrinking to fit rather than the ranges growing
    fig.update_xaxes(title_text=f"PC1 ({ratio[0]:.1%} of variance)", nticks=6, zeroline=False, constrain="domain")
    fig.update_yaxes(title_text=f"PC2 ({ratio[1]:.1%} of variance)", nticks=6, zeroline=False, scaleanchor="x",
                     scaleratio=1, constrain="domain")
    shares = ", ".join(f"PC{k + 1} {ratio[k]:.1%}" for k in range(2))  # one decimal: the parts add up
    cap = (f"The states $H_t$ ({_layer_name(tr, layer)}) as points $\\mathrm{{vec}}(H_t)$ projected on their first two "
           f"principal components ({shares} of the variance, together {ratio[:2].sum():.1%}; unitless); "
           "colour = position" + ("; the orange ring is the cursor, the dark line its last 8 steps." if cursor is not None
                                  else ".") + MORE_FIGURES_3D + window_note(tr.n_positions, idx))
    return finish(fig, "State trajectory (2-D PCA)", cap,
                  "pca_projection", height=480, margin={"l": 60, "r": 10, "t": 80, "b": 50})


@figure(click="position", label="3-D PCA path", applies=is_osm, controls=("layer",), wide=False, default=False, explain=Explanation(
    r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2}, c_{t,3})",
    "The path of the states through their first three principal components; colour is the position.",
    "Loops (the state returns), drifts, and how much variance the picture keeps (if it is low, the path is really "
    "higher-dimensional).",
    ("PCA",), "design choice"))
def pca_trajectory(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   size: int = WINDOW) -> Chart:
    """3-D PCA of ``vec(H_t)`` (scikit-learn) as a line through the positions, tokens on hover, coloured
    by position; the cursor position is a large marker. Fitted on every position, the window of ``size``
    positions around the cursor drawn. Traces: 0 = path (``customdata`` = position), 1 = cursor (if
    given)."""
    tr, layer, cursor, coords, ratio, idx, hov = _pca_inputs(tr, layer, cursor, size)
    pcs = [f"PC{k + 1} ({ratio[k]:.0%})" for k in range(3)]
    data = [dict(type="scatter3d",
        x=coords[idx, 0], y=coords[idx, 1], z=coords[idx, 2], mode="lines+markers", name="trajectory",
        marker={"size": 3, "color": idx, "colorscale": SEQUENTIAL,
                "colorbar": {"title": {"text": "position", "side": "right"}, "thickness": 12, "len": 0.75}},
        line={"color": "#888", "width": 2}, text=hov, customdata=idx,
        hovertemplate=(f"position %{{text}}<br>{pcs[0]} %{{x:.3f}}<br>{pcs[1]} %{{y:.3f}}<br>{pcs[2]} %{{z:.3f}}"
                       "<extra></extra>"))]
    if cursor is not None:
        data.append(dict(type="scatter3d",
            x=coords[[cursor], 0], y=coords[[cursor], 1], z=coords[[cursor], 2], mode="markers",
            name="cursor", meta="cursor", marker={"size": 8, "color": HIGHLIGHT},
            text=hover_tokens(tr.labels, [cursor]),
            hovertemplate="cursor: position %{text}<extra></extra>"))
    fig = FigureBuilder(data=data)
    # bare axis titles (PC1..PC3; the variance shares go in the title, caption and hover), few small ticks
    # and the camera pulled back, so that at half width no title is clipped or sits on the tick labels
    axis = {"nticks": 4, "tickfont": {"size": 11}, "title": {"font": {"size": 12}}}
    fig.update_layout(scene={
        "xaxis": {**axis, "title": {**axis["title"], "text": "PC1"}},
        "yaxis": {**axis, "title": {**axis["title"], "text": "PC2"}},
        "zaxis": {**axis, "title": {**axis["title"], "text": "PC3"}},
        # eye pulled back and the view centre shifted so the PC3 title on the left vertical edge and the PC1
        # title at the right corner both stay inside the scene at half width (checked in a 440 px figure)
        "camera": {"eye": {"x": 2.2, "y": 2.2, "z": 1.5}, "center": {"x": 0.12, "y": -0.12, "z": 0.0}},
        "domain": {"x": [0.0, 0.9], "y": [0.0, 1.0]},
    }, legend={"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom"})
    shares = ", ".join(f"PC{k + 1} {ratio[k]:.1%}" for k in range(3))
    cap = (f"The states $H_t$ ({_layer_name(tr, layer)}) as points $\\mathrm{{vec}}(H_t)$ projected on their first "
           f"three principal components ({shares} of the variance, together {ratio.sum():.1%}; unitless); "
           "colour = position." + window_note(tr.n_positions, idx))
    return finish(fig, f"State trajectory, 3-D PCA<br><sup>variance: {shares}</sup>", cap, "pca_trajectory",
                  height=560, margin={"l": 10, "r": 10, "t": 70, "b": 10})
