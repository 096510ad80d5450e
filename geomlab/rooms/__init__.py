"""The classroom's rooms: a teacher drives a room, students follow its state, answer its questions and
may explore on their own (docs/rooms.md). No streamlit here; the app's pages call :func:`get_store`.

The store is chosen by ``GEOMLAB_ROOMS_URL``: unset or empty, rooms live in this process
(:class:`MemoryStore`); ``redis://host:port/db``, in Redis, shared by several replicas (:class:`RedisStore`).
"""

from __future__ import annotations

import os
import threading

from geomlab.rooms.state import (CODE_BITS, MAX_CLIENTS, Presence, RoomError, RoomState, RoomsUnavailable, Tally,
                                 check_client, normalise_code, question_key)
from geomlab.rooms.store import MemoryStore, RoomStore

__all__ = ["CODE_BITS", "MAX_CLIENTS", "MemoryStore", "Presence", "RoomError", "RoomState", "RoomStore",
           "RoomsUnavailable", "Tally", "check_client", "get_store", "normalise_code", "open_store",
           "question_key"]

_STORES: dict[str, RoomStore] = {}
_LOCK = threading.Lock()


def open_store(url: str | None = None, **options) -> RoomStore:
    """A new store: Redis at ``url`` (default: ``GEOMLAB_ROOMS_URL``), or in this process when it is empty.
    ``options``: ``ttl_s``, ``presence_s``, ``clock`` (the stores' constructors). Raises :class:`RoomError`
    for a bad URL or TTL setting, :class:`RoomsUnavailable` without the redis package."""
    url = (os.environ.get("GEOMLAB_ROOMS_URL", "") if url is None else url).strip()
    if not url:
        return MemoryStore(**options)
    from geomlab.rooms.redis_store import RedisStore

    return RedisStore(url, **options)


def get_store() -> RoomStore:
    """The process's store for the current ``GEOMLAB_ROOMS_URL``, made once (every session of the server
    shares it). Errors as :func:`open_store`."""
    url = os.environ.get("GEOMLAB_ROOMS_URL", "").strip()
    with _LOCK:
        if url not in _STORES:
            _STORES[url] = open_store(url)
        return _STORES[url]
