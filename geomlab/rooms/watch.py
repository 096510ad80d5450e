"""The follow channel: the HTTP routes that tell a student's browser, within a tenth of a second, that its
room changed, and hand it the teacher's charts (docs/rooms.md, "How a change reaches a class").

A student's page holds one long poll, ``GET {prefix}/{code}/wait?since=V&me=ID&mode=follow``, answered when
the room's version is not ``V`` any more (or after :data:`WAIT_S` seconds with the same version): the room's
state as JSON, and ``charts``, the version of the charts the teacher published last. When only the cursor
moved and those charts are that version's, the browser redraws its charts from
``GET {prefix}/{code}/charts`` and no page run of the student's session is needed; any other change makes
the browser rerun its session, which applies the room's state.

One :class:`Watcher` per server process reads the version of each room someone waits on every
:data:`POLL_S` seconds, in a worker thread (for Redis, one ``HMGET``), however many students wait: a class of
100 costs the store 20 reads a second. The room's state and charts are read once per version and shared by
every waiting request. The request also counts the student present as it starts (a heartbeat at most
every :data:`BEAT_S` seconds per student and mode).

No streamlit here: :func:`routes` are Starlette routes, which ``serve.py`` mounts in the app's server.
Source: design choice (a long poll, not a server-sent stream or a websocket: it passes every proxy and load
balancer, and a reconnect is a plain request).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from geomlab.rooms.state import RoomError, RoomsUnavailable, check_client, check_mode, normalise_code
from geomlab.rooms.store import RoomStore

POLL_S = 0.05   # seconds between a watcher's reads of a watched room's version
WAIT_S = 20.0   # seconds a long poll is held open without a change (below common proxy timeouts of 30-60 s)
BEAT_S = 5.0    # seconds between heartbeats of one student (the store counts one present for 30 s)
IDLE_S = 60.0   # seconds a room nobody waits on is still watched (its charts stay cached)
MAX_WATCHED = 1000  # rooms one process watches at most (the stores' own cap on open rooms)
PREFIX = "/_geomlab/rooms"
log = logging.getLogger("geomlab.rooms")


@dataclass
class _Room:
    """What the watcher knows of one room: its latest version, state (JSON) and charts, or the error that
    ended it; ``changed`` is set (and replaced) at every change."""

    version: int = -1
    state: str = ""
    charts_version: int = -1
    charts: str | None = None
    error: str = ""
    status: int = 200
    waiting: int = 0
    used: float = field(default_factory=time.monotonic)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Watcher:
    """Watches the rooms that requests wait on, in one asyncio task of the server's event loop; the store
    is read in worker threads. ``store``: a callable returning the process's :class:`RoomStore`
    (:func:`geomlab.rooms.get_store`)."""

    def __init__(self, store: Callable[[], RoomStore], poll_s: float = POLL_S):
        self.store, self.poll_s = store, poll_s
        self.rooms: dict[str, _Room] = {}
        self.beats: dict[str, float] = {}
        self._task: asyncio.Task | None = None

    async def _read(self, code: str, room: _Room) -> None:
        """Read the room's version; on a change also its state and charts, then wake its waiters."""
        store = self.store()
        try:
            version = await asyncio.to_thread(store.version, code)
            if version == room.version and not room.error:
                return
            state = await asyncio.to_thread(store.state, code)
            charts = await asyncio.to_thread(store.charts, code)
            room.version, room.state, room.error, room.status = state.version, state.to_json(), "", 200
            room.charts_version, room.charts = charts if charts is not None else (-1, None)
        except RoomError as exc:
            if room.status == 404:
                return
            room.error, room.status = str(exc).splitlines()[0], 404
        except RoomsUnavailable as exc:
            if room.status == 503:
                return
            room.error, room.status = str(exc).splitlines()[0], 503
        room.changed.set()
        room.changed = asyncio.Event()

    async def _loop(self) -> None:
        while self.rooms:
            now = time.monotonic()
            for code, room in list(self.rooms.items()):
                if room.waiting == 0 and now - room.used > IDLE_S:
                    del self.rooms[code]
            await asyncio.gather(*(self._read(c, r) for c, r in list(self.rooms.items()) if r.waiting))
            await asyncio.sleep(self.poll_s)
        self._task = None

    def _watch(self, code: str) -> _Room:
        room = self.rooms.get(code)
        if room is None:
            if len(self.rooms) >= MAX_WATCHED:  # rooms nobody waits on go first, the least recently used first
                for idle in sorted((c for c, r in self.rooms.items() if r.waiting == 0),
                                   key=lambda c: self.rooms[c].used)[:len(self.rooms) - MAX_WATCHED + 1]:
                    del self.rooms[idle]
            if len(self.rooms) >= MAX_WATCHED:
                raise RoomError("this server watches too many rooms; try again later")
            room = self.rooms[code] = _Room()
        room.used = time.monotonic()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return room

    async def wait(self, code: str, since: int, timeout: float | None = None) -> _Room:
        """The room once its version is not ``since`` (or it ended, or the store failed), or after
        ``timeout`` seconds (default :data:`WAIT_S`) as it is. Raises :class:`RoomError` for a malformed code."""
        timeout = WAIT_S if timeout is None else timeout
        code = normalise_code(code)
        room = self._watch(code)
        room.waiting += 1
        try:
            if room.version < 0 and not room.error:
                await self._read(code, room)
            if room.status == 404 and room.version < 0:  # no such room: not watched (a made-up code costs nothing)
                return room
            deadline = time.monotonic() + timeout
            while room.version == since and not room.error:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(room.changed.wait(), left)
                except (TimeoutError, asyncio.TimeoutError):
                    break
            return room
        finally:
            room.waiting -= 1
            room.used = time.monotonic()
            if room.status == 404 and room.waiting == 0 and self.rooms.get(code) is room:
                del self.rooms[code]  # ended or never open: forgotten at once

    async def beat(self, code: str, client: str, mode: str) -> str | None:
        """Count student ``client`` present in ``mode`` (at most every :data:`BEAT_S` s); an error line or None."""
        now = time.monotonic()
        key = f"{code}/{client}/{mode}"
        if now - self.beats.get(key, -BEAT_S) < BEAT_S:
            return None
        if len(self.beats) > 10 * MAX_WATCHED:
            self.beats = {k: t for k, t in self.beats.items() if now - t < BEAT_S}
        self.beats[key] = now
        try:
            await asyncio.to_thread(self.store().heartbeat, code, client, mode)
        except (RoomError, RoomsUnavailable) as exc:
            return str(exc).splitlines()[0]
        return None


