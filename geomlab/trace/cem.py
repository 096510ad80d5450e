"""The trace of a causal-energy-minimisation Transformer (``cem``): energies and displacement per recursion
step (Xu et al., arXiv 2605.07588)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from geomlab.trace.base import Trace, TraceError


@dataclass
class CEMTrace(Trace):
    """Trace of a causal-energy-minimisation Transformer (``cem``); source: Xu et al., arXiv 2605.07588.

    Attributes:
        energies: ``[layer, block, step, position]`` per-token energy of the iterate x^t (block 0 =
            attention, 1 = MLP; step t = 0..T). Arbitrary units; compare steps within one layer/block.
        displacement: ``[layer, block, step, position]`` ``||x^t - h|| / rho`` (dimensionless).
        (attention of the last recursion step: the common ``attention_q``/``attention_k`` fields.)
        recursion_steps: the T this trace ran with (``energies.shape[2] - 1``).
    """

    energies: np.ndarray = None  # type: ignore[assignment]
    displacement: np.ndarray | None = None

    family: ClassVar[str] = "cem"
    REQUIRED: ClassVar[tuple[str, ...]] = ("energies",)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("displacement",)

    @classmethod
    def _compact(cls, arrays: dict[str, np.ndarray], kind: str, config: dict, tokens: np.ndarray,
                 group: dict | None) -> dict[str, Any]:
        if "energies" not in arrays:
            raise TraceError(f"the record of {kind!r} lacks ['energies'] for a cem trace")
        named: dict[str, Any] = {"energies": arrays.pop("energies")}
        if "displacement" in arrays:
            named["displacement"] = arrays.pop("displacement")
        named.update(super()._compact(arrays, kind, config, tokens, group))
        return named

    @property
    def n_layers(self) -> int:
        """Number of CEM layers."""
        return int(self.energies.shape[0])

    @property
    def recursion_steps(self) -> int:
        """Number of recursion steps T (the step axis has T + 1 entries)."""
        return int(self.energies.shape[2]) - 1

    def energy_mean(self) -> np.ndarray:
        """``[layer, block, step]`` token-mean energy (Xu et al., arXiv 2605.07588)."""
        return self.energies.mean(axis=-1)

    def energy_change(self) -> np.ndarray:
        """``[layer, block, step, position]`` per-token change ``eps(x^t) - eps(x^0)`` (Xu et al., arXiv 2605.07588)."""
        return self.energies - self.energies[:, :, :1, :]
