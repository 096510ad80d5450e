"""Typed traces: one model run on one text, recorded for the views (issue 7; design choice).

A *trace* holds everything :mod:`geomlab.figures` needs to draw a model run, as numpy arrays with named
axes, so figures are pure functions of a trace and a saved trace reproduces a view exactly.

Entry points
------------
* :func:`encode_text` ``(vocab, text) -> LongTensor (1, T)``; texts longer than :data:`MAX_TEXT_CHARS`
  (2,048 characters) or empty raise :class:`TraceError` (a ``ValueError``).
* :func:`trace` ``(model, tokens, vocab=None, text=None) -> Trace``: runs ``model.record(tokens)`` under
  ``torch.no_grad`` in eval mode and wraps the record dict (``docs/architecture.md``) in the dataclass of
  the model's family: :class:`OSMTrace`, :class:`CEMTrace`, :class:`GrassmannTrace` or
  :class:`BaselineTrace`. Record keys the dataclass does not know are kept in ``extras``.
* :func:`trace_text` ``(model, vocab, text)``: both of the above in one call.
* :func:`trace_cem_steps` ``(model, tokens, steps)``: re-run a CEM model with another inference-time number
  of recursion steps T (test-time recursion; the app's T slider).
* :func:`save_trace` / :func:`load_trace`: one ``.npz`` file of plain arrays plus a JSON metadata string
  (key ``__meta__``); loading uses ``np.load(allow_pickle=False)``, so a trace file cannot run code.

Axis names used in the field docs: ``layer``, ``position`` (token index t = 0..T-1), ``substep`` (OSM:
0 = attention, 1 = grounding), ``block`` (CEM: 0 = attention, 1 = MLP), ``step`` (CEM recursion step
t = 0..T), ``head``, ``offset`` (Grassmann offset slot), ``vocab``, ``d``/``rank``/``d_model`` (features).
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np
import torch

FORMAT_VERSION = 2
"""Version of the trace file format. 2 (this one): compact traces (attention stored as the queries and
keys that score it, OSM tangents as float16 Lie-algebra coordinates plus exact float32 norms, torus states
as their diagonals, Grassmann Plücker vectors recomputed from the reduced vectors). Version-1 files (dense
``T x T`` maps) still load."""
MAX_TEXT_CHARS = 2048
"""Longest text :func:`encode_text` accepts (characters). Design choice: keeps a trace (at most 16 MB at
this length, ``python -m geomlab.bench figures --sizes``) small enough for an interactive page."""


# Serialises model runs in this module: trace() switches the model to eval mode and trace_cem_steps()
# changes its config for one run; the app may trace one cached model from several threads.
_MODEL_LOCK = threading.RLock()


class TraceError(ValueError):
    """Bad input to the trace layer (empty/too long text, wrong token shape, unreadable trace file)."""


class LazyArray:
    """A read-only array computed block by block on demand (design choice: keeps ``T x T`` maps and other
    derived arrays out of memory until a view asks for the part it draws).

    ``shape``/``dtype``/``ndim`` as for numpy; ``block(*lead)`` returns the sub-array for the first
    ``len(shape) - block_ndim`` indices (each an int). Indexing with leading ints computes just those blocks;
    any other index, or ``np.asarray(lazy)``, materialises the whole array (fine for short traces).
    """

    def __init__(self, shape: tuple[int, ...], dtype, block, block_ndim: int):
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.ndim = len(self.shape)
        self._block = block
        self._lead = self.ndim - int(block_ndim)

    def __len__(self) -> int:
        return self.shape[0]

    def _norm(self, i, axis: int) -> int:
        n = self.shape[axis]
        if not -n <= int(i) < n:
            raise IndexError(f"index {i} out of range for axis {axis} of size {n}")
        return int(i) % n

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        lead = []
        for k in key[: self._lead]:
            if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                lead.append(k)
            else:
                break
        if not lead:
            return np.asarray(self)[key]
        idx = tuple(self._norm(k, a) for a, k in enumerate(lead))
        if len(idx) == self._lead:
            out = np.asarray(self._block(*idx))
        else:  # fewer leading ints than block axes: stack the remaining leading axes
            rest_shape = self.shape[len(idx):self._lead]
            out = np.stack([np.asarray(self._block(*idx, *more)) for more in np.ndindex(*rest_shape)])
            out = out.reshape(*rest_shape, *out.shape[1:])
        rest = key[len(lead):]
        return out[rest] if rest else out

    def __array__(self, dtype=None, copy=None):
        out = np.empty(self.shape, dtype=self.dtype)
        for lead in np.ndindex(*self.shape[: self._lead]):
            out[lead] = self._block(*lead)
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype) -> np.ndarray:
        """The whole array, materialised, as ``dtype``."""
        return np.asarray(self).astype(dtype)

    def mean(self, axis=None):
        return np.asarray(self).mean(axis=axis)

    def sum(self, axis=None):
        return np.asarray(self).sum(axis=axis)


class _Count(int):
    """An int that can also be called (``tr.n_heads`` and the older ``tr.n_heads()`` both work)."""

    def __call__(self) -> int:
        return int(self)


def causal_softmax_rows(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Softmax over keys ``j <= i`` of score rows ``scores`` ``[len(rows), T]`` (query ``i = rows[r]``),
    float64; entries ``j > i`` are 0. Source: causal attention (every family)."""
    T = scores.shape[-1]
    masked = np.where(np.arange(T)[None, :] > rows[:, None], -np.inf, scores)
    with np.errstate(invalid="ignore"):  # a row with a NaN score is NaN throughout (the views leave it blank)
        masked = masked - masked.max(axis=-1, keepdims=True)
        e = np.exp(masked)
        return e / e.sum(axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------------------
# dataclasses


@dataclass
class Trace:
    """Fields common to every trace.

    Attributes:
        kind: the registered model kind (e.g. ``"osmformer"``).
        tokens: ``[position]`` int64 token ids.
        labels: ``[position]`` printable token strings for hover text (space shown as ``␣``, newline as
            ``↵``, tab as ``⇥``; ``"#t"`` when no vocabulary was given).
        logits: ``[position, vocab]`` float32, ``logits[t]`` predicts token ``t + 1`` (nats, unnormalised).
        config: the model's full config dict (JSON-serialisable).
        text: the traced text ("" if unknown).
        extras: record keys the family dataclass does not name, as arrays (kept on save/load).
        attention_q, attention_k: ``[layer, head, position, e]`` float32 queries and keys whose dot products
            are the attention scores (any scale folded into the queries), or ``None``.
        attention_q_shared, attention_k_shared: ``[layer, position, s]``: a score part added to every head
            (CEM's shared diagonal), or ``None``.
        attention_slopes: ``[layer, head]`` ALiBi slopes (score bias ``-m (i - j)``) or ``None``.
        attention_dense: ``[layer, head, position, position]`` weights of an older (version-1) trace or a
            hand-made record, or ``None``.

    The attention weights themselves are computed on demand (:meth:`attention_rows`, :attr:`attention`):
    no ``T x T`` array is kept (issue 14).
    """

    kind: str
    tokens: np.ndarray
    labels: list[str]
    logits: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    attention_q: np.ndarray | None = None
    attention_k: np.ndarray | None = None
    attention_q_shared: np.ndarray | None = None
    attention_k_shared: np.ndarray | None = None
    attention_slopes: np.ndarray | None = None
    attention_dense: np.ndarray | None = None

    family: ClassVar[str] = "baseline"
    # record keys that are required / optional for this family (besides "logits" and the attention keys)
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    ATTENTION: ClassVar[tuple[str, ...]] = (
        "attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
        "attention_dense")

    # ------------------------------------------------------------------ shape facts
    @property
    def n_positions(self) -> int:
        """Number of positions T."""
        return int(self.tokens.shape[0])

    @property
    def n_layers(self) -> int:
        """Number of layers the views can show (1 for a model without a layer axis)."""
        for a in (self.attention_q, self.attention_dense):
            if a is not None:
                return int(a.shape[0])
        return 1

    @property
    def n_heads(self) -> _Count:
        """Number of attention heads (0 without attention). Also callable: ``tr.n_heads()``."""
        for a in (self.attention_q, self.attention_dense):
            if a is not None:
                return _Count(a.shape[1])
        return _Count(0)

    @property
    def has_attention(self) -> bool:
        """Whether this trace can show attention weights."""
        return self.n_heads > 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the trace's stored arrays (what a cache should count; derived views excluded)."""
        total = int(self.tokens.nbytes) + sum(len(s) for s in self.labels) + len(self.text)
        for value in self.stored_arrays().values():
            total += int(value.nbytes)
        return total

    def stored_arrays(self) -> dict[str, np.ndarray]:
        """The arrays this trace stores, by field name (what :func:`save_trace` writes, besides tokens and
        extras)."""
        out = {}
        for name in ("logits", *self.REQUIRED, *self.OPTIONAL, *self.ATTENTION):
            value = self.__dict__.get(name)
            if isinstance(value, np.ndarray):
                out[name] = value
        for name, value in self.extras.items():
            out[f"extra.{name}"] = value
        return out

    def array_fields(self) -> dict[str, np.ndarray]:
        """The family's stored named arrays that are present (``None`` ones left out); extras excluded."""
        return {k: v for k, v in self.stored_arrays().items() if not k.startswith("extra.")}

    def log_probs(self) -> np.ndarray:
        """``[position, vocab]`` log-softmax of the logits (nats)."""
        z = self.logits.astype(np.float64)
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    # ------------------------------------------------------------------ attention on demand
    def _qk(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """``(q, k)`` ``[position, e]`` float64 of one head (scores ``q_i·k_j`` before bias)."""
        q = self.attention_q[layer, head].astype(np.float64)
        k = self.attention_k[layer, head].astype(np.float64)
        if self.attention_q_shared is not None:
            q = np.concatenate([q, self.attention_q_shared[layer].astype(np.float64)], axis=-1)
            k = np.concatenate([k, self.attention_k_shared[layer].astype(np.float64)], axis=-1)
        return q, k

    def attention_scores(self, layer: int, head: int, rows) -> np.ndarray:
        """``[len(rows), position]`` float64 attention logits of queries ``rows`` on every key (bias
        included, future keys not masked). Raises ``TraceError`` without q/k storage or for bad indices."""
        if self.attention_q is None and not self._scores_from_states():
            raise TraceError(f"{self.kind!r} stores no attention queries and keys")
        layer = _check_index("layer", layer, self.n_layers)
        head = _check_index("head", head, self.n_heads)
        rows = self._rows(rows)
        q, k = self._qk(layer, head)
        with np.errstate(invalid="ignore", over="ignore"):  # a NaN state gives NaN scores, said by the views
            s = q[rows] @ k.T
        if self.attention_slopes is not None:
            rel = rows[:, None] - np.arange(self.n_positions)[None, :]
            s = s - float(self.attention_slopes[layer, head]) * rel
        return s

    def _scores_from_states(self) -> bool:
        """Whether :meth:`_qk` derives queries and keys from other stored arrays (OSM: the states)."""
        return False

    def _rows(self, rows) -> np.ndarray:
        T = self.n_positions
        rows = np.arange(T) if rows is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size and (rows.min() < -T or rows.max() >= T):
            raise TraceError(f"rows out of range: this trace has {T} positions")
        return rows % T

    def attention_rows(self, layer: int, rows=None, head: int | None = None) -> np.ndarray:
        """Attention weights ``[len(rows), position]`` (float64) of query positions ``rows`` (default all)
        on every key, averaged over heads when ``head`` is None; 0 where ``j > i``. Each row sums to 1.

        Computed on demand from the stored queries and keys (cost ``O(len(rows) * T * e)`` per head), so a
        view that draws a window or a subsample of a long trace never forms the ``T x T`` matrix.
        Raises ``TraceError`` for a trace without attention or a layer/head/row out of range.
        Source: softmax attention; design choice (issue 14).
        """
        if not self.has_attention:
            raise TraceError(f"{self.kind!r} has no attention")
        layer = _check_index("layer", layer, self.n_layers)
        heads = range(self.n_heads) if head is None else [_check_index("head", head, self.n_heads)]
        rows = self._rows(rows)
        if self.attention_dense is not None:
            w = self.attention_dense[layer][list(heads)][:, rows].astype(np.float64)
            return w.mean(axis=0)
        out = np.zeros((rows.size, self.n_positions))
        for h in heads:
            out += causal_softmax_rows(self.attention_scores(layer, h, rows), rows)
        return out / len(heads)

    @property
    def attention(self) -> LazyArray | None:
        """``[layer, head, position, position]`` attention weights as a :class:`LazyArray` (computed per
        ``[layer, head]`` block when indexed), or ``None`` without attention."""
        if not self.has_attention:
            return None
        T = self.n_positions
        return LazyArray((self.n_layers, self.n_heads, T, T), np.float64,
                         lambda l, h: self.attention_rows(l, None, h), 2)

    def attention_weights(self, layer: int, head: int | None = None) -> np.ndarray | None:
        """``[position, position]`` attention weights of ``layer`` (row i = query, column j = key), averaged
        over heads when ``head`` is None; ``None`` if this model has no attention. Forms the whole ``T x T``
        matrix: views of long traces use :meth:`attention_rows`. Raises ``TraceError`` for a layer/head out
        of range."""
        if not self.has_attention:
            return None
        return self.attention_rows(layer, None, head)


@dataclass
class BaselineTrace(Trace):
    """Trace of a baseline (``lstm``, ``transformer``, ``llama``, ``grassmann-attn``, or any other kind);
    only the common fields (attention through ``attention_q``/``attention_k``)."""

    family: ClassVar[str] = "baseline"


@dataclass
class OSMTrace(Trace):
    """Trace of an orthogonal state model (``osm-rnn``, ``osmformer``); source: osm.md §2.

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
            ``geomlab.groups.get_group(name, d, **options)``.

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
    def n_heads(self) -> _Count:
        """Attention heads (0 for the OSM-RNN)."""
        if self.attention_scale is not None:
            return _Count(int(self.config.get("heads", 1) or 1))
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
        trace has no similarity (OSM-RNN) or an index is out of range. Source: osm.md §2.5."""
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
        """The :class:`geomlab.groups.MatrixGroup` the states live on (needs ``geomlab.groups``)."""
        from geomlab import groups

        name = self.group.get("name")
        if not name:
            raise TraceError("this OSM trace does not name its group")
        return groups.get_group(name, int(self.group.get("d", self.d)), **dict(self.group.get("options", {})))


@dataclass
class CEMTrace(Trace):
    """Trace of a causal-energy-minimisation Transformer (``cem``); source: cem.md §2.3-§2.4.

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

    @property
    def n_layers(self) -> int:
        """Number of CEM layers."""
        return int(self.energies.shape[0])

    @property
    def recursion_steps(self) -> int:
        """Number of recursion steps T (the step axis has T + 1 entries)."""
        return int(self.energies.shape[2]) - 1

    def energy_mean(self) -> np.ndarray:
        """``[layer, block, step]`` token-mean energy (cem.md §2.4)."""
        return self.energies.mean(axis=-1)

    def energy_change(self) -> np.ndarray:
        """``[layer, block, step, position]`` per-token change ``eps(x^t) - eps(x^0)`` (cem.md §2.4)."""
        return self.energies - self.energies[:, :, :1, :]


@dataclass
class GrassmannTrace(Trace):
    """Trace of a Causal Grassmann model (``grassmann``); source: grassmann.md §5.

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
        with ``p_ij = a_i b_j - a_j b_i``, ``i < j``, computed in float64. Source: grassmann.md §1.3-1.4."""
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


FAMILIES: dict[str, type[Trace]] = {
    "osm": OSMTrace, "cem": CEMTrace, "grassmann": GrassmannTrace, "baseline": BaselineTrace,
}


def family_of(record_keys) -> str:
    """The trace family for a record dict with these keys: ``osm`` (has ``states`` or ``state_data``),
    ``cem`` (has ``energies``), ``grassmann`` (has ``reduced`` and Plücker data or offsets), else ``baseline``.
    Design choice: keyed on content, so a new kind that records the family's keys gets its views."""
    keys = set(record_keys)
    if "states" in keys or "state_data" in keys:
        return "osm"
    if "energies" in keys:
        return "cem"
    if "reduced" in keys and keys & {"plucker", "plucker_data", "offsets"}:
        return "grassmann"
    return "baseline"


# --------------------------------------------------------------------------------------------------
# text and tokens

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible(ch: str) -> str:
    """A printable version of one token string for hover text and tick labels (whitespace made visible)."""
    return "".join(_VISIBLE.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in ch)


def encode_text(vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> torch.Tensor:
    """Encode ``text`` with the checkpoint's vocabulary.

    Args:
        vocab: a ``geomlab.data.Vocab`` (anything with ``encode(str) -> Sequence[int] | Tensor``).
        text: the text to trace (characters outside the vocabulary map to its unknown token); normalised
            first with ``geomlab.data.vocab.normalize_text`` (byte-order mark dropped, ``\r\n``/``\r`` as
            ``\n``), as every text entering geomlab is.
        max_chars: longest accepted text, default :data:`MAX_TEXT_CHARS` (2,048).

    Returns:
        ``LongTensor`` of shape ``(1, T)`` with ``T = len(text)`` for a character vocabulary.

    Raises:
        TraceError: ``text`` is not a string, is empty, or is longer than ``max_chars``.
    """
    if not isinstance(text, str):
        raise TraceError(f"text must be a string, got {type(text).__name__}")
    from geomlab.data.vocab import normalize_text

    text = normalize_text(text)  # the one normalisation of every text (BOM dropped, \r\n and \r as \n)
    if not text:
        raise TraceError("text is empty: type at least one character to trace")
    if len(text) > max_chars:
        raise TraceError(
            f"text has {len(text):,} characters; traces are limited to {max_chars:,} "
            f"(shorten the text or trace it in pieces)"
        )
    ids = vocab.encode(text)
    ids = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    if ids.shape[1] == 0:
        raise TraceError("the text encodes to no tokens")
    return ids


def _labels(vocab, tokens: np.ndarray, text: str | None) -> list[str]:
    if text is not None and len(text) == len(tokens):
        return [visible(c) for c in text]
    if vocab is not None:
        out = []
        for t in tokens.tolist():
            try:
                s = vocab.decode([t])
            except Exception:  # an id the vocabulary cannot decode: show the id
                s = f"#{t}"
            out.append(visible(s) if s else f"#{t}")
        return out
    return [f"#{t}" for t in tokens.tolist()]


# --------------------------------------------------------------------------------------------------
# running a model


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16 or value.dtype == torch.float16:
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def _group_info(model) -> dict[str, Any]:
    group = getattr(model, "group", None)
    if group is None:
        return {}
    spec = dict(getattr(group, "spec", None) or {})
    name = str(spec.pop("name", getattr(group, "name", "")))
    d = int(spec.pop("d", getattr(group, "d", 0)))
    options = {k: v for k, v in spec.items() if isinstance(v, (int, float, str, bool))}
    return {"name": name, "d": d, "options": options}


_POSITION_AXES: dict[str, tuple[int, ...]] = {
    "logits": (0,), "attention_q": (2,), "attention_k": (2,), "attention_q_shared": (1,),
    "attention_k_shared": (1,), "attention_dense": (2, 3), "state_data": (1,), "input_data": (0,),
    "tangent_coords": (3,), "tangent_matrices": (3,), "tangent_stats": (3,), "similarity_dense": (1, 2),
    "energies": (3,), "displacement": (3,), "reduced": (1,), "plucker_data": (2,), "plucker_mask": (2,),
    "gates": (1,), "inputs": (1,), "extra.plucker_norm": (2,), "extra.plucker_mean": (1,),
}
"""Which axes of each stored array are positions (for windowed exports)."""


def _f32(a: np.ndarray) -> np.ndarray:
    """float64 -> float32, complex128 -> complex64; other dtypes unchanged."""
    if a.dtype == np.float64:
        return a.astype(np.float32)
    if a.dtype == np.complex128:
        return a.astype(np.complex64)
    return a


def _offdiag_zero(a: np.ndarray | None) -> bool:
    if a is None or a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        return False
    d = a.shape[-1]
    return not np.any(a * (1 - np.eye(d, dtype=bool)))


def _compact_osm(arrays: dict[str, np.ndarray], group: dict | None) -> dict[str, Any]:
    """OSM record/version-1 arrays -> the compact fields of :class:`OSMTrace` (design choice, issue 14)."""
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
            from geomlab import groups

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
    return named


def _compact_grassmann(arrays: dict[str, np.ndarray], config: dict, tok: np.ndarray) -> dict[str, Any]:
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
        probe = GrassmannTrace(kind="", tokens=tok, labels=[""] * len(tok), logits=np.zeros((len(tok), 1)),
                               config=config, **named)
        same = named.get("offsets") is not None and probe.n_slots == plucker.shape[1] and all(
            np.allclose(probe.plucker_block(l, s_), plucker[l, s_], atol=1e-4)
            for l in range(plucker.shape[0]) for s_ in range(plucker.shape[1]))
        if not same:  # not recomputable from the reduced vectors (hand-made record): keep it
            named["plucker_data"] = _f32(plucker)
    return named


def dense_attention(record: dict[str, Any], group: dict | None = None, heads: int | None = None) -> np.ndarray:
    """``[layer, head, position, position]`` float64 attention weights of a ``model.record`` dict (any
    family: queries/keys, or OSM states and scale with ``heads`` heads), formed in full: for tests and short
    sequences only.
    Raises ``TraceError`` when the record has no attention."""
    keys = ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
            "attention_scale", "states", "inputs", "attention", "attention_heads")
    rec = {k: record[k] for k in keys if k in record}
    ref = rec.get("attention_q", rec.get("states", rec.get("attention")))
    if ref is None:
        raise TraceError("the record has no attention")
    T = int(ref.shape[-2] if "attention_q" in rec else ref.shape[1] if "states" in rec else ref.shape[-1])
    rec["logits"] = np.zeros((T, 1), dtype=np.float32)
    if heads is None:
        heads = int(rec["attention_slopes"].shape[-1]) if "attention_slopes" in rec else 1
    tr = from_record(rec, "", np.zeros(T, dtype=np.int64), config={"heads": heads}, group=group)
    if tr.attention is None:
        raise TraceError("the record has no attention")
    return np.asarray(tr.attention)


def from_record(record: dict[str, Any], kind: str, tokens, labels: list[str] | None = None,
                config: dict[str, Any] | None = None, text: str = "", group: dict | None = None) -> Trace:
    """Wrap a record dict (``model.record`` output, contract in ``docs/architecture.md``) in its compact
    dataclass; also reads the arrays of a version-1 trace file and hand-made records with dense ``T x T``
    ``attention`` / ``similarity`` maps.

    Compaction (design choice, issue 14): attention stays as queries and keys (or, for OSM, the states
    and a scale), float64 arrays become float32, OSM tangents become float16 Lie-algebra coordinates plus
    exact float32 norms and inner products, torus states their diagonals, Grassmann Plücker vectors are
    recomputed from the reduced vectors on demand (kept when they cannot be), ``plucker_mean`` is dropped.

    Args:
        record: ``dict[str, Tensor | ndarray]`` with at least ``"logits"`` ``(T, V)``.
        kind: model kind; tokens: ``[T]`` or ``(1, T)`` ids; labels: per-position strings (default ``#id``);
        config: model config; text: the traced text; group: OSM group info (see :class:`OSMTrace`).

    Raises:
        TraceError: ``logits`` missing, or a family's required key is missing, or the position axis of
        ``logits`` does not match ``tokens``.
    """
    if "logits" not in record:
        raise TraceError(f"the record of {kind!r} has no 'logits'")
    tok = _to_numpy(tokens).astype(np.int64).reshape(-1)
    arrays = {k: _to_numpy(v) for k, v in record.items()}
    if arrays["logits"].ndim != 2 or arrays["logits"].shape[0] != tok.shape[0]:
        raise TraceError(
            f"logits have shape {arrays['logits'].shape}, expected ({tok.shape[0]}, vocab)"
        )
    family = family_of(arrays)
    cls = FAMILIES[family]
    config = dict(config or {})
    named: dict[str, Any] = {"logits": _f32(arrays.pop("logits"))}
    for key in ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
                "attention_dense"):
        if key in arrays:
            named[key] = _f32(arrays.pop(key))
    if ("attention_q" in named) != ("attention_k" in named):
        raise TraceError(f"the record of {kind!r} has only one of attention_q / attention_k")
    if cls is OSMTrace:
        named.update(_compact_osm(arrays, group))
    elif cls is GrassmannTrace:
        named.update(_compact_grassmann(arrays, config, tok))
    else:
        if family == "cem":
            if "energies" not in arrays:
                raise TraceError(f"the record of {kind!r} lacks ['energies'] for a cem trace")
            named["energies"] = arrays.pop("energies")
            if "displacement" in arrays:
                named["displacement"] = arrays.pop("displacement")
        attention = arrays.pop("attention", None)
        if attention is not None:
            named["attention_dense"] = _f32(attention if attention.ndim == 4 else attention[:, None])
    missing = [k for k in cls.REQUIRED if named.get(k) is None]
    if missing:
        raise TraceError(f"the record of {kind!r} lacks {missing} for a {cls.family} trace")
    kwargs: dict[str, Any] = dict(
        kind=kind, tokens=tok, labels=list(labels) if labels is not None else [f"#{t}" for t in tok.tolist()],
        config=config, text=text, extras=arrays, **named,
    )
    if cls is OSMTrace:
        kwargs["group"] = dict(group or {})
    tr = cls(**kwargs)
    if len(tr.labels) != tr.n_positions:
        raise TraceError(f"{len(tr.labels)} labels for {tr.n_positions} positions")
    return tr


def trace(model, tokens, vocab=None, text: str | None = None, max_positions: int = MAX_TEXT_CHARS) -> Trace:
    """Run ``model`` on one sequence and return its typed trace.

    Args:
        model: a registered :class:`geomlab.models.SequenceModel` (any kind).
        tokens: ``LongTensor`` of shape ``(1, T)`` (a ``[T]`` vector is accepted too).
        vocab: optional vocabulary used for hover labels (``decode``).
        text: optional text the tokens came from (labels taken from it when it has length T).
        max_positions: longest accepted T (default :data:`MAX_TEXT_CHARS`).

    Returns:
        the family dataclass (:class:`OSMTrace`, :class:`CEMTrace`, :class:`GrassmannTrace` or
        :class:`BaselineTrace`), arrays on CPU as numpy.

    Raises:
        TraceError: wrong token shape, ``T == 0`` or ``T > max_positions``, or a record missing keys.

    The model is put in eval mode for the run and its previous mode restored (design choice: dropout off,
    so a trace is reproducible).
    """
    tokens = torch.as_tensor(tokens)
    if tokens.dim() == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 2 or tokens.shape[0] != 1:
        raise TraceError(f"trace expects tokens of shape (1, T), got {tuple(tokens.shape)}")
    T = int(tokens.shape[1])
    if T == 0:
        raise TraceError("nothing to trace: the token sequence is empty")
    if T > max_positions:
        raise TraceError(f"{T:,} positions; traces are limited to {max_positions:,}")
    tokens = tokens.long()
    config = dict(getattr(model, "config", {}) or {})
    max_len = config.get("max_len")
    if isinstance(max_len, int) and config.get("positions", "learned") == "learned" and T > max_len:
        raise TraceError(f"this model reads at most {max_len:,} positions (learned position table); "
                         f"the text has {T:,}")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    with _MODEL_LOCK:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                record = model.record(tokens.to(device))
        finally:
            model.train(was_training)
    tok = tokens[0].cpu().numpy()
    kind = str(config.get("kind", getattr(model, "kind", "")))
    return from_record(record, kind, tok, labels=_labels(vocab, tok, text), config=config,
                       text=text or "", group=_group_info(model))


def trace_text(model, vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> Trace:
    """``trace(model, encode_text(vocab, text), vocab, text)``: trace a text in one call.
    Raises :class:`TraceError` for an empty or too long text."""
    from geomlab.data.vocab import normalize_text

    text = normalize_text(text) if isinstance(text, str) else text
    tokens = encode_text(vocab, text, max_chars=max_chars)
    return trace(model, tokens, vocab=vocab, text=text, max_positions=max_chars)


def trace_cem_steps(model, tokens, steps: int, vocab=None, text: str | None = None) -> CEMTrace:
    """Trace a CEM model with ``steps`` recursion steps at inference (test-time recursion, cem.md §2.3).

    Temporarily sets the model's ``inference_recursion_steps`` (config key of issue 5; the model's
    ``set_inference_steps`` method is used when it has one) and restores it afterwards; parameters are
    untouched. ``steps`` may exceed the training ``recursion_steps``. Model runs in this module hold one
    lock, so a concurrent :func:`trace` of the same model never sees the temporary setting.

    Raises:
        TraceError: the model is not a CEM model, or ``steps`` is not an integer in 1..64.
    """
    config = getattr(model, "config", {}) or {}
    if "inference_recursion_steps" not in config and "recursion_steps" not in config:
        raise TraceError(f"{config.get('kind', type(model).__name__)!r} has no recursion steps to change")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= int(steps) <= 64:
        raise TraceError(f"steps must be an integer in 1..64, got {steps!r}")
    steps = int(steps)
    with _MODEL_LOCK:
        return _trace_cem_steps_locked(model, tokens, steps, config, vocab, text)


def _trace_cem_steps_locked(model, tokens, steps: int, config: dict, vocab, text) -> CEMTrace:
    setter = getattr(model, "set_inference_steps", None)
    old_cfg = config.get("inference_recursion_steps")
    had_attr = hasattr(model, "inference_recursion_steps")
    old_attr = getattr(model, "inference_recursion_steps", None)
    if callable(setter):
        previous = setter(steps)
    else:
        config["inference_recursion_steps"] = steps
        if had_attr:
            model.inference_recursion_steps = steps
    try:
        tr = trace(model, tokens, vocab=vocab, text=text)
    finally:
        if callable(setter):
            setter(previous if previous is not None else old_cfg)
        else:
            config["inference_recursion_steps"] = old_cfg
            if had_attr:
                model.inference_recursion_steps = old_attr
    if not isinstance(tr, CEMTrace):
        raise TraceError(f"{tr.kind!r} does not record energies (not a CEM model)")
    return tr


# --------------------------------------------------------------------------------------------------
# file format


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    return str(obj)


def save_trace(tr: Trace, path: str | Path | BinaryIO, compress: bool = True) -> None:
    """Write ``tr`` as one ``.npz`` file (zip-compressed unless ``compress=False``) of plain numeric/bool
    arrays (the trace's stored fields, ``extra.*`` for extras) plus ``__meta__``, a JSON string with
    ``format_version`` (:data:`FORMAT_VERSION`), ``family``, ``kind``, ``labels``, ``config``, ``text``,
    ``group``. No pickles. ``path`` may be a file path or a binary file object (e.g. ``io.BytesIO``).

    Raises:
        TraceError: an array has object dtype (cannot be stored without pickling).
    """
    arrays: dict[str, np.ndarray] = {"tokens": np.asarray(tr.tokens, dtype=np.int64)}
    for name, value in tr.stored_arrays().items():
        arrays[name] = np.asarray(value)
    for name, value in arrays.items():
        if value.dtype == object:
            raise TraceError(f"array {name!r} has object dtype and cannot be saved without pickles")
    meta = {
        "format_version": FORMAT_VERSION, "family": tr.family, "kind": tr.kind, "labels": list(tr.labels),
        "config": tr.config, "text": tr.text, "group": getattr(tr, "group", None),
    }
    arrays["__meta__"] = np.array(json.dumps(meta, default=_json_default))
    writer = np.savez_compressed if compress else np.savez
    if isinstance(path, (str, Path)):
        with open(path, "wb") as fh:
            writer(fh, **arrays)
    else:
        writer(path, **arrays)


def load_trace(path: str | Path | BinaryIO | bytes) -> Trace:
    """Read a trace written by :func:`save_trace` (``np.load(allow_pickle=False)``), this version or
    version 1 (dense ``T x T`` maps; compacted on load).

    ``path`` may be a path, a binary file object or the file's bytes.

    Raises:
        TraceError: not a trace file, a format version this geomlab does not know (newer or malformed), an
        unknown family, missing arrays, or inconsistent position counts. ``FileNotFoundError`` for a missing
        path.
    """
    if isinstance(path, (bytes, bytearray)):
        path = io.BytesIO(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # not an npz, pickled, truncated
        raise TraceError(f"not a readable trace file: {exc}") from exc
    if "__meta__" not in data:
        raise TraceError("not a trace file: no '__meta__' entry")
    try:
        meta = json.loads(str(data.pop("__meta__")))
    except json.JSONDecodeError as exc:
        raise TraceError(f"trace metadata is not valid JSON: {exc}") from exc
    if not isinstance(meta, dict):
        raise TraceError("trace metadata is not a JSON object")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise TraceError(f"trace format version {version!r} is not one this geomlab reads (1..{FORMAT_VERSION}); "
                         "a newer file needs a newer geomlab")
    family = meta.get("family")
    if family not in FAMILIES:
        raise TraceError(f"unknown trace family {family!r}")
    if "tokens" not in data or "logits" not in data:
        raise TraceError("trace file lacks 'tokens' or 'logits'")
    cls = FAMILIES[family]
    extras = {k[len("extra."):]: data.pop(k) for k in list(data) if k.startswith("extra.")}
    tokens = data.pop("tokens")
    record = {k: v for k, v in data.items()}
    if family_of(record) != family:
        raise TraceError(f"trace file says family {family!r} but lacks its arrays {list(cls.REQUIRED)}")
    record.update({k: v for k, v in extras.items() if k not in record})
    labels = meta.get("labels")
    if not isinstance(labels, list) or len(labels) != len(tokens):
        raise TraceError("trace labels do not match the number of positions")
    try:
        return from_record(record, str(meta.get("kind", "")), tokens, labels=[str(x) for x in labels],
                           config=meta.get("config") or {}, text=str(meta.get("text", "")),
                           group=meta.get("group") or {})
    except (IndexError, KeyError, TypeError) as exc:  # arrays of inconsistent shapes
        raise TraceError(f"inconsistent trace file: {exc}") from exc


def trace_bytes(tr: Trace) -> bytes:
    """The compressed ``.npz`` file of :func:`save_trace` as bytes (for a download button)."""
    buf = io.BytesIO()
    save_trace(tr, buf)
    return buf.getvalue()


def _json_array(a: np.ndarray) -> Any:
    """Nested lists with 6 decimals; non-finite values as ``null`` (strict JSON); complex as
    ``{"real", "imag"}``."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        return {"real": _json_array(a.real), "imag": _json_array(a.imag)}
    if a.dtype.kind == "f":
        r = np.round(a.astype(np.float64), 6)
        obj = r.astype(object)
        obj[~np.isfinite(r)] = None
        return obj.tolist()
    return a.tolist()


def trace_json(tr: Trace, start: int = 0, stop: int | None = None, max_positions: int = 256) -> str:
    """The trace's positions ``start..stop-1`` (at most ``max_positions``) as one strict JSON document
    (``json.loads`` of any parser accepts it: non-finite numbers are ``null``): metadata, ``tokens``,
    ``labels`` and every stored array cut to that window along its position axes, plus, for models with
    attention, ``attention`` ``[layer, query, key]`` (head mean) and for OSMFormer ``similarity``
    ``[layer, query, key]`` over the window (weights exact: normalised over all earlier keys, not only those
    in the window). Design choice: a bounded download for tools that do not read ``.npz``.

    Raises ``TraceError`` for an empty or out-of-range window.
    """
    T = tr.n_positions
    stop = T if stop is None else int(stop)
    start = int(start)
    if not 0 <= start < stop <= T:
        raise TraceError(f"window {start}..{stop} is not inside 0..{T}")
    stop = min(stop, start + int(max_positions))
    win = np.arange(start, stop)
    arrays: dict[str, Any] = {}
    for name, value in tr.stored_arrays().items():
        if name in ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_dense",
                    "similarity_dense"):
            continue  # exported as weights / similarity below
        v = np.asarray(value)
        for axis in _POSITION_AXES.get(name, ()):
            if axis < v.ndim and v.shape[axis] == T:
                v = np.take(v, win, axis=axis)
        arrays[name] = _json_array(v)
    if tr.has_attention:
        arrays["attention"] = _json_array(np.stack([tr.attention_rows(l, win)[:, win] for l in range(tr.n_layers)]))
    if isinstance(tr, OSMTrace) and tr.has_similarity:
        arrays["similarity"] = _json_array(np.stack([tr.similarity_rows(l, win)[:, win]
                                                     for l in range(tr.n_layers)]))
    doc = {"format_version": FORMAT_VERSION, "kind": tr.kind, "family": tr.family, "text": tr.text,
           "window": [start, stop], "n_positions": T, "labels": list(tr.labels[start:stop]),
           "config": tr.config, "group": getattr(tr, "group", None),
           "tokens": np.asarray(tr.tokens[start:stop]).tolist(), "arrays": arrays}
    return json.dumps(doc, default=_json_default, allow_nan=False)


def _check_index(name: str, index: int, size: int) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -size <= int(index) < size:
        raise TraceError(f"{name} {index!r} out of range: this trace has {size}")
    return int(index) % size


# --------------------------------------------------------------------------------------------------
# scoring a trace's predictions


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


__all__ = [
    "MAX_TEXT_CHARS", "FORMAT_VERSION", "TraceError", "Trace", "BaselineTrace", "OSMTrace", "CEMTrace",
    "GrassmannTrace", "FAMILIES", "family_of", "visible", "encode_text", "from_record", "trace",
    "trace_text", "trace_cem_steps", "save_trace", "load_trace", "trace_bytes", "trace_json", "is_word_problem",
    "LazyArray", "dense_attention", "causal_softmax_rows",
    "PredictionScores", "score_predictions",
]
