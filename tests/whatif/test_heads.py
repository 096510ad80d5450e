"""Head ablation: equal to the transformer computed by hand with the head zeroed or uniform; a head whose output
projection is zero changes nothing when ablated; the new hook points leave the numbers as they were."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from geomlab.models.hooks import run_with_cache, run_with_hooks
from geomlab.models.transformer import alibi_bias
from geomlab.whatif.heads import ablate_head, uniform_pattern
from helpers.models import TEXT, VOCAB, get_model, small_model

TOKENS = VOCAB.encode(TEXT[:18]).numpy()
ATTN = ["transformer", "llama", "grassmann-attn"]


def _hand_transformer(model, tokens, layer, head, mode, position=None):
    """The transformer's forward written out (pre-norm blocks, ALiBi softmax attention, GELU MLP), with
    head ``head`` of block ``layer`` zeroed or given uniform weights: logits ``(T, V)`` float64."""
    m = model.double()
    try:
        x = m.embed(torch.as_tensor(tokens)[None])
        T = x.shape[1]
        bias = alibi_bias(m.slopes.double(), T)
        rows = slice(None) if position is None else slice(position, position + 1)
        for l, b in enumerate(m.blocks):
            H = b.n_heads
            D = x.shape[-1]
            qkv = b.qkv(F.layer_norm(x, (D,), b.ln1.weight, b.ln1.bias, b.ln1.eps))
            q, k, v = qkv.view(1, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H) + bias, dim=-1)
            if l == layer and mode == "uniform":
                w = w.clone()
                w[:, head, rows] = uniform_pattern(T, w.dtype)[rows]
            z = w @ v
            if l == layer and mode == "zero":
                z = z.clone()
                z[:, head, rows] = 0.0
            x = x + b.out(z.transpose(1, 2).reshape(1, T, D))
            hmid = F.layer_norm(x, (D,), b.ln2.weight, b.ln2.bias, b.ln2.eps)
            x = x + b.proj(F.gelu(b.fc(hmid)))
        return m.head(m.ln_f(x))[0].detach().numpy()
    finally:
        model.float()


@pytest.mark.parametrize("mode", ["zero", "uniform"])
@pytest.mark.parametrize("layer,head,position", [(0, 1, None), (1, 0, None), (1, 1, 6)])
def test_ablation_equals_hand_computation(mode, layer, head, position):
    model = get_model("transformer")
    out = ablate_head(model, TOKENS, layer, head, mode, position)
    with torch.no_grad():
        hand = _hand_transformer(model, TOKENS, layer, head, mode, position)
        plain = _hand_transformer(model, TOKENS, -1, 0, mode)
    np.testing.assert_allclose(out.after, hand, atol=1e-5)
    np.testing.assert_allclose(out.before, plain, atol=1e-5)
    assert np.abs(out.after - out.before).max() > 1e-7  # a random small model's heads are nearly uniform
    if position is not None:  # a causal model: earlier positions keep their logits
        assert np.array_equal(out.after[:position], out.before[:position])


def _out_proj(model, layer):
    block = model.blocks[layer]
    return getattr(block, "out", None) or getattr(block, "o", None) or block.mixer.out


@pytest.mark.parametrize("kind", ATTN)
@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_head_with_zero_output_projection_changes_nothing(kind, mode):
    model = small_model(kind).eval()
    H = model.cfg.n_heads
    proj = _out_proj(model, 1)
    dh = proj.weight.shape[1] // H
    with torch.no_grad():
        proj.weight[:, dh:2 * dh] = 0.0  # head 1 writes nothing
    out = ablate_head(model, TOKENS, 1, 1, mode)
    np.testing.assert_allclose(out.after, out.before, atol=1e-6)
    other = ablate_head(model, TOKENS, 1, 0, mode)
    assert not np.allclose(other.after, other.before, atol=1e-4)


def test_cem_zero_head_is_eta_zero():
    """CEM's update is a sum over heads weighted by eta_k: with every head of layer 0's attention ablated,
    that sub-block's iterate never moves from its input (no anchor in this config)."""
    model = small_model("cem").eval()
    attn = model.stack.layers[0][0]
    out = ablate_head(model, TOKENS, 0, 1)
    assert out.geometry["eta_after"][1] == 0 and out.geometry["eta_after"][0] == out.geometry["eta_before"][0]
    assert not np.allclose(out.after, out.before, atol=1e-4)
    attn.head_scale = torch.zeros(2)
    try:
        seen = []
        with torch.no_grad():
            run_with_hooks(model, torch.as_tensor(TOKENS)[None],
                           [("stack.layers.0.0.hook_iterate", lambda v, h: seen.append(v.clone()))])
    finally:
        attn.head_scale = None
    assert len(seen) >= 2 and all(torch.equal(s, seen[0]) for s in seen)
    with pytest.raises(ValueError):
        ablate_head(model, TOKENS, 0, 0, "uniform")


