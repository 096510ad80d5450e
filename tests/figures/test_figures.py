"""Tests of geomlab.figures: every view built from a trace of a small random model of the right kind; the
plotted numbers equal the geometry computed independently (numpy eigvals, scipy logm, numpy SVD, ...);
axes are labelled, hovers name token and position, and every figure serialises to JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given, strategies as st

from geomlab import figures
from geomlab.figures.catalog import click_target
from geomlab.teach import views
from geomlab.figures import Chart, FigureError, _chart, _style, _sampling
from geomlab.trace import BaselineTrace, CEMTrace, OSMTrace, encode_text, from_record, trace
from helpers.models import MODELS, SUB, T, TEXT, VOCAB, get_model, get_trace, small_model

@pytest.fixture
def validate(monkeypatch):
    """Let plotly validate every property, frames included."""
    monkeypatch.setattr(_chart, "VALIDATE", True)


def _axis_titles(fig):
    lay = fig.layout.to_plotly_json()
    out = []
    for tr in fig.data:
        if tr.type in ("scatter3d", "mesh3d"):
            scene = lay.get(getattr(tr, "scene", None) or "scene", {})
            out += [(scene.get(a, {}).get("title") or {}).get("text") for a in ("xaxis", "yaxis", "zaxis")]
        else:
            for ax in ("x", "y"):
                ref = getattr(tr, f"{ax}axis", None) or ax
                key = f"{ax}axis{ref[1:]}"
                axis = lay.get(key, {})
                if axis.get("matches") and axis.get("showticklabels") is False:  # shared axis: its twin
                    axis = lay.get(f"{ax}axis{axis['matches'][1:]}", {})
                out.append((axis.get("title") or {}).get("text"))
    return out


def _by_name(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace named {name!r} in {[t.name for t in fig.data]}"
    return found[0]


# --------------------------------------------------------------------------------------------- every view

PER_POSITION = {"phase_timeline", "distance_profile", "pca_trajectory", "pca_projection", "so3_frame", "torus_angles",
                "tangent_heatmap", "tangent_lines", "mixing_share", "attention_maps", "similarity_map",
                "energy_tokens", "attention_overview",
                "plane_distances", "plane_angles", "plane_similarity", "plucker_heatmap", "gate_share",
                "decomposability_map", "phase_circle", "plane_sphere", "generator_heatmap", "plane_matrix"}

LENS = {"lens_heatmap", "lens_table"}  # the layer lens: every kind
EXPECTED = {
    "osm-rnn-SO3": {"phase_circle", "phase_timeline", "distance_profile", "pca_trajectory", "pca_projection",
                    "so3_frame", "tangent_heatmap", "tangent_lines", "mixing_share", "generator_heatmap", *LENS},
    "osmformer-U3": {"phase_circle", "phase_timeline", "distance_profile", "pca_trajectory", "pca_projection",
                     "tangent_heatmap",
                     "tangent_lines", "mixing_share", "generator_heatmap", "attention_maps", "similarity_map",
                     "attention_row", "attends_to", "attention_overview", *LENS},
    "osmformer-T4": {"phase_circle", "phase_timeline", "distance_profile", "pca_trajectory", "pca_projection",
                     "torus_angles",
                     "tangent_heatmap", "tangent_lines", "mixing_share", "generator_heatmap", "attention_maps",
                     "similarity_map", "attention_row", "attends_to", "attention_overview", *LENS},
    "cem": {"energy_descent", "energy_layer", "energy_tokens", "attention_maps", "attention_row", "attends_to", "attention_overview",
            *LENS},
    "grassmann-r3": {"plane_distances", "plane_angles", "plane_similarity", "plucker_heatmap", "gate_share",
                     "plane_sphere", "plane_interpolation", "decomposability_map", "plane_matrix", *LENS},
    "transformer": {"attention_maps", "attention_row", "attends_to", "attention_overview", *LENS},
    "llama": {"attention_maps", "attention_row", "attends_to", "attention_overview", *LENS},
    "grassmann-attn": {"attention_maps", "attention_row", "attends_to", "attention_overview", *LENS},
    "lstm": set(),  # no view of its own: not even the lens figures
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_view_is_complete(name, validate):
    tr = get_trace(name)
    assert set(views.figures_for(tr)) == EXPECTED[name]
    charts = views.all_figures(tr, cursor=5)
    assert set(charts) == EXPECTED[name]
    for vname, chart in charts.items():
        assert isinstance(chart, Chart)
        fig, caption = chart
        assert fig.layout.title.text, vname
        assert isinstance(caption, str) and len(caption) > 40 and fig.layout.meta["caption"] == caption
        titles = _axis_titles(fig)
        assert titles and all(titles), f"{vname}: unlabelled axis {titles}"
        text = fig.to_json()
        json.loads(text)
        if vname in PER_POSITION:
            assert f"5 '{tr.labels[5]}'" in text, f"{vname}: hover does not name the cursor token"
        fig.to_html(include_plotlyjs=False)


def test_views_need_the_right_family():
    cem, osm, gr = get_trace("cem"), get_trace("osm-rnn-SO3"), get_trace("grassmann-r3")
    with pytest.raises(FigureError):
        figures.phase_circle(cem)
    with pytest.raises(FigureError):
        figures.energy_descent(osm)
    with pytest.raises(FigureError):
        figures.plane_distances(osm)
    with pytest.raises(FigureError):
        figures.attention_maps(get_trace("lstm"))
    with pytest.raises(FigureError):
        figures.so3_frame(get_trace("osmformer-U3"))
    with pytest.raises(FigureError):
        figures.torus_angles(osm)
    for bad in (T, -T - 1, 1.5, True):
        with pytest.raises(FigureError):
            figures.phase_timeline(osm, cursor=bad)
    with pytest.raises(FigureError):
        figures.gate_share(gr, cursor=99)
    with pytest.raises(FigureError):
        figures.plane_sphere(gr, layer=7)


# --------------------------------------------------------------------------------------------- trajectory

def _circle_match(points: np.ndarray, eig: np.ndarray, atol=1e-4):
    """Every eigenvalue has a plotted point within atol and vice versa (multisets on the circle)."""
    assert len(points) == len(eig)
    d = np.abs(points[:, None] - eig[None, :])
    assert d.min(0).max() < atol and d.min(1).max() < atol


@pytest.mark.parametrize("name", ["osm-rnn-SO3", "osmformer-U3", "osmformer-T4"])
def test_phase_circle_equals_numpy_eigvals(name, validate):
    tr = get_trace(name)
    fig = figures.phase_circle(tr, layer=-1, cursor=4).figure
    H = tr.states[-1].astype(np.complex128)
    # the cursor's eigenvalues: one ring each, layout shapes (a move within the trail's window is a relayout)
    rings = [sh for sh in fig.layout.shapes if sh.name.startswith(f"cursor 4 '{tr.labels[4]}' λ")]
    assert len(rings) == len(fig.layout.shapes) == H.shape[-1] and len(fig.data) == 2
    _circle_match(np.array([sh.xanchor + 1j * sh.yanchor for sh in rings]), np.linalg.eigvals(H[4]))
    assert len({sh.fillcolor for sh in rings}) == len(rings)  # one colour per eigenvalue
    # each ring's name, its hover in the live chart, gives the cursor's position, its index and its angle
    for k, sh in enumerate(rings):
        assert sh.name.startswith(f"cursor 4 '{tr.labels[4]}' λ{k + 1}: θ = ")
        assert float(sh.name.split("θ = ")[1].split()[0]) == pytest.approx(np.angle(sh.xanchor + 1j * sh.yanchor),
                                                                           abs=1e-3)
    assert not fig.layout.annotations
    # they keep their hover: the trail holds the cursor's eigenvalues with position, θ and index
    cd = np.asarray(fig.data[1].customdata)
    at = cd[:, 0] == 4
    assert sorted(cd[at, 2]) == list(range(1, H.shape[-1] + 1))
    near = sorted(set(cd[:, 0].astype(int)))  # the caption names the trail's positions
    assert f"Grey: the eigenvalues at positions {near[0]:,}–{near[-1]:,};" in fig.layout.meta["caption"]
    _circle_match(np.exp(1j * cd[at, 1]), np.linalg.eigvals(H[4]))
    assert not fig.frames and not fig.layout.sliders and not fig.layout.updatemenus  # the page's cursor moves it
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis.scaleratio == 1
    assert list(fig.layout.xaxis.range) == list(fig.layout.yaxis.range)
    # a standalone figure can still animate (python -m geomlab users, notebooks)
    fig = figures.phase_circle(tr, layer=-1, cursor=4, animate=True).figure
    assert fig.data[2].meta == "cursor" and not fig.layout.shapes
    _circle_match(np.asarray(fig.data[2].x) + 1j * np.asarray(fig.data[2].y), np.linalg.eigvals(H[4]))
    assert len(fig.frames) == T
    for frame in fig.frames:
        t = int(frame.name)
        pts = np.asarray(frame.data[0].x) + 1j * np.asarray(frame.data[0].y)
        _circle_match(pts, np.linalg.eigvals(H[t]))
    assert fig.layout.sliders[0].active == 4
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Play", "❚❚ Pause"]


def _line_points(trace):
    """(x, y) of a line trace without the NaN gaps inserted where an angle wraps across ±π."""
    x, y = np.asarray(trace.x, dtype=np.float64), np.asarray(trace.y, dtype=np.float64)
    keep = np.isfinite(x)
    return x[keep], y[keep]


def test_phase_timeline_values():
    tr = get_trace("osmformer-U3")
    fig = figures.phase_timeline(tr, layer=0).figure
    lines = [_line_points(t) for t in fig.data if t.name.startswith("eigenvalue ")]
    assert len(lines) == tr.d
    for t in range(T):
        pts = np.exp(1j * np.array([y[x == t][0] for x, y in lines]))
        _circle_match(pts, np.linalg.eigvals(tr.states[0, t].astype(np.complex128)))


def _logm_norm(A):
    return np.linalg.norm(scipy.linalg.logm(A), "fro")


@pytest.mark.parametrize("name", ["osm-rnn-SO3", "osmformer-U3"])
def test_distance_profile_equals_scipy_logm(name):
    tr = get_trace(name)
    fig = figures.distance_profile(tr, cursor=2).figure
    H = tr.states.astype(np.complex128)
    for layer in range(tr.n_layers):
        lines = [t for t in fig.data if t.legendgroup == ("state" if tr.n_layers == 1 else f"layer {layer}")]
        from_id, step = np.asarray(lines[0].y, float), np.asarray(lines[1].y, float)
        np.testing.assert_allclose(from_id, [_logm_norm(h) for h in H[layer]], atol=2e-4)
        expected = [_logm_norm(H[layer, t - 1].conj().T @ H[layer, t]) for t in range(1, T)]
        assert np.isnan(step[0])
        np.testing.assert_allclose(step[1:], expected, atol=2e-4)
    # the group module agrees (the figure uses it)
    g = tr.get_group()
    ref = g.dist(torch.as_tensor(tr.states[0, :-1]), torch.as_tensor(tr.states[0, 1:])).numpy()
    np.testing.assert_allclose(figures.trajectory.step_distances(tr)[0, 1:], ref, rtol=1e-6)


def test_pca_trajectory_equals_svd():
    tr = get_trace("osmformer-U3")
    fig = figures.pca_trajectory(tr, layer=1, cursor=3).figure
    H = tr.states[1].reshape(T, -1)
    X = np.concatenate([H.real, H.imag], 1).astype(np.float64)
    X = X - X.mean(0)
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    ref = U[:, :3] * S[:3]
    got = np.stack([fig.data[0].x, fig.data[0].y, fig.data[0].z], 1)
    for k in range(3):  # principal components are defined up to sign
        assert min(np.abs(got[:, k] - ref[:, k]).max(), np.abs(got[:, k] + ref[:, k]).max()) < 1e-4
    ratio = S[:3] ** 2 / (S ** 2).sum()
    assert f"PC1 {ratio[0]:.1%}" in fig.layout.title.text and f"PC3 {ratio[2]:.1%}" in fig.layout.title.text
    assert f"PC2 ({ratio[1]:.0%})" in fig.data[0].hovertemplate
    np.testing.assert_allclose(fig.data[1].x, got[3, 0])  # the cursor marker


def test_pca_trajectory_axis_titles_fit_at_half_width():
    """Half-width 3-D scenes clipped long axis titles ("PC2 14%" ran into the tick labels, PC3 vanished):
    the titles are bare PC1..PC3, ticks few and small, and the scene leaves room for the colour bar."""
    fig = figures.pca_trajectory(get_trace("osmformer-U3"), layer=1, cursor=3).figure
    scene = fig.layout.scene
    for k, ax in enumerate((scene.xaxis, scene.yaxis, scene.zaxis), start=1):
        assert ax.title.text == f"PC{k}"
        assert ax.nticks is not None and ax.nticks <= 5
    assert scene.domain.x[1] <= 0.92  # the colour bar sits right of the scene, not on it
    eye = scene.camera.eye
    assert np.sqrt(eye.x ** 2 + eye.y ** 2 + eye.z ** 2) >= 2.5  # pulled back: the axis ends stay in view


def test_so3_frame_is_the_columns_of_H(validate):
    tr = get_trace("osm-rnn-SO3")
    fig = figures.so3_frame(tr, cursor=6).figure
    H = tr.states[0]
    for k in range(3):
        np.testing.assert_allclose([fig.data[3 + k].x[1], fig.data[3 + k].y[1], fig.data[3 + k].z[1]], H[6, :, k],
                                   atol=1e-6)
        np.testing.assert_allclose(fig.data[k].x, H[:, 0, k], atol=1e-6)
    assert not fig.frames and not fig.layout.sliders
    fig = figures.so3_frame(tr, cursor=6, animate=True).figure
    frame = [f for f in fig.frames if f.name == "9"][0]
    np.testing.assert_allclose([frame.data[1].x[1], frame.data[1].y[1], frame.data[1].z[1]], H[9, :, 1], atol=1e-6)
    assert fig.layout.scene.aspectmode == "cube"


def test_torus_angles_are_the_diagonal_phases():
    tr = get_trace("osmformer-T4")
    fig = figures.torus_angles(tr, layer=0, cursor=1).figure
    ang = np.angle(np.diagonal(tr.states[0], axis1=1, axis2=2))
    for j in range(4):
        np.testing.assert_allclose(_line_points(_by_name(fig, f"φ<sub>{j + 1}</sub>"))[1], ang[:, j], atol=1e-6)
    assert fig.layout.yaxis2.scaleanchor == "x2"


def test_torus_trajectory_numbers_from_the_diagonals_equal_the_group_arithmetic():
    """Torus traces are read on their stored diagonals (no ``d x d`` matrix): the phases, the distances from
    the identity and between steps, and the principal components equal the group's own arithmetic on the
    expanded matrices."""
    from geomlab.figures import trajectory

    tr = get_trace("osmformer-T4")
    assert tr.diagonal
    g = tr.get_group()
    H = torch.from_numpy(tr.states)
    np.testing.assert_allclose(trajectory.state_phases(tr, layer=1), g.eigen_angles(H[1]).numpy(), atol=1e-6)
    np.testing.assert_allclose(trajectory.distance_from_identity(tr),
                               g.dist(g.identity(*H.shape[:2]).to(H.dtype), H).numpy(), atol=1e-5)
    step = trajectory.step_distances(tr)
    assert np.isnan(step[:, 0]).all()
    np.testing.assert_allclose(step[:, 1:], g.dist(H[:, :-1], H[:, 1:]).numpy(), atol=1e-5)
    from sklearn.decomposition import PCA

    X = np.concatenate([tr.states[0].reshape(tr.n_positions, -1).real, tr.states[0].reshape(tr.n_positions, -1).imag],
                       axis=1).astype(np.float64)
    ref = PCA(n_components=3).fit_transform(X[:, np.ptp(X, axis=0) > 0])
    coords, _ = trajectory.pca_coords(tr, layer=0)
    np.testing.assert_allclose(np.abs(coords), np.abs(ref), atol=1e-6)  # up to each component's sign


def test_many_torus_angles_are_rows_of_a_cyclic_heatmap_not_a_tangle_of_lines():
    """Past MAX_ANGLE_LINES angles (the zoo's T^128) each angle is one heatmap row along the text, coloured on a
    cyclic scale over (-pi, pi]; the flat torus and the cursor ring stay; few angles keep their lines. The
    eigenvalue phases along the text do the same."""
    from geomlab.figures import phases, trajectory
    from geomlab.models import build_model

    torch.manual_seed(0)
    m = build_model({"kind": "osmformer", "vocab_size": len(VOCAB), "group": "T", "d": 40, "n_layers": 1,
                     "prototypes": "support"}).eval()
    tr = trace(m, torch.randint(0, len(VOCAB), (1, 30)))
    fig = figures.torus_angles(tr, cursor=5).figure
    heat = [t for t in fig.data if t.type == "heatmap"]
    assert len(heat) == 1 and fig.data[-1].name == "cursor"
    z = np.asarray(heat[0].z, dtype=float)
    assert z.shape == (40, 30) and list(heat[0].y) == list(range(1, 41))
    np.testing.assert_allclose(z, np.angle(tr.state_data[0]).T, atol=1e-6)
    assert (heat[0].zmin, heat[0].zmax) == (-np.pi, np.pi) and heat[0].colorscale[0][1] == heat[0].colorscale[-1][1]
    assert 40 > phases.MAX_ANGLE_LINES >= 26
    ring = [sh for sh in fig.layout.shapes if sh.name == "cursor"]
    assert len(ring) == 1 and (ring[0].x0, ring[0].x1) == (4.5, 5.5)  # the cursor's column outlined
    few = figures.torus_angles(get_trace("osmformer-T4"), cursor=1).figure
    assert not [t for t in few.data if t.type == "heatmap"]
    # the eigenvalue phases along the text (More figures) likewise: one row per eigenvalue
    ph = figures.phase_timeline(tr, cursor=5).figure
    assert [t.type for t in ph.data] == ["heatmap"] and [sh.name for sh in ph.layout.shapes] == ["cursor"]
    np.testing.assert_allclose(np.asarray(ph.data[0].z, dtype=float), trajectory.tracked_phases(tr, 0, range(30)).T)
    assert not [t for t in figures.phase_timeline(get_trace("osmformer-T4")).figure.data if t.type == "heatmap"]


def test_flat_torus_colour_by_position_has_a_colour_bar_not_a_one_colour_legend_entry():
    tr = get_trace("osmformer-T4")
    fig = figures.torus_angles(tr, layer=0, cursor=1).figure
    flat = _by_name(fig, "(φ<sub>1</sub>, φ<sub>2</sub>)")
    assert np.asarray(flat.marker.color).tolist() == list(range(tr.n_positions))  # coloured by position
    assert flat.showlegend is False  # its legend swatch would show one colour
    assert flat.marker.colorbar.title.text == "position"
    assert flat.marker.cmin == 0 and flat.marker.cmax == tr.n_positions - 1
    # no legend at all: its one entry (the cursor ring) sat on the torus's top gridline; the caption names it
    assert fig.layout.showlegend is False and "orange ring is the cursor" in fig.layout.meta["caption"]
    assert [t.name for t in fig.data if t.meta == "cursor"] == ["cursor"]


# --------------------------------------------------------------------------------------------- tangents

def test_tangent_views_equal_the_group_norm_and_angle():
    tr = get_trace("osmformer-U3")
    g = tr.get_group()
    raw, mixed = torch.as_tensor(tr.tangents_raw), torch.as_tensor(tr.tangents)
    n_raw = g.inner(raw, raw).sqrt().numpy()
    n_mix = g.inner(mixed, mixed).sqrt().numpy()
    fig = figures.tangent_heatmap(tr).figure
    # the figure draws the exact norms; tr.tangents comes back from float16 coordinates (3 digits)
    np.testing.assert_allclose(_by_name(fig, "attention before mixing").z, n_raw[:, 0], rtol=2e-3, atol=1e-6)
    np.testing.assert_allclose(_by_name(fig, "grounding after mixing").z, n_mix[:, 1], rtol=2e-3, atol=1e-6)
    cursor_fig = figures.tangent_heatmap(tr, cursor=4).figure
    assert {(sh.xref, sh.x0) for sh in cursor_fig.layout.shapes} == {("x", 4), ("x2", 4), ("x3", 4), ("x4", 4)}
    lines = figures.tangent_lines(tr).figure
    np.testing.assert_allclose(_by_name(lines, "layer 1 after mixing").y, n_mix[1, 0], rtol=2e-3, atol=1e-6)
    # share moved between directions: 1 - cos^2 of the angle between the coordinate vectors
    ca, cb = g.to_coords(raw).double(), g.to_coords(mixed).double()
    cos = (ca * cb).sum(-1) / (ca.norm(dim=-1) * cb.norm(dim=-1))
    share = figures.mixing_share(tr).figure
    np.testing.assert_allclose(_by_name(share, "layer 0 attention").y[1:], (1 - cos ** 2)[0, 0, 1:].numpy(),
                               atol=1e-4)
    assert all(0 <= v <= 1 for v in share.data[0].y if v == v)


def test_generator_heatmap_is_the_update_matrix():
    tr = get_trace("osmformer-U3")
    fig = figures.generator_heatmap(tr, layer=1, substep=1, cursor=7).figure
    np.testing.assert_allclose(_by_name(fig, "after mixing (Re)").z, tr.tangents[1, 1, 7].real, atol=1e-7)
    np.testing.assert_allclose(_by_name(fig, "before mixing (Im)").z, tr.tangents_raw[1, 1, 7].imag, atol=1e-7)
    z = np.asarray(_by_name(fig, "after mixing (Im)").z)
    np.testing.assert_allclose(z, z.T, atol=1e-6)  # skew-Hermitian: imaginary part symmetric
    real = figures.generator_heatmap(get_trace("osm-rnn-SO3")).figure
    assert len(real.data) == 2
    A = np.asarray(real.data[1].z)
    np.testing.assert_allclose(A, -A.T, atol=1e-6)  # so(3): skew-symmetric


def test_torus_generator_is_its_diagonal_as_bars_not_an_empty_matrix():
    """On the torus the update is i diag(theta): the view draws theta per axis (before and after mixing), the
    whole matrix, since every off-diagonal entry is 0."""
    tr = get_trace("osmformer-T4")
    assert tr.diagonal
    view = figures.generator_heatmap(tr, layer=0, substep=0, cursor=2)
    fig = view.figure
    assert [t.type for t in fig.data] == ["bar", "bar"]
    for name, mixed in (("before mixing (θ)", False), ("after mixing (θ)", True)):
        A = tr.tangent_at(0, 0, 2, mixed=mixed)
        np.testing.assert_allclose(np.abs(A - np.diag(np.diagonal(A))).max(), 0, atol=0)
        np.testing.assert_allclose(_by_name(fig, name).y, np.imag(np.diagonal(A)), atol=1e-7)
        assert len(_by_name(fig, name).x) == tr.d
    assert "diag" in view.caption and "skew" not in view.caption
    assert np.abs(np.asarray(fig.data[1].y)).max() > 0  # an update, not zeros


def test_identity_mixing_moves_nothing_between_directions():
    tr = get_trace("osmformer-identity")
    share = figures.tangents.mixing_share_values(tr)
    assert np.nanmax(share) < 1e-6


# --------------------------------------------------------------------------------------------- attention

def test_osm_similarity_map_and_attention_weights():
    tr = get_trace("osmformer-U3")
    fig = figures.similarity_map(tr, layer=0, cursor=3).figure
    X = tr.inputs.astype(np.complex128)  # layer 0 reads the token matrices
    S = np.real(np.einsum("iab,jab->ij", X.conj(), X))
    sim = np.asarray(_by_name(fig, "similarity").z, dtype=float)
    lower = np.tril(np.ones((T, T), bool))
    np.testing.assert_allclose(sim[lower], S[lower], atol=1e-4)
    assert np.isnan(sim[~lower]).all()
    sim_trace = _by_name(fig, "similarity")
    assert sim_trace.zmid == 0 and sim_trace.zmin == -3 and sim_trace.zmax == 3
    assert fig.layout.shapes and fig.layout.shapes[0].y0 == 2.5  # the cursor row is outlined
    assert len(fig.data) == 1 and fig.layout.yaxis.scaleanchor == "x"  # one square map
    weights = figures.attention_maps(tr, layer=0, cursor=3).figure
    assert [t.name for t in weights.data] == ["weights"]  # the weights are their own figure
    w = np.asarray(weights.data[0].z, dtype=float)
    np.testing.assert_allclose(np.nansum(w, 1), 1, atol=1e-5)
    np.testing.assert_allclose(w[lower], tr.attention_weights(0)[lower], atol=1e-7)
    # layer 1 reads the states after layer 0
    S1 = np.real(np.einsum("iab,jab->ij", tr.states[0].conj(), tr.states[0]))
    sim1 = np.asarray(_by_name(figures.similarity_map(tr, layer=1).figure, "similarity").z, dtype=float)
    np.testing.assert_allclose(sim1[lower], S1[lower], atol=1e-4)
    with pytest.raises(FigureError, match="no state similarity"):
        figures.similarity_map(get_trace("transformer"))


def test_osm_attention_per_head():
    tr = get_trace("osmformer-identity")
    assert tr.n_heads == 2
    lower = np.tril(np.ones((T, T), bool))
    one = np.asarray(_by_name(figures.attention_maps(tr, layer=0, head=1).figure, "weights").z, dtype=float)
    np.testing.assert_allclose(one[lower], tr.attention[0, 1][lower], atol=1e-7)
    np.testing.assert_allclose(tr.attention[0].mean(0), tr.attention_weights(0), atol=1e-6)


def test_cem_attention_head_mean_and_single_head():
    tr = get_trace("cem")
    mean = np.asarray(_by_name(figures.attention_maps(tr, layer=1).figure, "weights").z, dtype=float)
    lower = np.tril(np.ones((T, T), bool))
    np.testing.assert_allclose(mean[lower], tr.attention[1].mean(0)[lower], atol=1e-7)
    one = np.asarray(_by_name(figures.attention_maps(tr, layer=1, head=1).figure, "weights").z, dtype=float)
    np.testing.assert_allclose(one[lower], tr.attention[1, 1][lower], atol=1e-7)
    with pytest.raises(FigureError):
        figures.attention_maps(tr, head=5)


def test_attention_of_a_long_trace_is_the_window_around_the_cursor():
    n = 700
    rng = np.random.default_rng(0)
    att = np.tril(rng.random((1, 1, n, n)))
    att /= att.sum(-1, keepdims=True)
    tr = from_record({"logits": np.zeros((n, 3)), "attention": att}, "transformer", np.zeros(n, int))
    view = figures.attention_maps(tr, cursor=333, size=100)
    z = _by_name(view.figure, "weights")
    assert list(z.x) == [f"{i} '#0'" for i in range(300, 400)] and list(z.x) == list(z.y)  # from a multiple of 50
    ci = list(z.y).index("333 '#0'")
    assert view.figure.layout.shapes[0].y0 == ci - 0.5  # the cursor row, by category index
    assert "Positions 300–399 of 700 at full resolution" in view.caption
    w = np.asarray(z.z, dtype=float)
    lower = np.tril(np.ones((100, 100), bool))
    np.testing.assert_allclose(w[lower], att[0, 0, 300:400, 300:400][lower], atol=1e-6)
    # a click on a cell reads its row, the query, from the label (no per-cell customdata)
    assert z.customdata is None
    assert figures.FIGURES["attention_maps"].click == "row"
    assert click_target("row", {"x": z.x[7], "y": z.y[5], "point": [5, 7]}) == {"position": 305}


# --------------------------------------------------------------------------------------------- CEM energy

def test_energy_descent_equals_the_recorded_energies(validate):
    tr = get_trace("cem")
    fig = figures.energy_descent(tr, cursor=2).figure
    change = tr.energies - tr.energies[:, :, :1]
    for layer in range(2):
        for b, block in enumerate(("attention", "MLP")):
            np.testing.assert_allclose(_by_name(fig, f"L{layer} {block} mean").y, change[layer, b].mean(-1),
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(_by_name(fig, f"L{layer} {block} cursor").y, change[layer, b, :, 2],
                                       rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(_by_name(fig, f"L{layer} {block} displacement").y,
                                       tr.displacement[layer, b].mean(-1), rtol=1e-5, atol=1e-6)
            band = [t for t in fig.data if t.name == f"L{layer} {block} band"]
            np.testing.assert_allclose(band[1].y, np.percentile(change[layer, b], 90, axis=-1), rtol=1e-5,
                                       atol=1e-6)
    absolute = figures.energy_descent(tr, relative=False).figure
    np.testing.assert_allclose(_by_name(absolute, "L0 MLP mean").y, tr.energies[0, 1].mean(-1), rtol=1e-5)


def test_energy_layer_draws_one_layer_of_the_recorded_energies(validate):
    """The one-layer energy chart (a page's first chart) holds exactly that layer's curves, equal to the
    recorded energies, and says which layer it is; a layer out of range is an error."""
    tr = get_trace("cem")
    change = tr.energies - tr.energies[:, :, :1]
    L = tr.energies.shape[0]
    for layer in range(L):
        fig = figures.energy_layer(tr, layer=layer, cursor=1).figure
        names = {t.name for t in fig.data}
        assert {f"L{layer} attention mean", f"L{layer} MLP mean"} <= names
        assert not any(n.startswith(f"L{other} ") for n in names for other in range(L) if other != layer)
        for b, block in enumerate(("attention", "MLP")):
            np.testing.assert_allclose(_by_name(fig, f"L{layer} {block} mean").y, change[layer, b].mean(-1),
                                       rtol=1e-5, atol=1e-6)
        assert f"layer {layer}" in fig.layout.title.text
    with pytest.raises(figures.FigureError):
        figures.energy_layer(tr, layer=L)


def test_energy_descent_flags_a_rise():
    rng = np.random.default_rng(1)
    E = -np.cumsum(rng.random((2, 2, 5, 6)), axis=2)  # falling energies
    E[1, 1, 3] = E[1, 1, 2] + 5.0  # layer 1, MLP: the energy rises at step 3
    tr = from_record({"logits": np.zeros((6, 3)), "energies": E, "displacement": np.abs(E)}, "cem",
                     np.arange(6))
    assert isinstance(tr, CEMTrace)
    view = figures.energy_descent(tr)
    rose = {t.name: list(t.x) for t in view.figure.data if t.name.endswith("rose")}
    assert rose["L1 MLP rose"] == [3] and rose["L0 attention rose"] == []
    assert "ROSE" in view.caption
    rises = figures.energy.token_rises(tr)
    assert rises[1, 1, 3] == 6 and rises.sum() == 6
    assert [t.name for t in view.figure.data if t.showlegend and t.name == "energy rose"] == ["energy rose"]
    E[1, 1, 3] = (E[1, 1, 2] + E[1, 1, 4]) / 2  # no rise left: the legend does not name red triangles
    calm = figures.energy_descent(from_record({"logits": np.zeros((6, 3)), "energies": E,
                                               "displacement": np.abs(E)}, "cem", np.arange(6)))
    assert "energy rose" not in {t.name for t in calm.figure.data} and "ROSE" not in calm.caption


def test_energy_after_more_inference_steps():
    from geomlab.trace import trace_cem_steps

    tr = trace_cem_steps(get_model("cem"), encode_text(VOCAB, SUB), 5, vocab=VOCAB, text=SUB)
    fig = figures.energy_descent(tr).figure
    assert "T = 5" in fig.layout.title.text
    assert len(_by_name(fig, "L0 attention mean").x) == 6
    tok = figures.energy_tokens(tr, layer=1, block=1, cursor=0).figure
    np.testing.assert_allclose(tok.data[0].z, tr.energy_change()[1, 1], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------- Grassmann

def _basis(a, b):
    Q, _ = np.linalg.qr(np.stack([a, b], 1).astype(np.float64))
    return Q


def _principal(Q1, Q2):
    s = np.clip(np.linalg.svd(Q1.T @ Q2, compute_uv=False), -1, 1)
    return np.sort(np.arccos(s))


@pytest.mark.parametrize("name", ["grassmann-r3", "grassmann-r5"])
def test_plane_distances_equal_numpy_principal_angles(name):
    tr = get_trace(name)
    fig = figures.plane_distances(tr, slot=1).figure
    z = np.asarray(_by_name(fig, "along positions").z, dtype=float)
    for layer in range(tr.n_layers):
        D = int(tr.offsets[layer, 1])
        Z = tr.reduced[layer]
        for t in range(T):
            if t - 1 < D:
                assert np.isnan(z[layer, t])
                continue
            th = _principal(_basis(Z[t - 1], Z[t - 1 - D]), _basis(Z[t], Z[t - D]))
            assert abs(z[layer, t] - np.linalg.norm(th)) < 2e-3
    across = np.asarray(_by_name(fig, "across layers").z, dtype=float)
    h = tr.inputs
    for t in range(1, T):
        th = _principal(_basis(h[0, t], h[0, t - 1]), _basis(h[1, t], h[1, t - 1]))
        assert abs(across[0, t] - np.linalg.norm(th)) < 2e-3
    angles = figures.plane_angles(tr, layer=0, slot=0, cursor=4).figure
    t = 5
    th = _principal(_basis(tr.reduced[0, t - 1], tr.reduced[0, t - 2]), _basis(tr.reduced[0, t], tr.reduced[0, t - 1]))
    assert abs(_by_name(angles, "θ<sub>2</sub>").y[t] - th[1]) < 2e-3


def test_plane_similarity_plucker_and_gates():
    tr = get_trace("grassmann-r5")
    S = np.asarray(figures.plane_similarity(tr, layer=1, slot=0, cursor=2).figure.data[0].z, dtype=float)
    p = tr.plucker[1, 0]
    np.testing.assert_allclose(S[1:, 1:], np.abs(p[1:] @ p[1:].T), atol=1e-6)
    assert np.isnan(S[0]).all()  # no partner at t = 0 for offset 1
    # |<p1, p2>| = cos(theta1) cos(theta2)
    th = _principal(_basis(tr.reduced[1, 4], tr.reduced[1, 3]), _basis(tr.reduced[1, 9], tr.reduced[1, 8]))
    assert abs(S[4, 9] - np.cos(th).prod()) < 1e-4
    P = np.asarray(figures.plucker_heatmap(tr, layer=0, slot=1).figure.data[0].z, dtype=float)
    assert P.shape == (T, 10)
    np.testing.assert_allclose(P[3:], tr.plucker[0, 1, 3:], atol=1e-7)
    assert np.isnan(P[:3]).all()
    gfig = figures.gate_share(tr, cursor=1).figure
    np.testing.assert_allclose(_by_name(gfig, "gate share").z, (1 - tr.gates).mean(-1), atol=1e-6)
    np.testing.assert_allclose(_by_name(gfig, "layer 1").y, (1 - tr.gates[1]).mean(-1), atol=1e-6)
    kappa = np.asarray(figures.decomposability_map(tr, window=4).figure.data[0].z, dtype=float)
    assert np.nanmax(kappa) <= 1 + 1e-9 and np.nanmin(kappa) >= 0.5 - 1e-6  # r = 5: floor(r/2) = 2
    # independent check at layer 1, position 6: mean of every valid plane in positions 3..6, then
    # kappa = lambda_1^2 / sum lambda_k^2 from the eigenvalues of the antisymmetric matrix
    vecs = [tr.plucker[1, k, t].astype(np.float64) for t in range(3, 7) for k in range(tr.plucker.shape[1])
            if tr.plucker_mask[1, k, t]]
    p = np.mean(vecs, axis=0)
    A = np.zeros((5, 5))
    iu = np.triu_indices(5, 1)
    A[iu] = p
    A = A - A.T
    lam = np.sort(np.abs(np.linalg.eigvals(A).imag))[::-1][::2]
    np.testing.assert_allclose(kappa[1, 6], lam[0] ** 2 / (lam ** 2).sum(), atol=1e-6)
    per_position = np.asarray(figures.decomposability_map(tr, window=1).figure.data[0].z, dtype=float)
    np.testing.assert_allclose(per_position[~np.isnan(per_position)], 1.0, atol=1e-4)  # always one plane


def test_a_text_barely_longer_than_the_offset_says_so_and_names_a_shorter_one():
    """One offset per layer (1 then 10) on 14 positions: layer 1 has planes at 4 positions; its figures say so
    and point to layer 0 (Δ=1), which has planes almost everywhere and no such sentence."""
    model = small_model("grassmann", offsets=[1, 10], offset_schedule="per_layer")
    tr = trace(model, encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB)
    n = int(tr.plucker_mask[1, 0].sum())
    assert n == T - 10
    for make in (figures.plane_angles, figures.plane_similarity, figures.plucker_heatmap):
        cap = make(tr, layer=1, slot=0).caption
        assert f"Only {n} of {T} positions have a plane here" in cap and "first 10 have no partner" in cap, cap
        assert "Δ=1 (layer 0)" in cap
        assert "Only" not in make(tr, layer=0, slot=0).caption
    every = trace(small_model("grassmann", offsets=[1, 10]), encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB)
    assert "Δ=1 (offset slot 0)" in figures.plane_angles(every, layer=1, slot=1).caption  # every offset per layer


def test_plane_matrix_is_the_bivector():
    tr = get_trace("grassmann-r5")
    fig = figures.plane_matrix(tr, layer=1, slot=1, cursor=6).figure
    p = tr.plucker[1, 1, 6].astype(np.float64)
    A = np.zeros((5, 5))
    k = 0
    for i in range(5):
        for j in range(i + 1, 5):
            A[i, j], A[j, i] = p[k], -p[k]
            k += 1
    np.testing.assert_allclose(_by_name(fig, "plane matrix").z, A, atol=1e-7)
    assert abs(np.linalg.norm(A) - math.sqrt(2)) < 1e-4
    valid = tr.plucker_mask[1, 1]
    E = np.asarray(_by_name(fig, "coordinate energy").z)
    assert abs(E[0, 1] - (tr.plucker[1, 1, valid, 0].astype(np.float64) ** 2).mean()) < 1e-7


def test_plane_sphere_r3_great_circle_and_pole(validate):
    tr = get_trace("grassmann-r3")
    fig = figures.plane_sphere(tr, layer=0, slot=0, cursor=6).figure
    a, b = tr.reduced[0, 6].astype(np.float64), tr.reduced[0, 5].astype(np.float64)
    n = np.cross(a, b) / np.linalg.norm(np.cross(a, b))
    pole = _by_name(fig, "pole n")
    np.testing.assert_allclose([pole.x[0], pole.y[0], pole.z[0]], n, atol=1e-6)
    circle = _by_name(fig, "plane")
    pts = np.stack([circle.x, circle.y, circle.z], 1)
    np.testing.assert_allclose(np.linalg.norm(pts, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(pts @ n, 0, atol=1e-6)
    assert not fig.frames and fig.layout.scene.aspectmode == "cube"
    assert circle.meta == "cursor" and "6 '" in fig.layout.title.text
    anim = figures.plane_sphere(tr, layer=0, slot=0, cursor=6, animate=True).figure
    assert len(anim.frames) == T - 1
    # every frame moves the plane's traces (disc, circle, both pole ends, both spanning vectors), none left behind
    moving = list(range([t.name for t in anim.data].index("disc"), len(anim.data)))
    assert len(moving) == 6
    assert all(list(f.traces) == moving and len(f.data) == len(f.traces) for f in anim.frames)
    assert _by_name(fig, "pole −n").x[0] == pytest.approx(-n[0], abs=1e-6)


def test_plane_sphere_r5_coverage():
    tr = get_trace("grassmann-r5")
    view = figures.plane_sphere(tr, layer=1, slot=0, cursor=7, axes=(0, 2, 4))
    a, b = tr.reduced[1, 7].astype(np.float64), tr.reduced[1, 6].astype(np.float64)
    a3, b3 = a[[0, 2, 4]], b[[0, 2, 4]]
    wedge = math.sqrt(max((a @ a) * (b @ b) - (a @ b) ** 2, 0))
    coverage = np.linalg.norm(np.cross(a3, b3)) / wedge
    disc = _by_name(view.figure, "disc")
    assert abs(disc.opacity - (0.08 + 0.32 * coverage)) < 1e-6
    assert f"coverage {coverage:.2f}" in _by_name(view.figure, "plane").hovertemplate
    assert view.figure.layout.scene.xaxis.title.text == "axis 0"
    # an axis seen end-on loses its title in Plotly, so a note under the scene names all three
    for fig in (view.figure, figures.plane_interpolation(tr, layer=1, slot=0, position=8, axes=(0, 2, 4)).figure):
        assert [a.text for a in fig.layout.annotations] == ["window: x = axis 0, y = axis 2, z = axis 4"]


def test_plane_interpolation_reaches_both_planes(validate):
    tr = get_trace("grassmann-r3")
    view = figures.plane_interpolation(tr, layer=1, slot=0, position=8, n_frames=9)
    fig = view.figure

    def normal(t):
        v = np.cross(tr.reduced[1, t], tr.reduced[1, t - 1]).astype(np.float64)
        return v / np.linalg.norm(v)

    def pts(tr3):
        return np.stack([tr3.x, tr3.y, tr3.z], 1)

    assert not fig.frames and not fig.layout.sliders
    np.testing.assert_allclose(pts(_by_name(fig, f"plane at 7 '{tr.labels[7]}'")) @ normal(7), 0, atol=1e-6)
    np.testing.assert_allclose(pts(_by_name(fig, f"plane at 8 '{tr.labels[8]}'")) @ normal(8), 0, atol=1e-6)
    # WebGL draws a 3-D "dash" as dots while the legend drew dashes: the end circle is dotted in both
    assert _by_name(fig, f"plane at 8 '{tr.labels[8]}'").line.dash == "dot"
    # γ(1/2) lies between: its plane is at equal geodesic distance from both ends
    mid = pts(_by_name(fig, "γ(0.5)"))
    q_mid = np.linalg.svd(mid.T, full_matrices=False)[0][:, :2]
    d7 = np.linalg.norm(_principal(_basis(tr.reduced[1, 7], tr.reduced[1, 6]), q_mid))
    d8 = np.linalg.norm(_principal(_basis(tr.reduced[1, 8], tr.reduced[1, 7]), q_mid))
    assert d7 == pytest.approx(d8, abs=1e-5)
    anim = figures.plane_interpolation(tr, layer=1, slot=0, position=8, n_frames=9, animate=True).figure
    assert len(anim.frames) == 9
    np.testing.assert_allclose(pts(anim.frames[0].data[0]) @ normal(7), 0, atol=1e-6)
    np.testing.assert_allclose(pts(anim.frames[-1].data[0]) @ normal(8), 0, atol=1e-6)
    th = _principal(_basis(tr.reduced[1, 7], tr.reduced[1, 6]), _basis(tr.reduced[1, 8], tr.reduced[1, 7]))
    assert f"{np.linalg.norm(th):.3f}" in fig.layout.title.text
    with pytest.raises(FigureError):
        figures.plane_interpolation(tr, position=0)


# --------------------------------------------------------------------------------------------- curves

def test_training_curves():
    a = [{"step": 10, "loss": 2.0}, {"step": 20, "loss": 1.5}, {"step": 20, "valid_bpc": 2.3},
         {"step": 30, "loss": 1.2}]
    b = [{"step": 5, "bpc": 3.0, "tokens": 640}, {"step": 15, "bpc": 2.5, "tokens": 1920}]
    view = figures.training_curves({"run A": a, "run B": b})
    names = [t.name for t in view.figure.data]
    assert names == ["run A: bpc (from loss)", "run A: valid_bpc", "run B: bpc"]
    np.testing.assert_allclose(view.figure.data[0].y, np.array([2.0, 1.5, 1.2]) / math.log(2))
    assert view.figure.layout.yaxis.title.text == "bits per character"
    tok = figures.training_curves({"run B": b}, x="tokens", metric="loss").figure
    np.testing.assert_allclose(tok.data[0].x, [640, 1920])
    np.testing.assert_allclose(tok.data[0].y, np.array([3.0, 2.5]) * math.log(2))
    assert "nats" in tok.layout.yaxis.title.text
    with pytest.raises(FigureError):
        figures.training_curves({"run A": a}, x="tokens")
    with pytest.raises(FigureError):
        figures.training_curves({"run A": a}, metric="accuracy")
    with pytest.raises(FigureError):
        figures.training_curves({})


def test_checkpoint_history_adds_tokens():
    from types import SimpleNamespace

    from geomlab.figures.curves import checkpoint_history

    ck = SimpleNamespace(metrics=[{"step": 2, "loss": 1.0}], train_config={"batch_size": 4, "seq_len": 8})
    df = checkpoint_history(ck)
    assert df["tokens"].tolist() == [64]
    fig = figures.training_curves({"ck": ck}, x="tokens").figure
    assert list(fig.data[0].x) == [64] and abs(fig.data[0].y[0] - 1 / math.log(2)) < 1e-12


# --------------------------------------------------------------------------------------------- long traces

def _random_so3_trace(n: int) -> OSMTrace:
    g = torch.Generator().manual_seed(0)
    A = torch.randn(n, 3, 3, generator=g, dtype=torch.float64) * 0.3
    steps = torch.linalg.matrix_exp(A - A.transpose(-1, -2))
    states = [steps[0]]
    for t in range(1, n):
        states.append(states[-1] @ steps[t])
    S = torch.stack(states)[None]
    rec = {"logits": torch.zeros(n, 4), "states": S, "tangents": A[None, None] * 0.1,
           "tangents_raw": A[None, None] * 0.2}
    return from_record(rec, "osm-rnn", torch.zeros(n, dtype=torch.long), group={"name": "SO", "d": 3, "options": {}})


def test_long_traces_show_the_window_and_frames_inside_it():
    n = 1500
    tr = _random_so3_trace(n)
    circle = figures.phase_circle(tr, cursor=777, animate=True)
    frames = [int(f.name) for f in circle.figure.frames]
    assert frames == list(range(720, 720 + _sampling.MAX_FRAMES))  # 96 frames from a multiple of 48
    assert "Frames: positions 720–815." in circle.caption
    timeline = figures.phase_timeline(tr, cursor=777)
    x = _line_points(timeline.figure.data[0])[0]
    assert list(x) == list(range(704, 832))  # 128 consecutive positions from a multiple of 64, the cursor inside
    assert f"Positions 704–831 of {n:,} at full resolution" in timeline.caption
    heat = figures.tangent_heatmap(tr, cursor=0).figure
    assert list(heat.data[0].x) == list(range(_sampling.WINDOW))  # shifted inwards at the start


@given(n=st.integers(1, 5000), size=st.integers(1, 300), c=st.integers(0, 4999), last=st.booleans())
def test_window_property(n, size, c, last):
    """The window: min(n, size) consecutive positions inside 0..n-1, with the cursor (the last position
    without one), at least size // 4 positions from either edge unless an end of the text is nearer, starting
    at a multiple of size // 2 unless it ends the text; a cursor moved within its middle keeps it."""
    c = None if last else c % n
    idx = _sampling.window(n, c, size)
    assert len(idx) == min(n, size) and idx[0] >= 0 and idx[-1] <= n - 1
    assert np.all(np.diff(idx) == 1)
    want = n - 1 if c is None else c
    assert want in idx
    if c is not None and n > size:
        step, q = max(size // 2, 1), size // 4
        assert idx[0] % step == 0 or idx[0] == n - size
        assert c - idx[0] >= min(q, c) and idx[-1] - c >= min(q - 1, n - 1 - c)
        # the latest such start: one step later would leave fewer than q positions before the cursor
        assert idx[0] == n - size or idx[0] + step > c - q
        if 0 < idx[0] < n - size:  # a cursor anywhere in the middle half keeps this window
            for c2 in (idx[0] + q, idx[0] + q + step - 1):
                assert _sampling.window(n, c2, size)[0] == idx[0]
    with pytest.raises(FigureError):
        _sampling.window(n, c, 0)


def test_window_note():
    assert _sampling.window_note(2048, np.arange(512, 640)) == (
        " Positions 512–639 of 2,048 at full resolution; the overview shows the whole text.")
    assert _sampling.window_note(100, np.arange(100)) == ""


@given(seed=st.integers(0, 10_000), d=st.sampled_from([2, 3, 4]))
def test_phases_match_eigvals_on_random_rotations(seed, d):
    """Synthetic states exp(skew) on SO(d): the figure's phases are the eigenvalue angles."""
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(5, d, d, generator=g, dtype=torch.float64)
    H = torch.linalg.matrix_exp(A - A.transpose(-1, -2))
    tr = from_record({"logits": torch.zeros(5, 2), "states": H[None]}, "osm-rnn", torch.zeros(5, dtype=torch.long),
                     group={"name": "SO", "d": d, "options": {}})
    theta = figures.trajectory.state_phases(tr)
    for t in range(5):
        _circle_match(np.exp(1j * theta[t]), np.linalg.eigvals(H[t].numpy()), atol=1e-6)


def test_non_finite_states_give_a_message():
    tr = _random_so3_trace(20)
    tr.states[0, 7] = np.nan
    with pytest.raises(FigureError, match="position 7"):
        figures.phase_circle(tr)
    assert "phase_circle" not in views.all_figures(tr) and "tangent_heatmap" in views.all_figures(tr)


def test_baseline_family_is_chosen_by_content():
    tr = from_record({"logits": np.zeros((3, 2))}, "newkind", np.arange(3))
    assert isinstance(tr, BaselineTrace) and views.figures_for(tr) == []


@pytest.mark.parametrize("text", ["s", "so"])
def test_very_short_texts_build_or_explain(text):
    """One or two characters: every view builds and serialises, or all_figures leaves it out because it
    raised a FigureError (no plane yet); nothing crashes."""
    from geomlab.trace import trace_text

    for name in ("osmformer-U3", "osm-rnn-SO3", "cem", "grassmann-r3", "transformer"):
        tr = trace_text(get_model(name), VOCAB, text)
        built = views.all_figures(tr, cursor=0)
        missing = set(views.figures_for(tr)) - set(built)
        assert missing <= {"plane_matrix", "plane_sphere", "plane_interpolation"}, missing
        for view in built.values():
            json.loads(view.figure.to_json())


@given(seed=st.integers(0, 10_000), scale=st.floats(-3, 3).filter(lambda c: abs(c) > 1e-3))
def test_mixing_share_properties(seed, scale):
    """0 when mixing only rescales the update, 1 when it turns it orthogonally, always in [0, 1] and
    invariant to rescaling either update."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((1, 3, 4, 4))
    A = A - np.swapaxes(A, -1, -2)
    B = rng.standard_normal((1, 3, 4, 4))
    B = B - np.swapaxes(B, -1, -2)
    B_perp = B - (A * B).sum((-2, -1), keepdims=True) / (A * A).sum((-2, -1), keepdims=True) * A

    def share(raw, mixed):
        rec = {"logits": np.zeros((3, 2)), "states": np.broadcast_to(np.eye(4), (1, 3, 4, 4)).copy(),
               "tangents_raw": raw[:, None], "tangents": mixed[:, None]}
        tr = from_record(rec, "osm-rnn", np.arange(3), group={"name": "SO", "d": 4, "options": {}})
        return figures.tangents.mixing_share_values(tr)[0, 0]

    np.testing.assert_allclose(share(A, scale * A), 0, atol=1e-9)
    np.testing.assert_allclose(share(A, B_perp), 1, atol=1e-9)
    s = share(A, B)
    assert np.all((0 <= s) & (s <= 1))
    np.testing.assert_allclose(share(2.5 * A, scale * B), s, atol=1e-9)


# --------------------------------------------------------------------------------------------- fast figures

def _plain(obj):
    """A figure's JSON with plotly's base64 arrays decoded to lists and integral floats as ints, so a
    validated and an unvalidated figure compare equal when they send the same thing."""
    import base64

    if isinstance(obj, dict):
        if {"dtype", "bdata"} <= set(obj):
            a = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=np.dtype(obj["dtype"]))
            if "shape" in obj:
                a = a.reshape([int(v) for v in obj["shape"].split(",")])
            return _plain(a.tolist())
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    if isinstance(obj, float) and math.isfinite(obj) and obj == int(obj):
        return int(obj)
    return obj


def _same_json(a, b, path="figure"):
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), f"{path}: {a!r} != {b!r}"
        assert a == b or (a != a and b != b) or abs(a - b) <= 1e-6 * max(1.0, abs(a)), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(set(a) ^ set(b))} differ"
        for k in a:
            _same_json(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            _same_json(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unvalidated_figures_send_what_validated_ones_send(name, monkeypatch):
    """The views build plain dicts and skip plotly's validation (speed); with VALIDATE on, the same dicts go
    through plotly's full validation (which raises on any invalid property) and must serialise to the same
    JSON, frames included: nothing the unvalidated path sends differs from a checked figure."""
    tr = get_trace(name)
    monkeypatch.setattr(_chart, "VALIDATE", False)
    fast = views.all_figures(tr, cursor=5)
    assert all(not v.figure._validate for v in fast.values())
    monkeypatch.setattr(_chart, "VALIDATE", True)
    checked = views.all_figures(tr, cursor=5)
    assert set(fast) == set(checked) == EXPECTED.get(name, set(fast))
    for vname in fast:
        _same_json(_plain(json.loads(fast[vname].figure.to_json())),
                   _plain(json.loads(checked[vname].figure.to_json())), vname)


def test_builder_matches_make_subplots():
    """FigureBuilder.grid reproduces make_subplots' layout (domains, anchors, shared axes, titles) and
    puts traces, axis updates and shapes on the right subplot."""
    from plotly.subplots import make_subplots

    kw = dict(rows=3, cols=2, specs=[[{}, {}], [{}, {}], [{"colspan": 2}, None]], vertical_spacing=0.1,
              subplot_titles=["a", "b", "", "d", "e"])
    ref = make_subplots(**kw)
    ref.add_trace({"type": "scatter", "x": [1, 2], "y": [3, 4]}, row=2, col=2)
    ref.update_xaxes(title_text="bottom", row=3)
    ref.update_yaxes(rangemode="tozero")
    ref.add_shape(type="line", x0=1, x1=1, y0=0, y1=1, row=3, col=1)
    fig = _chart.FigureBuilder.grid(**kw)
    fig.add_trace({"type": "scatter", "x": [1, 2], "y": [3, 4]}, row=2, col=2)
    fig.update_xaxes(title_text="bottom", row=3)
    fig.update_yaxes(rangemode="tozero")
    fig.add_shape(type="line", x0=1, x1=1, y0=0, y1=1, row=3, col=1)
    want = ref.to_plotly_json()
    want["layout"].pop("template")
    got = fig.build().to_plotly_json()
    got["layout"].pop("template")
    _same_json(_plain(json.loads(json.dumps(got, cls=_PlotlyJSON))), _plain(json.loads(json.dumps(want, cls=_PlotlyJSON))))


class _PlotlyJSON(json.JSONEncoder):
    def default(self, o):
        return o.tolist() if isinstance(o, np.ndarray) else super().default(o)


def test_frames_carry_only_what_changes(validate):
    """plotly.js merges a frame's trace into the trace it animates: the style, names and mesh triangles
    that are the same in every frame are sent once, in the base trace."""
    tr = get_trace("osm-rnn-SO3")
    fig = figures.phase_circle(tr, cursor=4, animate=True).figure
    assert fig.data[2].marker.size == 12 and fig.data[2].mode == "markers"
    for frame in fig.frames:
        keys = set(frame.data[0].to_plotly_json())
        assert keys == {"type", "x", "y", "customdata", "hovertemplate", "name"}, keys
    sphere = figures.plane_sphere(get_trace("grassmann-r5"), layer=0, cursor=6, animate=True).figure
    mesh = [f.data[0].to_plotly_json() for f in sphere.frames]
    assert all("i" not in m and "x" in m for m in mesh)
    assert len({round(m["opacity"], 6) for m in mesh}) > 1  # coverage changes: sent in every frame
    assert _by_name(sphere, "disc").i is not None


def _pca_reference(X):
    Xc = X - X.mean(0)
    U, S, _ = np.linalg.svd(Xc, full_matrices=False)
    return U[:, :3] * S[:3], S[:3] ** 2 / (S ** 2).sum()


@pytest.mark.parametrize("d", [3, 6])
def test_pca_equals_the_full_svd_on_long_traces(d):
    """2,048 positions of a random walk on U(d), well mixed, so the 3rd and 4th components have nearly equal
    variance: the 3-component PCA (trajectory.PCA_SOLVER) projects like a full SVD (up to the sign of each
    component) and reports the same explained-variance shares. (scikit-learn's "randomized" solver fails
    this by several percent.)"""
    g = torch.Generator().manual_seed(d)
    n = 2048
    A = torch.randn(n, d, d, generator=g, dtype=torch.complex128) * 0.2
    steps = torch.linalg.matrix_exp(A - A.conj().transpose(-1, -2))
    states = [steps[0]]
    for t in range(1, n):
        states.append(states[-1] @ steps[t])
    S = torch.stack(states)[None]
    tr = from_record({"logits": torch.zeros(n, 2), "states": S}, "osm-rnn", torch.zeros(n, dtype=torch.long),
                     group={"name": "U", "d": d, "options": {}})
    coords, ratio = figures.trajectory.pca_coords(tr)
    ref, ref_ratio = _pca_reference(figures.trajectory.pca_inputs(tr, 0))
    scale = np.abs(ref).max()
    for k in range(3):
        err = min(np.abs(coords[:, k] - ref[:, k]).max(), np.abs(coords[:, k] + ref[:, k]).max())
        assert err < 1e-6 * scale, (k, err)
    np.testing.assert_allclose(ratio, ref_ratio, rtol=1e-6)
    fig = figures.pca_trajectory(tr, cursor=1000).figure
    # fitted on every position, the window drawn: exactly the coordinates of those positions
    np.testing.assert_allclose(np.asarray(fig.data[0].x, dtype=float), coords[960:1088, 0], rtol=1e-6)
    assert f"PC1 {ref_ratio[0]:.1%}" in fig.layout.title.text


_LONG = 2048
_CAPPED = {"phase_timeline": None, "distance_profile": None, "pca_trajectory": None, "so3_frame": None,
           "torus_angles": None, "tangent_heatmap": None, "tangent_lines": None, "mixing_share": None,
           "attention_maps": None, "energy_tokens": None, "plane_distances": None, "plane_angles": None,
           "plane_similarity": None, "plucker_heatmap": None, "gate_share": None, "decomposability_map": None,
           "phase_circle": None, "plane_sphere": None}


def _long_traces():
    from helpers.models import TEXT as BASE

    text = (BASE * (_LONG // len(BASE) + 1))[:_LONG]
    out = {}
    for name, (kind, over) in (("osmformer-T4", MODELS["osmformer-T4"]), ("osm-rnn-SO3", MODELS["osm-rnn-SO3"]),
                               ("grassmann-r3", ("grassmann", {"rank": 3, "offsets": [1, 2], "max_len": _LONG}))):
        from helpers.models import small_model

        out[name] = trace(small_model(kind, **over), encode_text(VOCAB, text), vocab=VOCAB, text=text)
    rng = np.random.default_rng(0)
    E = -np.cumsum(rng.random((2, 2, 4, _LONG)), axis=2)
    out["cem"] = from_record({"logits": np.zeros((_LONG, 3)), "energies": E, "displacement": np.abs(E)}, "cem",
                             np.zeros(_LONG, int))
    return out


def _array_lengths(trace_json: dict) -> list[int]:
    out = []
    for key in ("x", "y", "z", "text", "customdata"):
        v = trace_json.get(key)
        if v is not None and not isinstance(v, str):
            out.append(max(np.shape(np.asarray(v, dtype=object))))
    return out


def test_long_traces_show_the_window_and_say_so():
    """At the 2,048-character limit every per-position view draws at most the WINDOW positions around the
    cursor (1,170-1,297 for the cursor 1,234) and its caption names them."""
    cursor = 1234
    lo, hi = 1152, 1279  # the window from a multiple of 64 that holds the cursor 32 in
    for name, tr in _long_traces().items():
        assert tr.n_positions == _LONG
        charts = views.all_figures(tr, cursor=cursor)
        assert set(charts) & set(_CAPPED), name
        for vname, (fig, caption) in charts.items():
            if vname not in _CAPPED:
                continue
            cap = _sampling.WINDOW
            per_point = tr.d if vname == "phase_circle" else 1  # its trail: d eigenvalues at each position
            for t in fig.data:
                lengths = _array_lengths(t.to_plotly_json())
                if t.type == "scatter" and t.mode == "lines" and t.x is not None:  # angle lines: wraps are gaps
                    lengths = [len(_line_points(t)[0])]
                if vname != "plane_sphere":  # the cursor's plane on a wireframe sphere: nothing per position
                    assert max(lengths, default=0) <= cap * per_point, (name, vname, t.name, lengths)
                x = t.x if t.type in ("scatter", "heatmap") and t.x is not None else None
                if x is not None and np.asarray(x).dtype.kind in "if" and vname not in (
                        "pca_projection", "torus_angles", "phase_circle", "plane_sphere"):
                    xs = np.asarray(x, dtype=float)
                    xs = xs[np.isfinite(xs)]
                    assert lo <= xs.min() and xs.max() <= hi, (vname, t.name)  # positions of the window
            if vname != "plane_sphere":  # the sphere draws the cursor's plane only: no window
                assert f"{lo:,}–{hi:,} of 2,048 at full resolution" in caption, (vname, caption)
            assert not fig.frames and not fig.layout.sliders, vname  # one cursor per page
            if vname in PER_POSITION:  # every figure marks the cursor, the 3-D scenes included
                assert f"{cursor} '{tr.labels[cursor]}'" in fig.to_json(), f"{vname}: cursor not shown"


def test_unvalidated_figures_pickle_and_read_back():
    """The app caches figures with st.cache_data (pickle): an unvalidated view comes back unvalidated,
    sending the same JSON, and its frames' data can be read like a validated figure's."""
    import copy
    import pickle

    tr = get_trace("osmformer-U3")
    for name in ("phase_circle", "distance_profile", "tangent_heatmap"):
        view = figures.FIGURES[name].draw(tr, cursor=4)
        back = pickle.loads(pickle.dumps(view))
        assert back.caption == view.caption and not back.figure._validate
        assert back.figure.to_json() == view.figure.to_json()
        assert copy.deepcopy(view.figure).to_json() == view.figure.to_json()
    fig = figures.phase_circle(tr, cursor=4, animate=True).figure
    H = tr.states[-1].astype(np.complex128)
    assert fig.frames
    for frame in fig.frames:
        pts = np.asarray(frame.data[0].x) + 1j * np.asarray(frame["data"][0].y)
        _circle_match(pts, np.linalg.eigvals(H[int(frame.name)]))


def test_geometry_computed_only_where_drawn_is_the_same_as_all_at_once():
    """cached_positions: asking for a few positions, then others, then all gives exactly the arrays computed
    for every position in one go (phases, distances from the identity, step distances)."""
    fresh = _random_so3_trace(60)
    want = (figures.trajectory.state_phases(fresh), figures.trajectory.distance_from_identity(fresh),
            figures.trajectory.step_distances(fresh))
    tr = _random_so3_trace(60)
    some = np.array([0, 7, 33])
    np.testing.assert_allclose(figures.trajectory.step_distances(tr, some), want[2][:, some], rtol=1e-12)
    np.testing.assert_allclose(figures.trajectory.state_phases(tr, 0, [5, 59, 7]), want[0][[5, 59, 7]], rtol=1e-12)
    assert tr._view_cache[("dist_step",)][1].sum() == 3  # only those were computed
    figures.distance_profile(tr, size=10)
    got = (figures.trajectory.state_phases(tr), figures.trajectory.distance_from_identity(tr),
           figures.trajectory.step_distances(tr))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


# --------------------------------------------------------------------------------------------- non-finite values
# NaN-safe reductions in every figure, a caption note when values are missing, and
# no raw linear-algebra error from a trace with a NaN.

import dataclasses  # noqa: E402

BAD_POS = 5


def _poisoned(name: str, value: float = float("nan"), **where):
    """A copy of the cached trace ``name`` with ``value`` written into each named array at ``where[field]``
    (an index tuple); the original trace and its view cache are untouched."""
    tr = get_trace(name)
    changes = {}
    for field_name, index in where.items():
        arr = np.array(getattr(tr, field_name), copy=True)
        arr[index] = value
        changes[field_name] = arr
    return dataclasses.replace(tr, **changes)


POISON = {
    "osmformer-U3": {"tangent_stats": (slice(None), slice(None), slice(None), BAD_POS),
                     "tangent_coords": (slice(None), slice(None), slice(None), BAD_POS)},
    "osm-rnn-SO3": {"tangent_stats": (slice(None), 0, 0, BAD_POS)},
    "cem": {"energies": (0, 0, slice(1, None), BAD_POS), "attention_q": (0, 0, BAD_POS)},
    "grassmann-r3": {"reduced": (0, BAD_POS, 1), "gates": (0, BAD_POS, 0)},
    "grassmann-r5": {"reduced": (1, BAD_POS, 0), "inputs": (0, BAD_POS, 0)},
    "transformer": {"attention_q": (0, 0, BAD_POS), "attention_k": (0, 0, BAD_POS)},
}


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("name", sorted(POISON))
def test_views_of_a_trace_with_non_finite_values(name, value, validate):
    """Every view of a trace with a NaN/inf at one position still builds (no raw linear-algebra error, no
    FigureError beyond those of the clean trace), plots no infinity, and says in its caption that values are
    missing."""
    tr = _poisoned(name, value, **POISON[name])
    clean = views.all_figures(get_trace(name), cursor=7)
    charts = views.all_figures(tr, cursor=7)
    assert set(charts) == set(clean)
    noted = []
    for vname, (fig, caption) in charts.items():
        for t in fig.data:
            for key in ("x", "y", "z"):
                v = getattr(t, key, None)
                if v is not None and np.asarray(v).dtype.kind == "f":
                    assert not np.isinf(np.asarray(v)).any(), (vname, key)
            if t.type == "heatmap" and t.zmax is not None:
                assert math.isfinite(t.zmax) and t.zmax > 1e-9, (vname, t.name, t.zmax)
        if "non-finite" in caption:
            noted.append(vname)
        json.loads(fig.to_json())
    expected = {
        "osmformer-U3": {"tangent_heatmap", "tangent_lines", "mixing_share"},
        "osm-rnn-SO3": {"tangent_heatmap", "tangent_lines", "mixing_share"},
        "cem": {"energy_descent", "energy_layer", "energy_tokens", "attention_maps"},
        "grassmann-r3": {"plane_distances", "plane_angles", "plane_similarity", "plucker_heatmap", "gate_share",
                         "decomposability_map"},
        "grassmann-r5": {"plane_distances", "decomposability_map"},
        "transformer": {"attention_maps"},
    }[name]
    assert expected <= set(noted), (expected - set(noted))


def test_one_nan_tangent_does_not_collapse_the_heatmap_colour_range():
    """The colour range of the tangent heatmap is taken over the finite values: one NaN used to make it
    [0, 1e-12], so every finite cell saturated."""
    tr = _poisoned("osmformer-U3", **POISON["osmformer-U3"])
    fig, caption = figures.tangent_heatmap(tr)
    raw, mixed = tr.tangent_norms(False), tr.tangent_norms(True)
    for s in range(raw.shape[1]):
        want = max(np.nanmax(raw[:, s]), np.nanmax(mixed[:, s]))
        heat = [t for t in fig.data if t.name.startswith(figures.tangents._substep_name(tr, s))]
        assert heat and all(t.zmax == pytest.approx(want, rel=1e-6) for t in heat)
        assert all(np.isnan(np.asarray(t.z)[:, BAD_POS]).all() for t in heat)
    assert "1 position has non-finite values" in caption
    fig, caption = figures.generator_heatmap(tr, cursor=BAD_POS)
    assert "non-finite" in caption and all(math.isfinite(t.zmax) for t in fig.data)  # all NaN here


def test_energy_means_and_bands_skip_a_nan_token():
    tr = _poisoned("cem", **POISON["cem"])
    fig, caption = figures.energy_descent(tr)
    mean = np.asarray(_by_name(fig, "L0 attention mean").y)
    assert np.isfinite(mean).all()
    want = np.delete(tr.energy_change()[0, 0], BAD_POS, axis=-1).mean(-1)
    np.testing.assert_allclose(mean, want, rtol=1e-6, atol=1e-9)
    assert "non-finite" in caption


def test_decomposability_is_not_poisoned_after_a_nan_plane():
    """The windowed Plücker average used a cumulative sum: one NaN blanked every later position."""
    tr = _poisoned("grassmann-r3", **POISON["grassmann-r3"])
    fig, caption = figures.decomposability_map(tr, window=2)
    kappa = np.asarray(fig.data[0].z)
    assert np.isfinite(kappa[0, BAD_POS + 4:]).all()
    assert "non-finite" in caption


def test_training_curves_skip_non_finite_values_and_say_so():
    hist = [{"step": s, "loss": 1.0 / (s + 1)} for s in range(10)]
    hist[4]["loss"] = float("inf")
    hist[6]["loss"] = float("nan")
    fig, caption = figures.training_curves({"run": hist}, metric="loss")
    y = np.asarray(fig.data[0].y)
    assert np.isfinite(y).all() and len(y) == 8
    assert "2 logged rows have non-finite values" in caption


def test_torus_angles_are_in_minus_pi_pi():
    """An entry -1 - 0j (a negative zero imaginary part) is drawn at +pi, as groups.matrix_to_angles has it."""
    tr = get_trace("osmformer-T4")
    data = np.array(tr.state_data, copy=True)
    data[-1, BAD_POS, 0] = complex(-1.0, -0.0)
    tr = dataclasses.replace(tr, state_data=data)
    fig, _ = figures.torus_angles(tr)
    ys = np.concatenate([_line_points(t)[1] for t in fig.data if t.name and t.name.startswith("φ")])
    x0, y0 = _line_points(_by_name(fig, "φ<sub>1</sub>"))
    assert ys.min() > -math.pi and float(y0[x0 == BAD_POS][0]) == pytest.approx(math.pi)


def test_surprisal_with_a_non_finite_output_leaves_a_gap_and_says_so():
    from geomlab.figures.surprisal import SurprisalSide, surprisal_figure
    from geomlab.trace import from_record as _fr

    logits = np.zeros((6, 3), np.float32)
    logits[2] = np.nan
    tr = _fr({"logits": logits}, "lstm", np.array([0, 1, 2, 0, 1, 2]))
    fig, cap = surprisal_figure([SurprisalSide(trace=tr, task=None, name="A: x", colour="#000000")])
    y = np.asarray(fig.data[0].y, dtype=float)
    assert np.isnan(y[3]) and np.isfinite(y[[1, 2, 4, 5]]).all()  # logits[2] scores token 3
    assert "1 position has non-finite values" in cap and "mean 1.58 bits" in fig.data[0].name


def test_short_texts_show_every_position():
    """A text of at most WINDOW positions is drawn whole, with no window sentence in the caption."""
    n = _sampling.WINDOW
    tr = _random_so3_trace(n)
    fig, cap = figures.distance_profile(tr, cursor=3)
    assert list(fig.data[0].x) == list(range(n)) and "full resolution" not in cap
    assert not figures.needs_overview(tr) and figures.needs_overview(_random_so3_trace(n + 1))


# --------------------------------------------------------------------------------------------- curated figures
# One cursor per page marked in every figure, colours per index that never repeat, thinned
# ticks on half-width charts, cameras that face the planes


def _cursor_marks(fig, c):
    """The marks a figure draws at position ``c``: shapes named "cursor" at c (a line at c, or the outlined
    row or column c of a category map), a shape named after the cursor (``cursor c '<token>'``: a ring at the
    cursor's point off a position axis), and traces with ``meta="cursor"`` whose data name position c."""
    marks = []
    for s in fig.layout.shapes or ():
        if s.name == "cursor" and (s.x0 in (c, c - 0.5) or s.y0 in (c, c - 0.5)):
            marks.append(("shape", s.type))
        elif (s.name or "").startswith(f"cursor {c} '"):
            marks.append(("shape", s.name))
    for t in fig.data:
        if t.meta == "cursor" and f"{c} '" in json.dumps(t.to_plotly_json(), default=str):
            marks.append(("trace", t.name))
    return marks


@pytest.mark.parametrize("name", ["osm-rnn-SO3", "osmformer-U3", "osmformer-T4", "cem", "grassmann-r3",
                                  "grassmann-r5", "transformer"])
def test_every_figure_marks_the_cursor(name):

    tr = get_trace(name)
    c = 6
    for fname in views.figures_for(tr):
        spec = views.figure_spec(fname)
        fig = views.build_figure(tr, fname, {}, c).figure
        assert _cursor_marks(fig, c), f"{fname}: no mark at the cursor {c}"
        assert not fig.frames and not fig.layout.sliders, fname
        other = views.build_figure(tr, fname, {}, c + 2).figure
        if spec.cursor_arg == "cursor":  # the mark moves with the cursor
            assert not _cursor_marks(other, c) or _cursor_marks(other, c + 2), fname


def test_the_most_geometric_layer_is_the_one_whose_gate_passes_most_of_its_planes():
    import copy

    from geomlab.figures.grassmann import most_geometric_layer

    tr = copy.copy(get_trace("grassmann-r3"))  # a copy: the cached trace keeps its gates
    gates = np.full_like(tr.gates, 0.9)  # every layer keeps 90% of its input
    gates[1] = 0.4  # layer 1: 60% from its planes
    tr.gates = gates
    assert most_geometric_layer(tr) == 1
    gates[1, 0, 0] = np.nan  # a non-finite gate is left out, not a blank layer
    assert most_geometric_layer(tr) == 1
    gates[0] = 0.1
    assert most_geometric_layer(tr) == 0
    tr.gates = np.full_like(gates, np.nan)
    assert most_geometric_layer(tr) == 0
    tr.gates = None
    assert most_geometric_layer(tr) == 0


def test_index_colours_never_repeat():
    for n in (1, 3, 8, 9, 26, 64):
        cols = _style.index_colours(n)
        assert len(cols) == n and len(set(cols)) == n, n
        scale, bar = _style.index_colorscale(n, "angle k")
        # a step scale: each index one flat band of its own colour, the bands in order
        assert [c for _, c in scale[::2]] == cols and scale[0][0] == 0 and scale[-1][0] == 1
        assert len(bar["tickvals"]) <= 12 and bar["ticktext"][0] == "1"
    assert _style.index_colours(7) == _style.PALETTE  # Okabe-Ito without the cursor's vermilion, up to 7


def test_26_torus_angles_get_26_colours_and_a_colour_bar_not_a_legend(validate):
    from helpers.models import small_model

    model = small_model("osm-rnn", group="T", d=26)
    tr = trace(model, encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB)
    fig = figures.torus_angles(tr, cursor=3).figure
    lines = [t for t in fig.data if t.name and t.name.startswith("φ")]
    assert len(lines) == 26 and len({t.line.color for t in lines}) == 26
    assert all(t.showlegend is False for t in lines)
    bars = [t.marker.colorbar for t in fig.data if t.marker is not None and t.marker.colorbar.title.text]
    assert {b.title.text for b in bars} == {"angle k", "position"}
    angle_bar, pos_bar = (next(b for b in bars if b.title.text == t) for t in ("angle k", "position"))
    # both right of the panels, one above the other (not on a panel's tick labels, not on each other)
    assert angle_bar.x >= fig.layout.xaxis2.domain[1] and pos_bar.x >= fig.layout.xaxis2.domain[1]
    assert angle_bar.y - angle_bar.len >= pos_bar.y + pos_bar.len - 1e-9
    assert fig.layout.showlegend is False  # nothing above the title or on the torus's gridlines
    timeline = figures.phase_timeline(tr, cursor=3).figure
    tl = [t for t in timeline.data if t.name.startswith("eigenvalue ")]
    assert len({t.line.color for t in tl}) == 26


def test_tracked_phases_follow_each_eigenvalue():
    """Each column of tracked_phases continues the previous position's eigenvalue: the same set of phases
    per position as the sorted ones, and no more total circular movement than sorting gives."""
    tr = _random_so3_trace(200)
    idx = np.arange(200)
    tracked = figures.trajectory.tracked_phases(tr, 0, idx)
    plain = figures.trajectory.state_phases(tr, 0, idx)
    np.testing.assert_allclose(np.sort(tracked, axis=1), np.sort(plain, axis=1))

    def moved(th):
        return np.abs(np.angle(np.exp(1j * np.diff(th, axis=0)))).sum()

    assert moved(tracked) <= moved(plain) + 1e-9


def test_pca_projection_is_2d_with_the_variance_in_the_axis_titles():
    tr = get_trace("osmformer-U3")
    fig = figures.pca_projection(tr, layer=1, cursor=3).figure
    coords, ratio = figures.trajectory.pca_coords(tr, 1)
    assert all(t.type == "scatter" for t in fig.data)  # 2-D, SVG (no WebGL context to create per redraw)
    np.testing.assert_allclose(fig.data[0].x, coords[:, 0], atol=1e-5)
    np.testing.assert_allclose(fig.data[0].y, coords[:, 1], atol=1e-5)
    assert fig.layout.xaxis.title.text == f"PC1 ({ratio[0]:.1%} of variance)"
    assert fig.layout.yaxis.title.text == f"PC2 ({ratio[1]:.1%} of variance)"
    ring = [sh for sh in fig.layout.shapes if sh.type == "circle"][0]  # the cursor: a ring at its point
    np.testing.assert_allclose([ring.xanchor, ring.yanchor], coords[3, :2], atol=1e-5)
    assert ring.name == f"cursor 3 '{tr.labels[3]}'" and not ring.showlegend  # a legend redraw per move
    assert "orange ring is the cursor" in fig.layout.meta["caption"]
    steps = [sh for sh in fig.layout.shapes if sh.type == "path"][0].path  # the last steps into it
    points = [tuple(map(float, p.strip(" ML").split(","))) for p in steps.split(" L ")]
    np.testing.assert_allclose(points, coords[:4, :2], atol=1e-5)
    # equal scales: a unit of PC1 is as long on screen as a unit of PC2 (the spreads are the variances)
    assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis.scaleratio == 1


def _thinned(axis) -> bool:
    if axis.tickmode == "array":
        return len(axis.tickvals or ()) <= 12
    if axis.type == "category":
        return axis.nticks is not None and axis.nticks <= 12
    return True  # a numeric axis: plotly spaces its own ticks


def test_half_width_figures_have_thinned_ticks():
    """Every figure a view draws at half width keeps at most 12 tick labels per axis at 2,048 positions
    (token ticks at round positions, category axes with nticks); hover names every position."""

    narrow = {name for name in views.FIGURE_ORDER if not figures.FIGURES[name].wide}
    seen = set()
    for name, tr in _long_traces().items():
        for fname in views.figures_for(tr):
            if fname not in narrow:
                continue
            fig = views.build_figure(tr, fname, {}, 1234).figure
            lay = fig.layout
            for key in lay.to_plotly_json():
                if key.startswith(("xaxis", "yaxis")):
                    assert _thinned(lay[key]), (fname, key)
            seen.add(fname)
    assert {"plane_angles", "plucker_heatmap", "plane_similarity", "phase_circle", "pca_projection"} <= seen


def test_token_ticks_are_round_and_few():
    ticks = _style.token_ticks(["x"] * 2048, np.arange(2048))
    assert ticks["tickvals"] == list(range(0, 2001, 200)) and ticks["ticktext"][1] == "200 'x'"
    assert _style.token_ticks(["x"] * 14, np.arange(14))["tickvals"] == list(range(0, 14, 2))
    assert len(_style.token_ticks(["x"] * 500, np.arange(3, 500, 7), max_ticks=5)["tickvals"]) <= 5


def test_sphere_camera_faces_the_planes():
    """plane_sphere was seen edge-on: its camera now looks along the main direction of the planes' poles
    (within the 25° tilt), far enough out for the axis titles."""
    tr = get_trace("grassmann-r3")
    fig = figures.plane_sphere(tr, layer=0, slot=0, cursor=6).figure
    eye = fig.layout.scene.camera.eye
    e = np.array([eye.x, eye.y, eye.z])
    z = tr.reduced[0].astype(np.float64)
    n = np.cross(z[1:], z[:-1])
    n = n[np.linalg.norm(n, axis=1) > 1e-9]
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    main = np.linalg.eigh(n.T @ n)[1][:, -1]
    assert abs(e @ main) / np.linalg.norm(e) >= np.cos(np.radians(25)) - 1e-4  # eye rounded to 4 decimals
    assert np.linalg.norm(e) >= 2.0
    up = fig.layout.scene.camera.up
    assert abs(np.array([up.x, up.y, up.z]) @ e) < 1e-3  # up is across the view


def test_torus_eigenvalues_keep_their_diagonal_order():
    """On the torus each diagonal entry is an eigenvalue with an identity: the eigenvalue colours of the
    circle and the timeline are the angle colours φ_k of torus_angles."""
    tr = get_trace("osmformer-T4")
    tracked = figures.trajectory.tracked_phases(tr, 1, np.arange(T))
    ang = np.angle(np.diagonal(tr.states[1], axis1=1, axis2=2))
    np.testing.assert_allclose(tracked, ang, atol=1e-6)
    circle = figures.phase_circle(tr, layer=1, cursor=5).figure
    rings = circle.layout.shapes  # the cursor's eigenvalues, in order λ1..λd
    np.testing.assert_allclose(np.angle([sh.xanchor + 1j * sh.yanchor for sh in rings]), ang[5], atol=1e-5)
    assert [sh.fillcolor for sh in rings] == _style.index_colours(tr.d)


def test_attention_row_hover_gives_the_osmformer_similarity():
    """The row's hover reads the similarity Re tr(H_i^* H_j) of an OSMFormer (the tour quotes it); a
    Transformer's row has no similarity to give."""
    tr = get_trace("osmformer-U3")
    q = 6
    v = figures.attention_row(tr, layer=1, cursor=q)
    sim = tr.similarity_rows(1, [q])[0]
    text = list(_by_name(v.figure, "weight").text)
    assert len(text) == q + 1 and f"= {sim[3]:.2f}" in text[3] and "similarity" in text[3]
    plain = figures.attention_row(get_trace("transformer"), cursor=q)
    texts = [str(t) for tr_ in plain.figure.data if tr_.text is not None for t in tr_.text]
    assert texts and not any("similarity" in t for t in texts)


def test_pca_caption_shares_add_up_to_their_total():
    """The caption's PC shares and their total are printed to one decimal, so they add up (a fresh user read
    "PC1 9%, PC2 5%, together 15%" as an error)."""
    import re

    tr = get_trace("osmformer-U3")
    cap = figures.pca_projection(tr).caption
    parts = [float(x) for x in re.findall(r"PC\d ([\d.]+)%", cap)]
    total = float(re.search(r"together ([\d.]+)%", cap).group(1))
    assert len(parts) == 2 and abs(sum(parts) - total) <= 0.1 + 1e-9


def test_plane_angles_show_theta2_under_dg_when_theta1_is_zero():
    """For offset 1 (or rank 3) consecutive planes share a line: θ1 = 0, d_g = θ2. The θ2 line is drawn wide
    under the dotted d_g and the caption says why they coincide; otherwise nothing changes."""
    from geomlab.figures.grassmann import DG

    tr = get_trace("grassmann-r3")  # offsets (1, 2): slot 0 is Δ = 1
    v = figures.plane_angles(tr, layer=0, slot=0)
    t2, dg = _by_name(v.figure, "θ<sub>2</sub>"), _by_name(v.figure, DG)
    ok = np.isfinite(np.asarray(t2.y, float))
    np.testing.assert_allclose(np.asarray(t2.y, float)[ok], np.asarray(dg.y, float)[ok], atol=1e-6)
    assert t2.line.width > dg.line.width and "runs along the wide" in v.caption
    other = figures.plane_angles(get_trace("grassmann-r5"), layer=0, slot=1)  # Δ = 3 in R^5: no shared line
    assert "runs along the wide" not in other.caption


def test_energy_dashes_mean_one_thing():
    """Dotted is the cursor token's line in the energy panels, so no layer's displacement line is dotted."""
    from geomlab import trace as trace_mod

    model = small_model("cem", n_layers=4)
    tr = trace_mod.trace(model, encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB)
    fig = figures.energy_descent(tr, cursor=2).figure
    cursor = [t for t in fig.data if t.name.endswith("cursor")]
    disp = [t for t in fig.data if "displacement" in t.name and t.x[0] is not None]
    assert cursor and disp and all(t.line.dash == "dot" for t in cursor)
    assert all(t.line.dash != "dot" for t in disp)


def test_a_click_on_a_grey_eigenvalue_moves_the_cursor_to_its_position():
    tr = get_trace("osm-rnn-SO3")
    fig = figures.phase_circle(tr, cursor=6).figure
    trail = fig.data[1]
    for k in (0, len(trail.x) // 2, len(trail.x) - 1):
        # (as the browser reports it: JSON numbers; customdata [position, θ, k])
        pos = click_target("position", {"x": float(trail.x[k]), "y": float(trail.y[k]),
                                        "customdata": [float(v) for v in trail.customdata[k]]})
        # the dot is an eigenvalue of the last layer's state at the position the click chooses
        eig = np.linalg.eigvals(np.asarray(tr.states[-1, pos["position"]]))
        assert np.min(np.abs(eig - (trail.x[k] + 1j * trail.y[k]))) < 1e-4, (k, pos)
    # the cursor's own eigenvalues (under their rings) choose the cursor, whatever θ is
    mine = [cd for cd in trail.customdata if cd[0] == 6]
    assert len(mine) == tr.d and click_target("position", {"x": 1.0, "customdata": list(map(float, mine[0]))}) == \
        {"position": 6}


def test_an_attention_window_that_holds_little_of_its_rows_weight_says_where_it_lies(monkeypatch):
    """Far along a text whose rows weigh key 0 (left of the window) the map's colour range keeps its floor,
    not the window's noise, and the caption says how much of the cursor's row the window holds and which
    key the row weighs most; a window that holds its rows' weight says nothing of the kind."""
    text = (TEXT * 8)[:200]
    tr = trace(small_model("transformer"), encode_text(VOCAB, text), vocab=VOCAB, text=text)

    def rows_on_key0(layer, rows=None, head=None):
        rows = np.arange(tr.n_positions) if rows is None else np.asarray(rows)
        w = np.zeros((len(rows), tr.n_positions))
        w[:, 0] = 1 - 1e-9 * rows
        w[np.arange(len(rows)), rows] += 1e-9 * rows  # a trace of weight on the diagonal
        return w

    monkeypatch.setattr(tr, "attention_rows", rows_on_key0)
    fig, cap = figures.attention_maps(tr, layer=0, cursor=190)
    assert fig.data[0].zmax == pytest.approx(1e-3)
    assert "The window holds under 0.1% of row 190's weight: the row weighs key 0 'R' most (1, left of the window)" in cap
    tr = trace(small_model("transformer"), encode_text(VOCAB, text), vocab=VOCAB, text=text)
    _, cap = figures.attention_maps(tr, layer=0, cursor=190)
    assert "The window holds" not in cap  # the model's own rows: most of their weight is recent
