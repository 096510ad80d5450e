"""app_pages/_preload.py: the chart bundle is imported with the page (issue 14, first view)."""

from __future__ import annotations

import asyncio

from app_pages._preload import PreloadCharts, chart_bundles, preload_html

PAGE = b"<html><head><title>x</title></head><body></body></html>"


def _serve(app, method: str = "GET", ctype: bytes = b"text/html; charset=utf-8", chunks=(PAGE,),
           encoding: bytes | None = None):
    """Run ASGI ``app`` wrapped in :class:`PreloadCharts` (bundle ``P.js``) once; the sent messages."""
    sent = []

    async def inner(scope, receive, send):
        headers = [(b"content-type", ctype), (b"content-length", str(sum(map(len, chunks))).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, c in enumerate(chunks):
            await send({"type": "http.response.body", "body": c, "more_body": i < len(chunks) - 1})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    asyncio.run(PreloadCharts(app or inner, bundles=["P.js"])({"type": "http", "method": method}, receive, send))
    return sent


def _body(sent) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_the_html_page_gets_the_import_before_head_ends_and_a_true_length():
    sent = _serve(None, chunks=(PAGE[:20], PAGE[20:]))
    body = _body(sent)
    snippet = preload_html(["P.js"])
    assert snippet and b'import("./static/js/P.js")' in snippet
    assert body == PAGE.replace(b"</head>", snippet + b"</head>")
    headers = dict(sent[0]["headers"])
    assert int(headers[b"content-length"]) == len(body)


def test_other_responses_pass_untouched():
    for kwargs in (dict(ctype=b"application/javascript"), dict(method="POST"), dict(encoding=b"gzip")):
        sent = _serve(None, **kwargs)
        assert _body(sent) == PAGE, kwargs


def test_no_bundle_no_change_and_the_installed_streamlit_has_one():
    assert preload_html([]) == b""
    # the name the middleware looks for exists in the pinned streamlit (a rename would silently turn it off)
    assert any(name.startswith("PlotlyChart.") and name.endswith(".js") for name in chart_bundles())
