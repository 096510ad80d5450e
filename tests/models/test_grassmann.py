"""Tests of the Grassmann flow models (geomlab.models.grassmann; grassmann.md §1–§3, §7)."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from geomlab.models import build_model, config_for_budget, count_params, kinds
from geomlab.geometry.planes import plucker, plucker_relations

V = 23
LAYOUTS = ("post_norm", "post_norm_residual", "pre_norm")


def small(kind="grassmann", **kw):
    base = {"kind": kind, "vocab_size": V, "d_model": 16, "n_layers": 2, "d_ff": 32, "max_len": 64}
    if kind == "grassmann":
        base.update(rank=6, offsets=[1, 2, 4])
    else:
        base.update(n_heads=4)
    base.update(kw)
    torch.manual_seed(0)
    return build_model(base).eval()


def toks(B, T, seed=0):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def test_registered_and_paper_table_param_counts():
    assert {"grassmann", "grassmann-attn"} <= set(kinds())
    # grassmann.md §3 table (V = 96 and V = 256)
    for vocab, g_xs, t_xs, g_s, t_s in ((96, 216_000, 214_400, 819_544, 822_016),
                                        (256, 226_240, 224_640, 840_024, 842_496)):
        g = build_model({"kind": "grassmann", "vocab_size": vocab})
        t = build_model({"kind": "grassmann-attn", "vocab_size": vocab})
        assert (count_params(g), count_params(t)) == (g_xs, t_xs)
        gs = build_model({"kind": "grassmann", "vocab_size": vocab, "d_model": 128, "rank": 22, "d_ff": 512})
        ts = build_model({"kind": "grassmann-attn", "vocab_size": vocab, "d_model": 128, "d_ff": 512})
        assert (count_params(gs), count_params(ts)) == (g_s, t_s)


def test_paper_scale_param_counts():
    # grassmann.md §2.3: N = 6, L = 128, d = 256, d_ff = 1024, r = 32, |V| = 30,522
    paper = {"vocab_size": 30522, "d_model": 256, "n_layers": 6, "d_ff": 1024, "max_len": 128}
    for kind, extra, n in (("grassmann-attn", {}, 12_585_472), ("grassmann", {"rank": 32}, 12_607_168)):
        cls_count = build_model({"kind": kind, **paper, **extra}).analytic_param_count(
            {**build_model({"kind": kind, "vocab_size": 2}).default_config(), **paper, **extra})
        assert cls_count == n
    with torch.device("meta"):
        m = build_model({"kind": "grassmann", **paper, "rank": 32})
    assert count_params(m) == 12_607_168


@pytest.mark.parametrize("kind", ["grassmann", "grassmann-attn"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_analytic_count_and_rebuild(kind, layout):
    m = small(kind, layout=layout)
    assert count_params(m) == m.analytic_param_count(m.config) == count_params(m, "stored")
    json.dumps(m.config)
    m2 = build_model(m.config)
    assert [p.shape for p in m2.parameters()] == [p.shape for p in m.parameters()]


@pytest.mark.parametrize("kind,layout,schedule", [
    ("grassmann", "post_norm", "all"), ("grassmann", "pre_norm", "all"),
    ("grassmann", "post_norm_residual", "per_layer"), ("grassmann", "post_norm", "per_layer"),
    ("grassmann-attn", "post_norm", None), ("grassmann-attn", "pre_norm", None)])
def test_no_future_leak_bit_identical(kind, layout, schedule):
    kw = {"layout": layout}
    if schedule:
        kw["offset_schedule"] = schedule
        if schedule == "per_layer":
            kw["offsets"] = [1, 3]
    m = small(kind, **kw)
    x = toks(2, 40)
    with torch.no_grad():
        base = m(x)
        for s in (0, 7, 25, 39):
            y = x.clone()
            y[:, s] = (y[:, s] + 1) % V
            out = m(y)
            assert torch.equal(out[:, :s], base[:, :s])
            assert not torch.equal(out[:, s], base[:, s])  # the test can see a change


@pytest.mark.parametrize("schedule", ["all", "per_layer"])
def test_record_contract_and_output_unchanged(schedule):
    offsets = [1, 2, 4] if schedule == "all" else [2, 1]
    m = small(offsets=offsets, offset_schedule=schedule)
    x = toks(1, 30)
    with torch.no_grad():
        before = m(x)
        rec = m.record(x)
        after = m(x)
    assert torch.equal(before, after) and torch.equal(rec["logits"], before[0])
    L, T, d, r, Pn = 2, 30, 16, 6, 15
    S = 3 if schedule == "all" else 1
    shapes = {"inputs": (L, T, d), "reduced": (L, T, r), "plucker": (L, S, T, Pn), "plucker_mask": (L, S, T),
              "offsets": (L, S), "gates": (L, T, d), "logits": (T, V), "plucker_norm": (L, S, T),
              "plucker_mean": (L, T, Pn)}
    assert {k: tuple(v.shape) for k, v in rec.items()} == shapes
    assert rec["plucker_mask"].dtype == torch.bool and rec["offsets"].dtype == torch.long
    expected_offsets = [offsets] * L if schedule == "all" else [[o] for o in offsets]
    assert rec["offsets"].tolist() == expected_offsets
    pos = torch.arange(T)
    for layer in range(L):
        for slot in range(S):
            D = int(rec["offsets"][layer, slot])
            assert torch.equal(rec["plucker_mask"][layer, slot], pos >= D)
            p = rec["plucker"][layer, slot]
            assert p[:D].abs().max() == 0 if D > 0 else True
            norms = p[D:].norm(dim=-1)
            assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)
    assert ((rec["gates"] > 0) & (rec["gates"] < 1)).all()
    # the recorded reduced vectors are the layer's own reduction of its input (post-norm: input = h)
    mix = m.blocks[1].mixer
    assert torch.allclose(rec["reduced"][1], mix.reduce(rec["inputs"][1]), atol=1e-6)


def test_single_offset_plucker_vectors_satisfy_relations_and_mean_skips_missing():
    m = small(rank=6, offsets=[1, 2, 4]).double()
    x = toks(1, 24)
    rec = m.record(x)
    mask = rec["plucker_mask"]
    single = rec["plucker"][mask]  # every single-offset p_hat
    assert single.shape[0] == 2 * (23 + 22 + 20)
    assert plucker_relations(single).abs().max() < 1e-6
    # the offset-average is over valid offsets only (skipped, not zero-padded)
    mean = rec["plucker_mean"]
    cnt = mask.sum(1, keepdim=True).clamp_min(1)
    assert torch.allclose(mean, (rec["plucker"] * mask[..., None]).sum(1) / cnt.transpose(1, 2), atol=1e-12)
    assert torch.allclose(mean[:, 1], rec["plucker"][:, 0, 1])  # t = 1: only offset 1 exists
    assert mean[:, 0].abs().max() == 0
    # every plane at position t contains z_t, so their mean z_t ^ (sum_D w_D z_{t-D}) is still one plane
    # (decomposable, kappa = 1) although not of unit norm; a mean across positions is not a plane.
    assert plucker_relations(mean[:, 10]).abs().max() < 1e-10
    assert (mean[:, 10].norm(dim=-1) < 1 - 1e-3).all()
    z = rec["reduced"][0]
    w = 1 / rec["plucker_norm"][0, :, 10]
    past = sum(w[k] * z[10 - int(D)] for k, D in enumerate(rec["offsets"][0])) / 3
    assert torch.allclose(mean[0, 10], plucker(z[10], past), atol=1e-10)
    assert plucker_relations(mean[0, 5:15].mean(0)).abs().max() > 1e-6


def test_average_then_project_equals_project_then_average():
    m = small().double()
    x = toks(1, 20)
    rec = m.record(x)
    mix = m.blocks[0].mixer
    g_avg_first = mix.plu(rec["plucker_mean"][0])
    per = mix.plu(rec["plucker"][0])  # (S, T, d)
    mask = rec["plucker_mask"][0]
    g_proj_first = (per * mask[..., None]).sum(0) / mask.sum(0).clamp_min(1)[:, None]
    assert torch.allclose(g_avg_first[1:], g_proj_first[1:], atol=1e-12)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("normalize", ["clamp", "smooth"])
def test_fused_equals_explicit_reference(layout, normalize):
    # repeated tokens and no positions: many exactly parallel pairs at layer 0 (the hard case for fusing)
    x = torch.tensor([[3, 3, 3, 5, 5, 1, 3, 3, 5, 5, 5, 5, 2, 2, 3, 3] * 3])
    # (some later-layer pairs are nearly parallel, so agreement is limited by the problem's conditioning)
    for dtype, tol in ((torch.float64, 1e-9), (torch.float32, 1e-5)):
        a = small(layout=layout, normalize=normalize, positions="none").to(dtype)
        b = small(layout=layout, normalize=normalize, positions="none", impl="explicit").to(dtype)
        b.load_state_dict(a.state_dict())
        with torch.no_grad():
            assert torch.allclose(a(x), b(x), atol=tol, rtol=0)
            ra, rb = a.record(x), b.record(x)
        if dtype == torch.float64:
            for key in ("plucker", "plucker_mean", "plucker_norm", "gates"):
                assert torch.allclose(ra[key], rb[key], atol=1e-8, rtol=0), key
        assert ra["plucker_norm"][0][ra["plucker_mask"][0]].min() == 0  # the degenerate pairs were there


@pytest.mark.parametrize("impl", ["fused", "explicit"])
@pytest.mark.parametrize("normalize", ["clamp", "smooth"])
@pytest.mark.parametrize("bias", [0.0, 0.7])
def test_parallel_and_zero_pairs_finite_values_and_gradients(impl, normalize, bias):
    m = small(normalize=normalize, impl=impl).train()
    with torch.no_grad():
        for b in m.blocks:  # z_t = b_red for every t: every pair is parallel (bias) or zero (no bias)
            b.mixer.reduce.weight.zero_()
            b.mixer.reduce.bias.fill_(bias)
    x = toks(2, 30)
    logits = m(x)
    assert torch.isfinite(logits).all()
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
    loss.backward()
    for name, p in m.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    rec = m.record(x[:1])
    assert torch.isfinite(rec["plucker"]).all() and rec["plucker_norm"].abs().max() == 0


@pytest.mark.parametrize("impl", ["fused", "explicit"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schedule", ["all", "per_layer"])
def test_incremental_equals_full_with_constant_state(impl, layout, schedule):
    offsets = [1, 2, 5] if schedule == "all" else [3, 1]
    m = small(layout=layout, offsets=offsets, offset_schedule=schedule, impl=impl).double()
    x = toks(3, 33)
    with torch.no_grad():
        full = m(x)
        inc = m.forward_incremental(x)
    assert torch.allclose(inc, full, atol=1e-10, rtol=0)
    state = m.init_state(3)
    for t in range(33):
        _, state = m.step(x[:, t], state)
        for layer, past in enumerate(state["past"]):
            assert past.shape[1] == min(t + 1, max(m.layer_offsets[layer]))


def test_incremental_float32_and_generate():
    m = small(positions="none")
    x = toks(2, 100)  # longer than max_len: allowed without learned positions
    with torch.no_grad():
        assert torch.allclose(m.forward_incremental(x), m(x), atol=1e-4)
    out = m.generate(x[:, :5], 20, generator=torch.Generator().manual_seed(1))
    assert out.shape == (2, 25) and torch.equal(out[:, :5], x[:, :5]) and int(out.max()) < V
    with pytest.raises(ValueError):
        m.generate(x[:, :5], 3, temperature=0)


def test_max_len_enforced_with_learned_positions():
    m = small(max_len=8)
    with pytest.raises(ValueError, match="max_len"):
        m(toks(1, 9))
    state = m.init_state(1)
    for t in range(8):
        _, state = m.step(toks(1, 1)[:, 0], state)
    with pytest.raises(ValueError, match="max_len"):
        m.step(toks(1, 1)[:, 0], state)


def test_positions_none_reads_past_the_old_max_len():
    """Without a position table the model reads any length (the zoo model's setting): finite logits far past
    ``max_len`` (and past the old zoo table of 128), and causal — a prefix gives the same logits alone."""
    m = small(positions="none", max_len=16)
    assert m.pos is None and not any("pos" in name for name, _ in m.named_parameters())
    x = toks(1, 600)
    with torch.no_grad():
        out = m(x)
        head = m(x[:, :200])
    assert out.shape == (1, 600, V) and torch.isfinite(out).all()
    assert torch.allclose(out[:, :200], head, atol=1e-5)
    learned = small(max_len=16)
    with pytest.raises(ValueError, match="max_len=16"):
        learned(x)


def test_learned_position_checkpoints_still_load_and_stop_at_max_len(tmp_path):
    """A user checkpoint with the learned table (the paper's setting and the old zoo model's) still loads,
    reads up to ``max_len`` and gives the same clear errors past it (model and trace)."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.data import Vocab
    from geomlab.trace import TraceError, trace

    m = small(max_len=128)
    vocab = Vocab.from_text("".join(chr(97 + i) for i in range(V - 1)))
    assert vocab.size == V
    path = ckpt.save(tmp_path / "learned", m, vocab, {"name": "learned"})
    c = ckpt.load(path)
    assert c.model.config["positions"] == "learned" and c.model.config["max_len"] == 128
    x = toks(1, 129)
    with torch.no_grad():
        assert torch.equal(c.model(x[:, :128]), m(x[:, :128]))
    with pytest.raises(ValueError, match="exceeds max_len=128"):
        c.model(x)
    assert trace(c.model, x[:, :128]).n_positions == 128
    with pytest.raises(TraceError, match="learned position table"):
        trace(c.model, x)


@pytest.mark.parametrize("bad", [
    {"layout": "sandwich"}, {"offset_schedule": "some"}, {"rank": 1}, {"offsets": [0, 1]}, {"offsets": []},
    {"offsets": [1, 2, 3], "offset_schedule": "per_layer"}, {"normalize": "l1"}, {"gate": "tanh"},
    {"eps": 0.0}, {"dropout": 1.5}, {"positions": "rope"}, {"impl": "cuda"}, {"colour": "red"}])
def test_bad_config_raises_value_error(bad):
    with pytest.raises(ValueError):
        small(**bad)


def test_attention_baseline_bad_heads_and_record():
    with pytest.raises(ValueError):
        small("grassmann-attn", n_heads=5)
    m = small("grassmann-attn")
    x = toks(1, 12)
    rec = m.record(x)
    from geomlab.trace import dense_attention

    A = torch.as_tensor(dense_attention(rec))
    assert A.shape == (2, 4, 12, 12)
    assert torch.allclose(A.sum(-1), torch.ones(2, 4, 12, dtype=A.dtype), atol=1e-6)
    assert A.triu(1).abs().max() == 0
    assert torch.equal(rec["logits"], m(x)[0])


@pytest.mark.parametrize("kind", ["grassmann", "grassmann-attn"])
@pytest.mark.parametrize("budget", [200_000, 800_000])
def test_config_for_budget(kind, budget):
    cfg = config_for_budget(kind, budget, 96, n_layers=4)
    n = count_params(build_model(cfg))
    assert abs(n - budget) <= 0.05 * budget and cfg["n_layers"] == 4
    cfg2 = config_for_budget(kind, budget, 96, layout="pre_norm", n_layers=3)
    assert cfg2["layout"] == "pre_norm" and cfg2["n_layers"] == 3
    assert abs(count_params(build_model(cfg2)) - budget) <= 0.05 * budget
    with pytest.raises(ValueError):
        config_for_budget(kind, 1_000, 96)


@given(st.lists(st.integers(1, 9), min_size=1, max_size=4), st.integers(2, 12))
def test_causality_property_random_offsets(offsets, s):
    m = small(offsets=offsets, d_model=8, d_ff=8, rank=4, n_layers=1)
    x = toks(1, 14, seed=s)
    y = x.clone()
    y[0, s:] = (y[0, s:] * 7 + 3) % V
    with torch.no_grad():
        assert torch.equal(m(x)[:, :s], m(y)[:, :s])


def test_learns_context_dependent_sequence():
    # "aab" repeated: after 'a' the next token depends on the previous one, so a model without token
    # mixing is stuck near (2/3) ln 2 = 0.46 nats; the Grassmann mixer must use the planes to go below.
    # Offsets {1, 2} could not: at both 'a' positions the offset-average is the same plane p(a, b) / 2
    # (one pair is parallel, p = 0) - averaging forgets which offset gave which plane (grassmann.md §1.9).
    def train(offsets):
        m = small(offsets=offsets, d_model=16, rank=4, positions="none").train()  # no position shortcut
        seq = torch.tensor([0, 0, 1] * 11)[None, :32].repeat(4, 1)
        opt = torch.optim.Adam(m.parameters(), lr=1e-2)
        for _ in range(120):
            logits = m(seq[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), seq[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        return float(loss.detach())

    assert train([1, 3]) < 0.1
    assert train([40]) > 0.4  # no pair ever exists: no mixing, cannot learn it


# ---------------------------------------------------------------- all offsets in one pass
from hypothesis import settings  # noqa: E402


@settings(max_examples=20, deadline=None)
@given(T=st.integers(1, 24), B=st.integers(1, 3),
       offsets=st.lists(st.integers(1, 30), min_size=1, max_size=5, unique=True),
       normalize=st.sampled_from(["clamp", "smooth"]), repeat=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_batched_offsets_equal_the_explicit_reference_with_gradients(T, B, offsets, normalize, repeat, seed):
    """The fused mixer (every offset in one gathered pass, partners past the start masked) equals the
    per-offset reference in float64, outputs and the gradients of every parameter, for offsets longer than the
    window too; ``repeat`` makes exactly parallel pairs (a repeated token)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (B, T), generator=g)
    if repeat:
        x[:, 1::2] = x[:, :1]
    a = small(offsets=offsets, normalize=normalize, positions="none").double().train()
    b = small(offsets=offsets, normalize=normalize, positions="none", impl="explicit").double().train()
    b.load_state_dict(a.state_dict())
    outs = []
    for m in (a, b):
        y = m(x)
        y.square().mean().backward()
        outs.append((y.detach(), {n: p.grad for n, p in m.named_parameters()}))
    torch.testing.assert_close(outs[0][0], outs[1][0], rtol=0, atol=1e-9)
    for name, grad in outs[0][1].items():
        torch.testing.assert_close(grad, outs[1][1][name], rtol=1e-7, atol=1e-8, msg=name)


def test_sinusoidal_positions_read_any_length_and_break_equal_token_planes():
    """``positions='sinusoidal'``: no parameters, any length, causal, the incremental pass equals the full
    one; and two equal tokens no longer give one layer-0 vector (their plane is not degenerate)."""
    from geomlab.models.grassmann import SINUSOID_RMS, sinusoidal_positions

    m = small(positions="sinusoidal", max_len=16)
    assert m.pos is None and not any("pos" in name for name, _ in m.named_parameters())
    assert count_params(m) == count_params(small(positions="none", max_len=16))
    x = toks(1, 300)
    with torch.no_grad():
        out, head = m(x), m(x[:, :100])
        assert torch.isfinite(out).all() and torch.allclose(out[:, :100], head, atol=1e-5)
        assert torch.allclose(m.forward_incremental(x[:, :60]), m(x[:, :60]), atol=1e-4)
        same = torch.full((1, 2), 3)
        e = m.embed(same)
        assert not torch.allclose(e[0, 0], e[0, 1]) and torch.equal(small(positions="none").embed(same)[0, 0],
                                                                     small(positions="none").embed(same)[0, 1])
    code = sinusoidal_positions(5, 7, 9)
    assert code.shape == (7, 9) and torch.allclose(code, sinusoidal_positions(0, 12, 9)[5:])
    assert abs(float(sinusoidal_positions(0, 4096, 16).pow(2).mean().sqrt()) - SINUSOID_RMS) < 1e-3


def test_a_position_shift_moves_training_windows_only():
    """``position_shift``: in training each forward starts its sinusoidal code at a random position (so the
    model cannot lean on absolute positions it would not see past its training length); evaluation starts at
    0, deterministic. It needs the sinusoidal code."""
    from geomlab.models.grassmann import GrassmannConfigError as ConfigError

    m = small(positions="sinusoidal", position_shift=4096)
    x = toks(2, 12)
    torch.manual_seed(0)
    with torch.no_grad():
        m.train()
        a, b = m.embed(x), m.embed(x)
        m.eval()
        c, d = m.embed(x), m.embed(x)
    assert not torch.allclose(a, b) and torch.equal(c, d)
    assert torch.allclose(c, small(positions="sinusoidal").eval().embed(x))
    with pytest.raises(ConfigError, match="position_shift"):
        small(positions="none", position_shift=8)
