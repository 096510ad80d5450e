"""OSM trajectory figures: the hidden-state trajectory of an OSM model on its group (app_anchors.md §5; osm.md §2).

Geometry (computed with :mod:`geomlab.geometry.groups`):

* eigenvalue phases of each state H_t (``group.eigen_angles``, radians in (-pi, pi]); conjugation
  invariant, so they mean the same for every subgroup of U(d);
* geodesic distance from the identity ``||log H_t||_F`` and between consecutive states
  ``dist(H_{t-1}, H_t) = ||log(H_{t-1}^* H_t)||_F`` (radians);
* a 2-D and a 3-D PCA (scikit-learn) of ``vec(H_t)`` (real and imaginary parts stacked);
* for 3 x 3 real groups (SO(3), O(3)) the rotating frame: the columns ``H_t e_k``;
* for the torus T^k the angles of the diagonal entries themselves.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import (
    CYCLIC, HIGHLIGHT, SEQUENTIAL, add_cursor_line, colour, hover_tokens, index_colorscale, index_colour_range,
    index_colours, token_ticks,
)
from geomlab.figures._sampling import (
    MAX_FRAMES, MAX_FRAMES_3D, MAX_POINTS, cached, cached_positions, check_cursor, check_index, one_blas_thread,
    subsample, subsample_note,
)
from geomlab.figures._animation import MORE_FIGURES_3D, animated_figure, animation_controls, without_play
from geomlab.figures.catalog import OSM_SRC, Explanation, figure, is_osm
from geomlab.trace import OSMTrace

TWO_PI_TICKS = {"tickmode": "array", "tickvals": [-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi],
                "ticktext": ["−π", "−π/2", "0", "π/2", "π"]}


def _osm(tr) -> OSMTrace:
    if not isinstance(tr, OSMTrace):
        raise FigureError(f"this view needs an OSM trace (osm-rnn, osmformer), got {getattr(tr, 'kind', tr)!r}")
    a = tr.state_data  # the stored form (torus: diagonals), never the expanded matrices
    bad = cached(tr, ("nonfinite",),
                 lambda: np.flatnonzero(~np.isfinite(a).all(axis=tuple(i for i in range(a.ndim) if i != 1))))
    if len(bad):
        raise FigureError(f"the recorded states are not finite (NaN/Inf) from position {int(bad[0])} on; "
                          "the model diverged on this text")
    return tr


def _real3(tr: OSMTrace) -> bool:
    """Whether the states are real 3 x 3 matrices (a rotating frame can be drawn)."""
    return tr.d == 3 and not np.iscomplexobj(tr.state_data)


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
    if tr.diagonal:  # T^d: the eigenvalues are the diagonal entries (what TorusGroup.eigen_angles reads)
        real = np.real(tr.state_data[:0]).dtype
        return cached_positions(tr, ("phases", layer), n, pos,
                                lambda p: np.sort(_diagonal_angles(tr, layer, p), axis=-1).astype(real))
    return cached_positions(tr, ("phases", layer), n, pos,
                            lambda p: tr.get_group().eigen_angles(_torch(tr.states[layer][p])).numpy())


def _diagonal_dist(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """``dist(diag a, diag b)`` (``b`` None: from the identity) for torus diagonals ``(..., d)``: the phases of
    the unit-modulus ``conj(a) b`` (the product in the stored precision, as the matrix product of two diagonal
    matrices), summed in float64 as :meth:`geomlab.geometry.groups.MatrixGroup.dist` does; NaN where an entry is not
    finite. Design choice (no ``d x d`` matrix for the torus at d = 128)."""
    z = (a if b is None else np.conj(a) * b).astype(np.complex128)
    r = np.abs(z)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(r > 0, z / np.where(r > 0, r, 1.0), 1.0)
    f = np.sqrt(np.square(np.angle(z)).sum(-1))
    ok = np.isfinite(a).all(-1) & (True if b is None else np.isfinite(b).all(-1))
    return np.where(ok, f, np.nan)


def distance_from_identity(tr: OSMTrace, positions=None) -> np.ndarray:
    """``[layer, position]`` geodesic distance ``dist(I, H_t) = ||log H_t||_F`` (radians), at ``positions``
    (default: all; cached per position)."""
    tr = _osm(tr)
    n = tr.n_positions
    pos = np.arange(n) if positions is None else np.asarray(positions)
    return cached_positions(tr, ("dist_id",), n, pos, lambda p: _distance_from_identity(tr, p), axis=1)


def _distance_from_identity(tr: OSMTrace, p: np.ndarray) -> np.ndarray:
    if tr.diagonal:
        return _diagonal_dist(tr.state_data[:, p]).astype(np.real(tr.state_data[:0]).dtype)
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
    out = np.full((tr.n_layers, len(p)), np.nan)
    later = p > 0
    if later.any():
        q = p[later]
        if tr.diagonal:
            a = tr.state_data
            out[:, later] = _diagonal_dist(a[:, q - 1], a[:, q]).astype(np.real(a[:0]).dtype)
        else:
            out[:, later] = tr.get_group().dist(_torch(tr.states[:, q - 1]), _torch(tr.states[:, q])).numpy()
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
    """``[position, features]`` float64: ``vec(H_t)`` of ``layer``, real and imaginary parts stacked (torus:
    the diagonal entries only; the others are constant zeros, which the fit drops anyway)."""
    H = tr.state_data[layer].reshape(tr.n_positions, -1)
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


def tracked_phases(tr: OSMTrace, layer: int, positions) -> np.ndarray:
    """``[position, d]`` eigenvalue phases (radians) at ``positions``, with each position's columns
    reordered to continue the previous position's (a minimum-cost assignment on the circular distance,
    ``scipy.optimize.linear_sum_assignment``, once over every position of the layer, cached on the trace), so
    that column k follows one eigenvalue along the text and a
    colour per column reads as one eigenvalue (sorted phases would swap index where an eigenvalue crosses
    ±π). Torus states (diagonal storage): the diagonal entries' own order instead. Design choice; the set of
    phases at each position is unchanged."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    full = cached(tr, ("tracked_phases", layer), lambda: _diagonal_angles(tr, layer) if getattr(tr, "diagonal", False)
                  else _track(state_phases(tr, layer)))
    return full[np.asarray(positions)]


