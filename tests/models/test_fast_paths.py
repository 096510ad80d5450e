"""The fast paths of the geometric models compute the same mathematics as the plain ones: the sync-free
matrix exponential (its degree-8 Taylor scheme, scaling and squaring, spectral bound, hand-written backward)
against ``torch.linalg.matrix_exp``; the linear tangent-mixing paths, the OSMFormer's skew mixing, fused
self-attention and padded training frame, and the torus's diagonal path against their coordinate or dense
definitions; training and eval arithmetic against each other. No timing is asserted (the speed itself is
measured by ``geomlab bench train``, whose quick run is smoke-tested here)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from numpy.polynomial import polynomial as npoly

from geomlab.geometry.groups import expm as G
from geomlab.geometry.groups import expm_taylor, get_group
from geomlab.models import build_model
from geomlab.models.osm import TangentMixing


def test_bbc_degree_8_is_the_taylor_polynomial():
    """The three-product scheme's coefficients give exactly 1/k! for k = 0..8 (as polynomials in a scalar)."""
    c = G._BBC
    a, a2 = [0.0, 1.0], [0.0, 0.0, 1.0]
    a4 = npoly.polymul(a2, npoly.polyadd(npoly.polymul([c["x1"]], a), npoly.polymul([c["x2"]], a2)))
    left = npoly.polyadd(npoly.polymul([c["x3"]], a2), a4)
    right = npoly.polyadd(npoly.polyadd([c["x4"]], npoly.polymul([c["x5"]], a)),
                          npoly.polyadd(npoly.polymul([c["x6"]], a2), npoly.polymul([c["x7"]], a4)))
    t8 = npoly.polyadd([1.0, 1.0, c["y2"]], npoly.polymul(left, right))
    assert len(t8) == 9
    for k, coef in enumerate(t8):
        assert coef == pytest.approx(1 / math.factorial(k), rel=1e-12), k


