"""View 1: the hidden-state trajectory of an OSM model on its group (app_anchors.md §5; osm.md §2).

Geometry (computed with :mod:`geomlab.groups`):

* eigenvalue phases of each state H_t (``group.eigen_angles``, radians in (-pi, pi]); conjugation
  invariant, so they mean the same for every subgroup of U(d);
* geodesic distance from the identity ``||log H_t||_F`` and between consecutive states
  ``dist(H_{t-1}, H_t) = ||log(H_{t-1}^* H_t)||_F`` (radians);
* a 3-D PCA (scikit-learn) of ``vec(H_t)`` (real and imaginary parts stacked);
* for 3 x 3 real groups (SO(3), O(3)) the rotating frame: the columns ``H_t e_k``;
* for the torus T^k the angles of the diagonal entries themselves.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._common import (
    HIGHLIGHT, MAX_FRAMES, MAX_FRAMES_3D, MAX_POINTS, SEQUENTIAL, FigureBuilder, FigureError, View, add_cursor_line,
    animated_figure, animation_controls, cached, cached_positions, check_cursor, check_index, colour, finish,
    hover_tokens, one_blas_thread, subsample, subsample_note, token_ticks,
)
from geomlab.trace import OSMTrace

TWO_PI_TICKS = {"tickmode": "array", "tickvals": [-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi],
                "ticktext": ["−π", "−π/2", "0", "π/2", "π"]}


def _osm(tr) -> OSMTrace:
    if not isinstance(tr, OSMTrace):
        raise FigureError(f"this view needs an OSM trace (osm-rnn, osmformer), got {getattr(tr, 'kind', tr)!r}")
    bad = cached(tr, ("nonfinite",), lambda: np.flatnonzero(~np.isfinite(tr.states).all(axis=(0, 2, 3))))
    if len(bad):
        raise FigureError(f"the recorded states are not finite (NaN/Inf) from position {int(bad[0])} on; "
                          "the model diverged on this text")
    return tr


def _torch(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def state_phases(tr: OSMTrace, layer: int = -1, positions=None) -> np.ndarray:
    """``[position, d]`` sorted eigenvalue phases (radians) of the states of ``layer``
    (``group.eigen_angles``), at ``positions`` (default: all; computed once per position and cached).
    Raises :class:`FigureError` for a non-OSM trace or a bad layer."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    n = tr.n_positions
    pos = np.arange(n) if positions is None else np.asarray(positions)
    return cached_positions(tr, ("phases", layer), n, pos,
                            lambda p: tr.get_group().eigen_angles(_torch(tr.states[layer][p])).numpy())


def distance_from_identity(tr: OSMTrace, positions=None) -> np.ndarray:
    """``[layer, position]`` geodesic distance ``dist(I, H_t) = ||log H_t||_F`` (radians), at ``positions``
    (default: all; cached per position)."""
    tr = _osm(tr)
    n = tr.n_positions
    pos = np.arange(n) if positions is None else np.asarray(positions)
    return cached_positions(tr, ("dist_id",), n, pos, lambda p: _distance_from_identity(tr, p), axis=1)


def _distance_from_identity(tr: OSMTrace, p: np.ndarray) -> np.ndarray:
    group = tr.get_group()
    H = _torch(tr.states[:, p])
    eye = group.identity(*H.shape[:-2]).to(H.dtype)
    return group.dist(eye, H).numpy()


def step_distances(tr: OSMTrace, positions=None) -> np.ndarray:
    """``[layer, position]`` geodesic distance between consecutive states ``dist(H_{t-1}, H_t)``
    (radians); NaN at t = 0. At ``positions`` (default: all; cached per position)."""
    tr = _osm(tr)
    n = tr.n_positions
    pos = np.arange(n) if positions is None else np.asarray(positions)
    return cached_positions(tr, ("dist_step",), n, pos, lambda p: _step_distances(tr, p), axis=1)


def _step_distances(tr: OSMTrace, p: np.ndarray) -> np.ndarray:
    group = tr.get_group()
    out = np.full((tr.states.shape[0], len(p)), np.nan)
    later = p > 0
    if later.any():
        q = p[later]
        out[:, later] = group.dist(_torch(tr.states[:, q - 1]), _torch(tr.states[:, q])).numpy()
    return out