def _diagonal_angles(tr: OSMTrace, layer: int, positions=slice(None)) -> np.ndarray:
    """The eigenvalue phases of diagonal (torus) states in the order of their diagonal entries: each entry is
    an eigenvalue with an identity of its own (the colours then match :func:`torus_angles`' φ_k), no
    assignment needed. In (-π, π] like ``groups.matrix_to_angles``."""
    ang = np.angle(np.asarray(tr.state_data[layer][positions])).astype(np.float64)
    ang[ang <= -np.pi] = np.pi
    return ang


def _track(theta: np.ndarray) -> np.ndarray:
    """``theta [position, d]`` with each row's columns reordered to continue the previous row's."""
    from scipy.optimize import linear_sum_assignment

    theta = np.array(theta, dtype=np.float64)
    if theta.shape[1] < 2 or len(theta) < 2:
        return theta
    for i in range(1, len(theta)):
        prev, cur = theta[i - 1], theta[i]
        if not (np.isfinite(prev).all() and np.isfinite(cur).all()):
            continue
        cost = np.abs(np.angle(np.exp(1j * (prev[:, None] - cur[None, :]))))
        _, col = linear_sum_assignment(cost)
        theta[i] = cur[col]
    return theta


ANGLE_POINTS = 8000
"""Points (angles x positions) the angle-line views draw at most: past it, fewer positions (at least 256), so
26 torus angles stay a light SVG chart (~300 positions) instead of 26 x 1,024 points and 600 KB of JSON per
cursor move (design choice)."""
MAX_ANGLE_LINES = 32
"""Most angles :func:`torus_angles` and :func:`phase_timeline` draw as lines; past it, one heatmap row per
angle (:func:`angle_rows`; design choice)."""


def angle_lines(fig: FigureBuilder, idx: np.ndarray, theta: np.ndarray, hover: list[str], what: str,
                bar_title: str, bar_x: float = 1.02, bar_len: float = 0.8, row: int | None = None,
                col: int | None = None) -> None:
    """Draw angles ``theta [position, k]`` (radians) at positions ``idx`` as one SVG line per column k, in
    the colours of :func:`~geomlab.figures._style.index_colours` (no repeats), broken where an angle wraps
    across ±π; a colour bar (titled ``bar_title``, at ``bar_x``) names the colours instead of a legend of k
    entries. Lines, not WebGL markers: a WebGL chart took about 1 s to (re)draw in headless chromium, k x
    1,024 SVG markers as long. Hover: ``what`` k, the position and the angle. Design choice."""
    k = theta.shape[1]
    cols = index_colours(k)
    for j in range(k):
        y = np.asarray(theta[:, j], dtype=np.float64)
        x = np.asarray(idx, dtype=np.float64)
        jump = np.flatnonzero(np.abs(np.diff(y)) > np.pi) + 1  # a wrap: break the line there
        if len(jump):
            y = np.insert(y, jump, np.nan)
            x = np.insert(x, jump, np.nan)
        text = np.insert(np.array(hover, dtype=object), jump, "") if len(jump) else np.array(hover)
        name = f"{what}<sub>{j + 1}</sub>" if len(what) == 1 else f"{what} {j + 1}"  # φ₁, eigenvalue 1
        fig.add_trace(dict(type="scatter", x=x, y=y, mode="lines", name=name, showlegend=False,
                           line={"color": cols[j], "width": 1.3}, text=text, connectgaps=False,
                           hovertemplate=f"position %{{text}}<br>{name}: %{{y:.3f}} rad<extra></extra>"),
                      row=row, col=col)
    scale, bar = index_colorscale(k, bar_title, x=bar_x, length=bar_len)
    # the colour bar's carrier: k invisible points with the index colours (drawn nowhere, no hover)
    fig.add_trace(dict(type="scatter", x=[None] * k, y=[None] * k, mode="markers", name="colour bar",
                       showlegend=False, hoverinfo="skip",
                       marker={"color": np.arange(k), "colorscale": scale, "colorbar": bar, "showscale": True,
                               **index_colour_range(k)}), row=row, col=col)


