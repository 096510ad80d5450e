"""The classroom in the app: a teacher opens a room from any page, students follow it (docs/rooms.md).

The room itself is :mod:`geomlab.rooms` (the store, the state, its checks); this module is what a session does
with it:

* the **teacher** (the session that opened the room; its token lives in this session's state only, never in a
  URL) publishes the page, checkpoint, text, cursor, view, controls and Tour step after each run that changed
  them, with the charts its page drew (:func:`publish`, :func:`begin_run`, :func:`charts_json`); a small timed
  fragment shows how many students follow and keeps the room alive;
* a **student** (a session opened with ``?room=CODE`` or a typed code) learns of a change from its browser:
  the page's listener (:func:`listener`, ``js/room_listener.js``) holds a long poll of the server's follow
  channel (:mod:`geomlab.rooms.watch`, mounted by ``serve.py``). A change of the cursor alone redraws the
  page's charts from the teacher's, with no run of this session; any other change reruns this session,
  which writes the teacher's state into it (:func:`follow`) and shows the teacher's page. Without the
  channel (``streamlit run app.py``) the student polls the room from the timed fragment every
  :data:`POLL_S` seconds instead. "Explore on my own" stops following, "Follow the teacher" comes back in
  one click. The channel's requests (or the fragment's polls) count the student present, following or
  exploring, so the teacher sees how many do which.

A student's session never writes the room's state (it holds no token); its URL parameters change only its
own session. A lost store (:class:`geomlab.rooms.RoomsUnavailable`) is a message in the panel: the session
follows nothing and tries again every :data:`RETRY_S` seconds.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import threading
import time
from typing import Any, Iterator

import streamlit as st

from app_pages import _data as data
from app_pages import _state as state
from app_pages._live_chart import K_DRAWN, module_component, traces_digest
from geomlab import rooms
from geomlab.rooms.store import MAX_CHARTS_BYTES
from geomlab.rooms.watch import PREFIX
from geomlab.teach import views

K_CODE, K_TOKEN, K_MODE = "_gl_room_code", "_gl_room_token", "_gl_room_mode"  # mode: follow | explore
K_CLIENT, K_SEEN = "_gl_room_client", "_gl_room_seen"  # client id; last version applied (student)
K_SENT, K_BEAT = "_gl_room_sent", "_gl_room_beat"  # last published state dict (teacher); last heartbeat time
K_ERROR, K_ERROR_AT = "_gl_room_error", "_gl_room_error_at"  # the store's error line and when it happened
K_PAGE = "_gl_room_page"  # url_path of the page this session shows (set by every full run)
K_LEFT = "_gl_room_left"  # the code of the room this session left (its link still in the address bar)
K_SHOWN, K_AWAY = "_gl_room_shown", "_gl_room_away"  # this session as it drew the room's state (student); away?
K_LESSON, K_STEP, K_APPLIED = "gl_tour_lesson", "gl_tour_step", "_gl_tour_applied"  # app_pages/tour.py's keys
K_STATE = "_gl_room_state"  # student: the room's state (a dict) applied last
K_QR = "_gl_room_qr"  # teacher: the code and QR dialog is open (until dismissed)
K_NOCHANNEL = "_gl_room_nochannel"  # student: the server has no follow channel (poll from the fragment)
POLL_S = 0.5   # seconds between the Classroom box's timed runs (design choice: a redraw within a second)
BEAT_S = 5.0   # seconds between heartbeats (the store counts a student present for 30 s)
RETRY_S = 10.0  # seconds before a session tries a lost store again (each try may wait ~2 s)
CATCH_UP_S = 2.5  # default quiet time (s) before a student's session catches up on the charts it redrew
FOLLOW_RUNS = 1  # following students' whole runs at once in one server process (:func:`turn`)
#: Session keys a room carries as controls (the page's choices beyond checkpoint, text and cursor).
CONTROLS = {k: k.removeprefix("gl_") for k in state.URL_KEYS if k not in (state.K_CKPT, state.K_TEXT, state.K_POS)}


def role() -> str | None:
    """``"teacher"``, ``"student"`` or None (in no room)."""
    ss = st.session_state
    if not ss.get(K_CODE):
        return None
    return "teacher" if ss.get(K_TOKEN) else "student"


def following() -> bool:
    """Whether this session is a student following its room's teacher (not exploring): the teacher's state
    decides its page, step and cursor, and links and Back / Next do not."""
    return role() == "student" and st.session_state.get(K_MODE, "follow") == "follow"


_TURNS = threading.BoundedSemaphore(FOLLOW_RUNS)


@contextlib.contextmanager
def turn() -> Iterator[None]:
    """A whole run of a student following a room waits for one of :data:`FOLLOW_RUNS` turns of the server
    process (``app.py``); anyone else's run (a teacher's, a student's exploring) goes on at once. A teacher's
    change reruns a whole class at the same moment: 100 runs sharing one interpreter at once all end at
    about the time the last one does (and contend for its locks), while runs taken in turn end one after
    another, half of them in half that time. Design choice (first come, first served: a waiting thread
    holds no interpreter time)."""
    if not following():
        yield
        return
    with _TURNS:
        yield


def _store() -> rooms.RoomStore | None:
    """The process's store, or None while it is unavailable (the error is kept for the panel)."""
    ss = st.session_state
    if ss.get(K_ERROR) and time.monotonic() - ss.get(K_ERROR_AT, 0.0) < RETRY_S:
        return None
    try:
        store = rooms.get_store()
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        _fail(exc)
        return None
    return store


