"""Hook points (geomlab.models.hooks): every kind lists and fires them, records are read from them (one by one
equals batched), functions run at them and may replace values, and nothing stays attached afterwards."""

from __future__ import annotations

import pytest
import torch

from geomlab.models import build_model, kinds, model_class
from geomlab.models.hooks import any_active, hook_points, run_with_cache, run_with_hooks
from helpers.models import small_model

V = 11
#: Extra configurations whose forward takes another path (torus diagonals, realified states, explicit mixer,
#: several LSTM layers, a shared CEM diagonal).
VARIANTS = {
    "osmformer-T": ("osmformer", {"group": "T", "d": 4, "n_layers": 2}),
    "osmformer-real-alibi": ("osmformer", {"group": "U", "d": 2, "complex_mode": "real", "position": "alibi",
                                           "heads": 2}),
    "osm-rnn-U": ("osm-rnn", {"group": "U", "d": 3, "rnn_input": "pull+token"}),
    "grassmann-explicit": ("grassmann", {"impl": "explicit", "offsets": [1, 3, 20], "layout": "pre_norm"}),
    "lstm-2": ("lstm", {"layers": 2, "embedding_dim": 5, "hidden": 7}),
    "cem-shared": ("cem", {"diagonal": "shared", "recursion_steps": 3}),
}
CASES = [(k, {}) for k in ("osm-rnn", "osmformer", "cem", "grassmann", "grassmann-attn", "transformer", "llama",
                           "lstm")] + list(VARIANTS.values())
if "hf-gpt2" in kinds():  # the hf extra installed; a variant with GPT-2's per-layer score scale
    CASES += [("hf-gpt2", {}), ("hf-gpt2", {"scale_attn_by_inverse_layer_idx": True, "n_layers": 3})]


def _model(kind, over):
    return small_model(kind, vocab_size=V, **over).eval()


def test_every_kind_is_covered():
    assert {k for k, _ in CASES} == set(kinds())


@pytest.mark.parametrize("kind,over", CASES)
def test_hook_points_are_listed_with_shapes_and_all_fire(kind, over):
    m = _model(kind, over)
    listed = m.hook_points()
    assert listed and all(doc.startswith("(B, ") for doc in listed.values())
    assert set(listed) == {n for n, _ in m.named_modules() if n.rsplit(".", 1)[-1].startswith("hook_")}
    x = torch.randint(0, V, (3, 9), generator=torch.Generator().manual_seed(0))
    names = [n for n in listed if not n.startswith("diag.")]  # the torus's diagonal path has its own run
    logits, cache = run_with_cache(m, x, names)
    assert set(cache) == set(names)
    for name, value in cache.items():
        assert value.shape[0] == 3, name
        if hook_points(m)[name].per_step and "cem" not in kind:  # a step per position
            assert value.shape[1] == 9, name
    torch.testing.assert_close(logits, m(x), rtol=1e-5, atol=1e-5)
    assert not any_active(m)


@pytest.mark.parametrize("kind,over", CASES)
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_recording_a_batch_equals_recording_one_by_one(kind, over, mode):
    m = getattr(_model(kind, over), mode)()
    x = torch.randint(0, V, (8, 12), generator=torch.Generator().manual_seed(1))
    together = m.records(x)
    assert len(together) == 8
    for b in range(8):
        alone = m.record(x[b:b + 1])
        assert set(alone) == set(together[b])
        for key in alone:
            # equal to float32 rounding: a batched matrix product may round differently from a single one, and
            # training mode's Taylor exp picks its squarings from the batch's largest norm
            torch.testing.assert_close(together[b][key], alone[key], rtol=1e-5, atol=1e-5, msg=f"{key} of {b}")
    if hasattr(m, "trace_record") and kind == "osmformer" and over.get("group") == "T":
        rec = m.eval().trace_record(x[:1])
        assert rec["state_data"].shape == (2, 12, 4) and rec["tangent_coords"].dtype == torch.float16


def test_a_replaced_residual_stream_gives_the_hand_computed_logits():
    """Replacing the transformer's last residual stream by a constant vector v makes every logit row
    head(LN_f(v)), computed here by hand (LayerNorm as its formula)."""
    torch.manual_seed(0)
    m = build_model({"kind": "transformer", "vocab_size": V, "d_model": 8, "n_layers": 2, "n_heads": 2}).eval()
    v = torch.linspace(-1, 2, 8)
    x = torch.randint(0, V, (2, 5))
    seen = []

    def replace(value, hook):
        seen.append(hook.name)
        return v.expand_as(value).clone()

    out = run_with_hooks(m, x, [("blocks.1.hook_resid_post", replace)])
    ln = m.ln_f
    normed = (v - v.mean()) / torch.sqrt(v.var(unbiased=False) + ln.eps) * ln.weight + ln.bias
    want = normed @ m.head.weight.T + m.head.bias
    torch.testing.assert_close(out, want.expand(2, 5, V), rtol=1e-5, atol=1e-5)
    assert seen == ["blocks.1.hook_resid_post"] and not any_active(m)
    assert not torch.allclose(m(x), out)


