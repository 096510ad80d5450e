"""The layer lens: the next-token prediction read out at each stage of a model (after each block, layer,
recursion step or group-state layer), through the model's own final norm and head (:class:`Lens`,
:func:`layer_lens`).

The stages are declared by each model class (``model.lens_stages()``, :class:`geomlab.models.base.LensStage`)
and their values read in one :func:`~geomlab.models.hooks.run_with_cache`; the last stage is the model's own
prediction. Source: the logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens"); the stages of
the geometric kinds and what is stored are design choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from geomlab.trace.base import TraceError

DEFAULT_K = 5
"""Top predictions kept per stage and position (design choice: the token panel's five)."""


@dataclass(eq=False)
class Lens:
    """The layer lens of one sequence.

    Attributes:
        labels: ``[stage]`` stage names, earliest first (e.g. ``"embedding"``, ``"block 0"``); the last
            stage is the model's own prediction.
        top_ids: ``[stage, position, k]`` int32 ids of the ``k`` most probable next tokens, most probable
            first.
        top_probs: ``[stage, position, k]`` float32 their probabilities.
        next_prob: ``[stage, position]`` float32 probability of the actual next token ``tokens[t + 1]``;
            NaN at the last position (no next token).
        next_rank: ``[stage, position]`` float32 rank of the actual next token (1 = the most probable;
            ``1 +`` the number of tokens strictly more probable); NaN at the last position.
        log_probs: ``[stage, position, vocab]`` float32 log-probabilities (nats), or ``None`` (a trace
            keeps only the compact fields above).
        names: ``{token id: printable string}`` for the ids in ``top_ids`` (set by
            :func:`geomlab.trace.trace` from the vocabulary; :meth:`name` falls back to ``"#id"``).
    """

    labels: list[str]
    top_ids: np.ndarray
    top_probs: np.ndarray
    next_prob: np.ndarray
    next_rank: np.ndarray
    log_probs: np.ndarray | None = None
    names: dict[int, str] = field(default_factory=dict)

    ARRAYS = ("top_ids", "top_probs", "next_prob", "next_rank")

    @property
    def n_stages(self) -> int:
        """Number of stages S."""
        return len(self.labels)

    @property
    def k(self) -> int:
        """Predictions kept per stage and position."""
        return int(self.top_ids.shape[-1])

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (the full log-probabilities included when kept)."""
        extra = self.log_probs.nbytes if self.log_probs is not None else 0
        return int(sum(getattr(self, name).nbytes for name in self.ARRAYS) + extra)

    def name(self, token_id: int) -> str:
        """The printable string of ``token_id`` (:attr:`names`, else ``"#id"``)."""
        return self.names.get(int(token_id), f"#{int(token_id)}")

    def compact(self) -> "Lens":
        """The same lens without the full log-probabilities (what a trace stores)."""
        return Lens(list(self.labels), self.top_ids, self.top_probs, self.next_prob, self.next_rank,
                    names=dict(self.names))

    def check(self, n_positions: int) -> "Lens":
        """``self`` after checking the shapes against ``n_positions``; raises :class:`TraceError` when an
        array's shape does not match ``(stages, positions[, k])``."""
        S = len(self.labels)
        for name in self.ARRAYS:
            shape = getattr(self, name).shape
            if shape[:2] != (S, n_positions) or len(shape) != (3 if name.startswith("top") else 2):
                raise TraceError(f"lens array {name!r} has shape {shape}; expected ({S}, {n_positions}, ...)")
        if self.top_ids.shape != self.top_probs.shape:
            raise TraceError("lens top_ids and top_probs differ in shape")
        return self


def lens_from_log_probs(labels: list[str], log_probs: torch.Tensor, tokens: torch.Tensor, k: int = DEFAULT_K,
                        keep: bool = True) -> Lens:
    """The :class:`Lens` of log-probabilities ``log_probs`` ``(S, T, V)`` (any float dtype) for the token
    ids ``tokens`` ``(T,)``: top-``k`` (``k`` capped at V), the actual next token's probability and rank.
    ``keep``: keep the full log-probabilities (float32). Raises :class:`TraceError` for ``k < 1`` or
    mismatched shapes. Design choice."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TraceError(f"k must be a positive integer, got {k!r}")
    S, T, V = log_probs.shape
    if tokens.shape != (T,):
        raise TraceError(f"tokens have shape {tuple(tokens.shape)}; the lens has {T} positions")
    lp = log_probs.float()
    top_lp, top_ids = lp.topk(min(k, V), dim=-1)
    next_prob = torch.full((S, T), float("nan"))
    next_rank = torch.full((S, T), float("nan"))
    if T > 1:
        nxt = tokens[1:].to(lp.device).view(1, T - 1, 1).expand(S, -1, -1)
        actual = lp[:, :-1].gather(-1, nxt)  # (S, T-1, 1)
        next_prob[:, :-1] = actual[..., 0].exp().cpu()
        next_rank[:, :-1] = (1 + (lp[:, :-1] > actual).sum(-1)).float().cpu()
    return Lens(list(labels), top_ids.to(torch.int32).cpu().numpy(), top_lp.exp().cpu().numpy(),
                next_prob.numpy(), next_rank.numpy(), lp.cpu().numpy() if keep else None)


@torch.no_grad()
def layer_lens(model, tokens, k: int = DEFAULT_K, keep_log_probs: bool = True) -> Lens:
    """The layer lens of ``model`` on one sequence.

    Args:
        model: a :class:`geomlab.models.SequenceModel` whose class declares ``lens_stages()``.
        tokens: ``LongTensor`` ``(1, T)`` (a ``(T,)`` vector is accepted).
        k: top predictions kept per stage and position (default :data:`DEFAULT_K`, capped at V).
        keep_log_probs: keep the full ``[stage, position, vocab]`` log-probabilities in the result.

    Returns:
        a :class:`Lens`; its last stage equals ``log_softmax(model(tokens))`` to float rounding.

    Runs the model once in its current mode (:func:`geomlab.trace.trace` calls it in eval mode under its
    model lock; a direct caller running one model from several threads must serialise the calls). Raises
    :class:`TraceError` for a wrong token shape or a kind without lens stages. Design choice (logit lens).
    """
    from geomlab.models.hooks import run_with_cache

    tokens = torch.as_tensor(tokens).long()
    if tokens.dim() == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 2 or tokens.shape[0] != 1 or tokens.shape[1] == 0:
        raise TraceError(f"layer_lens expects tokens of shape (1, T) with T >= 1, got {tuple(tokens.shape)}")
    stages = model.lens_stages()
    if not stages:
        raise TraceError(f"{getattr(model, 'kind', type(model).__name__)!r} declares no lens stages")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    _, cache = run_with_cache(model, tokens.to(device), lens_hooks(model))
    return lens_from_cache(model, cache, tokens, k=k, keep_log_probs=keep_log_probs)


def lens_hooks(model) -> list[str]:
    """The hook points the layer lens of ``model`` reads (empty for a kind without lens stages)."""
    return list(dict.fromkeys(s.hook for s in model.lens_stages()))


def lens_from_cache(model, cache: dict, tokens: torch.Tensor, k: int = DEFAULT_K,
                    keep_log_probs: bool = True) -> Lens:
    """The layer lens of one sequence ``tokens`` ``(1, T)`` from a :func:`~geomlab.models.hooks.run_with_cache`
    of ``model`` that read :func:`lens_hooks` (batch of one); see :func:`layer_lens`. Design choice."""
    stages = model.lens_stages()
    log_probs = []
    for stage in stages:
        value = cache[stage.hook]
        if stage.step is not None:
            value = value[:, stage.step]
        logits = stage.readout(value)[0]  # (T, V)
        log_probs.append(torch.log_softmax(logits.real if logits.is_complex() else logits, dim=-1))
    return lens_from_log_probs([s.label for s in stages], torch.stack(log_probs), tokens[0], k=k,
                               keep=keep_log_probs)
