"""app_pages/_preload.py: the chart bundle is imported with the page (issue 14, first view)."""

from __future__ import annotations

import asyncio

from app_pages._preload import PreloadCharts, chart_bundles, preload_html

PAGE = b"<html><head><title>x</title></head><body></body></html>"
GZIP = [(b"accept-encoding", b"gzip, deflate")]


def _serve(path: str = "/", method: str = "GET", ctype: bytes = b"text/html; charset=utf-8", chunks=(PAGE,)):
    """Run a fake ASGI app (gzips when the request accepts it, like Streamlit's) wrapped in
    :class:`PreloadCharts` (bundle ``P.js``) once; ``(sent messages, request headers the app saw)``."""
    sent, seen = [], {}

    async def inner(scope, receive, send):
        seen.update(dict(scope["headers"]))
        headers = [(b"content-type", ctype), (b"content-length", str(sum(map(len, chunks))).encode())]
        if b"gzip" in seen.get(b"accept-encoding", b""):
            headers.append((b"content-encoding", b"gzip"))  # (the body stays plain: only the header matters)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, c in enumerate(chunks):
            await send({"type": "http.response.body", "body": c, "more_body": i < len(chunks) - 1})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    scope = {"type": "http", "method": method, "path": path, "headers": list(GZIP)}
    asyncio.run(PreloadCharts(inner, bundles=["P.js"])(scope, receive, send))
    return sent, seen


def _body(sent) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_page_gets_the_import_first_in_head_uncompressed_with_a_true_length():
    for path in ("/", "/trajectories", "/attention/"):
        sent, seen = _serve(path, chunks=(PAGE[:20], PAGE[20:]))
        snippet = preload_html(["P.js"])
        assert snippet == b'<script>import("./static/js/P.js");</script>'
        assert _body(sent) == PAGE.replace(b"<head>", b"<head>" + snippet), path
        headers = dict(sent[0]["headers"])
        assert int(headers[b"content-length"]) == len(_body(sent)) and b"content-encoding" not in headers
        assert b"accept-encoding" not in seen  # asked for uncompressed, so the line could go in


def test_everything_else_passes_untouched_and_keeps_its_gzip():
    for kwargs in (dict(path="/static/js/index.js", ctype=b"application/javascript"),
                   dict(path="/_stcore/health", ctype=b"text/plain"), dict(path="/favicon.png"),
                   dict(method="POST")):
        sent, seen = _serve(**kwargs)
        assert _body(sent) == PAGE, kwargs
        assert seen.get(b"accept-encoding") == b"gzip, deflate", kwargs


def test_no_bundle_no_change_and_the_installed_streamlit_has_one():
    assert preload_html([]) == b""
    # the name the middleware looks for exists in the pinned streamlit (a rename would silently turn it off)
    assert any(name.startswith("PlotlyChart.") and name.endswith(".js") for name in chart_bundles())
