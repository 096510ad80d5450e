"""``geomlab bench browser``: the first view, a cursor move and a click as a person sees them, in chromium.

Starts two app servers (``streamlit run serve.py``, as the README does; :func:`geomlab.bench.load.server.app_server`):
one as shipped and a baseline measured in the same run: this checkout with the chart preload turned off
(``GEOMLAB_PRELOAD=0``, see ``app_pages/_preload.py``), or, with ``--baseline-root DIR``, another checkout
(e.g. ``git worktree add DIR <earlier commit>``). Then, in Debian's chromium (playwright, never
``playwright install``):

* **first view**: ``--rounds`` fresh browser sessions (new context: empty cache, as a student following a
  link) per server and page (``--pages``: Home, ``/energy``, ``/trajectories``), alternating which server
  goes first; the time from navigation to the first drawn chart (``.js-plotly-plot .main-svg``);
* **cursor move**: one session per server opens ``/VIEW`` with a bundled checkpoint and a ``--chars``
  character text, then presses → on the token cursor ``--moves`` times; the time from the key press until
  the page caption shows the new position, the script run has finished, every chart is drawn again and
  the browser's main thread is free (two animation frames later);
* **click to update** (``--click-views``, default every view page): one session per server and view opens
  ``/VIEW`` with the ``--chars`` text and clicks ``--clicks`` times on a token of the clickable text (both
  versions have it), and on the whole-text overview strip where the page has one; the time from the click
  until the cursor has moved and every chart is drawn again, as above.

Printed: median and minimum of each, the ratio shipped / baseline, and the load average during the run.
A benchmark, not a test: the exit status is non-zero only when something failed (a server that did not
start, a page that showed an exception).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from geomlab.bench.load.server import app_server, free_port
from geomlab.bench.load.texts import session_texts

CHART = ".js-plotly-plot .main-svg"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
IDLE_JS = ("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r("
           "!document.querySelector('[data-testid=\"stStatusWidget\"]') || !document.querySelector("
           "'[data-testid=\"stStatusWidget\"]').innerText.includes('Running')))))")


def _wait_idle(page, timeout_s: float = 120.0) -> None:
    """Until the script run has finished and the main thread has painted twice."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(IDLE_JS):
        if time.monotonic() > deadline:
            raise RuntimeError("the page did not finish its script run")
        page.wait_for_timeout(50)


def _check(page, what: str) -> None:
    if page.locator('[data-testid="stException"]').count():
        raise RuntimeError(f"{what}: the page shows an exception")


def first_view(browser, url: str) -> float:
    """Seconds from navigation to the first drawn chart, in a fresh context (empty cache)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = ctx.new_page()
        t0 = time.monotonic()
        page.goto(url)
        page.wait_for_selector(CHART, state="attached", timeout=180_000)
        seconds = time.monotonic() - t0
        _check(page, url)
        return seconds
    finally:
        ctx.close()


def cursor_moves(browser, url: str, moves: int) -> list[float]:
    """Seconds per → press on the token cursor until the view is drawn again (see the module docstring)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector(CHART, state="attached", timeout=180_000)
        _wait_idle(page)
        page.wait_for_timeout(1000)
        n_charts = page.locator(".js-plotly-plot").count()
        cursor = page.locator('[data-testid="stSlider"]').filter(has_text="Token cursor").get_by_role("slider")
        out = []
        for _ in range(moves):
            pos = _cursor(page)
            cursor.focus()
            t0 = time.monotonic()
            cursor.press("ArrowRight")
            _until_moved(page, pos, n_charts)
            out.append(time.monotonic() - t0)
            _check(page, url)
            page.wait_for_timeout(500)
        return out
    finally:
        ctx.close()


def _cursor(page) -> int:
    return int(page.get_by_text("cursor at ").first.inner_text().split("cursor at ")[1].split()[0])


def _until_moved(page, pos: int, n_charts: int) -> None:
    """Until the cursor has left ``pos``, the script run has finished and ``n_charts`` charts are drawn."""
    page.wait_for_function(f"() => !document.body.innerText.includes('cursor at {pos} ')", timeout=120_000)
    _wait_idle(page)
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= {n_charts}", timeout=120_000)
    page.evaluate(IDLE_JS)


