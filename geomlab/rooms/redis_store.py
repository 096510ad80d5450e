"""Rooms shared by several app replicas through Redis (``GEOMLAB_ROOMS_URL=redis://host:port/db``): the
same behaviour as :class:`geomlab.rooms.store.MemoryStore`, on a redis-py client.

Keys (``C`` a room code; each expires ``ttl_s + 60`` seconds after its last write, so Redis forgets a room
by itself; the room's lifetime is checked against ``clock`` too, which lets tests inject time):

* ``geomlab:room:C``: a hash: ``digest`` (SHA-256 of the teacher token), ``state`` (JSON), ``version``, ``expires``.
* ``geomlab:room:C:follow`` and ``geomlab:room:C:explore``: sorted sets, a student's client id scored by
  the time of their last heartbeat (counting is ``ZCOUNT``, O(log n)).
* ``geomlab:room:C:charts``: a hash, ``version`` and ``charts`` (the teacher's charts at that version).
* ``geomlab:room:C:answers:LESSON/STEP``: a hash, client id -> answer.
* ``geomlab:rooms``: a sorted set of open codes scored by expiry (the cap on open rooms).

Each replica's watcher (:mod:`geomlab.rooms.watch`) polls :meth:`RedisStore.version` of the rooms its
students wait on: one ``HMGET`` of two fields, O(1), every 50 ms, however many students wait (design choice:
a poll, not pub/sub: no subscriber connection to re-establish after Redis restarts, 20 commands a second per
room and replica). Teacher writes are optimistic transactions (``WATCH``/``MULTI``).
Any Redis error (connection refused or lost, timeout) is raised as one line, :class:`RoomsUnavailable`.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

from geomlab.rooms.state import (MAX_CLIENTS, Presence, RoomError, RoomState, RoomsUnavailable, Tally,
                                 check_member, check_mode, check_token, client_id_for, new_code, new_token,
                                 normalise_code, question_key, tally_of, token_digest)
from geomlab.rooms.store import DEFAULT_PRESENCE_S, MAX_ROOMS, RoomStore, _check_answer, check_charts, ttl_setting

PREFIX = "geomlab:room:"
ROOMS = "geomlab:rooms"
SCHEMES = ("redis", "rediss", "unix")


def describe_url(url: str) -> str:
    """The store's address without its password, for messages (``redis://host:port/db``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class RedisStore(RoomStore):
    """Rooms in Redis at ``url`` (``redis://host:port/db``, ``rediss://`` for TLS, ``unix://path``).

    Raises :class:`RoomError` naming ``GEOMLAB_ROOMS_URL`` for a URL of another scheme and
    :class:`RoomsUnavailable` when redis-py is missing; the connection is made on first use. Timeouts of
    2 s and one retry (design choice: a follower's poll must fail fast, not hang the page)."""

    def __init__(self, url: str, ttl_s: float | None = None, presence_s: float = DEFAULT_PRESENCE_S,
                 clock: Callable[[], float] = time.time):
        try:
            scheme = urlsplit(url).scheme
        except ValueError:
            scheme = ""
        if scheme not in SCHEMES:
            raise RoomError(f"GEOMLAB_ROOMS_URL must be redis://host:port/db, not {str(url)[:40]!r}")
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise RoomsUnavailable("GEOMLAB_ROOMS_URL is set, but the redis package is not installed") from None
        self._errors = redis.exceptions.RedisError
        self.where = describe_url(url)
        self.ttl_s = ttl_setting() if ttl_s is None else float(ttl_s)
        self.presence_s = float(presence_s)
        self.clock = clock
        self._r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=2, socket_connect_timeout=2,
                                       retry=Retry(NoBackoff(), 1))

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            raise RoomsUnavailable(f"rooms store {self.where} unavailable: "
                                   f"{str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}") from None

    def _keep(self) -> int:
        return int(math.ceil(self.ttl_s)) + 60

    def _live(self, code: str, found: list) -> None:
        """Raise :class:`RoomError` unless ``found`` (``[digest or expires, ...]`` of an HMGET) is a live room."""
        if found[0] is None or found[-1] is None or float(found[-1]) <= self.clock():
            raise RoomError(f"no open room {code}: check the code (a room that was closed or expired is gone too)")

    def open(self, state: RoomState | None = None) -> tuple[str, str]:
        state = RoomState() if state is None else state
        if not isinstance(state, RoomState):
            raise RoomError("a room opens with a RoomState")
        state = RoomState.from_json(state.to_json())
        token = new_token()
        now = self.clock()
        with self._guard():
            self._r.zremrangebyscore(ROOMS, "-inf", now)
            if self._r.zcard(ROOMS) >= MAX_ROOMS:
                raise RoomError(f"the rooms store holds {MAX_ROOMS} open rooms; try again later")
            while True:  # a code already taken (about 1 in 10^12 per open room) draws again
                code = new_code()
                key = PREFIX + code
                taken: list[bool] = []

                def create(pipe: Any) -> None:
                    if pipe.exists(key):
                        taken.append(True)
                        return
                    pipe.multi()
                    pipe.hset(key, mapping={"digest": token_digest(token), "state": state.to_json(),
                                            "version": state.version, "expires": now + self.ttl_s})
                    pipe.expire(key, self._keep())
                    pipe.zadd(ROOMS, {code: now + self.ttl_s})

                self._r.transaction(create, key)
                if not taken:
                    break
        return code, token

    def state(self, code: str) -> RoomState:
        code = normalise_code(code)
        with self._guard():
            found = self._r.hmget(PREFIX + code, "state", "expires")
        self._live(code, found)
        return RoomState.from_json(found[0])

    def version(self, code: str) -> int:
        code = normalise_code(code)
        with self._guard():
            found = self._r.hmget(PREFIX + code, "version", "expires")
        self._live(code, found)
        return int(found[0])

    def _teacher_write(self, code: str, token: str, changes: dict | None, charts: str | None = None) -> RoomState:
        """Check the token, apply ``changes`` (None: only refresh the lifetime) and store ``charts`` with the
        new version, in one WATCH transaction."""
        code = normalise_code(code)
        key = PREFIX + code
        out: list[RoomState] = []

        def write(pipe: Any) -> None:
            found = pipe.hmget(key, "digest", "state", "expires")
            self._live(code, found)
            check_token(token, found[0])
            state = RoomState.from_json(found[1])
            new = state if changes is None else state.changed(changes)
            expires = self.clock() + self.ttl_s
            pipe.multi()
            pipe.hset(key, mapping={"state": new.to_json(), "version": new.version, "expires": expires})
            if charts is not None:
                pipe.hset(key + ":charts", mapping={"version": new.version, "charts": charts})
            for k in (key, key + ":follow", key + ":explore", key + ":charts"):
                pipe.expire(k, self._keep())
            pipe.zadd(ROOMS, {code: expires})
            out.append(new)

        with self._guard():
            self._r.transaction(write, key)
        return out[-1]

    def update(self, code: str, token: str, charts: str | None = None, **changes: Any) -> RoomState:
        return self._teacher_write(code, token, changes, None if charts is None else check_charts(charts))

    def charts(self, code: str) -> tuple[int, str] | None:
        code = normalise_code(code)
        with self._guard():
            pipe = self._r.pipeline()
            pipe.hmget(PREFIX + code, "digest", "expires")
            pipe.hmget(PREFIX + code + ":charts", "version", "charts")
            found, (version, charts) = pipe.execute()
        self._live(code, found)
        return None if version is None or charts is None else (int(version), charts)

    def touch(self, code: str, token: str) -> None:
        self._teacher_write(code, token, None)

    def close(self, code: str, token: str) -> None:
        self._teacher_write(code, token, None)
        code = normalise_code(code)
        with self._guard():
            keys = [PREFIX + code + suffix for suffix in ("", ":follow", ":explore", ":charts")]
            keys += list(self._r.scan_iter(match=PREFIX + code + ":answers:*", count=100))
            self._r.delete(*keys)
            self._r.zrem(ROOMS, code)

    def _require(self, code: str) -> str:
        with self._guard():
            found = self._r.hmget(PREFIX + code, "digest", "expires")
        self._live(code, found)
        return code

    def _member(self, code: str, client_id: str) -> str:
        """The normalised code of a live room that gave out ``client_id``; :class:`RoomError` otherwise."""
        code = normalise_code(code)
        with self._guard():
            found = self._r.hmget(PREFIX + code, "digest", "expires")
        self._live(code, found)
        check_member(code, found[0], client_id)
        return code

    def join(self, code: str, client_id: str | None = None) -> str:
        code = normalise_code(code)
        with self._guard():
            found = self._r.hmget(PREFIX + code, "digest", "expires")
        self._live(code, found)
        try:
            return check_member(code, found[0], client_id)
        except RoomError:
            return client_id_for(code, found[0])

    def heartbeat(self, code: str, client_id: str, mode: str = "follow") -> None:
        check_mode(mode)
        key = PREFIX + self._member(code, client_id)
        now = self.clock()
        other = "explore" if mode == "follow" else "follow"
        with self._guard():
            pipe = self._r.pipeline()
            for m in ("follow", "explore"):
                pipe.zremrangebyscore(f"{key}:{m}", "-inf", now - self.presence_s)
            pipe.zscore(f"{key}:{mode}", client_id)
            pipe.zscore(f"{key}:{other}", client_id)
            pipe.zcard(f"{key}:follow")
            pipe.zcard(f"{key}:explore")
            *_, mine, theirs, n_follow, n_explore = pipe.execute()
            if mine is None and theirs is None and n_follow + n_explore >= MAX_CLIENTS:
                raise RoomError(f"this room is full ({MAX_CLIENTS} students)")
            pipe = self._r.pipeline()
            pipe.zrem(f"{key}:{other}", client_id)
            pipe.zadd(f"{key}:{mode}", {client_id: now})
            pipe.expire(f"{key}:{mode}", self._keep())
            pipe.execute()

    def leave(self, code: str, client_id: str) -> None:
        key = PREFIX + self._member(code, client_id)
        with self._guard():
            self._r.zrem(key + ":follow", client_id)
            self._r.zrem(key + ":explore", client_id)

    def presence(self, code: str) -> Presence:
        key = PREFIX + self._require(normalise_code(code))
        since = self.clock() - self.presence_s
        with self._guard():
            pipe = self._r.pipeline()
            pipe.zcount(key + ":follow", f"({since}", "+inf")
            pipe.zcount(key + ":explore", f"({since}", "+inf")
            follow, explore = pipe.execute()
        return Presence(follow=int(follow), explore=int(explore))

    def answer(self, code: str, client_id: str, lesson: str, step: int, value: int) -> None:
        self._member(code, client_id)
        qkey = _check_answer(self.state(code), lesson, step, value)
        key = f"{PREFIX}{normalise_code(code)}:answers:{qkey}"
        with self._guard():
            if not self._r.hexists(key, client_id) and self._r.hlen(key) >= MAX_CLIENTS:
                raise RoomError(f"this question has {MAX_CLIENTS} answers already")
            pipe = self._r.pipeline()
            pipe.hset(key, client_id, value)
            pipe.expire(key, self._keep())
            pipe.execute()

    def my_answer(self, code: str, client_id: str, lesson: str, step: int) -> int | None:
        key = f"{PREFIX}{self._member(code, client_id)}:answers:{question_key(lesson, step)}"
        with self._guard():
            value = self._r.hget(key, client_id)
        return None if value is None else int(value)

    def tally(self, code: str, lesson: str, step: int) -> Tally:
        qkey = question_key(lesson, step)
        state = self.state(code)
        with self._guard():
            answers = self._r.hgetall(f"{PREFIX}{normalise_code(code)}:answers:{qkey}")
        return tally_of(answers, qkey in state.revealed)
