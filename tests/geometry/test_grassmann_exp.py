"""Property tests of the Grassmann exponential and logarithm (geomlab.geometry.planes; Edelman, Arias & Smith
1998), against principal angles, projectors and the textbook form of the geodesic."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.geometry import planes as P

seeds = st.integers(0, 2**31 - 1)
ranks = st.integers(3, 9)


def _frame(g: torch.Generator, r: int) -> torch.Tensor:
    return torch.linalg.qr(torch.randn(r, 2, generator=g, dtype=torch.float64))[0]


def _tangent(g: torch.Generator, Y: torch.Tensor) -> torch.Tensor:
    G = torch.randn(*Y.shape, generator=g, dtype=torch.float64)
    return G - Y @ (Y.T @ G)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, r=ranks, t=st.floats(-1.5, 1.5))
def test_exp_matches_the_textbook_form_and_stays_orthonormal(seed, r, t):
    """``Y V cos(S t) V^T + U sin(S t) V^T`` computed directly (full 2x2 V) equals grassmann_exp."""
    g = torch.Generator().manual_seed(seed)
    Y = _frame(g, r)
    Delta = _tangent(g, Y)
    U, S, Vh = torch.linalg.svd(Delta, full_matrices=False)
    V = Vh.T
    direct = Y @ V @ torch.diag(torch.cos(S * t)) @ Vh + U @ torch.diag(torch.sin(S * t)) @ Vh
    out = P.grassmann_exp(Y, Delta, t)
    torch.testing.assert_close(out, direct, rtol=0, atol=1e-12)
    torch.testing.assert_close(out.T @ out, torch.eye(2, dtype=torch.float64), rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, r=ranks, t=st.floats(-math.pi / 2, math.pi / 2))
def test_rank_one_step_turns_by_one_principal_angle(seed, r, t):
    g = torch.Generator().manual_seed(seed)
    Y = _frame(g, r)
    u = _tangent(g, Y)[:, 0]
    v = torch.randn(2, generator=g, dtype=torch.float64)
    Delta = torch.outer(u / u.norm(), v / v.norm())
    theta = P.principal_angles(Y, P.grassmann_exp(Y, Delta, t))
    assert theta[0] == pytest.approx(0.0, abs=1e-7)
    assert theta[1] == pytest.approx(abs(t), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=seeds, r=ranks)
def test_log_then_exp_reaches_the_plane_and_its_norm_is_the_distance(seed, r):
    g = torch.Generator().manual_seed(seed)
    Y1, Y2 = _frame(g, r), _frame(g, r)
    Delta = P.grassmann_log(Y1, Y2)
    assert Y1.T @ Delta == pytest.approx(torch.zeros(2, 2, dtype=torch.float64), abs=1e-10)
    Y = P.grassmann_exp(Y1, Delta, 1.0)
    torch.testing.assert_close(Y @ Y.T, Y2 @ Y2.T, rtol=0, atol=1e-8)  # same plane: same projector
    assert float(torch.linalg.matrix_norm(Delta)) == pytest.approx(float(P.geodesic_distance(Y1, Y2)), abs=1e-8)


def test_exp_at_zero_is_bit_identical_and_log_refuses_a_right_angle():
    g = torch.Generator().manual_seed(3)
    Y = _frame(g, 5)
    assert torch.equal(P.grassmann_exp(Y, _tangent(g, Y), 0.0), Y)
    E = torch.eye(4, dtype=torch.float64)
    with pytest.raises(P.PlaneError, match="pi/2"):
        P.grassmann_log(E[:, :2], E[:, 2:])
    with pytest.raises(P.PlaneError):
        P.grassmann_exp(Y, torch.zeros(5, 3), 1.0)
