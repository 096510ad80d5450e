"""The trace of an orthogonal state model (``osm-rnn``, ``osmformer``): states on a matrix group, Lie-algebra
updates, similarity; and how a record compacts into it (Nunley, arXiv 2602.18417; design choice)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from geomlab.trace.base import LazyArray, Trace, TraceError, _check_index, _f32


def _offdiag_zero(a: np.ndarray | None) -> bool:
    if a is None or a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        return False
    d = a.shape[-1]
    return not np.any(a * (1 - np.eye(d, dtype=bool)))


@dataclass
class OSMTrace(Trace):
    """Trace of an orthogonal state model (``osm-rnn``, ``osmformer``); source: Nunley, arXiv 2602.18417.

    Stored (compact) attributes:
        state_data: ``[layer, position, d, d]`` state H after each layer (OSM-RNN: one "layer", H after
            consuming token t); real for O/SO/O-block, complex for U/SU/T. Torus traces store the diagonal
            ``[layer, position, d]`` (the off-diagonal entries are exactly 0).
        input_data: ``[position, d, d]`` (or diagonal ``[position, d]``) layer-0 states, or ``None``.
        tangent_coords: ``[2, layer, substep, position, m]`` float16 Lie-algebra coordinates of the updates
            (``group.to_coords``; index 0 before mixing, 1 after mixing and step size) or ``None``;
            substep 0 = attention, 1 = grounding (OSM-RNN: substep 0 only).
        tangent_matrices: the same as full ``d x d`` matrices when there is no group to take coordinates in
            (hand-made records), else ``None``.
        tangent_stats: ``[3, layer, substep, position]`` float32 exact ``||raw||_F``, ``||mixed||_F`` and
            ``Re tr(raw^* mixed)`` (radians, radians, radians²), computed before rounding to float16.
        attention_scale: ``[layer]`` factor of the per-head dot product of the layer's input states in the
            attention scores (OSMFormer), or ``None``.
        similarity_dense: ``[layer, position, position]`` similarity of a version-1 trace, or ``None``.
        group: ``{"name": str, "d": int, "options": dict}`` to rebuild the group with
            ``geomlab.geometry.groups.get_group(name, d, **options)``.

    Derived on access: :attr:`states`, :attr:`inputs`, :attr:`tangents_raw`, :attr:`tangents` (full
    matrices), :attr:`similarity` (``Re tr(H_i^* H_j)``, lazily), :attr:`attention`.
    """

    state_data: np.ndarray = None  # type: ignore[assignment]
    input_data: np.ndarray | None = None
    tangent_coords: np.ndarray | None = None
    tangent_matrices: np.ndarray | None = None
    tangent_stats: np.ndarray | None = None
    attention_scale: np.ndarray | None = None
    similarity_dense: np.ndarray | None = None
    group: dict[str, Any] = field(default_factory=dict)

    family: ClassVar[str] = "osm"
    REQUIRED: ClassVar[tuple[str, ...]] = ("state_data",)
    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "input_data", "tangent_coords", "tangent_matrices", "tangent_stats", "attention_scale",
        "similarity_dense",
    )

    @classmethod
    def _compact(cls, arrays: dict[str, np.ndarray], kind: str, config: dict, tokens: np.ndarray,
                 group: dict | None) -> dict[str, Any]:
        """OSM record/version-1 arrays -> the compact fields of :class:`OSMTrace` (design choice):
        float32 states (torus: their diagonals), float16 tangent coordinates with exact norms (the matrices when
        they are not in the algebra), dense version-1 maps kept as ``*_dense``; plus the ``group`` field."""
        named: dict[str, Any] = {}
        states = arrays.pop("state_data", None)
        if states is None:
            states = arrays.pop("states")
        inputs = arrays.pop("input_data", None)
        if inputs is None:
            inputs = arrays.pop("inputs", None)
        states = _f32(states)
        inputs = _f32(inputs) if inputs is not None else None
        is_torus = (group or {}).get("name") == "T"
        if states.ndim == 4 and is_torus and _offdiag_zero(states) and (inputs is None or _offdiag_zero(inputs)):
            states = np.ascontiguousarray(np.diagonal(states, axis1=-2, axis2=-1))
            inputs = None if inputs is None else np.ascontiguousarray(np.diagonal(inputs, axis1=-2, axis2=-1))
        named["state_data"], named["input_data"] = states, inputs
        for key in ("tangent_coords", "tangent_matrices", "tangent_stats", "attention_scale", "similarity_dense"):
            if key in arrays:
                named[key] = arrays.pop(key)
        if named.get("tangent_coords") is not None:  # given directly (a model's trace_record): stored as float16
            named["tangent_coords"] = named["tangent_coords"].astype(np.float16)
        raw, mixed = arrays.pop("tangents_raw", None), arrays.pop("tangents", None)
        if raw is not None and mixed is not None and "tangent_stats" not in named:
            r_t, m_t = torch.as_tensor(raw), torch.as_tensor(mixed)  # stats at the record's precision
            nr = r_t.abs().square().sum(dim=(-2, -1)).sqrt()
            nm = m_t.abs().square().sum(dim=(-2, -1)).sqrt()
            inner = (r_t.conj() * m_t).real.sum(dim=(-2, -1)) if r_t.is_complex() else (r_t * m_t).sum(dim=(-2, -1))
            stats = torch.stack([nr, nm, inner]).numpy()
            named["tangent_stats"] = stats if raw.dtype in (np.float64, np.complex128) else stats.astype(np.float32)
            coords = None
            if (group or {}).get("name"):
                from geomlab.geometry import groups

                try:
                    g = groups.get_group(group["name"], int(group.get("d", states.shape[-1])),
                                         **dict(group.get("options", {})))
                    both = torch.stack([r_t, m_t]).to(torch.complex64 if r_t.is_complex() else torch.float32)
                    c = g.to_coords(both)
                    # to_coords is an isometry on the algebra and shrinks anything else (it projects first):
                    # equal norms mean the updates are in the algebra and the coordinates keep all of them
                    cn = torch.linalg.vector_norm(c, dim=-1)
                    fn = torch.stack([nr, nm])
                    coords = c.numpy().astype(np.float16)
                    if (not np.all(np.isfinite(coords))
                            or float((cn - fn).abs().max()) > 1e-3 * max(float(fn.max()), 1e-12)):
                        coords = None  # not in the algebra (or out of float16 range): keep the matrices
                except Exception:  # noqa: BLE001 - an unknown group: keep the matrices
                    coords = None
            if coords is not None:
                named["tangent_coords"] = coords
            else:
                named["tangent_matrices"] = np.stack([_f32(raw), _f32(mixed)])
        attention = arrays.pop("attention", None)
        heads = arrays.pop("attention_heads", None)
        if heads is not None:
            named["attention_dense"] = _f32(heads)
        elif attention is not None:
            named["attention_dense"] = _f32(attention[:, None] if attention.ndim == 3 else attention)
        sim = arrays.pop("similarity", None)
        if sim is not None:
            named["similarity_dense"] = _f32(sim)
        named["group"] = dict(group or {})
        return named

    @property
    def diagonal(self) -> bool:
        """Whether states are stored as their diagonals (torus)."""
        return self.state_data.ndim == 3

    @property
    def n_layers(self) -> int:
        """Number of recorded state layers."""
        return int(self.state_data.shape[0])

    @property
    def d(self) -> int:
        """Matrix size d of the group elements."""
        return int(self.state_data.shape[-1])

    @property
    def n_heads(self) -> int:
        """Attention heads (0 for the OSM-RNN)."""
        if self.attention_scale is not None:
            return int(self.config.get("heads", 1) or 1)
        return Trace.n_heads.fget(self)

    @staticmethod
    def _expand(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        out = np.zeros(a.shape + (a.shape[-1],), dtype=a.dtype)
        idx = np.arange(a.shape[-1])
        out[..., idx, idx] = a
        return out

    @property
    def states(self) -> np.ndarray:
        """``[layer, position, d, d]`` states as full matrices (expanded from the diagonal for the torus)."""
        return self._expand(self.state_data) if self.diagonal else self.state_data

    @property
    def inputs(self) -> np.ndarray | None:
        """``[position, d, d]`` layer-0 states (token matrices) or ``None``."""
        if self.input_data is None:
            return None
        return self._expand(self.input_data) if self.diagonal else self.input_data

    def state_vectors(self, layer_input: int, rows: slice = slice(None)) -> np.ndarray:
        """``[position, F]`` float64 real vectors ``v`` of the states read by layer ``layer_input`` (0: the
        inputs, l: ``states[l-1]``), restricted to matrix rows ``rows``, with ``v_i·v_j = Re tr(H_i^* H_j)``
        over those rows (diagonal storage: the diagonal entries of those rows, real and imaginary parts)."""
        a = self.input_data if layer_input == 0 else self.state_data[layer_input - 1]
        if a is None:
            raise TraceError("this OSM trace has no layer-0 inputs")
        a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)[:, rows]
        if np.iscomplexobj(a):
            a = np.stack([a.real, a.imag], axis=-1)
        return a.reshape(a.shape[0], -1)

    def _head_vectors(self, layer: int, head: int) -> np.ndarray:
        """The state vectors of head ``head``'s block of rows (native rows split evenly into heads)."""
        H = int(self.n_heads)
        return self.state_vectors(layer, slice(head * self.d // H, (head + 1) * self.d // H))

    def _qk(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        if self.attention_scale is None:
            return Trace._qk(self, layer, head)
        v = self._head_vectors(layer, head)
        return float(self.attention_scale[layer]) * v, v

    def _scores_from_states(self) -> bool:
        return self.attention_scale is not None

    def similarity_rows(self, layer: int, rows=None) -> np.ndarray:
        """``[len(rows), position]`` float64 similarity ``Re tr(H_i^* H_j)`` of the states layer ``layer``
        reads (layer 0: the inputs), in ``[-d, d]``; computed on demand. Raises ``TraceError`` when the
        trace has no similarity (OSM-RNN) or an index is out of range. Source: Nunley, arXiv 2602.18417."""
        if not self.has_similarity:
            raise TraceError(f"{self.kind!r} records no similarity")
        layer = _check_index("layer", layer, self.n_layers)
        rows = self._rows(rows)
        if self.similarity_dense is not None:
            return self.similarity_dense[layer][rows].astype(np.float64)
        v = self.state_vectors(layer)
        return v[rows] @ v.T

    @property
    def has_similarity(self) -> bool:
        """Whether :meth:`similarity_rows` applies (OSMFormer traces)."""
        return self.similarity_dense is not None or (self.attention_scale is not None
                                                     and self.input_data is not None)

    @property
    def similarity(self) -> LazyArray | None:
        """``[layer, position, position]`` similarity as a :class:`LazyArray`, or ``None``."""
        if not self.has_similarity:
            return None
        T = self.n_positions
        return LazyArray((self.n_layers, T, T), np.float64, lambda l: self.similarity_rows(l), 2)

    # ------------------------------------------------------------------ tangents
    @property
    def has_tangents(self) -> bool:
        """Whether the updates were recorded."""
        return self.tangent_coords is not None or self.tangent_matrices is not None

    def _tangent_full(self, which: int) -> np.ndarray | None:
        if self.tangent_matrices is not None:
            return self.tangent_matrices[which]
        if self.tangent_coords is None:
            return None
        g = self.get_group()
        c = torch.as_tensor(self.tangent_coords[which].astype(np.float32))
        return g.from_coords(c).numpy()

    @property
    def tangents_raw(self) -> np.ndarray | None:
        """``[layer, substep, position, d, d]`` updates before mixing (from float16 coordinates: about 3
        significant digits), or ``None``."""
        return self._tangent_full(0)

    @property
    def tangents(self) -> np.ndarray | None:
        """``[layer, substep, position, d, d]`` updates after mixing and step size (what was exponentiated),
        or ``None``."""
        return self._tangent_full(1)

    @property
    def tangent_shape(self) -> tuple[int, int, int]:
        """``(layers, substeps, positions)`` of the recorded updates. Raises ``TraceError`` without them."""
        if self.tangent_stats is None:
            raise TraceError("this OSM trace has no tangent updates")
        return tuple(int(n) for n in self.tangent_stats.shape[1:])  # type: ignore[return-value]

    def tangent_norms(self, mixed: bool = True) -> np.ndarray:
        """``[layer, substep, position]`` exact Frobenius norms of the updates (radians); ``mixed=False`` for
        the updates before mixing. Raises ``TraceError`` without tangents."""
        if self.tangent_stats is None:
            raise TraceError("this OSM trace has no tangent updates")
        return self.tangent_stats[1 if mixed else 0].astype(np.float64)

    def tangent_inner(self) -> np.ndarray:
        """``[layer, substep, position]`` exact ``Re tr(raw^* mixed)`` (radians²)."""
        if self.tangent_stats is None:
            raise TraceError("this OSM trace has no tangent updates")
        return self.tangent_stats[2].astype(np.float64)

    def tangent_at(self, layer: int, substep: int, position: int, mixed: bool = True) -> np.ndarray:
        """The ``d x d`` update at one position (before mixing with ``mixed=False``). Raises ``TraceError``."""
        L, S, T = self.tangent_shape
        layer, substep = _check_index("layer", layer, L), _check_index("substep", substep, S)
        position = _check_index("position", position, T)
        which = 1 if mixed else 0
        if self.tangent_matrices is not None:
            return self.tangent_matrices[which, layer, substep, position]
        c = torch.as_tensor(self.tangent_coords[which, layer, substep, position].astype(np.float32))
        return self.get_group().from_coords(c).numpy()

    def get_group(self):
        """The :class:`geomlab.geometry.groups.MatrixGroup` the states live on (needs ``geomlab.geometry.groups``)."""
        from geomlab.geometry import groups

        name = self.group.get("name")
        if not name:
            raise TraceError("this OSM trace does not name its group")
        return groups.get_group(name, int(self.group.get("d", self.d)), **dict(self.group.get("options", {})))
