"""Next-token predictions at one position of a trace, and the default token cursor (token-level
inspection).

A language model's output at position ``t`` (``Trace.logits[t]``) is its distribution over the token at
``t + 1`` given the tokens ``0..t``: :func:`top_k` reads the ``k`` most likely tokens from it and the
surprisal ``-log2 p`` of the token that actually follows. :func:`default_cursor` chooses the position a page
opens on when no one has chosen one. No Streamlit, no model run: both read the stored logits only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Prediction:
    """The model's prediction after one position.

    Attributes:
        cursor: the position ``t`` whose output is read (it predicts the token at ``t + 1``).
        ids: ``[k]`` token ids, most likely first.
        tokens: ``[k]`` their printable strings (whitespace made visible, ``"#id"`` without a vocabulary).
        probs: ``[k]`` their probabilities (softmax of ``logits[t]``), descending; sum ``<= 1``.
        next_id: id of the token actually at ``t + 1``, or None at the last position.
        next_token: its printable string, or None.
        next_prob: its probability, or None.
        next_bits: its surprisal ``-log2 p`` in bits, or None (``inf`` when ``p`` underflows to 0).
        next_rank: its rank among all tokens (1 = the model's top choice), or None.
        entropy_bits: entropy of the whole distribution in bits (how unsure the model is).
    """

    cursor: int
    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    probs: tuple[float, ...]
    next_id: int | None
    next_token: str | None
    next_prob: float | None
    next_bits: float | None
    next_rank: int | None
    entropy_bits: float


def _token_string(vocab: Any, i: int) -> str:
    from geomlab.trace import visible

    tokens = getattr(vocab, "tokens", None) if vocab is not None else None
    if tokens is None and isinstance(vocab, Sequence) and not isinstance(vocab, str):
        tokens = vocab
    if tokens is not None and 0 <= i < len(tokens):
        return visible(str(tokens[i])) or f"#{i}"
    return f"#{i}"


def log_probs_at(tr: Any, position: int) -> np.ndarray:
    """``[vocab]`` float64 log-softmax (nats) of ``tr.logits[position]``; non-finite logits count as
    ``-inf`` (probability 0). Raises ``ValueError`` for a position outside the text or a row with no finite
    logit."""
    n = int(tr.n_positions)
    if isinstance(position, bool) or not isinstance(position, (int, np.integer)) or not 0 <= int(position) < n:
        raise ValueError(f"position {position!r} out of range: the text has {n} tokens")
    z = np.asarray(tr.logits[int(position)], dtype=np.float64)
    z = np.where(np.isfinite(z), z, -np.inf)
    if not np.isfinite(z).any():
        raise ValueError(f"the model's output at position {position} is not finite")
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def top_k(tr: Any, cursor: int, k: int = 5, vocab: Any = None) -> Prediction:
    """The ``k`` most likely next tokens after position ``cursor`` and the surprisal of the real next token.

    Args:
        tr: a trace (``logits`` ``[position, vocab]``, ``tokens`` ``[position]``); ``logits[t]`` predicts
            token ``t + 1``.
        cursor: the position ``t`` in ``0..n_positions-1``.
        k: how many tokens (clipped to the vocabulary size); at least 1.
        vocab: a ``geomlab.data.vocab.Vocab`` (or a list of token strings) to name the ids; None gives
            ``"#id"``.

    Returns:
        a :class:`Prediction` (probabilities, not log-probabilities; surprisal in bits). Ties keep the
        lower id first.

    Raises ``ValueError`` for a cursor outside the text, ``k < 1``, or a non-finite output row.
    Source: softmax next-token prediction; surprisal ``-log2 p`` (Shannon information content).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    lp = log_probs_at(tr, cursor)
    t = int(cursor)
    p = np.exp(lp)
    k = min(int(k), p.size)
    order = np.argsort(-p, kind="stable")[:k]
    nz = p > 0
    entropy = float(-(p[nz] * lp[nz]).sum() / LN2)
    next_id = next_tok = next_p = next_bits = rank = None
    if t + 1 < int(tr.n_positions):
        next_id = int(tr.tokens[t + 1])
        if 0 <= next_id < p.size:
            next_tok = _token_string(vocab, next_id)
            next_p = float(p[next_id])
            next_bits = float(-lp[next_id] / LN2)
            rank = int((p > p[next_id]).sum()) + 1
        else:
            next_id = None
    return Prediction(cursor=t, ids=tuple(int(i) for i in order),
                      tokens=tuple(_token_string(vocab, int(i)) for i in order),
                      probs=tuple(float(p[i]) for i in order), next_id=next_id, next_token=next_tok,
                      next_prob=next_p, next_bits=next_bits, next_rank=rank, entropy_bits=entropy)


def next_token_bits(tr: Any) -> np.ndarray:
    """``[position]`` surprisal in bits of the token after each position (``-log2 p(tokens[t+1] |
    tokens[..t])``, read from ``logits[t]``); NaN at the last position and where the output is not finite.
    Cost ``O(position x vocab)``."""
    n = int(tr.n_positions)
    out = np.full(n, np.nan)
    if n < 2:
        return out
    z = np.asarray(tr.logits[: n - 1], dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = z.max(axis=-1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=-1))
        nxt = np.asarray(tr.tokens[1:], dtype=np.int64)
        ok = (nxt >= 0) & (nxt < z.shape[-1])
        picked = np.where(ok, z[np.arange(n - 1), np.clip(nxt, 0, z.shape[-1] - 1)], np.nan)
        bits = (lse - picked) / LN2
    out[: n - 1] = np.where(np.isfinite(bits), bits, np.nan)
    return out


def default_cursor(tr: Any) -> int:
    """The position a page opens on when no cursor was chosen (a fresh visit, a link without ``pos``).

    Rule (design choice): among the positions of the second half of the text (``n // 2`` to
    ``n - 2``), the one whose *next* token surprised the model most (largest ``-log2 p`` read from
    ``logits[t]``, the first on a tie): the top-k predictions there show what the model expected instead,
    and the cursor has half the text behind it to attend to. Where no surprisal is finite, the middle
    position ``n // 2``. Texts of two tokens give 1; only a one-token text gives 0. Deterministic, cost
    ``O(position x vocab)`` (no model run). For models that are not language models (group word problems)
    the rule still gives a deterministic position in the second half.
    """
    n = int(tr.n_positions)
    if n <= 1:
        return 0
    lo, hi = max(1, n // 2), n - 2
    if hi < lo:
        return n - 1
    bits = next_token_bits(tr)[lo: hi + 1]
    if not np.isfinite(bits).any():
        return max(1, n // 2)
    return lo + int(np.nanargmax(bits))


__all__ = ["Prediction", "top_k", "log_probs_at", "next_token_bits", "default_cursor"]