def _fail(exc: Exception) -> None:
    ss = st.session_state
    ss[K_ERROR], ss[K_ERROR_AT] = str(exc).splitlines()[0][:300], time.monotonic()


def _ok() -> None:
    st.session_state.pop(K_ERROR, None)


def begin_run() -> None:
    """Before a whole run of a page (``app.py``): a teacher collects the charts this run draws
    (``_live_chart.K_DRAWN``; a fragment's run adds its own), for the room's followers (:func:`charts_json`)."""
    if role() == "teacher":
        st.session_state[K_DRAWN] = {}
    else:
        st.session_state.pop(K_DRAWN, None)


def charts_json() -> str | None:
    """The charts of the teacher's page as the students' charts draw them,
    ``{"charts": {key: {"layout", "digest", "bundle"}}, "traces": {digest: traces JSON}}`` (each chart's
    traces once, by digest, so a student's browser fetches only the traces it lacks); None without charts."""
    charts = st.session_state.get(K_DRAWN) or {}
    if not charts:
        return None
    return json.dumps({"charts": {k: {"layout": f["layout"], "digest": traces_digest(f["data"]),
                                      "bundle": f["bundle"]} for k, f in charts.items()},
                       "traces": {traces_digest(f["data"]): f["data"] for f in charts.values()}},
                      separators=(",", ":"))


def snapshot(page: str) -> dict[str, Any]:
    """What the teacher shows on page ``page`` (a url_path) as :class:`geomlab.rooms.RoomState` fields."""
    ss = st.session_state
    on_tour = page == "tour"
    controls = {name: ss.get(key) for key, name in CONTROLS.items() if ss.get(key) is not None}
    return {"page": page, "checkpoint": ss.get(state.K_CKPT) or "", "text": ss.get(state.K_TEXT) or "",
            "cursor": int(ss.get(state.K_POS) or 0), "view": page if page in views.VIEWS else "",
            "controls": controls, "lesson": (ss.get(K_LESSON) or "") if on_tour else "",
            "step": int(ss.get(K_STEP) or 0) if on_tour else 0}


def open_room(page: str) -> None:
    """Open a room on this session's current state; this session becomes its teacher (button callback)."""
    store = _store()
    if store is None:
        return
    ss = st.session_state
    try:
        code, token = store.open(rooms.RoomState(**snapshot(page)))
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        _fail(exc)
        return
    _ok()
    ss[K_CODE], ss[K_TOKEN], ss[K_SENT] = code, token, snapshot(page)


def close_room() -> None:
    """The teacher ends the room (button callback); the students' next poll finds it gone."""
    ss = st.session_state
    store = _store()
    try:
        if store is not None and role() == "teacher":
            store.close(ss[K_CODE], ss[K_TOKEN])
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        _fail(exc)
    for key in (K_CODE, K_TOKEN, K_SENT, K_SEEN, K_MODE, K_QR):
        ss.pop(key, None)