def _cursor_meta(trace: dict) -> dict:
    """Mark a trace as the cursor's mark (``meta="cursor"``; the tests find every figure's cursor this way)."""
    trace["meta"] = "cursor"
    return trace


@figure(label="eigenvalues on the circle", applies=is_osm, controls=("layer",), wide=False, explain=Explanation(
    r"\lambda_k(H_t) = e^{i\theta_k}",
    "Each dot is one eigenvalue of the state, on the unit circle at the token cursor; grey dots are the states "
    "before it.",
    "Dots turning together (a common rotation) or separately; jumps at particular tokens.",
    ("Eigenvalue phase",), f"{OSM_SRC} §2.5; design choice"))
def phase_circle(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                 max_frames: int = MAX_FRAMES, animate: bool = False) -> Chart:
    """Eigenvalues ``exp(i theta)`` of H_t at the cursor (default position 0) on the unit circle, one colour
    per eigenvalue (the colours of :func:`phase_timeline`: eigenvalues followed along the text by
    :func:`tracked_phases`), with a faint trail of the eigenvalues at up to 800 / d evenly spaced positions.

    ``animate=True`` adds Plotly frames (Play/Pause and a position slider, in the browser; at most
    ``max_frames``): for a standalone figure; the app's pages have one cursor of their own.
    Traces: 0 = unit circle, 1 = trail, 2 = eigenvalues at the cursor (``meta="cursor"``; frames replace it).
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor.
    """
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    start = cursor if cursor is not None else 0
    idx = subsample(tr.n_positions, MAX_POINTS, start)
    tracked = tracked_phases(tr, layer, idx)
    theta = dict(zip(idx.tolist(), tracked))
    d = tracked.shape[1]
    cols = index_colours(d)
    phi = np.linspace(0, 2 * np.pi, 181)

    def points(t: int) -> dict:
        th = theta[t]
        return _cursor_meta({
            "type": "scatter", "x": np.cos(th), "y": np.sin(th), "mode": "markers",
            "name": f"eigenvalues at {t} '{tr.labels[t]}'",
            "marker": {"size": 12, "color": cols, "line": {"width": 1.5, "color": "#333"}},
            "customdata": np.stack([th, np.arange(1, d + 1)], axis=-1),
            "hovertemplate": (f"position {t} '{tr.labels[t]}'<br>eigenvalue %{{customdata[1]}}: "
                              "θ = %{customdata[0]:.3f} rad<extra></extra>")})

    # the trail: the eigenvalues at up to 800 / d evenly spaced positions (where the spectrum has been), small
    # translucent grey on a light circle so the points that sit on it stay visible; SVG markers, bounded: each
    # one is drawn anew on every cursor move, see angle_lines
    trail_pos = subsample(len(idx), max(2, 800 // max(d, 1)))
    trail_th = tracked[trail_pos]
    trail = {"type": "scatter",
             "x": np.cos(trail_th).reshape(-1), "y": np.sin(trail_th).reshape(-1), "mode": "markers",
             "name": "all positions", "marker": {"size": 6, "color": "#777777", "opacity": 0.3},
             "hoverinfo": "skip", "showlegend": False}
    base = [dict(type="scatter", x=np.cos(phi), y=np.sin(phi), mode="lines", name="unit circle",
                 line={"color": "#d0d0d0", "width": 1}, hoverinfo="skip", showlegend=False), trail, points(start)]
    fidx = subsample(tr.n_positions, max_frames, cursor) if animate else np.array([], dtype=int)
    names = [str(t) for t in fidx.tolist()]
    if animate:
        theta.update(zip(fidx.tolist(), tracked_phases(tr, layer, fidx)))
    fig = animated_figure(base, [{"data": [points(t)], "traces": [2], "name": n}
                                 for t, n in zip(fidx.tolist(), names)])
    if animate:
        fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in fidx.tolist()], names,
                                               int(np.searchsorted(fidx, start))))
    lim = 1.2
    fig.update_xaxes(title_text="Re λ", range=[-lim, lim], zeroline=True, constrain="domain", dtick=0.5)
    fig.update_yaxes(title_text="Im λ", range=[-lim, lim], zeroline=True, scaleanchor="x", scaleratio=1,
                     constrain="domain", dtick=0.5)
    # no legend: the title names the position, the caption the grey trail (a legend row wrapped into the
    # title at half width)
    fig.update_layout(showlegend=False)
    cap = (f"Eigenvalues of the hidden state $H_t$ ({_layer_name(tr, layer)}) on the unit circle; their angles "
           f"(radians) are conjugation-invariant. Press Play or drag the slider to move along the text."
           + subsample_note(tr.n_positions, len(idx), verb="animated"))
    cap = without_play(cap, animate) + " Grey: the eigenvalues at the other positions; one colour per eigenvalue."
    # a short title: at half width a longer one ("of H_t ... (O(5))") is cut at the right edge
    return finish(fig, f"Eigenvalues at {start} '{tr.labels[start]}'",
                  cap, "phase_circle", height=480, margin={"l": 55, "r": 15, "t": 80, "b": 45})


