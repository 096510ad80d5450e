"""The contract every geomlab sequence model follows (design choice).

A model is a ``torch.nn.Module`` subclass of :class:`SequenceModel`:

* ``model(tokens)`` with ``tokens`` a ``LongTensor`` of shape ``(B, T)`` returns logits of shape
  ``(B, T, V)`` (float32/float64, real) where ``logits[:, t]`` predicts token ``t + 1``. Causal: output
  ``t`` never depends on tokens after ``t``.
* ``model.hook_points()``: ``{name: shape doc}`` of the model's hook points (:mod:`geomlab.models.hooks`),
  the named hidden values of its forward pass; ``run_with_cache(model, tokens, names)`` reads them for a
  batch, ``run_with_hooks(model, tokens, [(name, fn)])`` runs functions on them (and may replace them).
* ``model.record(tokens)`` with ``tokens`` of shape ``(1, T)`` returns the ``dict[str, Tensor]`` the trace
  stores (the keys of each kind in its ``record_from_cache`` docstring), read from the hook points named by
  ``record_hooks()`` in one :func:`~geomlab.models.hooks.run_with_cache`; it always holds ``"logits"`` of
  shape ``(T, V)`` equal to ``model(tokens)[0]``. ``model.records(tokens)`` does the same for a batch
  ``(B, T)`` in one run, a dict per sequence. Recording never changes the output.
* ``model.lens_stages()``: the layer lens (:class:`LensStage`), each intermediate hidden value read out
  through the model's own final norm and head; the last stage's readout is the model's output.
* ``model.cfg`` is the kind's typed config (a :class:`geomlab.models.config.ConfigBase` subclass, the
  class's ``config_class``); ``model.config`` is its plain JSON-serialisable dict (including ``"kind"`` and
  ``"vocab_size"``), so ``build_model(model.config)`` rebuilds the same architecture.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping

import torch
from torch import nn

from geomlab.models.config import ConfigBase
from geomlab.models.family import RECURRENT, Family
from geomlab.models.hooks import HookedModule, run_with_cache


@dataclass(frozen=True)
class LensStage:
    """One stage of the layer lens: a hidden value read out as next-token logits (logit lens, nostalgebraist
    2020, "interpreting GPT: the logit lens"; the readout per kind is a design choice).

    Attributes:
        label: what the stage is, for axis labels (e.g. ``"block 1"``, ``"L0 attn t=2"``).
        hook: the hook point whose cached value is read (:func:`~geomlab.models.hooks.run_with_cache`).
        readout: the model's own final norm and head (or prototype readout) applied to that value:
            ``(B, T, ...)`` -> logits ``(B, T, V)``.
        step: for a ``per_step`` hook point whose steps are not the positions (CEM's iterates), the index
            on the cached value's axis 1; ``None`` reads the value as it is.
    """

    label: str
    hook: str
    readout: Callable[[torch.Tensor], torch.Tensor]
    step: int | None = None


class SequenceModel(HookedModule, nn.Module):
    """Base class of every registered model kind.

    Subclasses set ``kind`` (the registry name) and ``config_class`` (its typed config), implement
    ``forward`` (calling their hook points), ``record_hooks`` and ``record_from_cache``, and may override
    ``config_for_budget`` and ``effective_param_count``.
    """

    kind: str = ""
    config_class: ClassVar[type[ConfigBase]] = ConfigBase
    #: The family this kind belongs to (:mod:`geomlab.models.family`).
    family: ClassVar[Family] = RECURRENT
    #: Whether the kind attends over earlier positions (its trace has attention weights).
    attention: ClassVar[bool] = False
    #: Whether the kind carries a state token to token (no attention).
    recurrent: ClassVar[bool] = False
    #: Whether the kind is a baseline of its family (it records a ``"baseline"`` trace, not the family's).
    baseline: ClassVar[bool] = False
    #: Whether watching a hook point changes the forward pass's arithmetic (the LSTM: its ``h``/``c`` points
    #: run the recurrence step by step instead of the fused kernel, which rounds differently). Then a trace
    #: reads extra hook points in a run of their own, so its record stays that of a plain run.
    hooks_change_arithmetic: ClassVar[bool] = False

    @classmethod
    def trace_family(cls) -> str:
        """The trace family this kind records: ``"baseline"`` for a baseline, else its family's ``trace``."""
        return "baseline" if cls.baseline else cls.family.trace

    def __init__(self, config: ConfigBase | Mapping[str, Any]):
        """``config``: the typed config, or a plain dict converted once with ``config_class.from_dict``
        (missing keys take the defaults). Raises ``ValueError`` (the kind's subclass) for an invalid one."""
        super().__init__()
        if isinstance(config, ConfigBase) and not isinstance(config, self.config_class):
            raise ValueError(f"{self.kind} needs a {self.config_class.__name__}, got a {type(config).__name__}")
        self.cfg = self.config_class.coerce(config)
        self.config = self.cfg.to_dict()

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        """Defaults for every config key of this kind except ``vocab_size`` (``config_class.defaults()``)."""
        return cls.config_class.defaults()

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """A config with ``count_params`` within 5% of ``n_params`` (keys in ``fixed`` are kept).

        Raises ``ValueError`` when no config of this kind reaches the budget.
        """
        raise NotImplementedError(f"{cls.kind}: config_for_budget is not implemented")

    def effective_param_count(self) -> int:
        """Trainable degrees of freedom (default: the number of stored trainable values)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def record_hooks(self) -> list[str]:
        """The hook points :meth:`record` reads (default: none, the record is the logits)."""
        return []

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, Any]:
        """The record of sequence ``b`` from a :func:`~geomlab.models.hooks.run_with_cache` of
        :meth:`record_hooks`: default ``{"logits": logits[b]}`` ``(T, V)``."""
        return {"logits": logits[b]}

    def lens_stages(self) -> list[LensStage]:
        """The layer lens's stages, earliest first (:class:`LensStage`); the last one's readout of its value
        is the model's own logits. Default: none (the kind has no lens). Read in the model's current mode
        (CEM: the current recursion count)."""
        return []

    def _check_record(self, tokens: torch.Tensor) -> None:
        if tokens.dim() != 2 or tokens.shape[0] != 1:
            raise ValueError(f"record expects tokens of shape (1, T), got {tuple(tokens.shape)}")

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """The trace's record of one sequence, ``tokens`` ``(1, T)`` (``ValueError`` otherwise): see
        :meth:`record_from_cache`."""
        self._check_record(tokens)
        return self.records(tokens)[0]

    @torch.no_grad()
    def trace_run(self, tokens: torch.Tensor, names: list[str] = ()) -> tuple[dict[str, Any], dict]:
        """What a trace stores of one sequence ``tokens`` ``(1, T)``, and the values of the extra hook points
        ``names``, from one run: ``(record, cache)``. The record is :meth:`record`'s (a kind may store a
        compact form instead, e.g. the torus OSMFormer's diagonals). ``ValueError`` for another shape."""
        self._check_record(tokens)
        logits, cache = run_with_cache(self, tokens, list(dict.fromkeys([*self.record_hooks(), *names])))
        return self.record_from_cache(cache, logits, 0), cache

    def trace_record(self, tokens: torch.Tensor) -> dict[str, Any]:
        """The record a trace stores of ``tokens`` ``(1, T)`` (:meth:`trace_run` without extra hook points)."""
        return self.trace_run(tokens)[0]

    @torch.no_grad()
    def records(self, tokens: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        """The records of a batch ``tokens`` ``(B, T)`` from one batched run, one dict per sequence."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        logits, cache = run_with_cache(self, tokens, self.record_hooks())
        return [self.record_from_cache(cache, logits, b) for b in range(tokens.shape[0])]
