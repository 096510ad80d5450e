"""Page state and the URL: the session keys the app owns and their mirror in the address bar.

===================  =========  ========================================================================
state key            URL key    meaning
===================  =========  ========================================================================
``gl_ckpt``          ``ckpt``   catalog ref of the chosen checkpoint (``bundled/NAME``, ``runs/NAME``)
``gl_ckpt_b``        ``b``      second checkpoint of the Compare page
``gl_text``          ``text``   the text every view traces (omitted from the URL when it is the default)
``gl_pos``           ``pos``    token cursor (0-based position), highlighted in every figure
``gl_layer``         ``layer``  layer shown by views that show one layer at a time
``gl_steps``         ``T``      CEM recursion steps at inference (CEM energy; side A of Compare)
``gl_steps_b``       ``TB``     CEM recursion steps at inference of Compare's side B
``gl_compare_view``  ``view``   the view Compare shows side by side (a view page's slug)
``gl_head``          ``head``   attention head (0-based; left out for the mean over heads)
``gl_slot``          ``slot``   Grassmann offset slot (left out for the first)
``gl_block``         ``block``  CEM sub-block of the token heatmap (1 = MLP; left out for attention, 0)
``gl_substep``       ``substep``  OSM update of the generator heatmap (left out for the first)
``gl_more_figures``  ``more``   ``1`` when a view page's "More figures" switch is on
``gl_compare_layout``  ``layout``  ``side`` when Compare shows A | B side by side (left out for stacked)
===================  =========  ========================================================================

The state is kept across pages; the URL of a page carries only the keys that page uses
(:func:`page_url_keys`: a view page ``ckpt``, ``text``, ``pos``, ``more`` and its own controls (``layer``,
``head``, ``slot``, ``block``, ``substep``; on CEM energy ``T``); Compare those of its view and ``b``,
``view``, ``T``, ``TB``, ``layout``; Train, Home and Checkpoints none of them), plus the
page's own keys (:data:`K_PAGE_QP`, e.g. Train's run id) and ``debug`` as typed. A link may still carry
any key: it is adopted into the state wherever it is opened, then left out of that page's URL.

Widgets use keys ``w_*``; each widget is seeded from its state key before it is drawn and copies its value
back in an ``on_change`` callback (:func:`seed`, :func:`copy`; the pattern recommended against
streamlit#5813 and friends).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import streamlit as st

from app_pages import _data as data
from geomlab.teach import views

K_CKPT, K_CKPT_B, K_TEXT, K_POS, K_LAYER, K_STEPS, K_STEPS_B, K_VIEW = (
    "gl_ckpt", "gl_ckpt_b", "gl_text", "gl_pos", "gl_layer", "gl_steps", "gl_steps_b", "gl_compare_view")
#: Session keys of the registry's per-view choice controls (``head`` stores -1 for the mean over heads).
K_HEAD, K_SLOT, K_BLOCK, K_SUBSTEP = "gl_head", "gl_slot", "gl_block", "gl_substep"
K_MORE = "gl_more_figures"       # the view pages' "More figures" switch (one for every view page)
K_LAYOUT = "gl_compare_layout"   # Compare: "stacked" (A above B) or "side" (A | B)
K_WI, K_WI_SIZE = "gl_whatif", "gl_whatif_size"  # the view pages' "What if" panel: intervention, its size
K_PATCH, K_PATCH_AT = "gl_patch", "gl_patch_at"  # its patching sweep: the cursor token's stand-in, target offset
#: The What-if state (the panel and its patching sweep): on a view page each change of it is an entry of the
#: browser's history, and Back / Forward restore it (:func:`browser_history`). Design choice.
HISTORY_KEYS = (K_WI, K_WI_SIZE, K_PATCH, K_PATCH_AT)
URL_KEYS = {K_CKPT: "ckpt", K_CKPT_B: "b", K_TEXT: "text", K_POS: "pos", K_LAYER: "layer", K_STEPS: "T",
            K_STEPS_B: "TB", K_VIEW: "view", K_HEAD: "head", K_SLOT: "slot", K_BLOCK: "block",
            K_SUBSTEP: "substep", K_MORE: "more", K_LAYOUT: "layout", K_WI: "wi", K_WI_SIZE: "wis",
            K_PATCH: "patch", K_PATCH_AT: "pat"}
_INT_KEYS = {K_POS, K_LAYER, K_STEPS, K_STEPS_B, K_HEAD, K_SLOT, K_BLOCK, K_SUBSTEP, K_PATCH_AT}
#: Control state key -> the registry's control name (the controls a view lists in ``ViewSpec.controls``).
CONTROL_KEYS = {K_LAYER: "layer", K_HEAD: "head", K_SLOT: "slot", K_BLOCK: "block", K_SUBSTEP: "substep",
                K_STEPS: "steps"}
#: The state a user changes by working with a view (its text, the cursor, a control, What if and its patching
#: sweep; not "More figures", which only shows more): a change of it while a stand-in is on screen makes the
#: stand-in the choice (:func:`standin_acted`). Design choice.
ACTION_KEYS = (K_TEXT, K_POS, *CONTROL_KEYS, *HISTORY_KEYS)
#: Values left out of the URL: a control at its first choice, the switch off, the stacked layout.
URL_DEFAULTS = {K_HEAD: -1, K_SLOT: 0, K_BLOCK: 0, K_SUBSTEP: 0, K_MORE: False, K_LAYOUT: "stacked"}
LAYOUTS = ("stacked", "side")
K_NOTICE = "_gl_notice"          # one-line message to show once (e.g. a bad link)
K_NOTICE_SHOWN = "_gl_notice_shown"  # the notice was drawn in this run (cleared after a completed run)
K_QP_WRITTEN = "_gl_qp_written"  # the query params this app wrote last (to tell links from our own)
K_CKPT_EXPLICIT = "_gl_ckpt_explicit"  # True when gl_ckpt was chosen by the user (a link, a pick, a save)
K_PAGE_QP = "_gl_page_qp"        # extra URL keys of the current page only (e.g. Train's run id), set per run
K_OWNER = "_gl_owner"            # this session's owner token: what it created (runs, saves, uploads) is its own
K_STANDIN = "_gl_standin"        # a view showing a stand-in for the chosen checkpoint (see standin / restore_choice)
K_B_AUTO = "_gl_b_auto"          # (A ref, B ref, how) when Compare chose B to go with A (not the user)
K_INT_DEFAULTS = "gl_int_defaults"  # {state key: the default an integer control gave it, not yet moved by the user}
K_VIEW_FOR = "_gl_view_for"      # (A ref, B ref) the Compare view was chosen for by a click, or "link"
K_TEXT_NEW = "_gl_text_new"      # the text was changed in this session (typed, reset, followed): no cursor notice
K_FROM_VIEW = "_gl_from_view"    # the view page shown last (its slug), until Compare opens on it (compare.choose_view)
#: URL keys the app reads but never writes itself (kept as the visitor typed them).
PASSTHROUGH_KEYS = ("debug",)


def page_path(slug: str) -> str:
    """Path of a page file relative to the app root (what ``st.Page``/``st.page_link`` want)."""
    return f"app_pages/{slug}.py"


def seed(widget_key: str, state_key: str) -> None:
    """Set a widget's value from its state key before the widget is drawn."""
    st.session_state[widget_key] = st.session_state[state_key]


