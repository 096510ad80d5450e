"""The Tour's classroom parts: a step's question before its notice (predict, then reveal), the presenter view
(``?present=1``) and the handout download. ``app_pages/tour.py`` calls them; the room is ``_room``.

Predict, then reveal: alone, the visitor answers (an option, or the cursor's position for a "click the
position" question) and then sees whether it was right and the notice. In a room, a student's answer goes to
the room (:meth:`geomlab.rooms.RoomStore.answer`), the teacher sees the live tally and reveals; the reveal is a
change of the room's state, so every following student's page shows the answer and the notice.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable

import streamlit as st

from app_pages import _room as room
from app_pages import _ui as ui
from app_pages._warm import rendering
from geomlab import rooms
from geomlab.teach import tours

K_ANSWERS = "_gl_answers"   # {"LESSON/STEP": answer} of this session
K_HANDOUT = "_gl_handout"   # (lesson slug, html bytes, pdf bytes or None) prepared in this session
K_PATH = "_gl_tour_path"    # {lesson slug: [step indices in the order this session showed them]}
LETTERS = "ABCDEF"


# ---------------------------------------------------------------- questions
def _key(lesson: str, index: int) -> str:
    return rooms.question_key(lesson, index)


def _send(lesson: str, index: int, value: int) -> None:
    """Keep this session's answer; a student's also goes to the room."""
    ss = st.session_state
    ss.setdefault(K_ANSWERS, {})[_key(lesson, index)] = value
    if room.role() != "student":
        return
    store = room._store()
    try:
        if store is not None:
            store.answer(ss[room.K_CODE], ss[room.K_CLIENT], lesson, index, value)
    except rooms.RoomError as exc:
        ss[ui.K_NOTICE] = f"Your answer was not counted: {str(exc).splitlines()[0]}"
    except rooms.RoomsUnavailable as exc:
        room._fail(exc)


def _chose(lesson: str, index: int) -> None:
    value = st.session_state.get(f"w_q_{lesson}_{index}")
    if value is not None:
        _send(lesson, index, int(value))


def _answer_widget(q: tours.Question, lesson: str, index: int) -> int | None:
    """The answer controls; returns this session's answer (None: not answered yet)."""
    mine = st.session_state.get(K_ANSWERS, {}).get(_key(lesson, index))
    if isinstance(q, tours.Choice):
        wkey = f"w_q_{lesson}_{index}"
        if mine is not None:
            st.session_state[wkey] = mine
        st.radio("Your answer", list(range(len(q.options))), index=None, key=wkey, on_change=_chose,
                 args=(lesson, index), format_func=lambda i: f"{LETTERS[i]}. {q.options[i]}")
    else:
        pos = int(st.session_state.get(ui.K_POS) or 0)
        st.caption("Click the position's point in a chart (or move the token cursor over the figures), then "
                   "answer.")
        st.button(f"Answer with the cursor position ({pos})", key=f"q_pos_{lesson}_{index}",
                  icon=":material/ads_click:", on_click=_send, args=(lesson, index, pos),
                  help="Move the token cursor (or click a token in a chart) to the position you mean, then "
                       "press this.")
        if mine is not None:
            st.caption(f"Your answer: position {mine}.")
    return mine


def _answer_text(q: tours.Question) -> str:
    if isinstance(q, tours.Choice):
        return f"{LETTERS[q.answer]}. {q.options[q.answer]}"
    return q.answer_text()


@st.fragment(run_every=1.0)
def _tally(lesson: str, index: int, q: tours.Question) -> None:
    """The teacher's live tally and the Reveal / Hide button (rerun every second)."""
    ss = st.session_state
    store = room._store()
    if store is None or room.role() != "teacher":
        return
    try:
        t = store.tally(ss[room.K_CODE], lesson, index)
    except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
        room._fail(exc)
        return
    if isinstance(q, tours.Choice):
        for i, option in enumerate(q.options):
            n = t.counts.get(i, 0)
            st.progress(n / t.total if t.total else 0.0, text=f"{LETTERS[i]}. {option} · **{n}**")
    else:
        st.caption(" · ".join(f"position {p}: **{n}**" for p, n in t.counts.items()) or "No answers yet.")
    st.caption(f"Answers: {t.total}")
    label = "Hide the answer" if t.revealed else "Reveal the answer"
    if st.button(label, key=f"q_reveal_{lesson}_{index}", icon=":material/visibility:", type="primary"):
        try:
            store.reveal(ss[room.K_CODE], ss[room.K_TOKEN], lesson, index, revealed=not t.revealed)
            room.publish()  # this session's own state goes with the reveal
        except (rooms.RoomsUnavailable, rooms.RoomError) as exc:
            room._fail(exc)
        st.rerun()