def angle_rows(fig: FigureBuilder, idx: np.ndarray, theta: np.ndarray, hov, symbol: str, bar_title: str,
               row: int | None = None, col: int | None = None, colorbar: dict | None = None) -> None:
    """Angles ``theta`` ``[position, k]`` (radians, in (-pi, pi]) at positions ``idx`` as one heatmap row per
    angle ``k = 1..k`` along the text, on a cyclic colour scale (the two ends of the circle one colour): what
    :func:`torus_angles` and :func:`phase_timeline` draw past :data:`MAX_ANGLE_LINES` angles, where one line
    per angle is a solid tangle. Design choice."""
    k = theta.shape[1]
    bar = {"title": {"text": bar_title, "side": "right"}, "thickness": 12, "tickfont": {"size": 11}, **TWO_PI_TICKS,
           **(colorbar or {})}
    kw = {"row": row, "col": col} if row is not None else {}
    fig.add_trace(dict(type="heatmap", x=idx, y=np.arange(1, k + 1), z=np.asarray(theta).T, zmin=-np.pi,
                       zmax=np.pi, colorscale=CYCLIC, name=symbol, showlegend=False, colorbar=bar,
                       customdata=np.broadcast_to(np.asarray(hov, dtype=object), (k, len(idx))),
                       hovertemplate=f"position %{{customdata}}<br>{symbol}<sub>%{{y}}</sub> = %{{z:.3f}} rad"
                                     "<extra></extra>"), **kw)


def outline_column(fig: FigureBuilder, cursor: int | None, k: int, xref: str = "x", yref: str = "y") -> None:
    """The cursor's column of an :func:`angle_rows` heatmap outlined (a dashed line vanishes in its colours)."""
    if cursor is not None:
        fig.add_shape(type="rect", x0=cursor - 0.5, x1=cursor + 0.5, y0=0.5, y1=k + 0.5, xref=xref, yref=yref,
                      line={"color": HIGHLIGHT, "width": 2}, name="cursor")


@figure(label="eigenvalue phases along the text", applies=is_osm, controls=("layer",), explain=Explanation(
    r"\theta_k(t) = \arg \lambda_k(H_t)",
    r"Every eigenvalue angle of the state against position (radians, wrapped to $(-\pi, \pi]$).",
    "Steady slopes (a constant turn per token) versus steps at particular tokens.",
    ("Eigenvalue phase",), "design choice"))
