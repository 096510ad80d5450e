"""Scoring a trace's predictions against their training targets: next token or a word problem's running
product (:func:`score_predictions`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from geomlab.trace.base import Trace, TraceError


def is_word_problem(task: Any) -> bool:
    """Whether a checkpoint card's ``task`` entry (``card["task"]``, a dict or None) is a group word problem
    (``{"task": "word-problem", "group": "S5", ...}``)."""
    return isinstance(task, dict) and task.get("task") == "word-problem" and bool(task.get("group"))


@dataclass(frozen=True)
class PredictionScores:
    """How well a trace's outputs predict what they are trained to predict, per position.

    Attributes:
        target: ``[position]`` int64 id scored at each position (-1 where nothing is scored).
        bits: ``[position]`` float64 surprisal ``-log2 p(target)`` in bits (NaN where nothing is scored).
        correct: ``[position]`` float64, 1.0 where the arg-max output is the target, 0.0 where not, NaN
            where nothing is scored.
        what: ``"next token"`` (language model) or ``"running product"`` (group word problem).
    """

    target: np.ndarray
    bits: np.ndarray
    correct: np.ndarray
    what: str

    @property
    def mean_bits(self) -> float:
        """Mean surprisal over the scored positions (bits; NaN when none is scored)."""
        ok = ~np.isnan(self.bits)
        return float(self.bits[ok].mean()) if ok.any() else float("nan")

    @property
    def accuracy(self) -> float:
        """Fraction of scored positions whose arg-max output is the target (NaN when none is scored)."""
        ok = ~np.isnan(self.correct)
        return float(self.correct[ok].mean()) if ok.any() else float("nan")


def score_predictions(tr: Trace, task: Any = None) -> PredictionScores:
    """Per-position surprisal (bits) and arg-max correctness of ``tr``'s outputs against their training
    targets. Source: design choice (the model contract of ``docs/architecture.md`` and
    :mod:`geomlab.data.word_problem`).

    * Language model (``task`` None or not a word problem): position ``t`` scores input token ``t`` with
      the output at ``t - 1`` (``logits[t - 1]`` predicts token ``t``); position 0 has no score (NaN, -1).
    * Group word problem (:func:`is_word_problem`): input tokens are element ids ``g_0 .. g_{T-1}`` and
      position ``t`` scores the running product ``g_0 ... g_t``
      (``get_group(task["group"]).running_product``) with the output at ``t``; every position, including
      0, has a score.

    Args:
        tr: any trace (``tokens`` ``[position]``, ``logits`` ``[position, vocab]``).
        task: the checkpoint card's ``task`` entry (dict) or None.

    Raises:
        TraceError: for a word problem whose output size is not the group's order.
        geomlab.data.errors.DataError (a ``ValueError``): an unknown group or token ids outside the group.
    """
    lp = tr.log_probs()
    n = tr.n_positions
    target = np.full(n, -1, dtype=np.int64)
    bits = np.full(n, np.nan)
    correct = np.full(n, np.nan)
    if is_word_problem(task):
        from geomlab.data.word_problem import get_group

        group = get_group(str(task["group"]))
        if lp.shape[-1] != group.order:
            raise TraceError(f"a {group.name} word-problem model must have {group.order} outputs, "
                             f"this one has {lp.shape[-1]}")
        target[:] = group.running_product(torch.as_tensor(tr.tokens, dtype=torch.long)).numpy()
        rows = np.arange(n)
        what = "running product"
    else:
        rows = np.arange(n - 1)
        if n > 1:
            target[1:] = tr.tokens[1:]
        what = "next token"
    scored = np.arange(n)[target >= 0]
    if scored.size:
        bits[scored] = -lp[rows, target[scored]] / np.log(2.0)
        correct[scored] = (lp[rows].argmax(-1) == target[scored]).astype(np.float64)
    return PredictionScores(target=target, bits=bits, correct=correct, what=what)


def past_training_length(tr: Trace, seq_len: int, task: Any = None) -> tuple[float, float] | None:
    """Mean surprisal of ``tr``'s predictions (bits per token, :func:`score_predictions`) over the positions
    a model trained on ``seq_len``-token sequences saw in training (``1 .. seq_len - 1``) and over the rest
    (``seq_len ..``): ``(inside, past)``, or None when the text is not longer than ``seq_len`` or either part
    has no finite score. A model whose position encoding does not extend (RoPE past its training length)
    scores ``past`` near chance, ``log2(vocabulary)``. Design choice (the app warns from it)."""
    seq_len = int(seq_len)
    if seq_len < 2 or tr.n_positions <= seq_len:
        return None
    bits = score_predictions(tr, task).bits
    inside, past = bits[:seq_len], bits[seq_len:]
    inside, past = inside[np.isfinite(inside)], past[np.isfinite(past)]
    if not inside.size or not past.size:
        return None
    return float(inside.mean()), float(past.mean())
