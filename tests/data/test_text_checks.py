"""Text checks beside the vocabulary (geomlab.data.vocab.check_text, unknown_tokens): what the app and the CLI
say about a text before tracing it."""

from __future__ import annotations

import pytest

from geomlab.data import DataError
from geomlab.data.vocab import Vocab, check_text, unknown_tokens


def test_character_texts():
    v = Vocab.from_text("abc ")
    assert check_text(v, "ab c", 10) == ["a", "b", " ", "c"]
    assert unknown_tokens(v, "abxyxz") == ["x", "y", "z"]  # allowed: they read as the unknown token
    with pytest.raises(DataError, match="empty"):
        check_text(v, "  \n", 10)
    with pytest.raises(DataError, match="11 characters; the limit is 10"):
        check_text(v, "a" * 11, 10)


def test_symbol_texts_without_an_unknown_token():
    v = Vocab.from_symbols(["01", "10"])
    assert check_text(v, "01 10 01", 100) == ["01", "10", "01"]
    with pytest.raises(DataError, match="Unknown symbols for this checkpoint: '22'"):
        check_text(v, "01 22", 100)
