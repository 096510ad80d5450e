"""Rooms (geomlab.rooms): the same behaviour tests against the in-process store and a real redis-server
(codes, the teacher token, versions, expiry by an injected clock, presence, answers and their tally, caps), then
what only Redis has: several stores sharing rooms, a lost connection, a store made again after a restart."""

from __future__ import annotations

import json
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from geomlab import rooms
from geomlab.rooms import redis_store, state as state_mod, store as store_mod
from geomlab.rooms.state import CODE_ALPHABET, MAX_TEXT, RoomError, RoomState, RoomsUnavailable
from helpers.redis_server import redis_server  # noqa: F401  (the fixture)

TTL, PRESENCE = 600.0, 30.0


def _join(store, code, n=3):
    """``n`` students' client ids, given out by the room (made-up ids are refused)."""
    return [store.join(code) for _ in range(n)]


class Clock:
    """Seconds that move only when a test says so."""

    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture(params=["memory", "redis"])
def make(request):
    """``make(clock) -> store`` of the parametrised kind (the Redis ones share one server)."""
    if request.param == "memory":
        return lambda clock: rooms.MemoryStore(ttl_s=TTL, presence_s=PRESENCE, clock=clock)
    server = request.getfixturevalue("redis_server")
    return lambda clock: rooms.open_store(server.url, ttl_s=TTL, presence_s=PRESENCE, clock=clock)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(make, clock):
    return make(clock)


START = RoomState(page="tour", checkpoint="bundled/osm-rnn-o-s5", text="12340 10234", cursor=1,
                  view="trajectories", controls={"layer": 0, "head": None}, lesson="s5-word-problem", step=0)


# ---------------------------------------------------------------- codes and tokens
def test_codes_are_unique_well_formed_and_40_bits(store):
    codes = [store.open()[0] for _ in range(200)]
    assert len(set(codes)) == 200
    assert all(len(c) == 8 and set(c) <= set(CODE_ALPHABET) for c in codes)
    assert len(CODE_ALPHABET) ** 8 == 2 ** rooms.CODE_BITS == 2 ** 40
    assert not set("ILOU") & set(CODE_ALPHABET)


@given(st.text(alphabet=CODE_ALPHABET, min_size=8, max_size=8), st.booleans(), st.booleans())
def test_a_typed_code_normalises_to_the_stored_one(code, lower, hyphen):
    typed = code[:4] + ("-" if hyphen else "") + code[4:]
    typed = typed.lower() if lower else typed
    typed = typed.replace("0", "O").replace("1", "l")  # read-alikes of 0 and 1
    assert rooms.normalise_code(f"  {typed} ") == code


@pytest.mark.parametrize("bad", ["", "ABC", "ABCDEFGHJ", "ABCD-EFG!", "UUUUUUUU", None, 12345678, "A" * 500])
def test_a_malformed_code_is_one_room_error(bad):
    with pytest.raises(RoomError):
        rooms.normalise_code(bad)


def test_only_the_teacher_token_drives_the_room(store):
    code, token = store.open(START)
    other_code, other_token = store.open(START)
    guesses = [other_token, token[:-1] + ("A" if token[-1] != "A" else "B"), "", None, b"x", "x" * 10_000, 42]
    for guess in guesses:
        for act in (lambda: store.update(code, guess, cursor=5), lambda: store.touch(code, guess),
                    lambda: store.close(code, guess), lambda: store.reveal(code, guess, "s5-word-problem", 0)):
            with pytest.raises(RoomError, match="wrong teacher token"):
                act()
    assert store.version(code) == 0 and store.state(code).cursor == 1
    assert store.update(code, token, cursor=5).cursor == 5
    assert store.update(code.lower(), token, cursor=6).version == 2  # a typed code is the room's code


def test_the_token_is_not_stored(store):
    code, token = store.open(START)
    if isinstance(store, rooms.MemoryStore):
        kept = repr(store._rooms)
    else:
        kept = json.dumps(store._r.hgetall(redis_store.PREFIX + code))
    assert token not in kept and state_mod.token_digest(token) in kept


