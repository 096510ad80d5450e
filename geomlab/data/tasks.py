"""Tasks: what the :class:`geomlab.training.trainer.Trainer` trains on (design choice).

A :class:`Task` hands out random training batches ``(inputs, targets)``, turns model outputs into a loss
(in nats) and evaluates a model on a split. The Trainer only talks to this interface, so language modelling
(:class:`LMTask`), the group word problem (:class:`geomlab.data.word_problem.WordProblemTask`) and the
GP regression task (``geomlab.data.gp``) share one training loop. This module defines the interface and
imports no task module; :mod:`geomlab.data.registry` names and builds the tasks (``make_task``).

Evaluation protocol for language modelling (:func:`sequence_nll`, the same for every model):

* the split is one token stream ``x_0 .. x_{N-1}``; every target ``x_1 .. x_{N-1}`` is scored **exactly
  once** (``x_0`` has no context and is never a target);
* windows of ``seq_len`` inputs: with ``stride = seq_len`` (the default) the windows do not overlap, so a
  target sees between 0 and ``seq_len - 1`` earlier tokens; with ``stride < seq_len`` (sliding window) each
  window scores only its last ``stride`` targets, so every target after the first window sees at least
  ``seq_len - stride`` tokens of context;
* the last window is right-aligned with the end of the split (full context; it scores only the targets not
  yet scored);
* every window starts from a fresh model state (the model contract has no carried state).

BPC = mean NLL in nats / ln 2 (Nunley, arXiv 2602.18417).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from geomlab.data.errors import DataError
from geomlab.data.vocab import Vocab

LN2 = math.log(2.0)


class Task:
    """Interface of a training task (subclass it).

    Attributes:
        name: a short label, e.g. ``"tinyshakespeare"`` or ``"word-problem S5"``.
        kind: ``"lm"``, ``"classification"`` or ``"regression"``.
        metric: key of the primary validation metric in :meth:`evaluate`'s dict (e.g. ``"bpc"``).
        higher_is_better: whether a larger :attr:`metric` is better.
        vocab: the input :class:`Vocab` (``None`` for real-valued inputs).
        vocab_size: number of model outputs per position (``model.config["vocab_size"]``).
    """

    name: str = ""
    kind: str = "lm"
    metric: str = "loss"
    higher_is_better: bool = False
    vocab: Vocab | None = None
    vocab_size: int = 0

    def sample_batch(self, batch_size: int, seq_len: int,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """A random training batch ``(inputs, targets)`` on the CPU drawn with ``generator`` only."""
        raise NotImplementedError

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Scalar training loss. Default: mean cross-entropy in nats of logits ``(B, T, V)`` against
        ``targets`` ``(B, T)`` (long)."""
        return F.cross_entropy(outputs.reshape(-1, outputs.shape[-1]).float(), targets.reshape(-1))

    def tokens_per_batch(self, batch_size: int, seq_len: int) -> int:
        """How many target positions one batch scores (for tokens/s)."""
        return batch_size * seq_len

    def evaluate(self, model: torch.nn.Module, split: str = "valid", *, seq_len: int = 128,
                 device: str | torch.device = "cpu", max_tokens: int | None = None,
                 stride: int | None = None) -> dict[str, float]:
        """Metrics of ``model`` on ``split`` (always including :attr:`metric`)."""
        raise NotImplementedError

    def spec(self) -> dict[str, Any]:
        """A JSON description of the task stored in checkpoint cards (enough to rebuild it)."""
        return {"task": self.kind, "name": self.name}

    def check_context(self, seq_len: int) -> None:
        """Raise :class:`DataError` if training windows of ``seq_len`` inputs cannot be drawn (the Trainer
        calls it before any step, so nothing trains on a silently shorter window). Default: any length."""

    def data_vocab(self) -> Vocab | None:
        """The vocabulary the task's own data would build (``None`` when it has no data of its own, e.g.
        synthetic tasks with a closed symbol set). Resuming compares it with the checkpoint's."""
        return None


