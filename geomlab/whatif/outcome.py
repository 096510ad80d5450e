"""The result of one intervention: a text's logits before and after, where it was applied, and what it
changed; the measures the app and the notebooks read off it (KL divergence, change in surprisal)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

LN2 = float(np.log(2.0))


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """``log p`` over the last axis in nats, computed in float64 (stable: the maximum is subtracted)."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@dataclass
class Outcome:
    """One text run twice, without and with an intervention (design choice).

    ``tokens``: ``(T,)`` token ids; ``before``, ``after``: ``(T, V)`` logits (float32) of the plain and the
    intervened run; ``position``: where the intervention was applied (None: everywhere, e.g. a head
    ablated on every position); ``what``: the intervention in words; ``geometry``: the values it changed,
    by name, e.g. ``{"state_before": (n, n), "state_after": (n, n)}`` (float or complex arrays)."""

    tokens: np.ndarray
    before: np.ndarray
    after: np.ndarray
    position: int | None
    what: str
    geometry: dict[str, np.ndarray] = field(default_factory=dict)

    def kl_bits(self) -> np.ndarray:
        """``(T,)`` KL(p_before || p_after) of the next-token distribution at each position, in bits (0 where
        nothing changed; positions before the intervention are 0 for a causal model)."""
        lp, lq = log_softmax(self.before), log_softmax(self.after)
        return (np.exp(lp) * (lp - lq)).sum(axis=-1) / LN2

    def surprisal_change_bits(self) -> np.ndarray:
        """``(T - 1,)`` change in surprisal, in bits, of the token that really follows each position
        (``after - before``: positive, the model found the real text harder after the intervention)."""
        nxt = np.asarray(self.tokens[1:], dtype=np.int64)
        rows = np.arange(len(nxt))
        lp, lq = log_softmax(self.before[:-1]), log_softmax(self.after[:-1])
        return (lp[rows, nxt] - lq[rows, nxt]) / LN2

    def top_k(self, position: int, k: int = 5) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """The ``k`` most likely next tokens at ``position`` before and after: ``[(id, probability)]`` each.
        Raises ``IndexError`` for a position outside ``0..T-1``."""
        if not 0 <= position < len(self.before):
            raise IndexError(f"position {position} outside 0..{len(self.before) - 1}")
        out = []
        for logits in (self.before[position], self.after[position]):
            p = np.exp(log_softmax(logits))
            ids = np.argsort(-p, kind="stable")[:k]
            out.append([(int(i), float(p[i])) for i in ids])
        return out[0], out[1]
