"""A thread-safe least-recently-used cache with a byte budget, shared by every session of the app server.

The app's traces, figures and loaded checkpoints go through one :class:`ByteLRU` (:func:`shared_cache`), so
memory is bounded by size rather than by a count of entries: a 2,048-character trace can be a thousand times
larger than a 20-character one. No streamlit here: the warm-up thread fills the same cache the pages read.

* **Budget** (design choice): 512 MB by default, a quarter of a 2 GB server (the Python process, torch and
  the page state need the rest); ``GEOMLAB_CACHE_MB`` overrides it (``0`` keeps nothing).
* **Size of a value** (:func:`size_of`): a trace's ``nbytes`` (or the bytes of its arrays), a figure's
  estimated JSON length (:func:`figure_nbytes`), a checkpoint's parameter bytes, numpy arrays' ``nbytes``,
  ``len`` of ``bytes``/``str``; tuples and lists sum their items; anything else counts 1 KiB.
* **Eviction**: least recently used first, until the entries fit the budget; a value larger than the whole
  budget is returned to its caller but not kept. The table is ``cachetools.LRUCache`` with each entry's
  size as its weight (``getsizeof``); this module adds the lock, the counters and the one computation per key.
* **Concurrency**: one lock guards the table; :meth:`ByteLRU.get_or_compute` holds a per-key lock while it
  computes, so N sessions asking for the same missing key compute it once and the other N - 1 wait for it.
* **Counters**: hits, misses, evictions, the bytes held (:meth:`ByteLRU.stats`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable

import cachetools
import numpy as np

log = logging.getLogger("geomlab.core.cache")

#: Default budget in MB (design choice: a quarter of a 2 GB server).
DEFAULT_BUDGET_MB = 512
#: Environment variable that sets the budget in MB (a number, ``0`` disables keeping values).
ENV_BUDGET = "GEOMLAB_CACHE_MB"
#: Bytes counted for a value :func:`size_of` does not know (design choice).
UNKNOWN_NBYTES = 1024

_MISSING = object()


def budget_from_env(default_mb: float = DEFAULT_BUDGET_MB) -> int:
    """The byte budget from ``GEOMLAB_CACHE_MB`` (megabytes, 10^6 bytes), else ``default_mb``.

    Raises ``ValueError`` with a readable message for a value that is not a non-negative number."""
    raw = os.environ.get(ENV_BUDGET, "").strip()
    if not raw:
        return int(default_mb * 1_000_000)
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"{ENV_BUDGET}={raw!r} is not a number of megabytes") from None
    if not mb >= 0:
        raise ValueError(f"{ENV_BUDGET}={raw!r} must be 0 or more megabytes")
    return int(mb * 1_000_000)


def _array_bytes(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if hasattr(value, "element_size") and hasattr(value, "nelement"):  # torch tensors
        return int(value.element_size() * value.nelement())
    return 0


def _nested_array_bytes(obj: Any, depth: int = 0) -> int:
    """Bytes of the arrays inside tuples, lists and dicts (other objects count 0)."""
    if depth > 8:
        return 0
    if isinstance(obj, dict):  # list(...) first: another thread may be adding to a memo dict
        return sum(_nested_array_bytes(v, depth + 1) for v in list(obj.values()))
    if isinstance(obj, (tuple, list)):
        return sum(_nested_array_bytes(v, depth + 1) for v in list(obj))
    return _array_bytes(obj)


def trace_nbytes(tr: Any) -> int:
    """Bytes of a trace: its stored arrays (``tr.nbytes``) plus the geometry the figures memoise on the trace
    object (``_view_cache``: eigenvalues, logarithms, PCA), which grows as figures are built (see
    :meth:`ByteLRU.remeasure`)."""
    memo = _nested_array_bytes(getattr(tr, "__dict__", {}).get("_view_cache") or {})
    return int(tr.nbytes) + memo


def _walk_nbytes(obj: Any, depth: int = 0) -> int:
    """Estimated JSON length of plain data: arrays as ~8 characters per number (the typed-array base64
    plotly writes is ~1.4 bytes per byte; text numbers are longer), strings by length."""
    if depth > 64:
        return 0
    if isinstance(obj, np.ndarray):
        return int(obj.size) * (8 if obj.dtype.kind in "fc" else 4) + 32
    if isinstance(obj, (str, bytes)):
        return len(obj) + 2
    if isinstance(obj, dict):
        return sum(len(str(k)) + 4 + _walk_nbytes(v, depth + 1) for k, v in obj.items()) + 2
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, (int, float)) for v in obj[:16]):
            return 8 * len(obj) + 2
        return sum(_walk_nbytes(v, depth + 1) + 1 for v in obj) + 2
    return 8


def figure_nbytes(fig: Any) -> int:
    """Cheap estimate of a Plotly figure's JSON length in bytes (design choice: walks the figure's own data,
    layout and frames without validating or copying them; within a factor ~2 of ``len(fig.to_json())``).
    Accepts a ``plotly.graph_objects.Figure`` or a plain ``{"data", "layout", "frames"}`` dict."""
    if isinstance(fig, dict):
        return _walk_nbytes(fig)
    data = getattr(fig, "_data", None)
    layout = getattr(fig, "_layout", None)
    frames = getattr(fig, "_frame_objs", None) or ()
    if data is None or layout is None:  # not a plotly figure we know: pay for the JSON once
        try:
            return len(fig.to_json())
        except Exception:  # noqa: BLE001 - unknown object
            return UNKNOWN_NBYTES
    total = _walk_nbytes(data) + _walk_nbytes(layout)
    for fr in frames:
        total += _walk_nbytes(getattr(fr, "_props", None) or fr.to_plotly_json())
    return total


def size_of(value: Any) -> int:
    """Bytes a cached value is charged (see the module docstring); never negative."""
    if value is None:
        return 0
    if isinstance(value, (bytes, bytearray, str)):
        return len(value)
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if hasattr(value, "array_fields"):  # a geomlab trace
        return trace_nbytes(value)
    if hasattr(value, "figure") and hasattr(value, "caption"):  # a geomlab.figures.Chart
        return figure_nbytes(value.figure) + len(value.caption or "")
    if hasattr(value, "to_plotly_json"):
        return figure_nbytes(value)
    model = getattr(value, "model", None)
    if model is not None and hasattr(model, "parameters"):  # a geomlab.checkpoints.io.Checkpoint
        return sum(_array_bytes(p) for p in model.parameters()) + UNKNOWN_NBYTES
    if isinstance(value, (tuple, list)):
        return sum(size_of(v) for v in value)
    return UNKNOWN_NBYTES


@dataclass(frozen=True)
class CacheStats:
    """A snapshot of a cache's counters: ``hits``/``misses`` of lookups, ``evictions`` (values dropped to
    fit the budget, including values too large to keep), ``entries`` and ``nbytes`` held, ``budget``."""

    hits: int
    misses: int
    evictions: int
    entries: int
    nbytes: int
    budget: int

    @property
    def hit_rate(self) -> float:
        """Hits / lookups (0 before the first lookup)."""
        n = self.hits + self.misses
        return self.hits / n if n else 0.0

    def line(self) -> str:
        """One line for a caption or a log: ``cache: 12 entries, 83.1 of 512 MB, hit rate 75% (9 hits,
        3 misses, 0 evictions)``."""
        return (f"cache: {self.entries} entries, {self.nbytes / 1e6:.1f} of {self.budget / 1e6:.0f} MB, "
                f"hit rate {self.hit_rate:.0%} ({self.hits} hits, {self.misses} misses, "
                f"{self.evictions} evictions)")


class _Table(cachetools.LRUCache):
    """``cachetools.LRUCache`` over ``(value, nbytes)`` entries, weighed by ``nbytes``, counting the entries
    it evicts to make room. Not thread-safe: :class:`ByteLRU` holds its lock around every call."""

    def __init__(self, budget: int):
        super().__init__(maxsize=budget, getsizeof=lambda item: item[1])
        self.evictions = 0

    def popitem(self):
        self.evictions += 1
        return super().popitem()

    def lru_keys(self) -> list[Hashable]:
        """Keys from least to most recently used (cachetools keeps this order; its mapping order is the
        order of insertion)."""
        return list(self._LRUCache__order)  # type: ignore[attr-defined]


class ByteLRU:
    """Least-recently-used cache bounded by the total size of its values (bytes), safe across threads.

    ``budget``: bytes (``None``: :func:`budget_from_env`); ``sizeof``: value -> bytes (default
    :func:`size_of`). Keys must be hashable. Values are shared, not copied: callers must not mutate them.
    """

    def __init__(self, budget: int | None = None, sizeof: Callable[[Any], int] = size_of,
                 name: str = "cache") -> None:
        self.budget = budget_from_env() if budget is None else int(budget)
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0 bytes, got {self.budget}")
        self.name = name
        self._sizeof = sizeof
        self._lock = threading.Lock()
        self._data = _Table(self.budget)
        self._hits = self._misses = 0
        self._oversized = 0  # values larger than the whole budget, returned but not kept
        self._key_locks: dict[Hashable, list] = {}  # key -> [lock, users]

    # ------------------------------------------------------------------ lookups
    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value under ``key`` (now the most recently used), else ``default``; counts a hit or a miss."""
        with self._lock:
            item = self._data.get(key, _MISSING)  # a hit is now the most recently used
            if item is _MISSING:
                self._misses += 1
                return default
            self._hits += 1
            return item[0]

    def peek(self, key: Hashable) -> bool:
        """Whether ``key`` is held (no counter or order change)."""
        with self._lock:
            return key in self._data

    __contains__ = peek

    def put(self, key: Hashable, value: Any, nbytes: int | None = None) -> bool:
        """Store ``value`` (size ``nbytes``, else measured), evicting least recently used entries until it
        fits. Returns False (and keeps nothing) when the value alone is larger than the budget."""
        size = int(self._sizeof(value) if nbytes is None else nbytes)
        if size < 0:
            raise ValueError(f"nbytes must be >= 0, got {size}")
        with self._lock:
            self._data.pop(key, None)
            if size > self.budget:
                self._oversized += 1
                log.info("%s: %r (%.1f MB) is larger than the budget (%.0f MB): returned, not kept",
                         self.name, _short(key), size / 1e6, self.budget / 1e6)
                return False
            self._data[key] = (value, size)  # evicts least recently used entries until it fits
            return True

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any], nbytes: int | None = None) -> Any:
        """The value under ``key``; on a miss ``compute()`` is called once (concurrent callers of the same
        key wait for it and then read the stored value) and its result stored. Exceptions of ``compute``
        propagate and nothing is stored (the next caller tries again)."""
        value = self.get(key, _MISSING)
        if value is not _MISSING:
            return value
        with self._lock:
            entry = self._key_locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                with self._lock:  # computed by another thread while we waited: a hit after all
                    item = self._data.get(key, _MISSING)
                    if item is not _MISSING:
                        self._hits += 1
                        self._misses -= 1  # the first lookup above was not a real miss
                        return item[0]
                t0 = time.perf_counter()
                value = compute()
                ms = 1000 * (time.perf_counter() - t0)
                self.put(key, value, nbytes)
                # figure misses are many and cheap (every cursor move): DEBUG; the rest (traces, checkpoints) INFO
                level = logging.DEBUG if isinstance(key, tuple) and key and key[0] == "fig" else logging.INFO
                log.log(level, "%s miss %s: computed in %.0f ms; %s", self.name, _short(key), ms,
                        self.stats().line())
                return value
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    self._key_locks.pop(key, None)

    def remeasure(self, key: Hashable) -> int | None:
        """Measure the value under ``key`` again (it grew, e.g. a trace that memoised geometry for its
        figures) and evict least recently used entries until the budget holds again (the value itself last;
        it is kept as the most recent). Returns its new size, None when the key is not held. No counter
        changes except evictions."""
        with self._lock:
            item = self._data.get(key, _MISSING)
        if item is _MISSING:
            return None
        try:
            size = int(self._sizeof(item[0]))
        except RuntimeError:  # the value changed while it was measured: keep the old size this time
            return None
        with self._lock:
            current = self._data.get(key, _MISSING)  # now the most recent: evicted last
            if current is _MISSING or current[0] is not item[0]:
                return None
            if size > self.budget:  # grown past the whole budget: everything goes, the value too
                self._data.evictions += len(self._data)
                self._data.clear()
                return size
            self._data[key] = (current[0], size)
            return size

    # ------------------------------------------------------------------ housekeeping
    def stats(self) -> CacheStats:
        """Current counters (see :class:`CacheStats`)."""
        with self._lock:
            return CacheStats(self._hits, self._misses, self._data.evictions + self._oversized, len(self._data),
                              int(self._data.currsize), self.budget)

    def keys(self) -> list[Hashable]:
        """Keys from least to most recently used."""
        with self._lock:
            return self._data.lru_keys()

    def clear(self) -> None:
        """Drop every value (counters are kept)."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    @property
    def nbytes(self) -> int:
        """Bytes held now (always <= :attr:`budget`)."""
        with self._lock:
            return int(self._data.currsize)


def _short(key: Any) -> str:
    text = repr(key)
    return text if len(text) <= 120 else text[:117] + "..."


_SHARED: ByteLRU | None = None
_SHARED_LOCK = threading.Lock()


def shared_cache() -> ByteLRU:
    """The process-wide cache of the app (created on first use with :func:`budget_from_env`; a bad
    ``GEOMLAB_CACHE_MB`` falls back to the default with a warning in the log)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            try:
                budget = budget_from_env()
            except ValueError as exc:
                log.warning("%s; using %d MB", exc, DEFAULT_BUDGET_MB)
                budget = DEFAULT_BUDGET_MB * 1_000_000
            _SHARED = ByteLRU(budget, name="geomlab cache")
        return _SHARED