@pytest.mark.parametrize("kind", ATTN + ["cem"])
def test_errors(kind):
    model = get_model(kind)
    for args in [(2, 0), (-1, 0), (0, 2), (0, -1)]:
        with pytest.raises(ValueError):
            ablate_head(model, TOKENS, *args)
    with pytest.raises(ValueError):
        ablate_head(model, TOKENS, 0, 0, "mean")
    with pytest.raises(ValueError):
        ablate_head(get_model("lstm"), TOKENS, 0, 0)


@pytest.mark.parametrize("kind", ATTN)
def test_pattern_hook_reads_the_fused_attention(kind):
    """With hook_pattern read the weights are formed explicitly: the logits equal the fused call's to
    rounding; with only hook_z read they are the fused call's bit for bit."""
    model = get_model(kind)
    tok = torch.as_tensor(TOKENS)[None]
    name = "blocks.0.mixer.hook_{}" if kind == "grassmann-attn" else "blocks.0.hook_{}"
    with torch.no_grad():
        plain = model(tok)
        explicit = run_with_hooks(model, tok, [(name.format("pattern"), lambda v, h: None)])
        read_z = run_with_hooks(model, tok, [(name.format("z"), lambda v, h: None)])
    torch.testing.assert_close(explicit, plain, atol=1e-5, rtol=0)
    assert torch.equal(read_z, plain)


@pytest.mark.parametrize("mode", ["zero", "uniform"])
def test_osmformer_head_equals_attention_mean_by_hand(mode):
    """OSMFormer on O(4), 2 heads: head 1 owns rows 2-3 of the states, so its ablation replaces rows 2-3 of
    the layer's attention mean Hbar_i by 0 (zero) or by the causal mean (1 / (i + 1)) sum_{j <= i} H_j
    (uniform) and leaves rows 0-1 as they were."""
    model = get_model("osmformer-identity")
    tok = torch.as_tensor(TOKENS)[None]
    out = ablate_head(model, TOKENS, 0, 1, mode)
    with torch.no_grad():
        _, cache = run_with_cache(model, tok, ["hook_inputs", "layers.0.hook_attn_target"])
        X, Hbar = cache["hook_inputs"][0], cache["layers.0.hook_attn_target"][0].clone()
        mean = X.cumsum(0) / torch.arange(1, len(TOKENS) + 1, dtype=X.dtype)[:, None, None]
        Hbar[:, 2:4] = 0.0 if mode == "zero" else mean[:, 2:4]
        hand = run_with_hooks(model, tok, [("layers.0.hook_attn_target", lambda v, h: Hbar[None])])[0]
    np.testing.assert_allclose(out.after, hand.numpy(), atol=1e-5)
    assert np.abs(out.after - out.before).max() > 1e-4
    for name in ("osmformer-U3", "osmformer-T4"):  # complex and torus models run too
        o = ablate_head(get_model(name), TOKENS, 1, 0, mode, position=9)
        assert np.array_equal(o.after[:9], o.before[:9]) and not np.array_equal(o.after[9], o.before[9])