def open_question(lesson: tours.Lesson, index: int) -> bool:
    """Whether step ``index`` asks a question whose answer is not shown yet (not answered alone, not
    revealed in the room): its figures' captions wait, since they may state the answer."""
    q = lesson.steps[index].question
    if q is None:
        return False
    who = room.role()
    if who in ("teacher", "student"):
        return not room.revealed(lesson.slug, index)
    return st.session_state.get(K_ANSWERS, {}).get(_key(lesson.slug, index)) is None


def question(lesson: tours.Lesson, index: int) -> bool:
    """Draw step ``index``'s question (if any); returns whether its notice may be shown (no question, or
    answered alone, or revealed in the room)."""
    q = lesson.steps[index].question
    if q is None:
        return True
    who = room.role()
    with st.container(border=True, key="tour-question"):
        st.markdown(f"**Question.** {q.prompt}")
        if who == "teacher":
            _tally(lesson.slug, index, q)
            mine = None
        else:
            mine = _answer_widget(q, lesson.slug, index)
        shown = not open_question(lesson, index)
        if who == "student" and mine is not None and not shown:
            st.caption("Answer sent. The teacher reveals the answer.")
        if not shown:
            st.caption("The figures' captions show once the answer is "
                       f"{'revealed' if who in ('teacher', 'student') else 'given'}: they may give it away.")
        if shown:
            if mine is not None:
                # several right positions: say so either way, so a right 4 does not read as "only 4"
                any_of = (f"any of {_answer_text(q)} is right" if isinstance(q, tours.ClickPosition)
                          and len(q.positions) > 1 else None)
                if q.is_correct(mine):
                    st.success(f"Right ({any_of})." if any_of else "Right.", icon=":material/check_circle:")
                else:
                    st.warning(f"Not quite: {any_of or f'the answer is {_answer_text(q)}'}.", icon=":material/cancel:")
            else:
                st.markdown(f"**Answer:** {_answer_text(q)}")
            if q.explanation:
                st.markdown(q.explanation)
    return shown


# ---------------------------------------------------------------- presenter view
def presenting() -> bool:
    """Whether the Tour is in its presenter view (``?present=1``)."""
    return st.query_params.get("present") == "1"


_PRESENT_CSS = """<style>
section[data-testid='stSidebar'], [data-testid='stSidebarCollapsedControl'], header[data-testid='stHeader'],
[data-testid='stToolbar'] {display: none !important;}
[data-testid='stMainBlockContainer'] {padding: 0.8rem 1.5rem 0.5rem 1.5rem !important; max-width: 100% !important;}
[data-testid='stMain'] p, [data-testid='stMain'] li, [data-testid='stMain'] label {font-size: 1.45rem !important;
  line-height: 1.35;}
[data-testid='stMain'] h3 {font-size: 2.2rem !important; padding: 0 0 0.4rem 0;}
[data-testid='stMain'] [data-testid='stCaptionContainer'] p {font-size: 1rem !important;}
@media (min-width: 1800px) {[data-testid='stMain'] p, [data-testid='stMain'] li, [data-testid='stMain'] label
  {font-size: 1.9rem !important;} [data-testid='stMain'] h3 {font-size: 2.8rem !important;}
  [data-testid='stMain'] [data-testid='stCaptionContainer'] p {font-size: 1.2rem !important;}}
</style>"""