# ------------------------------------------------------------------------------------------- evaluation
def eval_windows(n_tokens: int, seq_len: int, stride: int | None = None) -> list[tuple[int, int, int]]:
    """The evaluation windows of a stream of ``n_tokens`` tokens (see the module docstring).

    Returns ``(begin, end, first_scored)`` triples: inputs are tokens ``[begin, end)``, targets tokens
    ``[begin + 1, end + 1)``, and only targets with input position ``>= first_scored`` are counted. The
    scored positions of all windows partition ``[0, n_tokens - 1)``. Raises :class:`DataError` for
    ``seq_len < 1`` or a stride outside ``1 .. seq_len``.
    """
    if seq_len < 1:
        raise DataError(f"seq_len must be >= 1, got {seq_len}")
    stride = seq_len if stride is None else int(stride)
    if not 1 <= stride <= seq_len:
        raise DataError(f"stride must be between 1 and seq_len={seq_len}, got {stride}")
    last = n_tokens - 1  # number of input positions that have a target
    out = []
    if last <= 0:
        return out
    end = min(seq_len, last)
    out.append((0, end, 0))
    while end < last:
        new_end = min(end + stride, last)
        out.append((max(0, new_end - seq_len), new_end, end))
        end = new_end
    return out


def unigram_bpc(task) -> float | None:
    """Cross-entropy in bits per character of the valid split under the training split's character
    frequencies (add-one smoothed): what a model that learned nothing but the unigram scores. ``None`` for a
    task without token splits. Source: design choice (the report's "did it train?" line)."""
    try:
        train, valid = task.tokens("train"), task.tokens("valid")
    except (AttributeError, KeyError, ValueError):
        return None
    counts = torch.bincount(train, minlength=task.vocab_size).double() + 1.0
    logp = torch.log2(counts / counts.sum())
    return float(-logp[valid].mean())