def copy(widget_key: str, state_key: str) -> None:
    """``on_change`` callback: copy a widget's value into its state key (a checkpoint pick is explicit and
    ends any stand-in, see :func:`standin`; the text follows it as :func:`set_checkpoint` says)."""
    if state_key in (K_CKPT, K_CKPT_B):
        set_checkpoint(st.session_state[widget_key], state_key)
        return
    if state_key == K_TEXT:
        set_text(st.session_state[widget_key])
        return
    st.session_state[state_key] = st.session_state[widget_key]
    st.session_state.get(K_INT_DEFAULTS, {}).pop(state_key, None)  # chosen now, even if equal to the default


def set_checkpoint(ref: str, which: str = K_CKPT) -> None:
    """Choose checkpoint ``ref`` (callback-safe). The shared text is kept, unless it is still the previous
    checkpoint's default text: then it becomes ``ref``'s default text (:func:`text_follows`)."""
    ss = st.session_state
    before = ss.get(which)
    ss[which] = ref
    ss.get(K_INT_DEFAULTS, {}).pop(which, None)
    if which == K_CKPT:
        ss[K_CKPT_EXPLICIT] = True
        ss.pop(K_STANDIN, None)
        text_follows(before, ref)
    elif which == K_CKPT_B:
        ss.pop(K_B_AUTO, None)  # B is the user's pick now, kept when A changes


