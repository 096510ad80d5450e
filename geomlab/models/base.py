"""The contract every geomlab sequence model follows (design choice).

A model is a ``torch.nn.Module`` subclass of :class:`SequenceModel`:

* ``model(tokens)`` with ``tokens`` a ``LongTensor`` of shape ``(B, T)`` returns logits of shape
  ``(B, T, V)`` (float32/float64, real) where ``logits[:, t]`` predicts token ``t + 1``. Causal: output
  ``t`` never depends on tokens after ``t``.
* ``model.record(tokens)`` with ``tokens`` of shape ``(1, T)`` runs the same computation and returns a
  ``dict[str, Tensor]`` of everything the views need (see ``docs/architecture.md`` for the keys of each
  family); it always holds ``"logits"`` of shape ``(T, V)`` equal to ``model(tokens)[0]``.
  Recording never changes the output.
* ``model.cfg`` is the kind's typed config (a :class:`geomlab.models.config.ConfigBase` subclass, the
  class's ``config_class``); ``model.config`` is its plain JSON-serialisable dict (including ``"kind"`` and
  ``"vocab_size"``), so ``build_model(model.config)`` rebuilds the same architecture.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

import torch
from torch import nn

from geomlab.models.config import ConfigBase
from geomlab.models.family import RECURRENT, Family


class SequenceModel(nn.Module):
    """Base class of every registered model kind.

    Subclasses set ``kind`` (the registry name) and ``config_class`` (its typed config), implement
    ``forward`` and ``record``, and may override ``config_for_budget`` and ``effective_param_count``.
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

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """Default recording: only the logits, shape ``(T, V)``."""
        if tokens.dim() != 2 or tokens.shape[0] != 1:
            raise ValueError(f"record expects tokens of shape (1, T), got {tuple(tokens.shape)}")
        return {"logits": self(tokens)[0]}
