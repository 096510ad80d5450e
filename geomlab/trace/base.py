"""The fields and verbs every trace shares: :class:`Trace` (tokens, labels, logits, config, attention computed on
demand from stored queries and keys), :class:`BaselineTrace`, :class:`LazyArray` for derived ``T x T`` arrays,
:class:`TraceError`. Design choice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


class TraceError(ValueError):
    """Bad input to the trace layer (empty/too long text, wrong token shape, unreadable trace file)."""


def _check_index(name: str, index: int, size: int) -> int:
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -size <= int(index) < size:
        raise TraceError(f"{name} {index!r} out of range: this trace has {size}")
    return int(index) % size


def _f32(a: np.ndarray) -> np.ndarray:
    """float64 -> float32, complex128 -> complex64; other dtypes unchanged."""
    if a.dtype == np.float64:
        return a.astype(np.float32)
    if a.dtype == np.complex128:
        return a.astype(np.complex64)
    return a


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


def causal_softmax_rows(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Softmax over keys ``j <= i`` of score rows ``scores`` ``[len(rows), T]`` (query ``i = rows[r]``),
    float64; entries ``j > i`` are 0. Source: causal attention (every family)."""
    T = scores.shape[-1]
    masked = np.where(np.arange(T)[None, :] > rows[:, None], -np.inf, scores)
    with np.errstate(invalid="ignore"):  # a row with a NaN score is NaN throughout (the views leave it blank)
        masked = masked - masked.max(axis=-1, keepdims=True)
        e = np.exp(masked)
        return e / e.sum(axis=-1, keepdims=True)


def cached(tr: Any, key: tuple, compute: Any) -> Any:
    """``compute()`` memoised on the trace object under ``key`` (``tr.__dict__["_view_cache"]``: not a field,
    so neither saved nor copied by :func:`dataclasses.replace`), so the figures, facts and notes of one trace
    share what they derive from it (eigenvalues, a PCA, an energy descent's overshoot). Design choice: traces
    are treated as immutable once built."""
    store = tr.__dict__.setdefault("_view_cache", {})
    if key not in store:
        store[key] = compute()
    return store[key]


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
        lens: the layer lens (:class:`geomlab.trace.lens.Lens`: top-k, next-token probability and rank per
            stage and position), or ``None`` (a kind without lens stages, an older trace file).

    The attention weights themselves are computed on demand (:meth:`attention_rows`, :attr:`attention`):
    no ``T x T`` array is kept.
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
    lens: Any = None

    family: ClassVar[str] = "baseline"
    # record keys that are required / optional for this family (besides "logits" and the attention keys)
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    ATTENTION: ClassVar[tuple[str, ...]] = (
        "attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
        "attention_dense")

    @classmethod
    def _compact(cls, arrays: dict[str, np.ndarray], kind: str, config: dict, tokens: np.ndarray,
                 group: dict | None) -> dict[str, Any]:
        """The family's fields from a record's arrays (logits and queries/keys already taken): each family
        pops what it stores from ``arrays`` (what is left becomes ``extras``) and returns it by field name,
        compacted (design choice). Here (baseline, and CEM after its energies): a dense
        ``attention`` map of a version-1 file or a hand-made record, ``[layer, (head,) position, position]``."""
        named: dict[str, Any] = {}
        attention = arrays.pop("attention", None)
        if attention is not None:
            named["attention_dense"] = _f32(attention if attention.ndim == 4 else attention[:, None])
        return named

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
    def n_heads(self) -> int:
        """Number of attention heads (0 without attention)."""
        for a in (self.attention_q, self.attention_dense):
            if a is not None:
                return int(a.shape[1])
        return 0

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
        return total + (int(self.lens.nbytes) if self.lens is not None else 0)

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
        view that draws a window of a long trace never forms the ``T x T`` matrix.
        Raises ``TraceError`` for a trace without attention or a layer/head/row out of range.
        Source: softmax attention; design choice.
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