def set_text(text: str) -> None:
    """Set the shared text from this session (typed, reset, cut, followed), marking a change so that the
    cursor moves inside it without a notice (:data:`K_TEXT_NEW`; a link's text is set by :func:`init_state`)."""
    ss = st.session_state
    if ss.get(K_TEXT) != text:
        ss[K_TEXT_NEW] = True
    ss[K_TEXT] = text


def text_follows(before: str | None, ref: str) -> None:
    """Make the shared text checkpoint ``ref``'s default text when it is still checkpoint ``before``'s default
    (nobody chose it: a Shakespeare model's text would be unknown symbols to a word-problem model, and the
    reverse). A text the user typed or a link gave is never replaced: a page that cannot read it says why.
    Design choice."""
    text, new, old = st.session_state.get(K_TEXT), data.entry_for(ref), data.entry_for(before)
    if text is not None and new is not None and old is not None and text == data.default_text_for(old):
        set_text(data.default_text_for(new))


def standin(slug: str, chosen: str, shown: str, how: str) -> None:
    """Record that view ``slug`` shows checkpoint ``shown`` in place of the chosen ``chosen``, which it
    cannot show (``how``: how the two are related, from :func:`geomlab.teach.views.related_kinds`). ``gl_ckpt``
    becomes ``shown`` (so the page, its link and its URL name what is on screen); the record keeps the
    page's message up while ``shown`` is on screen there and only looked at, and :func:`restore_choice` gives
    the chosen one back on any other page but Compare (which shows ``shown`` as its A and keeps the record, so
    that the next page still gives the chosen one back). A pick, a link, or
    working with ``shown`` on that page (:func:`standin_acted`) ends it. The text follows the stand-in as :func:`text_follows`
    says, and also when the two read different inputs (a word problem's group elements against characters:
    a tour step's ``12340 10234`` would be unknown symbols to a Shakespeare model); the chosen checkpoint's
    text comes back with it while the stand-in's is untouched. Design choice (no silent switches)."""
    ss = st.session_state
    text, explicit = ss.get(K_TEXT), bool(ss.get(K_CKPT_EXPLICIT, False))
    ss[K_CKPT] = shown
    ss[K_CKPT_EXPLICIT] = False
    text_follows(chosen, shown)
    old, new = data.entry_for(chosen), data.entry_for(shown)
    if old is not None and new is not None and old.is_word_problem != new.is_word_problem:
        set_text(data.default_text_for(new))
    ss[K_STANDIN] = {"slug": slug, "chosen": chosen, "shown": shown, "how": how, "text": text,
                     "shown_text": ss.get(K_TEXT), "explicit": explicit}


def accept_standin() -> None:
    """The checkpoint a view stood in becomes the user's choice (the user worked with it, see
    :func:`standin_acted`, or pressed "Keep it"): the record and its message end, and other pages keep it too."""
    ss = st.session_state
    if ss.pop(K_STANDIN, None):
        ss[K_CKPT_EXPLICIT] = True


def _action_state() -> tuple:
    return tuple(st.session_state.get(k) for k in ACTION_KEYS)


def note_standin_state(slug: str) -> None:
    """At the end of a run of view ``slug`` (None: of Compare, showing any view's stand-in as its A): while
    the stand-in is on screen, remember the :data:`ACTION_KEYS` state the page left, which
    :func:`standin_acted` compares the next run's with."""
    rec = current_standin(slug)
    if rec is not None:
        rec["seen"] = _action_state()


def standin_acted() -> bool:
    """Make the stand-in the user's choice (:func:`accept_standin`) when :data:`ACTION_KEYS` changed since its
    view last drew (:func:`note_standin_state`): the user moved the cursor, typed or reset a text, changed a
    control, or turned What if or its patching sweep on or changed them, by a widget, a click on a chart or a
    token. Using a model counts as choosing it (a later page keeps it). Every such action goes through this
    state, whichever callback made it; the check runs first in a view's run (:func:`restore_choice` on a
    whole run) and on the next page. True when it made the stand-in the choice. Design choice."""
    rec = st.session_state.get(K_STANDIN)
    if rec and "seen" in rec and rec["seen"] != _action_state():
        accept_standin()
        return True
    return False


