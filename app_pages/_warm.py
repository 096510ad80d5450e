"""Warm-up at server start: heavy imports, then the first views straight into the shared byte cache.

One background thread per process (:func:`warm_up`, started by ``app.py``): it imports torch, the models,
scikit-learn and the figures; then it traces the default checkpoint's default text and builds its default
view's figures (registry defaults, the default cursor) into :func:`app_pages._data.cache` under the very
keys the pages use, so the first visitor's view is a cache hit; then it does the same for the checkpoint Home links
each view to. ``GEOMLAB_APP_PREWARM=0`` turns the pre-tracing off (imports are still warmed).
:func:`wait_first_view` lets ``serve.py`` hold the server's start until the first view is in the cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Iterator

from app_pages import _data as data
from geomlab.teach import views

log = logging.getLogger("geomlab.app")

_WARM_MODULES = ("torch", "geomlab.models", "geomlab.checkpoints.io", "geomlab.trace", "geomlab.figures",
                 "sklearn.decomposition")
_IMPORTS_DONE = threading.Event()
#: Set once the first warm target (the default checkpoint's default view) is in the cache, or skipped.
FIRST_VIEW_DONE = threading.Event()
_THREAD_LOCK = threading.Lock()
_ACTIVE = 0  # page renders in progress (the warm-up's later views wait for them: they share the GIL)
_ACTIVE_LOCK = threading.Condition()
#: What the warm-up built: ``[(slug, ref, n_figures, seconds)]`` (for the log and the tests).
WARMED: list[tuple[str, str, int, float]] = []


@contextlib.contextmanager
def rendering() -> Iterator[None]:
    """Mark a page render in progress: the warm-up pauses between figures while any is (the first visitor
    should not share the CPU and the GIL with pre-building views nobody asked for yet)."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE += 1
    try:
        yield
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE -= 1
            _ACTIVE_LOCK.notify_all()


def _wait_idle(timeout: float = 30.0) -> None:
    """Wait (at most ``timeout`` seconds) until no page render is in progress."""
    with _ACTIVE_LOCK:
        _ACTIVE_LOCK.wait_for(lambda: _ACTIVE == 0, timeout)


def warm_targets(found: list) -> list[tuple[str, Any]]:
    """``[(view slug, catalog entry)]`` to pre-build, first view first: the default checkpoint
    (``default_ref``) in its default view (:func:`geomlab.teach.views.default_view`), then for every view the
    checkpoint Home links it to (``default_ref(view.kinds)``), each pair once."""
    by_ref = {e.ref: e for e in found}
    out: list[tuple[str, Any]] = []
    first = by_ref.get(data.default_ref(found=found) or "")
    if first is not None:
        view = views.default_view(first.kind)
        if view is not None:
            out.append((view.slug, first))
    for view in views.VIEWS.values():
        e = by_ref.get(data.default_ref(view.kinds, found=found) or "")
        if e is not None and (view.slug, e) not in out:
            out.append((view.slug, e))
    return out


def prewarm_view(slug: str, entry: Any) -> int:
    """Trace ``entry``'s default text and build view ``slug``'s figures with the registry's default controls
    at the default cursor (:func:`geomlab.trace.predictions.default_cursor`) into the shared cache, under the keys
    a first visit uses. Returns the number of figures."""
    text = data.default_text_for(entry)
    path, mtime = str(entry.path), entry.mtime
    tkey = data.trace_key(path, mtime, text, {})
    tr = data.cache().get_or_compute(tkey, lambda: data.compute_trace(*tkey[1:]))
    controls = views.default_controls(slug, tr)
    from geomlab.trace.predictions import default_cursor

    cursor = default_cursor(tr)  # where a first visit's cursor starts (no position chosen yet)
    n = 0
    for f in views.default_figures(slug, tr):
        _wait_idle()
        key = data.figure_key(tkey, f.name, controls, cursor)
        try:
            data.cache().get_or_compute(key, lambda f=f: views.build_figure(tr, f.name, controls, cursor))
            n += 1
            data.cache().remeasure(tkey)  # geometry the figure memoised on the trace
        except ValueError:  # a figure that does not fit this text: the page shows the message itself
            continue
    return n