def phase_timeline(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   max_points: int = MAX_POINTS) -> Chart:
    """Eigenvalue phases (radians) of H_t against position: one line per eigenvalue (followed along the
    text, :func:`tracked_phases`; broken where it wraps across ±π), coloured per eigenvalue with a colour bar
    (:func:`angle_lines`: no colour repeats; at most :data:`ANGLE_POINTS` points in all); past
    :data:`MAX_ANGLE_LINES` eigenvalues one heatmap row each (:func:`angle_rows`).
    Traces: ``eigenvalue k`` lines, then the colour bar's carrier (or the one heatmap).
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    d = tr.d
    idx = subsample(tr.n_positions, min(max_points, max(256, ANGLE_POINTS // max(d, 1))), cursor)
    theta = tracked_phases(tr, layer, idx)
    fig = FigureBuilder()
    if d <= MAX_ANGLE_LINES:
        angle_lines(fig, idx, theta, hover_tokens(tr.labels, idx), "eigenvalue", "eigenvalue k")
        fig.update_yaxes(title_text="eigenvalue phase θ (rad)", range=[-np.pi - 0.1, np.pi + 0.1], **TWO_PI_TICKS)
        add_cursor_line(fig, cursor)
    else:
        angle_rows(fig, idx, theta, hover_tokens(tr.labels, idx), "θ", "θ<sub>k</sub> (rad)")
        fig.update_yaxes(title_text="eigenvalue k", range=[0.5, d + 0.5])
        outline_column(fig, cursor, d)
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    cap = (f"Angles of the {d} eigenvalues of $H_t$ ({_layer_name(tr, layer)}) at every position, in radians"
           + ("." if d <= MAX_ANGLE_LINES else ": one row each, the angle as a colour that wraps around like the "
              "angle.") + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, "Eigenvalue phases along the text", cap, "phase_timeline")


@figure(label="geodesic distances", applies=is_osm, explain=Explanation(
    r"\lVert \log H_t \rVert_F,\qquad \lVert \log(H_{t-1}^* H_t) \rVert_F",
    "Top: geodesic distance of each state from the identity; bottom: how far the state moved when token $t$ "
    "arrived (radians).",
    "Spikes in the bottom panel mark tokens that turn the state a lot; a top curve that saturates means the state "
    "wanders far from the identity.",
    ("Geodesic distance", "Matrix logarithm"), f"{OSM_SRC} §2.2"))
def distance_profile(tr: OSMTrace, cursor: int | None = None, max_points: int = MAX_POINTS) -> Chart:
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


def _pca_inputs(tr: OSMTrace, layer: int, cursor: int | None, max_points: int):
    """The checked trace, layer and cursor of a PCA figure, the PCA coordinates and variance ratios
    (:func:`pca_coords`), the drawn positions (at most ``max_points``, the cursor kept) and their hover
    labels. Raises :class:`FigureError` for a trace without states or an index out of range."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    coords, ratio = pca_coords(tr, layer)
    idx = subsample(tr.n_positions, max_points, cursor)
    return tr, layer, cursor, coords, ratio, idx, hover_tokens(tr.labels, idx)


@figure(label="2-D PCA of the path", applies=is_osm, controls=("layer",), wide=False, explain=Explanation(
    r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2})",
    "The path of the states projected on their first two principal components (the axis titles give the share of "
    "variance each keeps); the last steps into the cursor are drawn darker.",
    "Loops (the state comes back), drifts, clusters of similar states; if the two axes keep little variance, the "
    "path is higher-dimensional than this picture.",
    ("PCA",), "design choice"))