def _json(payload: dict[str, Any], status: int = 200) -> Any:
    from starlette.responses import Response

    return Response(json.dumps(payload, separators=(",", ":")), status_code=status,
                    media_type="application/json", headers={"Cache-Control": "no-store"})


def routes(store: Callable[[], RoomStore], prefix: str = PREFIX) -> list:
    """The channel's Starlette routes under ``prefix``, sharing one :class:`Watcher`:

    * ``GET {prefix}/{code}/wait?since=V&me=ID&mode=follow|explore``: 200 ``{"version", "state", "charts"}``
      once the version is not ``V`` (``since`` missing or -1: at once), after :data:`WAIT_S` s unchanged;
      404 ``{"error"}`` for an unknown, closed or expired room; 400 for a malformed code, id or mode; 503
      when the store cannot be reached. ``me`` and ``mode`` (optional) count the student present.
    * ``GET {prefix}/{code}/charts``: 200 ``{"version", "charts"}`` (``charts`` the teacher's JSON, as
      published), 404 without any.
    """
    from starlette.routing import Route

    watcher = Watcher(store)

    async def wait(request: Any) -> Any:
        try:
            code = normalise_code(request.path_params["code"])
            raw = request.query_params.get("since", "-1")
            if not (raw.lstrip("-").isdigit() and len(raw) <= 12):
                raise ValueError(f"since must be a room version (a whole number), not {raw[:20]!r}")
            since = int(raw)
            me, mode = request.query_params.get("me"), request.query_params.get("mode", "follow")
            if me is not None:
                check_client(me)
            check_mode(mode)
        except (RoomError, ValueError) as exc:
            return _json({"error": str(exc).splitlines()[0][:200]}, 400)
        # the student is counted as the poll starts, in the mode it is in now: a poll answered later may have
        # been given up by its page (a mode changed, the room left) and must not count it again
        problem = await watcher.beat(code, me, mode) if me is not None else None
        try:
            room = await watcher.wait(code, since)
        except RoomError as exc:
            return _json({"error": str(exc).splitlines()[0]}, 503)
        if room.error:
            return _json({"error": room.error}, room.status)
        return _json({"version": room.version, "state": json.loads(room.state), "charts": room.charts_version,
                      **({"warning": problem} if problem else {})})

    async def charts(request: Any) -> Any:
        try:
            code = normalise_code(request.path_params["code"])
        except RoomError as exc:
            return _json({"error": str(exc).splitlines()[0]}, 400)
        room = watcher.rooms.get(code)
        if room is None or room.charts is None:
            try:
                found = await asyncio.to_thread(store().charts, code)
            except RoomError as exc:
                return _json({"error": str(exc).splitlines()[0]}, 404)
            except RoomsUnavailable as exc:
                return _json({"error": str(exc).splitlines()[0]}, 503)
            if found is None:
                return _json({"error": "the teacher has published no charts yet"}, 404)
            version, text = found
        else:
            version, text = room.charts_version, room.charts
        from starlette.responses import Response

        # the teacher's JSON as stored (a JSON object, checked when stored): spliced in, not parsed and written
        return Response('{"version":%d,"charts":%s}' % (version, text), media_type="application/json",
                        headers={"Cache-Control": "no-store"})

    return [Route(prefix + "/{code}/wait", wait, methods=["GET"]),
            Route(prefix + "/{code}/charts", charts, methods=["GET"])]