def current_standin(slug: str | None) -> dict | None:
    """The stand-in record of view ``slug`` (None: of any view) while its stand-in is the checkpoint on
    screen, else None."""
    rec = st.session_state.get(K_STANDIN)
    if rec and slug in (None, rec.get("slug")) and rec.get("shown") == st.session_state.get(K_CKPT):
        return rec
    return None


def restore_choice(slug: str | None = None, keep: bool = False) -> None:
    """Give the chosen checkpoint back on a page other than the view that stood another one in for it
    (``slug``: the page now drawn; a view page, Compare or Checkpoints call it first). With ``keep`` the
    page shows the stand-in instead, the checkpoint that was on screen (Compare's A: what the user was
    looking at), and the record stays: looking at it there chooses nothing, and the next page gives the
    chosen one back as if that page had been opened from the view. A record whose stand-in is no longer
    the selection (something else was chosen) is dropped, and one the user worked with becomes the choice
    (:func:`standin_acted`). Design choice."""
    ss = st.session_state
    rec = ss.get(K_STANDIN)
    if not rec:
        return
    if rec.get("shown") != ss.get(K_CKPT) or data.entry_for(rec.get("chosen")) is None:
        ss.pop(K_STANDIN, None)
        return
    if standin_acted():
        return
    if not keep and rec.get("slug") != slug:
        ss[K_CKPT] = rec["chosen"]
        ss[K_CKPT_EXPLICIT] = rec.get("explicit", False)
        if ss.get(K_TEXT) == rec.get("shown_text") and rec.get("text") is not None:
            set_text(rec["text"])  # the chosen checkpoint's own text, unless the stand-in's was changed
        ss.pop(K_STANDIN, None)


OWNER_COOKIE = "geomlab_owner"
"""Name of the browser cookie that keeps this browser's owner token across reloads (never in a URL)."""
OWNER_COOKIE_DAYS = 30
K_OWNER_COOKIE = "_gl_owner_cookie"  # the token this session has written into the browser's cookie


def owner_token() -> str:
    """This browser's owner token (random, 32 hex digits): the runs, Train live saves and uploads a session
    creates are recorded under it, and only it may change them (unless the server runs with
    ``GEOMLAB_SHARED_RUNS=1``). A new session adopts the token in the browser's :data:`OWNER_COOKIE` (a
    reload, another tab of the same browser); otherwise it makes one, which :func:`remember_owner` stores
    in that cookie. No URL ever carries it, so a copied address shares a view or a run to watch, never
    control of it. Design choice."""
    ss = st.session_state
    token = ss.get(K_OWNER)
    if not is_owner_token(token):
        token = cookie_token()
        if token is None:
            import secrets

            token = secrets.token_hex(16)
        ss[K_OWNER] = token
    return token


def cookie_token() -> str | None:
    """The owner token in the browser's cookie, or None (no cookie, a malformed one, or no browser)."""
    try:
        value = st.context.cookies.get(OWNER_COOKIE)
    except Exception:  # noqa: BLE001 - no request context (bare mode)
        return None
    return value if is_owner_token(value) else None


def is_owner_token(value: Any) -> bool:
    """Whether ``value`` has the form of an owner token (32 lower-case hex digits)."""
    return isinstance(value, str) and len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def remember_owner() -> None:
    """Once this session has an owner token that the browser's cookie does not hold yet, write it there
    (a zero-size script: Streamlit cannot set cookies from the server), so a reload keeps control of what
    this session created. Called at the end of every page run."""
    ss = st.session_state
    token = ss.get(K_OWNER)
    if not is_owner_token(token) or ss.get(K_OWNER_COOKIE) == token or cookie_token() == token:
        return
    age = OWNER_COOKIE_DAYS * 86_400
    st.html(f"<script>document.cookie = '{OWNER_COOKIE}={token}; path=/; max-age={age}; SameSite=Strict';"
            "</script>", unsafe_allow_javascript=True)
    ss[K_OWNER_COOKIE] = token