def pca_projection(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   max_points: int = MAX_POINTS) -> Chart:
    """2-D PCA of ``vec(H_t)`` (the first two components of :func:`pca_coords`): the path through the
    positions, coloured by position (colour bar), tokens on hover, the cursor as a large ring. The axis
    titles give each component's share of the variance (a 2-D projection by default, the 3-D one
    optional). Traces: 0 = path (line), 1 = markers (at most 150 positions), then, with a cursor, the last
    8 steps into it (darker line) and the cursor (``meta="cursor"``)."""
    tr, layer, cursor, coords, ratio, idx, hov = _pca_inputs(tr, layer, cursor, max_points)
    # the path as one light SVG line through every drawn position, markers coloured by position at up to 200
    # of them (SVG markers are the costly part of a redraw; no WebGL in a default set, see angle_lines)
    midx = subsample(tr.n_positions, 150, cursor)
    data = [dict(type="scatter", x=coords[idx, 0], y=coords[idx, 1], mode="lines", name="path", showlegend=False,
                 line={"color": "rgba(120,120,120,0.22)", "width": 1}, text=hov,
                 hovertemplate="position %{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>"),
            dict(type="scatter", x=coords[midx, 0], y=coords[midx, 1], mode="markers", name="trajectory",
                 showlegend=False,
                 marker={"size": 6, "color": midx, "colorscale": SEQUENTIAL, "cmin": 0,
                         "cmax": max(tr.n_positions - 1, 1),
                         "colorbar": {"title": {"text": "position", "side": "right"}, "thickness": 12, "len": 0.8,
                                      "tickfont": {"size": 11}}},
                 text=hover_tokens(tr.labels, midx),
                 hovertemplate="position %{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>")]
    if cursor is not None:
        # the last steps into the cursor, darker: where the state came from (the whole path is a light tangle)
        recent = np.arange(max(0, cursor - 8), cursor + 1)
        data.append(dict(type="scatter", x=coords[recent, 0], y=coords[recent, 1], mode="lines", showlegend=False,
                         name="last steps", line={"color": "rgba(60,60,60,0.8)", "width": 1.5},
                         text=hover_tokens(tr.labels, recent),
                         hovertemplate="position %{text}<br>PC1 %{x:.3f}<br>PC2 %{y:.3f}<extra></extra>"))
        data.append(dict(type="scatter", x=coords[[cursor], 0], y=coords[[cursor], 1], mode="markers",
                         name=f"cursor {cursor} '{tr.labels[cursor]}'", meta="cursor",
                         marker={"size": 14, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": HIGHLIGHT}},
                         hovertemplate=f"cursor {cursor} '{tr.labels[cursor]}'<extra></extra>"))
    fig = FigureBuilder(data=data)
    # one unit is as long on PC1 as on PC2 (the spread along each is its variance; unequal scales would
    # misstate it), the plot area shrinking to fit rather than the ranges growing
    fig.update_xaxes(title_text=f"PC1 ({ratio[0]:.1%} of variance)", nticks=6, zeroline=False, constrain="domain")
    fig.update_yaxes(title_text=f"PC2 ({ratio[1]:.1%} of variance)", nticks=6, zeroline=False, scaleanchor="x",
                     scaleratio=1, constrain="domain")
    fig.update_layout(legend={"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}})
    shares = ", ".join(f"PC{k + 1} {ratio[k]:.1%}" for k in range(2))  # one decimal: the parts add up
    cap = (f"The states $H_t$ ({_layer_name(tr, layer)}) as points $\\mathrm{{vec}}(H_t)$ projected on their first two "
           f"principal components ({shares} of the variance, together {ratio[:2].sum():.1%}; unitless); "
           "colour = position." + MORE_FIGURES_3D + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, "State trajectory (2-D PCA)", cap,
                  "pca_projection", height=480, margin={"l": 60, "r": 10, "t": 80, "b": 50})


@figure(label="3-D PCA path", applies=is_osm, controls=("layer",), wide=False, default=False, explain=Explanation(
    r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2}, c_{t,3})",
    "The path of the states through their first three principal components; colour is the position.",
    "Loops (the state returns), drifts, and how much variance the picture keeps (if it is low, the path is really "
    "higher-dimensional).",
    ("PCA",), "design choice"))
def pca_trajectory(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                   max_points: int = MAX_POINTS) -> Chart:
    """3-D PCA of ``vec(H_t)`` (scikit-learn) as a line through the positions, tokens on hover, coloured
    by position; the cursor position is a large marker. Traces: 0 = path, 1 = cursor (if given)."""
    tr, layer, cursor, coords, ratio, idx, hov = _pca_inputs(tr, layer, cursor, max_points)
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
           "colour = position." + subsample_note(tr.n_positions, len(idx)))
    return finish(fig, f"State trajectory, 3-D PCA<br><sup>variance: {shares}</sup>", cap, "pca_trajectory",
                  height=560, margin={"l": 10, "r": 10, "t": 70, "b": 10})


@figure(label="rotating frame (3 x 3)", applies=lambda tr: is_osm(tr) and _real3(tr), controls=("layer",),
        wide=False, default=False, explain=Explanation(
    r"H_t = [\,h_1\ h_2\ h_3\,] \in SO(3)",
    r"The three columns of a $3\times 3$ rotation drawn as arrows: the state is a rotating frame.",
    "How much the frame turns per token and around which axis.",
    ("Special orthogonal group",), "design choice"))
