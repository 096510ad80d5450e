"""What a figure reads of a trace: argument checks (cursor, layer...), the caps past which long texts are
subsampled and the caption sentences that say so, non-finite values (drawn blank, counted in the caption),
and the per-trace caches of the geometry several figures share. Design choices, documented in docs/views.md."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from geomlab.figures._chart import FigureError

# default sizes past which views subsample (design choice; keeps pages responsive)
MAX_POINTS = 1024      # points on a line/scatter along positions
MAX_FRAMES = 96        # animation frames (2-D)
MAX_FRAMES_3D = 48     # animation frames of 3-D scenes (each frame rebuilds several 3-D traces)
MAX_MATRIX = 256       # rows/columns of a position x position map


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit BLAS/OpenMP to one thread for the small dense linear algebra of the views (PCA, SVD); with
    several threads on a busy machine a 256 x 128 SVD can take seconds instead of milliseconds."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def cached(tr, key: tuple, compute):
    """``compute()`` memoised on the trace object under ``key`` (traces are treated as immutable), so
    several views of one trace share their geometry (eigenvalues, logarithms, PCA)."""
    store = tr.__dict__.setdefault("_view_cache", {})
    if key not in store:
        store[key] = compute()
    return store[key]


def cached_positions(tr, key: tuple, n: int, positions, compute, axis: int = 0) -> np.ndarray:
    """A per-position quantity of the trace (``n`` positions along ``axis``) at ``positions`` only:
    ``compute(missing)`` gets the sorted positions not computed yet and returns their values stacked along
    ``axis``; computed positions are memoised on the trace under ``key``. Long texts show a subsample, so
    the views compute the geometry (eigenvalues, logarithms) of the positions they draw, not of all."""
    store = tr.__dict__.setdefault("_view_cache", {})
    positions = np.asarray(positions, dtype=np.int64)
    entry = store.get(key)
    missing = positions if entry is None else positions[~entry[1][positions]]
    missing = np.unique(missing)
    if len(missing):
        vals = np.asarray(compute(missing))
        if entry is None:
            shape = list(vals.shape)
            shape[axis] = n
            dtype = vals.dtype if vals.dtype.kind in "fc" else np.float64
            entry = (np.full(shape, np.nan, dtype=dtype), np.zeros(n, dtype=bool))
            store[key] = entry
        arr, done = entry
        index = [slice(None)] * arr.ndim
        index[axis] = missing
        arr[tuple(index)] = vals
        done[missing] = True
    if entry is None:  # nothing asked for
        return np.asarray(compute(positions))
    return np.take(entry[0], positions, axis=axis)


def check_cursor(cursor: int | None, n: int) -> int | None:
    """``cursor`` as a non-negative position in ``0..n-1`` (negative counts from the end) or None.
    Raises :class:`FigureError` when out of range or not an integer."""
    if cursor is None:
        return None
    if isinstance(cursor, bool) or not isinstance(cursor, (int, np.integer)):
        raise FigureError(f"cursor must be an integer position, got {cursor!r}")
    c = int(cursor)
    if not -n <= c < n:
        raise FigureError(f"cursor {c} out of range: the trace has {n} positions")
    return c % n


def check_index(name: str, index: int, size: int) -> int:
    """``index`` in ``-size..size-1`` normalised to ``0..size-1``; :class:`FigureError` otherwise."""
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -size <= int(index) < size:
        raise FigureError(f"{name} {index!r} out of range: there are {size}")
    return int(index) % size


def subsample(n: int, max_points: int, cursor: int | None = None) -> np.ndarray:
    """Sorted positions to show out of ``n``: all when ``n <= max_points``, else at most ``max_points``
    evenly spaced ones, always with the first, the last and the cursor (which replaces its nearest
    neighbour in the even spacing)."""
    if max_points < 2:
        raise FigureError("max_points must be at least 2")
    if n <= max_points:
        return np.arange(n)
    idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(int))
    if cursor is not None and cursor not in idx:
        # the cursor replaces its nearest inner neighbour, so the cap holds exactly (first and last kept)
        inner = np.arange(1, len(idx) - 1)
        drop = inner[np.argmin(np.abs(idx[inner] - cursor))] if inner.size else None
        idx = np.unique(np.append(np.delete(idx, drop) if drop is not None else idx, cursor))
    return idx


def blank(a) -> np.ndarray:
    """``a`` as a float array with every non-finite value (NaN, +-inf) as NaN: plotly leaves NaN cells and
    points blank, but would colour an infinity or break a line scale on it."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return a.astype(np.float64)
    return np.where(np.isfinite(a), a, np.nan)


def finite_max(*arrays, floor: float = 1e-12) -> float:
    """The largest finite value over ``arrays`` (NaN and +-inf ignored), at least ``floor``: a NaN-safe colour
    range (``max`` of an array with one NaN is NaN, and a ``nanmax`` that then falls back to ``floor`` would
    saturate every finite cell)."""
    out = float(floor)
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        fin = a[np.isfinite(a)]
        if fin.size:
            out = max(out, float(fin.max()))
    return out


def finite_abs_max(*arrays, floor: float = 1e-12) -> float:
    """:func:`finite_max` of the absolute values (a symmetric range for a diverging scale)."""
    return finite_max(*(np.abs(np.asarray(a)) for a in arrays), floor=floor)


def nonfinite_count(a, axis) -> int:
    """How many slices along ``axis`` (e.g. positions) of ``a`` hold at least one non-finite value."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc" or a.size == 0:
        return 0
    bad = ~np.isfinite(a)
    other = tuple(i for i in range(a.ndim) if i != axis % a.ndim)
    return int(bad.any(axis=other).sum()) if other else int(bad.sum())


def missing_note(n: int, what: str = "positions") -> str:
    """Caption suffix when recorded values are missing, e.g. ``" 3 positions have non-finite values (NaN or
    infinite) and are left blank."``; empty for ``n == 0``."""
    if n <= 0:
        return ""
    if n == 1:
        one = what[:-1] if what.endswith("s") else what
        return f" 1 {one} has non-finite values (NaN or infinite) and is left blank."
    return f" {n:,} {what} have non-finite values (NaN or infinite) and are left blank."


def ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``..."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def subsample_note(n: int, shown: int, what: str = "positions", verb: str = "shown") -> str:
    """Caption suffix when a view shows only part of the positions (the cap said in words), e.g.
    ``" Long text: 1,024 of 2,048 positions shown (about every 2nd, evenly spaced)."``."""
    if shown >= n:
        return ""
    ratio = (n - 1) / max(shown - 1, 1)
    every = f"about every {ordinal(round(ratio))}, " if ratio >= 1.5 else ""
    return f" Long text: {shown:,} of {n:,} {what} {verb} ({every}evenly spaced)."
