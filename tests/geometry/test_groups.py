"""Property tests for geomlab.geometry.groups (issue #2; osm.md §2.2, §4, §7.3, §8).

Random matrices come from a torch generator seeded by hypothesis, so failures shrink to a reproducible seed.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.geometry.groups import (
    GROUP_NAMES,
    GroupError,
    MatrixGroup,
    all_groups,
    angles_to_matrix,
    from_real,
    get_group,
    matrix_to_angles,
    real_embed,
)

DIMS = (1, 2, 3, 4, 8)
GROUPS = all_groups(DIMS)
GROUP_IDS = [repr(g) for g in GROUPS]
seeds = st.integers(min_value=0, max_value=2**31 - 1)
PER_GROUP_EXAMPLES = 4  # every group x d is exercised; hypothesis varies seeds and scales


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def dtype_for(g: MatrixGroup, double: bool = True) -> torch.dtype:
    if g.is_complex:
        return torch.complex128 if double else torch.complex64
    return torch.float64 if double else torch.float32


def rand_matrix(g: MatrixGroup, *batch, seed: int, double: bool = True, scale: float = 1.0) -> torch.Tensor:
    """A Gaussian ambient matrix of the group's kind, shape (*batch, d, d)."""
    G = gen(seed)
    re = torch.randn(*batch, g.d, g.d, generator=G, dtype=torch.float64)
    if g.is_complex:
        im = torch.randn(*batch, g.d, g.d, generator=G, dtype=torch.float64)
        Y = torch.complex(re, im)
    else:
        Y = re
    return (scale * Y).to(dtype_for(g, double))


def rand_coords(g: MatrixGroup, *batch, seed: int, double: bool = True) -> torch.Tensor:
    c = torch.randn(*batch, g.dim, generator=gen(seed), dtype=torch.float64)
    return c.to(torch.float64 if double else torch.float32)


def close(a, b, atol=1e-9, rtol=1e-7):
    torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


# ----------------------------------------------------------------------------------------------------------------------
# basic facts
# ----------------------------------------------------------------------------------------------------------------------


def test_every_name_and_dims_exist():
    names = {g.name for g in GROUPS}
    assert names == set(GROUP_NAMES)
    for d in DIMS:
        assert get_group("O", d).dim == d * (d - 1) // 2
        assert get_group("SO", d).dim == d * (d - 1) // 2
        assert get_group("U", d).dim == d * d
        assert get_group("SU", d).dim == d * d - 1
        assert get_group("T", d).dim == d
    assert get_group("O-block", 8, block=2).dim == 4
    assert get_group("O-block", 8, block=4).dim == 12
    assert get_group("U", 3).is_complex and get_group("T", 3).is_complex and get_group("SU", 3).is_complex
    assert not get_group("O", 3).is_complex and not get_group("O-block", 4, block=2).is_complex


def test_spec_roundtrip_and_equality():
    for g in GROUPS:
        h = get_group(**g.spec)
        assert h == g and hash(h) == hash(g)
    assert get_group("O", 4) != get_group("SO", 4)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
def test_identity_and_random_points_belong(g):
    I = g.identity(3, 2)
    assert I.shape == (3, 2, g.d, g.d) and I.dtype == g.default_dtype
    assert bool(g.belongs(I).all())
    for double in (False, True):
        H = g.random_point(5, generator=gen(1), dtype=dtype_for(g, double))
        assert H.shape == (5, g.d, g.d) and H.dtype == dtype_for(g, double)
        assert bool(g.belongs(H, atol=1e-5).all())
    # the generator makes it reproducible
    close(g.random_point(4, generator=gen(7)), g.random_point(4, generator=gen(7)), atol=0, rtol=0)


