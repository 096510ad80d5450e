"""How What-if names the positions of a text: the token as typed, and where the model read it as the
vocabulary's unknown token, that token after an arrow (``é→�``), in the app's What-if panel and Patching
sweep and in ``geomlab whatif`` alike (:func:`position_labels`).

A vocabulary's own tokens (what a model can predict) are named by :func:`geomlab.trace.visible` alone: the
unknown token among the guesses is what the model predicted, ``�``.
"""

from __future__ import annotations

from typing import Any, Sequence

from geomlab.trace import visible

__all__ = ["READ_AS", "position_labels"]

READ_AS = "→"
"""Between a typed token and the unknown token the model read in its place (``é→�``)."""


def position_labels(vocab: Any, text: str, tokens: Sequence[int]) -> list[str]:
    """One label per position of ``text`` as ``vocab`` encoded it into ``tokens`` (ids, ``(T,)``): the
    token as typed (``vocab.split`` of the normalised text), whitespace made visible
    (:func:`geomlab.trace.visible`: ``␣``, ``↵``); where the id is the vocabulary's unknown token but the
    typed token is not that token, the typed token, :data:`READ_AS` and the unknown token (``é→�``,
    ``🙂→�``): what was typed and what the model read, both in view. When the split and the ids differ in
    length (a tokenizer that merges), each position is named by its id's token. Design choice: the typed
    character alone hides that the model saw something else; the unknown token alone hides which character
    it stood for, and two different characters would read alike."""
    from geomlab.data.vocab import normalize_text

    ids = [int(i) for i in tokens]
    names = list(getattr(vocab, "tokens", []))
    typed = list(vocab.split(normalize_text(text)))
    if len(typed) != len(ids):
        typed = [names[i] if 0 <= i < len(names) else f"#{i}" for i in ids]
    unk, unk_id = getattr(vocab, "unk", None), getattr(vocab, "unk_id", None)
    return [visible(t) + (f"{READ_AS}{visible(unk)}" if i == unk_id and unk is not None and t != unk else "")
            for t, i in zip(typed, ids)]
