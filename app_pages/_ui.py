"""Shared helpers of the Streamlit pages: state, URL mirroring, caching, pickers and error display.

Not a page itself (``st.navigation`` in ``app.py`` lists the pages explicitly; files starting with ``_``
are never pages).

Shared state (session keys the app owns, never widget keys, so they survive page switches):

=============  ========  ===================================================================
state key      URL key   meaning
=============  ========  ===================================================================
``gl_ckpt``    ``ckpt``  catalog ref of the chosen checkpoint (``bundled/NAME``, ``runs/NAME``)
``gl_ckpt_b``  ``b``     second checkpoint of the Compare page
``gl_text``    ``text``  the text every view traces (omitted from the URL when it is the default)
``gl_pos``     ``pos``   token cursor (0-based position), highlighted in every figure
``gl_layer``   ``layer`` layer shown by views that show one layer at a time
``gl_steps``   ``T``     CEM recursion steps at inference (CEM energy; side A of Compare)
``gl_steps_b`` ``TB``    CEM recursion steps at inference of Compare's side B
=============  ========  ===================================================================

Widgets use keys ``w_*``; each widget is seeded from its state key before it is drawn and copies its
value back in an ``on_change`` callback (the pattern recommended against streamlit#5813 and friends).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import plotly.graph_objects as go
import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from geomlab import catalog

log = logging.getLogger("geomlab.app")

ROOT = Path(__file__).resolve().parent.parent
PAGES_DIR = Path(__file__).resolve().parent

# ---------------------------------------------------------------- state keys
K_CKPT, K_CKPT_B, K_TEXT, K_POS, K_LAYER, K_STEPS, K_STEPS_B = (
    "gl_ckpt", "gl_ckpt_b", "gl_text", "gl_pos", "gl_layer", "gl_steps", "gl_steps_b")
URL_KEYS = {K_CKPT: "ckpt", K_CKPT_B: "b", K_TEXT: "text", K_POS: "pos", K_LAYER: "layer", K_STEPS: "T",
            K_STEPS_B: "TB"}
_INT_KEYS = {K_POS, K_LAYER, K_STEPS, K_STEPS_B}
K_NOTICE = "_gl_notice"          # one-line message to show once (e.g. a bad link)
K_NOTICE_SHOWN = "_gl_notice_shown"  # the notice was drawn in this run (cleared after a completed run)
K_QP_WRITTEN = "_gl_qp_written"  # the query params this app wrote last (to tell links from our own)
K_CKPT_EXPLICIT = "_gl_ckpt_explicit"  # True when gl_ckpt was chosen by the user (a link, a pick, a save)
K_PAGE_QP = "_gl_page_qp"        # extra URL keys of the current page only (e.g. Train's run id), set per run

#: Default demo sentence (used when every character is in the checkpoint's vocabulary).
DEFAULT_TEXT = "ROMEO: But soft, what light through yonder window breaks? It is the east."
#: Fallback text limit when geomlab.trace does not define one (characters).
FALLBACK_MAX_CHARS = 2048

OSM_KINDS = ("osm-rnn", "osmformer")
ATTENTION_KINDS = ("osmformer", "transformer", "llama", "cem", "grassmann-attn")


@dataclass(frozen=True)
class View:
    """One view page: its URL slug, title, icon, which model kinds it can show, and a blurb."""

    slug: str
    title: str
    icon: str
    kinds: tuple[str, ...]
    family: str
    blurb: str
    short: str = ""


VIEWS: dict[str, View] = {v.slug: v for v in (
    View("trajectories", "Group trajectories", ":material/timeline:", OSM_KINDS, "orthogonal-state (OSM)",
         "Where the hidden state H_t travels on its group: eigenvalue phases on the unit circle, distance "
         "from the identity, and a 3-D picture of the path.", "Trajectories"),
    View("tangents", "Tangent updates", ":material/north_east:", OSM_KINDS, "orthogonal-state (OSM)",
         "How big each update Φ_t in the Lie algebra is, per position and layer, before and after tangent "
         "mixing.", "Tangents"),
    View("attention", "Attention similarity", ":material/grid_on:", ATTENTION_KINDS,
         "attention-based (OSMFormer, CEM, Transformers)",
         "Which earlier positions each position looks at, next to the state similarity Re tr(H_i* H_j).",
         "Attention"),
    View("energy", "CEM energy", ":material/trending_down:", ("cem",), "causal energy minimisation (CEM)",
         "Energy of each token's iterate across recursion steps t = 0..T: a CEM layer is gradient descent on "
         "this energy, so it should go down.", "Energy"),
    View("planes", "Grassmann planes", ":material/change_history:", ("grassmann",), "Grassmann flow",
         "The 2-planes a Grassmann layer builds from pairs of positions, their Plücker coordinates, and how "
         "far apart consecutive planes are.", "Planes"),
)}


def page_path(slug: str) -> str:
    """Path of a page file relative to the app root (what ``st.Page``/``st.page_link`` want)."""
    return f"app_pages/{slug}.py"


# ---------------------------------------------------------------- warm-up
_WARM_MODULES = ("torch", "geomlab.models", "geomlab.checkpoint", "geomlab.trace", "geomlab.figures",
                 "sklearn.decomposition")


_IMPORTS_DONE = threading.Event()


@st.cache_resource(show_spinner=False)
def warm_imports() -> threading.Thread:
    """Warm the server up once per process, in a background thread: import the heavy modules (torch, the
    models, scikit-learn, the figures), then trace the bundled checkpoints that Home links to and build
    their views' default figures into the caches, so the first view a visitor opens appears quickly
    (the "hero examples" idea of app_anchors.md §2.1). pandas is imported first, in the calling thread,
    because plotly peeks at ``sys.modules["pandas"]`` and must never see it half-imported;
    :func:`wait_warm` waits for the imports (not the pre-tracing) before any page uses torch."""
    import importlib

    import pandas  # noqa: F401

    def work() -> None:
        for name in _WARM_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - best effort; pages report real import errors themselves
                pass
        _IMPORTS_DONE.set()
        if os.environ.get("GEOMLAB_APP_PREWARM", "1") != "0":
            try:
                from app_pages import _views

                _views.prewarm()
            except Exception:  # noqa: BLE001 - a cold cache is only slower
                log.debug("pre-warming the views failed", exc_info=True)

    thread = threading.Thread(target=work, daemon=True, name="geomlab-warm-up")
    thread.start()
    return thread


def wait_warm(timeout: float = 120.0) -> None:
    """Block until the warm-up imports are done (no-op when they are)."""
    thread = warm_imports()
    if thread.is_alive():
        _IMPORTS_DONE.wait(timeout)


# ---------------------------------------------------------------- errors
@contextlib.contextmanager
def guard(what: str = "This part of the page") -> Iterator[None]:
    """Show any error raised inside the block as a message in the page, never as a traceback.

    ``ValueError`` subclasses (bad input: ``DataError``, ``CheckpointError``, ``CatalogError``...) are shown
    as their one-line message; anything else as ``what`` failed plus the exception's one line, with the
    traceback sent to the server log. Streamlit's own control flow (``st.rerun``, ``st.stop``) passes through.
    """
    try:
        yield
    except ScriptControlException:
        raise
    except ValueError as exc:
        st.error(str(exc) or type(exc).__name__, icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the point is to never show a traceback
        log.exception("%s failed", what)
        st.error(f"{what} failed: {type(exc).__name__}: {exc}. (Details are in the server log.)",
                 icon=":material/error:")


# ---------------------------------------------------------------- catalog (cached)
@st.cache_data(show_spinner=False, max_entries=8)
def _entries_for(sig: tuple) -> list[catalog.CheckpointEntry]:
    del sig  # only the cache key
    return catalog.list_checkpoints()


def entries() -> list[catalog.CheckpointEntry]:
    """Every checkpoint in the catalog, re-read only when a checkpoint file changes."""
    return _entries_for(catalog.signature())


def entry_for(ref: str | None) -> catalog.CheckpointEntry | None:
    """The catalog entry of ``ref`` or ``None``."""
    if not ref:
        return None
    for e in entries():
        if e.ref == ref:
            return e
    return None


def default_ref(kinds: tuple[str, ...] | None = None) -> str | None:
    """First bundled checkpoint (of one of ``kinds`` if given), else the newest user one, else None;
    checkpoints that read text come before synthetic-task ones (a newcomer reads text more easily)."""
    def text_first(e: catalog.CheckpointEntry) -> tuple:
        level = (e.meta.get("vocab") or {}).get("level", "char")
        return (e.source != "bundled", level != "char")

    for e in sorted(entries(), key=text_first):  # stable: keeps the catalog's order within each group
        if kinds is None or e.kind in kinds:
            return e.ref
    return None


# ---------------------------------------------------------------- state and URL
def _coerce(key: str, value: str) -> Any:
    if key in _INT_KEYS:
        return int(value)
    return value


def init_state() -> None:
    """Create the shared keys once and adopt values from the URL when the URL did not come from us
    (a fresh session opened from a link, or ``st.page_link(..., query_params=...)``)."""
    ss = st.session_state
    for key in URL_KEYS:
        ss.setdefault(key, None)
    qp = st.query_params.to_dict()
    notes: list[str] = []
    if qp and qp != ss.get(K_QP_WRITTEN):
        for key, url_key in URL_KEYS.items():
            if url_key not in qp:
                continue
            try:
                value = _coerce(key, qp[url_key])
            except ValueError:
                notes.append(f"Ignored the link's {url_key}={qp[url_key]!r}: not a number.")
                continue
            if key in (K_CKPT, K_CKPT_B) and entry_for(value) is None:
                notes.append(f"The link names checkpoint {value!r}, which is not here; showing "
                             "another one instead. See the Checkpoints page for what is available.")
                continue
            if key in (K_POS, K_LAYER) and value < 0 or key in (K_STEPS, K_STEPS_B) and value < 1:
                notes.append(f"Ignored the link's {url_key}={qp[url_key]!r}: it must be "
                             f"{'at least 1' if key in (K_STEPS, K_STEPS_B) else 'a position or layer ≥ 0'}.")
                continue  # left at its default, so the URL is normalised at the end of this run
            ss[key] = value
            if key == K_CKPT:
                ss[K_CKPT_EXPLICIT] = True
    if notes:
        ss[K_NOTICE] = " ".join(notes)
    if ss[K_CKPT] is None or entry_for(ss[K_CKPT]) is None:
        ss[K_CKPT] = default_ref()
        ss[K_CKPT_EXPLICIT] = False
    if ss[K_CKPT_B] is not None and entry_for(ss[K_CKPT_B]) is None:
        ss[K_CKPT_B] = None


def state_query() -> dict[str, str]:
    """The shareable state as URL query parameters (only keys that are set; text only when it is not the
    checkpoint's default)."""
    ss = st.session_state
    want: dict[str, str] = {}
    for key, url_key in URL_KEYS.items():
        value = ss.get(key)
        if value is None:
            continue
        if key == K_TEXT and (value == default_text_for(entry_for(ss.get(K_CKPT)))
                              or len(value) > max_chars()):
            continue  # the default text is implied; a text over the limit was rejected, never mirrored
        want[url_key] = str(value)
    return want


def share_link(slug: str) -> str:
    """Absolute URL that reopens page ``slug`` with the current state (the teacher's link)."""
    from urllib.parse import urlencode, urlsplit

    base = ""
    try:
        parts = urlsplit(st.context.url or "")
        if parts.scheme and parts.netloc:
            base = f"{parts.scheme}://{parts.netloc}"
    except Exception:  # noqa: BLE001 - no request context (tests)
        base = ""
    query = urlencode(state_query())
    return f"{base}/{slug}" + (f"?{query}" if query else "")


def sync_query_params() -> None:
    """Mirror the shared state into the URL (see :func:`state_query`)."""
    ss = st.session_state
    want = {**state_query(), **(ss.pop(K_PAGE_QP, None) or {})}
    if st.query_params.to_dict() != want:
        st.query_params.from_dict(want)
    ss[K_QP_WRITTEN] = want
    if ss.pop(K_NOTICE_SHOWN, False):
        # dropped only at the end of a run that completed: a run interrupted by a rerun (the browser's
        # first load can be) would otherwise lose the notice it popped
        ss.pop(K_NOTICE, None)


def show_notice() -> None:
    """Show (once) a message left by state restoration, e.g. a link to a missing checkpoint."""
    msg = st.session_state.get(K_NOTICE)
    if msg:
        st.warning(msg, icon=":material/link_off:")
        st.session_state[K_NOTICE_SHOWN] = True


def _seed(widget_key: str, state_key: str) -> None:
    st.session_state[widget_key] = st.session_state[state_key]


def _copy(widget_key: str, state_key: str) -> None:
    st.session_state[state_key] = st.session_state[widget_key]
    if state_key == K_CKPT:
        st.session_state[K_CKPT_EXPLICIT] = True


def set_checkpoint(ref: str, which: str = K_CKPT) -> None:
    """Choose checkpoint ``ref`` (callback-safe); keeps the text if it suits the new vocabulary."""
    st.session_state[which] = ref
    if which == K_CKPT:
        st.session_state[K_CKPT_EXPLICIT] = True


# ---------------------------------------------------------------- loading and tracing (cached)
def _load_uncached(path: str) -> Any:
    from geomlab import checkpoint as ckpt_mod

    ck = ckpt_mod.load(path)
    with contextlib.suppress(Exception):
        ck.model.eval()
    return ck


@st.cache_resource(max_entries=6, show_spinner="Loading checkpoint…")
def _load_checkpoint(path: str, mtime: float) -> Any:
    del mtime  # cache key: a re-saved checkpoint has a new mtime and is loaded again
    return _load_uncached(path)


def load(entry: catalog.CheckpointEntry) -> Any:
    """The loaded :class:`geomlab.checkpoint.Checkpoint` of ``entry`` (cached by path and mtime)."""
    wait_warm()
    return _load_checkpoint(str(entry.path), entry.mtime)


def vocab_of(entry: catalog.CheckpointEntry):
    """The entry's :class:`geomlab.data.vocab.Vocab`, read from its JSON (no weights needed)."""
    from geomlab.data.vocab import Vocab

    return Vocab.from_json(entry.meta.get("vocab") or {})


def default_text_for(entry: catalog.CheckpointEntry | None) -> str:
    """A demo text this checkpoint can read: the card's sample, else :data:`DEFAULT_TEXT` if every
    character is known, else a deterministic string drawn from the vocabulary. Reads only the JSON (no
    torch import: this runs on every page, Home included)."""
    if entry is None:
        return DEFAULT_TEXT
    sample = entry.card.get("sample_text")
    if isinstance(sample, str) and sample:
        return sample
    vocab = entry.meta.get("vocab") or {}
    tokens = [str(t) for t in vocab.get("tokens") or []]
    unk, level = vocab.get("unk"), vocab.get("level", "char")
    known = [t for t in tokens if t != unk]
    if not known:
        return DEFAULT_TEXT
    if level == "char":
        if all(c in tokens for c in DEFAULT_TEXT):
            return DEFAULT_TEXT
        rng = np.random.default_rng(0)
        return "".join(rng.choice(known, size=48))
    rng = np.random.default_rng(0)
    return " ".join(rng.choice(known, size=24))


def max_chars() -> int:
    """The longest text a view traces (``geomlab.trace.MAX_TEXT_CHARS`` when defined)."""
    try:
        from geomlab import trace as trace_mod

        return int(getattr(trace_mod, "MAX_TEXT_CHARS", FALLBACK_MAX_CHARS))
    except Exception:  # noqa: BLE001 - trace module not there yet
        return FALLBACK_MAX_CHARS


def check_text(entry: catalog.CheckpointEntry, text: str) -> list[str]:
    """Validate ``text`` for ``entry``'s vocabulary; returns the tokens.

    Raises ``ValueError`` with a readable message for empty text, text over :func:`max_chars` and (for
    symbol vocabularies without an unknown token) unknown symbols. Unknown characters of a character
    vocabulary are allowed (they read as the unknown token); :func:`unknown_tokens` lists them.
    """
    from geomlab.data.vocab import tokenize

    if not text or not text.strip():
        raise ValueError("The text is empty: type or paste some text to trace.")
    limit = max_chars()
    if len(text) > limit:
        raise ValueError(f"The text has {len(text):,} characters; the limit is {limit:,}. "
                         "Shorten it (views subsample long texts, but tracing is capped).")
    vocab = vocab_of(entry)
    toks = tokenize(text, vocab.level)
    if not toks:
        raise ValueError("The text has no tokens for this checkpoint.")
    if vocab.unk is None:
        bad = sorted({t for t in toks if t not in vocab})
        if bad:
            shown = ", ".join(repr(b) for b in bad[:8])
            ok = " ".join(vocab.tokens[:12]) + (" …" if len(vocab.tokens) > 12 else "")
            raise ValueError(f"Unknown symbols for this checkpoint: {shown}. It reads space-separated "
                             f"symbols from: {ok}")
    return toks


def unknown_tokens(entry: catalog.CheckpointEntry, text: str) -> list[str]:
    """Distinct tokens of ``text`` that are not in the vocabulary (they read as the unknown token)."""
    from geomlab.data.vocab import tokenize

    vocab = vocab_of(entry)
    seen: list[str] = []
    for t in tokenize(text, vocab.level):
        if t not in vocab and t not in seen:
            seen.append(t)
    return seen


def _trace_uncached(path: str, mtime: float, text: str, opts: tuple) -> Any:
    from geomlab import trace as trace_mod

    ck = _load_checkpoint(path, mtime)
    if ck.vocab is None:
        raise ValueError("This checkpoint has no vocabulary (a real-valued task), so it cannot read text.")
    kwargs = dict(opts)
    steps = kwargs.pop("steps", None)
    if steps:
        tokens = trace_mod.encode_text(ck.vocab, text)
        return trace_mod.trace_cem_steps(ck.model, tokens, int(steps), vocab=ck.vocab, text=text)
    return trace_mod.trace_text(ck.model, ck.vocab, text)


@st.cache_data(max_entries=64, show_spinner="Tracing the text through the model…")
def _trace(path: str, mtime: float, text: str, opts: tuple) -> Any:
    return _trace_uncached(path, mtime, text, opts)


def trace_for(entry: catalog.CheckpointEntry, text: str, **opts: Any) -> Any:
    """The cached trace of ``text`` through ``entry``'s model (``opts``: e.g. CEM ``steps``)."""
    wait_warm()
    return _trace(str(entry.path), entry.mtime, text, tuple(sorted(opts.items())))


# ---------------------------------------------------------------- widgets
def checkpoint_picker(where: Any = None, key: str = K_CKPT, label: str = "Checkpoint",
                      kinds: tuple[str, ...] | None = None, help: str | None = None,
                      only: bool = False) -> catalog.CheckpointEntry | None:
    """Selectbox over the catalog bound to state ``key``; checkpoints of ``kinds`` are listed first (or,
    with ``only``, exclusively). Returns the chosen entry or None when nothing can be listed."""
    where = where or st.sidebar
    all_entries = entries()
    if kinds and only:
        all_entries = [e for e in all_entries if e.kind in kinds]
    if not all_entries:
        return None
    if kinds:
        all_entries = ([e for e in all_entries if e.kind in kinds]
                       + [e for e in all_entries if e.kind not in kinds])
    refs = [e.ref for e in all_entries]
    if st.session_state.get(key) not in refs:
        st.session_state[key] = refs[0]
    by_ref = {e.ref: e for e in all_entries}
    wkey = "w_" + key
    _seed(wkey, key)

    shorts = short_labels(all_entries)

    def label_of(ref: str) -> str:
        e = by_ref[ref]
        mark = "" if not kinds or e.kind in kinds else " (not for this view)"
        src = "" if e.source == "bundled" else " · yours"
        return f"{shorts[ref]}{src}{mark}"

    where.selectbox(label, refs, format_func=label_of, key=wkey, on_change=_copy, args=(wkey, key),
                    help=help or "Bundled checkpoints first, then yours (newest first). Upload or train "
                                 "more on the Checkpoints and Train live pages.")
    chosen = by_ref[st.session_state[key]]
    where.caption(chosen.title)  # the full title (kind · group · params · corpus) under the short option
    return chosen


def short_labels(found: list[catalog.CheckpointEntry]) -> dict[str, str]:
    """``ref -> label`` short enough for the sidebar select: the name without a trailing ``-<corpus>``
    (the caption under the select names it) plus the parameter count, e.g. ``osmformer-o-linear · 88k``;
    names are kept whole where dropping the corpus would make two labels equal. Design choice."""
    def params(e: catalog.CheckpointEntry) -> str:
        n = e.params
        if not n:
            return ""
        return " · " + (f"{n / 1e6:.1f}M" if n >= 1_000_000 else f"{n / 1e3:.0f}k" if n >= 1_000 else str(n))

    def stem(e: catalog.CheckpointEntry) -> str:
        suffix = f"-{e.corpus}"
        return e.name[:-len(suffix)] if e.corpus and e.name.endswith(suffix) and e.name != suffix else e.name

    stems = [stem(e) for e in found]
    return {e.ref: (s if stems.count(s) == 1 else e.name) + params(e) for e, s in zip(found, stems)}


def text_box(entry: catalog.CheckpointEntry | None, where: Any = None) -> str:
    """Text area bound to the shared text; filled with the checkpoint's default text when unset."""
    where = where or st.sidebar
    if st.session_state.get(K_TEXT) is None:
        st.session_state[K_TEXT] = default_text_for(entry)
    _seed("w_text", K_TEXT)
    where.text_area("Text", key="w_text", on_change=_copy, args=("w_text", K_TEXT), height=110,
                    help=f"The text every view traces (at most {max_chars():,} characters). "
                         "Press Ctrl+Enter or click outside to apply.")

    def reset() -> None:
        st.session_state[K_TEXT] = default_text_for(entry_for(st.session_state.get(K_CKPT)))

    where.button("Use the default text", on_click=reset, key="w_text_reset", type="tertiary")
    return st.session_state[K_TEXT]


def token_label(tok: str) -> str:
    """A readable label for a token (spaces and newlines made visible)."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(tok, tok)


def cursor_control(tokens: list[str], where: Any = None) -> int:
    """Token cursor slider bound to ``gl_pos`` (clamped to the text); returns the position."""
    where = where or st
    n = len(tokens)
    pos = st.session_state.get(K_POS)
    pos = 0 if pos is None else max(0, min(int(pos), n - 1))
    st.session_state[K_POS] = pos
    if n == 1:
        where.caption("Token cursor: position 0 (the text has one token).")
        return 0
    _seed("w_pos", K_POS)
    where.select_slider(
        "Token cursor", options=list(range(n)), key="w_pos", on_change=_copy, args=("w_pos", K_POS),
        format_func=lambda i: f"{i} · {token_label(tokens[i])}",
        help="Choose a position: it is highlighted in every figure on the page, and kept when you "
             "switch pages.")
    return st.session_state[K_POS]


def int_control(label: str, state_key: str, lo: int, hi: int, default: int, where: Any = None,
                help: str | None = None) -> int:
    """An integer slider bound to a shared state key (e.g. the layer), clamped to ``[lo, hi]``."""
    where = where or st
    v = st.session_state.get(state_key)
    v = default if v is None else max(lo, min(int(v), hi))
    st.session_state[state_key] = v
    if hi <= lo:
        return lo
    wkey = "w_" + state_key
    _seed(wkey, state_key)
    where.slider(label, lo, hi, key=wkey, on_change=_copy, args=(wkey, state_key), help=help)
    return st.session_state[state_key]


# ---------------------------------------------------------------- figures
PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}


def chart(fig: go.Figure, key: str, filename: str = "geomlab", narrow: bool = False) -> None:
    """Draw a Plotly figure at the container's width with the PNG download button in its toolbar
    (``narrow``: it sits in a half-width column)."""
    if narrow and any(k.startswith("scene") for k in fig.layout.to_plotly_json()):
        # half-width 3-D figures: legend under the scene so it does not cover the colour bar
        fig = go.Figure(fig)
        fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0})
    cfg = json.loads(json.dumps(PLOTLY_CONFIG))
    cfg["toImageButtonOptions"]["filename"] = filename
    st.plotly_chart(fig, key=key, config=cfg, width="stretch")


def highlight_position(fig: go.Figure, pos: int) -> go.Figure:
    """Fallback cursor highlight: a dashed vertical line at ``pos`` on every x axis titled 'position'.

    Used only for figures that do not take a cursor themselves (design choice)."""
    layout = fig.layout
    for name in [k for k in layout if k.startswith("xaxis")]:
        axis = layout[name]
        title = (axis.title.text or "").lower() if axis.title else ""
        if "position" in title:
            suffix = name[len("xaxis"):]
            fig.add_vline(x=pos, line_dash="dot", line_color="#d62728", line_width=1.5,
                          xref=f"x{suffix}" if suffix else "x")
    return fig


# ---------------------------------------------------------------- downloads
def trace_json(tr: Any) -> str:
    """The trace as one JSON document: metadata plus every array as nested lists (complex arrays as
    ``{"real": ..., "imag": ...}``). Design choice: for tools that do not read ``.npz``."""
    def arr(a: np.ndarray) -> Any:
        a = np.asarray(a)
        if np.iscomplexobj(a):
            return {"real": np.round(a.real, 6).tolist(), "imag": np.round(a.imag, 6).tolist()}
        if a.dtype.kind == "f":
            return np.round(a, 6).tolist()
        return a.tolist()

    doc = {"kind": tr.kind, "family": tr.family, "text": tr.text, "labels": list(tr.labels),
           "config": tr.config, "group": getattr(tr, "group", None), "tokens": arr(tr.tokens),
           "arrays": {k: arr(v) for k, v in tr.array_fields().items()},
           "extras": {k: arr(v) for k, v in tr.extras.items()}}
    return json.dumps(doc, default=str)


def trace_downloads(tr: Any, stem: str, where: Any = None) -> None:
    """Two download buttons: the trace as ``.npz`` (``geomlab.trace.load_trace`` reads it back and
    reproduces the view) and as plain JSON. Both are built only when clicked."""
    where = where or st
    from geomlab import trace as trace_mod

    c1, c2 = where.columns(2)
    c1.download_button("Trace (.npz)", lambda: trace_mod.trace_bytes(tr), file_name=f"{stem}.trace.npz",
                       mime="application/octet-stream", icon=":material/download:", on_click="ignore",
                       key=f"dl-npz-{stem}",
                       help="Load it back with geomlab.trace.load_trace: it reproduces this view exactly.")
    c2.download_button("Trace (.json)", lambda: trace_json(tr), file_name=f"{stem}.trace.json",
                       mime="application/json", icon=":material/data_object:", on_click="ignore",
                       key=f"dl-json-{stem}")


# ---------------------------------------------------------------- messages
def no_checkpoint_message() -> None:
    """The empty-catalog message, with links to train or upload one."""
    st.info("No checkpoint is available yet. Train a tiny model in a minute on **Train live**, or upload "
            "a `.safetensors` + `.json` pair on **Checkpoints**.", icon=":material/info:")
    c1, c2 = st.columns(2)
    c1.page_link(page_path("train"), label="Train live", icon=":material/model_training:")
    c2.page_link(page_path("checkpoints"), label="Checkpoints", icon=":material/inventory_2:")


def wrong_kind_message(view: View, entry: catalog.CheckpointEntry) -> None:
    """Explain that ``entry`` cannot be shown by ``view`` and offer fitting checkpoints."""
    st.warning(f"**{view.title}** shows {view.family} models ({', '.join(view.kinds)}); "
               f"the chosen checkpoint is a `{entry.kind}`.", icon=":material/swap_horiz:")
    fitting = [e for e in entries() if e.kind in view.kinds]
    if not fitting:
        st.caption("No such checkpoint is available: train one on Train live.")
        st.page_link(page_path("train"), label="Train live", icon=":material/model_training:")
        return
    cols = st.columns(min(3, len(fitting)))
    for i, e in enumerate(fitting[:6]):
        cols[i % len(cols)].button(f"Use {e.name}", key=f"use-{view.slug}-{e.ref}", on_click=set_checkpoint,
                                   args=(e.ref,), help=e.title)


# ---------------------------------------------------------------- checkpoint metrics
METRIC_LABEL = {"BPC": "BPC ↓", "accuracy": "accuracy ↑"}


def fmt_metric(value: float | None) -> str:
    """A metric value for a table cell or a card line: three decimals, ``'–'`` when missing."""
    return "–" if value is None else f"{value:.3f}"


def summary_rows(found: list[catalog.CheckpointEntry]) -> list[dict[str, Any]]:
    """Table rows of :meth:`catalog.CheckpointEntry.summary` with the headline metric made readable: a
    ``metric`` column ("BPC ↓" for language models, "accuracy ↑" for word problems) and its ``valid`` /
    ``test`` values as text ('–' when the card has none, never ``None``)."""
    rows = []
    for e in found:
        row = e.summary()
        row["metric"] = METRIC_LABEL.get(row["metric"], row["metric"])
        row["valid"], row["test"] = fmt_metric(row["valid"]), fmt_metric(row["test"])
        rows.append(row)
    return rows


def metric_facts(entry: catalog.CheckpointEntry) -> list[str]:
    """Markdown fragments of a card summary: ``valid BPC **2.464**``, ``test BPC 2.5`` or, for a word
    problem, ``valid accuracy **0.986**``, ``test accuracy 0.979`` (missing values left out)."""
    name, valid, test = entry.metric
    return [f for f in (f"valid {name} **{valid:.3f}**" if valid is not None else None,
                        f"test {name} {test:.3f}" if test is not None else None) if f]


def accuracy_by_length_line(entry: catalog.CheckpointEntry) -> str | None:
    """One line for a word-problem card: ``final-position accuracy by length (chance 1/120 = 0.008): L=2
    1.00 · … · L=128 0.36``; None for other checkpoints or a card without the curve."""
    curve = entry.accuracy_by_length
    if not entry.is_word_problem or not curve:
        return None
    n = entry.n_outputs
    chance = f" (chance 1/{n} = {1 / n:.3f})" if n else ""
    return (f"final-position accuracy by length{chance}: "
            + " · ".join(f"L={k} {v:.2f}" for k, v in curve.items()))


def fmt_seconds(s: float | None) -> str:
    """Compact duration for narrow metric tiles: ``75.2`` -> ``'1:15'``, ``3725`` -> ``'1:02:05'``,
    ``9`` -> ``'9 s'``; None/inf -> ``'–'``."""
    if s is None or not math.isfinite(s):
        return "–"
    s = int(round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60}:{s % 60:02d}"
    return f"{s // 3600}:{(s % 3600) // 60:02d}:{s % 60:02d}"


def is_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")

