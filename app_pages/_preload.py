"""Start loading the chart library with the page, not with the first chart (first view).

Streamlit's frontend imports its plotly bundle (``static/js/PlotlyChart.*.js``, 4.7 MB, evaluated in one
long task of 0.7-1.1 s on the project's machine) only when the first chart element arrives over the
websocket and is rendered, about 2 s after navigation on a view page; every geomlab view shows a chart.
:class:`PreloadCharts` is ASGI middleware (``serve.py`` installs it) that puts one classic script at the top
of the app's HTML page: ``import("./static/js/PlotlyChart.<hash>.js")``, so the bundle is fetched from the
first millisecond and evaluated while the app's own bundles load and its websocket opens; Streamlit's later
import of the same URL gets the same, already evaluated module. The page (7.9 KB) is sent uncompressed so
the line can go in; everything else keeps its gzip. Measured with ``geomlab bench browser``
(docs/app.md, "Starting fast"). Design choice; no effect when the bundle's file name is not found (a future
Streamlit that names it otherwise).

The same script tells a deep link where the server is. Opened at ``/energy``, Streamlit's frontend first
looks for its server at ``/energy/_stcore/health`` (404), waits its retry delay, then finds it at ``/``:
0.8-0.9 s lost before the websocket opens on every link to a view page (measured in chromium: the socket
opened at 1.6 s on ``/energy`` against 0.8 s on ``/``). The server knows which part of the path is the page,
so :func:`base_hint` sets ``window.__streamlit.BACKEND_BASE_URL`` (Streamlit's embedding setting, read once
when its bundle starts) to the location without that part, and the frontend asks the right address first.
Behind a proxy that adds a prefix the hint keeps the prefix (it cuts the page off the browser's own path).
"""

from __future__ import annotations

import json
from pathlib import Path


def chart_bundles() -> list[str]:
    """File names of Streamlit's plotly chart bundle (``PlotlyChart.<hash>.js`` in its static folder), or ``[]``."""
    import streamlit

    folder = Path(streamlit.__file__).parent / "static" / "static" / "js"
    return sorted(p.name for p in folder.glob("PlotlyChart.*.js"))


def base_hint(page: str) -> str:
    """JavaScript that sets ``window.__streamlit.BACKEND_BASE_URL`` to the browser's location without
    ``page`` (the page part of the path the server saw, e.g. ``/energy``), when the location ends with it;
    ``""`` for the root page (nothing to correct). ``page`` goes in as a JSON string with ``<``, ``>`` and
    ``&`` escaped, so no path can close the script."""
    if page.strip("/") == "":
        return ""
    lit = json.dumps(page).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return ("(function(){var p=location.pathname,s=" + lit + ";if(p.length>=s.length&&p.slice(p.length-s.length)"
            "===s){window.__streamlit=Object.assign({},window.__streamlit||{},{BACKEND_BASE_URL:location.origin+"
            "p.slice(0,p.length-s.length)+'/'});}})();")


def preload_html(bundles: list[str], page: str = "/") -> bytes:
    """The ``<script>`` added right after ``<head>``: :func:`base_hint` for ``page``, then a classic script
    that imports each bundle at once (a module script would wait for the app's own module graph). Relative
    URLs, like Streamlit's own, so a base path works. ``b""`` when there is nothing to add."""
    parts = [base_hint(page)] + [f'import("./static/js/{name}");' for name in bundles]
    code = "".join(parts)
    return f"<script>{code}</script>".encode() if code else b""


def _base_path() -> str:
    """Streamlit's ``server.baseUrlPath`` as ``/PATH`` (``""`` when the app is served at the root)."""
    try:
        from streamlit import config

        base = str(config.get_option("server.baseUrlPath") or "").strip("/")
    except Exception:  # noqa: BLE001 - outside a configured Streamlit: the root
        base = ""
    return f"/{base}" if base else ""


def page_part(path: str, base: str = "") -> str:
    """The page part of a request path: ``path`` without the server's base path ``base`` (``/energy`` for
    ``/lab/energy`` under ``/lab``)."""
    if base and (path == base or path.startswith(base + "/")):
        path = path[len(base):]
    return path or "/"


def _is_page(scope) -> bool:
    """A request for the app's HTML page: ``/`` or a page path (no file extension, not Streamlit's API)."""
    path = scope.get("path") or "/"
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return not path.startswith(("/_stcore", "/static", "/media", "/component", "/app/static")) and "." not in last


class PreloadCharts:
    """ASGI middleware adding :func:`preload_html` (the base hint for the requested page, the bundle imports)
    to the ``text/html`` response of a GET for a page (``/`` and every page path, for which Streamlit serves
    its single page; asked for without compression); everything else passes untouched.
    ``bundles`` defaults to :func:`chart_bundles`, ``base`` to Streamlit's ``server.baseUrlPath``."""

    def __init__(self, app, bundles: list[str] | None = None, base: str | None = None):
        self.app = app
        self.bundles = chart_bundles() if bundles is None else list(bundles)
        self.base = _base_path() if base is None else base

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or not _is_page(scope):
            return await self.app(scope, receive, send)
        snippet = preload_html(self.bundles, page_part(scope.get("path") or "/", self.base))
        if not snippet:
            return await self.app(scope, receive, send)
        # the page itself uncompressed (7.9 KB), so the snippet can go in; everything else keeps its gzip
        scope = {**scope, "headers": [(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"accept-encoding"]}
        held: dict = {}

        async def send_patched(message):
            if message["type"] == "http.response.start":
                headers = {k.lower(): v for k, v in message.get("headers") or []}
                if headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers:
                    held.update(start=message, body=b"")
                    return
            elif message["type"] == "http.response.body" and "start" in held:
                held["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return
                body = held["body"].replace(b"<head>", b"<head>" + snippet, 1)
                start = held.pop("start")
                start["headers"] = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                start["headers"].append((b"content-length", str(len(body)).encode()))
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, send_patched)
