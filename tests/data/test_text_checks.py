"""Text checks beside the vocabulary (geomlab.data.vocab.check_text, unknown_tokens): what the app and the CLI
say about a text before tracing it."""

from __future__ import annotations

import pytest

from geomlab.data import DataError
from hypothesis import given, strategies as st

from geomlab.data.vocab import Vocab, check_text, readable, unknown_note, unknown_tokens


def test_character_texts():
    v = Vocab.from_text("abc ")
    assert check_text(v, "ab c", 10) == ["a", "b", " ", "c"]
    assert unknown_tokens(v, "abxyxz") == ["x", "y", "z"]  # allowed: they read as the unknown token
    # one sentence for the app and the command line, the first ten named and the rest counted
    assert unknown_note(["x"]) == "1 character not in this checkpoint's vocabulary ('x') read as the unknown token \ufffd"
    many = unknown_note([chr(ord("k") + i) for i in range(12)], unk="<unk>")
    assert many.startswith("12 characters not in this checkpoint's vocabulary ('k', 'l',")
    assert "'t', … (2 more)) read as the unknown token <unk>" in many
    with pytest.raises(DataError, match="empty"):
        check_text(v, "", 10)
    with pytest.raises(DataError, match="only spaces and line breaks"):
        check_text(v, "  \n", 10)
    with pytest.raises(DataError, match="11 characters; the limit is 10"):
        check_text(v, "a" * 11, 10)


def test_a_token_is_named_so_that_it_shows():
    assert readable("ab") == "'ab'" and readable(" ") == "' '"
    # a character outside ASCII carries its code point: Greek Alpha looks exactly like Latin A
    assert readable("é") == "'é' (U+00E9)" and readable("\u0391") == "'\u0391' (U+0391)"
    assert readable("\u03b1\u03b1b") == "'\u03b1\u03b1b' (U+03B1)"
    assert readable("\u0301") == "U+0301"  # a combining accent would sit on the quote mark
    assert readable("e\u0301") == "U+0065 U+0301" and readable("\u200b") == "U+200B" and readable("\n") == "U+000A"


@given(st.text(min_size=1, max_size=4))
def test_a_named_token_never_starts_with_a_mark(token):
    import unicodedata

    out = readable(token)
    assert out and unicodedata.category(out[0])[0] not in "MCZ"
    assert all(unicodedata.category(c)[0] not in "MC" for c in out[1:-1]) or out.startswith("U+")


def test_symbol_texts_without_an_unknown_token():
    v = Vocab.from_symbols(["01", "10"])
    assert check_text(v, "01 10 01", 100) == ["01", "10", "01"]
    with pytest.raises(DataError, match="Unknown symbols for this checkpoint: '22'"):
        check_text(v, "01 22", 100)


def test_the_unknown_symbols_error_names_tokens_as_the_charts_do():
    """The vocabulary it reads is listed with the charts' names (a space as ␣, a newline as ↵: a gap or a
    line break does not show in one line); with an unknown token, how to type it."""
    from geomlab.data.vocab import unknown_symbols_error

    msg = str(unknown_symbols_error(Vocab.from_text("\n ab"), ["\u03a9"]))
    assert msg == ("Unknown symbols for this checkpoint: '\u03a9' (U+03A9). It reads characters from: \u21b5 \u2423 a b "
                   "\ufffd (or type \ufffd, the unknown token it reads for any other)"), msg
    assert str(unknown_symbols_error(Vocab.from_symbols(["01", "10"]), ["22"])).endswith("from: 01 10")


def test_a_text_that_repeats_itself_is_named():
    """A pasted paragraph copied many times: its validation split is in its training split, and the note says
    so; a text that does not repeat (seeded random words) gets no note."""
    import random

    from geomlab.data.corpora import corpus_from_text, repeat_note, repeated_share

    para = "It is the east, and Juliet is the sun. Arise, fair sun, and kill the envious moon.\n"
    copied = corpus_from_text(para * 40)
    assert repeated_share(copied) == 1.0
    assert repeat_note(copied).startswith("100% of the validation text's 32-character stretches also occur")
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(2000)]
    fresh = corpus_from_text(" ".join(words))
    assert repeated_share(fresh) == 0.0 and repeat_note(fresh) == ""
    half = corpus_from_text(" ".join(words[:1800]) + " " + " ".join(words[1700:1800]) * 3)
    assert 0.0 < repeated_share(half) <= 1.0