PCA_SOLVER = "covariance_eigh"
"""scikit-learn's PCA solver for :func:`pca_coords`. ``"covariance_eigh"`` (eigenvectors of the
features x features covariance, 2 d^2 <= 2,048 features here) gives the full SVD's projection to ~1e-14 and
was the fastest on every bundled model at 2,048 positions (1-18 ms vs 4-90 ms for ``"full"``, 5-20 ms for
``"randomized"``); ``"randomized"`` (``random_state=0``) is as fast but differs from the full SVD by up to
5e-4 of the range on the bundled models and by several percent where the 3rd and 4th components have
nearly equal variance (tests/test_figures.py). The seconds of the old full SVD came mostly from the
constant (always zero) entries of torus states, now dropped before the fit."""


def pca_coords(tr: OSMTrace, layer: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """``([position, 3], [3])``: the first three principal components of ``vec(H_t)`` (real and imaginary
    parts stacked; scikit-learn PCA with :data:`PCA_SOLVER`, centred, fitted on every position) and their
    explained-variance ratios. Components past the data rank are zero."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    return cached(tr, ("pca", layer), lambda: _pca_coords(tr, layer))


def pca_inputs(tr: OSMTrace, layer: int) -> np.ndarray:
    """``[position, features]`` float64: ``vec(H_t)`` of ``layer``, real and imaginary parts stacked."""
    H = tr.states[layer].reshape(tr.n_positions, -1)
    X = np.concatenate([H.real, H.imag], axis=1) if np.iscomplexobj(H) else H
    return X.astype(np.float64)


def _pca_coords(tr: OSMTrace, layer: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.decomposition import PCA

    X = pca_inputs(tr, layer)
    X = X[:, np.ptp(X, axis=0) > 0]  # constant features (e.g. the zero entries of a torus state) carry nothing
    k = min(3, X.shape[0], X.shape[1])
    coords = np.zeros((X.shape[0], 3))
    ratio = np.zeros(3)
    if X.shape[0] >= 2 and k >= 1:
        pca = PCA(n_components=k, svd_solver=PCA_SOLVER, **({"random_state": 0} if PCA_SOLVER == "randomized" else {}))
        with one_blas_thread():
            coords[:, :k] = pca.fit_transform(X)
        ratio[:k] = pca.explained_variance_ratio_
    return coords, ratio


def _layer_name(tr: OSMTrace, layer: int) -> str:
    return "state" if tr.n_layers == 1 else f"layer {layer}"


def phase_circle(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                 max_frames: int = MAX_FRAMES) -> View:
    """Eigenvalues ``exp(i theta)`` of H_t on the unit circle, animated over positions (Play/Pause and a
    position slider run in the browser through Plotly frames). Opens at ``cursor`` (default position 0).

    Traces: 0 = unit circle, 1 = eigenvalues of the shown position (its frames replace trace 1).
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor.
    """
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = subsample(tr.n_positions, max_frames, cursor)
    start = cursor if cursor is not None else 0
    theta = dict(zip(idx.tolist(), state_phases(tr, layer, idx)))  # idx holds the start (0 or the cursor)
    phi = np.linspace(0, 2 * np.pi, 181)

    def points(t: int) -> dict:
        th = theta[t]
        return {"type": "scatter", "x": np.cos(th), "y": np.sin(th), "mode": "markers", "name": "eigenvalues",
                "marker": {"size": 11, "color": HIGHLIGHT, "line": {"width": 1, "color": "white"}},
                "customdata": th,
                "hovertemplate": f"position {t} '{tr.labels[t]}'<br>θ = %{{customdata:.3f}} rad<extra></extra>"}

    names = [str(t) for t in idx.tolist()]
    fig = animated_figure(
        [dict(type="scatter", x=np.cos(phi), y=np.sin(phi), mode="lines", name="unit circle",
                              line={"color": "#888", "width": 1}, hoverinfo="skip"), points(start)],
        [{"data": [points(t)], "traces": [1], "name": n} for t, n in zip(idx.tolist(), names)])
    active = int(np.searchsorted(idx, start))
    fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in idx.tolist()], names, active))
    lim = 1.25
    fig.update_xaxes(title_text="Re λ", range=[-lim, lim], zeroline=True, constrain="domain")
    fig.update_yaxes(title_text="Im λ", range=[-lim, lim], zeroline=True, scaleanchor="x", scaleratio=1,
                     constrain="domain")
    # legend in the empty top-right corner (not beside the plot), so the round circle keeps the width at
    # half-page size
    fig.update_layout(legend={"x": 1.0, "xanchor": "right", "y": 1.0, "yanchor": "top",
                              "bgcolor": "rgba(255,255,255,0.7)"})
    cap = (f"Eigenvalues of the hidden state $H_t$ ({_layer_name(tr, layer)}) on the unit circle; their angles "
           f"(radians) are conjugation-invariant. Press Play or drag the slider to move along the text."
           + subsample_note(tr.n_positions, len(idx), verb="animated"))
    return finish(fig, f"Eigenvalue phases of H_t ({tr.group.get('name', '?')}({tr.d}))", cap,
                  "phase_circle", height=560)


def phase_timeline(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   max_points: int = MAX_POINTS) -> View:
    """Eigenvalue phases (radians) of H_t against position: one marker per eigenvalue, one trace.
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = subsample(tr.n_positions, max_points, cursor)
    theta = state_phases(tr, layer, idx)
    d = theta.shape[1]
    x = np.repeat(idx, d)
    y = theta.reshape(-1)
    text = np.repeat(np.array(hover_tokens(tr.labels, idx)), d)
    fig = FigureBuilder([dict(type="scattergl",
        x=x, y=y, mode="markers", name="eigenvalue phase", marker={"size": 4, "color": colour(0)},
        text=text, hovertemplate="position %{text}<br>θ = %{y:.3f} rad<extra></extra>")])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    fig.update_yaxes(title_text="eigenvalue phase θ (rad)", range=[-np.pi - 0.1, np.pi + 0.1], **TWO_PI_TICKS)
    add_cursor_line(fig, cursor)
    cap = (f"Angles of the {d} eigenvalues of $H_t$ ({_layer_name(tr, layer)}) at every position, in radians."
           + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, "Eigenvalue phases along the text", cap, "phase_timeline")


def distance_profile(tr: OSMTrace, cursor: int | None = None, max_points: int = MAX_POINTS) -> View:
    """Two panels, one line per layer: geodesic distance from the identity ``||log H_t||_F`` and between
    consecutive states ``dist(H_{t-1}, H_t)`` (radians) against position.
    Traces: for each layer l, ``from identity`` then ``step`` (2 per layer, in layer order)."""
    tr = _osm(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    idx = subsample(tr.n_positions, max_points, cursor)
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
    fig.update_yaxes(title_text="‖log(H<sub>t−1</sub><sup>*</sup> H<sub>t</sub>)‖<sub>F</sub> (rad)", row=2, col=1, rangemode="tozero")
    fig.update_xaxes(title_text="position t (token)", row=2, col=1, **token_ticks(tr.labels, idx))
    for row in (1, 2):
        add_cursor_line(fig, cursor, row=row, col=1)
    cap = ("Top: how far each state $H_t$ is from the identity along the group (geodesic length, radians). "
           "Bottom: how far the state moved when token $t$ arrived." + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, "Geodesic distances of the state trajectory", cap, "distance_profile", height=560)


def pca_trajectory(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   max_points: int = MAX_POINTS) -> View:
    """3-D PCA of ``vec(H_t)`` (scikit-learn) as a line through the positions, tokens on hover, coloured
    by position; the cursor position is a large marker. Traces: 0 = path, 1 = cursor (if given)."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    coords, ratio = pca_coords(tr, layer)
    idx = subsample(tr.n_positions, max_points, cursor)
    hov = hover_tokens(tr.labels, idx)
    pcs = [f"PC{k + 1} ({ratio[k]:.0%})" for k in range(3)]
    data = [dict(type="scatter3d",
        x=coords[idx, 0], y=coords[idx, 1], z=coords[idx, 2], mode="lines+markers", name="trajectory",
        marker={"size": 3, "color": idx, "colorscale": SEQUENTIAL,
                "colorbar": {"title": {"text": "position", "side": "right"}, "thickness": 12, "len": 0.75}},
        line={"color": "#888", "width": 2}, text=hov,
        hovertemplate=(f"position %{{text}}<br>{pcs[0]} %{{x:.3f}}<br>{pcs[1]} %{{y:.3f}}<br>{pcs[2]} %{{z:.3f}}"
                       "<extra></extra>"))]
    if cursor is not None:
        data.append(dict(type="scatter3d",
            x=coords[[cursor], 0], y=coords[[cursor], 1], z=coords[[cursor], 2], mode="markers",
            name="cursor", marker={"size": 8, "color": HIGHLIGHT}, text=hover_tokens(tr.labels, [cursor]),
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
    shares = ", ".join(f"PC{k + 1} {ratio[k]:.0%}" for k in range(3))
    cap = (f"The states $H_t$ ({_layer_name(tr, layer)}) as points $\\mathrm{{vec}}(H_t)$ projected on their first "
           f"three principal components ({shares} of the variance, together {ratio.sum():.0%}; unitless); "
           "colour = position." + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, f"State trajectory, 3-D PCA<br><sup>variance: {shares}</sup>", cap, "pca_trajectory",
                  height=560, margin={"l": 10, "r": 10, "t": 70, "b": 10})


def so3_frame(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
              max_frames: int = MAX_FRAMES_3D, max_points: int = MAX_POINTS) -> View:
    """For 3 x 3 real states (SO(3), O(3)): the rotating frame ``H_t e_1, H_t e_2, H_t e_3`` as three
    arrows from the origin, animated over positions (at most ``max_frames``), with the path of each arrow
    tip over the whole text (at most ``max_points`` positions).
    Traces: 0-2 = tip paths, 3-5 = frame axes of the shown position (animated).
    Raises :class:`FigureError` unless the states are real 3 x 3."""
    tr = _osm(tr)
    if tr.d != 3 or np.iscomplexobj(tr.states):
        raise FigureError(f"the rotating frame needs real 3 x 3 states (SO(3)/O(3)); this trace has "
                          f"{'complex ' if np.iscomplexobj(tr.states) else ''}{tr.d} x {tr.d}")
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    H = tr.states[layer].astype(np.float64)
    idx = subsample(tr.n_positions, max_frames, cursor)
    start = cursor if cursor is not None else 0
    axes = ("e₁", "e₂", "e₃")
    pidx = subsample(tr.n_positions, max_points, cursor)
    hov = hover_tokens(tr.labels, pidx)
    P = H[pidx]
    data = [dict(type="scatter3d",
        x=P[:, 0, k], y=P[:, 1, k], z=P[:, 2, k], mode="lines", name=f"path of H_t {axes[k]}",
        line={"color": colour(k), "width": 2}, opacity=0.35, text=hov,
        hovertemplate=f"H_t {axes[k]} at position %{{text}}<extra></extra>")
            for k in range(3)]

    def arrows(t: int) -> list[dict]:
        return [{"type": "scatter3d", "x": [0, H[t, 0, k]], "y": [0, H[t, 1, k]], "z": [0, H[t, 2, k]],
                 "mode": "lines+markers", "name": f"H_t {axes[k]}", "line": {"color": colour(k), "width": 8},
                 "marker": {"size": [0, 5], "color": colour(k)},
                 "hovertemplate": f"H_t {axes[k]} at position {t} '{tr.labels[t]}'<extra></extra>"}
                for k in range(3)]

    names = [str(t) for t in idx.tolist()]
    fig = animated_figure(data + arrows(start),
                          [{"data": arrows(t), "traces": [3, 4, 5], "name": n} for t, n in zip(idx.tolist(), names)])
    fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in idx.tolist()], names,
                                           int(np.searchsorted(idx, start))))
    rng = [-1.1, 1.1]
    fig.update_layout(scene={"xaxis": {"title": {"text": "x"}, "range": rng},
                             "yaxis": {"title": {"text": "y"}, "range": rng},
                             "zaxis": {"title": {"text": "z"}, "range": rng}, "aspectmode": "cube",
                             "camera": {"eye": {"x": 1.55, "y": 1.55, "z": 1.1}}})
    cap = ("The state $H_t$ as a rotating frame: its three columns (unit vectors) drawn from the origin, with "
           "the path each one traces over the text. Press Play to watch the frame turn token by token.")
    if len(idx) < tr.n_positions:
        cap += (f" Long text: {len(idx):,} of {tr.n_positions:,} positions animated, the paths through "
                f"{len(pidx):,} (evenly spaced).")
    return finish(fig, f"Rotating frame of H_t ({_layer_name(tr, layer)})", cap, "so3_frame", height=600)


def torus_angles(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                 max_points: int = MAX_POINTS) -> View:
    """For the torus T^k (diagonal unitary states): left, the angle of each diagonal entry against position;
    right, the first two angles as a path on the flat torus [-pi, pi]^2 (equal axes).
    Traces: k angle lines, then the torus path, then the cursor marker (if given).
    Raises :class:`FigureError` unless the states are diagonal (group ``T``)."""
    tr = _osm(tr)
    name = str(tr.group.get("name", ""))
    layer = check_index("layer", layer, tr.n_layers)
    if tr.diagonal:  # compact torus storage: the diagonals themselves (no d x d expansion)
        diag = tr.state_data[layer]
    else:
        H = tr.state_data
        off = H - np.einsum("...ii->...i", H)[..., None] * np.eye(tr.d)
        if name != "T" and not (np.iscomplexobj(H) and np.abs(off).max() < 1e-5):
            raise FigureError(f"torus angles need diagonal unitary states (group T); this trace is on {name or '?'}")
        diag = np.einsum("tii->ti", H[layer])
    cursor = check_cursor(cursor, tr.n_positions)
    ang = np.angle(diag)
    ang[ang <= -np.pi] = np.pi  # one convention, (-pi, pi], as groups.matrix_to_angles (-1 - 0j is +pi)
    idx = subsample(tr.n_positions, max_points, cursor)
    hov = hover_tokens(tr.labels, idx)
    k = ang.shape[1]
    fig = FigureBuilder.grid(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.1,
                        subplot_titles=("angles of the diagonal entries", "first two angles on the flat torus"))
    # many markers (k angles x positions): WebGL, as phase_timeline (an SVG node each took ~1.5 s to draw in
    # chromium for 26 angles x 1,025 positions)
    kind = "scattergl" if k * len(idx) > 4000 else "scatter"
    for j in range(k):
        fig.add_trace(dict(type=kind,
            x=idx, y=ang[idx, j], mode="markers", name=f"φ{j + 1}",
            marker={"size": 4, "color": colour(j)}, text=hov,
            hovertemplate=f"position %{{text}}<br>φ{j + 1} = %{{y:.3f}} rad<extra></extra>"),
                      row=1, col=1)
    b = ang[:, 1] if k > 1 else np.zeros(len(ang))
    # coloured by position: a colour bar says so (a legend entry would show one colour for all points)
    fig.add_trace(dict(type="scatter", x=ang[idx, 0], y=b[idx], mode="markers", name="(φ1, φ2)", showlegend=False,
                                       marker={"size": 5, "color": idx, "colorscale": SEQUENTIAL, "cmin": 0,
                                     "cmax": max(tr.n_positions - 1, 1),
                                     "colorbar": {"title": {"text": "position", "side": "right"},
                                                  "x": 1.01, "xanchor": "left", "len": 0.8,
                                                  "thickness": 12, "tickfont": {"size": 11}}},
                                       text=hov,
                                       hovertemplate="position %{text}<br>φ1 = %{x:.3f} rad, φ2 = %{y:.3f} rad"
                                           "<extra></extra>"), row=1, col=2)
    if cursor is not None:
        fig.add_trace(dict(type="scatter", x=[ang[cursor, 0]], y=[b[cursor]], mode="markers", name="cursor",
                                           marker={"size": 12, "color": HIGHLIGHT, "symbol": "circle-open",
                                         "line": {"width": 3}},
                                           hovertemplate=f"cursor {cursor} '{tr.labels[cursor]}'<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="position t (token)", row=1, col=1, **token_ticks(tr.labels, idx, 24))
    fig.update_yaxes(title_text="angle φ<sub>k</sub> (rad)", row=1, col=1, range=[-3.3, 3.3], **TWO_PI_TICKS)
    fig.update_xaxes(title_text="φ1 (rad)", row=1, col=2, range=[-3.3, 3.3], **TWO_PI_TICKS)
    fig.update_yaxes(title_text="φ2 (rad)", row=1, col=2, range=[-3.3, 3.3], scaleanchor="x2", scaleratio=1,
                     **TWO_PI_TICKS)
    add_cursor_line(fig, cursor, row=1, col=1)
    # legend (φ_k colours, cursor) in one row at the top right, above the subplot titles: the colour bar
    # takes the right edge and the rotated token ticks the bottom
    fig.update_layout(legend={"orientation": "h", "x": 1.0, "xanchor": "right", "y": 1.09, "yanchor": "bottom"})
    cap = ("On the torus each state is a list of independent angles (diagonal entries $e^{i\\varphi_k}$); left: every "
           "angle along the text, right: the first two as a point on the square torus (edges wrap), coloured by position (colour bar)."
           + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, f"Torus angles ({_layer_name(tr, layer)})", cap, "torus_angles", height=480)