# ----------------------------------------------------------------------------------------------------------------------
# the algebra: proj, inner, coordinates
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_proj_idempotent_and_residual_orthogonal(g, seed):
    Y = rand_matrix(g, 4, seed=seed)
    P = g.proj(Y)
    close(g.proj(P), P, atol=1e-12)
    # the residual is orthogonal to the whole algebra: to every basis element, hence to random elements
    R = Y - P
    if g.dim:
        basis = g.from_coords(torch.eye(g.dim, dtype=torch.float64))  # (dim, d, d)
        close(g.inner(R.unsqueeze(-3), basis), torch.zeros(4, g.dim, dtype=torch.float64), atol=1e-12)
    A = g.from_coords(rand_coords(g, 4, seed=seed + 1))
    close(g.inner(R, A), torch.zeros(4, dtype=torch.float64), atol=1e-12)
    # proj lands in the algebra: its coordinates reproduce it
    close(g.from_coords(g.to_coords(P)), P, atol=1e-12)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_inner_symmetric_positive_definite(g, seed):
    A = g.from_coords(rand_coords(g, 6, seed=seed))
    B = g.from_coords(rand_coords(g, 6, seed=seed + 1))
    close(g.inner(A, B), g.inner(B, A), atol=1e-12)
    assert g.inner(A, B).shape == (6,)
    if g.dim:
        assert bool((g.inner(A, A) > 0).all())
    # bilinear
    close(g.inner(2.0 * A + B, B), 2.0 * g.inner(A, B) + g.inner(B, B), atol=1e-10)
    # it is Re tr(A^* B)
    ref = torch.einsum("...ij,...ij->...", A.conj(), B).real if g.is_complex else (A * B).sum((-2, -1))
    close(g.inner(A, B), ref, atol=1e-12)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_coords_are_inverse_isometries(g, seed):
    c1 = rand_coords(g, 5, seed=seed)
    c2 = rand_coords(g, 5, seed=seed + 1)
    A1, A2 = g.from_coords(c1), g.from_coords(c2)
    assert A1.shape == (5, g.d, g.d) and A1.dtype == dtype_for(g)
    close(g.to_coords(A1), c1, atol=1e-12)
    close(g.inner(A1, A2), (c1 * c2).sum(-1), atol=1e-10)
    # the other way round, on the algebra
    A = g.proj(rand_matrix(g, 5, seed=seed + 2))
    c = g.to_coords(A)
    assert c.shape == (5, g.dim)
    close(g.from_coords(c), A, atol=1e-12)
    # to_coords is the adjoint of from_coords for any matrix
    Y = rand_matrix(g, 5, seed=seed + 3)
    close((g.to_coords(Y) * c1).sum(-1), g.inner(Y, A1), atol=1e-10)
    # float32 in, float32/complex64 out
    assert g.from_coords(c1.float()).dtype == dtype_for(g, double=False)


def test_coords_basis_is_orthonormal():
    for g in GROUPS:
        if not g.dim:
            continue
        E = g.from_coords(torch.eye(g.dim, dtype=torch.float64))
        gram = g.inner(E.unsqueeze(0), E.unsqueeze(1))
        close(gram, torch.eye(g.dim, dtype=torch.float64), atol=1e-12)
        close(g.proj(E), E, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------------
# exp, log, dist
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, scale=st.floats(0.0, 2.0))
def test_exp_of_proj_belongs_float32(g, seed, scale):
    Y = rand_matrix(g, 8, seed=seed, double=False, scale=scale)
    H = g.exp(g.proj(Y))
    assert H.dtype == Y.dtype and H.shape == Y.shape
    assert bool(g.belongs(H, atol=1e-5).all())


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, scale=st.floats(0.0, 3.0))
def test_exp_agrees_with_matrix_exp(g, seed, scale):
    A = g.from_coords(scale * rand_coords(g, 4, seed=seed))
    close(g.exp(A), torch.linalg.matrix_exp(A), atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, scale=st.floats(0.0, 3.0), degenerate=st.booleans())
