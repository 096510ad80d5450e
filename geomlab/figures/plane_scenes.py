"""The Grassmann figures in 3-D: a plane on the sphere (rank 3) or through a 3-axis window (rank > 3), and the
geodesic between two planes (Zhang, arXiv 2512.19428); with the window geometry they draw (the pole
and great circle of a plane in R^3, the projection of a plane of R^r onto three axes, and the choice of those
axes).

Geometry helpers work on ``torch`` tensors with leading batch axes, like :mod:`geomlab.geometry.planes`, and
raise :class:`~geomlab.geometry.planes.PlaneError` (a ``ValueError``) for inputs of the wrong shape; a
non-finite input gives a NaN coverage in :func:`project3`, and :func:`top_axes` / :func:`pca_axes` (an index
or a basis fitted to all rows) raise :class:`~geomlab.geometry.planes.PlaneError` instead.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

from geomlab.core.extras import require
from geomlab.geometry import planes
from geomlab.geometry.planes import PlaneError, _finite_items, _nan_where, _t, plane_basis, plucker
from geomlab.figures._chart import Chart, FigureBuilder, FigureError, finish
from geomlab.figures._style import HIGHLIGHT, colour
from geomlab.figures._sampling import MAX_FRAMES_3D, check_cursor, check_index, window
from geomlab.figures._animation import animated_figure, animation_controls, without_play
from geomlab.figures.catalog import GR_SRC, Explanation, figure, is_grassmann
from geomlab.figures.grassmann import DG, _gr, _mask, check_slot, plane_bases
from geomlab.trace import GrassmannTrace


# ------------------------------------------------------ window geometry (Zhang, arXiv 2512.19428)
def pole(a, b, eps: float = 1e-12) -> torch.Tensor:
    """Unit normal ``n = (a x b) / ||a x b||`` of the plane span(a, b) in R^3 (Zhang, arXiv 2512.19428); equals
    ``(p_12, -p_02, p_01) / ||p||`` (0-based Plücker indices), the Hodge dual. ``a``, ``b``: ``(..., 3)``;
    returns ``(..., 3)`` (zero vector for a degenerate pair). ``n`` and ``-n`` are the same unoriented
    plane; the sign carries the orientation of (a, b)."""
    a, b = _t(a), _t(b)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise PlaneError(f"pole needs vectors in R^3, got last dimensions {a.shape[-1]} and {b.shape[-1]}")
    p = plucker(a, b)
    n = torch.stack([p[..., 2], -p[..., 1], p[..., 0]], dim=-1)
    return n / torch.linalg.vector_norm(n, dim=-1, keepdim=True).clamp_min(eps)


def great_circle(a, b, n_points: int = 65) -> torch.Tensor:
    """The great circle of the plane span(a, b) on the unit sphere S^2 (r = 3, Zhang, arXiv 2512.19428):
    ``c(phi) = cos(phi) q1 + sin(phi) q2`` for ``phi`` in [0, 2 pi] (``n_points`` values, closed).
    ``a``, ``b``: ``(..., 3)``; returns ``(..., n_points, 3)``."""
    a, b = _t(a), _t(b)
    if a.shape[-1] != 3 or b.shape[-1] != 3:
        raise PlaneError(f"great_circle needs vectors in R^3, got {a.shape[-1]} and {b.shape[-1]}")
    if n_points < 2:
        raise PlaneError(f"n_points must be >= 2, got {n_points}")
    Q, _ = plane_basis(a, b)
    phi = torch.linspace(0, 2 * math.pi, n_points, dtype=Q.dtype, device=Q.device)
    return torch.cos(phi)[:, None] * Q[..., None, :, 0] + torch.sin(phi)[:, None] * Q[..., None, :, 1]


def _axes_matrix(axes, r: int, dtype, device) -> torch.Tensor:
    if isinstance(axes, torch.Tensor) and axes.dim() == 2:
        E = axes.to(dtype=dtype, device=device)
    elif not isinstance(axes, torch.Tensor) and hasattr(axes, "shape") and len(axes.shape) == 2:
        E = torch.as_tensor(axes, dtype=dtype, device=device)
    else:
        idx = [int(i) for i in axes]
        if len(idx) != 3 or len(set(idx)) != 3 or min(idx) < 0 or max(idx) >= r:
            raise PlaneError(f"axes must be 3 distinct indices in [0, {r}), got {idx}")
        E = torch.zeros(r, 3, dtype=dtype, device=device)
        E[idx, [0, 1, 2]] = 1.0
    if E.shape != (r, 3):
        raise PlaneError(f"axis matrix must be ({r}, 3), got {tuple(E.shape)}")
    return E


def project3(a, b, axes: Sequence[int] | torch.Tensor = (0, 1, 2), eps: float = 1e-12):
    """3-axis window onto the plane span(a, b) in R^r, r >= 3 (Zhang, arXiv 2512.19428).

    ``a``, ``b``: ``(..., r)``; ``axes``: three distinct coordinate indices or an ``(r, 3)`` matrix ``E``
    with orthonormal columns (e.g. :func:`pca_axes`). Returns ``(a3, b3, normal, coverage)``:
    ``a3 = E^T a``, ``b3 = E^T b`` ``(..., 3)``, the projected disc's unit normal ``(..., 3)``, and
    ``coverage = ||E^T a x E^T b|| / ||a ^ b||`` ``(...)`` in [0, 1], the area shrink factor (the product of
    the cosines of the principal angles between the plane and span(E)); 0 for a degenerate pair, NaN where
    ``a`` or ``b`` has a non-finite entry.
    """
    a, b = _t(a), _t(b)
    r = a.shape[-1]
    if r < 3 or b.shape[-1] != r:
        raise PlaneError(f"project3 needs a and b in the same R^r with r >= 3, got {a.shape[-1]}, {b.shape[-1]}")
    E = _axes_matrix(axes, r, a.dtype, a.device)
    a3, b3 = a @ E, b @ E
    n = torch.linalg.cross(a3, b3)
    nn_ = torch.linalg.vector_norm(n, dim=-1)
    pn = torch.linalg.vector_norm(plucker(a, b), dim=-1)
    coverage = torch.where(pn > eps, nn_ / pn.clamp_min(eps), torch.zeros_like(pn)).clamp(0, 1)
    finite = _finite_items(a, 1) & _finite_items(b, 1)
    return a3, b3, n / nn_.clamp_min(eps).unsqueeze(-1), _nan_where(coverage, finite)


def top_axes(energy, k: int = 3) -> list[int]:
    """The ``k`` axes with the largest row sums of a coordinate-energy map ``(r, r)`` (Zhang, arXiv 2512.19428), in decreasing order. :class:`PlaneError` for a non-finite map (indices cannot be NaN)."""
    energy = _t(energy)
    if energy.dim() != 2 or energy.shape[0] != energy.shape[1] or energy.shape[0] < k:
        raise PlaneError(f"energy must be a square (r, r) map with r >= {k}, got {tuple(energy.shape)}")
    if not bool(torch.isfinite(energy).all()):
        raise PlaneError(f"energy has {int((~torch.isfinite(energy)).sum())} non-finite entries (NaN/inf); "
                         "no axis ranking exists")
    return [int(i) for i in torch.argsort(energy.sum(1), descending=True)[:k]]


def pca_axes(Z, k: int = 3) -> torch.Tensor:
    """Orthonormal ``(r, k)`` basis of the top-``k`` principal directions of the vectors ``Z`` ``(N, r)``
    (sklearn PCA; Zhang, arXiv 2512.19428). :class:`PlaneError` if ``N < k`` or ``r < k``, or if ``Z`` has a
    non-finite entry."""
    PCA = require("sklearn.decomposition", "the PCA axes of planes").PCA
    Z = _t(Z)
    if Z.dim() != 2 or Z.shape[0] < k or Z.shape[1] < k:
        raise PlaneError(f"pca_axes needs Z of shape (N, r) with N, r >= {k}, got {tuple(Z.shape)}")
    bad = ~torch.isfinite(Z).all(-1)
    if bool(bad.any()):
        raise PlaneError(f"pca_axes: Z has non-finite values (NaN/inf) in {int(bad.sum())} of its {Z.shape[0]} rows; "
                         "drop them first")
    comp = PCA(n_components=k).fit(Z.detach().cpu().double().numpy()).components_
    return torch.as_tensor(comp.T.copy(), dtype=Z.dtype, device=Z.device)



# ---------------------------------------------------------------- the figures
SCENE_ROOM = {"camera": {"eye": {"x": 1.55, "y": 1.55, "z": 1.1}}, "domain": {"x": [0.0, 1.0], "y": [0.0, 0.94]}}


def _sphere_wire(n: int = 13) -> list[dict]:
    """A light wireframe unit sphere (meridians and parallels in one trace)."""
    xs, ys, zs = [], [], []
    u = np.linspace(0, 2 * np.pi, 49)
    for lat in np.linspace(-np.pi / 2, np.pi / 2, 7)[1:-1]:
        xs += list(np.cos(lat) * np.cos(u)) + [None]
        ys += list(np.cos(lat) * np.sin(u)) + [None]
        zs += list(np.full(len(u), np.sin(lat))) + [None]
    v = np.linspace(-np.pi / 2, np.pi / 2, 25)
    for lon in np.linspace(0, np.pi, n // 2 + 1)[:-1]:
        for sgn in (1, -1):
            xs += list(sgn * np.cos(v) * np.cos(lon)) + [None]
            ys += list(sgn * np.cos(v) * np.sin(lon)) + [None]
            zs += list(np.sin(v)) + [None]
    return [{"type": "scatter3d", "x": xs, "y": ys, "z": zs, "mode": "lines",
             "line": {"color": "#cccccc", "width": 1}, "name": "unit sphere", "hoverinfo": "skip",
             "showlegend": False}]


def _axes3(tr: GrassmannTrace, layer: int, slot: int, axes) -> tuple[torch.Tensor, list[str]]:
    """(E [r, 3], axis names) for the 3-axis window (r > 3): given indices, else the 3 axes with the
    largest coordinate energy of this layer/slot (Zhang, arXiv 2512.19428)."""
    r = tr.rank
    if axes is None:
        valid = _mask(tr, layer, slot)
        p = np.asarray(tr.plucker[layer, slot])
        p = torch.as_tensor(p[valid] if valid.any() else np.where(np.isfinite(p), p, 0.0), dtype=torch.float64)
        axes = top_axes(planes.coordinate_energy(p, r), 3) if r > 3 else [0, 1, 2]
    axes = [int(a) for a in axes]
    if len(axes) != 3 or len(set(axes)) != 3 or min(axes) < 0 or max(axes) >= r:
        raise FigureError(f"axes must be 3 distinct indices in [0, {r}), got {axes}")
    E = torch.zeros(r, 3, dtype=torch.float64)
    E[axes, [0, 1, 2]] = 1.0
    return E, [f"axis {a}" for a in axes]  # short ("z axis 11" is clipped at the scene edge)


def _window_layout(axis_names: list[str], normals: np.ndarray) -> dict:
    """Layout of a 3-axis window scene: the axes titled by the reduced axes they show, a cube at +-1.15, the
    camera facing the planes (``normals``), the legend on top, and a note under the scene naming the three
    axes (design choice: with the camera along a plane's pole one axis is seen end-on, and Plotly then drops
    its title; a trial user looked for "axis 7" in vain)."""
    rng = [-1.15, 1.15]
    small = {"tickfont": {"size": 10}, "nticks": 5}
    scene = {name: {"title": {"text": t}, "range": rng, **small}
             for name, t in zip(("xaxis", "yaxis", "zaxis"), axis_names)}
    note = {"text": "window: " + ", ".join(f"{c} = {t}" for c, t in zip("xyz", axis_names)), "showarrow": False,
            "xref": "paper", "yref": "paper", "x": 0.0, "y": 0.0, "xanchor": "left", "yanchor": "top",
            "font": {"size": 11, "color": "#666666"}}
    return {"scene": {**scene, "aspectmode": "cube", **SCENE_ROOM, "camera": _facing_camera(normals)},
            "legend": {"x": 0.0, "y": 1.0, "yanchor": "bottom", "orientation": "h", "font": {"size": 11}},
            "annotations": [note]}


def _plane_traces(Q: np.ndarray, E: np.ndarray, label: str, coverage: float, a3, b3, normal) -> list:
    """Great circle / projected disc, pole and spanning vectors of one plane, in the 3-D window."""
    phi = np.linspace(0, 2 * np.pi, 73)
    circ = (np.cos(phi)[:, None] * Q[:, 0] + np.sin(phi)[:, None] * Q[:, 1]) @ E  # [73, 3]
    n = np.asarray(normal)
    tri_i = np.zeros(len(phi) - 1, dtype=int)
    verts = np.vstack([np.zeros(3), circ[:-1]])
    m = len(phi) - 1
    j = np.arange(1, m + 1)
    k = np.roll(j - 1, -1) + 1
    out = [
        {"type": "mesh3d", "x": verts[:, 0], "y": verts[:, 1], "z": verts[:, 2], "i": tri_i, "j": j, "k": k,
         "color": HIGHLIGHT, "opacity": float(0.08 + 0.32 * coverage), "name": "disc", "hoverinfo": "skip",
         "showlegend": False},
        {"type": "scatter3d", "x": circ[:, 0], "y": circ[:, 1], "z": circ[:, 2], "mode": "lines",
         "line": {"color": HIGHLIGHT, "width": 6}, "name": "plane",
         "hovertemplate": f"{label}<br>coverage {coverage:.2f}<extra></extra>"},
    ]
    # the pole's two ends and the two spanning vectors as a trace each, so each legend entry shows its colour
    for p, name, c in ((n, "pole n", colour(0)), (-n, "pole −n", colour(3))):
        out.append({"type": "scatter3d", "x": [p[0]], "y": [p[1]], "z": [p[2]], "mode": "markers", "name": name,
                    "marker": {"size": 6, "color": c, "symbol": "diamond"},
                    "hovertemplate": f"{name} = (%{{x:.3f}}, %{{y:.3f}}, %{{z:.3f}})<extra></extra>"})
    va, vb = (np.asarray(v) / max(np.linalg.norm(v), 1e-12) for v in (a3, b3))
    for v, name, c in ((va, "z<sub>t</sub>", colour(2)), (vb, "z<sub>t−Δ</sub>", colour(1))):
        out.append({"type": "scatter3d", "x": [0, v[0]], "y": [0, v[1]], "z": [0, v[2]], "mode": "lines",
                    "name": name, "line": {"width": 5, "color": c}, "hoverinfo": "name"})
    return out


def _plane_geometry(Q_t: np.ndarray, z_a: np.ndarray, z_b: np.ndarray, E: torch.Tensor):
    a = torch.as_tensor(z_a, dtype=torch.float64)
    b = torch.as_tensor(z_b, dtype=torch.float64)
    if E.shape[0] == 3:
        n = pole(a, b).numpy()
        return a.numpy(), b.numpy(), n, 1.0
    a3, b3, n, cov = project3(a, b, E)
    return a3.numpy(), b3.numpy(), n.numpy(), float(cov)


def _facing_camera(normals: np.ndarray, distance: float = 2.4) -> dict:
    """A scene camera that faces the planes it shows (a fixed camera can see the sphere edge-on): the eye along
    the main direction of the planes' unit normals (the top eigenvector of ``sum n nᵀ``, so ``n`` and ``-n``
    count alike), tilted 25° towards the z axis (or x, when that main direction is z) so the sphere keeps
    some depth, at ``distance`` from the centre (room for the axis titles); ``up`` is perpendicular to the
    view direction. ``normals``: ``[k, 3]`` (non-finite or zero rows ignored). Design choice."""
    n = np.asarray(normals, dtype=np.float64).reshape(-1, 3)
    n = n[np.isfinite(n).all(1) & (np.linalg.norm(n, axis=1) > 1e-9)]
    if not len(n):
        return {"eye": {"x": 1.55, "y": 1.55, "z": 1.1}}
    n = n / np.linalg.norm(n, axis=1, keepdims=True)
    w, v = np.linalg.eigh(n.T @ n)
    m = v[:, -1]
    if m[np.argmax(np.abs(m))] < 0:
        m = -m
    ref = np.array([0.0, 0.0, 1.0]) if abs(m[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    up = ref - (ref @ m) * m
    up /= np.linalg.norm(up)
    eye = np.cos(np.radians(25)) * m + np.sin(np.radians(25)) * up
    eye = distance * eye / np.linalg.norm(eye)
    up2 = up - (up @ eye) * eye / (eye @ eye)
    return {"eye": dict(zip("xyz", eye.round(4).tolist())), "up": dict(zip("xyz", up2.round(4).tolist())),
            "center": {"x": 0.0, "y": 0.0, "z": 0.0}}


@figure(label="plane on the sphere", applies=is_grassmann, controls=("layer", "slot"), wide=False, default=False,
        explain=Explanation(
    r"n = (p_{23}, -p_{13}, p_{12}) / \lVert p \rVert",
    r"For rank 3 the plane is a great circle on the sphere with pole $\pm n$; for higher rank, a disc seen "
    "through 3 axes.",
    "How the circle tilts from token to token.",
    ("Grassmannian",), f"{GR_SRC}"))
def plane_sphere(tr: GrassmannTrace, layer: int = 0, slot: int = 0, cursor: int | None = None,
                 axes=None, max_frames: int = MAX_FRAMES_3D, animate: bool = False) -> Chart:
    """The reduced plane span(z_t, z_{t-Δ}) of one layer/slot at the cursor in 3-D; the camera faces the
    planes (:func:`_facing_camera` over the poles of up to 256 evenly spaced positions of the whole text, so
    the view does not turn as the cursor moves). ``animate=True`` adds Plotly frames over the positions with
    a plane among the ``max_frames`` consecutive positions around the cursor (Play and a slider, in the
    browser) for a standalone figure. r = 3: the plane's great circle on
    the unit sphere, its pole ±n
    (``pole``) and the two spanning vectors (normalised). r > 3: a 3-axis window (``axes``, default
    the three axes with the largest coordinate energy, ``top_axes``): the projected disc
    (``project3``) with opacity growing with its coverage (1 = the plane lies in the window).
    Opens at ``cursor`` (default: the first valid position). Traces: sphere wireframe, then disc, circle,
    pole, z_t, z_{t-Δ} (the last five animated). Raises :class:`FigureError` if no position has a plane."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    cursor = check_cursor(cursor, tr.n_positions)
    Q, valid, D = plane_bases(tr, layer, slot)
    if not valid.any():
        raise FigureError(f"layer {layer}, slot {slot} has no plane at any position (text shorter than the offset?)")
    r = tr.rank
    if r == 3:
        E, axis_names = torch.eye(3, dtype=torch.float64), [f"axis {a}" for a in range(3)]
    else:
        E, axis_names = _axes3(tr, layer, slot, axes)
    En = E.numpy()
    pos = np.flatnonzero(valid)
    start = cursor if cursor is not None and valid[cursor] else int(pos[0])
    frame_span = window(tr.n_positions, start, max_frames)
    idx = frame_span[valid[frame_span]]  # consecutive positions around the cursor, those with a plane
    z = tr.reduced[layer].astype(np.float64)

    def traces(t: int) -> list:
        a3, b3, n, cov = _plane_geometry(Q[t], z[t], z[t - D], E)
        return _plane_traces(Q[t], En, f"position {t} '{tr.labels[t]}'", cov, a3, b3, n)

    # the camera: along the main direction of the poles (window normals) of up to 256 positions with a plane
    cam_pos = pos[np.unique(np.linspace(0, len(pos) - 1, min(len(pos), 256)).round().astype(int))]
    zc = torch.as_tensor(z, dtype=torch.float64)
    if r == 3:
        normals = pole(zc[cam_pos], zc[cam_pos - D]).numpy()
    else:
        normals = project3(zc[cam_pos], zc[cam_pos - D], E)[2].numpy()
    base = _sphere_wire()
    shown = traces(start)
    for t in shown:  # the plane, pole and spanning vectors are the cursor's
        if t["name"] != "disc":
            t["meta"] = "cursor"
    if not animate:
        idx = np.array([], dtype=int)
    names = [str(t) for t in idx.tolist()]
    anim = list(range(len(base), len(base) + len(shown)))
    fig = animated_figure(base + shown,
                          [{"data": traces(t), "traces": anim, "name": nm} for t, nm in zip(idx.tolist(), names)])
    if animate:
        fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in idx.tolist()], names,
                                               int(np.searchsorted(idx, start))))
    fig.update_layout(**_window_layout(axis_names, normals))
    if r == 3:
        cap = (f"The plane $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ of layer {layer} as a great circle on the unit "
               "sphere, with its pole $\\pm n$ (the same unoriented plane; blue = $+n$ for the orientation "
               "$(z_t, z_{t-\\Delta})$). Play moves along the text.")
    else:
        cap = (f"The plane $\\mathrm{{span}}(z_t, z_{{t-{D}}})$ of layer {layer} (rank {r}) seen through the 3 "
               f"reduced axes it uses most ({', '.join(axis_names)}): the projected disc is more opaque the more of the plane lies "
               "in this window (coverage = product of the cosines of its angles to the window). Play moves along "
               "the text.")
    if animate and len(idx) < len(pos):
        cap += f" Frames: the positions with a plane among {frame_span[0]:,}–{frame_span[-1]:,}."
    cap = without_play(cap, animate)
    return finish(fig, f"Plane at {start} '{tr.labels[start]}' on the sphere (layer {layer}, Δ={D}, r={r})", cap,
                  "plane_sphere", height=560, margin={"l": 10, "r": 10, "t": 90, "b": 30})