def prewarm(max_views: int = 6) -> int:
    """Pre-build :func:`warm_targets` (at most ``max_views``); returns how many views were built. Never
    raises: a cold cache is only slower."""
    from geomlab.checkpoints import catalog

    try:
        found = catalog.list_checkpoints()  # not data.entries(): no st.cache_* outside a script run
    except Exception:  # noqa: BLE001
        log.debug("warm-up: listing checkpoints failed", exc_info=True)
        return 0
    built = 0
    for i, (slug, entry) in enumerate(warm_targets(found)[:max_views]):
        if i:
            _wait_idle()  # the first view is built at once; the others when no page is being drawn
        t0 = time.perf_counter()
        try:
            n = prewarm_view(slug, entry)
        except Exception:  # noqa: BLE001 - best effort
            log.debug("warm-up of %s for %s failed", slug, entry.ref, exc_info=True)
            continue
        finally:
            if i == 0:
                FIRST_VIEW_DONE.set()
        dt = time.perf_counter() - t0
        WARMED.append((slug, entry.ref, n, dt))
        log.info("warm-up: %s with %s, %d figures in %.1f s; %s", slug, entry.ref, n, dt,
                 data.cache().stats().line())
        built += 1
    return built


def log_to_server() -> None:
    """Send geomlab's INFO lines (cache misses and counters, warm-up) to the server's stderr; once per
    process (idempotent: the ``geomlab`` logger gets one handler)."""
    logger = logging.getLogger("geomlab")
    with _THREAD_LOCK:
        if not any(getattr(h, "_geomlab_app", False) for h in logger.handlers):
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            handler._geomlab_app = True
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)


_THREAD: threading.Thread | None = None


def set_torch_threads() -> int:
    """One intra-op thread per torch call by default (``GEOMLAB_TORCH_THREADS`` overrides): the server runs
    many sessions' small traces side by side, and several threads per call on a 2-core server spin against
    each other (a 2,048-character trace took 2-4x the CPU with torch's default). Design choice; returns the
    number set."""
    import torch

    try:
        n = max(1, int(os.environ.get("GEOMLAB_TORCH_THREADS", "1")))
    except ValueError:
        log.warning("GEOMLAB_TORCH_THREADS is not a whole number; using 1")
        n = 1
    torch.set_num_threads(n)
    return n


def warm_up() -> threading.Thread:
    """Start the warm-up thread once per process and return it (later calls return the same thread; it may
    be called from ``serve.py``'s start-up hook before any session, or from ``app.py``'s first run). pandas
    is imported first, in the calling thread, because plotly peeks at ``sys.modules["pandas"]`` and must
    never see it half-imported; :func:`wait_warm` waits for the imports (not the pre-tracing) before a page
    uses torch."""
    global _THREAD
    import importlib

    with _THREAD_LOCK:
        if _THREAD is not None:
            return _THREAD
        import pandas  # noqa: F401

        def work() -> None:
            t0 = time.perf_counter()
            for name in _WARM_MODULES:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - best effort; pages report real import errors themselves
                    pass
            set_torch_threads()
            _IMPORTS_DONE.set()
            log.info("warm-up: imports done in %.1f s", time.perf_counter() - t0)
            try:
                if os.environ.get("GEOMLAB_APP_PREWARM", "1") != "0":
                    prewarm()
            finally:
                FIRST_VIEW_DONE.set()

        _THREAD = threading.Thread(target=work, daemon=True, name="geomlab-warm-up")
        _THREAD.start()
        from app_pages._plotlyjs import fetch

        # the charts' smaller plotly.js bundle, once into the user cache (network, not CPU: its own thread)
        threading.Thread(target=fetch, daemon=True, name="geomlab-plotlyjs").start()
        return _THREAD


def wait_first_view(timeout: float) -> bool:
    """Block until the warm-up has built its first view (or skipped it), at most ``timeout`` seconds; True
    when it is done. ``serve.py`` calls it before the server accepts requests."""
    return FIRST_VIEW_DONE.wait(timeout)


def wait_warm(timeout: float = 120.0) -> None:
    """Block until the warm-up imports are done (no-op when they are)."""
    thread = warm_up()
    if thread.is_alive():
        _IMPORTS_DONE.wait(timeout)