def _coerce(key: str, value: str) -> Any:
    if key in _INT_KEYS:
        return int(value)
    if key == K_WI_SIZE:
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(value)
        return value
    if key == K_MORE:
        flag = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}.get(value.lower())
        if flag is None:
            raise ValueError(value)
        return flag
    return value


def quoted(value: str, limit: int = 60) -> str:
    """A link's value as a notice quotes it: ``repr``, cut to ``limit`` characters with an ellipsis (a value
    of megabytes is named, never repeated in full)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _not_read(key: str, value: str) -> str:
    """Why a link's value could not be read as the value of state key ``key`` (the end of its notice)."""
    if key == K_MORE:
        return "not 0 or 1."
    if key in _INT_KEYS:
        try:
            float(value)
        except ValueError:
            return "not a number."
        return "not a whole number."  # 1e30, 1.5, 1e3, inf, nan
    return "not a number."


K_PATH_CHECKED = "_gl_path_checked"  # the session's first URL path was checked against the pages


def check_page_path(known: set[str]) -> None:
    """On a session's first run, leave a notice when the browser's URL names a page that does not exist
    (Streamlit then opens the default page and says so only in the browser console). ``known``: the pages'
    ``url_path`` values. Source: design choice."""
    ss = st.session_state
    if ss.get(K_PATH_CHECKED):
        return
    ss[K_PATH_CHECKED] = True
    tail = url_page()
    if tail and tail not in known:
        note = (f"There is no page {('/' + tail)[:80]!r}; this is Home. The sidebar lists every page.")
        ss[K_NOTICE] = " ".join(x for x in (ss.get(K_NOTICE), note) if x)


def url_page() -> str | None:
    """The page the browser's address names: its path after the server's base path, without slashes (``""``
    for Home, ``"trajectories"``, or a page that does not exist), or None with no browser behind this
    session (AppTest, bare mode)."""
    try:
        from urllib.parse import unquote, urlparse

        path = unquote(urlparse(st.context.url or "").path)
    except Exception:  # noqa: BLE001 - no request context
        return None
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    tail = path.strip("/")
    if base and (tail == base or tail.startswith(base + "/")):
        tail = tail[len(base):].strip("/")
    return tail