def test_exp_methods_agree_in_value_and_gradient(g, seed, scale, degenerate):
    """The eigh path (default on CPU) equals matrix_exp, and so does its gradient on the algebra."""
    A = g.from_coords(scale * rand_coords(g, 3, seed=seed))
    if degenerate and g.dim:  # repeated eigenvalues: a 2x2 rotation generator repeated, or zero
        A = g.from_coords(torch.zeros(3, g.dim, dtype=torch.float64))
        if g.d >= 4 and g.name in ("O", "SO", "U", "SU"):
            A = A.clone()
            A[..., 0, 1], A[..., 1, 0], A[..., 2, 3], A[..., 3, 2] = scale, -scale, scale, -scale
    W = rand_matrix(g, 3, seed=seed + 1)
    grads, values = [], []
    for method in ("eigh", "matrix_exp"):
        X = A.clone().requires_grad_(True)
        H = g.exp(X, method=method)
        g.inner(H, W).sum().backward()
        values.append(H.detach())
        grads.append(g.proj(X.grad))
    close(values[0], values[1], atol=1e-10)
    close(grads[0], grads[1], atol=1e-9)
    close(g.exp(A), values[1], atol=1e-10)


def test_exp_method_errors():
    with pytest.raises(GroupError, match="method"):
        get_group("SO", 3).exp(torch.zeros(3, 3), method="pade")
    with pytest.raises(GroupError, match="method"):
        get_group("T", 3).exp(torch.zeros(3, 3, dtype=torch.complex64), method="pade")


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, radius=st.floats(0.0, 3.0))
def test_log_inverts_exp_inside_injectivity_radius(g, seed, radius):
    # Frobenius norm <= 3 < pi bounds every eigenvalue phase, so exp is invertible by the principal log
    A = g.from_coords(rand_coords(g, 4, seed=seed))
    n = g.norm(A).clamp_min(1e-12)
    A = A * (radius / n)[..., None, None] if g.dim else A
    L = g.log(g.exp(A))
    assert L.dtype == A.dtype
    close(L, A, atol=1e-8)
    close(g.proj(L), L, atol=1e-12)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_exp_log_exp_for_random_points(g, seed):
    # away from the cut locus (probability one for Haar points), exp(log(H)) = H
    H = g.random_point(4, generator=gen(seed), dtype=dtype_for(g))
    if g.name in ("O", "O-block"):
        H = get_group("SO", g.d).reproject(H) if g.name == "O" else H
        if g.name == "O-block":
            B = H.reshape(4, g.m, g.block, g.m, g.block)
            det = torch.linalg.det(torch.diagonal(B, dim1=-4, dim2=-2).movedim(-1, -3))
            if bool((det < 0).any()):
                with pytest.raises(GroupError):
                    g.log(H)
                return
    close(g.exp(g.log(H)), H, atol=1e-8)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_dist_symmetric_zero_left_invariant(g, seed):
    H1 = g.random_point(4, generator=gen(seed), dtype=dtype_for(g))
    H2 = g.random_point(4, generator=gen(seed + 1), dtype=dtype_for(g))
    G = g.random_point(4, generator=gen(seed + 2), dtype=dtype_for(g))
    d12 = g.dist(H1, H2)
    assert d12.shape == (4,) and d12.dtype == torch.float64
    close(d12, g.dist(H2, H1), atol=1e-9)
    close(g.dist(H1, H1), torch.zeros(4, dtype=torch.float64), atol=1e-7)
    close(g.dist(G @ H1, G @ H2), d12, atol=1e-9)
    assert bool((d12 >= 0).all())
    # bounded by the diameter pi*sqrt(d) on the connected component
    finite = torch.isfinite(d12)
    assert bool((d12[finite] <= math.pi * math.sqrt(g.d) + 1e-9).all())


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, radius=st.floats(0.0, 3.0))
def test_dist_from_identity_is_norm_of_generator(g, seed, radius):
    A = g.from_coords(rand_coords(g, 3, seed=seed))
    if g.dim:
        A = A * (radius / g.norm(A).clamp_min(1e-12))[..., None, None]
    H = g.random_point(3, generator=gen(seed + 1), dtype=dtype_for(g))
    close(g.dist(H, H @ g.exp(A)), g.norm(A), atol=1e-8)