# ---------------------------------------------------------------- state and versions
def test_every_teacher_change_raises_the_version_by_one(store):
    code, token = store.open(START)
    assert store.state(code) == START and store.version(code) == 0
    changes = [{"cursor": 4}, {"view": "attention", "controls": {"layer": 2}}, {"step": 3}, {"text": "10234"}]
    for n, change in enumerate(changes, 1):
        new = store.update(code, token, **change)
        assert store.version(code) == n == new.version and store.state(code) == new
    got = store.state(code)
    assert (got.cursor, got.view, dict(got.controls), got.step, got.text) == (4, "attention", {"layer": 2}, 3, "10234")
    store.touch(code, token)
    assert store.version(code) == 4  # a touch is no change


def test_an_unknown_setting_or_the_version_cannot_be_set(store):
    code, token = store.open(START)
    for bad in ({"colour": "red"}, {"version": 99}):
        with pytest.raises(RoomError, match="no setting"):
            store.update(code, token, **bad)
    assert store.version(code) == 0


def test_close_ends_the_room_for_everyone(store):
    code, token = store.open(START)
    STUDENTS = _join(store, code)
    store.heartbeat(code, STUDENTS[0])
    store.close(code, token)
    for act in (lambda: store.version(code), lambda: store.state(code), lambda: store.heartbeat(code, STUDENTS[0]),
                lambda: store.update(code, token, cursor=1)):
        with pytest.raises(RoomError, match="no open room"):
            act()


# ---------------------------------------------------------------- expiry
def test_a_room_expires_after_inactivity_and_teacher_activity_keeps_it(store, clock):
    code, token = store.open(START)
    STUDENTS = _join(store, code)
    clock.now += TTL - 1
    assert store.version(code) == 0  # a follower's poll does not extend the room
    store.update(code, token, cursor=2)  # the teacher's change does
    clock.now += TTL - 1
    store.touch(code, token)
    clock.now += TTL - 1
    store.heartbeat(code, STUDENTS[0])  # students do not keep a room alive
    clock.now += 2
    with pytest.raises(RoomError, match="check the code"):
        store.version(code)
    with pytest.raises(RoomError, match="check the code"):
        store.update(code, token, cursor=3)


def test_presence_counts_followers_and_explorers_and_forgets_the_silent(store, clock):
    code, _ = store.open(START)
    STUDENTS = _join(store, code)
    assert store.presence(code) == rooms.Presence(0, 0)
    store.heartbeat(code, STUDENTS[0], "follow")
    store.heartbeat(code, STUDENTS[1], "follow")
    store.heartbeat(code, STUDENTS[2], "explore")
    assert store.presence(code) == rooms.Presence(follow=2, explore=1)
    store.heartbeat(code, STUDENTS[1], "explore")  # leaves to explore
    assert store.presence(code) == rooms.Presence(follow=1, explore=2)
    store.heartbeat(code, STUDENTS[1], "follow")  # back to the teacher in one call
    assert store.presence(code) == rooms.Presence(follow=2, explore=1)
    store.leave(code, STUDENTS[2])
    assert store.presence(code).total == 2
    clock.now += PRESENCE / 2
    store.heartbeat(code, STUDENTS[0], "follow")
    clock.now += PRESENCE / 2 + 1  # student 1's last heartbeat is now older than the window
    assert store.presence(code) == rooms.Presence(follow=1, explore=0)
    with pytest.raises(RoomError, match="follow"):
        store.heartbeat(code, STUDENTS[0], "lead")


def test_only_client_ids_the_room_gave_out_count_or_answer(store):
    """A made-up id, or one another room gave out, neither counts as present nor answers nor reads an answer;
    an id the room gave out is kept by a rejoin (a reload), and every join without one is a new student."""
    code, _ = store.open(START)
    other, _ = store.open(START)
    mine = store.join(code)
    assert store.join(code, mine) == mine and store.join(code) != mine
    assert store.join(code, "made-up-id-0123456789") != "made-up-id-0123456789"
    nonce = mine[:16]
    forged = [nonce + "A" * 16, "x" * 32, mine[:-1] + ("a" if mine[-1] != "a" else "b"), store.join(other),
              "made-up-id-0123456789"]
    for bad in forged:
        for act in (lambda: store.heartbeat(code, bad), lambda: store.answer(code, bad, START.lesson, 0, 1),
                    lambda: store.my_answer(code, bad, START.lesson, 0), lambda: store.leave(code, bad)):
            with pytest.raises(RoomError, match="not a client id of this room"):
                act()
    assert store.presence(code).total == 0 and store.tally(code, START.lesson, 0).total == 0
    store.heartbeat(code, mine)
    store.answer(code, mine, START.lesson, 0, 1)
    assert store.presence(code).total == 1 and store.my_answer(code, mine, START.lesson, 0) == 1


