"""Tests of the layer lens (geomlab.trace.lens): the last stage is the model's own prediction for every kind,
an intermediate stage against a hand computation, the next token's probability and rank, and the lens in a
trace and its file."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from geomlab.models import kinds
from geomlab.trace import TraceError, encode_text, load_trace, save_trace, trace
from geomlab.trace.lens import layer_lens, lens_from_log_probs
from helpers.models import MODELS, TEXT, VOCAB, small_model

TOKENS = encode_text(VOCAB, TEXT[:20])


def _model(kind, **over):
    model = small_model(kind, **over)
    model.eval()
    return model


@pytest.mark.parametrize("name", sorted(MODELS) + ["osmformer-rotation", "cem-3-steps"])
def test_last_stage_is_the_models_own_prediction(name):
    if name == "osmformer-rotation":
        model = _model("osmformer", group="SO", d=3, n_layers=2, position="rotation")
    elif name == "cem-3-steps":
        model = _model("cem", inference_recursion_steps=3)
    else:
        kind, over = MODELS[name]
        model = _model(kind, **over)
    lens = layer_lens(model, TOKENS)
    with torch.no_grad():
        expected = torch.log_softmax(model(TOKENS)[0].double(), dim=-1).numpy()
    assert lens.log_probs.shape == (lens.n_stages, TOKENS.shape[1], len(VOCAB))
    np.testing.assert_allclose(lens.log_probs[-1], expected, atol=2e-5, rtol=0)
    if name == "cem-3-steps":  # embedding + (attention, MLP) x layers x 3 steps
        assert lens.n_stages == 1 + 2 * 2 * 3 and lens.labels[-1] == "L1 mlp t=3"


def test_every_kind_declares_a_lens():
    for kind in kinds():
        assert small_model(kind).lens_stages(), kind


def test_transformer_block_0_by_hand():
    model = _model("transformer")
    lens = layer_lens(model, TOKENS)
    assert lens.labels == ["embedding", "block 0", "block 1"]
    with torch.no_grad():  # block 0's residual stream by hand: x + attn(ln1 x), then + mlp(ln2 x)
        blk = model.blocks[0]
        x = model.embed(TOKENS)
        T, D, H = x.shape[1], x.shape[2], blk.n_heads
        q, k, v = blk.qkv(blk.ln1(x)).view(1, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        pos = torch.arange(T)
        rel = (pos[:, None] - pos[None, :]).float()
        slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])
        scores = q @ k.transpose(-1, -2) / (D // H) ** 0.5 - slopes[:, None, None] * rel
        w = torch.softmax(scores.masked_fill(rel < 0, float("-inf")), dim=-1)
        x = x + blk.out((w @ v).transpose(1, 2).reshape(1, T, D))
        x = x + blk.proj(torch.nn.functional.gelu(blk.fc(blk.ln2(x))))
        logits = model.head(model.ln_f(x))[0]
        expected = torch.log_softmax(logits, dim=-1).numpy()
    np.testing.assert_allclose(lens.log_probs[1], expected, atol=1e-5)
    assert not np.allclose(lens.log_probs[1], lens.log_probs[2], atol=1e-3)  # a different stage


def test_next_token_probability_and_rank():
    lp = torch.log_softmax(torch.tensor([[[0.0, 2.0, 1.0], [3.0, 0.0, 3.0], [0.0, 0.0, 0.0]]]), dim=-1)
    lens = lens_from_log_probs(["s"], lp, torch.tensor([0, 2, 1]), k=2)
    p = lp.exp()[0]
    np.testing.assert_allclose(lens.next_prob[0, :2], [p[0, 2], p[1, 1]], rtol=1e-6)
    assert lens.next_rank[0, :2].tolist() == [2.0, 3.0]  # 1 is above 2's; both 0 and 2 are above 1's
    assert np.isnan(lens.next_prob[0, 2]) and np.isnan(lens.next_rank[0, 2])
    assert lens.top_ids[0, 0].tolist() == [1, 2] and lens.top_ids.dtype == np.int32
    np.testing.assert_allclose(lens.top_probs[0, 0], [p[0, 1], p[0, 2]], rtol=1e-6)
    assert lens.top_probs.dtype == np.float32 and lens.next_prob.dtype == np.float32


def test_lens_top_k_matches_the_log_probs():
    model = _model("llama")
    lens = layer_lens(model, TOKENS, k=3)
    order = np.argsort(-lens.log_probs, axis=-1, kind="stable")[..., :3]
    np.testing.assert_array_equal(np.sort(lens.top_ids, -1), np.sort(order, -1))
    nxt = TOKENS[0, 1:].numpy()
    actual = np.take_along_axis(lens.log_probs[:, :-1], nxt[None, :, None], -1)[..., 0]
    np.testing.assert_allclose(lens.next_prob[:, :-1], np.exp(actual), rtol=1e-5)
    np.testing.assert_array_equal(lens.next_rank[:, :-1], 1 + (lens.log_probs[:, :-1] > actual[..., None]).sum(-1))


def test_bad_input():
    model = _model("transformer")
    with pytest.raises(TraceError):
        layer_lens(model, TOKENS.expand(2, -1))
    with pytest.raises(TraceError):
        layer_lens(model, TOKENS, k=0)


def test_trace_carries_the_lens_and_its_file_round_trips():
    model = _model("osmformer", group="U", d=3, n_layers=2)
    tr = trace(model, TOKENS, vocab=VOCAB)
    full = layer_lens(model, TOKENS)
    assert tr.lens.log_probs is None and tr.lens.labels == full.labels
    np.testing.assert_array_equal(tr.lens.top_ids, full.top_ids)
    np.testing.assert_allclose(tr.lens.next_prob, full.next_prob)
    np.testing.assert_allclose(tr.lens.top_probs[-1, :, 0], np.exp(tr.log_probs().max(-1)), rtol=1e-5)
    buf = io.BytesIO()
    save_trace(tr, buf)
    back = load_trace(buf.getvalue())
    assert back.lens.labels == tr.lens.labels and back.lens.names == tr.lens.names
    top = int(tr.lens.top_ids[0, 0, 0])
    assert tr.lens.name(top) == VOCAB.decode([top]).replace(" ", "␣").replace("\n", "↵")
    for name in ("top_ids", "top_probs", "next_prob", "next_rank"):
        np.testing.assert_array_equal(getattr(back.lens, name), getattr(tr.lens, name))


def test_trace_without_lens_is_unchanged_and_old_files_load():
    model = _model("cem")
    with_lens, without = trace(model, TOKENS, lens=True), trace(model, TOKENS, lens=False)
    assert without.lens is None
    assert with_lens.stored_arrays().keys() == without.stored_arrays().keys()
    for name, value in without.stored_arrays().items():
        np.testing.assert_array_equal(with_lens.stored_arrays()[name], value)
    buf = io.BytesIO()
    save_trace(without, buf)  # a file without a lens, as older versions wrote them
    assert load_trace(buf.getvalue()).lens is None


@pytest.mark.parametrize("kind", kinds())
def test_a_trace_with_the_lens_records_what_one_without_it_does(kind):
    """The lens is read from the trace's own run (or, where watching its hook points changes the arithmetic,
    from a run of its own): every array of the trace is the same with and without it, bit for bit."""
    model = small_model(kind)
    tokens = encode_text(VOCAB, TEXT)
    a, b = trace(model, tokens, vocab=VOCAB, lens=True), trace(model, tokens, vocab=VOCAB, lens=False)
    assert a.lens is not None and b.lens is None
    for key, value in vars(b).items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, getattr(a, key), equal_nan=True), key
