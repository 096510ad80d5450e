"""Caches of the app: the checkpoint catalog, loaded checkpoints, traces and figures.

Checkpoints, traces and figures go through one byte-budget LRU shared by every session of the server
(:func:`geomlab.core.cache.shared_cache`, 512 MB by default, ``GEOMLAB_CACHE_MB``), not ``st.cache_data``: it is
bounded by size, never copies values per session, computes a missing key once however many sessions ask for
it, and can be filled by the warm-up thread outside any script run (``app_pages/_warm.py``). Keys:

* ``("ckpt", path, mtime)``: a :class:`geomlab.checkpoints.io.Checkpoint` (a re-saved file has a new mtime);
* ``("trace", path, mtime, text, opts)``: a trace (``opts``: sorted trace options, e.g. CEM ``steps``);
* ``("fig", path, mtime, text, opts, name, kwargs)``: a :class:`geomlab.figures.Chart`, ``kwargs`` the
  figure's arguments from :func:`geomlab.teach.views.figure_kwargs`.

Values are shared between sessions: callers must not mutate them (``_widgets.chart`` copies a figure before
changing its layout). The catalog listing stays in ``st.cache_data`` (tiny, keyed by the files' signature).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, Callable, Hashable

import streamlit as st

from geomlab.checkpoints import catalog
from geomlab.teach import views
from geomlab.core.cache import ByteLRU, shared_cache

log = logging.getLogger("geomlab.app")

#: Default demo sentence (used when every character is in the checkpoint's vocabulary).
DEFAULT_TEXT = catalog.DEMO_TEXT
#: Fallback text limit when geomlab.trace does not define one (characters).
FALLBACK_MAX_CHARS = 2048


#: The app logs the cache's counters every this many page lookups (design choice).
LOG_EVERY = 50
_LOOKUPS = 0


def cache() -> ByteLRU:
    """The server-wide byte-budget cache (one per process)."""
    return shared_cache()


def cached(key: Hashable, compute: Callable[[], Any], spinner: str | None = None) -> Any:
    """``compute()`` through the shared cache under ``key``; a spinner with ``spinner`` while a missing value
    is computed in a script run."""
    c = cache()
    global _LOOKUPS
    _LOOKUPS += 1
    if _LOOKUPS % LOG_EVERY == 0:  # the hit rate in the server log now and then (misses are logged each)
        log.info("%s", c.stats().line())
    if spinner and key not in c:
        with st.spinner(spinner):
            return c.get_or_compute(key, compute)
    return c.get_or_compute(key, compute)


def debug_enabled() -> bool:
    """Whether to show the cache caption: the URL has ``debug=1`` or the environment ``GEOMLAB_DEBUG=1``."""
    if os.environ.get("GEOMLAB_DEBUG", "") in ("1", "true", "yes"):
        return True
    with contextlib.suppress(Exception):
        return st.query_params.get("debug") in ("1", "true", "yes")
    return False


def cache_caption() -> None:
    """A caption with the cache's counters (``cache: 12 entries, 83.1 of 512 MB, hit rate 75% ...``) when
    :func:`debug_enabled`."""
    if debug_enabled():
        st.caption(cache().stats().line())


# ---------------------------------------------------------------- catalog
_LISTING_LOCK = threading.Lock()
_LISTING: dict[str, Any] = {"checked": -1.0, "dirs": None, "sig": None, "entries": [], "stamped": -1.0}
SIGNATURE_TTL_S = 1.0
"""How long the catalog's file signature is reused before the folders are walked again (seconds)."""
STAMPS_TTL_S = 0.1
"""How long the checkpoint roots' subfolders' mtimes are reused (seconds) while the roots' own are unchanged
(:func:`entries`). Design choice: a file saved into an existing checkpoint folder is seen a tenth of a second
later at most; a new folder at once."""


def _root_stamps() -> tuple:
    """mtimes of the two checkpoint roots (bundled and runs): a folder added, removed or renamed there
    changes them (two ``stat`` calls)."""
    out = []
    for root in (catalog.bundled_dir(), catalog.runs_dir()):
        try:
            out.append((str(root), root.stat().st_mtime_ns))
        except OSError:
            out.append((str(root), None))
    return tuple(out)


