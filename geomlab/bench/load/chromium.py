"""The load benchmark's browser check (``--browser M``): real chromium pages on the URLs of the first
sessions, timed to the first rendered Plotly chart, their websocket frames read as the protocol client reads
them. Debian's chromium through playwright (never ``playwright install``). Source: design choice."""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import dataclass, field
from typing import Any

from geomlab.bench.load.protocol import RunReader

CHART = ".js-plotly-plot .main-svg"
"""A drawn Plotly chart: the element Plotly makes when it draws a figure."""

FIRST_CHART_JS = """
(() => {
  const look = () => {
    if (document.querySelector(%r)) { setTimeout(() => { window.__geomlabFirstChart = performance.now(); }, 0); }
    else requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})();
""" % CHART
"""Init script: the page's own clock (ms from the navigation's start) when the first chart is painted, in
``window.__geomlabFirstChart``: the first animation frame that has the chart, and the task after it (after
its paint). Measured in the page, as a click is (bench/browser.py): a driver's ``wait_for_selector`` polls
every 500 ms once it has waited a while, so the moment it returns can be half a second late."""

FIRST_CHART_READ = "() => window.__geomlabFirstChart"


async def first_chart_seconds(page: Any, timeout_ms: float) -> float:
    """Seconds from the navigation's start to the first chart painted, in the page's clock. The page must
    have :data:`FIRST_CHART_JS` as an init script. Raises playwright's TimeoutError after ``timeout_ms``."""
    handle = await page.wait_for_function(FIRST_CHART_READ, polling=100, timeout=timeout_ms)
    return float(await handle.json_value()) / 1000


@dataclass
class BrowserResult:
    """One chromium page: its URL, time to the first rendered Plotly chart (s), time to the first
    ``script_finished`` with a chart among the websocket frames the page received (s, the protocol
    client's measure taken inside the browser), errors shown."""

    url: str
    first_chart_s: float | None = None
    protocol_s: float | None = None
    errors: list[str] = field(default_factory=list)


async def run_browsers(urls: list[str], timeout: float, go: asyncio.Event) -> list[BrowserResult]:
    """Open each URL in its own page of one headless chromium (Debian's, via playwright's async API) at
    the same time; time the navigation's start -> the first chart painted, in the page's clock. The browser and its
    pages are made first, then ``go`` is set (the protocol sessions wait for it, so both start together)
    and the pages navigate, each within ``timeout`` seconds. Missing chromium or playwright is recorded
    as an error on every URL (``go`` is set regardless)."""
    out = [BrowserResult(u) for u in urls]
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        exe = None
    if exe is None:
        for r in out:
            r.errors.append("chromium or playwright is not installed")
        go.set()
        return out

    async def one(page: Any, r: BrowserResult) -> None:
        reader = RunReader()
        charts = [0]

        def frame(payload: Any) -> None:
            if not isinstance(payload, (bytes, bytearray)) or r.protocol_s is not None:
                return
            try:
                run = reader.feed(bytes(payload))
            except Exception:  # noqa: BLE001 - not a ForwardMsg; ignore
                return
            if run is not None and run.finished_ok:
                charts[0] += run.charts
                if charts[0]:
                    r.protocol_s = time.perf_counter() - t0

        page.on("websocket", lambda ws: ws.on("framereceived", frame))
        await go.wait()
        t0 = time.perf_counter()
        deadline = time.monotonic() + timeout
        try:
            timeout_ms = max(1000.0, (deadline - time.monotonic()) * 1000)
            await page.goto(r.url, timeout=timeout_ms)
            r.first_chart_s = await first_chart_seconds(page, max(1000.0, (deadline - time.monotonic()) * 1000))
            for sel in ('[data-testid="stException"]', '[data-testid="stAlertContentError"]'):
                for text in await page.locator(sel).all_inner_texts():
                    r.errors.append("browser: " + text.strip().splitlines()[0] if text.strip() else sel)
        except Exception as exc:  # noqa: BLE001 - recorded
            r.errors.append(f"browser: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        finally:
            await page.close()

    try:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run"])
            try:
                pages = [await browser.new_page(viewport={"width": 1400, "height": 1000}) for _ in out]
                for page in pages:
                    await page.add_init_script(FIRST_CHART_JS)
                visits = [asyncio.ensure_future(one(page, r)) for page, r in zip(pages, out)]
                go.set()
                await asyncio.gather(*visits)
            finally:
                await browser.close()
    except Exception as exc:  # noqa: BLE001 - chromium failed to start: recorded
        for r in out:
            if r.first_chart_s is None and not r.errors:
                r.errors.append(f"browser: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    finally:
        go.set()
    return out