def so3_frame(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
              max_frames: int = MAX_FRAMES_3D, max_points: int = MAX_POINTS, animate: bool = False) -> Chart:
    """For 3 x 3 real states (SO(3), O(3)): the rotating frame ``H_t e_1, H_t e_2, H_t e_3`` at the cursor
    (default position 0) as three arrows from the origin, with the path of each arrow tip over the whole
    text (at most ``max_points`` positions). ``animate=True`` adds Plotly frames over positions (at most
    ``max_frames``; Play and a slider) for a standalone figure; the app's pages move it with their cursor.
    Traces: 0-2 = tip paths, 3-5 = frame axes at the cursor (``meta="cursor"``; animated).
    Raises :class:`FigureError` unless the states are real 3 x 3."""
    tr = _osm(tr)
    if tr.d != 3 or np.iscomplexobj(tr.states):
        raise FigureError(f"the rotating frame needs real 3 x 3 states (SO(3)/O(3)); this trace has "
                          f"{'complex ' if np.iscomplexobj(tr.states) else ''}{tr.d} x {tr.d}")
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    H = tr.states[layer].astype(np.float64)
    idx = subsample(tr.n_positions, max_frames, cursor) if animate else np.array([], dtype=int)
    start = cursor if cursor is not None else 0
    axes = ("e₁", "e₂", "e₃")
    pidx = subsample(tr.n_positions, max_points, cursor)
    hov = hover_tokens(tr.labels, pidx)
    P = H[pidx]
    data = [dict(type="scatter3d",
        x=P[:, 0, k], y=P[:, 1, k], z=P[:, 2, k], mode="lines", name=f"path of H<sub>t</sub> {axes[k]}",
        line={"color": colour(k), "width": 2}, opacity=0.35, text=hov,
        hovertemplate=f"H<sub>t</sub> {axes[k]} at position %{{text}}<extra></extra>")
            for k in range(3)]

    def arrows(t: int) -> list[dict]:
        return [{"type": "scatter3d", "x": [0, H[t, 0, k]], "y": [0, H[t, 1, k]], "z": [0, H[t, 2, k]],
                 "mode": "lines+markers", "name": f"H<sub>t</sub> {axes[k]}", "meta": "cursor",
                 "line": {"color": colour(k), "width": 8},
                 "marker": {"size": [0, 5], "color": colour(k)},
                 "hovertemplate": f"H<sub>t</sub> {axes[k]} at position {t} '{tr.labels[t]}'<extra></extra>"}
                for k in range(3)]

    names = [str(t) for t in idx.tolist()]
    fig = animated_figure(data + arrows(start),
                          [{"data": arrows(t), "traces": [3, 4, 5], "name": n} for t, n in zip(idx.tolist(), names)])
    if animate:
        fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in idx.tolist()], names,
                                               int(np.searchsorted(idx, start))))
    rng = [-1.1, 1.1]
    fig.update_layout(scene={"xaxis": {"title": {"text": "x"}, "range": rng},
                             "yaxis": {"title": {"text": "y"}, "range": rng},
                             "zaxis": {"title": {"text": "z"}, "range": rng}, "aspectmode": "cube",
                             "camera": {"eye": {"x": 1.55, "y": 1.55, "z": 1.1}}})
    cap = ("The state $H_t$ as a rotating frame: its three columns (unit vectors) drawn from the origin, with "
           "the path each one traces over the text. Press Play to watch the frame turn token by token.")
    if animate and len(idx) < tr.n_positions:
        cap += (f" Long text: {len(idx):,} of {tr.n_positions:,} positions animated, the paths through "
                f"{len(pidx):,} (evenly spaced).")
    elif len(pidx) < tr.n_positions:
        cap += subsample_note(tr.n_positions, len(pidx), what="positions on the paths")
    cap = without_play(cap, animate)
    return finish(fig, f"Rotating frame of H<sub>t</sub> at {start} '{tr.labels[start]}' ({_layer_name(tr, layer)})",
                  cap, "so3_frame", height=560, margin={"l": 10, "r": 10, "t": 70, "b": 10})


@figure(label="torus angles",
        applies=lambda tr: is_osm(tr) and (getattr(tr, "group", None) or {}).get("name") == "T", controls=("layer",),
        replaces=("phase_timeline", "phase_circle"), explain=Explanation(
    r"H_t = \mathrm{diag}(e^{i\varphi_{t,1}}, \dots, e^{i\varphi_{t,d}})",
    "On the torus the state is just $d$ angles; *each angle*: every angle along the text; *flat torus*: the first "
    "two as a point on the square torus (edges wrap).",
    "The angles add (the group is abelian), never mixing; how far each moves depends on the token and, through "
    "the pull or attention, on the state.",
    ("Torus", "Abelian"), f"{OSM_SRC} §4.5"))
