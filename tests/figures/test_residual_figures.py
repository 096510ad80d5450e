"""The residual-stream figures (geomlab.figures.residual): update sizes against transformers' own hidden states,
the PCA against scikit-learn's, and PCA properties on random streams (hypothesis)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geomlab.figures import FIGURES, FigureError
from geomlab.figures.residual import (has_residual, residual_paths, residual_pca, residual_update_norms,
                                      residual_updates)


def _trace(residual: np.ndarray) -> SimpleNamespace:
    T = residual.shape[1]
    return SimpleNamespace(kind="hf-gpt2", extras={"residual": residual}, n_positions=T,
                           labels=[f"t{i}" for i in range(T)])


def test_update_sizes_equal_transformers_hidden_state_differences(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from geomlab.checkpoints import io
    from geomlab.trace import trace

    torch.manual_seed(1)
    GPT2LMHeadModel(GPT2Config(n_layer=3, n_head=2, n_embd=16, vocab_size=256, n_positions=64, bos_token_id=None,
                               eos_token_id=None)).save_pretrained(tmp_path / "g")
    ck = io.load(tmp_path / "g")  # no tokenizer: bytes
    ids = ck.vocab.encode("a residual stream")[None]
    tr = trace(ck.model, ids, vocab=ck.vocab)
    hf = GPT2LMHeadModel.from_pretrained(tmp_path / "g").eval()
    hs = [h[0].detach().numpy().astype(np.float64) for h in hf(ids, output_hidden_states=True).hidden_states]
    upd, rel = residual_update_norms(tr)
    assert upd.shape == (3, ids.shape[1])
    for l in range(2):  # transformers' last hidden state is after ln_f: the first two blocks compare directly
        np.testing.assert_allclose(upd[l], np.linalg.norm(hs[l + 1] - hs[l], axis=-1), rtol=1e-4)
        np.testing.assert_allclose(rel[l], upd[l] / np.linalg.norm(hs[l], axis=-1), rtol=1e-4)
    chart = residual_updates(tr, cursor=2)
    np.testing.assert_allclose(np.asarray(chart.figure.data[0].z, dtype=float), upd, rtol=1e-6)
    assert {"residual_updates", "residual_paths"} <= set(FIGURES)


def test_pca_matches_scikit_learn():
    from sklearn.decomposition import PCA

    r = np.random.default_rng(0).normal(size=(4, 30, 8)) * np.linspace(3, 0.1, 8)
    coords, explained = residual_pca(_trace(r))
    ref = PCA(2).fit(r.reshape(-1, 8))
    want = ref.transform(r.reshape(-1, 8)).reshape(4, 30, 2)
    np.testing.assert_allclose(np.abs(coords), np.abs(want), atol=1e-9)  # each axis up to its sign
    np.testing.assert_allclose(explained, ref.explained_variance_ratio_, rtol=1e-9)
    chart = residual_paths(_trace(r), cursor=5)
    cursor_line = [d for d in chart.figure.data if d.meta == "cursor"][0]
    np.testing.assert_allclose(np.asarray(cursor_line.x), coords[:, 5, 0])


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(1, 12), st.integers(1, 6), st.integers(0, 10**6))
def test_pca_coordinates_are_centred_and_explain_at_most_all(S, T, D, seed):
    r = np.random.default_rng(seed).normal(size=(S, T, D))
    coords, explained = residual_pca(_trace(r))
    assert coords.shape == (S, T, 2)
    np.testing.assert_allclose(coords.reshape(-1, 2).mean(axis=0), 0, atol=1e-9)
    assert np.all(explained >= 0) and explained.sum() <= 1 + 1e-12 and explained[0] >= explained[1] - 1e-12
    # projections never lengthen a centred vector
    flat = r.reshape(-1, D)
    assert np.all(np.linalg.norm(coords.reshape(-1, 2), axis=1) <= np.linalg.norm(flat - flat.mean(0), axis=1) + 1e-9)


def test_a_trace_without_a_residual_stream_is_refused():
    tr = SimpleNamespace(kind="transformer", extras={}, n_positions=3, labels=["a", "b", "c"])
    assert not has_residual(tr)
    with pytest.raises(FigureError, match="no residual stream"):
        residual_updates(tr)
