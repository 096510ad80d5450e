"""Page state and the URL: the session keys the app owns and their mirror in the address bar.

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

Widgets use keys ``w_*``; each widget is seeded from its state key before it is drawn and copies its value
back in an ``on_change`` callback (:func:`seed`, :func:`copy`; the pattern recommended against
streamlit#5813 and friends).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app_pages import _data as data

K_CKPT, K_CKPT_B, K_TEXT, K_POS, K_LAYER, K_STEPS, K_STEPS_B = (
    "gl_ckpt", "gl_ckpt_b", "gl_text", "gl_pos", "gl_layer", "gl_steps", "gl_steps_b")
URL_KEYS = {K_CKPT: "ckpt", K_CKPT_B: "b", K_TEXT: "text", K_POS: "pos", K_LAYER: "layer", K_STEPS: "T",
            K_STEPS_B: "TB"}
_INT_KEYS = {K_POS, K_LAYER, K_STEPS, K_STEPS_B}
#: Session keys of the registry's per-view controls (not in the URL).
K_HEAD, K_SLOT, K_BLOCK, K_SUBSTEP = "gl_head", "gl_slot", "gl_block", "gl_substep"
K_NOTICE = "_gl_notice"          # one-line message to show once (e.g. a bad link)
K_NOTICE_SHOWN = "_gl_notice_shown"  # the notice was drawn in this run (cleared after a completed run)
K_QP_WRITTEN = "_gl_qp_written"  # the query params this app wrote last (to tell links from our own)
K_CKPT_EXPLICIT = "_gl_ckpt_explicit"  # True when gl_ckpt was chosen by the user (a link, a pick, a save)
K_PAGE_QP = "_gl_page_qp"        # extra URL keys of the current page only (e.g. Train's run id), set per run
K_OWNER = "_gl_owner"            # this session's owner token: what it created (runs, saves, uploads) is its own
#: URL keys the app reads but never writes itself (kept as the visitor typed them).
PASSTHROUGH_KEYS = ("debug",)


def page_path(slug: str) -> str:
    """Path of a page file relative to the app root (what ``st.Page``/``st.page_link`` want)."""
    return f"app_pages/{slug}.py"


def seed(widget_key: str, state_key: str) -> None:
    """Set a widget's value from its state key before the widget is drawn."""
    st.session_state[widget_key] = st.session_state[state_key]


def copy(widget_key: str, state_key: str) -> None:
    """``on_change`` callback: copy a widget's value into its state key (a checkpoint pick is explicit)."""
    st.session_state[state_key] = st.session_state[widget_key]
    if state_key == K_CKPT:
        st.session_state[K_CKPT_EXPLICIT] = True


def set_checkpoint(ref: str, which: str = K_CKPT) -> None:
    """Choose checkpoint ``ref`` (callback-safe); keeps the text if it suits the new vocabulary."""
    st.session_state[which] = ref
    if which == K_CKPT:
        st.session_state[K_CKPT_EXPLICIT] = True


def owner_token() -> str:
    """This browser session's owner token (random, made once per session): the runs, Train live saves and
    uploads it creates are recorded under it, and only it may change them (unless the server runs with
    ``GEOMLAB_SHARED_RUNS=1``). The Train page keeps it in its URL (``key=``) next to the run id, so a
    reload of that page keeps control of the run; view links never carry it."""
    ss = st.session_state
    token = ss.get(K_OWNER)
    if not is_owner_token(token):
        import secrets

        token = ss[K_OWNER] = secrets.token_hex(16)
    return token


def is_owner_token(value: Any) -> bool:
    """Whether ``value`` has the form of an owner token (32 lower-case hex digits)."""
    return isinstance(value, str) and len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def adopt_owner_token(token: str) -> None:
    """Make ``token`` (from the Train page's URL, checked by the caller) this session's owner token."""
    if is_owner_token(token):
        st.session_state[K_OWNER] = token


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
            if key in (K_CKPT, K_CKPT_B) and data.entry_for(value) is None:
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
    if ss[K_CKPT] is None or data.entry_for(ss[K_CKPT]) is None:
        ss[K_CKPT] = data.default_ref()
        ss[K_CKPT_EXPLICIT] = False
    if ss[K_CKPT_B] is not None and data.entry_for(ss[K_CKPT_B]) is None:
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
        if key == K_TEXT and (value == data.default_text_for(data.entry_for(ss.get(K_CKPT)))
                              or len(value) > data.max_chars()):
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
    """Mirror the shared state into the URL (see :func:`state_query`; ``debug`` is kept as typed)."""
    ss = st.session_state
    want = {**state_query(), **(ss.pop(K_PAGE_QP, None) or {})}
    current = st.query_params.to_dict()
    want.update({k: current[k] for k in PASSTHROUGH_KEYS if k in current})
    if current != want:
        st.query_params.from_dict(want)
    ss[K_QP_WRITTEN] = want
    if ss.pop(K_NOTICE_SHOWN, False):
        # dropped only at the end of a run that completed: a run interrupted by a rerun (the browser's
        # first load can be) would otherwise lose the notice it popped
        ss.pop(K_NOTICE, None)
