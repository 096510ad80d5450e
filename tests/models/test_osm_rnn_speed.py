"""OSM-RNN: the fused O/SO recurrence (geomlab.models.osm.rnn_fast) computes the same mathematics as the
reference loop of OSMRNN._run: values and gradients against float64, states on the group, exact padding,
TorchScript and plain loops identical, and a silent fallback when TorchScript is unavailable."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.models import build_model
from geomlab.models.osm import rnn_fast as fast

V = 9


def _model(seed, **cfg):
    torch.manual_seed(seed)
    return build_model({"kind": "osm-rnn", "vocab_size": V, **cfg})


def _reference(m):
    """A float64 copy of ``m`` that runs the reference loop (the path every group takes)."""
    ref = copy.deepcopy(m).double()
    ref._fused = lambda *a: False
    return ref


@settings(max_examples=12, deadline=None)
@given(d=st.sampled_from([2, 3, 5, 7, 8, 15, 19]), group=st.sampled_from(["O", "SO"]),
       mixing=st.sampled_from(["identity", "scalar", "linear"]), rnn_input=st.sampled_from(["pull", "pull+token"]),
       prototypes=st.sampled_from(["free", "group", "tied"]), step=st.floats(0.1, 1.5), seed=st.integers(0, 10**6))
def test_fused_equals_float64_reference(d, group, mixing, rnn_input, prototypes, step, seed):
    """Logits and every parameter gradient of the fused float32 path equal the float64 reference loop."""
    m = _model(seed, d=d, group=group, mixing=mixing, rnn_input=rnn_input, prototypes=prototypes, step=step)
    assert m._fused(torch.float32, torch.device("cpu"))
    ref = _reference(m)
    x = torch.randint(0, V, (3, 12), generator=torch.Generator().manual_seed(seed))
    w = torch.randn(3, 12, V, generator=torch.Generator().manual_seed(seed + 1))
    out = m(x)
    (out * w).sum().backward()
    want = ref(x)
    (want * w.double()).sum().backward()
    assert torch.allclose(out.double(), want, atol=1e-4, rtol=1e-4)
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        if q.grad is None:
            assert p.grad is None or not p.grad.abs().max(), name
            continue
        scale = float(q.grad.abs().max()) + 1e-3
        assert torch.allclose(p.grad.double(), q.grad, atol=1e-4 * scale, rtol=1e-3), name


@pytest.mark.parametrize("n", [3, 7, 19])
@pytest.mark.parametrize("scale", [0.05, 0.6, 1.0, 2.0, 7.0, 40.0])
def test_one_step_is_the_matrix_exponential(n, scale):
    """With ``W = 2 I`` and ``H_0 = I`` the first state is ``exp(X - X^T)``: the degree-8 series with the squarings
    chosen by the sharper bound (``||X^2||^4 ||X||``) equals float64 ``matrix_exp`` at float32 precision."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(16, n, n, generator=g, dtype=torch.float64)
    S = A - A.mT
    S = S * scale * torch.rand(16, 1, 1, generator=g, dtype=torch.float64) / torch.linalg.matrix_norm(S)[:, None, None]
    X = (S / 2).float()  # raw = X, Phi = X - X^T = S
    W = 2 * torch.eye(n * (n - 1) // 2)
    got = fast.skew_recurrence_forward(fast.pad(X)[None], W)[0, :, :n, :n]
    assert torch.allclose(got.double(), torch.linalg.matrix_exp(S), atol=5e-6, rtol=1e-5)


@pytest.mark.parametrize("n,with_drive", [(3, False), (3, True), (5, True)])
def test_hand_written_backward_passes_gradcheck(n, with_drive):
    """``SkewRecurrence`` in float64 against finite differences, for the inputs, the mixing map and skew drives
    (``n = 5`` runs padded to 8)."""
    g = torch.Generator().manual_seed(n)
    m = fast.PAD_TO.get(n, n)
    dim = n * (n - 1) // 2
    A = torch.randn(4, n, n, generator=g, dtype=torch.float64)
    M = fast.pad(torch.linalg.matrix_exp(A - A.mT)).requires_grad_(True)
    W = (0.7 * torch.eye(dim, dtype=torch.float64) + 0.2 * torch.randn(dim, dim, generator=g,
                                                                        dtype=torch.float64)).requires_grad_(True)
    idx = torch.randint(0, 4, (5, 2), generator=g)
    Y = (0.3 * torch.randn(4, n, n, generator=g, dtype=torch.float64)).requires_grad_(True)

    def f(M, W, Y):
        Dv = fast.pad(Y - Y.mT, group=False) if with_drive else None
        return fast.SkewRecurrence.apply(M, idx, W, Dv)

    assert torch.autograd.gradcheck(f, (M, W, Y), atol=1e-6)


def test_padding_is_exact_and_states_stay_on_the_group():
    """d = 15 runs at 16: every state is exactly diag(H, 1), and H is orthogonal to float32 rounding."""
    assert fast.PAD_TO[15] == 16
    m = _model(0, d=15, prototypes="group")
    x = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        A = m.token_generators()
        Mp = m._exp(fast.pad(A, group=False))
        Hs = fast.skew_recurrence_forward(Mp[x.T], m.mix.weight)
    assert Hs.shape == (40, 2, 16, 16)
    assert not Hs[..., 15, :15].any() and not Hs[..., :15, 15].any() and bool((Hs[..., 15, 15] == 1).all())
    rec = m.record(x[:1])
    assert bool(m.group.belongs(rec["states"], atol=1e-5).all())


def test_torchscript_and_python_loops_are_identical(monkeypatch):
    """The compiled loops run the same operations: bit-identical logits and gradients."""
    m = _model(1, d=7, rnn_input="pull+token")
    x = torch.randint(0, V, (2, 15), generator=torch.Generator().manual_seed(1))
    results = []
    for use in (True, False):
        monkeypatch.setattr(fast, "USE_TORCHSCRIPT", use)
        m.zero_grad()
        out = m(x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in m.parameters()]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))


def test_missing_torchscript_falls_back_silently(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("no TorchScript here")

    monkeypatch.setattr(fast, "_LOOPS", None)
    monkeypatch.setattr(torch.jit, "script", broken)
    fwd, bwd = fast.loops()
    assert fwd is fast._forward_loop and bwd is fast._backward_loop
    m = _model(2, d=4)
    x = torch.randint(0, V, (2, 6))
    m(x).sum().backward()
    assert torch.isfinite(m.mix.weight.grad).all()


def test_eval_mode_and_other_groups_keep_the_reference_loop():
    m = _model(3, d=5)
    cpu = torch.device("cpu")
    assert m._fused(torch.float32, cpu)
    assert not m.eval()._fused(torch.float32, cpu)
    assert not m.train()._fused(torch.float64, cpu)
    for group, opts in (("U", {}), ("T", {}), ("O-block", {"block": 2})):
        assert not _model(3, d=4, group=group, **opts)._fused(torch.float32, cpu)
    assert not _model(3, d=4, expm="group")._fused(torch.float32, cpu)


def test_a_non_finite_token_spoils_only_its_sequences():
    m = _model(4, d=5)
    with torch.no_grad():
        m.token_coords[3, 0] = float("nan")
    x = torch.tensor([[0, 1, 2, 4, 5], [0, 3, 1, 2, 4]])
    out = m(x)
    assert torch.isfinite(out[0]).all()
    assert torch.isfinite(out[1, 0]).all() and out[1, 1:].isnan().all()
