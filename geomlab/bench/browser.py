"""``geomlab bench browser``: the first view, a cursor move and a click as a person sees them, in chromium.

Starts two app servers (``streamlit run serve.py``, as the README does; :func:`geomlab.bench.load.server.app_server`):
one as shipped and a baseline measured in the same run: this checkout with the chart preload turned off
(``GEOMLAB_PRELOAD=0``, see ``app_pages/_preload.py``), or, with ``--baseline-root DIR``, another checkout
(e.g. ``git worktree add DIR <earlier commit>``). Then, in Debian's chromium (playwright, never
``playwright install``):

* **first view**: ``--rounds`` fresh browser sessions (new context: empty cache, as a student following a
  link) per server and page (``--pages``: Home, ``/energy``, ``/trajectories``), alternating which server
  goes first; the time, in the page's own clock, from the navigation's start to the first chart painted
  (``.js-plotly-plot .main-svg``; a driver's ``wait_for_selector`` would return up to 0.5 s late);
* **cursor move**: one session per server opens ``/VIEW`` with a bundled checkpoint and a ``--chars``
  character text, then presses → on the token cursor ``--moves`` times; the time from the key press until
  the page caption shows the new position, the script run has finished, every chart is drawn again and
  the browser's main thread is free (two animation frames later);
* **click to update** (``--click-views``, default every view page): one session per server and view opens
  ``/VIEW`` with the ``--chars`` text and clicks ``--clicks`` times on a token of the clickable text three
  tokens from the cursor, on a cell of the first chart three rows from the cursor where that chart is a
  position x position map, and on the whole-text overview strip where the page has one; the time, in the
  page's own clock, from the click (``pointerdown``) to the script run's last message or the last chart drawn
  again, whichever is later (:data:`TIMING_JS`: no test-driver latency in it).

Printed: median and minimum of each, the ratio shipped / baseline, and the load average during the run.
A benchmark, not a test: the exit status is non-zero only when something failed (a server that did not
start, a page that showed an exception).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

from geomlab.bench import run_benchmark
from geomlab.bench.load.chromium import CHART, FIRST_CHART_JS, FIRST_CHART_READ
from geomlab.bench.load.server import app_server, free_port
from geomlab.bench.load.texts import session_texts
from geomlab.core.argv import Parser, number

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
IDLE_JS = ("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r("
           "!document.querySelector('[data-testid=\"stStatusWidget\"]') || !document.querySelector("
           "'[data-testid=\"stStatusWidget\"]').textContent.includes('Running')))))")
POLL_MS = 100
"""How often the driver looks at the page while it waits (ms). Not every animation frame, and never
``innerText`` (which lays the page out): a waiting driver must not add work to the page it times."""


TIMING_JS = """
(() => {
  const t = (window.__geomlabBench = { down: 0, ends: [] });
  document.addEventListener("pointerdown", () => { t.down = performance.now(); t.ends = []; }, true);
  document.addEventListener("keydown", () => { t.down = performance.now(); t.ends = []; }, true);
  const W = window.WebSocket;
  window.WebSocket = function (...a) {
    const ws = new W(...a);
    ws.addEventListener("message", () => t.ends.push(performance.now()));
    return ws;
  };
  window.WebSocket.prototype = W.prototype;
  Object.assign(window.WebSocket, W);
  let P;
  Object.defineProperty(window, "Plotly", { configurable: true, get() { return P; }, set(v) {
    P = v;
    for (const f of ["react", "newPlot", "relayout"]) {
      const o = v[f].bind(v);
      v[f] = async (...a) => { const r = await o(...a); t.ends.push(performance.now()); return r; };
    }
  } });
})();
"""
"""Put in every page before its scripts run: the time of the last pointer or key press, and of every websocket
message and finished chart draw after it, in the page's own clock (``performance.now()``)."""


def _in_page_seconds(page) -> float:
    """Seconds, in the page's clock, from the last click or key press to the last thing it caused: the last
    websocket message of the script run or the last chart drawn (``Plotly.react``/``newPlot`` resolved),
    whichever is later. Read once the page is idle (:func:`_until_moved`)."""
    return page.evaluate("() => { const t = window.__geomlabBench; return (Math.max(t.down, ...t.ends) - t.down) / 1000; }")


def _wait_idle(page, timeout_s: float = 120.0) -> None:
    """Until the script run has finished and the main thread has painted twice."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(IDLE_JS):
        if time.monotonic() > deadline:
            raise RuntimeError("the page did not finish its script run")
        page.wait_for_timeout(POLL_MS)


def _check(page, what: str) -> None:
    if page.locator('[data-testid="stException"]').count():
        raise RuntimeError(f"{what}: the page shows an exception")


def first_view(browser, url: str) -> float:
    """Seconds from the navigation's start to the first chart painted, in the page's own clock
    (:data:`~geomlab.bench.load.chromium.FIRST_CHART_JS`), in a fresh context (empty cache)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        ctx.add_init_script(FIRST_CHART_JS)
        page = ctx.new_page()
        page.goto(url)
        seconds = page.wait_for_function(FIRST_CHART_READ, polling=POLL_MS, timeout=180_000).json_value() / 1000
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
    page.wait_for_function(f"() => !document.body.textContent.includes('cursor at {pos} ')", polling=POLL_MS,
                           timeout=120_000)
    _wait_idle(page)
    page.wait_for_function(f"() => document.querySelectorAll('{CHART}').length >= {n_charts}", polling=POLL_MS,
                           timeout=120_000)
    page.evaluate(IDLE_JS)


