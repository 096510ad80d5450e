"""Start loading the chart library with the page, not with the first chart (issue 14, first view).

Streamlit's frontend imports its plotly bundle (``static/js/PlotlyChart.*.js``, 4.7 MB, evaluated in one
long task of 0.4-1.5 s on the project's machine) only when the first chart element arrives over the
websocket, about 1 s after navigation; every geomlab page shows a chart. :class:`PreloadCharts` is ASGI
middleware (``serve.py`` installs it) that adds one line to the app's HTML page: a module script that imports
the bundle as soon as the browser is idle after the app's own start-up, so fetching and evaluating it overlap
the websocket set-up and the script run instead of following them (design choice; no effect when the
bundle's file name is not found, e.g. a future Streamlit that names it otherwise).
"""

from __future__ import annotations

from pathlib import Path


def chart_bundles() -> list[str]:
    """File names of Streamlit's plotly chart bundle (``PlotlyChart.<hash>.js`` in its static folder), or ``[]``."""
    import streamlit

    folder = Path(streamlit.__file__).parent / "static" / "static" / "js"
    return sorted(p.name for p in folder.glob("PlotlyChart.*.js"))


def preload_html(bundles: list[str]) -> bytes:
    """The ``<script>`` added before ``</head>``: import each bundle when the browser is first idle
    (``requestIdleCallback``, else at once). Relative URLs, like Streamlit's own, so a base path works."""
    if not bundles:
        return b""
    imports = "; ".join(f'import("./static/js/{name}")' for name in bundles)
    return ('<script type="module">(window.requestIdleCallback || setTimeout)(() => { '
            f'{imports}; }});</script>').encode()


class PreloadCharts:
    """ASGI middleware adding :func:`preload_html` to every uncompressed ``text/html`` response of a GET
    (Streamlit serves its single page for ``/`` and every page path); everything else passes untouched.
    ``bundles`` defaults to :func:`chart_bundles`."""

    def __init__(self, app, bundles: list[str] | None = None):
        self.app = app
        self.snippet = preload_html(chart_bundles() if bundles is None else bundles)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET" or not self.snippet:
            return await self.app(scope, receive, send)
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
                body = held["body"].replace(b"</head>", self.snippet + b"</head>", 1)
                start = held.pop("start")
                start["headers"] = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                start["headers"].append((b"content-length", str(len(body)).encode()))
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, send_patched)
