"""Property tests of the plane geometry (geomlab.geometry.planes; grassmann.md §1.3, §5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from geomlab.figures import plane_scenes
from geomlab.geometry import planes as P

seeds = st.integers(0, 2**31 - 1)
ranks = st.integers(3, 8)


def _vecs(seed: int, r: int, n: int = 2) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return list(torch.randn(n, r, generator=g, dtype=torch.float64))


def _basis(a, b):
    Q, ok = P.plane_basis(a, b)
    assume(bool(ok))
    return Q


def _well_posed(a, b) -> bool:
    return float(torch.linalg.vector_norm(P.plucker(a, b))) > 1e-3 * float(a.norm() * b.norm())


def test_plucker_values_and_index_order():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    b = torch.tensor([0.5, -1.0, 2.0, 0.0], dtype=torch.float64)
    p = P.plucker(a, b)
    expected = [a[i] * b[j] - a[j] * b[i] for i in range(4) for j in range(i + 1, 4)]
    assert torch.allclose(p, torch.stack(expected))
    assert P.plucker_size(4) == 6 and P.plucker_rank(6) == 4
    A = P.bivector(p)
    assert torch.allclose(A, torch.outer(a, b) - torch.outer(b, a))


@given(seeds, ranks, st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3))
def test_plane_invariance_under_positive_basis_change(seed, r, c1, c2, c3, c4):
    a, b = _vecs(seed, r)
    assume(_well_posed(a, b))
    det = c1 * c4 - c2 * c3
    assume(abs(det) > 1e-2)
    p = P.normalize_plucker(P.plucker(a, b))
    q = P.normalize_plucker(P.plucker(c1 * a + c2 * b, c3 * a + c4 * b))
    # a positive determinant keeps the oriented plane, a negative one flips it
    assert torch.allclose(q, p if det > 0 else -p, atol=1e-8)
    assert torch.allclose(P.normalize_plucker(P.plucker(b, a)), -p, atol=1e-12)


@given(seeds, st.integers(4, 8))
def test_quadratic_plucker_relations(seed, r):
    a, b, c = _vecs(seed, r, 3)
    p = P.normalize_plucker(P.plucker(a, b))
    assert P.plucker_relations(p).abs().max() < 1e-12
    # a generic vector of R^P, here a sum of two planes, is not decomposable
    g = P.plucker(a, b) + P.plucker(c, torch.roll(c, 1) + b.flip(0))
    assume(float(P.plucker_relations(g).abs().max()) > 0)
    assert P.plucker_relations(g).abs().max() > 1e-6 * g.norm() ** 2


@given(seeds, ranks)
def test_plucker_inner_product_is_product_of_cosines(seed, r):
    a, b, c, d = _vecs(seed, r, 4)
    Q1, Q2 = _basis(a, b), _basis(c, d)
    th = P.principal_angles(Q1, Q2)
    assert 0 <= th[0] <= th[1] <= math.pi / 2 + 1e-12
    p1 = P.normalize_plucker(P.plucker(a, b))
    p2 = P.normalize_plucker(P.plucker(c, d))
    assert abs(abs(float(p1 @ p2)) - float(torch.cos(th).prod())) < 1e-10
    fs = P.fubini_study_distance(p1, p2)
    assert abs(float(fs) - math.acos(min(1.0, float(torch.cos(th).prod())))) < 1e-6


@given(seeds, ranks)
def test_distances_consistent(seed, r):
    a, b, c, d = _vecs(seed, r, 4)
    Q1, Q2 = _basis(a, b), _basis(c, d)
    proj = torch.linalg.matrix_norm(Q1 @ Q1.T - Q2 @ Q2.T) / math.sqrt(2)
    assert torch.allclose(P.dist(Q1, Q2, "chordal"), proj, atol=1e-10)
    dg = P.dist(Q1, Q2)
    assert 0 <= dg <= math.pi / math.sqrt(2) + 1e-12
    assert torch.allclose(dg, P.dist(Q2, Q1), atol=1e-10)
    assert float(P.dist(Q1, Q1)) < 1e-7
    # distances are functions of the plane, not the basis
    Q1b = _basis(2 * a - b, a + 3 * b)
    assert torch.allclose(P.dist(Q1b, Q2), dg, atol=1e-8)
    th = P.principal_angles(Q1, Q2)
    bc = math.sqrt(max(0.0, 1 - float(torch.cos(th).prod()) ** 2))
    assert abs(float(P.dist(Q1, Q2, "binet_cauchy")) - bc) < 1e-10
    assert torch.allclose(P.dist(Q1, Q2, "fubini_study"), P.fubini_study_distance(
        P.plucker(a, b), P.plucker(c, d)), atol=1e-8)
    with pytest.raises(ValueError):
        P.dist(Q1, Q2, "nope")


@pytest.mark.parametrize("delta", [1e-4, 1e-8, 1e-11])
def test_principal_angles_small_angle_precision(delta):
    e = torch.eye(5, dtype=torch.float64)
    Q1 = e[:, :2]
    Q2 = torch.stack([e[:, 0], math.cos(delta) * e[:, 1] + math.sin(delta) * e[:, 2]], dim=-1)
    th = P.principal_angles(Q1, Q2)
    assert abs(float(th[0])) < 1e-15
    assert abs(float(th[1]) - delta) < 1e-6 * delta  # arccos(cos delta) would lose this entirely


@given(seeds, ranks, st.floats(0, 1))
def test_interpolation_endpoints_and_constant_speed(seed, r, s):
    a, b, c, d = _vecs(seed, r, 4)
    Q1, Q2 = _basis(a, b), _basis(c, d)
    D = float(P.geodesic_distance(Q1, Q2))
    g0, g1, gs = P.interpolate(Q1, Q2, 0.0), P.interpolate(Q1, Q2, 1.0), P.interpolate(Q1, Q2, s)
    for G in (g0, g1, gs):
        assert torch.allclose(G.T @ G, torch.eye(2, dtype=G.dtype), atol=1e-10)
    # gamma(0) is U1 with Q1's orientation; gamma(1) spans U2
    assert torch.allclose(P.plucker(g0[:, 0], g0[:, 1]), P.plucker(Q1[:, 0], Q1[:, 1]), atol=1e-10)
    assert float(P.geodesic_distance(g1, Q2)) < 1e-6
    assert abs(float(P.geodesic_distance(Q1, gs)) - s * D) < 1e-6
    assert abs(float(P.geodesic_distance(gs, Q2)) - (1 - s) * D) < 1e-6
    many = P.interpolate(Q1, Q2, torch.tensor([0.0, s, 1.0], dtype=torch.float64))
    assert many.shape == (3, r, 2) and torch.allclose(many[1], gs, atol=1e-12)


@given(seeds)
def test_pole_and_great_circle_r3(seed):
    a, b, c, d = _vecs(seed, 3, 4)
    assume(_well_posed(a, b) and _well_posed(c, d))
    n = plane_scenes.pole(a, b)
    assert torch.allclose(n, torch.linalg.cross(a, b) / torch.linalg.cross(a, b).norm(), atol=1e-12)
    assert torch.allclose(plane_scenes.pole(b, a), -n, atol=1e-12)
    circ = plane_scenes.great_circle(a, b, 33)
    assert circ.shape == (33, 3)
    assert torch.allclose(circ.norm(dim=-1), torch.ones(33, dtype=circ.dtype), atol=1e-12)
    assert (circ @ n).abs().max() < 1e-12
    # two planes in R^3 share a line: theta_1 = 0, theta_2 = arccos |n1 . n2|
    th = P.principal_angles(_basis(a, b), _basis(c, d))
    assert float(th[0]) < 1e-6
    assert abs(float(th[1]) - math.acos(min(1.0, abs(float(n @ plane_scenes.pole(c, d)))))) < 1e-6


@given(seeds, st.integers(4, 8))
def test_project3_coverage_is_product_of_cosines(seed, r):
    a, b = _vecs(seed, r)
    Q = _basis(a, b)
    g = torch.Generator().manual_seed(seed + 1)
    E, _ = torch.linalg.qr(torch.randn(r, 3, generator=g, dtype=torch.float64))
    a3, b3, n, cov = plane_scenes.project3(a, b, E)
    cos = torch.linalg.svdvals(Q.T @ E)  # cosines of the principal angles plane vs span(E)
    assert abs(float(cov) - float(cos.prod())) < 1e-8
    assert 0 <= float(cov) <= 1
    assert torch.allclose(a3, E.T @ a) and abs(float(n.norm()) - 1) < 1e-10
    # coordinate axes: the normal is (p_jk, -p_ik, p_ij) / norm; a plane inside the window has coverage 1
    a0 = torch.zeros(r, dtype=torch.float64)
    a0[:3] = a[:3]
    b0 = torch.zeros(r, dtype=torch.float64)
    b0[:3] = b[:3]
    assume(_well_posed(a0, b0))
    assert abs(float(plane_scenes.project3(a0, b0, (0, 1, 2))[3]) - 1) < 1e-10
    with pytest.raises(ValueError):
        plane_scenes.project3(a, b, (0, 0, 1))


def test_pca_and_top_axes():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(200, 6, generator=g, dtype=torch.float64) * torch.tensor([5.0, 0.1, 4.0, 0.1, 3.0, 0.1])
    E = plane_scenes.pca_axes(Z)
    assert E.shape == (6, 3)
    assert torch.allclose(E.T @ E, torch.eye(3, dtype=E.dtype), atol=1e-8)
    assert set(int(i) for i in E.abs().argmax(0)) == {0, 2, 4}
    p = P.normalize_plucker(P.plucker(Z[:, 0:1] * torch.eye(6)[0], Z[:, 2:3] * torch.eye(6)[2] + 1e-3))
    energy = P.coordinate_energy(p)
    assert energy.shape == (6, 6) and torch.allclose(energy, energy.T)
    assert set(plane_scenes.top_axes(energy, 2)) == {0, 2}


@given(seeds, st.integers(4, 8), st.floats(0.05, 0.95))
def test_decomposability_ratio(seed, r, w):
    a, b = _vecs(seed, r)
    assume(_well_posed(a, b))
    p = P.normalize_plucker(P.plucker(a, b))
    assert abs(float(P.decomposability(p)) - 1) < 1e-10
    D = P.dominant_plane(p)
    assert torch.allclose(P.plucker(D[:, 0], D[:, 1]), p, atol=1e-8)
    e = torch.eye(r, dtype=torch.float64)
    mix = w * P.plucker(e[0], e[1]) + (1 - w) * P.plucker(e[2], e[3])
    assert abs(float(P.decomposability(mix)) - max(w, 1 - w) ** 2 / (w**2 + (1 - w) ** 2)) < 1e-10
    assert torch.isnan(P.decomposability(torch.zeros_like(p)))


def test_degenerate_pairs_are_finite_with_finite_gradients():
    for mode in ("clamp", "smooth"):
        a = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], requires_grad=True)
        b = torch.tensor([[2.0, 4.0, 6.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], requires_grad=True)
        p = P.normalize_plucker(P.plucker(a, b), eps=1e-6, mode=mode)
        assert torch.isfinite(p).all() and p.abs().max() == 0
        (p.sum() + (p * torch.arange(3.0)).sum()).backward()
        assert torch.isfinite(a.grad).all() and torch.isfinite(b.grad).all()
    Q, ok = P.plane_basis(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([2.0, 4.0, 6.0]))
    assert not bool(ok) and torch.isfinite(Q).all()


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError):
        P.plucker(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError):
        P.plucker_rank(7)
    with pytest.raises(ValueError):
        plane_scenes.pole(torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError):
        P.principal_angles(torch.zeros(4, 2), torch.zeros(5, 2))
    with pytest.raises(ValueError):
        P.normalize_plucker(torch.zeros(3), mode="bad")
    assert issubclass(P.PlaneError, ValueError)
    # numpy input works
    assert P.plucker(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])).tolist() == [1.0, 0.0, 0.0]
