"""Evaluation of a trained model with one protocol for every kind: :func:`bpc` of a token sequence and
:func:`evaluate` of a task's split."""

from __future__ import annotations

import torch

from geomlab.data.tasks import LN2, Task, sequence_nll


def bpc(model: torch.nn.Module, tokens: torch.Tensor, seq_len: int, stride: int | None = None,
        device: str | torch.device = "cpu") -> float:
    """Bits per character of ``tokens`` (``LongTensor`` ``(N,)``) under ``model``: mean NLL in nats over
    every target ``tokens[1:]`` divided by ln 2, with the window protocol of
    :func:`geomlab.data.tasks.sequence_nll` (non-overlapping windows of ``seq_len``, or sliding with
    ``stride``). Source: the OSM paper's BPC protocol. Raises ``ValueError`` for fewer than 2 tokens."""
    total, count = sequence_nll(model, tokens, seq_len, stride=stride, device=device)
    if count == 0:
        raise ValueError("bpc needs at least 2 tokens")
    return total / count / LN2


def evaluate(model, task: Task, split: str = "valid", seq_len: int = 128, stride: int | None = None,
             device: str | torch.device = "cpu", max_tokens: int | None = None) -> dict[str, float]:
    """``task.evaluate`` on ``split`` (the same protocol for every model)."""
    return task.evaluate(model, split, seq_len=seq_len, device=device, max_tokens=max_tokens, stride=stride)