def join(code_text: str) -> str | None:
    """Join room ``code_text`` as a student (following); returns an error line, or None when joined."""
    ss = st.session_state
    try:
        code = rooms.normalise_code(code_text)
    except rooms.RoomError as exc:
        return str(exc)
    if ss.get(K_CODE) == code:
        return None
    store = _store()
    if store is None:
        return ss.get(K_ERROR)
    try:  # a reload's id (the link's me=) when this room gave it out, else a new one
        client = store.join(code, ss.get(K_CLIENT))
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        return str(exc).splitlines()[0]
    ss.pop(K_TOKEN, None)  # a session is the teacher of one room at most, and never of one it joins
    ss[K_CODE], ss[K_MODE], ss[K_SEEN], ss[K_CLIENT] = code, "follow", -1, client
    return None


def leave() -> None:
    """A student leaves the room (button callback)."""
    ss = st.session_state
    store = _store()
    try:
        if store is not None and role() == "student":
            store.leave(ss[K_CODE], ss[K_CLIENT])
    except (rooms.RoomsUnavailable, rooms.RoomError):
        pass
    ss[K_LEFT] = ss.pop(K_CODE, None)
    for key in (K_SEEN, K_MODE, K_SHOWN, K_AWAY):
        ss.pop(key, None)


def set_mode(mode: str) -> None:
    """"Explore on my own" / "Follow the teacher" (button callback); following again redraws at once."""
    ss = st.session_state
    ss[K_MODE] = mode
    ss[K_BEAT] = 0.0
    if mode == "follow":
        ss[K_SEEN] = -1


def adopt_link() -> None:
    """Join the room a ``?room=CODE`` link names (every run, before the page; a session's own room is kept),
    as the student ``me=CLIENT`` names when it is a client id (a reload). A bad or ended code is a notice,
    and the page goes on alone."""
    code = st.query_params.get("room")
    ss = st.session_state
    if not code or code in (ss.get(K_CODE), ss.get(K_LEFT)):
        return
    try:
        if rooms.normalise_code(code) == ss.get(K_CODE):
            return  # the teacher opening their own room's link stays its teacher
    except rooms.RoomError:
        pass
    try:  # a reload's link names the student it was: keep counting them once
        ss.setdefault(K_CLIENT, rooms.check_client(st.query_params.get("me")))
    except rooms.RoomError:
        pass  # none, or not a client id: join gives a new one
    problem = join(code)
    if problem:
        ss[state.K_NOTICE] = f"Could not join room {state.quoted(code[:20])}: {problem}"


def url_keys() -> dict[str, str]:
    """The URL keys a room adds to the page's: a student's ``room=CODE`` and ``me=CLIENT`` (the client id,
    so that a reload is the same student, not a second one counted until the first one's presence runs out);
    a teacher's URL carries no room: the token never leaves the session, and the code is shown on screen."""
    ss = st.session_state
    return {"room": ss[K_CODE], "me": ss[K_CLIENT]} if role() == "student" else {}


def sync_url(page: Any) -> None:
    """Mirror page ``page``'s state into the URL (:func:`app_pages._state.sync_query_params`) with the room's
    keys (:func:`url_keys`): after a whole run and after a fragment's."""
    ss = st.session_state
    ss[state.K_PAGE_QP] = {**(ss.get(state.K_PAGE_QP) or {}), **url_keys()}
    state.sync_query_params(page)


def keep_alive() -> None:
    """A teacher on one step keeps the room alive: a touch every minute (from the Classroom box's timed
    fragment, which publishes nothing: a timer's run may carry a widget value the browser had not yet
    replaced, and would publish a cursor the page no longer shows)."""
    ss = st.session_state
    if role() != "teacher" or time.monotonic() - ss.get(K_BEAT, 0.0) <= 60:
        return
    store = _store()
    if store is None:
        return
    try:
        store.touch(ss[K_CODE], ss[K_TOKEN])
        ss[K_BEAT] = time.monotonic()
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        _fail(exc)