def test_dist_across_components_of_O_is_infinite():
    g = get_group("O", 3)
    R = torch.diag(torch.tensor([-1.0, 1.0, 1.0], dtype=torch.float64))
    assert torch.isinf(g.dist(torch.eye(3, dtype=torch.float64), R))
    with pytest.raises(GroupError, match="det"):
        g.log(R)
    gb = get_group("O-block", 4, block=2)
    Rb = torch.diag(torch.tensor([1.0, 1.0, -1.0, 1.0], dtype=torch.float64))
    assert torch.isinf(gb.dist(torch.eye(4, dtype=torch.float64), Rb))
    with pytest.raises(GroupError, match="det"):
        gb.log(Rb)


@pytest.mark.parametrize("name,d,block", [("SO", 2, None), ("SO", 3, None), ("SO", 5, None), ("O", 4, None),
                                           ("O-block", 4, 2), ("U", 3, None), ("SU", 2, None), ("T", 2, None)])
def test_log_on_the_cut_locus_is_a_logarithm(name, d, block):
    """Eigenvalues exactly -1: log(H) is still a logarithm of minimal norm (pi per -1 eigenvalue)."""
    g = get_group(name, d, **({"block": block} if block else {}))
    n_neg = d - (d % 2) if not g.is_complex else d
    signs = torch.tensor([-1.0] * n_neg + [1.0] * (d - n_neg), dtype=torch.float64)
    H = torch.diag(signs).to(dtype_for(g))
    if name in ("SO", "O", "U", "SU"):  # conjugate by a random member so the eigenspace is not axis-aligned
        Q = g.random_point(generator=gen(d), dtype=dtype_for(g))
        if name == "O":
            Q = get_group("SO", d).reproject(Q)
        H = Q @ H @ (Q.mH if g.is_complex else Q.mT)
    L = g.log(H)
    close(g.proj(L), L, atol=1e-12)
    close(g.exp(L), H, atol=1e-9)
    close(g.norm(L), torch.tensor(math.pi * math.sqrt(n_neg), dtype=torch.float64), atol=1e-9)
    close(g.dist(g.identity(dtype=H.dtype), H), g.norm(L), atol=1e-9)


def test_su_log_is_traceless_when_principal_angles_wrap():
    g = get_group("SU", 3)
    theta = torch.tensor([2.5, 2.5, -5.0 + 2 * math.pi], dtype=torch.float64)  # sum = 2 pi: principal log not in su
    V = get_group("U", 3).random_point(generator=gen(3), dtype=torch.complex128)
    H = V @ angles_to_matrix(theta).to(torch.complex128) @ V.mH
    assert bool(g.belongs(H))
    L = g.log(H)
    close(torch.diagonal(L).sum(), torch.tensor(0, dtype=torch.complex128), atol=1e-10)
    close(g.exp(L), H, atol=1e-9)


# ----------------------------------------------------------------------------------------------------------------------
# pull: the Riemannian gradient of the similarity (osm.md §2.2)
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_derivative_of_similarity_is_inner_with_pull(g, seed):
    H = g.random_point(3, generator=gen(seed), dtype=dtype_for(g))
    X = rand_matrix(g, 3, seed=seed + 1)
    A = g.from_coords(rand_coords(g, 3, seed=seed + 2))

    def f(eps: float) -> torch.Tensor:
        M = H @ g.exp(eps * A)
        return g.inner(M, X)  # Re tr(M^* X)

    h = 1e-5
    fd = (f(h) - f(-h)) / (2 * h)
    close(fd, g.inner(A, g.proj(H.mH @ X if g.is_complex else H.mT @ X)), atol=1e-7, rtol=1e-6)
    close(g.pull(H, X), g.proj((H.mH if g.is_complex else H.mT) @ X), atol=1e-12)
    close(g.pull(H, H), torch.zeros_like(H), atol=1e-12)