def clicks(browser, url: str, n: int) -> dict[str, list[float]]:
    """Seconds from a click to the updated page: ``{"token": [...], "overview": [...]}`` (see the module
    docstring); the overview's list is empty where the page has no overview strip."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    out: dict[str, list[float]] = {"token": [], "overview": []}
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector(CHART, state="attached", timeout=180_000)
        _wait_idle(page)
        page.wait_for_timeout(1000)
        n_charts = page.locator(".js-plotly-plot").count()
        overview = page.locator(".js-plotly-plot").filter(has_text="Whole text")
        for i in range(n):
            pos = _cursor(page)
            pills = page.locator('.st-key-w_tok [role="radio"]')
            target = pills.nth(0 if i % 2 else pills.count() - 1)
            t0 = time.monotonic()
            target.click()
            _until_moved(page, pos, n_charts)
            out["token"].append(time.monotonic() - t0)
            _check(page, url)
            page.wait_for_timeout(400)
            if overview.count():
                pos = _cursor(page)
                box = overview.first.locator(".nsewdrag").first.bounding_box()
                t0 = time.monotonic()
                page.mouse.click(box["x"] + box["width"] * (0.2 + 0.6 * ((i * 7) % 10) / 10),
                                 box["y"] + box["height"] / 2)
                _until_moved(page, pos, n_charts)
                out["overview"].append(time.monotonic() - t0)
                _check(page, url)
                page.wait_for_timeout(400)
        return out
    finally:
        ctx.close()


def _summary(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s  min {min(values):5.2f} s  (n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="geomlab bench browser", description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="fresh sessions per server and page (default 5)")
    ap.add_argument("--pages", default=",energy,trajectories",
                    help="comma-separated page paths for the first view ('' is Home; default: Home, /energy (the "
                         "default checkpoint's view, which the warm-up builds first) and /trajectories)")
    ap.add_argument("--view", default="trajectories", help="view page for the cursor moves (default trajectories)")
    ap.add_argument("--ckpt", default="bundled/osmformer-torus-tinyshakespeare",
                    help="checkpoint of the cursor moves (default: the torus OSMFormer, the slowest redraw)")
    ap.add_argument("--chars", type=int, default=2000, help="text length of the cursor moves (default 2000)")
    ap.add_argument("--moves", type=int, default=6, help="cursor moves per server (default 6)")
    ap.add_argument("--click-views", default="trajectories,tangents,attention,energy,planes",
                    help="view pages of the click-to-update measure, comma-separated ('' for none)")
    ap.add_argument("--clicks", type=int, default=4, help="clicks of each kind per server and view (default 4)")
    ap.add_argument("--baseline-root", default=None,
                    help="another checkout of the app to serve as the baseline (default: this one, preload off)")
    args = ap.parse_args(argv)
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        print("needs Debian's chromium (apt-get install chromium)")
        return 2
    from playwright.sync_api import sync_playwright

    pages = [p.strip().strip("/") for p in args.pages.split(",")]
    text = session_texts(1, args.chars)[0]  # Tiny Shakespeare when GEOMLAB_DATA_DIR has it
    move_query = urlencode({"ckpt": args.ckpt, "text": text})
    base = "baseline (no preload)" if args.baseline_root is None else f"baseline ({Path(args.baseline_root).name})"
    servers = {"shipped": {}, base: {"GEOMLAB_PRELOAD": "0"} if args.baseline_root is None else {}}
    roots = {"shipped": None, base: args.baseline_root}
    click_views = [v.strip() for v in args.click_views.split(",") if v.strip()]
    clicked: dict[tuple[str, str], dict[str, list[float]]] = {}
    first: dict[tuple[str, str], list[float]] = {}
    moves: dict[str, list[float]] = {}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        ports = {name: free_port() for name in servers}
        with app_server(ports["shipped"], Path(tmp) / "a.log"), \
                app_server(ports[base], Path(tmp) / "b.log", env=servers[base], root=roots[base]):
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=LAUNCH_ARGS)
            for i in range(args.rounds):
                order = list(servers) if i % 2 == 0 else list(servers)[::-1]
                for path in pages:
                    for name in order:
                        url = f"http://127.0.0.1:{ports[name]}/{path}"
                        first.setdefault((name, path or "home"), []).append(first_view(browser, url))
            for name in servers:
                moves[name] = cursor_moves(browser, f"http://127.0.0.1:{ports[name]}/{args.view}?{move_query}",
                                           args.moves)
            for view in click_views:
                for name in servers:
                    url = f"http://127.0.0.1:{ports[name]}/{view}?{urlencode({'text': text})}"
                    clicked[(name, view)] = clicks(browser, url, args.clicks)
            browser.close()
    print(f"first view in chromium (fresh session, navigation -> first drawn chart); load average "
          f"{load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for path in [p or "home" for p in pages]:
        a, b = first[("shipped", path)], first[(base, path)]
        print(f"  /{path:<14} shipped  {_summary(a)}")
        print(f"  /{path:<14} baseline {_summary(b)}   ratio shipped/baseline (median) "
              f"{statistics.median(a) / statistics.median(b):.2f}")
    print(f"cursor move ({args.view}, {args.ckpt}, {len(text)} characters; key press -> view drawn again)")
    for name, values in moves.items():
        print(f"  {name:<22} {_summary(values)}  " + " ".join(f"{v:.2f}" for v in values))
    if click_views:
        print(f"click to update ({len(text)} characters, the view's default checkpoint; click -> cursor moved, "
              f"every chart drawn again); load average now {os.getloadavg()[0]:.1f}")
    for view in click_views:
        for what in ("token", "overview"):
            for name in servers:
                values = clicked[(name, view)][what]
                print(f"  /{view:<13} {what:<8} {name:<22} " + (_summary(values) if values else "no such chart"))
    return 0