def test_a_state_reset_to_the_identity_restarts_the_osm_rnn():
    """H_0 = I: setting the state after token t to I makes the later logits those of a fresh run on the
    tokens after t, and the logits at t the readout of I."""
    torch.manual_seed(2)
    m = build_model({"kind": "osm-rnn", "vocab_size": V, "group": "SO", "d": 4}).eval()
    x = torch.randint(0, V, (2, 10), generator=torch.Generator().manual_seed(3))
    t = 4

    def reset(value, hook):
        if hook.step == t:
            return torch.eye(4).expand_as(value).clone()

    out = run_with_hooks(m, x, [("hook_state", reset)])
    torch.testing.assert_close(out[:, :t], m(x)[:, :t], rtol=0, atol=0)
    torch.testing.assert_close(out[:, t + 1:], m(x[:, t + 1:]), rtol=1e-5, atol=1e-5)
    readout_of_identity = m.readout(torch.eye(4), m.token_matrices())
    torch.testing.assert_close(out[:, t], readout_of_identity.expand(2, V), rtol=1e-5, atol=1e-5)


def test_the_lstm_states_are_those_of_an_lstm_cell():
    """The hooked step-by-step recurrence sees the h and c of torch.nn.LSTMCell with the same weights, and a
    zeroed h at step t gives the head's bias as the logits at t."""
    torch.manual_seed(4)
    m = build_model({"kind": "lstm", "vocab_size": V, "hidden": 6}).eval()
    x = torch.randint(0, V, (3, 7))
    logits, cache = run_with_cache(m, x)
    cell = torch.nn.LSTMCell(V, 6)
    lstm = m.lstm
    with torch.no_grad():
        for a, b in (("weight_ih", "weight_ih_l0"), ("weight_hh", "weight_hh_l0"), ("bias_ih", "bias_ih_l0"),
                     ("bias_hh", "bias_hh_l0")):
            getattr(cell, a).copy_(getattr(lstm, b))
        h = c = torch.zeros(3, 6)
        onehot = torch.nn.functional.one_hot(x, V).float()
        for t in range(7):
            h, c = cell(onehot[:, t], (h, c))
            torch.testing.assert_close(cache["layers.0.hook_h"][:, t], h, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(cache["layers.0.hook_c"][:, t], c, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits, m(x), rtol=1e-5, atol=1e-6)
    out = run_with_hooks(m, x, [("layers.0.hook_h", lambda v, hook: torch.zeros_like(v) if hook.step == 2 else None)])
    torch.testing.assert_close(out[:, 2], m.head.bias.expand(3, V))
    torch.testing.assert_close(out[:, :2], logits[:, :2], rtol=1e-5, atol=1e-6)


def test_a_read_only_hook_point_refuses_a_replacement_and_hooks_are_removed_on_error():
    m = _model("cem", {})
    x = torch.randint(0, V, (1, 6))
    before = m(x)
    with pytest.raises(ValueError, match="read-only"):
        run_with_hooks(m, x, [("stack.layers.0.0.hook_energy", lambda v, hook: v + 1)])
    assert not any_active(m)

    def boom(value, hook):
        raise RuntimeError("inside a hook")

    with pytest.raises(RuntimeError, match="inside a hook"):
        run_with_hooks(m, x, [("hook_embed", lambda v, h: None), ("stack.layers.1.1.hook_iterate", boom)])
    assert not any_active(m) and all(hp.step == 0 for hp in hook_points(m).values())
    assert torch.equal(m(x), before)
    with pytest.raises(ValueError, match="unknown hook point"):
        run_with_cache(m, x, ["no.such.hook"])


def test_a_replaced_cem_iterate_carries_on():
    """Replacing the output iterate x^S of the last sub-block by zeros gives the logits RMSNorm(0) E^T = 0;
    the iterates before it are untouched."""
    m = _model("cem", {})
    x = torch.randint(0, V, (2, 6))
    steps = m.stack.steps
    last = f"stack.layers.{len(m.stack.layers) - 1}.1.hook_iterate"
    out = run_with_hooks(m, x, [(last, lambda v, hook: torch.zeros_like(v) if hook.step == steps else None)])
    assert torch.equal(out, torch.zeros_like(out))


def test_the_fused_osm_rnn_hooks_are_read_only():
    m = build_model({"kind": "osm-rnn", "vocab_size": V, "group": "SO", "d": 4}).train()
    x = torch.randint(0, V, (2, 5))
    _, cache = run_with_cache(m, x, ["hook_state"])
    assert cache["hook_state"].shape == (2, 5, 4, 4)
    with pytest.raises(ValueError, match="fused"):
        run_with_hooks(m, x, [("hook_state", lambda v, hook: v.clone())])
    assert not any_active(m)


def test_the_trace_family_comes_from_the_model_class():
    """A record is wrapped by the family its kind's class records, whatever keys it holds: energies and
    reduced vectors in a baseline's record stay extras."""
    from geomlab.trace import BaselineTrace, CEMTrace, from_record

    rec = {"logits": torch.zeros(4, 3), "energies": torch.zeros(1, 2, 3, 4), "displacement": torch.zeros(1, 2, 3, 4),
           "reduced": torch.zeros(1, 4, 2), "offsets": torch.ones(1, 1, dtype=torch.long)}
    tok = torch.zeros(4, dtype=torch.long)
    for kind in ("transformer", "grassmann-attn", "lstm"):
        assert model_class(kind).trace_family() == "baseline"
        tr = from_record(rec, kind, tok)
        assert type(tr) is BaselineTrace and "energies" in tr.extras and "reduced" in tr.extras
    assert type(from_record(rec, "cem", tok)) is CEMTrace
    assert type(from_record({"logits": torch.zeros(4, 3)}, "no-such-kind", tok)) is BaselineTrace


def test_inactive_hook_points_cost_one_call():
    """An inactive hook point returns its input object itself."""
    m = _model("transformer", {})
    hp = hook_points(m)["blocks.0.hook_resid_post"]
    v = torch.randn(2, 3, 16)
    assert hp(v) is v and not hp.active and hp.step == 0