@pytest.mark.parametrize("g", [g for g in GROUPS if g.d in (2, 3)], ids=lambda g: repr(g))
def test_training_ops_are_differentiable(g):
    X = rand_matrix(g, 2, seed=5)

    def loss(c):
        A = g.from_coords(c)
        H = g.exp(A)
        return g.inner(H, X).sum() + g.to_coords(g.pull(H, X)).square().sum()

    c = rand_coords(g, 2, seed=6).requires_grad_(True)
    if g.dim:
        assert torch.autograd.gradcheck(loss, (c,), atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------------
# belongs and reproject
# ----------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("g", [g for g in GROUPS if g.d > 1], ids=lambda g: repr(g))
def test_belongs_rejects_non_members(g):
    H = g.random_point(2, generator=gen(11), dtype=dtype_for(g))
    assert not bool(g.belongs(1.01 * H).any())
    if g.name == "SO":
        R = torch.diag(torch.tensor([-1.0] + [1.0] * (g.d - 1), dtype=torch.float64))
        assert not bool(g.belongs(R)) and bool(get_group("O", g.d).belongs(R))
    if g.name == "SU":
        U = H * complex(math.cos(0.3), math.sin(0.3))
        assert not bool(g.belongs(U).any()) and bool(get_group("U", g.d).belongs(U).all())
    if g.name == "T":
        U = get_group("U", g.d).random_point(2, generator=gen(12), dtype=torch.complex128)
        assert not bool(g.belongs(U).any())
    if g.name == "O-block":
        Q = get_group("O", g.d).random_point(2, generator=gen(12), dtype=torch.float64)
        assert not bool(g.belongs(Q).any())


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds, noise=st.floats(1e-6, 1e-2))
def test_reproject_returns_a_nearby_member(g, seed, noise):
    H = g.random_point(4, generator=gen(seed), dtype=dtype_for(g))
    E = noise * rand_matrix(g, 4, seed=seed + 1)
    P = g.reproject(H + E)
    assert bool(g.belongs(P, atol=1e-10).all())
    # the polar factor moves at most a small multiple of the perturbation
    dist = (P - H).abs().square().sum((-2, -1)).sqrt()
    assert bool((dist <= 4 * E.abs().square().sum((-2, -1)).sqrt() + 1e-12).all())
    close(g.reproject(H), H, atol=1e-10)


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
def test_long_products_with_reprojection_stay_on_group(g):
    """10,000 products of random small steps in float32 stay within 1e-4 when reprojected every 100 steps."""
    G = gen(2024)
    steps = g.exp(0.1 * g.from_coords(torch.randn(64, g.dim, generator=G)))  # float32 / complex64
    order = torch.randint(0, 64, (10_000,), generator=G).tolist()
    H = g.identity(2)
    worst = 0.0
    eye = torch.eye(g.d, dtype=H.dtype)
    for t, k in enumerate(order, start=1):
        H = H @ steps[k]
        if t % 100 == 0:
            assert bool(g.belongs(H, atol=1e-4).all()), f"left the group at step {t}"
            worst = max(worst, float((H.mH @ H - eye).abs().max()))
            H = g.reproject(H)
    assert bool(g.belongs(H, atol=1e-4).all())
    assert worst < 1e-4


# ----------------------------------------------------------------------------------------------------------------------
# Haar sampling and eigen-angles
# ----------------------------------------------------------------------------------------------------------------------


