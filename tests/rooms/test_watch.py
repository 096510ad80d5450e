"""The follow channel (geomlab.rooms.watch) over real HTTP requests (Starlette's test client) against the
in-process store: a long poll answered at once for a stale version, held until the teacher's change and
answered within a fraction of a second, answered unchanged after its time; the teacher's charts as stored;
clear errors for a malformed or unknown room; a student counted present by the poll. Then a real
``redis-server`` behind it, and a Redis connection lost while a class waits."""

from __future__ import annotations

import json
import threading
import time

import pytest

from geomlab import rooms
from geomlab.rooms import watch
from geomlab.rooms.state import RoomState
from helpers.redis_server import redis_server  # noqa: F401  (the fixture)

START = RoomState(page="tour", checkpoint="bundled/osm-rnn-o-s5", text="12340 10234", cursor=1, lesson="s5", step=0)


@pytest.fixture
def channel(monkeypatch):
    """``(client, store)``: the channel's routes in a Starlette app on a fresh in-process store."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    store = rooms.MemoryStore(ttl_s=600)
    monkeypatch.setattr(watch, "WAIT_S", 3.0)
    with TestClient(Starlette(routes=watch.routes(lambda: store))) as client:
        yield client, store


def wait(client, code, since, **params):
    return client.get(f"{watch.PREFIX}/{code}/wait", params={"since": since, **params})


def test_a_stale_version_is_answered_at_once_with_the_rooms_state(channel):
    client, store = channel
    code, token = store.open(START)
    store.update(code, token, cursor=4)
    t0 = time.monotonic()
    got = wait(client, code, -1)
    assert time.monotonic() - t0 < 1.0
    assert got.status_code == 200 and got.headers["cache-control"] == "no-store"
    body = got.json()
    assert body["version"] == 1 and body["state"]["cursor"] == 4 and body["charts"] == -1
    assert RoomState.from_json(json.dumps(body["state"])) == store.state(code)


def test_a_long_poll_is_held_until_the_teachers_change_and_answered_soon_after(channel):
    client, store = channel
    code, token = store.open(START)
    out = {}

    def poll():
        got = wait(client, code, 0)
        out["t"], out["body"] = time.monotonic(), got.json()

    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.6)
    assert th.is_alive()  # no change yet: still waiting
    t_change = time.monotonic()
    charts = json.dumps({"charts": {"k": {"layout": "{}", "digest": "d", "bundle": "cartesian"}}, "traces": {"d": "[]"}})
    store.update(code, token, charts=charts, cursor=9)
    th.join(5)
    assert out["body"]["version"] == 1 and out["body"]["state"]["cursor"] == 9 and out["body"]["charts"] == 1
    assert out["t"] - t_change < 0.5  # the watcher reads the version every 50 ms
    got = client.get(f"{watch.PREFIX}/{code}/charts")
    assert got.status_code == 200 and got.json() == {"version": 1, "charts": json.loads(charts)}


def test_an_unchanged_room_is_answered_with_its_version_after_the_polls_time(channel):
    client, store = channel
    code, _ = store.open(START)
    t0 = time.monotonic()
    got = wait(client, code, 0)
    assert 2.5 < time.monotonic() - t0 < 6 and got.json()["version"] == 0


@pytest.mark.parametrize("path, status", [
    ("/NOTACODE!/wait", 400), ("/ABCD1234/wait?since=x", 400), ("/ABCD1234/wait?me=a", 400),
    ("/ABCD1234/wait?mode=drive", 400), ("/ABCD1234/wait", 404), ("/ABCD1234/charts", 404)])
def test_a_malformed_request_or_an_unknown_room_is_a_clear_error(channel, path, status):
    client, _ = channel
    got = client.get(watch.PREFIX + path)
    assert got.status_code == status and got.json()["error"]


def test_a_room_closed_while_students_wait_ends_their_polls_with_404(channel):
    client, store = channel
    code, token = store.open(START)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", wait(client, code, 0)))
    th.start()
    time.sleep(0.3)
    store.close(code, token)
    th.join(5)
    assert out["r"].status_code == 404 and "no open room" in out["r"].json()["error"]


def test_the_poll_counts_the_student_present_in_their_mode(channel):
    client, store = channel
    code, _ = store.open(START)
    assert wait(client, code, -1, me=store.join(code), mode="explore").status_code == 200
    assert store.presence(code) == rooms.Presence(follow=0, explore=1)
    assert wait(client, code, -1, me=store.join(code)).status_code == 200
    assert store.presence(code) == rooms.Presence(follow=1, explore=1)
    made_up = wait(client, code, -1, me="student-made-up")  # answered, with a warning, and not counted
    assert made_up.status_code == 200 and "not a client id of this room" in made_up.json()["warning"]
    assert store.presence(code) == rooms.Presence(follow=1, explore=1)


def test_a_class_waiting_costs_the_store_one_version_read_per_poll_interval(redis_server, monkeypatch):
    """40 students waiting on one room through Redis: the store sees the watcher's reads (20 a second), not
    40 students' polls; all 40 get the teacher's change."""
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    store = rooms.open_store(redis_server.url, ttl_s=600)
    code, token = store.open(START)
    monkeypatch.setattr(watch, "WAIT_S", 5.0)
    with TestClient(Starlette(routes=watch.routes(lambda: store))) as client:
        results = []
        threads = [threading.Thread(target=lambda: results.append(wait(client, code, 0).json()))
                   for _ in range(40)]
        [t.start() for t in threads]
        time.sleep(0.5)
        before = store._r.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)
        time.sleep(1.0)
        during = store._r.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0) - before
        store.update(code, token, cursor=6)
        [t.join(10) for t in threads]
    assert during <= 25  # one read of the version per 50 ms, whatever the class's size
    assert len(results) == 40 and all(r["version"] == 1 and r["state"]["cursor"] == 6 for r in results)


def test_losing_redis_while_a_class_waits_is_a_503_with_one_line(redis_server):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    store = rooms.open_store(redis_server.url, ttl_s=600)
    code, _ = store.open(START)
    with TestClient(Starlette(routes=watch.routes(lambda: store))) as client:
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("r", wait(client, code, 0)))
        th.start()
        time.sleep(0.3)
        redis_server.stop()
        th.join(15)
    redis_server.start()
    assert out["r"].status_code == 503
    assert "\n" not in out["r"].json()["error"] and "unavailable" in out["r"].json()["error"]


def test_made_up_codes_are_not_watched_and_cannot_crowd_out_a_real_room(channel, monkeypatch):
    """1,005 polls of codes that name no room are 404s that leave nothing on the watch list; a real room's
    poll is then answered as usual."""
    client, store = channel
    monkeypatch.setattr(watch, "MAX_WATCHED", 50)
    for i in range(1005):
        fake = rooms.state.new_code()
        got = wait(client, fake, 0)
        assert got.status_code == 404, got.text
    code, token = store.open(START)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", wait(client, code, 0)))
    th.start()
    time.sleep(0.3)
    store.update(code, token, cursor=3)
    th.join(5)
    assert out["r"].status_code == 200 and out["r"].json()["state"]["cursor"] == 3


def test_a_poll_counts_the_student_when_it_starts_not_when_it_is_answered(channel):
    """A page that gave up a poll (its student switched to exploring) is not counted again in the old mode
    when that poll is answered later."""
    client, store = channel
    code, token = store.open(START)
    ME = store.join(code)
    polls = [threading.Thread(target=lambda: wait(client, code, 0, me=ME, mode="follow"))]
    polls[0].start()
    time.sleep(0.3)
    assert store.presence(code) == rooms.Presence(follow=1, explore=0)
    polls.append(threading.Thread(target=lambda: wait(client, code, 0, me=ME, mode="explore")))
    polls[1].start()
    time.sleep(0.3)
    assert store.presence(code) == rooms.Presence(follow=0, explore=1)
    store.update(code, token, cursor=2)  # both polls are answered now
    [t.join(5) for t in polls]
    assert store.presence(code) == rooms.Presence(follow=0, explore=1)


def test_since_that_is_not_a_version_is_named_in_a_plain_error(channel):
    client, store = channel
    code, _ = store.open(START)
    for bad in ("abc", "1" * 5000, "1.5"):
        got = wait(client, code, bad)
        assert got.status_code == 400 and "since must be a room version" in got.json()["error"]
        assert "int()" not in got.json()["error"] and len(got.json()["error"]) < 100
