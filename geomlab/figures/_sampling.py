"""What a figure reads of a trace: argument checks (cursor, layer...), the full-resolution window of
consecutive positions a per-position figure draws of a long text and the caption sentence that says so,
non-finite values (drawn blank, counted in the caption), and the per-trace caches of the geometry several
figures share. Design choices, documented in docs/views.md."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np

from geomlab.figures._chart import FigureError

#: Consecutive positions a per-position figure draws at full resolution around the cursor (design choice:
#: a 128 x 128 map still shows single cells at half page width, and a path of 128 states is no tangle).
WINDOW = 128
MAX_FRAMES = 96        # animation frames (2-D)
MAX_FRAMES_3D = 48     # animation frames of 3-D scenes (each frame rebuilds several 3-D traces)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit BLAS/OpenMP to one thread for the small dense linear algebra of the views (PCA, SVD); with
    several threads on a busy machine a 256 x 128 SVD can take seconds instead of milliseconds."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def cached_positions(tr, key: tuple, n: int, positions, compute, axis: int = 0) -> np.ndarray:
    """A per-position quantity of the trace (``n`` positions along ``axis``) at ``positions`` only:
    ``compute(missing)`` gets the sorted positions not computed yet and returns their values stacked along
    ``axis``; computed positions are memoised on the trace under ``key``. Long texts show a window, so
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


def memo(tr, key: tuple, compute, keep: int | None = None) -> np.ndarray:
    """A quantity of the trace computed once and kept on it under ``key`` (read-only): a whole-text quantity
    (the planes' distances along the text) or one window's block (an attention map's). ``keep``: at most this
    many entries whose keys share ``key[0]`` are kept, the oldest dropped first (window blocks: bounded
    memory however far the cursor travels). Design choice: a cursor move that keeps the window recomputes
    nothing."""
    store = tr.__dict__.setdefault("_view_cache", {})
    if key not in store:
        value = np.asarray(compute())
        value.setflags(write=False)
        if keep is not None:
            same = [k for k in store if isinstance(k, tuple) and k and k[0] == key[0]]
            for k in same[: max(len(same) - keep + 1, 0)]:
                store.pop(k, None)
        store[key] = value
    return store[key]


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


def window(n: int, cursor: int | None = None, size: int = WINDOW) -> np.ndarray:
    """The positions a per-position figure draws: ``min(n, size)`` consecutive positions (sorted int64) that
    hold the cursor with at least ``size // 4`` positions on each side (unless an end of the text is nearer);
    the last ``size`` positions when ``cursor`` is None; all ``n`` when ``n <= size``. Never every k-th
    position: a long text is read through this window and its overview.

    The window moves in steps of ``size // 2``: its start is a multiple of ``size // 2`` (or ``n - size`` at the
    end of the text), the first one that leaves ``size // 4`` positions before the cursor. So a cursor moved
    within the middle half keeps the window, and a figure's data with it: only the cursor's mark changes,
    which the app draws in place (design choice). Raises :class:`FigureError` for ``size < 1`` or a cursor
    outside ``0..n-1``."""
    if isinstance(size, bool) or int(size) < 1:
        raise FigureError(f"window size must be at least 1 position, got {size!r}")
    size = int(size)
    if n <= size:
        return np.arange(n, dtype=np.int64)
    if cursor is None:
        lo = n - size
    else:
        if not 0 <= int(cursor) < n:
            raise FigureError(f"cursor {cursor} out of range: the trace has {n} positions")
        step = max(size // 2, 1)
        lo = min(max((int(cursor) - size // 4) // step * step, 0), n - size)
    return np.arange(lo, lo + size, dtype=np.int64)


def window_note(n: int, idx, what: str = "Positions") -> str:
    """Caption suffix when a figure draws a window ``idx`` (consecutive positions) of ``n``, e.g.
    ``" Positions 512–639 of 2,048 at full resolution; the overview shows the whole text."``; empty when
    the window holds every position."""
    idx = np.asarray(idx)
    if len(idx) >= n or len(idx) == 0:
        return ""
    return (f" {what} {int(idx[0]):,}–{int(idx[-1]):,} of {n:,} at full resolution; the overview shows the "
            "whole text.")


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