@given(st.text(alphabet=st.sampled_from("ABCDEFabcdef0123456789-_"), min_size=8, max_size=64))
@settings(max_examples=200, deadline=None)
def test_no_made_up_id_is_a_member(client_id):
    digest = state_mod.token_digest("teacher-token")
    with pytest.raises(RoomError):
        state_mod.check_member("ABCDEFGH", digest, client_id)
    given_out = state_mod.client_id_for("ABCDEFGH", digest)
    assert state_mod.check_member("ABCDEFGH", digest, given_out) == given_out and len(given_out) == 32


# ---------------------------------------------------------------- questions
def test_answers_are_tallied_one_per_student_and_changeable(store):
    code, token = store.open(START)
    STUDENTS = _join(store, code)
    lesson = START.lesson
    store.answer(code, STUDENTS[0], lesson, 0, 1)
    store.answer(code, STUDENTS[1], lesson, 0, 1)
    store.answer(code, STUDENTS[2], lesson, 0, 0)
    assert store.tally(code, lesson, 0) == rooms.Tally({0: 1, 1: 2}, 3, False)
    store.answer(code, STUDENTS[2], lesson, 0, 1)  # changes their mind: still one answer
    assert store.tally(code, lesson, 0) == rooms.Tally({1: 3}, 3, False)
    assert store.my_answer(code, STUDENTS[2], lesson, 0) == 1
    assert store.my_answer(code, store.join(code), lesson, 0) is None  # a student who has not answered
    with pytest.raises(RoomError, match="moved on"):
        store.answer(code, STUDENTS[0], lesson, 2, 1)  # not the step the teacher shows
    v = store.version(code)
    assert store.reveal(code, token, lesson, 0).is_revealed(lesson, 0)
    assert store.version(code) == v + 1 and store.tally(code, lesson, 0).revealed
    store.update(code, token, step=1)
    assert store.tally(code, lesson, 1) == rooms.Tally({}, 0, False)
    assert store.state(code).is_revealed(lesson, 0)  # going on keeps step 1's reveal
    assert not store.reveal(code, token, lesson, 0, revealed=False).is_revealed(lesson, 0)


# ---------------------------------------------------------------- caps
@pytest.mark.parametrize("change,match", [
    ({"text": "x" * (MAX_TEXT + 1)}, "text"), ({"checkpoint": "b" * 201}, "checkpoint"),
    ({"cursor": -1}, "cursor"), ({"cursor": True}, "cursor"), ({"cursor": 10**9}, "cursor"),
    ({"cursor": "3"}, "cursor"),
    ({"page": "../etc"}, "page"), ({"view": "X" * 10}, "view"), ({"text": "a\x00b"}, "control characters"),
    ({"controls": {f"k{i}": i for i in range(33)}}, "controls"), ({"controls": {"layer": {"nested": 1}}}, "control"),
    ({"controls": {"layer": "v" * 201}}, "control"), ({"controls": {"bad key": 1}}, "control name"),
    ({"controls": {"x": float("nan")}}, "control"), ({"controls": ["layer"]}, "controls"),
    ({"revealed": ("x/1",) * 2 + ("no-slash",)}, "question key"),
    ({"revealed": tuple(f"a/{i}" for i in range(65))}, "revealed"),
])
def test_values_over_a_cap_are_refused(store, change, match):
    code, token = store.open(START)
    with pytest.raises(RoomError, match=match):
        store.update(code, token, **change)
    assert store.version(code) == 0 and store.state(code) == START


