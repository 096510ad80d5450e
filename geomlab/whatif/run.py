"""Batched runs of texts or tokens, as a TransformerLens user expects them: ``encode_batch`` (texts to one
right-padded token tensor), ``run_with_cache`` and ``run_with_hooks`` taking a text, a list of texts or tokens.

Thin layers over :func:`geomlab.models.hooks.run_with_cache` / :func:`~geomlab.models.hooks.run_with_hooks`
(which take tokens). Every geomlab model is causal, so position ``t`` of a padded text computes what the
unpadded text computes up to its length: the padding only adds positions after it
(tests/whatif/test_run.py checks it for every kind, every cached value included).
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence, Union

import torch

from geomlab.data import DataError
from geomlab.data.vocab import normalize_text, unknown_note, unknown_symbols_error, unknown_tokens
from geomlab.models import hooks as _hooks

__all__ = ["PAD_ID", "UNKNOWN", "encode_batch", "run_with_cache", "run_with_hooks", "as_tokens"]

#: The id that right-pads a batch: 0, a valid id in every vocabulary (read past a text's length, it never
#: changes that text's positions, the models being causal).
PAD_ID = 0

TextsOrTokens = Union[str, Sequence[str], torch.Tensor]


#: What :func:`encode_batch` does with tokens the vocabulary lacks (its ``unknown=``).
UNKNOWN = ("warn", "ignore", "error")


def encode_batch(vocab, texts: Sequence[str], *, unknown: str = "warn") -> tuple[torch.Tensor, torch.Tensor]:
    """Encode ``texts`` with ``vocab`` into one right-padded batch.

    Each text is normalised as every text entering geomlab is (:func:`geomlab.data.vocab.normalize_text`) and
    encoded with ``vocab.encode``; shorter texts are padded on the right with :data:`PAD_ID` (0).

    Tokens the vocabulary lacks (for a character vocabulary, characters not in its training text) read as its
    unknown token, as the app and the command line read them (``vocab.encode``), and ``unknown`` says what
    else happens:

    * ``"warn"`` (default): one ``UserWarning`` per such text, ``text 1: 2 characters not in this
      checkpoint's vocabulary ('é', '🙂') read as the unknown token �`` (the app's sentence,
      :func:`geomlab.data.vocab.unknown_note`), so a batch never stops on one odd character and the reader
      still learns that the model saw something else than was typed;
    * ``"ignore"``: no warning;
    * ``"error"``: refuse the batch (``DataError`` naming the tokens), for a run that must read every text
      exactly as typed.

    A vocabulary without an unknown token (a word problem's symbols) refuses them whatever ``unknown`` says:
    there is nothing to read them as. Design choice.

    Returns:
        ``tokens`` ``(B, T_max)`` long and ``lengths`` ``(B,)`` long (each text's number of tokens).

    Raises:
        ValueError (:class:`geomlab.data.DataError`): an empty list, a text that is not a string, a text
        with no tokens, tokens the vocabulary lacks (see above), or ``unknown`` not one of :data:`UNKNOWN`.
    """
    if unknown not in UNKNOWN:
        raise DataError(f"unknown= must be one of {', '.join(map(repr, UNKNOWN))}, got {unknown!r}")
    if isinstance(texts, str):
        raise DataError("encode_batch takes a list of texts; wrap a single text in a list")
    texts = list(texts)
    if not texts:
        raise DataError("encode_batch needs at least one text, got an empty list")
    rows = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise DataError(f"text {i} must be a string, got {type(text).__name__}")
        text = normalize_text(text)
        bad = unknown_tokens(vocab, text)
        if bad and (unknown == "error" or vocab.unk is None):
            raise unknown_symbols_error(vocab, bad)
        if bad and unknown == "warn":
            warnings.warn(f"text {i}: {unknown_note(bad, vocab.unk)}", UserWarning, stacklevel=2)
        ids = torch.as_tensor(vocab.encode(text), dtype=torch.long).reshape(-1)
        if not ids.numel():
            raise DataError(f"text {i} has no tokens for this vocabulary")
        rows.append(ids)
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    tokens = torch.full((len(rows), int(lengths.max())), PAD_ID, dtype=torch.long)
    for b, r in enumerate(rows):
        tokens[b, : len(r)] = r
    return tokens, lengths


def as_tokens(texts_or_tokens: TextsOrTokens, vocab=None) -> torch.Tensor:
    """A text, a list of texts or token ids as a ``(B, T)`` long tensor (a ``(T,)`` tensor gets ``B = 1``;
    texts go through :func:`encode_batch` with its default, ``unknown="warn"``). Raises ``ValueError`` for texts without ``vocab``, a tensor that
    is not 1-D or 2-D integer, or what :func:`encode_batch` refuses."""
    x = texts_or_tokens
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point or x.is_complex() or x.dtype == torch.bool or x.dim() not in (1, 2):
            raise ValueError(f"tokens must be a (B, T) or (T,) integer tensor, got {x.dtype} {tuple(x.shape)}")
        return (x[None] if x.dim() == 1 else x).long()
    if vocab is None:
        raise ValueError("texts need a vocabulary: pass vocab= (e.g. the checkpoint's vocab)")
    return encode_batch(vocab, [x] if isinstance(x, str) else list(x))[0]


def run_with_cache(model, texts_or_tokens: TextsOrTokens, names: _hooks.Names = None,
                   vocab=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``(logits, cache)`` of ``model`` on a text, a list of texts (right-padded, :func:`encode_batch`) or
    tokens ``(B, T)`` / ``(T,)``: :func:`geomlab.models.hooks.run_with_cache` with the input encoded.

    ``logits`` ``(B, T, V)``; ``cache[name]`` the value each selected hook point saw, batch on axis 0
    (per-step points: steps on axis 1). A padded text's values at its own positions equal those of its
    unpadded run (causal models). ``names``: ``None`` (all), a list or a predicate. Runs in the model's
    current mode, with autograd as the caller has it. Raises ``ValueError`` as :func:`as_tokens` and for an
    unknown hook point name. Design choice (after TransformerLens's ``run_with_cache``).
    """
    return _hooks.run_with_cache(model, _on_device(model, as_tokens(texts_or_tokens, vocab)), names)


def run_with_hooks(model, texts_or_tokens: TextsOrTokens, hooks: Iterable[tuple[str, Any]],
                   vocab=None) -> torch.Tensor:
    """Logits ``(B, T, V)`` of ``model`` on a text, a list of texts or tokens with ``fn(value, hook)`` run at
    each named hook point (a returned tensor replaces the value and the forward pass carries on from it):
    :func:`geomlab.models.hooks.run_with_hooks` with the input encoded. Raises ``ValueError`` as
    :func:`as_tokens`, for an unknown name or a replacement at a read-only point. Design choice."""
    return _hooks.run_with_hooks(model, _on_device(model, as_tokens(texts_or_tokens, vocab)), hooks)


def _on_device(model, tokens: torch.Tensor) -> torch.Tensor:
    """``tokens`` on the device of the model's first parameter (unchanged for a model without any)."""
    p = next(iter(model.parameters()), None)
    return tokens if p is None else tokens.to(p.device)