@figure(label="plane interpolation", applies=lambda tr: is_grassmann(tr) and tr.n_positions >= 2,
        controls=("layer", "slot"), cursor_arg="position", cursor_fallback=True, wide=False, default=False,
        explain=Explanation(
    r"\gamma(s) = Y_1\cos(s\Theta) + G\sin(s\Theta),\ s \in [0, 1]",
    "The shortest path on the Grassmannian from the previous plane to the cursor's.",
    "A short path (small angles) or a big turn.",
    ("Geodesic distance", "Principal angles"), f"{GR_SRC}"))
def plane_interpolation(tr: GrassmannTrace, layer: int = 0, slot: int = 0, position: int | None = None,
                        n_frames: int = 24, axes=None, animate: bool = False) -> Chart:
    """Animation of the Grassmann geodesic γ(s), s in [0, 1], from the plane at ``position - 1`` to the
    plane at ``position`` (``planes.interpolate``; Zhang, arXiv 2512.19428), drawn as a great circle on
    the sphere (r = 3) or in the 3-axis window (r > 3). The title reads out θ1, θ2 and d_g.
    ``position`` defaults to the first position whose plane and predecessor are both valid.
    Static (the app's pages: one cursor per page): γ(s) at s = 1/4, 1/2, 3/4 between the two
    planes, in a light-to-dark sequence; ``animate=True``: one moving circle with ``n_frames`` frames (Play
    and a slider over s) instead.
    Traces: sphere wireframe, start circle (grey), end circle (dotted, the position's: ``meta="cursor"``),
    then γ(s) (three circles, or the moving one).
    The camera faces the two planes (:func:`_facing_camera`).
    Raises :class:`FigureError` when the two planes do not both exist."""
    tr = _gr(tr)
    layer = check_index("layer", layer, tr.n_layers)
    slot = check_slot(tr, slot)
    Q, valid, D = plane_bases(tr, layer, slot)
    pairs = np.flatnonzero(valid[1:] & valid[:-1]) + 1
    if position is None:
        if not len(pairs):
            raise FigureError(f"layer {layer}, slot {slot} has no two consecutive planes")
        position = int(pairs[0])
    position = check_cursor(position, tr.n_positions)
    if position == 0 or not (valid[position] and valid[position - 1]):
        raise FigureError(f"no plane pair at positions {position - 1} and {position} (layer {layer}, Δ={D})")
    if n_frames < 2:
        raise FigureError("n_frames must be at least 2")
    r = tr.rank
    E = torch.eye(3, dtype=torch.float64) if r == 3 else _axes3(tr, layer, slot, axes)[0]
    En = E.numpy()
    Q1, Q2 = torch.from_numpy(Q[position - 1]), torch.from_numpy(Q[position])
    s = torch.linspace(0, 1, n_frames, dtype=torch.float64)
    G = planes.interpolate(Q1, Q2, s).numpy()  # [S, r, 2]
    th = planes.principal_angles(Q1, Q2).numpy()
    dg = float(np.linalg.norm(th))
    phi = np.linspace(0, 2 * np.pi, 73)

    def circle(Qs, name, colour_, dash="solid", width=6):
        c = (np.cos(phi)[:, None] * Qs[:, 0] + np.sin(phi)[:, None] * Qs[:, 1]) @ En
        return {"type": "scatter3d", "x": c[:, 0], "y": c[:, 1], "z": c[:, 2], "mode": "lines", "name": name,
                "line": {"color": colour_, "width": width, "dash": dash}, "hoverinfo": "name"}

    a, b = position - 1, position
    end = circle(Q[b], f"plane at {b} '{tr.labels[b]}'", colour(0), dash="dot", width=3)
    end["meta"] = "cursor"
    data = _sphere_wire() + [circle(Q[a], f"plane at {a} '{tr.labels[a]}'", "#888888", width=3), end]
    if animate:
        data.append(circle(G[0], "γ(s)", HIGHLIGHT))
        names = [f"s={v:.2f}" for v in s.tolist()]
        fig = animated_figure(data, [{"data": [circle(G[i], "γ(s)", HIGHLIGHT)], "traces": [len(data) - 1],
                                      "name": nm} for i, nm in enumerate(names)])
        fig.update_layout(**animation_controls(names, names, 0, duration_ms=80, prefix=""))
    else:
        mid = planes.interpolate(Q1, Q2, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).numpy()
        for sv, Gs, c in zip((0.25, 0.5, 0.75), mid, ("#F4B183", "#E6772E", HIGHLIGHT)):
            data.append(circle(Gs, f"γ({sv:g})", c, width=4))
        fig = FigureBuilder(data=data)
    # face the two planes: their normals in the 3-D window
    normals = np.stack([np.cross(*(Qx.T @ En)) for Qx in (Q[a], Q[b])])
    ax = [f"axis {a}" for a in range(3)] if r == 3 else _axes3(tr, layer, slot, axes)[1]
    fig.update_layout(**_window_layout(ax, normals))
    cap = (f"The shortest path on the Grassmannian from the plane at position {a} to the plane at {b} "
           f"(layer {layer}, $\\Delta = {D}$): principal angles $\\theta_1 = {th[0]:.3f}$, "
           f"$\\theta_2 = {th[1]:.3f}$ rad, geodesic distance {dg:.3f} rad; $\\gamma(s)$ moves at constant speed."
           + ("" if r == 3 else " Drawn through a 3-axis window, so circles appear as ellipses."))
    return finish(fig, f"Plane interpolation {a} → {b} ({DG} = {dg:.3f} rad)", cap, "plane_interpolation",
                  height=560, margin={"l": 10, "r": 10, "t": 90, "b": 30})
