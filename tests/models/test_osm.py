"""Tests of the OSM models (osm-rnn, osmformer): group membership, attention paths, mixing, positions,
causality, recording, realification, parameter counting and a short training run for every group."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.geometry.groups import expm_taylor
from geomlab.models import build_model, config_for_budget, count_params
from geomlab.models.osm import OSMConfigError
from geomlab.trace import dense_attention, from_record
from geomlab.trace.tracing import _group_info

GROUPS = [("O", {}), ("SO", {}), ("U", {}), ("SU", {}), ("T", {}), ("O-block", {"block": 2})]
KINDS = ["osm-rnn", "osmformer"]
V = 11


def make(kind, group="O", d=4, **kw):
    cfg = {"kind": kind, "vocab_size": V, "group": group, "d": d, **kw}
    return build_model(cfg)


def tokens(B=2, T=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (B, T), generator=g)


# ---------------------------------------------------------------------------------------------------------------
# states on the group
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group,opts", GROUPS)
def test_states_stay_on_group(kind, group, opts):
    torch.manual_seed(1)
    # larger steps and token scales than the defaults, so exp is exercised beyond the first Taylor range
    extra = {"token_init_std": 1.0}
    if kind == "osmformer":
        extra.update(n_layers=3, attn_step=1.5, ground_step=1.5, position="rotation", rotation_init_std=0.5)
    else:
        extra.update(step=1.5, rnn_input="pull+token")
    m = make(kind, group, d=4, **opts, **extra)
    rec = m.record(tokens(1, 40))
    g = m.group
    states = rec["states"]
    assert states.dtype == (torch.complex64 if g.is_complex else torch.float32)
    assert bool(g.belongs(states, atol=1e-4).all())
    assert bool(g.belongs(rec["inputs"], atol=1e-4).all())
    # the tangents are in the algebra: proj leaves them unchanged
    for key in ("tangents_raw", "tangents"):
        t = rec[key]
        assert torch.allclose(g.proj(t), t, atol=1e-5)
    if group == "SU":
        det = torch.linalg.det(states.to(torch.complex128))
        assert torch.allclose(det, torch.ones_like(det), atol=1e-4)


# ---------------------------------------------------------------------------------------------------------------
# attention, mixing, zero steps
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("group,opts,heads", [("O", {}, 1), ("O", {}, 2), ("U", {}, 1), ("T", {}, 2),
                                              ("O-block", {"block": 2}, 2)])
@pytest.mark.parametrize("position", ["alibi", "none"])
def test_sdpa_equals_einsum(group, opts, heads, position):
    torch.manual_seed(2)
    m = make("osmformer", group, d=4, heads=heads, position=position, **opts)
    H = m.group.random_point(3, 7)
    fused, _ = m.attention_mean(H, 0)
    explicit, w = m.attention_mean(H, 0, explicit=True)
    assert torch.allclose(fused, explicit, atol=1e-5)
    assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)), atol=1e-5)
    assert float(w.detach().triu(1).abs().max()) == 0.0  # causal
    # and against a direct loop over positions (the definition in notes §2.6, heads = 1)
    if heads == 1:
        beta = math.exp(float(m.log_beta[0].detach()))
        slope = float(m.alibi[0, 0].detach()) if position == "alibi" else 0.0
        i = 5
        s = torch.stack([m.group.inner(H[0, i], H[0, j]) for j in range(i + 1)])
        s = beta * s / m.group.d - slope * (i - torch.arange(i + 1))
        a = torch.softmax(s, 0)
        target = sum(a[j] * H[0, j] for j in range(i + 1))
        assert torch.allclose(fused[0, i], target, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group,opts", [("O", {}), ("SU", {}), ("T", {})])
def test_linear_mixing_at_eta_identity_equals_scalar(kind, group, opts):
    steps = {"attn_step": 0.3, "ground_step": 0.7} if kind == "osmformer" else {"step": 0.4}
    torch.manual_seed(3)
    lin = make(kind, group, mixing="linear", **steps, **opts)
    torch.manual_seed(3)
    sca = make(kind, group, mixing="scalar", **steps, **opts)
    shared = {k: v for k, v in lin.state_dict().items() if k in sca.state_dict()}
    sca.load_state_dict(shared, strict=False)
    x = tokens()
    assert torch.allclose(lin(x), sca(x), atol=1e-5)


@pytest.mark.parametrize("position", ["alibi", "rotation", "none"])
@pytest.mark.parametrize("mixing", ["identity", "scalar", "linear"])
@pytest.mark.parametrize("group,opts", [("O", {}), ("U", {}), ("O-block", {"block": 2})])
def test_zero_steps_give_readout_of_tokens(position, mixing, group, opts):
    torch.manual_seed(4)
    m = make("osmformer", group, position=position, mixing=mixing, attn_step=0.0, ground_step=0.0,
             rotation_init_std=0.5, n_layers=2, **opts)
    x = tokens()
    with torch.no_grad():
        M = m.token_matrices()
        expected = m.readout(M[x], M)
        assert torch.allclose(m(x), expected, atol=1e-5)
        # and the steps are not trivially zero otherwise
        m2 = make("osmformer", group, position=position, mixing=mixing, **opts)
        m2.load_state_dict(m.state_dict(), strict=False) if mixing == "linear" else None


def test_nonzero_steps_change_the_output():
    torch.manual_seed(5)
    m0 = make("osmformer", attn_step=0.0, ground_step=0.0, mixing="scalar")
    m1 = make("osmformer", attn_step=0.5, ground_step=0.5, mixing="scalar")
    m1.load_state_dict({k: v for k, v in m0.state_dict().items() if "eta" not in k}, strict=False)
    x = tokens()
    assert not torch.allclose(m0(x), m1(x), atol=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# causality, recording, config round trip
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,extra", [("osm-rnn", {}), ("osm-rnn", {"rnn_input": "pull+token"}),
                                        ("osmformer", {}), ("osmformer", {"position": "rotation"}),
                                        ("osmformer", {"heads": 2, "group": "U"}),
                                        ("osmformer", {"group": "T", "position": "none"})])
def test_causal(kind, extra):
    torch.manual_seed(6)
    m = make(kind, **extra)
    x = tokens(2, 12)
    y = x.clone()
    y[:, 7:] = (y[:, 7:] + 3) % V
    a, b = m(x), m(y)
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-6)
    assert not torch.allclose(a[:, 7:], b[:, 7:], atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group,opts", GROUPS)
def test_record_contract_and_no_side_effect(kind, group, opts):
    torch.manual_seed(7)
    heads = 2 if kind == "osmformer" else None
    m = make(kind, group, d=4, **opts, **({"heads": heads, "n_layers": 3} if heads else {}))
    x = tokens(1, 10)
    before = m(x).detach()
    params = {k: v.clone() for k, v in m.state_dict().items()}
    rec = m.record(x)
    after = m(x).detach()
    assert torch.equal(before, after)
    if kind == "osmformer" and group == "T":  # training on T^d runs on the diagonals (_run_diagonal), the
        torch.testing.assert_close(rec["logits"], before[0], rtol=1e-5, atol=1e-6)  # record densely: rounding
    else:
        assert torch.equal(rec["logits"], before[0])
    assert all(torch.equal(params[k], v) for k, v in m.state_dict().items())
    T, d = 10, 4
    L = 3 if kind == "osmformer" else 1
    S = 2 if kind == "osmformer" else 1
    assert rec["states"].shape == (L, T, d, d)
    assert rec["inputs"].shape == (T, d, d)
    assert rec["tangents_raw"].shape == rec["tangents"].shape == (L, S, T, d, d)
    assert rec["logits"].shape == (T, V)
    if kind == "osmformer":
        assert "similarity" not in rec and "attention" not in rec  # no T x T arrays are recorded
        tr = from_record(rec, kind, x[0], config=m.config, group=_group_info(m))
        heads = torch.as_tensor(np.asarray(tr.attention))
        A = heads.mean(1)
        assert heads.shape == (L, 2, T, T)
        assert torch.allclose(A.sum(-1), torch.ones(L, T, dtype=A.dtype), atol=1e-5)
        assert float(A.triu(1).abs().max()) == 0.0
        # equal to the explicit softmax of the model's own attention path at layer 0
        with torch.no_grad():
            X0 = m.token_matrices()[x[:1]]
            if m.config["position"] == "rotation":
                X0 = m._rotations(T, X0.dtype, X0.device) @ X0
            w0 = m.attention_mean(m._to_geo(X0) if X0.is_complex() and m._to_geo(X0).shape != X0.shape
                                  else X0, 0, explicit=True)[1][0]
        assert torch.allclose(heads[0].to(w0.dtype), w0, atol=1e-5)
        Sim = torch.as_tensor(np.asarray(tr.similarity)).to(rec["states"].real.dtype)
        assert Sim.shape == (L, T, T)
        # Re tr(H^* H) = d on the group; layer 0's similarity is that of the inputs
        assert torch.allclose(torch.diagonal(Sim, dim1=-2, dim2=-1), torch.full((L, T), float(d)), atol=1e-4)
        g = m.group
        assert torch.allclose(Sim[0, 3, 5], g.inner(rec["inputs"][3], rec["inputs"][5]), atol=1e-5)
        assert torch.allclose(Sim[1, 3, 5], g.inner(rec["states"][0, 3], rec["states"][0, 5]), atol=1e-5)
        # the last state's readout is the logits
        with torch.no_grad():
            M = m.token_matrices()
            assert torch.allclose(m.readout(rec["states"][-1], M), rec["logits"], atol=1e-5)
    else:
        # states follow the recurrence exactly: H_{t+1} = H_t exp(tangent_t)
        g = m.group
        H = g.identity()
        for t in range(T):
            H = H @ torch.linalg.matrix_exp(rec["tangents"][0, 0, t])
            assert torch.allclose(H, rec["states"][0, t], atol=1e-5)


def test_record_rejects_batches():
    m = make("osmformer")
    with pytest.raises(ValueError):
        m.record(tokens(2, 5))


@pytest.mark.parametrize("kind", KINDS)
def test_config_round_trip(kind):
    torch.manual_seed(8)
    m = make(kind, "O-block", d=4, block=2)
    cfg = json.loads(json.dumps(m.config))
    m2 = build_model(cfg)
    m2.load_state_dict(m.state_dict())
    x = tokens()
    assert torch.equal(m(x), m2(x))


# ---------------------------------------------------------------------------------------------------------------
# real-embedded vs native complex
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group", ["U", "SU"])
@pytest.mark.parametrize("prototypes", ["free", "group", "tied"])
def test_real_embedded_equals_native(kind, group, prototypes):
    torch.manual_seed(9)
    extra = {"position": "rotation"} if kind == "osmformer" else {"rnn_input": "pull+token"}
    native = make(kind, group, d=3, prototypes=prototypes, **extra)
    real = make(kind, group, d=3, prototypes=prototypes, complex_mode="real", **extra)
    real.load_state_dict(native.state_dict())
    x = tokens(2, 8)
    a, b = native(x), real(x)
    assert torch.allclose(a, b, atol=1e-5)
    ra, rb = native.record(x[:1]), real.record(x[:1])
    assert rb["states"].dtype == torch.complex64
    assert torch.allclose(ra["states"], rb["states"], atol=1e-5)
    if kind == "osmformer":  # the attention the two representations score is the same
        assert torch.allclose(ra["attention_scale"], rb["attention_scale"], atol=1e-6)
        np.testing.assert_allclose(dense_attention(ra), dense_attention(rb), atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group, opts", [("T", {}), ("O-block", {"block": 2}), ("U", {}), ("SO", {})])
def test_support_prototypes_are_free_prototypes_stored_where_they_are_read(kind, group, opts, tmp_path):
    """``prototypes="support"``: the same draw as ``free`` at the same seed, kept on :meth:`proto_support`; the
    same logits, training or not, gradients included, and states recorded the same; the stored count equals the
    effective one (free prototypes store the unread entries too); a checkpoint round-trips."""
    from geomlab.checkpoints import io as checkpoint

    models = {}
    for proto in ("free", "support"):
        torch.manual_seed(4)
        models[proto] = make(kind, group, d=4, prototypes=proto, **opts)
    free, sup = models["free"], models["support"]
    x = tokens(2, 7)
    for mode in (True, False):
        free.train(mode)
        sup.train(mode)
        assert torch.allclose(free(x), sup(x), atol=1e-6)
    assert torch.allclose(free.record(x[:1])["states"], sup.record(x[:1])["states"], atol=1e-6)
    free.train()
    sup.train()
    free(x).square().sum().backward()
    sup(x).square().sum().backward()
    g_free = free.proto.grad
    rows, cols = torch.nonzero(sup.proto_support(), as_tuple=True)
    assert torch.allclose(g_free[:, rows, cols], sup.proto.grad, atol=1e-5)
    assert count_params(sup) == count_params(free) == count_params(sup, "stored")
    n_read = int(sup.proto_support().sum())
    assert sup.proto.shape[:2] == (sup.V, n_read) and (n_read < 16) == (group in ("T", "O-block"))
    sup.eval()
    checkpoint.save(tmp_path / "ckpt", sup, None)
    back = checkpoint.load(tmp_path / "ckpt").model
    assert torch.equal(back(x), sup(x))


@pytest.mark.parametrize("cfg", [{"d": 8, "n_layers": 2, "prototypes": "support", "heads": 2},
                                 {"d": 5, "n_layers": 1, "mixing": "scalar"}, {"d": 6, "position": "none"}])
def test_torus_trace_from_the_diagonals_equals_the_record(cfg):
    """The torus OSMFormer's trace is computed on the states' diagonals (:meth:`trace_record`, no ``d x d``
    matrix): the same stored fields as the trace of :meth:`record` up to float rounding; other groups and
    rotation positions go through :meth:`record`."""
    from geomlab.trace import from_record, trace

    torch.manual_seed(2)
    m = make("osmformer", "T", **cfg).eval()
    x = tokens(1, 13)
    assert "states" not in m.trace_record(x) and m.trace_record(x)["state_data"].shape == (m.n_layers, 13, m.d)
    a = trace(m, x)
    with torch.no_grad():
        b = from_record(m.record(x), "osmformer", x[0].numpy(), config=dict(m.config),
                        group={"name": "T", "d": m.d, "options": {}})
    for k in ("state_data", "input_data", "tangent_stats", "attention_scale", "logits"):
        np.testing.assert_allclose(getattr(a, k), getattr(b, k), atol=2e-6, err_msg=k)
    assert a.tangent_coords.dtype == np.float16 and a.tangent_coords.shape == b.tangent_coords.shape
    np.testing.assert_allclose(a.tangent_coords.astype(np.float32), b.tangent_coords.astype(np.float32), atol=2e-3)
    last = m.n_layers - 1
    np.testing.assert_allclose(a.similarity_rows(last, [0, 5]), b.similarity_rows(last, [0, 5]), atol=1e-5)
    for other in (make("osmformer", "O"), make("osmformer", "T", position="rotation")):
        assert set(other.eval().trace_record(x)) == set(other.record(x))


# ---------------------------------------------------------------------------------------------------------------
# parameter counts and budgets
# ---------------------------------------------------------------------------------------------------------------


def test_param_counts_follow_the_notes_formula():
    # notes §5.3: V n_g + V d^2 (free prototypes) + V + 1 + L (2 n_g^2 + 4 scalars) for d=16, L=2 -> 82.1K,
    # where our per-layer scalars are log beta + one ALiBi slope (2, not 4)
    m = build_model({"kind": "osmformer", "vocab_size": 65, "d": 16, "n_layers": 2})
    ng = 120
    assert count_params(m) == 65 * ng + 65 * 256 + 65 + 1 + 2 * (2 * ng * ng + 2)
    assert count_params(m, "stored") == count_params(m)
    full = build_model({"kind": "osmformer", "vocab_size": 65, "d": 16, "n_layers": 2, "token_param": "matrix"})
    assert count_params(full) == count_params(m)
    assert count_params(full, "stored") == count_params(m) + 65 * (256 - ng)
    # complex: a full token matrix stores 2 d^2 reals, of which d^2 (U) are used
    u = build_model({"kind": "osm-rnn", "vocab_size": 5, "group": "U", "d": 3, "token_param": "matrix"})
    assert count_params(u, "stored") - count_params(u) == 5 * (18 - 9)


@settings(max_examples=12, deadline=None)
@given(group=st.sampled_from(["O", "SO", "U", "SU", "T", "O-block"]), d=st.sampled_from([2, 4, 6]),
       kind=st.sampled_from(["osmformer", "osm-rnn"]), seed=st.integers(0, 2 ** 16))
def test_effective_count_is_the_values_that_get_a_gradient(group, d, kind, seed):
    # every value the effective count leaves out gets a zero gradient (the torus's off-diagonal and O-block's
    # off-block prototype entries), and every value it counts can get one
    torch.manual_seed(seed)
    extra = {"block": 2} if group == "O-block" else {}
    m = build_model({"kind": kind, "vocab_size": 7, "group": group, "d": d, **extra})
    x = torch.randint(0, 7, (3, 9))
    m(x).logsumexp(-1).sum().backward()
    touched = sum(int((p.grad != 0).sum()) for p in m.parameters() if p.grad is not None)
    unread = (~m.proto_support()).sum()
    assert int((m.proto.grad[:, ~m.proto_support()] != 0).sum()) == 0
    assert count_params(m, "stored") - count_params(m) == 7 * int(unread) * (2 if m.cplx else 1)
    assert touched <= count_params(m)
    if group == "T" or (group == "O-block" and d > 2):  # sparse states (one 2 x 2 block is all of O(2))
        assert count_params(m) < count_params(m, "stored")


def test_matrix_tokens_only_train_the_algebra_part():
    torch.manual_seed(10)
    m = make("osmformer", token_param="matrix")
    m(tokens()).sum().backward()
    g = m.token_matrix.grad
    assert torch.allclose(g + g.mT, torch.zeros_like(g), atol=1e-6)  # symmetric half gets no gradient


@pytest.mark.parametrize("kind,budget,fixed", [("osmformer", 91_000, {"mixing": "linear"}),
                                               ("osm-rnn", 50_000, {}),
                                               ("osmformer", 30_000, {"group": "U", "n_layers": 2}),
                                               ("osm-rnn", 20_000, {"group": "O-block", "block": 4}),
                                               ("osmformer", 40_000, {"group": "O-block", "block": 4})])
def test_config_for_budget(kind, budget, fixed):
    cfg = config_for_budget(kind, budget, 65, **fixed)
    for k, v in fixed.items():
        assert cfg[k] == v
    n = count_params(build_model(cfg))
    assert abs(n - budget) <= 0.05 * budget


def test_config_for_budget_impossible():
    with pytest.raises(ValueError):
        config_for_budget("osm-rnn", 50_000, 65, d=3)


# ---------------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind,bad", [("osmformer", {"mixing": "cubic"}), ("osmformer", {"position": "abs"}),
                                      ("osmformer", {"prototypes": "x"}), ("osmformer", {"heads": 3}),
                                      ("osmformer", {"group": "O-block"}), ("osmformer", {"block": 2}),
                                      ("osmformer", {"group": "Sp"}), ("osm-rnn", {"rnn_input": "x"}),
                                      ("osmformer", {"complex_mode": "real", "group": "O", "expm": "pade"}),
                                      ("osmformer", {"beta": -1.0}), ("osm-rnn", {"unknown_key": 1})])
def test_bad_config(kind, bad):
    with pytest.raises(ValueError):
        build_model({"kind": kind, "vocab_size": V, "d": 4, **bad})


def test_bad_tokens():
    m = make("osmformer")
    with pytest.raises(ValueError):
        m(torch.tensor([[0, V]]))
    with pytest.raises(ValueError):
        m(torch.tensor([0, 1]))


# ---------------------------------------------------------------------------------------------------------------
# the Taylor exponential
# ---------------------------------------------------------------------------------------------------------------


@given(scale=st.floats(0.0, 12.0), n=st.integers(1, 6), seed=st.integers(0, 10_000), cplx=st.booleans())
def test_expm_taylor_matches_matrix_exp(scale, n, seed, cplx):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(5, n, n, generator=g, dtype=torch.float64)
    if cplx:
        A = torch.complex(A, torch.randn(5, n, n, generator=g, dtype=torch.float64))
    A = A * scale / max(1.0, float(torch.linalg.matrix_norm(A).max()))
    assert torch.allclose(expm_taylor(A), torch.linalg.matrix_exp(A), atol=1e-12 * max(1.0, math.exp(scale)))
    A32 = A.to(torch.complex64 if cplx else torch.float32)
    ref = torch.linalg.matrix_exp(A)
    assert torch.allclose(expm_taylor(A32).to(ref.dtype), ref, atol=5e-6 * max(1.0, math.exp(scale)), rtol=1e-5)


@given(seed=st.integers(0, 10_000), scale=st.floats(0.05, 4.0))
def test_expm_taylor_gradient_matches(seed, scale):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    A = (A - A.mT) / 2 * scale
    W = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    A1 = A.clone().requires_grad_(True)
    A2 = A.clone().requires_grad_(True)
    (expm_taylor(A1) * W).sum().backward()
    (torch.linalg.matrix_exp(A2) * W).sum().backward()
    assert torch.allclose(A1.grad, A2.grad, atol=1e-10)


def test_taylor_and_group_exp_give_the_same_model():
    torch.manual_seed(11)
    a = make("osmformer", "SU", expm="taylor")
    b = make("osmformer", "SU", expm="group")
    b.load_state_dict(a.state_dict())
    x = tokens()
    assert torch.allclose(a(x), b(x), atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# training lowers the loss for every group
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("group,opts", GROUPS)
def test_training_lowers_loss(kind, group, opts, tiny_text):
    torch.manual_seed(12)
    chars = sorted(set(tiny_text))
    data = torch.tensor([chars.index(c) for c in tiny_text])
    cfg = {"kind": kind, "vocab_size": len(chars), "group": group, "d": 4, **opts}
    if kind == "osmformer":
        cfg["n_layers"] = 1
    m = build_model(cfg)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    T, steps = (16, 120) if kind == "osm-rnn" else (32, 150)  # a few hundred steps in total, kept short
    for _ in range(steps):
        ix = torch.randint(0, len(data) - T - 1, (8,), generator=g)
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + T + 1] for i in ix])
        loss = torch.nn.functional.cross_entropy(m(x).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
    assert math.isfinite(last)
    assert last < first - 0.5, (first, last)
    assert last < math.log(len(chars)) - 0.5  # clearly better than uniform


def test_no_weight_decay_names_exist():
    m = make("osmformer", prototypes="group", position="rotation")
    names = dict(m.named_parameters())
    skip = m.no_weight_decay
    assert skip <= set(names)
    assert {"pos_coords", "log_beta", "tau"} <= skip
    assert not {"token_coords", "proto_coords"} & skip  # the token and prototype tables decay
    free = make("osmformer")
    assert "proto" not in free.no_weight_decay  # free prototypes are ordinary weights
    tied = make("osmformer", token_param="matrix", prototypes="tied")
    assert "token_matrix" not in tied.no_weight_decay and {"tau", "bias"} <= tied.no_weight_decay


def test_bench_runs(capsys, tmp_path):
    import json
    import math

    from geomlab.bench import osm as bench

    path = tmp_path / "osm.json"
    assert bench.main(["--batch", "2", "--seq", "8", "--reps", "1", "--only", "osmformer", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "osmformer" in out and "ratio to transformer" in out
    data = json.loads(path.read_text())
    assert data["kind"] == "bench-osm" and data["batch"] == 2 and data["torch"]
    assert [(r["name"], r["base"]) for r in data["rows"]] == [("transformer", "transformer"),
                                                              ("osmformer", "transformer")]
    for r in data["rows"]:
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("params", "ms_per_step", "base_ms_per_step", "ratio"))
    assert data["rows"][1]["config"]["mixing"] == "linear"


@pytest.mark.parametrize("n", [9, 15, 17])
@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_expm_taylor_padded_sizes(n, dtype):
    """Sizes that get zero-padded to a multiple of 8 give the exact exponential and gradient."""
    g = torch.Generator().manual_seed(n)
    A = torch.randn(2, 3, n, n, generator=g, dtype=torch.float64).to(dtype)
    A = (A - A.mT.conj()) / 2
    assert torch.allclose(expm_taylor(A), torch.linalg.matrix_exp(A), atol=1e-12)
    W = torch.randn(2, 3, n, n, generator=g, dtype=torch.float64).to(dtype)
    A1, A2 = A.clone().requires_grad_(True), A.clone().requires_grad_(True)
    (expm_taylor(A1) * W.conj()).real.sum().backward()
    (torch.linalg.matrix_exp(A2) * W.conj()).real.sum().backward()
    assert torch.allclose(A1.grad, A2.grad, atol=1e-10)


@pytest.mark.parametrize("group", ["U", "SU", "T"])
@pytest.mark.parametrize("heads", [1, 2, 4])
def test_realified_heads_give_the_native_logits_in_float64(group, heads):
    """complex_mode='real' splits the 2d x 2d realified rows into heads with row r beside its imaginary twin
    r + d, so every head scores what the native head scores: the same logits to 1e-8.
    Before, rows r and r + d landed in different heads and the logits differed by ~2e-2."""
    torch.manual_seed(3)
    native = make("osmformer", group, d=4, heads=heads).double()
    real = make("osmformer", group, d=4, heads=heads, complex_mode="real").double()
    real.load_state_dict(native.state_dict())
    x = tokens(2, 11)
    with torch.no_grad():
        torch.testing.assert_close(real(x), native(x), rtol=0, atol=1e-8)
        np.testing.assert_allclose(dense_attention(real.record(x[:1]), heads=heads),
                                   dense_attention(native.record(x[:1]), heads=heads), atol=1e-8)