def torus_angles(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                 max_points: int = MAX_POINTS) -> Chart:
    """For the torus T^k (diagonal unitary states): left, the angle of each diagonal entry against position;
    right, the first two angles as a path on the flat torus [-pi, pi]^2 (equal axes).
    Traces: k angle lines (:func:`angle_lines`, at most :data:`ANGLE_POINTS` points in all) and their colour
    bar's carrier, then the torus points (at most 300 positions), then the cursor marker (if given).
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
    k = ang.shape[1]
    idx = subsample(tr.n_positions, min(max_points, max(256, ANGLE_POINTS // max(k, 1))), cursor)
    hov = hover_tokens(tr.labels, idx)
    # room between the panels for the torus panel's tick labels and its axis title (0.1 put "φ2 (rad)" over
    # its tick labels at a 1,000 px window)
    spacing, widths = 0.14, [0.6, 0.4]
    fig = FigureBuilder.grid(rows=1, cols=2, column_widths=widths, horizontal_spacing=spacing,
                        subplot_titles=("each angle φ<sub>k</sub>", "flat torus (φ<sub>1</sub>, φ<sub>2</sub>)"))
    # one line per angle φ_k, one colour each (no repeats) with a colour bar instead of a legend of
    # k entries (angle_lines: SVG lines, not WebGL markers); both colour bars at the right edge, stacked (one
    # between the panels runs into the torus panel's tick labels at 1,000 px). Past MAX_ANGLE_LINES angles the
    # lines are a tangle (T^128: a solid block): one row per angle instead, the angle as a cyclic colour
    lines = k <= MAX_ANGLE_LINES
    if lines:
        angle_lines(fig, idx, ang[idx], hov, "φ", "angle k", bar_x=1.02, bar_len=0.44, row=1, col=1)
        fig.data[-1]["marker"]["colorbar"].update(y=1.0, yanchor="top")
    else:
        angle_rows(fig, idx, ang[idx], hov, "φ", "φ<sub>k</sub> (rad)", row=1, col=1,
                   colorbar={"x": 1.02, "xanchor": "left", "len": 0.44, "y": 1.0, "yanchor": "top"})
    b = ang[:, 1] if k > 1 else np.zeros(len(ang))
    # coloured by position: a colour bar says so (a legend entry would show one colour for all points)
    # at most 300 evenly spaced positions as SVG markers (the cursor among them)
    tidx = subsample(tr.n_positions, 300, cursor)
    thov = hover_tokens(tr.labels, tidx)
    fig.add_trace(dict(type="scatter", x=ang[tidx, 0], y=b[tidx], mode="markers",
                       name="(φ<sub>1</sub>, φ<sub>2</sub>)", showlegend=False,
                                       marker={"size": 5, "color": tidx, "colorscale": SEQUENTIAL, "cmin": 0,
                                     "cmax": max(tr.n_positions - 1, 1),
                                     "colorbar": {"title": {"text": "position", "side": "right"},
                                                  "x": 1.02, "xanchor": "left", "len": 0.44, "y": 0.0,
                                                  "yanchor": "bottom",
                                                  "thickness": 12, "tickfont": {"size": 11}}},
                                       text=thov,
                                       hovertemplate="position %{text}<br>φ<sub>1</sub> = %{x:.3f} rad, "
                                                     "φ<sub>2</sub> = %{y:.3f} rad<extra></extra>"), row=1, col=2)
    if cursor is not None:
        fig.add_trace(dict(type="scatter", x=[ang[cursor, 0]], y=[b[cursor]], mode="markers", name="cursor",
                           meta="cursor", showlegend=False,
                                           marker={"size": 12, "color": HIGHLIGHT, "symbol": "circle-open",
                                         "line": {"width": 3}},
                                           hovertemplate=f"cursor {cursor} '{tr.labels[cursor]}'<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="position t (token)", row=1, col=1, **token_ticks(tr.labels, idx, 10))
    if lines:
        fig.update_yaxes(title_text="angle φ<sub>k</sub> (rad)", row=1, col=1, range=[-3.3, 3.3], **TWO_PI_TICKS)
    else:
        fig.update_yaxes(title_text="angle k", row=1, col=1, range=[0.5, k + 0.5])
    # the square torus shrinks its domain (not widens its range) where the panel is narrow, so the y axis's
    # title is placed beside the tick labels actually drawn
    fig.update_xaxes(title_text="φ<sub>1</sub> (rad)", row=1, col=2, range=[-3.3, 3.3], constrain="domain",
                     **TWO_PI_TICKS)
    fig.update_yaxes(title_text="φ<sub>2</sub> (rad)", row=1, col=2, range=[-3.3, 3.3], scaleanchor="x2",
                     scaleratio=1, constrain="domain", title_standoff=4, **TWO_PI_TICKS)
    if lines:
        add_cursor_line(fig, cursor, row=1, col=1)
    else:
        outline_column(fig, cursor, k)
    # no legend: its one entry (the cursor ring) sat on the torus's top gridline, over any point there; the
    # caption names the ring
    fig.update_layout(showlegend=False)
    # the panels are named by their titles, not "left"/"right": a phone stacks them
    cap = ("On the torus each state is a list of independent angles (diagonal entries $e^{i\\varphi_k}$). "
           "*Each angle*: every angle along the text" + ("" if lines else f" ({k} angles: one row each, the angle "
                                                          "as a colour that wraps around like the angle)")
           + "; *flat torus*: the first two as a point on the square torus (edges wrap), coloured by position "
             "(colour bar)"
           + ("; the orange ring is the cursor." if cursor is not None else ".")
           + subsample_note(tr.n_positions, len(idx)))
    # meta "phone": "stack": on a phone the app stacks the panels (side by side the square torus is ~130 px
    # wide and its axis title runs over the heatmap; the two share no axis title, app_pages/_widgets.stacked)
    return finish(fig, f"Torus angles ({_layer_name(tr, layer)})", cap, "torus_angles", height=480,
                  meta={"phone": "stack"})