@pytest.mark.parametrize("n", [2, 5, 15, 17])
@pytest.mark.parametrize("scale", [0.05, 1.0, 7.0, 40.0])
def test_sync_free_path_matches_matrix_exp(n, scale):
    """The device path (per-matrix scaling, masked squarings) equals float64 matrix_exp at float32 precision."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(16, n, n, generator=g, dtype=torch.float64)
    A = (A - A.mT) / 2
    A = A * scale * torch.rand(16, 1, 1, generator=g, dtype=torch.float64) / torch.linalg.matrix_norm(A)[:, None, None]
    ref = torch.linalg.matrix_exp(A)
    X = A.float()
    out = G._expm_taylor_nosync(X, torch.linalg.matrix_norm(X), G._TAYLOR_SINGLE, n)
    assert torch.allclose(out.double(), ref, atol=5e-6, rtol=1e-5)
    assert torch.allclose(expm_taylor(X).double(), ref, atol=5e-6, rtol=1e-5)


def test_sync_free_path_flags_what_it_cannot_scale():
    X = torch.zeros(3, 4, 4)
    X[0, 0, 1], X[0, 1, 0] = float("nan"), 0.0
    X[1, 0, 1], X[1, 1, 0] = 1e6, -1e6  # beyond 2^_MAX_SQUARINGS * theta
    out = G._expm_taylor_nosync(X, torch.linalg.matrix_norm(X), G._TAYLOR_SINGLE, 4)
    bad = out.isnan().flatten(1).all(1)
    assert bad.tolist() == [True, True, False]
    assert torch.equal(out[2], torch.eye(4))


def test_non_finite_matrix_does_not_spoil_the_batch():
    A = torch.randn(3, 6, 6)
    A = (A - A.mT) / 2
    A[1, 2, 3] = float("inf")
    A.requires_grad_(True)
    H = expm_taylor(A)
    H.sum().backward()
    assert H[1].isnan().all() and A.grad[1].isnan().any()
    assert torch.isfinite(H[[0, 2]]).all() and torch.isfinite(A.grad[[0, 2]]).all()
    assert torch.allclose(H[0].double(), torch.linalg.matrix_exp(A[0].detach().double()), atol=5e-6)


@pytest.mark.parametrize("group,d,opts", [("O", 5, {}), ("SO", 6, {}), ("U", 3, {}), ("SU", 3, {}),
                                          ("T", 4, {}), ("O-block", 6, {"block": 3})])
def test_linear_mixing_paths_equal_the_coordinate_definition(group, d, opts):
    """``Gamma(Delta) = from_coords(W to_coords(Delta))`` whichever path (index-select, dense maps) computes it."""
    g = get_group(group, d, **opts)
    torch.manual_seed(d)
    mix = TangentMixing("linear", g.dim, 0.5)
    with torch.no_grad():
        mix.weight.add_(0.1 * torch.randn(g.dim, g.dim))
    dtype = torch.complex64 if g.is_complex else torch.float32
    delta = torch.randn(7, d, d, dtype=dtype)  # a raw H^* X: not in the algebra
    want = g.from_coords(g.to_coords(delta) @ mix.weight.mT)
    got = mix(delta, g)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-6)


def test_osm_rnn_and_osmformer_train_on_the_group():
    """States of a trained-a-little model stay on the group (float32, no reprojection)."""
    for kind in ("osm-rnn", "osmformer"):
        torch.manual_seed(0)
        m = build_model({"kind": kind, "vocab_size": 11, "d": 7, "group": "O"})
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        x = torch.randint(0, 11, (3, 12))
        for _ in range(3):
            loss = m(x).logsumexp(-1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        states = m.record(x[:1])["states"].reshape(-1, 7, 7)
        assert bool(m.group.belongs(states, atol=1e-5).all())


def test_bench_train_quick_prints_each_pair(capsys):
    from geomlab.commands.cli import main

    assert main(["bench", "train", "--quick", "--only", "osm-rnn", "cem-T1"]) == 0
    out = capsys.readouterr().out
    assert "osm-rnn" in out and "lstm" in out and "cem-T1" in out and "llama" in out
    assert main(["bench", "train", "--only", "no-such-model"]) == 2


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("s", [0, 2])
def test_hand_written_backward_equals_autograd(dtype, s):
    """``_Taylor8Exp`` gives the value and gradient of autograd through the same three products and squarings."""
    g = torch.Generator().manual_seed(s)
    A = torch.randn(3, 6, 6, generator=g, dtype=torch.float64).to(dtype)
    W = torch.randn(3, 6, 6, generator=g, dtype=torch.float64).to(dtype)
    A1, A2 = A.clone().requires_grad_(True), A.clone().requires_grad_(True)
    P1 = G._Taylor8Exp.apply(A1, s)
    P2 = G._taylor8_bbc(A2 * 2.0**-s)
    for _ in range(s):
        P2 = P2 @ P2
    (P1 * W.conj()).real.sum().backward()
    (P2 * W.conj()).real.sum().backward()
    assert torch.allclose(P1, P2, atol=1e-13)
    assert torch.allclose(A1.grad, A2.grad, atol=1e-12)
    A3 = A.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a: G._Taylor8Exp.apply(a, s), (A3,))


@pytest.mark.parametrize("kind", ["osm-rnn", "osmformer"])
@pytest.mark.parametrize("group", ["O", "U", "T"])
def test_training_and_eval_arithmetic_agree(kind, group):
    """Training mode (fast paths) and eval mode (reference arithmetic) give the same logits to float32 rounding,
    and eval mode really takes the reference path (different rounding somewhere, not a silent alias)."""
    torch.manual_seed(3)
    m = build_model({"kind": kind, "vocab_size": 13, "d": 9, "group": group})
    x = torch.randint(0, 13, (2, 20))
    with torch.no_grad():
        fast = m.train()(x)
        ref = m.eval()(x)
    assert torch.allclose(fast, ref, atol=1e-4, rtol=1e-4)
    assert m._exp_ref is not m._exp_fast


# the OSMFormer training step


@pytest.mark.parametrize("block", [None, 5])
def test_skew_mixing_backward_equals_the_coordinate_definition(block):
    """The O/SO mixing's hand-written backward gives autograd's gradients of ``from_coords(W to_coords(Delta))``
    (for ``delta`` and ``W``); with ``block`` the group's matrices sit zero-padded in a larger frame."""
    d = 5
    g = get_group("O", d)
    torch.manual_seed(1)
    mix = TangentMixing("linear", g.dim, 0.5).double()
    with torch.no_grad():
        mix.weight.add_(0.1 * torch.randn(g.dim, g.dim, dtype=torch.float64))
    delta = torch.randn(2, 3, d, d, dtype=torch.float64)
    W = torch.randn(2, 3, d, d, dtype=torch.float64)
    d1, d2 = delta.clone().requires_grad_(True), delta.clone().requires_grad_(True)
    w2 = mix.weight.detach().clone().requires_grad_(True)
    if block:
        n = 8  # the frame: delta in the top-left corner, garbage elsewhere (the mixing must not read it)
        frame = torch.randn(2, 3, n, n, dtype=torch.float64)
        frame[..., :d, :d] = 0
        got = mix(F.pad(d1, (0, n - d, 0, n - d)) + frame, g, block)
        assert torch.equal(got[..., d:, :], torch.zeros_like(got[..., d:, :]))
        assert torch.equal(got[..., :, d:], torch.zeros_like(got[..., :, d:]))
        got = got[..., :d, :d]
    else:
        got = mix(d1, g)
    want = g.from_coords(g.to_coords(d2) @ w2.mT)
    (got * W).sum().backward()
    (want * W).sum().backward()
    assert torch.allclose(got, want, atol=1e-14)
    assert torch.allclose(d1.grad, d2.grad, atol=1e-13)
    assert torch.allclose(mix.weight.grad, w2.grad, atol=1e-13)


