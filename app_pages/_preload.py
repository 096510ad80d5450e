"""Start loading the chart library with the page, not with the first chart (issue 14, first view).

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
"""

from __future__ import annotations

from pathlib import Path


def chart_bundles() -> list[str]:
    """File names of Streamlit's plotly chart bundle (``PlotlyChart.<hash>.js`` in its static folder), or ``[]``."""
    import streamlit

    folder = Path(streamlit.__file__).parent / "static" / "static" / "js"
    return sorted(p.name for p in folder.glob("PlotlyChart.*.js"))


def preload_html(bundles: list[str]) -> bytes:
    """The ``<script>`` added right after ``<head>``: a classic script that imports each bundle at once
    (a module script would wait for the app's own module graph). Relative URLs, like Streamlit's own, so a
    base path works."""
    if not bundles:
        return b""
    imports = "; ".join(f'import("./static/js/{name}")' for name in bundles)
    return f'<script>{imports};</script>'.encode()


def _is_page(scope) -> bool:
    """A request for the app's HTML page: ``/`` or a page path (no file extension, not Streamlit's API)."""
    path = scope.get("path") or "/"
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return not path.startswith(("/_stcore", "/static", "/media", "/component", "/app/static")) and "." not in last


class PreloadCharts:
    """ASGI middleware adding :func:`preload_html` to the ``text/html`` response of a GET for a page
    (``/`` and every page path, for which Streamlit serves its single page; asked for without compression);
    everything else passes untouched.
    ``bundles`` defaults to :func:`chart_bundles`."""

    def __init__(self, app, bundles: list[str] | None = None):
        self.app = app
        self.snippet = preload_html(chart_bundles() if bundles is None else bundles)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or not self.snippet or not _is_page(scope):
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
                body = held["body"].replace(b"<head>", b"<head>" + self.snippet, 1)
                start = held.pop("start")
                start["headers"] = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                start["headers"].append((b"content-length", str(len(body)).encode()))
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, send_patched)
