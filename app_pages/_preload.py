"""Start loading the chart library with the page, not with the first chart (first view), and serve it.

A view page's charts wait for plotly.js (``app_pages/_plotlyjs.py``: the cartesian bundle when cached, 1.5 MB,
evaluated in ~0.4 s in chromium on the project's machine; else the full one, 4.8 MB, ~0.84 s). The live chart
loads it when its first chart is mounted, about 2 s after navigation. :class:`PreloadCharts` is ASGI middleware
(``serve.py`` installs it) that puts one classic script at the top of the app's HTML page: it adds a
``<script async>`` for the bundle a view's charts load and records its promise in
``window.__geomlabPlotly`` under the same URL, so the bundle is fetched from the first millisecond and the
live chart reuses it. The page (7.9 KB) is sent uncompressed so the line can go in; everything else keeps its
gzip. The middleware also answers the two bundle addresses itself (gzipped when the browser accepts it), so
the preload works before any chart has registered Streamlit's component route. Measured with ``geomlab bench
browser`` (docs/app.md, "Starting fast"). Design choice.

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


def base_hint(page: str) -> str:
    """JavaScript that sets ``window.__streamlit.BACKEND_BASE_URL`` to the browser's location without
    ``page`` (the page part of the path the server saw, e.g. ``/energy``), when the location ends with it;
    ``""`` for the root page (nothing to correct). ``page`` goes in as a JSON string with ``<``, ``>`` and
    ``&`` escaped, so no path can close the script."""
    if page.strip("/") == "":
        return ""
    return ("(function(){var p=location.pathname,s=" + _js_string(page) + ";if(p.length>=s.length&&p.slice(p.length-s.length)"
            "===s){window.__streamlit=Object.assign({},window.__streamlit||{},{BACKEND_BASE_URL:location.origin+"
            "p.slice(0,p.length-s.length)+'/'});}})();")


def _js_string(value: str) -> str:
    """``value`` as a JavaScript string literal that cannot close the ``<script>`` it stands in."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def preload_html(bundle_url: str | None, page: str = "/") -> bytes:
    """The ``<script>`` added right after ``<head>``: :func:`base_hint` for ``page``, then the start of the
    load of plotly.js from ``bundle_url`` (an async script whose promise goes in ``window.__geomlabPlotly``,
    where the live chart looks first). ``b""`` when there is nothing to add."""
    code = base_hint(page)
    if bundle_url:
        src = _js_string(bundle_url)
        code += ("(function(){var src=" + src + ",all=window.__geomlabPlotly=window.__geomlabPlotly||{};"
                 "if(all[src])return;var s=document.createElement('script');s.src=src;s.async=true;"
                 "all[src]=new Promise(function(ok,no){s.onload=function(){ok(window.Plotly)};"
                 "s.onerror=function(){delete all[src];no(new Error('plotly.js did not load from '+src))}});"
                 "all[src].catch(function(){});document.head.appendChild(s);})();")
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


def _bundles(base: str) -> dict[str, Path]:
    """``{URL path: file}`` of the plotly.js bundles the live charts load (:mod:`app_pages._live_chart`)."""
    from app_pages._live_chart import bundle_files, bundle_url

    return {bundle_url(name, path, base): path for name, path in bundle_files().items()}


class PreloadCharts:
    """ASGI middleware: adds :func:`preload_html` (the base hint for the requested page, the start of the
    bundle's load: the cartesian one when cached, else the full one) to the ``text/html`` response of a GET
    for a page (``/`` and every page path, for which Streamlit serves its single page; asked for without
    compression), and answers a GET for a plotly.js bundle's address itself; everything else passes
    untouched. ``bundles``: ``{URL path: file}`` (default: :func:`_bundles`, looked up on each request, so a
    bundle fetched after start is preloaded from then on); ``base`` defaults to Streamlit's
    ``server.baseUrlPath``. With ``history`` the page also gets the browser-history script
    (:func:`app_pages._state.history_script`) after the preload, so it wraps ``history.pushState`` before
    Streamlit's own script starts (mounted by a page's run alone, it would come after the sidebar can be
    clicked)."""

    def __init__(self, app, bundles: dict[str, Path] | None = None, base: str | None = None,
                 history: bool = False):
        self.app = app
        self.base = _base_path() if base is None else base
        self.fixed = bundles
        self._bodies: dict[tuple[str, bool], bytes] = {}
        self.history = b""
        if history:
            from app_pages._state import history_script

            self.history = f"<script>{history_script(self.base)}</script>".encode()

    def bundles(self) -> dict[str, Path]:
        return dict(self.fixed) if self.fixed is not None else _bundles(self.base)

    def preloaded(self) -> str | None:
        """The URL the page preloads: the cartesian bundle when there is one, else the full one."""
        urls = list(self.bundles())
        return next((u for u in urls if "cartesian" in u.rsplit("/", 1)[-1]), urls[0] if urls else None)

    async def _send_file(self, scope, send, path: Path) -> None:
        accepts = dict(scope.get("headers") or []).get(b"accept-encoding", b"")
        gz = b"gzip" in accepts
        key = (str(path), gz)
        if key not in self._bodies:
            import gzip

            raw = path.read_bytes()
            self._bodies[key] = gzip.compress(raw, 6, mtime=0) if gz else raw
        body = self._bodies[key]
        headers = [(b"content-type", b"application/javascript; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()), (b"cache-control", b"public, max-age=3600")]
        if gz:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            return await self.app(scope, receive, send)
        files = self.bundles()
        if scope.get("path") in files:
            return await self._send_file(scope, send, files[scope["path"]])
        if not _is_page(scope):
            return await self.app(scope, receive, send)
        snippet = preload_html(self.preloaded(), page_part(scope.get("path") or "/", self.base)) + self.history
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