def test_self_attention_equals_the_fused_call():
    """``_SelfAttention`` (q = k = v, hand-written backward) gives the value and the gradients (states, scale,
    ALiBi mask) of ``scaled_dot_product_attention``."""
    from geomlab.models.osm.former import _SelfAttention

    g = torch.Generator().manual_seed(2)
    B, h, T, f = 2, 2, 9, 10
    v = torch.randn(B, h, T, f, generator=g, dtype=torch.float64) / 3
    pos = torch.arange(T)
    rel = (pos[:, None] - pos[None, :]).to(torch.float64)
    slopes = torch.tensor([0.5, 0.25], dtype=torch.float64)
    out_g = torch.randn(B, h, T, f, generator=g, dtype=torch.float64)
    results = []
    for fused in (True, False):
        v1 = v.clone().requires_grad_(True)
        sc = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        sl = slopes.clone().requires_grad_(True)
        mask = (-sl[:, None, None] * rel).masked_fill(rel < 0, float("-inf"))
        if fused:
            out = F.scaled_dot_product_attention(v1 * sc, v1, v1, attn_mask=mask, scale=1.0)
        else:
            out = _SelfAttention.apply(v1, sc, mask)
        (out * out_g).sum().backward()
        results.append((out, v1.grad, sc.grad, sl.grad))
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=1e-13)
    mask = torch.zeros(h, T, T, dtype=torch.float64).masked_fill(rel < 0, float("-inf")).requires_grad_(True)
    assert torch.autograd.gradcheck(_SelfAttention.apply, (v.clone().requires_grad_(True),
                                                            torch.tensor(0.7, dtype=torch.float64,
                                                                         requires_grad=True), mask))


@pytest.mark.parametrize("d,group", [(15, "O"), (6, "SO")])
def test_padded_training_frame_is_exact(d, group):
    """OSMFormer training at a size of ``_PAD_TO`` (states carried as ``diag(H, I)``) gives the logits and every
    parameter gradient of the unpadded computation (float64), and really takes the padded path."""
    torch.manual_seed(4)
    m = build_model({"kind": "osmformer", "vocab_size": 13, "d": d, "group": group, "n_layers": 2}).double()
    assert m._pad_frame() == G._PAD_TO[d] - d
    x = torch.randint(0, 13, (2, 11))
    runs = []
    for pad in (True, False):
        m.zero_grad()
        if not pad:
            m._pad_frame = lambda: 0
        y = m(x)
        y.square().sum().backward()
        runs.append((y.detach(), {k: p.grad.clone() for k, p in m.named_parameters()}))
    assert torch.allclose(runs[0][0], runs[1][0], atol=1e-12)
    for k in runs[0][1]:
        assert torch.allclose(runs[0][1][k], runs[1][1][k], atol=1e-10, rtol=1e-10), k


@pytest.mark.parametrize("overrides", [{"mixing": "scalar"}, {"mixing": "identity"}, {"heads": 3},
                                       {"position": "rotation"}, {"expm": "group"}])
def test_configurations_outside_the_padded_frame_still_train(overrides):
    """At d = 15 the padded frame is used only where it is exact and supported; every other configuration
    trains unpadded (a step runs and gives finite gradients)."""
    torch.manual_seed(5)
    m = build_model({"kind": "osmformer", "vocab_size": 13, "d": 15, **overrides})
    assert m._pad_frame() == 0
    m(torch.randint(0, 13, (2, 6))).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in m.parameters() if p.grad is not None)


@given(n=st.integers(1, 9), scale=st.floats(0.5, 1e4), kind=st.sampled_from(["skew", "skewc", "near", "any"]),
       seed=st.integers(0, 10_000))
