"""Non-finite input to the geometry, and its edges (the identity, the cut locus).

Class 1: every public function of ``geomlab.geometry.groups`` and ``geomlab.geometry.planes`` returns NaN for non-finite input
(or raises the module's own error), never a finite value made up from a NaN, never a raw linear-algebra error
and never a signal (LAPACK's eigen/SVD routines are never given a NaN).
Class 2: finite gradients (0 at distance 0) of ``norm``, ``dist`` and the Binet–Cauchy distance; one angle
convention ``(-pi, pi]`` for every dtype; the log of a float32 rotation near a half-turn.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.figures import plane_scenes
from geomlab.geometry import planes
from geomlab.geometry.groups import GroupError, all_groups, get_group, matrix_to_angles
from geomlab.geometry.planes import PlaneError

GROUPS = all_groups((1, 2, 3, 4))
seeds = st.integers(min_value=0, max_value=2**31 - 1)
bad_values = st.sampled_from([float("nan"), float("inf"), float("-inf")])
ROOT = Path(__file__).resolve().parents[2]


def _dtype(g, double):
    if g.is_complex:
        return torch.complex128 if double else torch.complex64
    return torch.float64 if double else torch.float32


def _poison(X, i, j, value):
    X = X.clone()
    X[..., i, j] = complex(value, 0.0) if X.is_complex() else value
    return X


def _all_nan(x):
    return bool(torch.isnan(x).all())


# ------------------------------------------------------------------------------------------------- class 1: groups


@settings(max_examples=60, deadline=None)
@given(g=st.sampled_from(GROUPS), seed=seeds, data=st.data(), value=bad_values, double=st.booleans())
def test_group_analysis_of_a_non_finite_matrix_is_nan(g, seed, data, value, double):
    """eigen_angles, log, dist, reproject give NaN (belongs False) for a matrix with one NaN/inf entry, wherever
    it is (above the diagonal too); before, eigen_angles of a NaN above the diagonal was finite, the torus
    reproject turned a NaN into a unit entry and LAPACK was handed the NaN."""
    i = data.draw(st.integers(0, g.d - 1))
    j = data.draw(st.integers(0, g.d - 1))
    G = torch.Generator().manual_seed(seed)
    dt = _dtype(g, double)
    H = g.random_point(2, generator=G, dtype=dt)
    Hbad = _poison(H, i, j, value)  # both batch items poisoned
    assert _all_nan(g.eigen_angles(Hbad))
    assert _all_nan(g.log(Hbad))
    assert _all_nan(g.reproject(Hbad))
    assert not bool(g.belongs(Hbad).any())
    assert _all_nan(g.dist(Hbad, H))
    assert _all_nan(g.dist(H, Hbad))
    # one bad item in a batch spoils only that item
    mixed = torch.stack([Hbad[0], H[1]])
    ang = g.eigen_angles(mixed)
    assert _all_nan(ang[0]) and bool(torch.isfinite(ang[1]).all())
    dist = g.dist(mixed, H)
    assert math.isnan(float(dist[0])) and float(dist[1]) < 1e-3


@settings(max_examples=60, deadline=None)
@given(g=st.sampled_from(GROUPS), seed=seeds, data=st.data(), value=bad_values,
       method=st.sampled_from(["auto", "eigh", "matrix_exp"]))
def test_exp_of_a_non_finite_algebra_element_is_nan_not_a_linalg_error(g, seed, data, value, method):
    """exp used to raise a raw torch._C._LinAlgError from eigh; now NaN, with a NaN gradient, never a raise.
    T reads only the diagonal and O-block only its blocks (documented), so the bad entry is put there."""
    G = torch.Generator().manual_seed(seed)
    A = g.proj(torch.randn(g.d, g.d, generator=G, dtype=torch.float64).to(_dtype(g, True)))
    i = data.draw(st.integers(0, g.d - 1))
    if g.name == "T":
        j = i
    elif g.name == "O-block":
        b = g.block
        j = (i // b) * b + data.draw(st.integers(0, b - 1))
    else:
        j = data.draw(st.integers(0, g.d - 1))
    Abad = _poison(A, i, j, value).requires_grad_()
    H = g.exp(Abad, method=method)
    if g.name == "T":  # elementwise on the diagonal
        assert not math.isfinite(abs(complex(H[i, i].detach())))
    elif g.name == "O-block":  # block by block: the block holding the bad entry
        lo = (i // g.block) * g.block
        assert not bool(torch.isfinite(H[lo:lo + g.block, lo:lo + g.block]).any())
    else:
        assert not bool(torch.isfinite(H).any())
    H.abs().sum().backward()
    assert not bool(torch.isfinite(Abad.grad[i, j]).all())


def test_nan_into_every_group_function_never_kills_the_process():
    """A NaN passed to eigen_angles or dist could end the process inside MKL's eigenvalue routine: run every
    analysis function on NaN/inf matrices in a child process and require a clean exit."""
    code = textwrap.dedent("""
        import torch
        from geomlab.geometry.groups import all_groups
        for g in all_groups((1, 2, 3, 4, 8)):
            for double in (True, False):
                dt = (torch.complex128 if double else torch.complex64) if g.is_complex else (
                    torch.float64 if double else torch.float32)
                for value in (float("nan"), float("inf")):
                    H = g.random_point(3, dtype=dt)
                    H[..., 0, -1] = value  # above the diagonal
                    A = g.proj(g.random_point(3, dtype=dt))
                    A[..., 0, 0] = value  # inside the algebra's support for every group (T: diagonal)
                    for out in (g.eigen_angles(H), g.log(H), g.dist(H, H), g.reproject(H),
                                g.exp(A), g.exp(g.proj(A)), g.norm(A)):
                        assert not bool(torch.isfinite(out).all()), (g, value)
                    g.belongs(H)
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "ok" in res.stdout, (res.returncode, res.stderr[-2000:])


