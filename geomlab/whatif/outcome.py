"""The result of one intervention: a text's logits before and after, where it was applied, and what it
changed; the measures the app, ``geomlab whatif`` and the notebooks read off it (KL divergence, change in
surprisal of what the model is trained to predict, a one-line summary)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

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
    by name, e.g. ``{"state_before": (n, n), "state_after": (n, n)}`` (float or complex arrays);
    ``targets``: ``(T,)`` the id each position's output is scored on, or None for a language model (the
    next token); ``predicts``: what the outputs predict, in words (:meth:`scored_on` sets both)."""

    tokens: np.ndarray
    before: np.ndarray
    after: np.ndarray
    position: int | None
    what: str
    geometry: dict[str, np.ndarray] = field(default_factory=dict)
    targets: np.ndarray | None = None
    predicts: str = "next token"

    def scored_on(self, task: Any) -> "Outcome":
        """This outcome scored on what a model of ``task`` is trained to predict: for a group word problem
        (``task`` a checkpoint card's ``task`` entry, :func:`geomlab.trace.scoring.is_word_problem`) the
        running product ``g_0 ... g_t`` at each position ``t``; otherwise (a language model, ``task`` None)
        the next token, unchanged. Raises ``ValueError`` for an unknown group or ids outside it. Design
        choice (the scoring of :func:`geomlab.trace.scoring.score_predictions`)."""
        from geomlab.trace.scoring import is_word_problem

        if not is_word_problem(task):
            return self
        import torch

        from geomlab.data.word_problem import get_group

        group = get_group(str(task["group"]))
        targets = group.running_product(torch.as_tensor(self.tokens, dtype=torch.long)).numpy()
        return replace(self, targets=targets, predicts="running product")

    def kl_bits(self) -> np.ndarray:
        """``(T,)`` KL(p_before || p_after) of the next-token distribution at each position, in bits (0 where
        nothing changed; positions before the intervention are 0 for a causal model)."""
        lp, lq = log_softmax(self.before), log_softmax(self.after)
        return (np.exp(lp) * (lp - lq)).sum(axis=-1) / LN2

    def changes_nothing(self) -> bool:
        """Whether the intervention left every prediction as it was: KL 0 and no surprisal change at every
        position (an intervention at its neutral size, CEM's trained T)."""
        ds = np.nan_to_num(self.surprisal_change_bits())
        return not self.kl_bits().max(initial=0.0) > 0 and not np.abs(ds).max(initial=0.0) > 0

    def surprisal_change_bits(self) -> np.ndarray:
        """``(T,)`` change in surprisal, in bits, of what each position's output is scored on (``after -
        before``: positive, the model found the real text harder after the intervention): the token that
        really follows for a language model (the last position, followed by nothing, is NaN), the running
        product for a word problem (:meth:`scored_on`)."""
        lp, lq = log_softmax(self.before), log_softmax(self.after)
        T = len(lp)
        if self.targets is not None:
            rows, ids = np.arange(T), np.asarray(self.targets, dtype=np.int64)
        else:
            rows, ids = np.arange(T - 1), np.asarray(self.tokens[1:], dtype=np.int64)
        out = np.full(T, np.nan)
        out[rows] = (lp[rows, ids] - lq[rows, ids]) / LN2
        return out

    def summary(self, position: int) -> str:
        """One line in plain text: the intervention, the KL divergence at ``position`` and its largest, and the
        summed surprisal change of the real text from ``position`` on (over the whole text where the
        intervention acted everywhere), in bits. What the app's panel and ``geomlab whatif`` print. Raises
        ``IndexError`` for a position outside ``0..T-1``. Design choice."""
        if not 0 <= position < len(self.before):
            raise IndexError(f"position {position} outside 0..{len(self.before) - 1}")
        kl, ds = self.kl_bits(), self.surprisal_change_bits()
        if self.position is not None:
            where, total = "from the cursor on", np.nansum(ds[position:])
        else:
            where, total = "over the whole text", np.nansum(ds)
        real = "the real text's surprisal" if self.targets is None else "the surprisal of the correct running product"
        if self.changes_nothing():
            return f"{self.what}: no change: the predictions before and after are the same at every position."
        return (f"{self.what}: KL at the cursor {fmt_bits(kl[position])} bits, largest {fmt_bits(kl.max())} "
                f"bits; {real} "
                f"{fmt_bits(total, sign=True)} bits {where}.")

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


def fmt_bits(x: float, sign: bool = False) -> str:
    """A number of bits for a sentence: 3 significant digits, whole numbers with separators from 1,000 on
    (``+5,820``, not ``+5.82e+03``)."""
    x = float(x)
    if abs(x) >= 1000:
        return f"{x:+,.0f}" if sign else f"{x:,.0f}"
    return f"{x:+.3g}" if sign else f"{x:.3g}"
