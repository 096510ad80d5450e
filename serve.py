"""Start the app warm: ``streamlit run serve.py`` (same options as ``streamlit run app.py``).

``app.py`` is the app itself (every session runs it); Streamlit runs it only when a visitor arrives, so a
warm-up started there would start with the first visitor. This file wraps ``app.py`` in an ``st.App`` whose
start-up hook (ASGI lifespan) starts the warm-up thread (``app_pages/_warm.py``) as soon as the server starts:
heavy imports, then the default checkpoint's first view traced and built into the shared cache. The server
accepts requests (and answers its health check) once that first view is in the cache (at most
``GEOMLAB_WARM_WAIT_S`` seconds, default 60), so the first visitor's view is a cache hit; the other views
are pre-built behind it. It also mounts the classroom's follow channel (:func:`_routes`).
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402


#: Seconds the server waits at start for the warm-up's first view before it accepts requests (design
#: choice: 60; ``GEOMLAB_WARM_WAIT_S=0`` accepts requests at once and lets the warm-up finish behind them).
WARM_WAIT_S = 60.0


@asynccontextmanager
async def _lifespan(_app):
    import asyncio
    import logging
    import os
    import time

    from app_pages._warm import log_to_server, wait_first_view, warm_up

    log_to_server()
    t0 = time.perf_counter()
    warm_up()
    wait = float(os.environ.get("GEOMLAB_WARM_WAIT_S", WARM_WAIT_S))
    if wait > 0:
        done = await asyncio.to_thread(wait_first_view, wait)
        logging.getLogger("geomlab.app").info(
            "warm-up: %s after %.1f s; accepting requests", "first view ready" if done else "still running",
            time.perf_counter() - t0)
    yield


def _middleware() -> list:
    """The chart library starts loading with the page, and the browser-history script is in it from the start
    (``app_pages/_preload.py``); ``GEOMLAB_PRELOAD=0`` turns both off (to measure what the preload gives:
    ``geomlab bench browser``; the history script then comes with the first run)."""
    import os

    from starlette.middleware import Middleware

    from app_pages._preload import PreloadCharts

    return [] if os.environ.get("GEOMLAB_PRELOAD") == "0" else [Middleware(PreloadCharts, history=True)]


def _routes() -> list:
    """The classroom's follow channel (:mod:`geomlab.rooms.watch`): a student's page learns of a change of
    its room from a long poll here, and draws the teacher's charts from it, with no page run per change.
    Under ``server.baseUrlPath`` like Streamlit's own routes. ``streamlit run app.py`` has no channel: a
    student's page then polls its room from a timed fragment (``app_pages/_room.py``)."""
    from geomlab import rooms
    from geomlab.rooms.watch import PREFIX, routes

    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return routes(rooms.get_store, ("/" + base if base else "") + PREFIX)


app = st.App(str(_ROOT / "app.py"), lifespan=_lifespan, middleware=_middleware(), routes=_routes())
