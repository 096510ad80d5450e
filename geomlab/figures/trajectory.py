"""The hidden-state trajectory of an OSM model on its group (Nunley, arXiv 2602.18417): the quantities
the OSM figures draw, computed with :mod:`geomlab.geometry.groups` on the positions drawn and cached on the
trace.

* eigenvalue phases of each state H_t (``group.eigen_angles``, radians in (-pi, pi]); conjugation
  invariant, so they mean the same for every subgroup of U(d); followed along the text per eigenvalue;
* geodesic distance from the identity ``||log H_t||_F`` and between consecutive states
  ``dist(H_{t-1}, H_t) = ||log(H_{t-1}^* H_t)||_F`` (radians);
* a PCA (scikit-learn) of ``vec(H_t)`` (real and imaginary parts stacked).

The figures: :mod:`geomlab.figures.phases` (eigenvalues), :mod:`geomlab.figures.paths` (distances, PCA),
:mod:`geomlab.figures.group_coords` (rotating frame, torus angles).
"""

from __future__ import annotations

import numpy as np

from geomlab.core.extras import require
from geomlab.figures._chart import FigureError
from geomlab.figures._sampling import cached_positions, check_index, one_blas_thread
from geomlab.trace import OSMTrace
from geomlab.trace.base import cached


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
is the fastest on every bundled model at 2,048 positions (1-18 ms vs 4-90 ms for ``"full"``, 5-20 ms for
``"randomized"``); ``"randomized"`` (``random_state=0``) is as fast but differs from the full SVD by up to
5e-4 of the range on the bundled models and by several percent where the 3rd and 4th components have
nearly equal variance (tests/figures/test_figures.py). The constant (always zero) entries of torus states,
which would make a full SVD take seconds, are dropped before the fit."""


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
    PCA = require("sklearn.decomposition", "the PCA view of states").PCA

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
    linear_sum_assignment = require("scipy.optimize", "tracking eigenvalue phases").linear_sum_assignment

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
