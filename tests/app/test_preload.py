"""app_pages/_preload.py: plotly.js starts loading with the page (first view), and the middleware serves it."""

from __future__ import annotations

import asyncio
import json
import re

import gzip

from app_pages._preload import PreloadCharts, base_hint, page_part, preload_html

PAGE = b"<html><head><title>x</title></head><body></body></html>"
GZIP = [(b"accept-encoding", b"gzip, deflate")]


BUNDLE = "/component/c/plotly-cartesian-9.9.9.min.js"


def _serve(path: str = "/", method: str = "GET", ctype: bytes = b"text/html; charset=utf-8", chunks=(PAGE,),
           bundles=None, headers=GZIP, history=False):
    """Run a fake ASGI app (gzips when the request accepts it, like Streamlit's) wrapped in
    :class:`PreloadCharts` (``bundles``: ``{URL: file}``, default none; ``history``: with the history script)
    once; ``(sent messages, request headers the app saw)``."""
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

    scope = {"type": "http", "method": method, "path": path, "headers": list(headers)}
    asyncio.run(PreloadCharts(inner, bundles=bundles or {}, history=history)(scope, receive, send))
    return sent, seen


def _body(sent) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_page_starts_loading_the_bundle_first_in_head_uncompressed_with_a_true_length(tmp_path):
    js = tmp_path / "plotly-cartesian-9.9.9.min.js"
    js.write_text("window.Plotly = {};")
    snippet = preload_html(BUNDLE)
    assert snippet.startswith(b"<script>(function(){var src=\"" + BUNDLE.encode() + b"\"")
    assert b"window.__geomlabPlotly" in snippet and b"s.async=true" in snippet
    for path in ("/", "/trajectories", "/attention/"):
        sent, seen = _serve(path, chunks=(PAGE[:20], PAGE[20:]), bundles={BUNDLE: js})
        snippet = preload_html(BUNDLE, path)
        assert snippet.endswith(b"document.head.appendChild(s);})();</script>")
        assert _body(sent) == PAGE.replace(b"<head>", b"<head>" + snippet), path
        headers = dict(sent[0]["headers"])
        assert int(headers[b"content-length"]) == len(_body(sent)) and b"content-encoding" not in headers
        assert b"accept-encoding" not in seen  # asked for uncompressed, so the line could go in


def test_the_cartesian_bundle_is_preferred_and_served_gzipped_when_accepted(tmp_path):
    full, cart = tmp_path / "plotly.min.js", tmp_path / "plotly-cartesian-9.9.9.min.js"
    full.write_text("window.Plotly = {full: true};")
    cart.write_text("window.Plotly = {cartesian: true};")
    files = {"/component/f/plotly.min.js": full, BUNDLE: cart}
    sent, _ = _serve("/", bundles=files)
    assert BUNDLE.encode() in _body(sent) and b"plotly.min.js" not in _body(sent)
    sent, _ = _serve("/", bundles={"/component/f/plotly.min.js": full})  # no cartesian bundle: the full one
    assert b"/component/f/plotly.min.js" in _body(sent)
    sent, seen = _serve(BUNDLE, bundles=files)
    headers = dict(sent[0]["headers"])
    assert not seen and headers[b"content-encoding"] == b"gzip"  # answered without the app
    assert gzip.decompress(_body(sent)) == cart.read_bytes()
    sent, _ = _serve("/component/f/plotly.min.js", bundles=files, headers=[])
    assert _body(sent) == full.read_bytes() and b"content-encoding" not in dict(sent[0]["headers"])


def test_everything_else_passes_untouched_and_keeps_its_gzip():
    for kwargs in (dict(path="/static/js/index.js", ctype=b"application/javascript"),
                   dict(path="/_stcore/health", ctype=b"text/plain"), dict(path="/favicon.png"),
                   dict(method="POST")):
        sent, seen = _serve(**kwargs)
        assert _body(sent) == PAGE, kwargs
        assert seen.get(b"accept-encoding") == b"gzip, deflate", kwargs


def test_no_bundle_and_the_root_page_no_change():
    assert preload_html(None) == b""
    assert preload_html(None, "/energy").startswith(b"<script>(function(){var p=location.pathname")


def test_a_deep_link_tells_the_frontend_where_the_server_is():
    """On a page path the script first sets Streamlit's BACKEND_BASE_URL to the location without the page
    part, so the frontend does not look for its server under /PAGE/_stcore first (a 404 and a retry delay);
    the root page gets no hint, and the page part is computed under a base path (server.baseUrlPath)."""
    assert base_hint("/") == "" and base_hint("") == ""
    hint = base_hint("/energy")
    assert hint.startswith("(function(){var p=location.pathname,s=\"/energy\";") and "BACKEND_BASE_URL" in hint
    sent, _ = _serve("/energy")
    assert _body(sent).startswith(b"<html><head><script>" + hint.encode())
    assert page_part("/lab/energy", "/lab") == "/energy" and page_part("/lab", "/lab") == "/"
    assert page_part("/labx/energy", "/lab") == "/labx/energy" and page_part("/energy", "") == "/energy"
    # a path cannot close the script: <, > and & are escaped inside the JSON string
    evil = base_hint("/</script><script>alert(1)</script>")
    assert "</" not in evil and "<script" not in evil and "<!--" not in evil and "\\u003c/script\\u003e" in evil


def test_the_hint_runs_in_a_javascript_engine():
    """The hint's JavaScript, run by node when the machine has it (else by a small Python model of the same
    string operations): /lab/energy with page /energy gives base /lab/, a location that does not end with
    the page gives no base."""
    import shutil
    import subprocess

    node = shutil.which("node") or shutil.which("nodejs")
    cases = [("/lab/energy", "/energy", "http://h/lab/"), ("/energy", "/energy", "http://h/"),
             ("/energy/", "/energy/", "http://h/"), ("/other", "/energy", None)]
    for pathname, page, want in cases:
        if node is None:
            got = ("http://h" + pathname[:len(pathname) - len(page)] + "/") if pathname.endswith(page) else None
        else:
            js = ("var location={pathname:%s,origin:'http://h'};var window={};%s"
                  "console.log(JSON.stringify((window.__streamlit||{}).BACKEND_BASE_URL||null));"
                  % (json.dumps(pathname), base_hint(page)))
            out = subprocess.run([node, "-e", js], capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            got = json.loads(out.stdout)
        assert got == want, (pathname, page, got)


def test_the_page_wraps_the_browser_history_before_streamlit_starts():
    """With ``history`` the page's head carries the history script (its rule, then the wrapper), so it is in
    the page before Streamlit's own script; the rule names the view pages under the base path."""
    from app_pages._state import history_script

    head = _body(_serve("/energy", history=True)[0]).split(b"<title>")[0]
    assert b"window.__geomlabHistory = " in head and b"window.history.pushState = function" in head
    assert b"__geomlabHistory" not in _body(_serve("/energy")[0])
    # st.html's sanitizer (DOMPurify) drops a script whose text holds anything like a tag: it never runs
    assert not re.search(r"<[/\w]", history_script("lab"))
    rule = json.loads(history_script("lab").split(" = ", 1)[1].split(";\n", 1)[0])
    assert "/lab/energy" in rule["paths"] and "/lab/compare" in rule["paths"] and "ckpt" in rule["shared"]