def clicks(browser, url: str, n: int) -> dict[str, list[float]]:
    """Seconds from a click to the updated page, in the page's clock (:func:`_in_page_seconds`):
    ``{"token": [...], "cell": [...], "overview": [...]}``: a token of the clickable text three tokens before or
    after the cursor; a cell of the first chart, where it is a position x position map (the cursor's row three
    rows up or down, on the diagonal); a point of the whole-text strip (a jump across the text). A list is
    empty where the page has no such chart."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.add_init_script(TIMING_JS)
    out: dict[str, list[float]] = {"token": [], "cell": [], "overview": []}
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector(CHART, state="attached", timeout=180_000)
        _wait_idle(page)
        page.wait_for_timeout(1000)
        n_charts = page.locator(".js-plotly-plot").count()
        overview = page.locator(".js-plotly-plot").filter(has_text="Whole text")
        first = page.locator(".js-plotly-plot").first
        for i in range(n):
            step = 3 if i % 2 == 0 else -3
            pos = _cursor(page)
            pills = page.locator('.st-key-w_tok [role="radio"]')
            chosen = pills.evaluate_all("els => els.findIndex(e => e.getAttribute('aria-checked') === 'true')")
            target = pills.nth(min(max(chosen + step, 0), pills.count() - 1))
            target.click()
            _until_moved(page, pos, n_charts)
            out["token"].append(_in_page_seconds(page))
            _check(page, url)
            page.wait_for_timeout(400)
            cell = _cell_point(page, first, _cursor(page), step)
            if cell is not None:
                pos = _cursor(page)
                page.mouse.click(*cell)
                _until_moved(page, pos, n_charts)
                out["cell"].append(_in_page_seconds(page))
                _check(page, url)
                page.wait_for_timeout(400)
            if overview.count():
                pos = _cursor(page)
                strip = overview.first.locator(".nsewdrag").first
                strip.scroll_into_view_if_needed()  # a token click may have scrolled it out of the window
                box = strip.bounding_box()
                page.mouse.click(box["x"] + box["width"] * (0.2 + 0.6 * ((i * 7) % 10) / 10),
                                 box["y"] + box["height"] / 2)
                _until_moved(page, pos, n_charts)
                out["overview"].append(_in_page_seconds(page))
                _check(page, url)
                page.wait_for_timeout(400)
        return out
    finally:
        ctx.close()


def _cell_point(page, chart, cursor: int, step: int) -> tuple[float, float] | None:
    """Where on the screen the cell ``(cursor + step, cursor + step)`` of ``chart`` is, when its first trace is
    a heatmap whose rows are the text's positions (top down) and which holds that position; else None."""
    rows = chart.evaluate("el => el.data && el.data[0] && el.data[0].type === 'heatmap' ? "
                          "Array.from(el.data[0].y || []).map(String) : []")
    positions = [int(r.split()[0]) if r.split() and r.split()[0].isdigit() else None for r in rows]
    if not positions or None in positions or cursor + step not in positions:
        return None
    k, n = positions.index(cursor + step), len(positions)
    box = chart.locator(".nsewdrag").first.bounding_box()
    side = min(box["width"], box["height"])  # a square map, drawn from the top left corner of its plot area
    return box["x"] + side * (k + 0.5) / n, box["y"] + side * (k + 0.5) / n


def figures(first: dict[tuple[str, str], list[float]], moves: dict[str, list[float]],
            clicked: dict[tuple[str, str], dict[str, list[float]]], baseline: str) -> dict:
    """The figures of one run as data, keyed as :func:`main` measures them (server name ``"shipped"`` or
    ``baseline``; page; view): ``first_view`` (per page, each server's seconds and the ratio shipped /
    baseline of the medians), ``cursor_move`` (per server) and ``clicks`` (per view, kind of click and
    server; ``n`` 0 and ``None`` times where the page has no such chart). Times in seconds. Design choice."""
    def stats(values: list[float]) -> dict:
        return {"median_s": statistics.median(values) if values else None, "min_s": min(values, default=None),
                "n": len(values), "values_s": list(values)}

    def server(name: str) -> str:
        return "shipped" if name == "shipped" else "baseline"

    pages = list(dict.fromkeys(page for _, page in first))
    return {
        "baseline": baseline,
        "first_view": [{"page": page, "shipped": stats(first[("shipped", page)]),
                        "baseline": stats(first[(baseline, page)]),
                        "ratio_median": statistics.median(first[("shipped", page)])
                        / statistics.median(first[(baseline, page)])} for page in pages],
        "cursor_move": [{"server": server(name), **stats(values)} for name, values in moves.items()],
        "clicks": [{"view": view, "what": what, "server": server(name), **stats(values)}
                   for (name, view), by_what in clicked.items() for what, values in by_what.items()],
    }