def history_navigation() -> bool:
    """Whether this run was started by the browser's Back or Forward button (Streamlit's run context knows:
    its frontend reruns the app with the query string of the history entry it went to)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx and getattr(ctx, "is_history_navigation", False))


def init_state() -> None:
    """Create the shared keys once and adopt values from the URL when the URL did not come from us
    (a fresh session opened from a link, or ``st.page_link(..., query_params=...)``)."""
    ss = st.session_state
    for key in URL_KEYS:
        ss.setdefault(key, None)
    qp = st.query_params.to_dict()
    notes: list[str] = []
    if qp and qp != ss.get(K_QP_WRITTEN):
        ss.pop(K_STANDIN, None)  # a link names what to show
        if "b" in qp:
            ss.pop(K_B_AUTO, None)
        for key, url_key in URL_KEYS.items():
            if url_key not in qp:
                continue
            try:
                value = _coerce(key, qp[url_key])
            except ValueError:
                notes.append(f"Ignored the link's {url_key}={quoted(qp[url_key])}: " + _not_read(key, qp[url_key]))
                continue
            if key in (K_CKPT, K_CKPT_B) and data.entry_for(value) is None:
                notes.append(f"The link names checkpoint {quoted(value)}, which is not here (the page goes on with "
                             "its usual choice). See the Checkpoints page for what is available.")
                continue
            if key == K_VIEW and value not in views.VIEWS:
                notes.append(f"Ignored the link's {url_key}={quoted(qp[url_key])}: not a view (one of "
                             f"{', '.join(views.VIEWS)}).")
                continue
            if key == K_LAYOUT and value not in LAYOUTS:
                notes.append(f"Ignored the link's {url_key}={quoted(qp[url_key])}: not one of {', '.join(LAYOUTS)}.")
                continue
            if (key in _INT_KEYS and key not in (K_STEPS, K_STEPS_B) and value < 0
                    or key in (K_STEPS, K_STEPS_B) and value < 1):
                need = ("at least 1" if key in (K_STEPS, K_STEPS_B) else "a position ≥ 0" if key in (K_POS, K_PATCH_AT)
                        else f"a {url_key} ≥ 0")
                notes.append(f"Ignored the link's {url_key}={quoted(qp[url_key])}: it must be {need}.")
                continue  # left at its default, so the URL is normalised at the end of this run
            ss[key] = value
            if key == K_CKPT:
                ss[K_CKPT_EXPLICIT] = True
            if key == K_VIEW:
                ss[K_VIEW_FOR] = "link"  # Compare keeps the linked view for the pair it opens on
    if history_navigation() and url_page() in views.VIEWS:
        for key in HISTORY_KEYS:  # Back / Forward: the entry's URL is the view's What-if state, a key it lacks off
            if URL_KEYS[key] not in qp:
                ss[key] = None
    if notes:
        ss[K_NOTICE] = " ".join(notes)
    if ss[K_CKPT] is None or data.entry_for(ss[K_CKPT]) is None:
        ss[K_CKPT] = data.default_ref()
        ss[K_CKPT_EXPLICIT] = False
    if ss[K_CKPT_B] is not None and data.entry_for(ss[K_CKPT_B]) is None:
        ss[K_CKPT_B] = None


def page_url_keys(page: str | None) -> tuple[str, ...]:
    """The shared state keys page ``page`` (its ``url_path``: ``""`` for Home, a view's slug, ``"compare"``,
    ``"train"``, ...) puts in its URL, i.e. the state it uses: a view page its checkpoint, text, cursor, the
    "More figures" switch and the controls the registry gives it (layer, head, slot, block, substep, the CEM
    steps ``T``); Compare both checkpoints, the text, cursor, layer, its view, both sides' ``T``, its layout
    and the choice controls of the view it shows; every other page none (their own keys, such as
    Train's run id, come from :data:`K_PAGE_QP`). ``None``: every key (no page known). Design choice
    (a page's URL carries only what that page uses)."""
    if page is None:
        return tuple(URL_KEYS)
    view = views.VIEWS.get(page)
    if view is not None:
        return (K_CKPT, K_TEXT, K_POS, K_MORE, K_WI, K_WI_SIZE, K_PATCH, K_PATCH_AT,
                *(k for k, c in CONTROL_KEYS.items() if c in view.controls))
    if page == "compare":
        kinds = {getattr(data.entry_for(st.session_state.get(k)), "kind", None) for k in (K_CKPT, K_CKPT_B)}
        if not any(kinds & set(v.kinds) for v in views.VIEWS.values()):
            return (K_CKPT, K_CKPT_B, K_TEXT, K_POS)  # two baselines: no view, layer or layout to carry
        shown = views.VIEWS.get(st.session_state.get(K_VIEW) or "")
        controls = tuple(k for k, c in CONTROL_KEYS.items() if shown is not None and c in shown.controls
                         and k not in (K_LAYER, K_STEPS))
        return (K_CKPT, K_CKPT_B, K_TEXT, K_POS, K_LAYER, K_VIEW, K_STEPS, K_STEPS_B, K_LAYOUT, *controls)
    return ()


def state_query(page: str | None = None) -> dict[str, str]:
    """The shareable state of page ``page`` (its ``url_path``, see :func:`page_url_keys`; None: every key)
    as URL query parameters: only keys that are set; the text only when it is not the checkpoint's
    default, the cursor only when the text is not empty; on Compare a side's ``T`` only when that side is a CEM."""
    ss = st.session_state
    keys = page_url_keys(page)
    want: dict[str, str] = {}
    for key, url_key in URL_KEYS.items():
        value = ss.get(key)
        if value is None or key not in keys or key in URL_DEFAULTS and value == URL_DEFAULTS[key]:
            continue
        if key == K_MORE:
            want[url_key] = "1"
            continue
        if key == K_POS and ss.get(K_TEXT) == "":
            continue  # an empty text has no positions
        if key == K_TEXT and (value == data.default_text_for(data.entry_for(ss.get(K_CKPT)))
                              or len(value) > data.max_chars()):
            continue  # the default text is implied; a text over the limit was rejected, never mirrored
        if page == "compare" and key in (K_STEPS, K_STEPS_B):
            side = data.entry_for(ss.get(K_CKPT if key == K_STEPS else K_CKPT_B))
            if side is None or side.kind != "cem":
                continue  # only a CEM side has recursion steps
        # a whole-number float reads as one in the link (wis=-3, not -3.0)
        want[url_key] = str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    return want


def app_origin() -> str:
    """``scheme://host[:port]`` of the address this session's browser opened, or ``""`` without a request
    context (tests)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(st.context.url or "")
    except Exception:  # noqa: BLE001 - no request context (tests)
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def share_link(slug: str) -> str:
    """Absolute URL that reopens page ``slug`` with the current state (the teacher's link)."""
    from urllib.parse import urlencode

    query = urlencode(state_query(slug))
    return f"{app_origin()}/{slug}" + (f"?{query}" if query else "")


def sync_query_params(page: Any = None) -> None:
    """Mirror the state page ``page`` uses into the URL (``page``: the ``st.navigation`` page just run, or
    its ``url_path``; see :func:`state_query`), with the page's own keys (:data:`K_PAGE_QP`) and ``debug``
    kept as typed. Keys of other pages are left out of the URL, never out of the state. On a view page only a
    What-if change adds an entry to the browser's history (:func:`browser_history`, mounted by ``app.py``)."""
    ss = st.session_state
    path = getattr(page, "url_path", page)
    want = {**state_query(path), **(ss.pop(K_PAGE_QP, None) or {})}
    current = st.query_params.to_dict()
    want.update({k: current[k] for k in PASSTHROUGH_KEYS if k in current})
    repeated = any(len(st.query_params.get_all(k)) > 1 for k in st.query_params)  # lesson=a&lesson=b: the last
    if current != want or repeated:
        st.query_params.from_dict(want)
    ss[K_QP_WRITTEN] = want
    if ss.pop(K_NOTICE_SHOWN, False):
        # dropped only at the end of a run that completed: a run interrupted by a rerun (the browser's
        # first load can be) would otherwise lose the notice it popped
        ss.pop(K_NOTICE, None)


def browser_history() -> None:
    """On a view page the browser's history steps through What-if states: a change of :data:`HISTORY_KEYS` is
    a new entry, any other change of the page's URL (a cursor move, a control, the text, the address a page
    switch starts from) replaces the current entry, where Streamlit would add one for each; Compare, which has
    no What-if state, keeps one entry per visit; a page switch that reaches the browser out of order adds no
    entry of its own (:func:`history_script`). ``serve.py`` puts the script in the page's HTML, so it runs
    before Streamlit's own; ``app.py`` also mounts it here, first in every whole run (before the sidebar's
    pages), for an app started without ``serve.py``. Back and Forward rerun the app with the entry's query
    string, which :func:`init_state` reads, its missing What-if keys as off. Design choice."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if get_script_run_ctx() is None or in_fragment_rerun():
        return  # no run to draw into; a fragment's run leaves the whole run's element in place
    # the element is hidden by app.py's style (.gl-history); its script runs all the same
    st.html(f"<span class='gl-history'></span><script>{history_script(st.get_option('server.baseUrlPath') or '')}"
            "</script>", unsafe_allow_javascript=True)


def history_script(base: str) -> str:
    """The classic script that wraps the browser's ``history.pushState`` once per page (``js/history.js``),
    after the line that gives it its rule: the What-if URL keys, the paths of the view pages and Compare
    under the server's base path ``base`` (``server.baseUrlPath``), and the URL keys only those pages write.
    Safe inside ``<script>``: the rule's ``<`` and ``>`` are escaped."""
    import json

    base = base.strip("/")
    rule = {"keys": [URL_KEYS[k] for k in HISTORY_KEYS],
            "paths": ["/" + "/".join(p for p in (base, slug) if p) for slug in (*views.VIEWS, "compare")],
            "shared": list(URL_KEYS.values())}
    rule_js = json.dumps(rule).replace("<", "\\u003c").replace(">", "\\u003e")
    return f"window.__geomlabHistory = {rule_js};\n{_history_js()}"


@functools.cache
def _history_js() -> str:
    """The source of ``js/history.js`` (read once per process)."""
    return (Path(__file__).parent / "js" / "history.js").read_text(encoding="utf-8")


def in_fragment_rerun() -> bool:
    """Whether this script run reruns a fragment only, not the whole page (Streamlit's run context knows)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return bool(ctx and getattr(ctx, "fragment_ids_this_run", None))
