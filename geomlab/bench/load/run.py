"""One load benchmark run: the server started, the warm-up and the one-session baseline, the concurrent
sessions (and chromium pages), the server stopped; the measurements in one :class:`LoadResult`. Source:
design choice (speed as a ratio to a baseline measured in the same run)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import urlencode

from geomlab.bench.load.chromium import BrowserResult, run_browsers
from geomlab.bench.load.server import RssMonitor, app_server, free_port, log_errors
from geomlab.bench.load.session import Lockstep, SessionResult, run_session, visit_home
from geomlab.teach.views import VIEWS
from geomlab.bench.load.texts import DEFAULT_VIEWS, bundled_checkpoints, checkpoints_for, session_texts


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) with linear interpolation between order statistics (numpy's
    default); None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class LoadResult:
    """Everything one benchmark run measured (times in s, memory in MB, bytes)."""

    sessions: list[SessionResult]
    browsers: list[BrowserResult]
    server_up_s: float
    warmup_s: float | None
    wall_s: float
    peak_rss_mb: float
    hwm_mb: float
    log_errors: list[str]
    chars: int
    moves: int
    baseline: SessionResult | None = None
    together: bool = False
    client_cpu_s: float = 0.0

    @property
    def first_views(self) -> list[float]:
        return [s.first_view_s for s in self.sessions if s.first_view_s is not None]

    @property
    def move_times(self) -> list[float]:
        return [t for s in self.sessions for t in s.move_s]

    @property
    def page_errors(self) -> list[str]:
        alone = [f"alone ({self.baseline.view}): {e}" for e in self.baseline.errors] if self.baseline else []
        return alone + [f"session {s.index} ({s.view}): {e}" for s in self.sessions for e in s.errors] + [
            f"chromium {b.url}: {e}" for b in self.browsers for e in b.errors]

    @property
    def ok(self) -> bool:
        return not self.page_errors and not self.log_errors


def run_load(sessions: int, views: Iterable[str] = DEFAULT_VIEWS, moves: int = 3, chars: int = 512,
             port: int = 0, browser: int = 0, timeout: float = 900.0, warmup: bool = True,
             rotate: bool = False, ramp: float = 0.0, together: bool = False,
             log_path: Path | None = None, entry: str = "serve.py") -> LoadResult:
    """Start the server, run ``sessions`` concurrent protocol sessions (and ``browser`` chromium pages on
    the URLs of the first ones), stop the server; see the module docstring. ``timeout``: wall-clock
    limit for the sessions after the server is up (seconds; unfinished sessions are recorded as timed
    out). ``warmup``: before the load, open Home and then the first view once (untimed, as a running
    server would have been visited: imports, model load, first calls), then run one session alone on the
    first view with a text of its own: the baseline the load's times are compared with (design choice:
    a ratio measured in the same run, as the other benchmarks report). ``rotate``: cycle each view's
    sessions through all its suitable checkpoints instead of the first. ``ramp``: seconds between
    session starts. ``together``: the cursor moves go in rounds that all sessions start at once (after
    every first view), the worst case of a class scrubbing together; otherwise each session moves as
    soon as its own view is there. ``log_path``: keep the server log there (default: a temporary file).

    Raises ``ValueError`` for an unknown view or bad counts, ``RuntimeError`` when the server does not
    start."""
    views = list(views)
    unknown = [v for v in views if v not in VIEWS]
    if unknown or not views:
        raise ValueError(f"unknown views {unknown}; choose from {', '.join(VIEWS)}")
    if sessions < 1 or moves < 0 or chars < 1 or browser < 0:
        raise ValueError("need sessions >= 1, moves >= 0, chars >= 1, browser >= 0")
    ckpts = checkpoints_for(views, bundled_checkpoints())
    texts = session_texts(sessions + 2, chars)
    port = port or free_port()
    base = f"http://127.0.0.1:{port}"
    ws_url = f"ws://127.0.0.1:{port}/_stcore/stream"
    plan = _plan(sessions, views, ckpts, texts, base, rotate)

    with contextlib.ExitStack() as outer:
        if log_path is None:
            tmp = outer.enter_context(tempfile.TemporaryDirectory(prefix="geomlab-load-"))
            log_path = Path(tmp) / "streamlit.log"
        stack = outer.enter_context(contextlib.ExitStack())  # closed (server stopped) before the log is read
        t_start = time.monotonic()
        proc = stack.enter_context(app_server(port, Path(log_path), entry=entry))
        server_up = time.monotonic() - t_start
        monitor = RssMonitor(proc.pid).start()
        stack.callback(monitor.stop)
        warm_s = baseline = None
        if warmup:
            warm_s, baseline = _warm_up_and_baseline(ws_url, base, views[0], ckpts[views[0]], texts[sessions:],
                                                     moves, timeout)
        t0, c0 = time.monotonic(), time.process_time()
        done, browsers = asyncio.run(_load_phase(plan, ws_url, moves, browser, timeout, ramp, together))
        wall, client_cpu = time.monotonic() - t0, time.process_time() - c0
        monitor.stop()
        stack.close()  # stops the server before its log is read
        text = Path(log_path).read_text(encoding="utf-8", errors="replace")
    return LoadResult(done, browsers, server_up, warm_s, wall, monitor.peak_mb, monitor.hwm_mb,
                      log_errors(text), chars, moves, baseline, together, client_cpu)


def _plan(sessions: int, views: list[str], ckpts: dict[str, list[str]], texts: list[str], base: str,
          rotate: bool) -> list[tuple[SessionResult, dict[str, str]]]:
    """``[(result to fill, URL query)]`` of the load's sessions: views round-robin, each view's first suitable
    checkpoint (``rotate``: cycled through them), text ``i`` for session ``i``."""
    plan: list[tuple[SessionResult, dict[str, str]]] = []
    for i in range(sessions):
        view = views[i % len(views)]
        names = ckpts[view]
        ckpt = None
        if names:
            ckpt = names[(i // len(views)) % len(names)] if rotate else names[0]
        query = {"ckpt": f"bundled/{ckpt}"} if ckpt else {}
        query["text"] = texts[i]
        plan.append((SessionResult(i, view, ckpt, f"{base}/{view}?{urlencode(query)}"), query))
    return plan


def _warm_up_and_baseline(ws_url: str, base: str, view: str, names: list[str], texts: list[str], moves: int,
                          timeout: float) -> tuple[float, SessionResult]:
    """``(warm-up seconds, baseline)``: Home opened once, then ``view`` once with ``texts[1]`` (untimed: model
    load, first calls), then one session alone on ``view`` with ``texts[0]``, the baseline the load is
    compared with (carrying the warm-up's errors)."""
    t0 = time.monotonic()
    warm_errors = asyncio.run(visit_home(ws_url, t0 + min(timeout, 300.0)))
    ckpt = names[0] if names else None
    query = {"ckpt": f"bundled/{ckpt}"} if ckpt else {}
    query["text"] = texts[0]
    warm_view = SessionResult(-2, view, ckpt, "", errors=warm_errors)
    asyncio.run(run_session(warm_view, ws_url, {**query, "text": texts[1]}, 0,
                            time.monotonic() + min(timeout, 300.0)))  # model load, first calls
    warm_s = time.monotonic() - t0
    baseline = SessionResult(-1, view, ckpt, f"{base}/{view}?{urlencode(query)}", errors=warm_view.errors)
    asyncio.run(run_session(baseline, ws_url, query, moves, time.monotonic() + min(timeout, 300.0)))
    return warm_s, baseline


async def _load_phase(plan: list[tuple[SessionResult, dict[str, str]]], ws_url: str, moves: int, browser: int,
                      timeout: float, ramp: float, together: bool) -> tuple[list[SessionResult], list[BrowserResult]]:
    """The sessions of ``plan`` at once (each within ``timeout`` s of its start, ``ramp`` s apart, in
    :class:`Lockstep` with ``together``) and ``browser`` chromium pages on the first ones' URLs; the sessions
    wait until chromium and its pages are ready, so both start together."""
    go = asyncio.Event()
    if not browser:
        go.set()
    lockstep = Lockstep(len(plan)) if together else None

    async def delayed(k: int, res: SessionResult, query: dict[str, str]) -> SessionResult:
        await go.wait()  # chromium and its pages are ready: everyone starts together
        deadline = time.monotonic() + timeout
        if ramp:
            await asyncio.sleep(k * ramp)
        return await run_session(res, ws_url, query, moves, deadline, lockstep)

    tasks = [delayed(k, r, q) for k, (r, q) in enumerate(plan)]
    br = run_browsers([r.url for r, _ in plan[:browser]], timeout, go) if browser else None
    results = await asyncio.gather(*tasks, *([br] if br else []))
    return list(results[:len(tasks)]), (results[-1] if br else [])