#: What the keys of the JSON (``--json``) mean: times in seconds, in the page's own clock.
DEFINITIONS = {
    "view": "the view page of the cursor moves", "ckpt": "the checkpoint of the cursor moves",
    "chars": "text length of the cursor moves and clicks, characters",
    "load_avg_before": "1-minute load average before the run",
    "baseline": "the baseline server: this checkout without the chart preload, or --baseline-root's",
    "first_view": "per page, fresh sessions: navigation -> first chart painted; shipped and baseline: median_s, "
                  "min_s, n, values_s",
    "page": "the page's path (home: /)", "shipped": "the app as shipped: median_s, min_s, n, values_s",
    "ratio_median": "shipped median / baseline median (same run; below 1: shipped is faster)",
    "cursor_move": "per server: key press on the token cursor -> the view drawn again",
    "clicks": "per view, kind of click and server: click -> the run's last message or last chart drawn",
    "what": "token (a token of the clickable text), cell (a cell of a position x position map), overview",
    "server": "shipped or baseline",
    "median_s": "median, s; null: no such chart", "min_s": "fastest, s; null: no such chart",
    "n": "how many were measured (0: the page has no such chart)", "values_s": "every measurement, s",
}


def _summary(values: list[float]) -> str:
    return f"median {statistics.median(values):5.2f} s  min {min(values):5.2f} s  (n={len(values)})"


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the first-view, cursor-move and click times. Returns 0 (2 without chromium)."""
    from geomlab.trace import MAX_TEXT_CHARS  # the app's longest text

    ap = Parser(prog="geomlab bench browser", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=number(int, 1, 10**4), default=5,
                    help="fresh sessions per server and page, 1 to 10,000 (default 5)")
    ap.add_argument("--pages", default=",energy,trajectories",
                    help="comma-separated page paths for the first view ('' is Home; default: Home, /energy (the "
                         "default checkpoint's view, which the warm-up builds first) and /trajectories)")
    ap.add_argument("--view", default="trajectories", help="view page for the cursor moves (default trajectories)")
    ap.add_argument("--ckpt", default="bundled/osmformer-torus-tinyshakespeare",
                    help="checkpoint of the cursor moves (default: the torus OSMFormer, the slowest redraw)")
    ap.add_argument("--chars", type=number(int, 1, MAX_TEXT_CHARS), default=2000,
                    help=f"text length of the cursor moves, 1 to {MAX_TEXT_CHARS:,} (the app's limit; default 2000)")
    ap.add_argument("--moves", type=number(int, 1, 10**4), default=6,
                    help="cursor moves per server, 1 to 10,000 (default 6)")
    ap.add_argument("--click-views", default="trajectories,tangents,attention,energy,planes",
                    help="view pages of the click-to-update measure, comma-separated ('' for none)")
    ap.add_argument("--clicks", type=number(int, 1, 10**4), default=4,
                    help="clicks of each kind per server and view, 1 to 10,000 (default 4; --click-views '' for "
                    "none)")
    ap.add_argument("--baseline-root", default=None,
                    help="another checkout of the app to serve as the baseline (default: this one, preload off)")
    return run_benchmark(ap, argv, _measure, DEFINITIONS)


def _measure(args) -> dict | int:
    """Run the measures of ``args``; print them; their :func:`figures` (2 without chromium)."""
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
    print(f"first view in chromium (fresh session, in the page's clock: navigation -> first chart painted); "
          f"load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for path in [p or "home" for p in pages]:
        a, b = first[("shipped", path)], first[(base, path)]
        print(f"  /{path:<14} shipped  {_summary(a)}")
        print(f"  /{path:<14} baseline {_summary(b)}   ratio shipped/baseline (median) "
              f"{statistics.median(a) / statistics.median(b):.2f}")
    print(f"cursor move ({args.view}, {args.ckpt}, {len(text)} characters; key press -> view drawn again)")
    for name, values in moves.items():
        print(f"  {name:<22} {_summary(values)}  " + " ".join(f"{v:.2f}" for v in values))
    if click_views:
        print(f"click to update ({len(text)} characters, the view's default checkpoint; in the page's clock, click "
              f"-> the run's last message or the last chart drawn, whichever is later; token: 3 tokens away; cell: "
              f"the first chart's cell 3 rows away; overview: a jump across the text); load average now "
              f"{os.getloadavg()[0]:.1f}")
    for view in click_views:
        for what in ("token", "cell", "overview"):
            for name in servers:
                values = clicked[(name, view)][what]
                print(f"  /{view:<13} {what:<8} {name:<22} " + (_summary(values) if values else "no such chart"))
    return {"view": args.view, "ckpt": args.ckpt, "chars": len(text), "load_avg_before": load0,
            **figures(first, moves, clicked, base)}