def test_a_room_holds_at_most_max_clients_students_and_answers(store, monkeypatch):
    for module in (store_mod, redis_store):
        monkeypatch.setattr(module, "MAX_CLIENTS", 2)
    code, _ = store.open(START)
    STUDENTS = _join(store, code)
    store.heartbeat(code, STUDENTS[0])
    store.heartbeat(code, STUDENTS[1], "explore")
    with pytest.raises(RoomError, match="full"):
        store.heartbeat(code, STUDENTS[2])
    store.heartbeat(code, STUDENTS[1])  # one already present may switch
    store.answer(code, STUDENTS[0], START.lesson, 0, 0)
    store.answer(code, STUDENTS[1], START.lesson, 0, 0)
    with pytest.raises(RoomError, match="answers already"):
        store.answer(code, STUDENTS[2], START.lesson, 0, 0)
    for bad in ("short", "x" * 65, "bad id!", None):
        with pytest.raises(RoomError, match="client id"):
            store.heartbeat(code, bad)
    with pytest.raises(RoomError, match="answer"):
        store.answer(code, STUDENTS[0], START.lesson, 0, -1)


_value = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=300),
                   st.lists(st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000), st.dictionaries(st.text(max_size=70), _value, max_size=40), st.integers())
def test_any_accepted_state_is_small_and_survives_json(text, controls, cursor):
    """Whatever a client sends, a state is refused with a RoomError or is under 128 kB of JSON and reads back equal."""
    try:
        s = RoomState(text=text, controls=controls, cursor=cursor)
    except RoomError:
        return
    raw = s.to_json()
    assert len(raw) < 128 * 1024 and RoomState.from_json(raw) == s


def test_open_rooms_are_capped(make, clock, monkeypatch):
    for module in (store_mod, redis_store):
        monkeypatch.setattr(module, "MAX_ROOMS", 3)
    s = make(clock)
    for _ in range(3):
        s.open()
    with pytest.raises(RoomError, match="3 open rooms"):
        s.open()
    clock.now += TTL + 1  # expired rooms make room
    s.open()