# ------------------------------------------------------------------------------------------------- class 1: planes


def _basis(r, seed):
    G = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(r, 2, generator=G, dtype=torch.float64))
    return Q


@settings(max_examples=60, deadline=None)
@given(seed=seeds, r=st.integers(3, 7), data=st.data(), value=bad_values)
def test_plane_functions_of_non_finite_input_are_nan_or_plane_error(seed, r, data, value):
    i = data.draw(st.integers(0, r - 1))
    k = data.draw(st.integers(0, 1))
    Q1, Q2 = _basis(r, seed), _basis(r, seed + 1)
    bad = Q1.clone()
    bad[i, k] = value
    for out in (planes.principal_angles(bad, Q2), planes.principal_angles(Q2, bad),
                planes.interpolate(bad, Q2, 0.3), planes.interpolate(Q2, bad, torch.tensor([0.0, 1.0]))):
        assert _all_nan(out)
    for metric in ("geodesic", "chordal", "fubini_study", "binet_cauchy"):
        assert _all_nan(planes.dist(bad, Q2, metric)), metric
    Q, ok = planes.plane_basis(bad[:, 0], bad[:, 1])
    assert not bool(ok) and _all_nan(Q)
    *_, cov = plane_scenes.project3(bad[:, 0], bad[:, 1])
    assert math.isnan(float(cov))
    p = planes.plucker(bad[:, 0], bad[:, 1])
    assert _all_nan(planes.decomposability(p))
    assert _all_nan(planes.dominant_plane(p))
    energy = planes.coordinate_energy(p)
    with pytest.raises(PlaneError, match="energy"):
        plane_scenes.top_axes(energy)
    for f in (planes.plucker_rank, planes.plucker_size):
        with pytest.raises(PlaneError):
            f(value)
    Z = torch.randn(8, r, dtype=torch.float64)
    Z[2, i] = value
    with pytest.raises(PlaneError, match="Z"):
        plane_scenes.pca_axes(Z)


# ------------------------------------------------------------------------------------------------- class 2: edges


