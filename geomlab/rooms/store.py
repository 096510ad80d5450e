"""The rooms store: :class:`RoomStore`, the one interface the app calls, and :class:`MemoryStore`, the
default that keeps rooms in the server process (thread-safe, expiry by an injectable clock).

A room lives ``ttl_s`` seconds after the teacher's last write or :meth:`RoomStore.touch`; a student counts as
present for ``presence_s`` seconds after their last :meth:`RoomStore.heartbeat`. Reads that 100 students
repeat (:meth:`RoomStore.version`) are O(1). The Redis store with the same behaviour is
:class:`geomlab.rooms.redis_store.RedisStore`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from geomlab.rooms.state import (MAX_CLIENTS, Presence, RoomError, RoomState, Tally, check_member, check_mode,
                                 check_position, check_token, client_id_for, new_code, new_token, normalise_code,
                                 question_key, tally_of, token_digest)

#: Seconds a room lives after the teacher's last action (``GEOMLAB_ROOMS_TTL_S``; design choice: 2 hours).
DEFAULT_TTL_S = 7200.0
#: Seconds a student counts as present after a heartbeat (design choice: a few missed 10-s heartbeats).
DEFAULT_PRESENCE_S = 30.0
#: Open rooms one store holds at most (design choice: a school's worth; opening one more is refused).
MAX_ROOMS = 1000
#: Bytes of a room's published charts at most (design choice: a page's charts as JSON are 50-800 KB).
MAX_CHARTS_BYTES = 8 * 2**20


def check_charts(charts: Any) -> str:
    """Charts a teacher publishes: a JSON object of at most :data:`MAX_CHARTS_BYTES` bytes; :class:`RoomError`
    otherwise. Its content is the app's business (the teacher's page's charts); the store keeps the text as
    is."""
    if not isinstance(charts, str) or len(charts) > MAX_CHARTS_BYTES:
        raise RoomError(f"a room's charts are a string of at most {MAX_CHARTS_BYTES} bytes")
    try:
        ok = isinstance(json.loads(charts), dict)
    except ValueError:
        ok = False
    if not ok:
        raise RoomError("a room's charts are a JSON object")
    return charts


def ttl_setting() -> float:
    """The room lifetime in seconds from ``GEOMLAB_ROOMS_TTL_S`` (default :data:`DEFAULT_TTL_S`); raises
    :class:`RoomError` naming the setting when it is not a number in 60..604800."""
    raw = os.environ.get("GEOMLAB_ROOMS_TTL_S", "").strip()
    if not raw:
        return DEFAULT_TTL_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 60 <= value <= 604_800:
        raise RoomError(f"GEOMLAB_ROOMS_TTL_S must be seconds in 60..604800, not {raw[:20]!r}")
    return value


class RoomStore:
    """The rooms interface. Codes may be passed as typed (:func:`geomlab.rooms.state.normalise_code`).

    Errors: :class:`RoomError` for an unknown or expired room, a wrong teacher token or a bad value;
    :class:`RoomsUnavailable` when the store cannot be reached (Redis only).
    """

    ttl_s: float
    presence_s: float
    clock: Callable[[], float]

    def open(self, state: RoomState | None = None) -> tuple[str, str]:
        """Open a room showing ``state`` (version 0); returns ``(code, teacher_token)``. The token is shown
        to the teacher once; the store keeps only its SHA-256 digest."""
        raise NotImplementedError

    def state(self, code: str) -> RoomState:
        """The room's current state (followers read it when :meth:`version` moved)."""
        raise NotImplementedError

    def version(self, code: str) -> int:
        """The room's version: O(1), the cheap check a follower polls (every 0.3-1 s)."""
        raise NotImplementedError

    def changed_since(self, code: str, version: int) -> RoomState | None:
        """The room's state when its version is not ``version`` any more, else None: a follower's poll, one
        O(1) :meth:`version` read, plus one :meth:`state` read only after a change."""
        return None if self.version(code) == version else self.state(code)

    def update(self, code: str, token: str, charts: str | None = None, **changes: Any) -> RoomState:
        """Teacher only: apply ``changes`` (fields of :class:`RoomState`), raise the version by one, refresh the
        room's lifetime; returns the new state. ``charts``: what the teacher's page draws in that state
        (:func:`check_charts`), stored with the new version in the same write; without them the stored charts
        keep their older version, so a follower can tell they do not show this state (:meth:`charts`)."""
        raise NotImplementedError

    def charts(self, code: str) -> tuple[int, str] | None:
        """``(version, charts)`` of the charts the teacher published last, or None: a follower draws them when
        their version is the room's (a change of the cursor alone), with no page run of its own."""
        raise NotImplementedError

    def touch(self, code: str, token: str) -> None:
        """Teacher only: refresh the room's lifetime without a change (the version stays)."""
        raise NotImplementedError

    def close(self, code: str, token: str) -> None:
        """Teacher only: delete the room, its presence and its answers."""
        raise NotImplementedError

    def join(self, code: str, client_id: str | None = None) -> str:
        """A student's client id in the room: ``client_id`` when the room gave it out (a reload of a student's
        link), else a new one (:func:`geomlab.rooms.state.client_id_for`). The calls below that take a
        ``client_id`` refuse, with :class:`RoomError`, one the room did not give out."""
        raise NotImplementedError

    def heartbeat(self, code: str, client_id: str, mode: str = "follow") -> None:
        """A student is present, following (``"follow"``) or on their own (``"explore"``). Refused with
        :class:`RoomError` when :data:`geomlab.rooms.state.MAX_CLIENTS` others are present."""
        raise NotImplementedError

    def leave(self, code: str, client_id: str) -> None:
        """A student leaves the room (no longer counted)."""
        raise NotImplementedError

    def presence(self, code: str) -> Presence:
        """How many students follow and how many explore (seen within ``presence_s``)."""
        raise NotImplementedError

    def answer(self, code: str, client_id: str, lesson: str, step: int, value: int) -> None:
        """A student's answer (an option index or a token position) to the question of ``lesson``'s step
        ``step`` (0-based), which must be the room's current step; a second answer replaces the first."""
        raise NotImplementedError

    def my_answer(self, code: str, client_id: str, lesson: str, step: int) -> int | None:
        """The answer ``client_id`` gave to that question, or None."""
        raise NotImplementedError

    def tally(self, code: str, lesson: str, step: int) -> Tally:
        """The answers to that question counted by value, and whether the teacher revealed it."""
        raise NotImplementedError

    def reveal(self, code: str, token: str, lesson: str, step: int, revealed: bool = True) -> RoomState:
        """Teacher only: reveal (or hide again) the answer of that question; a state change (the version
        moves, so the students' screens show it)."""
        key = question_key(lesson, step)
        current = self.state(code).revealed
        keys = current + (key,) if revealed else tuple(k for k in current if k != key)
        return self.update(code, token, revealed=keys)


