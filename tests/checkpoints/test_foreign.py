"""Foreign checkpoint folders (geomlab.checkpoints.foreign): a transformers GPT-2 folder is recognised and
described from its config.json alone; without transformers it is one line naming the extra to install; the
byte vocabulary a folder without a tokenizer reads round-trips any text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import save_file

from geomlab.checkpoints import foreign
from geomlab.data.vocab import ByteVocab, Vocab

ROOT = Path(__file__).resolve().parents[2]


def _folder(path: Path, **config) -> Path:
    path.mkdir(parents=True)
    cfg = {"model_type": "gpt2", "vocab_size": 300, "n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 64,
           "n_inner": None, **config}
    (path / "config.json").write_text(json.dumps(cfg))
    save_file({"transformer.wte.weight": torch.zeros(300, 16)}, str(path / "model.safetensors"))
    return path


def test_a_gpt2_folder_is_described_from_its_config(tmp_path):
    folder = _folder(tmp_path / "g", scale_attn_by_inverse_layer_idx=True)
    assert foreign.is_foreign(folder)
    meta = foreign.read_meta(folder)
    assert meta["model_config"] == {"kind": "hf-gpt2", "vocab_size": 300, "d_model": 16, "n_layers": 2,
                                    "n_heads": 2, "n_positions": 64, "n_inner": 0,
                                    "scale_attn_by_inverse_layer_idx": True}
    assert meta["vocab"] == {"level": "byte", "size": 300}
    vocab = Vocab.from_json(meta["vocab"])
    assert isinstance(vocab, ByteVocab) and vocab.size == 300 and vocab.decode([104, 105, 299]) == "hi<id 299>"


def test_other_folders_are_not_foreign(tmp_path):
    assert not foreign.is_foreign(_folder(tmp_path / "llama", model_type="llama"))
    geomlab_folder = _folder(tmp_path / "ours")
    (geomlab_folder / "geomlab.json").write_text("{}")
    assert not foreign.is_foreign(geomlab_folder)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    assert not foreign.is_foreign(bad) and not foreign.is_foreign(tmp_path / "missing")


def test_without_transformers_the_kind_is_absent_and_the_folder_one_line(tmp_path):
    folder = _folder(tmp_path / "g")
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from geomlab.models import kinds\n"
            "from geomlab.checkpoints import io\n"
            "print('hf-gpt2' in kinds())\n"
            f"try:\n    io.load({str(folder)!r})\nexcept io.CheckpointError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines == ["False", "g is a transformers GPT-2 folder: opening it needs the transformers library "
                              "(pip install 'geomlab[hf]')"]


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=40))
def test_the_byte_vocabulary_round_trips_any_text(text):
    vocab = ByteVocab()
    ids = vocab.encode(text)
    assert ids.tolist() == list(text.encode("utf-8", "surrogatepass"))
    assert len(vocab.split(text)) == len(ids) and vocab.ids(vocab.split(text)) == ids.tolist()
    if text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") == text:  # no lone surrogate
        assert vocab.decode(ids) == text
    assert Vocab.from_json(vocab.to_json()) == vocab


def test_a_tokenizer_vocabulary_round_trips_through_its_json():
    tokenizers = pytest.importorskip("tokenizers", reason="the hf extra (tokenizers) is not installed")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    tok.train_from_iterator(["soft light breaks"] * 5, tokenizers.trainers.BpeTrainer(
        vocab_size=280, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    from geomlab.data.vocab import TokenizerVocab, check_text

    vocab = TokenizerVocab(tok, size=300)
    again = Vocab.from_json(vocab.to_json())
    assert isinstance(again, TokenizerVocab) and again == vocab and again.size == 300
    ids = again.encode("soft light")
    assert ids.tolist() == tok.encode("soft light").ids and again.decode(ids) == "soft light"
    assert check_text(again, "soft light", 100) == tok.encode("soft light").tokens
    with pytest.raises(ValueError, match="bad tokenizer"):
        Vocab.from_json({"level": "subword", "tokenizer": "{}"})
