"""CEM energies and layers (shared/papers/cem.md §1-§2, §6.10): float64 checks of every closed form."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from geomlab.models import build_model, config_for_budget, count_params
from geomlab.models.cem import (
    CEMAttention, CEMMLP, CEMStack, CEMStackConfig, interaction_energy, interaction_update, mlp_energy, mlp_gate,
    mlp_update, preconditioner_apply, preconditioner_matrix, silu_integral,
)
from geomlab.models.hooks import run_with_cache
from geomlab.models.layers import rope_angles

D64 = torch.float64


def _cfg(**kw):
    return {**CEMStackConfig.defaults(), "d_model": 8, "n_heads": 2, "d_ff": 12, "n_layers": 2, **kw}


def _rand_attention(seed, B=2, J=5, d=8, H=2, diag="none", rope=False):
    g = torch.Generator().manual_seed(seed)
    dh = d // H
    y = torch.randn(B, J, d, generator=g, dtype=D64)
    n = torch.randn(B, J, d, generator=g, dtype=D64)
    wq = torch.randn(H, dh, d, generator=g, dtype=D64) / math.sqrt(d)
    wk = torch.randn(H, dh, d, generator=g, dtype=D64) / math.sqrt(d)
    eta = torch.rand(H, generator=g, dtype=D64) + 0.1
    dg = {"none": None, "shared": torch.randn(d, generator=g, dtype=D64),
          "per_head": torch.randn(H, d, generator=g, dtype=D64)}[diag]
    rp = rope_angles(J, dh, dtype=D64) if rope else None
    return y, n, wq, wk, eta, dg, rp


# ------------------------------------------------------------------ closed forms vs autograd

@given(seed=st.integers(0, 10_000), diag=st.sampled_from(["none", "shared", "per_head"]), rope=st.booleans(),
       J=st.integers(1, 7))
def test_interaction_update_is_negative_energy_gradient(seed, diag, rope, J):
    y, n, wq, wk, eta, dg, rp = _rand_attention(seed, J=J, diag=diag, rope=rope)
    y = y.requires_grad_(True)
    (grad,) = torch.autograd.grad(interaction_energy(y, n, wq, wk, eta, dg, rp).sum(), y)
    upd = interaction_update(y.detach(), n, wq, wk, eta, dg, rp)
    torch.testing.assert_close(upd, -grad, rtol=1e-10, atol=1e-10)


@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["swiglu", "quadratic"]))
def test_mlp_update_is_negative_energy_gradient(seed, kind):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(2, 4, 6, generator=g, dtype=D64, requires_grad=True)
    n = torch.randn(2, 4, 6, generator=g, dtype=D64)
    w = torch.randn(10, 6, generator=g, dtype=D64)
    v = torch.randn(10, 6, generator=g, dtype=D64)
    c = mlp_gate(n, v, kind)
    (grad,) = torch.autograd.grad(mlp_energy(y, c, w, 0.7, kind).sum(), y)
    torch.testing.assert_close(mlp_update(y.detach(), c, w, 0.7, kind), -grad, rtol=1e-10, atol=1e-10)


def _randomise(block, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in block.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


@pytest.mark.parametrize("diag", ["none", "shared", "per_head"])
@pytest.mark.parametrize("precond", ["none", "dlr", "psd"])
@pytest.mark.parametrize("rope", [True, False])
@pytest.mark.parametrize("anchor", [0.0, 0.5])
def test_attention_block_steps_are_preconditioned_gradient_steps(diag, precond, rope, anchor):
    """x^{t+1} = x^t - rho P grad_x eps(x^t | h) for two steps of the module (notes §1.0, §1.1, §2.2)."""
    torch.manual_seed(0)
    cfg = _cfg(diagonal=diag, preconditioner=precond, precond_rank=3, anchor=anchor)
    block = CEMAttention(cfg).double()
    _randomise(block, 1)
    h = torch.randn(2, 6, 8, dtype=D64) * 1.7
    rp = rope_angles(6, 4, dtype=D64) if rope else None
    rho = h.pow(2).mean(-1, keepdim=True).add(cfg["norm_eps"]).sqrt()
    P = block.precond.matrix() if block.precond is not None else torch.eye(8, dtype=D64)
    x = h
    for _ in range(2):
        xg = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(block.total_energy(xg, h, rp).sum(), xg)
        x = x - rho * (grad @ P)
    torch.testing.assert_close(block(h, 2, rp), x, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["swiglu", "quadratic"])
@pytest.mark.parametrize("precond", ["none", "dlr"])
def test_mlp_block_steps_are_preconditioned_gradient_steps(kind, precond):
    torch.manual_seed(0)
    cfg = _cfg(mlp_energy=kind, preconditioner=precond, precond_rank=3)
    block = CEMMLP(cfg).double()
    _randomise(block, 2)
    h = torch.randn(2, 6, 8, dtype=D64)
    rho = h.pow(2).mean(-1, keepdim=True).add(cfg["norm_eps"]).sqrt()
    P = block.precond.matrix() if block.precond is not None else torch.eye(8, dtype=D64)
    x = h
    for _ in range(3):
        xg = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(block.total_energy(xg, h).sum(), xg)
        x = x - rho * (grad @ P)
    torch.testing.assert_close(block(h, 3), x, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------ equivalence to standard layers

def test_one_attention_step_is_tied_multihead_attention():
    """One step = MHA with W^V = W^K and W^O = (eta-scaled) W^Q^T (torch.nn.MultiheadAttention, notes §1.2)."""
    torch.manual_seed(3)
    d, H, J = 8, 2, 7
    block = CEMAttention(_cfg(diagonal="none")).double()
    _randomise(block, 4)
    h = torch.randn(2, J, d, dtype=D64)
    n = h / h.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    wq = block.w_q.detach().reshape(d, d)  # rows: head-major (H * d_h, d)
    wk = block.w_k.detach().reshape(d, d)
    eta_cols = block.eta.detach().repeat_interleave(d // H)  # (H * d_h,)
    mha = torch.nn.MultiheadAttention(d, H, bias=False, batch_first=True).double()
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([wq, wk, wk]))
        mha.out_proj.weight.copy_(wq.T * eta_cols)
    causal_mask = torch.ones(J, J, dtype=torch.bool).triu(1)
    expected, _ = mha(n, n, n, attn_mask=causal_mask, need_weights=False)
    torch.testing.assert_close(block(h, 1) - h, expected, rtol=1e-10, atol=1e-12)
    # the same through F.scaled_dot_product_attention with v = k
    q = (n @ wq.T).view(2, J, H, d // H).transpose(1, 2)
    k = (n @ wk.T).view(2, J, H, d // H).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, k, is_causal=True).transpose(1, 2).reshape(2, J, d)
    torch.testing.assert_close(block(h, 1) - h, (o * eta_cols) @ wq, rtol=1e-10, atol=1e-12)


def test_one_mlp_step_is_tied_swiglu():
    """One step = SwiGLU with gate W, up V, down W^T and the step size (notes §1.3)."""
    torch.manual_seed(5)
    block = CEMMLP(_cfg()).double()
    _randomise(block, 6)
    h = torch.randn(3, 4, 8, dtype=D64)
    n = h / h.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt()
    gate, up, down = (torch.nn.Linear(8, 12, bias=False).double(), torch.nn.Linear(8, 12, bias=False).double(),
                      torch.nn.Linear(12, 8, bias=False).double())
    with torch.no_grad():
        gate.weight.copy_(block.w)
        up.weight.copy_(block.v)
        down.weight.copy_(block.w.T)
    expected = block.eta * down(F.silu(gate(n)) * up(n))
    torch.testing.assert_close(block(h, 1) - h, expected, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ Phi

def test_silu_integral_matches_trapezoid_and_dilogarithm():
    z = torch.linspace(-30, 30, 241, dtype=D64)
    phi = silu_integral(z).numpy()
    # independent quadrature: trapezoid on a fine grid from 0 to z
    trap = []
    for zi in z.numpy():
        t = np.linspace(0.0, zi, 20001)
        trap.append(np.trapezoid(t / (1 + np.exp(-t)), t))
    np.testing.assert_allclose(phi, trap, rtol=1e-7, atol=1e-7)
    # closed form z softplus(z) + Li2(-e^z) + pi^2/12, with Li2(-e^z) = spence(1 + e^z)
    scipy_special = pytest.importorskip("scipy.special")
    zn = z.numpy()
    closed = zn * np.logaddexp(0, zn) + scipy_special.spence(1 + np.exp(zn)) + np.pi ** 2 / 12
    np.testing.assert_allclose(phi, closed, rtol=1e-11, atol=1e-11)


def test_silu_integral_float32_rule_is_float32_accurate():
    """The cheaper default for float32 agrees with the float64 rule to float32 precision."""
    z = torch.linspace(-60, 60, 4801, dtype=D64)
    ref = silu_integral(z)
    got = silu_integral(z.float()).double()
    rel = (got - ref).abs() / ref.abs().clamp(min=1e-3)
    assert rel.max().item() < 1e-6
    assert torch.allclose(silu_integral(z.float(), panels=8, nodes=16).double(), ref, rtol=1e-6, atol=1e-6)


@given(z=st.floats(-60, 60, allow_nan=False))
def test_silu_integral_derivative_is_silu(z):
    zt = torch.tensor([z], dtype=D64, requires_grad=True)
    (g,) = torch.autograd.grad(silu_integral(zt).sum(), zt)
    assert abs(g.item() - F.silu(zt.detach()).item()) < 1e-8 * max(1.0, abs(z))
    assert silu_integral(torch.tensor([-1e4], dtype=D64)).item() == pytest.approx(math.pi ** 2 / 12, abs=1e-12)


# ------------------------------------------------------------------ preconditioner

@given(seed=st.integers(0, 10_000))
def test_preconditioner_apply_matches_dense_and_psd_is_positive(seed):
    g = torch.Generator().manual_seed(seed)
    p, u, v = (torch.randn(6, generator=g, dtype=D64) * 3, torch.randn(6, 2, generator=g, dtype=D64) * 3,
               torch.randn(6, 2, generator=g, dtype=D64) * 3)
    x = torch.randn(4, 6, generator=g, dtype=D64)
    for kind in ("dlr", "psd"):
        P = preconditioner_matrix(p, u, v, kind)
        torch.testing.assert_close(P, P.T)
        torch.testing.assert_close(preconditioner_apply(x, p, u, v, kind), x @ P)
    assert torch.linalg.eigvalsh(preconditioner_matrix(p, u, None, "psd")).min() > 0
    with pytest.raises(ValueError):
        preconditioner_apply(x, p, u, None, "dlr")


# ------------------------------------------------------------------ descent, causality, recording

@pytest.mark.parametrize("diag,precond,kind", [("none", "none", "swiglu"), ("shared", "dlr", "swiglu"),
                                               ("per_head", "psd", "quadratic")])
def test_energy_does_not_increase_for_small_steps(diag, precond, kind):
    torch.manual_seed(7)
    cfg = _cfg(diagonal=diag, preconditioner=precond, mlp_energy=kind, eta_init=0.02, recursion_steps=8)
    stack = CEMStack(cfg).double()
    with torch.no_grad():
        for name, p in stack.named_parameters():
            if name.endswith("diag"):
                p.normal_(0, 0.5)
    h = torch.randn(2, 9, 8, dtype=D64)
    _, cache = run_with_cache(stack, h, lambda name: name.endswith("hook_energy"))
    assert len(cache) == 2 * cfg["n_layers"]
    for e in cache.values():  # (B, T+1, J)
        assert e.shape == (2, 9, 9)
        diffs = e[:, 1:] - e[:, :-1]
        assert (diffs <= 1e-12).all(), diffs.max()
        assert (diffs < 0).any()  # it actually moves


SWITCHES = list(itertools.product(["none", "shared", "per_head"], ["none", "dlr", "psd"], ["swiglu", "quadratic"],
                                  ["rope", "none"]))


@pytest.mark.parametrize("diag,precond,kind,pos", SWITCHES)
def test_causal_for_every_switch(diag, precond, kind, pos):
    torch.manual_seed(8)
    model = build_model({"kind": "cem", "vocab_size": 11, "d_model": 8, "n_heads": 2, "d_ff": 10, "n_layers": 2,
                         "diagonal": diag, "preconditioner": precond, "precond_rank": 2, "mlp_energy": kind,
                         "positional": pos, "recursion_steps": 2, "inference_recursion_steps": 3}).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("diag") or name.endswith(".v") and "precond" in name:
                p.normal_(0, 0.3)
    tokens = torch.randint(0, 11, (2, 10))
    other = tokens.clone()
    other[:, 6:] = (other[:, 6:] + 3) % 11
    for mode in (model.train, model.eval):
        mode()
        a, b = model(tokens), model(other)
        torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-12)
        assert (a[:, 6:] - b[:, 6:]).abs().max() > 1e-6


def test_record_matches_forward_and_contract():
    torch.manual_seed(9)
    model = build_model({"kind": "cem", "vocab_size": 13, "d_model": 16, "n_heads": 4, "d_ff": 20, "n_layers": 3,
                         "recursion_steps": 2, "inference_recursion_steps": 4, "preconditioner": "dlr"})
    tokens = torch.randint(0, 13, (1, 12))
    model.eval()
    before = model(tokens)
    rec = model.record(tokens)
    assert set(rec) - {"attention_q_shared", "attention_k_shared"} == {
        "logits", "energies", "displacement", "attention_q", "attention_k"}
    assert torch.equal(rec["logits"], before[0])
    assert torch.equal(model(tokens), before)  # recording does not change later outputs
    assert rec["energies"].shape == (3, 2, 5, 12)  # eval: inference_recursion_steps = 4 -> steps 0..4
    assert rec["displacement"].shape == (3, 2, 5, 12)
    from geomlab.trace import dense_attention

    att = torch.as_tensor(dense_attention(rec)).float()
    assert att.shape == (3, 4, 12, 12)
    assert torch.all(rec["displacement"][:, :, 0] == 0) and torch.all(rec["displacement"][:, :, 1:] > 0)
    torch.testing.assert_close(att.sum(-1), torch.ones(3, 4, 12))
    assert torch.all(att.triu(1) == 0)
    model.train()
    assert model.record(tokens)["energies"].shape == (3, 2, 3, 12)  # training mode: T = 2


def test_record_energy_step0_equals_energy_of_block_input():
    torch.manual_seed(10)
    model = build_model({"kind": "cem", "vocab_size": 7, "d_model": 8, "n_heads": 2, "d_ff": 6, "n_layers": 1,
                         "recursion_steps": 1}).double().eval()
    tokens = torch.randint(0, 7, (1, 5))
    rec = model.record(tokens)
    h = model.embed(tokens) * math.sqrt(8)
    attn, mlp = model.stack.layers[0]
    rope = model.stack.rope(5, D64, "cpu")
    torch.testing.assert_close(rec["energies"][0, 0, 0], attn.total_energy(h, h, rope)[0])
    x1 = attn(h, 1, rope)
    torch.testing.assert_close(rec["energies"][0, 0, 1], attn.total_energy(x1, h, rope)[0])
    torch.testing.assert_close(rec["energies"][0, 1, 0], mlp.total_energy(x1, x1)[0])
    with pytest.raises(ValueError):
        model.record(torch.zeros(2, 5, dtype=torch.long))


def test_config_roundtrip_budget_and_errors():
    model = build_model({"kind": "cem", "vocab_size": 96})
    assert count_params(model) == 204_116  # notes §3.2, 0.2M CEM row
    rebuilt = build_model(model.config)
    assert rebuilt.config == model.config
    for kw in ({"recursion_steps": 2}, {"diagonal": "none"}, {"preconditioner": "dlr"}):
        cfg = config_for_budget("cem", 200_000, 65, **kw)
        assert abs(count_params(build_model(cfg)) - 200_000) <= 10_000
        assert cfg["d_model"] == config_for_budget("llama", 200_000, 65)["d_model"]
        assert all(cfg[k] == v for k, v in kw.items())
    for bad in ({"diagonal": "full"}, {"preconditioner": "x"}, {"mlp_energy": "gelu"}, {"recursion_steps": 0},
                {"inference_recursion_steps": 0}, {"d_model": 10, "n_heads": 4}, {"eta_init": -1.0}):
        with pytest.raises(ValueError):
            build_model({"kind": "cem", "vocab_size": 5, **bad})


def test_diagnostics_shapes_and_identity_preconditioner():
    model = build_model({"kind": "cem", "vocab_size": 5, "d_model": 8, "n_heads": 2, "d_ff": 6, "n_layers": 3,
                         "preconditioner": "dlr", "precond_rank": 2, "diagonal": "per_head"})
    d = model.diagnostics()
    assert d["eta_attention"].shape == (3, 2) and d["eta_mlp"].shape == (3,)
    torch.testing.assert_close(d["eta_attention"], torch.full((3, 2), 0.5))
    assert torch.all(d["diag_norm"] == 0)
    torch.testing.assert_close(d["precond_min_eig"], torch.ones(3, 2), atol=1e-3, rtol=0)  # P = I at init
    with torch.no_grad():
        pre = model.stack.layers[1][0].precond
        pre.u.copy_(torch.randn(8, 2))
        pre.v.copy_(-pre.u)
    assert model.diagnostics()["precond_min_eig"][1, 0] < 0  # U V^T + V U^T can break definiteness


# ---------------------------------------------------------------- no J x J matrices
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hst  # noqa: E402

from geomlab.models.cem import attention_vectors, causal_logsumexp, interaction_scores  # noqa: E402


@settings(max_examples=20, deadline=None)
@given(hst.integers(1, 40), hst.integers(1, 17), hst.sampled_from(["none", "shared", "per_head"]),
       hst.booleans(), hst.integers(0, 2**31 - 1))
def test_chunked_logsumexp_and_fused_update_equal_the_explicit_softmax(J, chunk, diag_kind, rope, seed):
    g = torch.Generator().manual_seed(seed)
    B, H, dh, d = 2, 2, 4, 8
    y, n = torch.randn(B, J, d, generator=g, dtype=D64), torch.randn(B, J, d, generator=g, dtype=D64)
    w_q, w_k = torch.randn(H, dh, d, generator=g, dtype=D64), torch.randn(H, dh, d, generator=g, dtype=D64)
    eta = torch.rand(H, generator=g, dtype=D64) + 0.1
    diag = {"none": None, "shared": torch.randn(d, generator=g, dtype=D64),
            "per_head": torch.randn(H, d, generator=g, dtype=D64)}[diag_kind]
    tables = rope_angles(J, dh, dtype=D64) if rope else None
    S = interaction_scores(y, n, w_q, w_k, diag, tables)  # (B, H, J, J), the explicit reference
    beta = dh ** -0.5
    lse = causal_logsumexp(*attention_vectors(y, n, w_q, w_k, diag, tables), scale=beta, chunk=chunk)
    torch.testing.assert_close(lse, torch.logsumexp(S, dim=-1), rtol=1e-10, atol=1e-10)
    # -grad of the energy (autograd through the explicit scores) equals the fused closed form
    yy = y.clone().requires_grad_(True)
    e = -(eta.view(1, -1, 1) * torch.logsumexp(interaction_scores(yy, n, w_q, w_k, diag, tables), -1)).sum(1) / beta
    (grad,) = torch.autograd.grad(e.sum(), yy)
    torch.testing.assert_close(interaction_update(y, n, w_q, w_k, eta, diag, tables), -grad, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- explicit training path
import geomlab.models.cem.attention as cem_module  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(hst.integers(1, 12), hst.integers(1, 5), hst.booleans(), hst.sampled_from([1, 40, 2 ** 18]),
       hst.integers(0, 2**31 - 1))
def test_explicit_shared_diagonal_update_and_its_gradients_equal_the_fused_call(J, B, rope, chunk, seed):
    """``interaction_update(explicit=True)`` (weights formed once per batch chunk, hand-written backward) gives
    the fused path's update and the same gradients for every input, eta included (float64)."""
    g = torch.Generator().manual_seed(seed)
    H, dh, d = 2, 4, 8
    leaves = [torch.randn(*s, generator=g, dtype=D64).requires_grad_(True)
              for s in ((B, J, d), (B, J, d), (H, dh, d), (H, dh, d), (d,))]
    eta = (torch.rand(H, generator=g, dtype=D64) + 0.1).requires_grad_(True)
    y, n, w_q, w_k, diag = leaves
    tables = rope_angles(J, dh, dtype=D64) if rope else None
    weights = torch.randn(B, J, d, generator=g, dtype=D64)
    old_chunk = cem_module._CHUNK_ELEMENTS
    cem_module._CHUNK_ELEMENTS = chunk  # several batch chunks, or one
    try:
        outs, grads = [], []
        for explicit in (False, True):
            out = interaction_update(y, n, w_q, w_k, eta, diag, tables, explicit=explicit)
            outs.append(out)
            grads.append(torch.autograd.grad((out * weights).sum(), [*leaves, eta]))
    finally:
        cem_module._CHUNK_ELEMENTS = old_chunk
    torch.testing.assert_close(outs[1], outs[0], rtol=1e-10, atol=1e-10)
    for a, b in zip(grads[1], grads[0]):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