def publish(page: str | None = None) -> None:
    """The teacher's side: write the state into the room when it changed since the last write (cheap: a
    dict comparison per run), with the charts this session drew. A whole run publishes after its page, so
    a failure it meets, or the end of one, reruns the app once: the panel above the page says so."""
    ss = st.session_state
    if role() != "teacher":
        return
    before = ss.get(K_ERROR)
    _publish(page)
    if ss.get(K_ERROR) != before and not state.in_fragment_rerun():
        st.rerun()


def _publish(page: str | None) -> None:
    ss = st.session_state
    now = snapshot(page if page is not None else ss.get(K_PAGE, ""))
    sent = ss.get(K_SENT) or {}
    changes = {k: v for k, v in now.items() if sent.get(k) != v}
    store = _store()
    if store is None:
        return
    try:
        if changes:
            charts = charts_json()
            if charts is not None and len(charts) > MAX_CHARTS_BYTES:
                charts = None  # more than the room keeps: the state alone (its students rerun instead)
            store.update(ss[K_CODE], ss[K_TOKEN], charts=charts, **changes)
            ss[K_SENT] = now
            _ok()
    except rooms.RoomError as exc:
        try:
            store.version(ss[K_CODE])
        except rooms.RoomError:  # the room expired or was closed: this session drives nothing now
            _fail(exc)
            for key in (K_CODE, K_TOKEN, K_SENT):
                ss.pop(key, None)
            return
        except rooms.RoomsUnavailable as lost:
            _fail(lost)
            return
        # a value the room refuses (e.g. a text over its cap): said once, the rest of the room goes on
        ss[K_ERROR], ss[K_SENT] = f"the room did not take this page's state: {str(exc).splitlines()[0]}", now
    except rooms.RoomsUnavailable as exc:
        _fail(exc)


def apply(room_state: rooms.RoomState) -> str:
    """Write the teacher's state into this session (a student following); returns the page slug to show."""
    ss = st.session_state
    if room_state.checkpoint and data.entry_for(room_state.checkpoint) is not None:
        if ss.get(state.K_CKPT) != room_state.checkpoint:
            ss[state.K_CKPT] = room_state.checkpoint
        ss[state.K_CKPT_EXPLICIT] = True
        ss.pop(state.K_STANDIN, None)
    if room_state.text:
        state.set_text(room_state.text)
    ss[state.K_POS] = room_state.cursor
    for key, name in CONTROLS.items():
        ss[key] = room_state.controls.get(name)
    if room_state.page == "tour" and room_state.lesson:
        ss[K_LESSON], ss[K_STEP] = room_state.lesson, room_state.step
        ss[K_APPLIED] = (room_state.lesson, room_state.step)  # the room's state is the step as the teacher shows it
    ss[K_STATE] = json.loads(room_state.to_json())
    ss[K_SHOWN] = None  # what following looks like here: taken after the page has drawn it (:func:`settle`)
    return room_state.page


def settle(page: str) -> None:
    """After a full run of page ``page`` (``app.py``): a student that applied the room's state and has now
    drawn it keeps this session's state as what following looks like (the page may have completed it, e.g. a
    Tour step's own checkpoint and text), for :func:`moved_away`."""
    ss = st.session_state
    if role() == "student" and K_SHOWN in ss and ss[K_SHOWN] is None and ss.get(K_PAGE) == page:
        ss[K_SHOWN] = snapshot(page)


def moved_away() -> bool:
    """Whether this following student shows something else than the room's state it applied last: it opened
    another page, step or link, or moved the cursor or a control itself. Such a student counts as exploring
    (the teacher's presence line says so) until it comes back or the teacher's next change brings it back.
    Design choice: a derived state, not a switch to "explore", so a student is never left behind by a
    comparison made while a change is still being applied."""
    ss = st.session_state
    shown = ss.get(K_SHOWN)  # None until the page has drawn the state applied last
    return shown is not None and snapshot(ss.get(K_PAGE, "")) != shown