@pytest.mark.parametrize("g", GROUPS, ids=repr)
@pytest.mark.parametrize("double", [True, False])
def test_norm_gradient_at_zero_is_zero(g, double):
    A = torch.zeros(g.d, g.d, dtype=_dtype(g, double), requires_grad=True)
    g.norm(A).backward()
    assert bool(torch.isfinite(A.grad).all()) and float(A.grad.abs().max()) == 0.0


@settings(max_examples=40, deadline=None)
@given(g=st.sampled_from(GROUPS), seed=seeds, double=st.booleans())
def test_dist_gradient_at_distance_zero_is_zero(g, seed, double):
    """dist(H, H) and dist(I, I) have finite gradients, not NaN (eigvals' backward at repeated eigenvalues),
    exactly 0 where the distance is exactly 0 (in float32 dist(H, H) is ~1e-7 and its gradient, like that of
    |x| near 0, has size up to about 1)."""
    dt = _dtype(g, double)
    H = g.random_point(generator=torch.Generator().manual_seed(seed), dtype=dt)
    for P in (H, g.identity(dtype=dt)):
        H1 = P.clone().requires_grad_()
        H2 = P.clone().requires_grad_()
        dist = g.dist(H1, H2)
        dist.backward()
        for X in (H1, H2):
            assert bool(torch.isfinite(X.grad).all()) and float(X.grad.abs().max()) <= 2.0
            if float(dist.detach()) == 0.0:
                assert float(X.grad.abs().max()) == 0.0


@settings(max_examples=40, deadline=None)
@given(g=st.sampled_from(GROUPS), seed=seeds, scale=st.floats(0.05, 2.0))
def test_dist_gradient_matches_finite_differences(g, seed, scale):
    G = torch.Generator().manual_seed(seed)
    dt = _dtype(g, True)
    H1 = g.random_point(generator=G, dtype=dt)
    step = g.exp(g.proj(scale * torch.randn(g.d, g.d, generator=G, dtype=torch.float64).to(dt)))
    H2 = H1 @ step
    A = g.proj(torch.randn(g.d, g.d, generator=G, dtype=torch.float64).to(dt))
    e = torch.zeros((), dtype=torch.float64, requires_grad=True)
    y = g.dist(H1 @ g.exp(e * A), H2)
    y.backward()
    h = 1e-6
    fd = (g.dist(H1 @ g.exp(h * A), H2) - g.dist(H1 @ g.exp(-h * A), H2)) / (2 * h)
    if 1e-3 < float(y.detach()) < math.pi * 0.9:  # smooth away from 0 and the cut
        assert abs(float(fd) - float(e.grad)) < 1e-5 * max(1.0, abs(float(fd)))


@settings(max_examples=40, deadline=None)
@given(seed=seeds, r=st.integers(2, 7))
def test_binet_cauchy_gradient_at_equal_planes_is_zero(seed, r):
    Q = _basis(r, seed)
    Q1 = Q.clone().requires_grad_()
    Q2 = Q.clone().requires_grad_()
    planes.binet_cauchy_distance(Q1, Q2).backward()
    for X in (Q1, Q2):
        assert bool(torch.isfinite(X.grad).all()) and float(X.grad.abs().max()) < 1e-6


@settings(max_examples=80, deadline=None)
@given(seed=seeds, name=st.sampled_from(["O", "SO", "U", "SU", "T"]), d=st.integers(2, 4),
       double=st.booleans(), neg_zero=st.booleans(), tiny=st.sampled_from([0.0, 1e-17, 1e-12, 1e-9]))