def test_explicit_path_passes_gradcheck():
    g = torch.Generator().manual_seed(11)
    B, J, H, dh, d = 3, 5, 2, 4, 8
    args = [torch.randn(*s, generator=g, dtype=D64).requires_grad_(True)
            for s in ((B, J, d), (B, J, d), (H, dh, d), (H, dh, d))]
    eta = (torch.rand(H, generator=g, dtype=D64) + 0.1).requires_grad_(True)
    diag = torch.randn(d, generator=g, dtype=D64).requires_grad_(True)
    tables = rope_angles(J, dh, dtype=D64)
    old_chunk = cem_module._CHUNK_ELEMENTS
    cem_module._CHUNK_ELEMENTS = H * J * J  # one batch row per chunk
    try:
        assert torch.autograd.gradcheck(
            lambda *t: interaction_update(*t, rope=tables, explicit=True), (*args, eta, diag))
    finally:
        cem_module._CHUNK_ELEMENTS = old_chunk


@pytest.mark.parametrize("steps", [1, 2])
def test_training_mode_equals_eval_mode_reference(steps):
    """Training mode (explicit attention) and eval mode (the fused call, what traces use) compute the same
    model: float64 logits and parameter gradients agree to rounding, float32 logits to float32 rounding."""
    torch.manual_seed(12)
    model = build_model({"kind": "cem", "vocab_size": 11, "d_model": 16, "n_heads": 4, "d_ff": 20, "n_layers": 2,
                         "recursion_steps": steps})
    with torch.no_grad():
        for layer in model.stack.layers:
            layer[0].diag.normal_(0, 0.5)
    tokens = torch.randint(0, 11, (3, 17))
    for dtype, tol in ((D64, 1e-10), (torch.float32, 2e-5)):
        model.to(dtype)
        got = []
        for mode in (model.train, model.eval):
            mode()
            model.zero_grad()
            out = model(tokens)
            out.square().mean().backward()
            got.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
        torch.testing.assert_close(got[0][0], got[1][0], rtol=tol, atol=tol)
        if dtype == D64:
            for a, b in zip(got[0][1], got[1][1]):
                torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)