def _folder_stamps(roots: tuple) -> tuple:
    """``roots`` (:func:`_root_stamps`) and the mtimes of the roots' subfolders: they change whenever a file is
    added, removed or renamed into place there (one ``scandir``, no per-file ``stat``)."""
    out = list(roots)
    for root, mtime in roots:
        if mtime is None:
            continue
        try:
            with os.scandir(root) as it:
                out += [(e.path, e.stat().st_mtime_ns) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            out.append((root, None))
    return tuple(out)


def entries() -> list[catalog.CheckpointEntry]:
    """Every checkpoint in the catalog, re-read only when a checkpoint file changes. The roots' mtimes are
    checked on every call (a checkpoint folder added, removed or renamed changes them), their subfolders'
    (a file added, removed or renamed into place inside one) at most once per :data:`STAMPS_TTL_S`, and
    every file's mtime (``catalog.signature``, a walk with one ``stat`` per file) at most once per
    :data:`SIGNATURE_TTL_S`, for the whole server. A page asks many times per run, and each system call
    under load waits for the interpreter lock again: 100 sessions' runs stat-ing every folder a dozen times
    each cost a fifth of a run. Design choice."""
    now = time.monotonic()
    roots = _root_stamps()
    with _LISTING_LOCK:
        fresh = now - _LISTING["stamped"] <= STAMPS_TTL_S and _LISTING["dirs"] and _LISTING["dirs"][:2] == roots
    dirs = _LISTING["dirs"] if fresh else _folder_stamps(roots)
    with _LISTING_LOCK:
        if not fresh:
            _LISTING["stamped"] = now
        if dirs != _LISTING["dirs"] or now - _LISTING["checked"] > SIGNATURE_TTL_S:
            sig = catalog.signature()
            if sig != _LISTING["sig"]:
                _LISTING["entries"] = catalog.list_checkpoints()
                _LISTING["sig"] = sig
            _LISTING["checked"], _LISTING["dirs"] = now, dirs
        return _LISTING["entries"]


def forget_listing() -> None:
    """After this process wrote a checkpoint (an upload, a save): the next :func:`entries` looks at every
    folder again, whatever :data:`STAMPS_TTL_S` says."""
    with _LISTING_LOCK:
        _LISTING["stamped"] = -1.0


def entry_for(ref: str | None) -> catalog.CheckpointEntry | None:
    """The catalog entry of ``ref`` or ``None``."""
    if not ref:
        return None
    for e in entries():
        if e.ref == ref:
            return e
    return None


def default_ref(kinds: tuple[str, ...] | None = None, found: list[catalog.CheckpointEntry] | None = None
                ) -> str | None:
    """First bundled checkpoint (of one of ``kinds`` if given), else the newest user one, else None;
    checkpoints that read text come before synthetic-task ones (a newcomer reads text more easily), and one
    whose weights changed since the save (:func:`catalog.weights_changed`: it will not load) is passed over
    while another fits. ``found``: the catalog to choose from (default :func:`entries`; the warm-up thread
    passes its own)."""
    def text_first(e: catalog.CheckpointEntry) -> tuple:
        level = (e.meta.get("vocab") or {}).get("level", "char")
        return (e.source != "bundled", level != "char")

    fitting = [e for e in sorted(entries() if found is None else found, key=text_first)  # stable in each group
               if kinds is None or e.kind in kinds]
    for e in fitting:  # each sum computed once per file state
        if not catalog.weights_changed(e):
            return e.ref
    return fitting[0].ref if fitting else None


def related_entries(entry: catalog.CheckpointEntry, found: list[catalog.CheckpointEntry] | None = None,
                    pair: bool = False) -> list[tuple[catalog.CheckpointEntry, str]]:
    """``[(checkpoint, how related)]``: the checkpoints of ``found`` (default :func:`entries`) related to
    ``entry`` (itself left out), most related first; ``how`` comes from
    :func:`geomlab.teach.views.related_kinds` (same kind, same family, same way of mixing positions; unrelated
    kinds are left out).

    Stand-in order (a view that cannot show ``entry``): the kind's relation, then the same task (word
    problem or text) and corpus, then the same group. Pair order (``pair=True``, Compare's second side):
    the same task first (two surprisal curves on one scale), then the kind's relation, the same corpus,
    and within one kind another group (O(d) vs the torus is the comparison worth making). Then bundled
    before yours, then the listing's order. Design choice."""
    from geomlab.teach.views import related_kinds

    related = related_kinds(entry.kind)
    rank = {k: i for i, k in enumerate(related)}
    pool = [e for e in (entries() if found is None else found) if e.ref != entry.ref and e.kind in rank]

    def key(item: tuple[int, catalog.CheckpointEntry]) -> tuple:
        i, e = item
        task = e.is_word_problem != entry.is_word_problem
        if pair:
            other_group = e.kind == entry.kind and e.group == entry.group
            return (task, rank[e.kind], e.corpus != entry.corpus, other_group, e.source != "bundled", i)
        return (rank[e.kind], task, e.corpus != entry.corpus, e.group != entry.group, e.source != "bundled", i)

    return [(e, related[e.kind]) for _, e in sorted(enumerate(pool), key=key)]


# ---------------------------------------------------------------- text
def max_chars() -> int:
    """The longest text a view traces (``geomlab.trace.MAX_TEXT_CHARS`` when defined)."""
    try:
        from geomlab import trace as trace_mod

        return int(getattr(trace_mod, "MAX_TEXT_CHARS", FALLBACK_MAX_CHARS))
    except Exception:  # noqa: BLE001 - trace module not importable
        return FALLBACK_MAX_CHARS


def default_text_for(entry: catalog.CheckpointEntry | None) -> str:
    """A demo text this checkpoint can read (:func:`geomlab.checkpoints.catalog.demo_text`; the demo sentence
    without a checkpoint). Reads only the JSON (no torch import: this runs on every page, Home included)."""
    return DEFAULT_TEXT if entry is None else catalog.demo_text(entry)


def vocab_of(entry: catalog.CheckpointEntry):
    """The entry's :class:`geomlab.data.vocab.Vocab`, read from its JSON (no weights needed)."""
    from geomlab.data.vocab import Vocab

    return Vocab.from_json(entry.meta.get("vocab") or {})


#: Appended to a text error on a page with the sidebar's text box (its "Use the default text" button).
TEXT_HINT = " The button \"Use the default text\" under the text box gives this checkpoint's own text."
#: Appended to Compare's side-B text error: the text box holds A's text, which no button makes B's.
TEXT_HINT_B = (" The text is A's: choose a B that reads the same kind of text as A (characters, or a word "
               "problem's symbols).")


def check_text(entry: catalog.CheckpointEntry, text: str, hint: str = "") -> list[str]:
    """:func:`geomlab.data.vocab.check_text` for ``entry``'s vocabulary and the app's limit: the tokens, or
    a ``ValueError`` with a readable message (ending with ``hint``, e.g. :data:`TEXT_HINT`)."""
    from geomlab.data.vocab import check_text as check

    try:
        return check(vocab_of(entry), text, max_chars())
    except ValueError as exc:
        if not hint:
            raise
        raise type(exc)(f"{exc}{hint}") from None


def unknown_tokens(entry: catalog.CheckpointEntry, text: str) -> list[str]:
    """Distinct tokens of ``text`` that ``entry``'s vocabulary lacks (:func:`geomlab.data.vocab.unknown_tokens`)."""
    from geomlab.data.vocab import unknown_tokens as unknown

    return unknown(vocab_of(entry), text)


# ---------------------------------------------------------------- checkpoints, traces, figures
def load_uncached(path: str) -> Any:
    """Load a checkpoint in eval mode (no cache)."""
    from geomlab.checkpoints import io as ckpt_mod

    ck = ckpt_mod.load(path)
    with contextlib.suppress(Exception):
        ck.model.eval()
    return ck


def load_checkpoint(path: str, mtime: float) -> Any:
    """The loaded checkpoint at ``path`` through the shared cache (no spinner: usable from any thread)."""
    return cache().get_or_compute(("ckpt", path, mtime), lambda: load_uncached(path))


class KeyText(str):
    """A visitor's text in a cache key: equal to and hashed as the plain string, but its ``repr`` (what the
    cache's log prints for a miss) gives only its length: the server log kept the start of what each
    visitor typed. Design choice."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<text of {len(self)} characters>"


def trace_key(path: str, mtime: float, text: str, opts: dict[str, Any] | tuple) -> tuple:
    """The cache key of a trace (``opts`` as a dict or sorted items; ``text`` logged by length only)."""
    items = tuple(sorted(opts.items())) if isinstance(opts, dict) else tuple(opts)
    return ("trace", path, mtime, KeyText(text), items)


def compute_trace(path: str, mtime: float, text: str, opts: tuple) -> Any:
    """Trace ``text`` through the checkpoint at ``path`` (no cache for the trace itself; the checkpoint
    comes from the cache). ``opts``: sorted items, e.g. ``(("steps", 4),)`` for CEM inference steps."""
    from geomlab import trace as trace_mod

    ck = load_checkpoint(path, mtime)
    if ck.vocab is None:
        raise ValueError("This checkpoint has no vocabulary (a real-valued task), so it cannot read text.")
    steps = dict(opts).get("steps")
    if steps:
        tokens = trace_mod.encode_text(ck.vocab, text)
        return trace_mod.trace_cem_steps(ck.model, tokens, int(steps), vocab=ck.vocab, text=text)
    return trace_mod.trace_text(ck.model, ck.vocab, text)


def trace_for(entry: catalog.CheckpointEntry, text: str, **opts: Any) -> Any:
    """The cached trace of ``text`` through ``entry``'s model (``opts``: e.g. CEM ``steps``). The page waits
    for the warm-up's imports first (``_warm.wait_warm``)."""
    key = trace_key(str(entry.path), entry.mtime, text, opts)
    return cached(key, lambda: compute_trace(*key[1:]), spinner="Tracing the text through the model…")


def figure_key(trace_k: tuple, name: str, controls: dict[str, Any] | None, cursor: int | None) -> tuple:
    """The cache key of figure ``name`` of the trace under ``trace_k`` (only the arguments it takes)."""
    kw = views.figure_kwargs(name, controls, cursor)
    return ("fig", *trace_k[1:], name, tuple(sorted(kw.items())))


def figure_for(entry: catalog.CheckpointEntry, text: str, trace_opts: dict[str, Any], tr: Any, name: str,
               controls: dict[str, Any], cursor: int | None) -> Any:
    """Figure ``name`` of ``tr`` (the trace of ``entry`` on ``text``) as a cached
    :class:`geomlab.figures.Chart`; raises ``FigureError`` (a ``ValueError``) like
    :func:`geomlab.teach.views.build_figure`."""
    tkey = trace_key(str(entry.path), entry.mtime, text, trace_opts)
    built = []

    def build() -> Any:
        built.append(True)
        return views.build_figure(tr, name, controls, cursor)

    view = cached(figure_key(tkey, name, controls, cursor), build)
    if built:  # the figure may have memoised geometry on the trace: charge the trace's entry for it
        cache().remeasure(tkey)
    return view


def json_window(n_positions: int, cursor: int | None, size: int = 256) -> tuple[int, int]:
    """The positions ``(start, stop)`` the JSON download holds: ``size`` positions around the cursor (the
    window a view shows; design choice, keeps the download bounded)."""
    c = n_positions // 2 if cursor is None else int(cursor)
    start = max(0, min(c - size // 2, n_positions - size))
    return start, min(n_positions, start + size)


def trace_json(tr: Any, cursor: int | None = None) -> str:
    """The trace as one strict JSON document of the window around ``cursor`` (``geomlab.trace.trace_json``)."""
    from geomlab import trace as trace_mod

    start, stop = json_window(tr.n_positions, cursor)
    return trace_mod.trace_json(tr, start, stop)
