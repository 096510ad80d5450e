"""The ``hf-gpt2`` kind: a tiny random GPT-2 of ``transformers`` saved as a Hugging Face folder opens in
geomlab (catalog, loader, trace, CLI, the attention page), and what geomlab reads of it equals what
``transformers`` computes itself (attention weights, hidden states, logits)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
tokenizers = pytest.importorskip("tokenizers", reason="the hf extra (tokenizers) is not installed")

from geomlab.checkpoints import catalog, io  # noqa: E402
from geomlab.checkpoints.layout import CheckpointError  # noqa: E402
from geomlab.models.hooks import run_with_cache  # noqa: E402
from geomlab.trace import trace_text  # noqa: E402
from geomlab.trace.lens import layer_lens  # noqa: E402

TEXT = "ROMEO: But soft, what light through yonder window breaks?"


def _tokenizer():
    """A byte-level BPE tokenizer trained offline on a line of text (GPT-2's pre-tokenizer and decoder)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT] * 10, trainers.BpeTrainer(
        vocab_size=290, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return tok


def _gpt2(folder, tokenizer: bool = True, vocab_size: int = 300, **over):
    """A random 2-layer GPT-2 (width 16, 2 heads) saved into ``folder`` with ``save_pretrained``, and with a
    tokenizer unless ``tokenizer`` is false; returns the ``transformers`` model in eval mode."""
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=vocab_size, n_positions=128, bos_token_id=None,
                     eos_token_id=None, **over)
    model = GPT2LMHeadModel(cfg)
    model.save_pretrained(folder)
    if tokenizer:
        PreTrainedTokenizerFast(tokenizer_object=_tokenizer()).save_pretrained(folder)
    return GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf") / "runs"
    hf = _gpt2(root / "tiny-gpt2")
    return root / "tiny-gpt2", hf


def test_attention_hidden_states_and_logits_equal_transformers_own(folder):
    path, hf = folder
    ck = io.load(path)
    assert ck.model.kind == "hf-gpt2" and ck.vocab.level == "subword"
    ids = ck.vocab.encode(TEXT)[None]
    assert ids.shape[1] < len(TEXT)  # sub-word tokens, not characters
    out = hf(ids, output_attentions=True, output_hidden_states=True)
    names = ["hook_embed"] + [f"blocks.{l}.hook_{p}" for l in range(2) for p in ("pattern", "resid_post")]
    logits, cache = run_with_cache(ck.model, ids, names)
    torch.testing.assert_close(logits, out.logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cache["hook_embed"], out.hidden_states[0])
    torch.testing.assert_close(cache["blocks.0.hook_resid_post"], out.hidden_states[1], rtol=1e-5, atol=1e-6)
    # transformers' last hidden state is after the final LayerNorm
    torch.testing.assert_close(ck.model.ln_f(cache["blocks.1.hook_resid_post"]), out.hidden_states[2],
                               rtol=1e-5, atol=1e-5)
    for l in range(2):
        torch.testing.assert_close(cache[f"blocks.{l}.hook_pattern"], out.attentions[l], rtol=1e-5, atol=1e-6)
    # the trace's weights (formed from the recorded queries and keys) are transformers' too, and so is the
    # residual stream it keeps for its figures
    tr = trace_text(ck.model, ck.vocab, TEXT)
    np.testing.assert_allclose(tr.extras["residual"][:2], torch.stack(out.hidden_states[:2])[:, 0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    for h in range(2):
        np.testing.assert_allclose(np.asarray(tr.attention_weights(1, h)), out.attentions[1][0, h].detach().numpy(),
                                   rtol=1e-4, atol=1e-6)
    assert len(tr.labels) == ids.shape[1] and tr.labels[0] == ck.vocab.decode(ids[0, :1]) == "ROMEO"


def test_layer_lens_last_stage_is_the_models_own_prediction(folder):
    path, hf = folder
    ck = io.load(path)
    ids = ck.vocab.encode(TEXT)[None]
    lens = layer_lens(ck.model, ids)
    expected = torch.log_softmax(hf(ids).logits[0], -1).detach().numpy()
    assert len(lens.labels) == 3  # the embedding and two blocks
    np.testing.assert_allclose(lens.log_probs[-1], expected, rtol=1e-4, atol=1e-5)


def test_scaled_attention_by_layer_index_matches(tmp_path):
    hf = _gpt2(tmp_path / "g", tokenizer=False, vocab_size=256, scale_attn_by_inverse_layer_idx=True)
    ck = io.load(tmp_path / "g")
    assert ck.vocab.level == "byte" and ck.vocab.encode("é").tolist() == [0xC3, 0xA9]
    ids = ck.vocab.encode(TEXT)[None]
    out = hf(ids, output_attentions=True)
    _, cache = run_with_cache(ck.model, ids, ["blocks.1.hook_pattern"])
    torch.testing.assert_close(cache["blocks.1.hook_pattern"], out.attentions[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ck.model(ids), out.logits, rtol=1e-5, atol=1e-5)


def test_catalog_lists_the_folder_and_a_bad_one_is_one_line(folder, tmp_path, monkeypatch):
    path, _ = folder
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(path.parent))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    entry = next(e for e in catalog.list_checkpoints() if e.ref == "runs/tiny-gpt2")
    assert entry.kind == "hf-gpt2" and entry.model_config["n_layers"] == 2
    assert catalog.demo_text(entry) == catalog.DEMO_TEXT
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text('{"model_type": "gpt2", "vocab_size": 10}')
    (bad / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="bad"):
        io.load(bad)


def test_cli_eval_and_trace_html(folder, tmp_path, capsys):
    from geomlab.commands.cli import main

    path, _ = folder
    text = tmp_path / "romeo.txt"
    text.write_text((TEXT + "\n") * 20)
    main(["eval", str(path), "--data", str(text), "--seq-len", "16"])
    out = capsys.readouterr().out
    assert "hf-gpt2" in out and "bits/token" in out  # sub-word tokens, not words
    main(["trace", str(path), "--text", TEXT, "--out", str(tmp_path / "t.npz"), "--html", str(tmp_path / "h")])
    assert (tmp_path / "h" / "attention_overview.html").is_file()
    assert (tmp_path / "h" / "lens_heatmap.html").is_file()
    assert (tmp_path / "h" / "residual_updates.html").is_file()


def test_attention_page_opens_on_it(folder, monkeypatch, tmp_path):
    from conftest import run_page
    from helpers.charts import figures

    path, _ = folder
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(path.parent))
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")
    at = run_page("attention", ckpt="runs/tiny-gpt2")
    assert not at.error, [e.value for e in at.error]
    drawn = figures(at)
    assert drawn and any(t.get("type") == "heatmap" for f in drawn for t in f["data"])
    assert any(f["layout"]["meta"]["view"] == "residual_updates" for f in drawn)  # the residual stream too
    assert at.session_state["gl_ckpt"] == "runs/tiny-gpt2"
    for slug in ("", "checkpoints", "compare"):  # Home's cards, the checkpoint list, Compare open on it too
        page = run_page(slug, ckpt="runs/tiny-gpt2")
        assert not page.error, (slug, [e.value for e in page.error])
