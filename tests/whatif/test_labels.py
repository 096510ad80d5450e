"""What-if names a text's positions one way (geomlab.whatif.labels.position_labels): the token as typed,
whitespace made visible, and 'é→�' where the model read the unknown token; the app's panel and
`geomlab whatif` both use it."""

from __future__ import annotations

import pytest
import torch

from geomlab.commands.cli import main
from geomlab.data.vocab import Vocab
from geomlab.trace import encode_text
from geomlab.whatif.labels import position_labels

CHARS = Vocab.from_text("To be or not\n")  # the unknown token '�' is its last id


def test_a_position_the_model_read_as_unknown_shows_what_was_typed_and_what_it_read():
    text = "To 🙂é\n�"
    ids = encode_text(CHARS, text).reshape(-1)
    # a '�' typed is the vocabulary's own token: itself, unmarked
    assert position_labels(CHARS, text, ids) == ["T", "o", "␣", "🙂→�", "é→�", "↵", "�"]


def test_symbols_without_an_unknown_token_are_their_own_names():
    symbols = Vocab.from_symbols(["12340", "10234", "21034"])
    text = "12340 10234 21034"
    assert position_labels(symbols, text, symbols.encode(text)) == ["12340", "10234", "21034"]


@pytest.mark.parametrize("argv, want", [
    (["--pos", "6", "--size", "3"], "top 5 next token at position 6 ('🙂→�'), before and after:"),
    (["--pos", "6", "--patch", "e"], "'🙂→�' at position 6 replaced by 'e': "),
])
def test_geomlab_whatif_names_an_unknown_character_as_the_app_does(capsys, argv, want):
    torch.manual_seed(0)
    rc = main(["whatif", "bundled/cem-t2-tinyshakespeare", "--text", "To be 🙂 or not", *argv, "--threads", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and want in out, out
    if "--patch" in argv:  # the table's columns too
        assert "6 '🙂→�'" in out.splitlines()[2]