def test_spectral_bound_bounds_the_spectral_norm(n, scale, kind, seed):
    """``_norm2_bound`` is an upper bound on the largest spectral norm of the batch (which picks the squarings)
    for skew, complex skew-Hermitian, nearly skew and arbitrary matrices, and never above the Frobenius norm.
    Norms from 0.5 up: ``expm_taylor`` uses the bound only above 0.65 (far below, ``||X^2||_F`` of a float32
    matrix can underflow)."""
    g = torch.Generator().manual_seed(seed)
    cplx = kind == "skewc"
    A = torch.randn(4, n, n, generator=g, dtype=torch.float64)
    if cplx:
        A = torch.complex(A, torch.randn(4, n, n, generator=g, dtype=torch.float64))
    if kind in ("skew", "skewc", "near"):
        A = (A - A.mH) / 2
    if kind == "near":
        A = A + 1e-3 * torch.randn(4, n, n, generator=g, dtype=torch.float64)
    A = (A * scale / torch.linalg.matrix_norm(A).clamp_min(1e-30)[:, None, None])
    A = A.to(torch.complex64 if cplx else torch.float32)
    fro = G._fro(A)
    bound = G._norm2_bound(A, A @ A, fro)
    spec = float(torch.linalg.matrix_norm(A.to(torch.complex128 if cplx else torch.float64), ord=2).max())
    assert bound >= spec * (1 - 1e-6) - 1e-30
    assert bound <= float(fro.max()) * (1 + 1e-6)


def test_spectral_bound_saves_squarings_on_skew_matrices():
    """For random 17 x 17 skew matrices of Frobenius norm 1 (one squaring by the Frobenius norm) the bound is
    within the degree-8 range (0.65), so no squaring is needed; the exponential stays exact."""
    g = torch.Generator().manual_seed(0)
    A = torch.randn(256, 17, 17, generator=g, dtype=torch.float64)
    A = (A - A.mT) / 2
    A = A / torch.linalg.matrix_norm(A)[:, None, None]
    A32 = A.float()
    assert G._norm2_bound(A32, A32 @ A32, G._fro(A32)) <= G._TAYLOR_SINGLE[0][1]
    assert torch.allclose(expm_taylor(A32).double(), torch.linalg.matrix_exp(A), atol=5e-7)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_hand_written_backward_with_the_callers_square(dtype):
    """``_Taylor8Exp`` given ``A @ A`` (computed for the norm bound) equals the one that forms it."""
    g = torch.Generator().manual_seed(5)
    A = torch.randn(3, 6, 6, generator=g, dtype=torch.float64).to(dtype)
    W = torch.randn(3, 6, 6, generator=g, dtype=torch.float64).to(dtype)
    A1, A2 = A.clone().requires_grad_(True), A.clone().requires_grad_(True)
    P1 = G._Taylor8Exp.apply(A1, 2, (A @ A).detach())
    P2 = G._Taylor8Exp.apply(A2, 2)
    (P1 * W.conj()).real.sum().backward()
    (P2 * W.conj()).real.sum().backward()
    assert torch.allclose(P1, P2, atol=1e-14)
    assert torch.allclose(A1.grad, A2.grad, atol=1e-13)


@pytest.mark.parametrize("heads, mixing", [(1, "linear"), (2, "linear"), (1, "scalar"), (1, "identity")])
def test_torus_training_on_diagonals_equals_the_dense_path(heads, mixing):
    """T^d states are diagonal: training on their diagonals (``_run_diagonal``) gives the dense path's logits
    (float rounding) and the same gradients; eval and recording keep the dense reference arithmetic."""
    from geomlab.models import build_model

    torch.manual_seed(0)
    m = build_model({"kind": "osmformer", "vocab_size": 11, "group": "T", "d": 6, "n_layers": 2, "heads": heads,
                     "mixing": mixing})
    for p in m.parameters():  # move off the initial values (mixing at eta I, ...) so every path matters
        p.data.add_(0.05 * torch.randn_like(p))
    x = torch.randint(0, 11, (3, 9))
    outs, grads = [], []
    for diagonal in (True, False):
        m._diagonal = diagonal
        m.zero_grad()
        y = m(x)
        y.square().mean().backward()
        outs.append(y.detach())
        grads.append([(n, p.grad.clone()) for n, p in m.named_parameters() if p.grad is not None])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    assert [n for n, _ in grads[0]] == [n for n, _ in grads[1]]
    for (name, a), (_, b) in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    m._diagonal = True
    m.eval()
    with torch.no_grad():  # eval: the dense arithmetic whatever the flag
        torch.testing.assert_close(m(x), outs[1], rtol=1e-5, atol=1e-5)
