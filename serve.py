"""Start the app warm: ``streamlit run serve.py`` (same options as ``streamlit run app.py``).

``app.py`` is the app itself (every session runs it); Streamlit runs it only when a visitor arrives, so a
warm-up started there would start with the first visitor. This file wraps ``app.py`` in an ``st.App`` whose
start-up hook (ASGI lifespan) starts the warm-up thread (``app_pages/_warm.py``) as soon as the server starts:
heavy imports, then the default checkpoint's first view traced and built into the shared cache, so the first
visitor's view is a cache hit.
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402


@asynccontextmanager
async def _lifespan(_app):
    from app_pages._warm import log_to_server, warm_up

    log_to_server()
    warm_up()
    yield


app = st.App(str(_ROOT / "app.py"), lifespan=_lifespan)