def _check_answer(state: RoomState, lesson: str, step: int, value: Any) -> str:
    """The question key of an answer to the room's current step; :class:`RoomError` otherwise."""
    key = question_key(lesson, step)
    check_position(value, "answer")
    if (state.lesson, state.step) != (lesson, step):
        raise RoomError("the room has moved on: answer the question of the step the teacher shows")
    return key


@dataclass
class _Room:
    digest: str
    state: RoomState
    expires: float
    seen: dict[str, tuple[str, float]] = field(default_factory=dict)  # client -> (mode, last heartbeat)
    charts: tuple[int, str] | None = None  # (version, charts) published last
    answers: dict[str, dict[str, int]] = field(default_factory=dict)  # question key -> {client: answer}


class MemoryStore(RoomStore):
    """Rooms in this process (the default): one lock, dictionaries, expiry checked against ``clock``
    (seconds; default :func:`time.time`, injectable for tests). Source: design choice."""

    def __init__(self, ttl_s: float | None = None, presence_s: float = DEFAULT_PRESENCE_S,
                 clock: Callable[[], float] = time.time):
        self.ttl_s = ttl_setting() if ttl_s is None else float(ttl_s)
        self.presence_s = float(presence_s)
        self.clock = clock
        self._rooms: dict[str, _Room] = {}
        self._lock = threading.Lock()

    def _room(self, code: str) -> _Room:
        """The live room (lock held); an expired one is dropped."""
        code = normalise_code(code)
        room = self._rooms.get(code)
        if room is not None and room.expires <= self.clock():
            del self._rooms[code]
            room = None
        if room is None:
            raise RoomError(f"no open room {code}: check the code (a room that was closed or expired is gone too)")
        return room

    def _teacher(self, code: str, token: str) -> _Room:
        room = self._room(code)
        check_token(token, room.digest)
        room.expires = self.clock() + self.ttl_s
        return room

    def open(self, state: RoomState | None = None) -> tuple[str, str]:
        state = RoomState() if state is None else state
        if not isinstance(state, RoomState):
            raise RoomError("a room opens with a RoomState")
        token = new_token()
        with self._lock:
            now = self.clock()
            for code in [c for c, r in self._rooms.items() if r.expires <= now]:
                del self._rooms[code]
            if len(self._rooms) >= MAX_ROOMS:
                raise RoomError(f"this server holds {MAX_ROOMS} open rooms; try again later")
            code = new_code()
            while code in self._rooms:
                code = new_code()
            self._rooms[code] = _Room(token_digest(token), RoomState.from_json(state.to_json()), now + self.ttl_s)
        return code, token

    def state(self, code: str) -> RoomState:
        with self._lock:
            return self._room(code).state

    def version(self, code: str) -> int:
        with self._lock:
            return self._room(code).state.version

    def update(self, code: str, token: str, charts: str | None = None, **changes: Any) -> RoomState:
        if charts is not None:
            check_charts(charts)
        with self._lock:
            room = self._teacher(code, token)
            room.state = room.state.changed(changes)
            if charts is not None:
                room.charts = (room.state.version, charts)
            return room.state

    def charts(self, code: str) -> tuple[int, str] | None:
        with self._lock:
            return self._room(code).charts

    def touch(self, code: str, token: str) -> None:
        with self._lock:
            self._teacher(code, token)

    def close(self, code: str, token: str) -> None:
        with self._lock:
            self._teacher(code, token)
            del self._rooms[normalise_code(code)]

    def _member(self, code: str, client_id: str) -> _Room:
        """The live room (lock held) when ``client_id`` is one of its client ids; :class:`RoomError` otherwise."""
        room = self._room(code)
        check_member(normalise_code(code), room.digest, client_id)
        return room

    def join(self, code: str, client_id: str | None = None) -> str:
        with self._lock:
            room = self._room(code)
            try:
                return check_member(normalise_code(code), room.digest, client_id)
            except RoomError:
                return client_id_for(normalise_code(code), room.digest)

    def heartbeat(self, code: str, client_id: str, mode: str = "follow") -> None:
        check_mode(mode)
        with self._lock:
            room = self._member(code, client_id)
            now = self.clock()
            room.seen = {c: s for c, s in room.seen.items() if s[1] > now - self.presence_s}
            if client_id not in room.seen and len(room.seen) >= MAX_CLIENTS:
                raise RoomError(f"this room is full ({MAX_CLIENTS} students)")
            room.seen[client_id] = (mode, now)

    def leave(self, code: str, client_id: str) -> None:
        with self._lock:
            self._member(code, client_id).seen.pop(client_id, None)

    def presence(self, code: str) -> Presence:
        with self._lock:
            room = self._room(code)
            since = self.clock() - self.presence_s
            modes = [mode for mode, seen in room.seen.values() if seen > since]
        return Presence(follow=modes.count("follow"), explore=modes.count("explore"))

    def answer(self, code: str, client_id: str, lesson: str, step: int, value: int) -> None:
        with self._lock:
            room = self._member(code, client_id)
            answers = room.answers.setdefault(_check_answer(room.state, lesson, step, value), {})
            if client_id not in answers and len(answers) >= MAX_CLIENTS:
                raise RoomError(f"this question has {MAX_CLIENTS} answers already")
            answers[client_id] = value

    def my_answer(self, code: str, client_id: str, lesson: str, step: int) -> int | None:
        key = question_key(lesson, step)
        with self._lock:
            return self._member(code, client_id).answers.get(key, {}).get(client_id)

    def tally(self, code: str, lesson: str, step: int) -> Tally:
        key = question_key(lesson, step)
        with self._lock:
            room = self._room(code)
            return tally_of(room.answers.get(key, {}), key in room.state.revealed)
