"""The classroom panel through AppTest: a student's session follows the room's state (checkpoint, text, cursor,
controls, Tour step) and never writes it; a teacher's session publishes only what changed; a rooms store that
cannot be reached is a message on the page, not a crash, and the session follows nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geomlab import rooms
from helpers.redis_server import redis_server  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
pytestmark = pytest.mark.skipif(not (ROOT / "assets" / "checkpoints" / "osm-rnn-o-s5" / "model.safetensors").is_file(),
                                reason="bundled zoo not present")
LESSON = "s5-word-problem"


@pytest.fixture
def zoo_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.delenv("GEOMLAB_ROOMS_URL", raising=False)
    return monkeypatch


def student(code: str, **query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(room=code, **query)
    return at.run()


def panel_text(at: AppTest) -> str:
    return " ".join(m.value for m in at.sidebar.markdown) + " ".join(c.value for c in at.sidebar.caption)


def test_a_student_follows_the_rooms_step_cursor_and_controls(zoo_env):
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="tour", lesson=LESSON, step=2, cursor=6,
                                             checkpoint="bundled/osm-rnn-o-s5",
                                             text="12340 12340 12340 12340 12340 10234 10234 12340 12340 12340 "
                                                  "12340 12340", controls={"layer": 0}))
    at = student(code)
    assert not at.exception, at.exception
    ss = at.session_state
    assert (ss["gl_tour_lesson"], ss["gl_tour_step"], ss["gl_pos"], ss["gl_layer"]) == (LESSON, 2, 6, 0)
    assert ss["_gl_room_page"] == "tour" and "following the teacher" in panel_text(at)
    assert at.query_params["room"] in (code, [code])
    store.update(code, token, cursor=3)
    at.run()
    assert at.session_state["gl_pos"] == 3
    store.close(code, token)


def test_a_students_url_and_clicks_never_change_the_room(zoo_env):
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="tour", lesson=LESSON, step=1, cursor=4))
    before = store.state(code)
    at = student(code, lesson=LESSON, step="5", pos="0", token=token[:10] + "x", teacher="1")
    at.button(key="room_explore").click().run()
    at.session_state["gl_pos"] = 1
    at.run()
    after = store.state(code)
    assert (after.version, after.step, after.cursor) == (before.version, 1, 4)
    assert "_gl_room_token" not in at.session_state
    assert store.presence(code).explore == 1
    store.close(code, token)


def test_a_teacher_publishes_only_changes(zoo_env):
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(lesson=LESSON, step="2")
    at.switch_page("app_pages/tour.py")
    at.run()
    at.button(key="room_open").click().run()
    code = at.session_state["_gl_room_code"]
    store = rooms.get_store()
    version = store.version(code)
    at.run()
    assert store.version(code) == version  # nothing changed, nothing written
    at.button(key="tour_next").click().run()
    state = store.state(code)
    assert state.version > version and (state.lesson, state.step) == (LESSON, 2)
    assert not any(token in str(v) for v in dict(at.query_params).values()
                   for token in [at.session_state["_gl_room_token"]])


def test_a_lost_rooms_store_is_a_message_not_a_crash(zoo_env, redis_server):  # noqa: F811
    zoo_env.setenv("GEOMLAB_ROOMS_URL", redis_server.url)
    store = rooms.open_store(redis_server.url)
    code, token = store.open(rooms.RoomState(page="", cursor=2))
    at = student(code)
    assert not at.exception and "following the teacher" in panel_text(at)
    redis_server.stop()
    at.session_state["_gl_room_beat"] = 0.0
    at.run()
    assert not at.exception, at.exception
    msgs = [e.value for e in at.error]
    assert any("Classroom:" in m and "unavailable" in m and "Following nothing" in m for m in msgs), msgs
    # a teacher cannot open a room either, and is told so
    at2 = AppTest.from_file(APP, default_timeout=240).run()
    at2.button(key="room_open").click().run()
    assert not at2.exception and "_gl_room_code" not in at2.session_state
    assert any("unavailable" in e.value for e in at2.error)


def test_a_student_who_moves_away_counts_as_exploring_until_back(zoo_env):
    """A following student who opens another page (or step, or moves the cursor) no longer reads
    "following": the panel says so, the teacher's presence line counts it exploring, one click brings it back,
    and so does the teacher's next change."""
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="tour", lesson=LESSON, step=2, cursor=6))
    at = student(code)
    at.run()
    assert "following the teacher" in panel_text(at) and store.presence(code).follow == 1
    at.session_state["gl_tour_step"] = 4  # the student steps on by itself
    at.run()
    assert "away from the teacher" in panel_text(at), panel_text(at)
    assert (store.presence(code).follow, store.presence(code).explore) == (0, 1)
    at.button(key="room_back").click().run()
    at.run()
    assert at.session_state["gl_tour_step"] == 2 and "following the teacher" in panel_text(at)
    assert (store.presence(code).follow, store.presence(code).explore) == (1, 0)
    at.session_state["gl_pos"] = 0  # away again; the teacher's next step brings it back
    at.run()
    assert "away from the teacher" in panel_text(at)
    store.update(code, token, step=3)
    at.run()
    assert at.session_state["gl_tour_step"] == 3 and "following the teacher" in panel_text(at)
    store.close(code, token)