def test_haar_moments_and_components():
    n = 4000
    for name in ("O", "U"):
        for d in (2, 4):
            g = get_group(name, d)
            H = g.random_point(n, generator=gen(d), dtype=dtype_for(g))
            tr = torch.diagonal(H, dim1=-2, dim2=-1).sum(-1)
            # Haar: E tr H = 0 and E |tr H|^2 = 1 (d >= 2); 5 standard errors
            assert abs(complex(tr.mean())) < 5 * math.sqrt(1 / n)
            assert abs(float((tr.abs() ** 2).mean()) - 1.0) < 0.15
    O = get_group("O", 3).random_point(n, generator=gen(9), dtype=torch.float64)
    frac_neg = float((torch.linalg.det(O) < 0).double().mean())
    assert 0.45 < frac_neg < 0.55  # both components, evenly
    SO = get_group("SO", 3).random_point(n, generator=gen(9), dtype=torch.float64)
    assert bool((torch.linalg.det(SO) > 0).all())
    # SO(3) Haar: rotation angle w has density (1 - cos w)/pi on [0, pi]; E[cos w] = -1/2, i.e. E tr = 0
    tr = torch.diagonal(SO, dim1=-2, dim2=-1).sum(-1)
    assert abs(float(tr.mean())) < 5 * math.sqrt(1 / n)
    SU = get_group("SU", 2).random_point(n, generator=gen(9), dtype=torch.complex128)
    close(torch.linalg.det(SU), torch.ones(n, dtype=torch.complex128), atol=1e-10)
    assert abs(complex(torch.diagonal(SU, dim1=-2, dim2=-1).sum(-1).mean())) < 5 * math.sqrt(1 / n)
    T = get_group("T", 3).random_point(n, generator=gen(9), dtype=torch.complex128)
    ang = matrix_to_angles(T)
    assert abs(float(ang.mean())) < 0.1 and abs(float(ang.var()) - math.pi**2 / 3) < 0.2


@pytest.mark.parametrize("g", GROUPS, ids=GROUP_IDS)
@settings(max_examples=PER_GROUP_EXAMPLES)
@given(seed=seeds)
def test_eigen_angles_sorted_and_match_conjugated_spectrum(g, seed):
    H = g.random_point(3, generator=gen(seed), dtype=dtype_for(g))
    ang = g.eigen_angles(H)
    assert ang.shape == (3, g.d) and ang.dtype == torch.float64
    assert bool((ang[..., 1:] >= ang[..., :-1]).all())
    assert bool((ang.abs() <= math.pi + 1e-12).all())
    # conjugation invariance (by a member of the same group keeps the pattern for T/O-block)
    G = g.random_point(3, generator=gen(seed + 1), dtype=dtype_for(g))
    ang2 = g.eigen_angles(G @ H @ (G.mH if g.is_complex else G.mT))
    # compare as points on the circle (a phase near pi may flip sign)
    gap = (torch.polar(torch.ones_like(ang), ang).unsqueeze(-1)
           - torch.polar(torch.ones_like(ang2), ang2).unsqueeze(-2)).abs()
    assert float(gap.amin(-1).max()) < 1e-8 and float(gap.amin(-2).max()) < 1e-8
    # sum of cos of angles is Re tr H
    close(torch.cos(ang).sum(-1), torch.diagonal(H, dim1=-2, dim2=-1).sum(-1).real, atol=1e-9)


