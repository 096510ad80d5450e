"""One name per position of a text (geomlab.trace.position_labels): the token as typed, whitespace made
visible, and 'é→�' where the model read the unknown token. The trace keeps them as its labels, so its JSON,
`geomlab trace`, the views and What-if (`geomlab whatif`, the app's panel) all show the same."""

from __future__ import annotations

import json

import pytest
import torch

from geomlab.commands import load_checkpoint
from geomlab.commands.cli import main
from geomlab.data.vocab import Vocab
from geomlab.trace import encode_text, position_labels, trace_json, trace_text

CHARS = Vocab.from_text("To be or not\n")  # the unknown token '�' is its last id
CEM = "bundled/cem-t2-tinyshakespeare"


def test_a_position_the_model_read_as_unknown_shows_what_was_typed_and_what_it_read():
    text = "To 🙂é\n�"
    ids = encode_text(CHARS, text).reshape(-1)
    # a '�' typed is the vocabulary's own token: itself, unmarked
    assert position_labels(CHARS, text, ids) == ["T", "o", "␣", "🙂→�", "é→�", "↵", "�"]


def test_symbols_without_an_unknown_token_are_their_own_names():
    symbols = Vocab.from_symbols(["12340", "10234", "21034"])
    text = "12340 10234 21034"
    assert position_labels(symbols, text, symbols.encode(text)) == ["12340", "10234", "21034"]


def test_words_read_as_unknown_and_line_ends():
    words = Vocab.from_text("to be or not\n", level="word")
    text = "to be zebra\nor"
    assert position_labels(words, text, words.encode(text)) == ["to", "be", "zebra→<unk>", "↵", "or", "↵"]


def test_without_a_vocabulary_the_text_or_the_ids():
    assert position_labels(None, "a b", [3, 4, 5]) == ["a", "␣", "b"]
    assert position_labels(None, "ab", [3, 4, 5]) == ["#3", "#4", "#5"]


def test_the_trace_its_json_and_geomlab_whatif_name_positions_alike(capsys):
    text = "To be é or not"
    c = load_checkpoint(CEM, device="cpu")
    assert "é" not in c.vocab
    tr = trace_text(c.model, c.vocab, text)
    assert tr.labels[6] == "é→�" and tr.labels == position_labels(c.vocab, text, encode_text(c.vocab, text))
    assert json.loads(trace_json(tr, 0, tr.n_positions))["labels"][6] == "é→�"
    torch.manual_seed(0)
    assert main(["whatif", CEM, "--text", text, "--pos", "6", "--threads", "1"]) == 0
    assert f"at position 6 ({tr.labels[6]!r})" in capsys.readouterr().out


@pytest.mark.parametrize("argv, want", [
    (["--pos", "6", "--size", "3"], "top 5 next token at position 6 ('🙂→�'), before and after:"),
    (["--pos", "6", "--patch", "e"], "'🙂→�' at position 6 replaced by 'e': "),
])
def test_geomlab_whatif_names_an_unknown_character_as_the_app_does(capsys, argv, want):
    torch.manual_seed(0)
    rc = main(["whatif", CEM, "--text", "To be 🙂 or not", *argv, "--threads", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and want in out, out
    if "--patch" in argv:  # the table's columns too
        assert "6 '🙂→�'" in out.splitlines()[2]