def follow() -> None:
    """A student's poll: when the room's version moved, adopt its state and show the teacher's page (a switch
    to it, or a rerun of this one; in a full run the page below draws the new state)."""
    ss = st.session_state
    store = _store()
    if store is None:
        return
    code, mode = ss[K_CODE], ss.get(K_MODE, "follow")
    try:
        new = store.changed_since(code, ss.get(K_SEEN, -1)) if mode == "follow" else None
        away = mode == "follow" and new is None and moved_away()
        if away != bool(ss.get(K_AWAY)):  # the teacher's presence line learns it at once
            ss[K_AWAY], ss[K_BEAT] = away, 0.0
        if time.monotonic() - ss.get(K_BEAT, 0.0) > BEAT_S:
            store.heartbeat(code, ss[K_CLIENT], "explore" if away else mode)
            ss[K_BEAT] = time.monotonic()
        _ok()
    except rooms.RoomError:
        leave()
        ss[state.K_NOTICE] = (f"Room {code[:4]}-{code[4:]} has ended (the teacher closed it, or it expired): "
                              "you are on your own now.")
        st.rerun()
    except rooms.RoomsUnavailable as exc:
        _fail(exc)
        return
    if new is None:
        return
    page = apply(new)
    if page != ss.get(K_PAGE):
        # the version is marked seen only on the teacher's page: a switch lost to another rerun (a click of
        # this student's) is made again at the next poll instead of leaving the student behind for good
        st.switch_page(state.page_path(page or "home"))
    ss[K_SEEN] = new.version
    if state.in_fragment_rerun():  # a full run draws its page after the panel, with the state just applied
        st.rerun()



def revealed(lesson: str, step: int) -> bool | None:
    """Whether the room this session follows has revealed ``lesson``'s step ``step``; None outside a room."""
    if role() is None:
        return None
    store = _store()
    try:
        return store is not None and store.state(st.session_state[K_CODE]).is_revealed(lesson, step)
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        _fail(exc)
        return None


def join_link() -> str:
    """The absolute join link of this session's room: the app's address with ``?room=CODE``."""
    from app_pages._state import app_origin

    return f"{app_origin()}/?room={st.session_state[K_CODE]}"


def qr_svg(link: str, scale: int = 8) -> str:
    """The join link as an SVG QR code (segno, error correction M, ``scale`` pixels per module) in a
    ``data:`` URL (``st.html`` drops inline SVG; an image's data URL it keeps)."""
    import segno

    return segno.make(link, error="m").svg_data_uri(scale=scale, border=2)


def _show_code() -> None:
    code = st.session_state[K_CODE]
    link = join_link()
    st.html(f"<div style='text-align:center'><div class='geomlab-room-code' style='font-size:4rem;"
            f"font-weight:700;letter-spacing:0.3rem;font-family:monospace'>{code[:4]}-{code[4:]}</div>"
            f"<img alt='QR code' src='{qr_svg(link, 10)}'><div style='font-size:1.4rem'>{html.escape(link)}</div></div>")


def _open_code() -> None:
    st.session_state[K_QR] = True


def _close_code() -> None:
    st.session_state.pop(K_QR, None)


#: The teacher's code and QR, open until dismissed: a rerun of the page (a chart's, a publish's) keeps it.
show_code_dialog = st.dialog("Join the class", width="large", on_dismiss=_close_code)(_show_code)


def _live() -> None:
    """The room panel, rerun every :data:`POLL_S` s for a teacher (presence, the room kept alive) and for a
    student on a server without the follow channel (its poll); a whole run draws it for everyone."""
    ss = st.session_state
    who = role()
    if who == "teacher" and state.in_fragment_rerun():
        keep_alive()  # (a run publishes what its page drew: app.py, the view pages' fragment)
    elif who == "student":
        follow()
    if ss.get(K_ERROR):
        st.error(f"Classroom: {ss[K_ERROR]}. Following nothing for now.", icon=":material/wifi_off:")
    who = role()
    if who == "teacher":
        code = ss[K_CODE]
        st.markdown(f"**Room** `{code[:4]}-{code[4:]}`")
        store = _store()
        if store is not None:
            try:
                p = store.presence(code)
                st.caption(f"{p.follow} following · {p.explore} exploring", help="Students seen in the last 30 s.")
            except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
                _fail(exc)
    elif who == "student":
        code, mode = ss[K_CODE], ss.get(K_MODE, "follow")
        if mode == "follow" and ss.get(K_AWAY):
            st.markdown(f"**Room** `{code[:4]}-{code[4:]}` · away from the teacher's view (their next change "
                        "brings you back)")
            st.button("Back to the teacher", key="room_back", icon=":material/sync:", type="primary",
                      on_click=set_mode, args=("follow",))
        else:
            st.markdown(f"**Room** `{code[:4]}-{code[4:]}` · " + ("following the teacher" if mode == "follow"
                                                                  else "exploring on your own"))


