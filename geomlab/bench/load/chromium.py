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
    the same time; time goto -> the first ``.js-plotly-plot .main-svg`` attached. The browser and its
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
            await page.wait_for_selector(".js-plotly-plot .main-svg", state="attached",
                                         timeout=max(1000.0, (deadline - time.monotonic()) * 1000))
            r.first_chart_s = time.perf_counter() - t0
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