class IdentityMemo:
    """Values derived from objects that are never changed once made (a figure of the shared cache), keyed by
    the object's identity (so unhashable objects such as Plotly figures work), for the ``max_objects`` objects
    used last and only while each lives. Thread-safe. Design choice: what many sessions derive from the same
    shared figure at once (a class following one page: a shorter copy, its JSON) is made once, not once per
    session and run; the bound (8: a page's charts) keeps sessions that each draw figures of their own from
    holding copies beside the shared cache's byte budget."""

    def __init__(self, max_objects: int = 8) -> None:
        if max_objects < 1:
            raise ValueError("max_objects must be at least 1")
        self.max_objects = max_objects
        self._entries: "OrderedDict[int, tuple[weakref.ref, dict[Hashable, Any]]]" = OrderedDict()
        self._lock = threading.RLock()  # (a collection may run the drop callback inside a locked block)

    def get(self, obj: Any, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value under ``key`` derived from ``obj``: ``make()`` the first time, the same value after, while
        ``obj`` lives and is among the ``max_objects`` used last. Raises ``TypeError`` for an object that
        takes no weak reference."""
        oid = id(obj)
        with self._lock:
            entry = self._entries.get(oid)
            if entry is not None and entry[0]() is obj and key in entry[1]:
                self._entries.move_to_end(oid)
                return entry[1][key]
        value = make()
        with self._lock:
            entry = self._entries.get(oid)
            if entry is None or entry[0]() is not obj:
                ref = weakref.ref(obj, lambda r, oid=oid: self._drop(oid, r))
                entry = self._entries[oid] = (ref, {})
            entry[1][key] = value
            self._entries.move_to_end(oid)
            while len(self._entries) > self.max_objects:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _drop(self, oid: int, ref: weakref.ref) -> None:
        with self._lock:
            entry = self._entries.get(oid)
            if entry is not None and entry[0] is ref:
                del self._entries[oid]