def test_eigen_angles_of_known_spectrum():
    theta = torch.tensor([0.3, -1.2, 2.0, 0.0], dtype=torch.float64)
    V = get_group("U", 4).random_point(generator=gen(0), dtype=torch.complex128)
    H = V @ angles_to_matrix(theta).to(torch.complex128) @ V.mH
    close(get_group("U", 4).eigen_angles(H), theta.sort().values, atol=1e-10)
    R = get_group("SO", 2).exp(torch.tensor([[0.0, -0.7], [0.7, 0.0]], dtype=torch.float64))
    close(get_group("SO", 2).eigen_angles(R), torch.tensor([-0.7, 0.7], dtype=torch.float64), atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------------
# helpers: realification and torus angles
# ----------------------------------------------------------------------------------------------------------------------


@given(seed=seeds, d=st.sampled_from(DIMS))
def test_real_embedding_is_a_homomorphism(seed, d):
    g = get_group("U", d)
    X, Y = rand_matrix(g, 2, seed=seed), rand_matrix(g, 2, seed=seed + 1)
    close(real_embed(X @ Y), real_embed(X) @ real_embed(Y), atol=1e-10)
    close(from_real(real_embed(X)), X, atol=0, rtol=0)
    A = g.proj(X)
    close(real_embed(g.exp(A)), torch.linalg.matrix_exp(real_embed(A)), atol=1e-10)
    close(g.inner(X, Y), (real_embed(X) * real_embed(Y)).sum((-2, -1)) / 2, atol=1e-10)
    H = g.exp(A)
    assert bool(get_group("SO", 2 * d).belongs(real_embed(H), atol=1e-10).all())


def test_torus_angle_helpers_roundtrip():
    theta = torch.tensor([[0.1, -3.0, 2.5]], dtype=torch.float64)
    H = angles_to_matrix(theta)
    g = get_group("T", 3)
    assert bool(g.belongs(H).all())
    close(matrix_to_angles(H), theta, atol=1e-12)
    # exp on the torus adds angles
    phi = torch.tensor([[0.2, 0.1, -0.4]], dtype=torch.float64)
    close(matrix_to_angles(H @ g.exp(g.from_coords(phi))), theta + phi, atol=1e-12)


# ----------------------------------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------------------------------


def test_clear_errors():
    with pytest.raises(GroupError, match="unknown group"):
        get_group("Sp", 4)
    assert issubclass(GroupError, ValueError)
    with pytest.raises(ValueError, match="does not divide"):
        get_group("O-block", 6, block=4)
    with pytest.raises(ValueError, match="block"):
        get_group("O-block", 6)
    with pytest.raises(ValueError, match="no options"):
        get_group("O", 6, block=2)
    with pytest.raises(ValueError, match="positive"):
        get_group("U", 0)
    with pytest.raises(ValueError, match="complex"):
        get_group("U", 3).exp(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="complex"):
        get_group("T", 3).proj(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="real"):
        get_group("O", 3).proj(torch.zeros(3, 3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="shape"):
        get_group("SO", 3).exp(torch.zeros(4, 4))
    with pytest.raises(ValueError, match="shape"):
        get_group("SO", 3).exp(torch.zeros(3))
    with pytest.raises(ValueError, match="floating"):
        get_group("SO", 3).exp(torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="coordinates"):
        get_group("SU", 3).from_coords(torch.zeros(9))
    with pytest.raises(ValueError, match="complex"):
        real_embed(torch.zeros(2, 2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_roundtrip():
    for g in all_groups((3, 4)):
        A = g.from_coords(torch.randn(5, g.dim, device="cuda"))
        H = g.exp(A)
        assert H.device.type == "cuda" and bool(g.belongs(H, atol=1e-4).all())
        assert g.random_point(2, device="cuda").device.type == "cuda"
        close(g.to_coords(A), g.to_coords(A.cpu()).cuda(), atol=1e-6, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------------------------
# the benchmark script (smoke)
# ----------------------------------------------------------------------------------------------------------------------


def test_bench_groups_quick_smoke(tmp_path, capsys):
    import json

    from geomlab.commands.cli import main as cli_main

    def bench_main(args):
        return cli_main(["bench", *args])

    out = tmp_path / "rows.json"
    rc = bench_main(["groups", "--quick", "--groups", "O,U,T,O-block", "--dims", "2,4", "--block", "2",
                     "--products", "20", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "ratio" in text and "drift" in text
    rows = json.loads(out.read_text())["rows"]
    assert {(r["name"], r["d"]) for r in rows} == {("O", 2), ("O", 4), ("U", 2), ("U", 4), ("T", 2), ("T", 4),
                                                   ("O-block", 4)}
    for r in rows:
        assert r["ratio"] > 0 and math.isfinite(r["ratio"])
        assert 0 <= r["drift_max"] < 1e-3 and r["drift_after_reproject_max"] < 1e-5
    assert bench_main(["no-such-bench"]) == 2