#: Arrow keys click Back / Next (not while typing or on a slider, whose arrows move the cursor).
_KEYS_JS = """<script>
if (!window.geomlabArrowKeys) {
  window.geomlabArrowKeys = true;
  document.addEventListener('keydown', (e) => {
    const t = e.target;
    if (t && t.closest && t.closest('input, textarea, select, [contenteditable], [role=slider]')) return;
    const key = e.key === 'ArrowRight' ? 'tour_next' : e.key === 'ArrowLeft' ? 'tour_back' : null;
    const b = key && document.querySelector('.st-key-' + key + ' button');
    if (b && !b.disabled) { e.preventDefault(); b.click(); }
  });
}
</script>"""


def present(lesson: tours.Lesson, index: int, draw_step: Callable[[tours.Lesson, int], None],
            go: Callable[[int], None]) -> None:
    """The presenter view of step ``index``: its title, its figures (``draw_step``), its question and notice
    in large type, no sidebar; Back / Next (``go(delta)``) at the bottom and on the arrow keys."""
    ss = st.session_state
    ss[ui.K_PAGE_QP] = {**ss.get(ui.K_PAGE_QP, {}), "present": "1"}
    st.html(_PRESENT_CSS)
    st.html(_KEYS_JS, unsafe_allow_javascript=True)
    step = lesson.steps[index]
    st.subheader(f"{index + 1}. {step.title}")
    left, right = st.columns([3, 2], gap="medium")
    with left, ui.guard("This step"), rendering():
        if ui.entries():
            draw_step(lesson, index)
        else:
            ui.no_checkpoint_message()
    with right:
        if question(lesson, index):
            st.info(f"**What to notice.** {step.notice}", icon=":material/visibility:")
        n = len(lesson.steps)
        nav = st.container(horizontal=True, gap="small", vertical_alignment="center")
        nav.button("Back", key="tour_back", icon=":material/arrow_back:", on_click=go, args=(-1,),
                   disabled=index == 0, width="content")
        nav.button("Next", key="tour_next", icon=":material/arrow_forward:", on_click=go, args=(1,),
                   disabled=index == n - 1, type="primary", width="content")
        nav.caption(f"{index + 1} / {n} · ← →")


# ---------------------------------------------------------------- handout
def remember_step(lesson: tours.Lesson, index: int) -> None:
    """Record that this session showed step ``index`` (the path a room's handout follows)."""
    path = st.session_state.setdefault(K_PATH, {}).setdefault(lesson.slug, [])
    if index not in path:
        path.append(index)


def handout_button(lesson: tours.Lesson) -> None:
    """The "Handout" box: prepare the lesson's (or this session's path's) HTML and PDF, then download them."""
    from geomlab.teach import handout

    ss = st.session_state
    with st.expander("Handout", icon=":material/description:"):
        st.caption("Every step's figures as images, with notices and questions (answers at the end): one HTML "
                   "file to read offline, and a PDF.")
        path = ss.get(K_PATH, {}).get(lesson.slug, [])
        only = st.checkbox("Only the steps shown here, in that order", key="w_handout_path",
                           disabled=len(path) < 1) and path
        if st.button("Prepare the handout", key="handout_make", icon=":material/picture_as_pdf:"):
            with st.spinner("Drawing every step's figures…"):
                try:
                    page = handout.build_html(lesson, list(only) if only else None)
                    pdf = None
                    with tempfile.TemporaryDirectory() as tmp:
                        (Path(tmp) / "h.html").write_text(page, encoding="utf-8")
                        try:
                            pdf = handout.write_pdf(Path(tmp) / "h.html", Path(tmp) / "h.pdf").read_bytes()
                        except handout.HandoutError as exc:
                            st.warning(f"No PDF: {exc}")
                    ss[K_HANDOUT] = (lesson.slug, page.encode("utf-8"), pdf)
                except handout.HandoutError as exc:
                    st.error(str(exc))
        made = ss.get(K_HANDOUT)
        if made and made[0] == lesson.slug:
            st.download_button("Download HTML", made[1], file_name=f"{lesson.slug}-handout.html", mime="text/html",
                               icon=":material/download:", key="handout_html")
            if made[2]:
                st.download_button("Download PDF", made[2], file_name=f"{lesson.slug}-handout.pdf",
                                   mime="application/pdf", icon=":material/download:", key="handout_pdf")