def test_a_students_link_to_another_step_shows_the_teachers_step(zoo_env):
    """A student who joins through a Tour link naming another step sees (and says it follows) the teacher's."""
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="tour", lesson=LESSON, step=1, cursor=4))
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("app_pages/tour.py")
    at.query_params.update(room=code, lesson=LESSON, step="4")
    at.run()
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["gl_tour_step"] == 1 and "following the teacher" in panel_text(at), panel_text(at)
    store.close(code, token)


def test_a_student_who_leaves_stays_out_although_the_link_is_in_the_address_bar(zoo_env):
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="", cursor=1))
    at = student(code)
    at.button(key="room_leave").click().run()
    assert "_gl_room_code" not in at.session_state and "room" not in dict(at.query_params)
    at.run()
    assert "_gl_room_code" not in at.session_state
    store.close(code, token)


def test_a_state_the_room_refuses_is_a_message_and_the_room_goes_on(zoo_env):
    at = AppTest.from_file(APP, default_timeout=240).run()
    at.button(key="room_open").click().run()
    code = at.session_state["_gl_room_code"]
    store = rooms.get_store()
    at.session_state["gl_text"] = "x" * (rooms.state.MAX_TEXT + 1)  # over the room's cap on a text
    at.session_state["gl_pos"] = 2
    at.run()
    assert not at.exception and at.session_state["_gl_room_code"] == code
    assert any("did not take this page's state" in e.value for e in at.error)
    at.session_state["gl_text"] = "short text"
    at.run()
    assert store.state(code).text == "short text" and not at.error


def test_a_reloaded_student_is_counted_once(zoo_env):
    """A student's URL names them (``me=``): a reload, a new session on that URL, is the same student, not a
    second one counted until the first one's presence runs out. A ``me`` the room did not give out is ignored."""
    store = rooms.get_store()
    code, token = store.open(rooms.RoomState(page="tour", lesson=LESSON, step=2, cursor=6))
    first = student(code)
    me = first.query_params["me"]
    me = me[0] if isinstance(me, list) else me
    assert me == first.session_state["_gl_room_client"] and store.presence(code).follow == 1
    again = student(code, me=me)  # the reload
    assert not again.exception, again.exception
    assert again.session_state["_gl_room_client"] == me and store.presence(code).follow == 1
    other = student(code, me="../../x")
    assert other.session_state["_gl_room_client"] != "../../x" and store.presence(code).follow == 2
    made_up = student(code, me="made-up-client-0000")  # well formed, but not given out by this room
    assert made_up.session_state["_gl_room_client"] != "made-up-client-0000" and store.presence(code).follow == 3
    store.close(code, token)