def test_eigen_angles_are_in_minus_pi_pi_for_every_dtype(seed, name, d, double, neg_zero, tiny):
    """An eigenvalue at (or within rounding of) -1 gives +pi, never -pi, whatever the sign of the zero imaginary
    part and the dtype (float32 rounds -pi + 1e-9 to -pi)."""
    g = get_group(name, d)
    dt = _dtype(g, double)
    sgn = -1.0 if neg_zero else 1.0
    ang = torch.tensor([math.pi - tiny] + [0.5 * k for k in range(1, d)], dtype=torch.float64)
    ang[0] = sgn * ang[0]
    if g.is_complex:
        z = torch.polar(torch.ones_like(ang), ang)
        if tiny == 0.0:
            z[0] = complex(-1.0, sgn * 0.0)
        if name == "SU":
            z[1] = z[1] / torch.prod(z)  # det 1
        D = torch.diag_embed(z)
        if name == "T":
            H = D
        else:
            Q = get_group("U", d).random_point(generator=torch.Generator().manual_seed(seed), dtype=torch.complex128)
            H = Q @ D @ Q.mH
    else:
        c, s = math.cos(ang[0]), math.sin(ang[0])
        R = torch.eye(d, dtype=torch.float64)
        R[:2, :2] = torch.tensor([[c, -s], [s, c]])
        if tiny == 0.0:
            R[:2, :2] = torch.tensor([[-1.0, sgn * 0.0], [-sgn * 0.0, -1.0]])
        Q = get_group("SO", d).random_point(generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        H = Q @ R @ Q.mT
    H = H.to(dt)
    real = torch.float64 if double else torch.float32
    pi = torch.tensor(math.pi, dtype=real)
    for theta in [g.eigen_angles(H)] + ([matrix_to_angles(H), torch.diagonal(g.log(H)).imag] if name == "T" else []):
        assert theta.dtype == real
        assert bool((theta > -pi).all()) and bool((theta <= pi).all()), theta


@settings(max_examples=60, deadline=None)
@given(seed=seeds, name=st.sampled_from(["SO", "O", "O-block"]), delta_exp=st.floats(-6.0, -2.0))
def test_log_of_a_float32_rotation_near_a_half_turn(seed, name, delta_exp):
    """log of a float32 rotation by pi - delta: within 1e-5 of the generator (it was off by up to ~1e-3 and
    could refuse the det +1 matrix as det -1)."""
    d = 3
    g = get_group(name, 6, block=3) if name == "O-block" else get_group(name, d)
    G = torch.Generator().manual_seed(seed)
    theta = math.pi - 10.0 ** delta_exp
    so = get_group("SO", 3)
    blocks = []
    for _ in range(g.d // 3):
        c = torch.randn(3, generator=G, dtype=torch.float64)
        A = so.from_coords(c)
        blocks.append(A * theta / (so.norm(A) / math.sqrt(2)))  # rotation angle theta
    A = torch.block_diag(*blocks)
    H = torch.linalg.matrix_exp(A).to(torch.float32)
    L = g.log(H)
    assert float((L.double() - A).abs().max()) < 1e-5
    assert float(g.dist(g.identity(), H)) == pytest.approx(float(g.norm(A)), abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(seed=seeds, d=st.sampled_from([4, 5, 6]), delta_exp=st.floats(-10.0, -5.0), double=st.booleans(),
       name=st.sampled_from(["SO", "O"]))
def test_log_of_a_nearly_double_half_turn_is_a_logarithm(seed, d, delta_exp, double, name):
    """Two planes rotated by pi - delta (delta near the old 1e-7 cut tolerance): float32 rounding splits the
    nearly double pair across a phase tolerance, and the old cut handling then mixed the planes (exp(log H) off
    by up to ~1)."""
    g = get_group(name, d)
    G = torch.Generator().manual_seed(seed)
    th = math.pi - 10.0 ** delta_exp
    R = torch.tensor([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]], dtype=torch.float64)
    A0 = torch.block_diag(R, R, torch.eye(d - 4, dtype=torch.float64))
    Q = get_group("SO", d).random_point(generator=G, dtype=torch.float64)
    H = (Q @ A0 @ Q.mT).to(torch.float64 if double else torch.float32)
    L = g.log(H)
    # within the cut tolerance (1e-7 rad) the planes are taken as half-turns: exp(log H) = H to ~delta there
    assert float((torch.linalg.matrix_exp(L.double()) - H.double()).abs().max()) < (2e-7 if double else 1e-5)
    assert float(g.norm(L.double())) <= math.sqrt(4) * math.pi + 1e-6
