"""The trace of a Causal Grassmann model (``grassmann``): reduced vectors, offsets, gates, and Plücker vectors
recomputed on demand; and how a record compacts into it (Zhang, arXiv 2512.19428)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from geomlab.trace.base import LazyArray, Trace, _f32


@dataclass
class GrassmannTrace(Trace):
    """Trace of a Causal Grassmann model (``grassmann``); source: Zhang, arXiv 2512.19428.

    Stored attributes:
        inputs: ``[layer, position, d_model]`` layer inputs h_t.
        reduced: ``[layer, position, rank]`` reduced vectors z_t.
        plucker_mask: ``[layer, offset, position]`` bool, True where the pair (t, t - offset) exists and the
            offset is used by the layer.
        offsets: ``[layer, offset]`` int64, the offset of each slot (0 = slot unused by this layer).
        gates: ``[layer, position, d_model]`` alpha in ``alpha * h + (1 - alpha) * g``.
        plucker_data: ``[layer, offset, position, P]`` stored Plücker vectors (version-1 traces), else
            ``None``: then :attr:`plucker` recomputes them from ``reduced`` (exactly the model's formula).
    """

    reduced: np.ndarray = None  # type: ignore[assignment]
    plucker_data: np.ndarray | None = None
    plucker_mask: np.ndarray | None = None
    offsets: np.ndarray | None = None
    gates: np.ndarray | None = None
    inputs: np.ndarray | None = None

    family: ClassVar[str] = "grassmann"
    REQUIRED: ClassVar[tuple[str, ...]] = ("reduced",)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("plucker_data", "plucker_mask", "offsets", "gates", "inputs")

    @classmethod
    def _compact(cls, arrays: dict[str, np.ndarray], kind: str, config: dict, tokens: np.ndarray,
                 group: dict | None) -> dict[str, Any]:
        """Grassmann record/version-1 arrays -> the stored fields; Plücker vectors are dropped when
        :meth:`plucker_block` recomputes them from the reduced vectors (kept otherwise), ``plucker_mean`` is
        dropped (design choice)."""
        named: dict[str, Any] = {"reduced": _f32(arrays.pop("reduced"))}
        for key, cast in (("plucker_mask", lambda a: a.astype(bool)), ("offsets", lambda a: a.astype(np.int64)),
                          ("gates", _f32), ("inputs", _f32)):
            if key in arrays:
                named[key] = cast(arrays.pop(key))
        plucker = arrays.pop("plucker_data", None)
        if plucker is None:
            plucker = arrays.pop("plucker", None)
        arrays.pop("plucker_mean", None)  # the bivector fed to W_plu: no view draws it (design choice)
        if plucker is not None:
            probe = GrassmannTrace(kind="", tokens=tokens, labels=[""] * len(tokens),
                                   logits=np.zeros((len(tokens), 1)), config=config, **named)
            same = named.get("offsets") is not None and probe.n_slots == plucker.shape[1] and all(
                np.allclose(probe.plucker_block(l, s_), plucker[l, s_], atol=1e-4)
                for l in range(plucker.shape[0]) for s_ in range(plucker.shape[1]))
            if not same:  # not recomputable from the reduced vectors (hand-made record): keep it
                named["plucker_data"] = _f32(plucker)
        return named

    @property
    def n_layers(self) -> int:
        """Number of Grassmann layers."""
        return int(self.reduced.shape[0])

    @property
    def rank(self) -> int:
        """Reduced dimension r."""
        return int(self.reduced.shape[-1])

    @property
    def n_slots(self) -> int:
        """Offset slots per layer."""
        if self.plucker_data is not None:
            return int(self.plucker_data.shape[1])
        return int(self.offsets.shape[1]) if self.offsets is not None else 0

    def plucker_block(self, layer: int, slot: int) -> np.ndarray:
        """``[position, P]`` float32 unit Plücker vectors ``p_hat(z_t, z_{t-D})`` of one layer and offset slot
        (zero where masked): ``p / max(||p||, eps)`` (``normalize="smooth"``: ``p / sqrt(||p||^2 + eps^2)``)
        with ``p_ij = a_i b_j - a_j b_i``, ``i < j``, computed in float64. Source: Zhang, arXiv 2512.19428."""
        if self.plucker_data is not None:
            return self.plucker_data[layer, slot]
        r = self.rank
        P = r * (r - 1) // 2
        T = self.n_positions
        out = np.zeros((T, P), dtype=np.float32)
        D = int(self.offsets[layer, slot]) if self.offsets is not None else 0
        if D <= 0 or D >= T:
            return out
        z = self.reduced[layer].astype(np.float64)
        a, b = z[D:], z[:-D]
        I, J = np.triu_indices(r, k=1)
        eps = float(self.config.get("eps", 1e-6))
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite reduced vectors stay non-finite
            p = a[:, I] * b[:, J] - a[:, J] * b[:, I]
            n = np.linalg.norm(p, axis=-1, keepdims=True)
            if self.config.get("normalize", "clamp") == "smooth":
                p = p / np.sqrt(n * n + eps * eps)
            else:
                p = p / np.maximum(n, eps)
        out[D:] = p
        if self.plucker_mask is not None:
            out[~self.plucker_mask[layer, slot]] = 0
        return out

    @property
    def plucker(self) -> np.ndarray | LazyArray:
        """``[layer, offset, position, P]`` unit Plücker vectors (zero where masked), computed per
        ``[layer, offset]`` block on demand (a :class:`LazyArray`) unless stored."""
        if self.plucker_data is not None:
            return self.plucker_data
        r = self.rank
        return LazyArray((self.n_layers, self.n_slots, self.n_positions, r * (r - 1) // 2), np.float32,
                         self.plucker_block, 2)