def _on_nochannel() -> None:
    st.session_state[K_NOCHANNEL] = True


def catch_up_s() -> float:
    """Seconds of quiet before a student's session catches up on charts its page redrew from the channel
    (``GEOMLAB_ROOM_CATCH_UP_S``, default :data:`CATCH_UP_S`; each page waits once to twice that, so a
    class's catch-up runs spread out). A value that is not a number in 0.5..60 is the default."""
    try:
        value = float(os.environ.get("GEOMLAB_ROOM_CATCH_UP_S", CATCH_UP_S))
    except ValueError:
        return CATCH_UP_S
    return value if 0.5 <= value <= 60 else CATCH_UP_S


def listener() -> None:
    """A student's side of the follow channel (module docstring): the listener component, given the version
    and state this session applied last, its client id and mode. Its trigger ``changed`` reruns the whole
    app (it sits outside any fragment), whose :func:`follow` applies the room's state; ``nochannel`` turns
    the fragment's polling on."""
    ss = st.session_state
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    data = {"url": ("/" + base if base else "") + f"{PREFIX}/{ss[K_CODE]}", "me": ss[K_CLIENT],
            "mode": ss.get(K_MODE, "follow"), "away": bool(ss.get(K_AWAY)), "since": ss.get(K_SEEN, -1),
            "state": ss.get(K_STATE), "catch_up_s": catch_up_s()}
    module_component("geomlab_room_listener", "room_listener.js")(
        data=data, key="room_listener", on_changed_change=lambda: None, on_nochannel_change=_on_nochannel)


def panel() -> None:
    """The "Classroom" box in the sidebar (every page, from ``app.py``): open or join a room, the code and
    QR, presence; the timed fragment (:func:`_live`) and a student's listener. Never raises: a failure is a
    message."""
    ss = st.session_state
    with st.sidebar.expander("Classroom", icon=":material/groups:", expanded=role() is not None):
        who = role()
        polls = who == "teacher" or (who == "student" and ss.get(K_NOCHANNEL))
        st.fragment(_live, run_every=POLL_S if polls else None)()
        who = role()
        if who is None:
            st.button("Start a room", key="room_open", icon=":material/co_present:", on_click=open_room,
                      args=(ss.get(K_PAGE, ""),), help="Students who join see what you show, live.")
            with st.form("room_join", border=False):
                typed = st.text_input("Join with a code", key="w_room_code", placeholder="ABCD-1234")
                if st.form_submit_button("Join", icon=":material/login:") and typed:
                    problem = join(typed)
                    if problem:
                        st.error(problem)
                    else:
                        st.rerun()
        elif who == "teacher":
            st.button("Show code and QR", key="room_show", icon=":material/qr_code_2:", on_click=_open_code)
            if ss.get(K_QR):
                show_code_dialog()
            st.caption(f"Join link: {join_link()}")
            st.button("End the room", key="room_close", icon=":material/close:", on_click=close_room)
        else:
            if ss.get(K_MODE, "follow") == "follow":
                st.button("Explore on my own", key="room_explore", icon=":material/explore:", on_click=set_mode,
                          args=("explore",))
            else:
                st.button("Follow the teacher", key="room_follow", icon=":material/sync:", type="primary",
                          on_click=set_mode, args=("follow",))
            st.button("Leave the room", key="room_leave", icon=":material/logout:", on_click=leave)
            if not ss.get(K_NOCHANNEL):
                listener()  # (last in the box: the empty element's gap falls under the buttons)