def test_memory_store_is_thread_safe():
    s = rooms.MemoryStore(ttl_s=TTL)
    code, token = s.open()

    def drive():
        for i in range(100):
            s.update(code, token, cursor=i)
            s.version(code)

    threads = [threading.Thread(target=drive) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert s.version(code) == 800


# ---------------------------------------------------------------- settings
def test_the_setting_chooses_the_store(monkeypatch):
    monkeypatch.delenv("GEOMLAB_ROOMS_URL", raising=False)
    assert isinstance(rooms.get_store(), rooms.MemoryStore) and rooms.get_store() is rooms.get_store()
    monkeypatch.setenv("GEOMLAB_ROOMS_URL", "http://example.org/")
    with pytest.raises(RoomError, match="GEOMLAB_ROOMS_URL"):
        rooms.get_store()
    monkeypatch.setenv("GEOMLAB_ROOMS_URL", "redis://127.0.0.1:1/0")
    assert isinstance(rooms.get_store(), redis_store.RedisStore)  # connects on first use
    monkeypatch.setenv("GEOMLAB_ROOMS_TTL_S", "soon")
    with pytest.raises(RoomError, match="GEOMLAB_ROOMS_TTL_S"):
        rooms.open_store("")


def test_the_url_in_messages_has_no_password():
    assert redis_store.describe_url("redis://user:secret@db.example:6380/2") == "redis://db.example:6380/2"


# ---------------------------------------------------------------- Redis only
def test_two_replicas_share_a_room_and_a_restarted_server_finds_it(redis_server):
    a = rooms.open_store(redis_server.url, ttl_s=TTL)
    b = rooms.open_store(redis_server.url, ttl_s=TTL)
    code, token = a.open(START)
    STUDENTS = _join(a, code)
    b.update(code, token, cursor=7)  # the teacher's next request lands on the other replica
    b.heartbeat(code, STUDENTS[0], "explore")
    a.answer(code, STUDENTS[1], START.lesson, 0, 2)
    del a, b  # the app servers restart; Redis keeps running
    again = rooms.open_store(redis_server.url, ttl_s=TTL)
    assert again.state(code).cursor == 7 and again.version(code) == 1
    assert again.presence(code) == rooms.Presence(follow=0, explore=1)
    assert again.tally(code, START.lesson, 0).counts == {2: 1}
    assert again.update(code, token, cursor=8).version == 2
    left = again._r.ttl(redis_store.PREFIX + code)
    assert TTL < left <= TTL + 60  # Redis forgets the room by itself


def test_losing_redis_is_one_line_rooms_unavailable(redis_server):
    s = rooms.open_store(redis_server.url, ttl_s=TTL)
    code, token = s.open(START)
    STUDENTS = _join(s, code)
    redis_server.stop()
    acts = [lambda: s.version(code), lambda: s.state(code), lambda: s.update(code, token, cursor=2),
            lambda: s.heartbeat(code, STUDENTS[0]), lambda: s.presence(code), lambda: s.open(),
            lambda: s.tally(code, START.lesson, 0)]
    t0 = time.monotonic()
    for act in acts:
        with pytest.raises(RoomsUnavailable) as err:
            act()
        msg = str(err.value)
        assert "\n" not in msg and f"127.0.0.1:{redis_server.port}/0 unavailable" in msg
    assert time.monotonic() - t0 < 20  # fails fast, no hang
    redis_server.start()  # back (empty: this test's server keeps nothing on disk)
    with pytest.raises(RoomError, match="no open room"):
        s.version(code)


def test_a_read_state_cannot_be_changed_behind_the_teachers_back(store):
    code, _ = store.open(START)
    got = store.state(code)
    with pytest.raises(TypeError):
        got.controls["layer"] = 5
    assert store.state(code).controls["layer"] == 0 and store.version(code) == 0


def _calls(client) -> dict[str, int]:
    return {name: s["calls"] for name, s in client.info("commandstats").items()}


def test_a_followers_poll_is_one_redis_command(redis_server):
    """100 polls of the version are 100 HMGETs of one key and nothing else (O(1) each)."""
    s = rooms.open_store(redis_server.url, ttl_s=TTL)
    code, _ = s.open(START)
    before = _calls(s._r)
    for _ in range(100):
        s.version(code)
    after = _calls(s._r)
    grown = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    grown.pop("cmdstat_info", None)
    assert grown == {"cmdstat_hmget": 100}


def test_concurrent_teacher_writes_through_two_replicas_lose_nothing(redis_server):
    a, b = (rooms.open_store(redis_server.url, ttl_s=TTL) for _ in range(2))
    code, token = a.open(START)

    def drive(s):
        for i in range(25):
            s.update(code, token, cursor=i)

    threads = [threading.Thread(target=drive, args=(s,)) for s in (a, b, a, b)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert a.version(code) == b.version(code) == 100 == a.state(code).version


def test_a_follower_reads_the_state_only_after_a_change(store):
    code, token = store.open(START)
    seen = store.version(code)
    assert store.changed_since(code, seen) is None
    store.update(code, token, cursor=9)
    new = store.changed_since(code, seen)
    assert new is not None and new.cursor == 9 and new.version == seen + 1


# ---------------------------------------------------------------- the teacher's charts
def test_charts_are_stored_with_the_version_of_their_change_and_lag_a_change_without_them(store):
    code, token = store.open(START)
    assert store.charts(code) is None
    charts = json.dumps({"charts": {"tour-x": {"layout": "{}", "digest": "d1", "bundle": "cartesian"}},
                         "traces": {"d1": "[]"}})
    assert store.update(code, token, charts=charts, cursor=3).version == 1
    assert store.charts(code) == (1, charts)  # the same text, with the version of that change
    store.update(code, token, step=1)  # a change the teacher published no charts with
    assert store.charts(code) == (1, charts) and store.version(code) == 2  # a follower sees they lag
    with pytest.raises(RoomError, match="only the teacher"):
        store.update(code, "guess", charts=charts, cursor=4)
    assert store.charts(code) == (1, charts)


@pytest.mark.parametrize("bad", ["not json", "[1, 2]", 7, "x" * (store_mod.MAX_CHARTS_BYTES + 1)],
                         ids=["text", "list", "number", "too-large"])
def test_charts_that_are_not_a_json_object_or_too_large_are_refused_and_change_nothing(store, bad):
    code, token = store.open(START)
    with pytest.raises(RoomError, match="charts"):
        store.update(code, token, charts=bad, cursor=5)
    assert store.version(code) == 0 and store.charts(code) is None and store.state(code).cursor == START.cursor


def test_closing_a_room_forgets_its_charts(redis_server):
    s = rooms.open_store(redis_server.url, ttl_s=TTL)
    code, token = s.open(START)
    s.update(code, token, charts='{"charts": {}}', cursor=2)
    assert s._r.exists(redis_store.PREFIX + code + ":charts")
    s.close(code, token)
    assert not s._r.exists(redis_store.PREFIX + code + ":charts")
    with pytest.raises(RoomError, match="no open room"):
        s.charts(code)