@torch.no_grad()
def sequence_nll(model: torch.nn.Module, tokens: torch.Tensor, seq_len: int, stride: int | None = None,
                 device: str | torch.device = "cpu", batch_size: int | None = None) -> tuple[float, int]:
    """Total next-token NLL (nats) of ``tokens`` under ``model`` and the number of targets scored.

    Args:
        model: a causal model, ``(B, T)`` long -> ``(B, T, V)`` logits.
        tokens: ``LongTensor`` ``(N,)``, the split as one stream.
        seq_len: window length (the training context length); ``stride`` as in :func:`eval_windows`.
        batch_size: windows per forward pass (default: 64, fewer when that would exceed 2e7 logits).

    Returns ``(sum_nll_nats, n_targets)`` with ``n_targets = N - 1``. The model is put in eval mode and
    restored afterwards. Source: design choice (module docstring).
    """
    tokens = tokens.reshape(-1).long()
    windows = eval_windows(tokens.numel(), seq_len, stride)
    if not windows:
        return 0.0, 0
    was_training = model.training
    model.eval()
    vocab = int(getattr(model, "config", {}).get("vocab_size", 256)) if hasattr(model, "config") else 256
    if batch_size is None:
        batch_size = max(1, min(64, int(2e7 // max(1, seq_len * vocab))))
    total = torch.zeros((), dtype=torch.float64)
    count = 0
    try:
        # group windows of equal length so they batch together
        by_len: dict[int, list[tuple[int, int, int]]] = {}
        for w in windows:
            by_len.setdefault(w[1] - w[0], []).append(w)
        for length, group in by_len.items():
            offs = torch.arange(length + 1)
            for i in range(0, len(group), batch_size):
                chunk = group[i:i + batch_size]
                begins = torch.tensor([w[0] for w in chunk])
                idx = begins[:, None] + offs[None, :]
                x = tokens[idx]
                inp, tgt = x[:, :-1].to(device), x[:, 1:].to(device)
                logits = model(inp)
                nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1),
                                      reduction="none").reshape(tgt.shape)
                first = torch.tensor([w[2] - w[0] for w in chunk], device=nll.device)
                mask = torch.arange(length, device=nll.device)[None, :] >= first[:, None]
                total += (nll * mask).sum().double().cpu()
                count += int(mask.sum())
    finally:
        model.train(was_training)
    return float(total), count


class LMTask(Task):
    """Next-token language modelling on a :class:`geomlab.data.corpora.Corpus`.

    Training batches are ``batch_size`` random windows of ``seq_len + 1`` tokens of the training stream
    (inputs = first ``seq_len``, targets = the same shifted by one). Metrics: ``nll`` (nats per token),
    ``bpc`` (char level; = nll / ln 2) or ``bpw``/``ppl`` (word level), ``tokens`` (targets scored).

    Args:
        corpus: the corpus; ``vocab``: the vocabulary (default: built from the training split).
    """

    kind = "lm"

    def __init__(self, corpus, vocab: Vocab | None = None):
        self.corpus = corpus
        self.vocab = vocab if vocab is not None else corpus.build_vocab()
        self.vocab_size = self.vocab.size
        self.name = corpus.name
        self.metric = "bpc" if self.vocab.level == "char" else "ppl"
        self._tokens: dict[str, torch.Tensor] = {}

    def tokens(self, split: str) -> torch.Tensor:
        """The encoded split, ``LongTensor`` ``(N,)`` (cached)."""
        if split not in self._tokens:
            self._tokens[split] = self.corpus.tokens(split, self.vocab)
        return self._tokens[split]

    def check_context(self, seq_len: int) -> None:
        """:class:`DataError` naming the split, its length and the length needed when the training split
        holds fewer than ``seq_len + 1`` tokens (design choice: refused, never a silently shorter
        window with a card that records the requested one)."""
        n = self.tokens("train").numel()
        need = int(seq_len) + 1
        if n >= need:
            return
        unit = "characters" if self.vocab.level == "char" else "tokens"
        hint = ""
        if self.vocab.level == "char" and "90/5/5" in str(self.corpus.source.get("split_rule", "")):
            total = math.ceil(need / 0.9)
            while int(0.9 * total) < need:  # the split's own rounding (split_text)
                total += 1
            hint = f" (a text of at least {total} characters split 90/5/5)"
        raise DataError(f"the training split of {self.name} has {n} {unit}, but a context of seq_len={seq_len} "
                        f"needs at least {need} (seq_len inputs + 1 target){hint}; use a sequence length of "
                        f"at most {max(1, n - 1)} or a longer text")

    def data_vocab(self) -> Vocab:
        """The vocabulary of this corpus's own training split (which may differ from :attr:`vocab` when a
        checkpoint's vocabulary was passed in)."""
        if getattr(self, "_data_vocab", None) is None:
            self._data_vocab = self.corpus.build_vocab()
        return self._data_vocab

    def sample_batch(self, batch_size, seq_len, generator):
        data = self.tokens("train")
        n = data.numel()
        self.check_context(seq_len)
        starts = torch.randint(0, n - seq_len, (batch_size,), generator=generator)
        x = data[starts[:, None] + torch.arange(seq_len + 1)[None, :]]
        return x[:, :-1], x[:, 1:]

    def evaluate(self, model, split="valid", *, seq_len=128, device="cpu", max_tokens=None, stride=None):
        data = self.tokens(split)
        if max_tokens is not None:
            if int(max_tokens) < 1:  # a negative count would slice from the end, 0 would blame the data
                raise DataError(f"max_tokens must be >= 1 (None scores the whole split), got {max_tokens}")
            data = data[: int(max_tokens) + 1]
        total, count = sequence_nll(model, data, seq_len, stride=stride, device=device)
        if count == 0:
            raise DataError(f"split {split!r} of {self.name} has no tokens to evaluate")
        nll = total / count
        out = {"nll": nll, "tokens": float(count)}
        if self.vocab.level == "char":
            out["bpc"] = nll / LN2
        else:
            out["bpw"] = nll / LN2
            out["ppl"] = math.exp(min(nll, 700.0))
        return out

    def spec(self):
        return {"task": "lm", "name": self.name, "level": self.vocab.level, **self.corpus.source}
