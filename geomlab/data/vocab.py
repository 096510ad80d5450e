"""Token vocabularies: characters (the default), whitespace words, or named symbols.

A :class:`Vocab` maps tokens (strings) to integer ids ``0 .. size - 1``. It is built from the *training*
split only and saved inside every checkpoint (:meth:`Vocab.to_json`). Characters that are not in the
vocabulary map to one explicit unknown token (:attr:`Vocab.unk`), never to a crash or a silent drop.

Design choices (documented in ``docs/pipeline.md``):

* character vocabularies list the training characters in sorted (code point) order, then the unknown token
  ``"\\ufffd"`` (U+FFFD REPLACEMENT CHARACTER) as the **last** id, so e.g. Tiny Shakespeare has 65
  characters + 1 unknown = 66 ids. If the training text itself contains U+FFFD it is simply that id.
* word vocabularies (``level="word"``, PTB / WikiText word level) split each line on whitespace and end
  it with ``"<eos>"``; the unknown token is ``"<unk>"`` (which those corpora already use).
* symbol vocabularies (``level="symbol"``, the synthetic tasks) name each id explicitly and may have no
  unknown token; encoding an unknown symbol then raises :class:`geomlab.data.DataError`.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from geomlab.data.errors import DataError

CHAR_UNK = "\ufffd"
WORD_UNK = "<unk>"
EOS = "<eos>"
LEVELS = ("char", "word", "symbol")


BOM = "\ufeff"


def normalize_text(text: str) -> str:
    """The one normalisation every text gets where it enters geomlab (design choice).

    Drops a leading UTF-8 byte-order mark (U+FEFF, which Windows editors put at the start of a file and
    which would otherwise become a vocabulary character) and turns every ``"\\r\\n"`` and lone ``"\\r"``
    into ``"\\n"`` (Python's universal newlines), so one file gives one vocabulary whether it arrives as a
    command-line file, a registered corpus, an upload or a pasted text. Nothing else changes (a U+FEFF
    inside the text is a zero-width no-break space and is kept). Idempotent; ``str`` in, ``str`` out.
    Raises :class:`DataError` for a non-string.
    """
    if not isinstance(text, str):
        raise DataError(f"text must be a string, got {type(text).__name__}")
    if text.startswith(BOM):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def decode_text(data: bytes, source: str = "the text") -> str:
    """UTF-8 bytes (a file, an upload) -> normalised text (:func:`normalize_text`).

    Raises :class:`DataError` naming ``source`` and the byte offset when ``data`` is not UTF-8.
    """
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{source} is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return normalize_text(text)


def vocab_mismatch(expected: "Vocab", got: "Vocab") -> str:
    """``""`` when the vocabularies are equal, else one readable line saying how ``got`` (e.g. the data's)
    differs from ``expected`` (e.g. a checkpoint's): the level, the tokens only one of them has (first few,
    with counts), or the order of the ids."""
    if expected == got:
        return ""
    if expected.level != got.level:
        return f"a {got.level}-level vocabulary instead of {expected.level}-level"
    new = [t for t in got.tokens if t not in expected]
    gone = [t for t in expected.tokens if t not in got]

    def show(toks: list[str]) -> str:
        return ", ".join(repr(t) for t in toks[:8]) + (f" (+{len(toks) - 8} more)" if len(toks) > 8 else "")

    parts = []
    if new:
        parts.append(f"{len(new)} token(s) the checkpoint does not know: {show(new)}")
    if gone:
        parts.append(f"{len(gone)} token(s) of the checkpoint missing from the data: {show(gone)}")
    if not parts:
        parts.append("the same tokens in another id order" if expected.unk == got.unk
                     else f"another unknown token ({got.unk!r} instead of {expected.unk!r})")
    return "; ".join(parts)


def tokenize(text: str, level: str) -> list[str]:
    """Split ``text`` into tokens: characters (``"char"``) or whitespace words with ``"<eos>"`` after each
    line (``"word"``, the PTB/WikiText convention; empty lines still give one ``"<eos>"``).

    ``"symbol"`` texts are whitespace-separated symbol names (no ``<eos>``). Raises :class:`DataError` for
    an unknown level.
    """
    if level == "char":
        return list(text)
    if level == "word":
        out: list[str] = []
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]  # a final newline ends the last line; it does not start a new one
        for line in lines:
            out.extend(line.split())
            out.append(EOS)
        return out
    if level == "symbol":
        return text.split()
    raise DataError(f"unknown vocabulary level {level!r}; use one of {LEVELS}")



def checked_ids(ids: Iterable[int] | torch.Tensor, n: int) -> list[int]:
    """``ids`` (any iterable of ints, or a tensor of any shape, flattened) as a list of ints, each in
    ``0..n-1``. Raises :class:`DataError` naming the first id out of range for a vocabulary of ``n``."""
    if isinstance(ids, torch.Tensor):
        ids = ids.reshape(-1).tolist()
    out = [int(i) for i in ids]
    bad = next((i for i in out if not 0 <= i < n), None)
    if bad is not None:
        raise DataError(f"token id {bad} out of range for a vocabulary of {n}")
    return out

class Vocab:
    """A token <-> id map with an explicit unknown token.

    Args:
        tokens: the token strings, id ``i`` is ``tokens[i]``; must be unique.
        unk: the unknown token (must be in ``tokens``) or ``None`` for a closed symbol set.
        level: ``"char"``, ``"word"`` or ``"symbol"`` (how text is split and joined).

    Raises :class:`geomlab.data.DataError` (a ``ValueError``) for duplicate tokens, an empty list, an unk
    that is not a token, or an unknown level. Source: design choice.
    """

    def __init__(self, tokens: Sequence[str], unk: str | None = CHAR_UNK, level: str = "char"):
        tokens = [str(t) for t in tokens]
        if not tokens:
            raise DataError("a vocabulary needs at least one token")
        if len(set(tokens)) != len(tokens):
            dup = sorted({t for t in tokens if tokens.count(t) > 1})
            raise DataError(f"duplicate tokens in vocabulary: {dup[:10]!r}")
        if level not in LEVELS:
            raise DataError(f"unknown vocabulary level {level!r}; use one of {LEVELS}")
        if level == "char" and any(len(t) != 1 for t in tokens):
            bad = [t for t in tokens if len(t) != 1][:5]
            raise DataError(f"a character vocabulary holds single characters, got {bad!r}")
        if unk is not None and unk not in tokens:
            raise DataError(f"unknown token {unk!r} is not in the vocabulary")
        self.tokens: list[str] = tokens
        self.unk: str | None = unk
        self.level: str = level
        self._index = {t: i for i, t in enumerate(tokens)}
        self._char_table: np.ndarray | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_text(cls, text: str, level: str = "char") -> "Vocab":
        """Vocabulary of the tokens of ``text`` (sorted) plus the level's unknown token as the last id.

        Raises :class:`DataError` for empty text.
        """
        if not text:
            raise DataError("cannot build a vocabulary from empty text")
        toks = tokenize(text, level)
        if level == "symbol":
            return cls(sorted(set(toks)), unk=None, level="symbol")
        unk = CHAR_UNK if level == "char" else WORD_UNK
        uniq = sorted(set(toks) - {unk})
        return cls(uniq + [unk], unk=unk, level=level)

    @classmethod
    def from_symbols(cls, names: Iterable[str]) -> "Vocab":
        """A closed symbol vocabulary (no unknown token), e.g. the elements of a group in a fixed order."""
        return cls(list(names), unk=None, level="symbol")

    # ------------------------------------------------------------------ mapping
    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def size(self) -> int:
        """Number of ids (including the unknown token)."""
        return len(self.tokens)

    @property
    def unk_id(self) -> int | None:
        """Id of the unknown token, or ``None`` if there is none."""
        return None if self.unk is None else self._index[self.unk]

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Vocab) and self.tokens == other.tokens and self.unk == other.unk
                and self.level == other.level)

    def __repr__(self) -> str:
        return f"Vocab(level={self.level!r}, size={self.size}, unk={self.unk!r})"

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of a token sequence; unknown tokens map to :attr:`unk_id`.

        Raises :class:`DataError` naming the token if it is unknown and there is no unknown token.
        """
        index, unk_id = self._index, self.unk_id
        if unk_id is None:
            tokens = list(tokens)
            bad = [t for t in tokens if t not in index]
            if bad:
                raise unknown_symbols_error(self, bad)
            return [index[t] for t in tokens]
        return [index.get(t, unk_id) for t in tokens]

    def split(self, text: str) -> list[str]:
        """``text`` as this vocabulary's tokens (:func:`tokenize` at its level; a tokenizer's own split for
        :class:`ByteVocab` and :class:`TokenizerVocab`)."""
        return tokenize(text, self.level)

    def encode(self, text: str) -> torch.Tensor:
        """``text`` -> ``LongTensor`` of shape ``(N,)`` (N tokens at this vocabulary's level).

        Unknown characters/words become :attr:`unk_id` (one id each, nothing dropped).
        """
        if self.level == "char":
            return self._encode_chars(text)
        return torch.tensor(self.ids(tokenize(text, self.level)), dtype=torch.long)

    def _encode_chars(self, text: str) -> torch.Tensor:
        """Vectorised character encoding: code points -> ids through a dense lookup table."""
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        if codes.size == 0:
            return torch.zeros(0, dtype=torch.long)
        need = max(int(codes.max()), max(ord(t) for t in self.tokens)) + 1
        if self._char_table is None or self._char_table.size < need:
            table = np.full(need, -1, dtype=np.int64)
            for i, t in enumerate(self.tokens):
                table[ord(t)] = i
            self._char_table = table
        ids = self._char_table[codes]
        missing = ids < 0
        if missing.any():
            ids = ids.copy()
            if self.unk_id is None:
                raise unknown_symbols_error(self, [chr(int(c)) for c in np.unique(codes[missing])])
            ids[missing] = self.unk_id
        return torch.from_numpy(ids)

    def count_unknown(self, text: str) -> int:
        """How many tokens of ``text`` are not in the vocabulary (they encode to the unknown id)."""
        if self.level == "char":
            return sum(1 for ch in set(text) if ch not in self._index for _ in range(text.count(ch)))
        return sum(1 for t in tokenize(text, self.level) if t not in self._index)

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Ids -> text. Characters are concatenated; words are joined by spaces with ``<eos>`` written as a
        newline; symbols are joined by spaces. Raises :class:`DataError` for an id out of range."""
        toks = [self.tokens[i] for i in checked_ids(ids, len(self.tokens))]
        if self.level == "char":
            return "".join(toks)
        if self.level == "word":
            out, line = [], []
            for t in toks:
                if t == EOS:
                    out.append(" ".join(line) + "\n")
                    line = []
                else:
                    line.append(t)
            if line:
                out.append(" ".join(line))
            return "".join(out)
        return " ".join(toks)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``level``, ``tokens``, ``unk``) that :meth:`from_json` reads back."""
        return {"level": self.level, "tokens": list(self.tokens), "unk": self.unk}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Vocab":
        """Inverse of :meth:`to_json`. Raises :class:`DataError` for a malformed dict."""
        if isinstance(data, dict) and data.get("level") == ByteVocab.LEVEL:
            return ByteVocab(int(data.get("size") or 256))
        if isinstance(data, dict) and data.get("level") == TokenizerVocab.LEVEL:
            return TokenizerVocab.from_json(data)
        if not isinstance(data, dict) or "tokens" not in data:
            raise DataError("vocabulary JSON must be an object with 'tokens'")
        tokens = data["tokens"]
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise DataError("vocabulary 'tokens' must be a list of strings")
        return cls(tokens, unk=data.get("unk"), level=data.get("level", "char"))


# ---------------------------------------------------------------- text checks (the app and the CLI)
_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def from_visible(text: str, vocab=None) -> str:
    """``text`` with the symbols :func:`visible` shows whitespace as (``␣``, ``↵``, ``⇥``, ``␍``) turned back
    into the whitespace, so a token can be typed as the app shows it; a symbol ``vocab`` reads as itself is
    kept. Design choice."""
    back = {v: k for k, v in _VISIBLE.items() if vocab is None or v not in vocab}
    return "".join(back.get(c, c) for c in text)


def visible(ch: str) -> str:
    """A printable version of one token string for hover text and tick labels (whitespace made visible; other
    unprintable characters as Python writes them: ``\\x7f``, ``\\u200b``, ``\\U000e0001``; a token that
    starts with a combining mark on the dotted circle ``◌``, the usual way to show one alone: quoted, it would
    sit on the quote mark)."""
    out = "".join(_VISIBLE.get(c, c if c.isprintable() else repr(c)[1:-1]) for c in ch)
    return "\u25cc" + out if out and unicodedata.category(out[0]).startswith("M") else out


def check_text(vocab: Vocab, text: str, max_chars: int) -> list[str]:
    """Validate ``text`` for ``vocab`` before tracing it; returns its tokens (``tokenize(text, vocab.level)``).

    Raises :class:`geomlab.data.DataError` (a ``ValueError``) with a readable one-line message for an empty
    text, a text over ``max_chars`` characters, a text with no tokens and, for vocabularies without an
    unknown token (symbol tasks), symbols the vocabulary does not have. Unknown characters of a vocabulary
    with an unknown token are allowed (they read as that token); :func:`unknown_tokens` lists them."""
    if not text:
        raise DataError("The text is empty: type or paste some text to trace.")
    if not text.strip():
        raise DataError("The text holds only spaces and line breaks: type or paste some text to trace.")
    if len(text) > max_chars:
        raise DataError(f"The text has {len(text):,} characters; the limit is {max_chars:,}. Shorten it.")
    toks = vocab.split(text)
    if not toks:
        raise DataError("The text has no tokens for this checkpoint.")
    if vocab.unk is None:
        bad = [t for t in toks if t not in vocab]
        if bad:
            raise unknown_symbols_error(vocab, bad)
    return toks


def unknown_symbols_error(vocab: Vocab, bad: Iterable[str]) -> DataError:
    """The one message for tokens a vocabulary lacks where they cannot stand (a word problem's symbols, a
    patching stand-in): the first 8 distinct ones (sorted, named by :func:`readable`), the first 12 it reads
    (named by :func:`visible`: ``␣`` a space, ``↵`` a newline) and, for a vocabulary with an
    unknown token, how to type that token. Design choice."""
    shown = ", ".join(readable(b) for b in sorted(set(bad))[:8])
    ok = " ".join(visible(t) for t in vocab.tokens[:12]) + (" …" if len(vocab.tokens) > 12 else "")
    how = {"symbol": "space-separated symbols", "char": "characters", "word": "words"}.get(vocab.level, "tokens")
    unk = f" (or type {visible(vocab.unk)}, the unknown token it reads for any other)" if vocab.unk else ""
    return DataError(f"Unknown symbols for this checkpoint: {shown}. It reads {how} from: {ok}{unk}")


def unknown_tokens(vocab: Vocab, text: str) -> list[str]:
    """Distinct tokens of ``text`` that ``vocab`` does not have, in order of first appearance (they read
    as the unknown token)."""
    seen: list[str] = []
    for t in vocab.split(text):
        if t not in vocab and t not in seen:
            seen.append(t)
    return seen


def unknown_note(unknown: Sequence[str], unk: str = CHAR_UNK, limit: int = 10, fate: str = "read as") -> str:
    """The one sentence the app and the command line (trace, whatif, sample, eval) show for a text with tokens
    outside the vocabulary: ``2 characters not in this checkpoint's vocabulary ('🙂' (U+1F642), '✓'
    (U+2713)) read as the unknown token �`` (the first ``limit`` named by :func:`readable`, the rest counted).
    ``unknown``: :func:`unknown_tokens`' list; ``unk``: the vocabulary's unknown token; ``fate``: what
    becomes of them (eval's ``"scored as"``). Design choice."""
    n = len(unknown)
    shown = ", ".join(readable(u) for u in unknown[:limit]) + (f", … ({n - limit} more)" if n > limit else "")
    return (f"{n} character{'s' if n != 1 else ''} not in this checkpoint's vocabulary ({shown}) {fate} the "
            f"unknown token {unk}")


def readable(token: str) -> str:
    """``token`` quoted for a message, with the code points of its characters outside ASCII (``'é'
    (U+00E9)``: Greek ``'Α' (U+0391)`` looks exactly like Latin ``'A'``), or, when it holds a character that
    does not show on its own (a combining mark, a control or format character, a separator other than the
    space), its code points alone (``U+0301``, ``U+200B U+0061``): quoted, a combining accent would sit on
    the quote mark. Design choice."""
    import unicodedata

    if any(unicodedata.category(c)[0] in "MC" or (unicodedata.category(c)[0] == "Z" and c != " ") for c in token):
        return " ".join(f"U+{ord(c):04X}" for c in token)
    points = " ".join(f"U+{ord(c):04X}" for c in dict.fromkeys(token) if ord(c) > 127)
    return f"{token!r} ({points})" if points else repr(token)


# ---------------------------------------------------------------- a standard model's tokens
class ByteVocab(Vocab):
    """UTF-8 bytes as tokens: id ``b`` is byte ``b`` (labelled by the Latin-1 character ``chr(b)``), for a
    checkpoint that comes without a tokenizer (design choice). ``size`` >= 256 (the model's vocabulary; ids
    from 256 on are labelled ``<id N>`` and never produced by :meth:`encode`). ``DataError`` for a smaller
    size."""

    LEVEL = "byte"

    def __init__(self, size: int = 256):
        if size < 256:
            raise DataError(f"a byte vocabulary needs at least 256 token ids, the model has {size}")
        super().__init__([chr(b) for b in range(256)] + [f"<id {i}>" for i in range(256, size)], unk=None,
                         level="symbol")
        self.level = self.LEVEL

    def split(self, text: str) -> list[str]:
        return list(text.encode("utf-8", "surrogatepass").decode("latin-1"))

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor(list(text.encode("utf-8", "surrogatepass")), dtype=torch.long)

    def count_unknown(self, text: str) -> int:
        return 0

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Ids -> text (UTF-8, an incomplete or invalid byte sequence shown as U+FFFD); ``DataError`` for an
        id out of range."""
        ids = checked_ids(ids, len(self.tokens))
        return b"".join(bytes([i]) if i < 256 else self.tokens[i].encode() for i in ids).decode("utf-8", "replace")

    def to_json(self) -> dict[str, Any]:
        return {"level": self.LEVEL, "size": len(self.tokens)}


@functools.lru_cache(maxsize=8)
def _tokenizer_vocab(text: str, size: int | None) -> "TokenizerVocab":
    from tokenizers import Tokenizer

    return TokenizerVocab(Tokenizer.from_str(text), size=size)


class TokenizerVocab(Vocab):
    """The tokens of a Hugging Face tokenizer (the ``tokenizers`` library's ``Tokenizer``, e.g. GPT-2's
    byte-level BPE): :meth:`encode` is the tokenizer's (no special tokens added), the labels are its token
    strings, :meth:`decode` its decoding. ``size``: the model's vocabulary (ids the tokenizer lacks are
    labelled ``<id N>``). Design choice: a standard model's own tokenizer, so its texts read as it was
    trained."""

    LEVEL = "subword"

    def __init__(self, tokenizer: Any, size: int | None = None):
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        n = max(int(size or 0), max(vocab.values(), default=-1) + 1)
        tokens = [f"<id {i}>" for i in range(n)]
        for tok, i in vocab.items():
            tokens[i] = tok
        super().__init__(tokens, unk=None, level="symbol")
        self.level = self.LEVEL
        self.tokenizer = tokenizer

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TokenizerVocab":
        """The vocabulary of :meth:`to_json`'s dict (the tokenizer's JSON under ``"tokenizer"``), shared by
        calls with the same JSON text (the app checks every text against it; GPT-2's tokenizer takes tens of
        milliseconds to parse); ``DataError`` when it is missing or not a tokenizer."""
        size = data.get("size")
        try:
            return _tokenizer_vocab(data["tokenizer"], int(size) if size is not None else None)
        except ImportError:
            raise DataError("this vocabulary needs the tokenizers library: pip install 'geomlab[hf]'") from None
        except Exception as exc:  # noqa: BLE001 - the library raises its own exception types
            raise DataError(f"bad tokenizer in the vocabulary: {str(exc)[:200]}") from None

    def split(self, text: str) -> list[str]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).tokens)

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor(self.tokenizer.encode(text, add_special_tokens=False).ids, dtype=torch.long)

    def count_unknown(self, text: str) -> int:
        return 0

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        """Ids -> text through the tokenizer's decoder; ``DataError`` for an id out of range."""
        ids = checked_ids(ids, len(self.tokens))
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.LEVEL, "size": len(self.tokens), "tokens": list(self.tokens), "unk": None,
                "tokenizer": self.tokenizer.to_str()}
