"""One protocol session of the load benchmark: a websocket of its own opens a view page, times the first
view, then moves the token cursor; :class:`Lockstep` makes the sessions' moves start together. Also the
untimed visit to Home before the load. Source: design choice."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from geomlab.bench.load.protocol import (CURSOR_LABEL, FINISHED_COMPILE_ERROR, FINISHED_FRAGMENT_OK, FINISHED_OK,
                                         Run, RunReader, cursor_state, find_cursor, move_targets, rerun_backmsg)


@dataclass
class SessionResult:
    """One session's measurements (seconds, bytes) and failures."""

    index: int
    view: str
    ckpt: str | None
    url: str
    first_view_s: float | None = None
    first_charts: int = 0
    positions: int = 0
    move_s: list[float] = field(default_factory=list)
    move_charts: list[int] = field(default_factory=list)
    bytes: int = 0
    errors: list[str] = field(default_factory=list)


async def read_view(ws: Any, reader: RunReader, deadline: float, page: str = "",
                    want_chart: bool = True) -> Run:
    """Read frames until the view asked for is there: a run finishes (successfully, with a compile
    error, or a fragment's run) having drawn a Plotly chart or shown an error since the request, or
    without a chart when ``want_chart`` is false or no fragment timer will bring more. Runs cut short by
    a rerun are skipped; the runs since the request are added up (a view that a fragment fills in
    later). While waiting, fragments' ``run_every`` timers are served as the frontend serves them.
    Raises ``TimeoutError`` at ``deadline`` (``time.monotonic``)."""
    total: Run | None = None
    due: dict[str, float] = {}
    while True:
        now = time.monotonic()
        left = deadline - now
        if left <= 0:
            raise TimeoutError("no script_finished before the deadline")
        for fid, interval in reader.auto_reruns.items():
            due.setdefault(fid, now + interval)
        for fid in [f for f in due if f not in reader.auto_reruns]:
            del due[fid]
        for fid, when in list(due.items()):
            if when <= now:
                await ws.send(rerun_backmsg(query_string=reader.query_string, page_name=page,
                                            page_script_hash=reader.page_script_hash, fragment_id=fid,
                                            is_auto_rerun=True))
                due[fid] = now + reader.auto_reruns[fid]
        wait = min([left] + [w - now for w in due.values()])
        try:
            data = await asyncio.wait_for(ws.recv(), timeout=max(0.01, wait))
        except (TimeoutError, asyncio.TimeoutError):
            continue  # a fragment timer is due (or the deadline: checked above)
        if isinstance(data, str):
            continue
        run = reader.feed(data)
        if run is None or run.status not in (FINISHED_OK, FINISHED_COMPILE_ERROR, FINISHED_FRAGMENT_OK):
            continue
        total = run if total is None else total.absorb(run)
        if total.charts or total.errors or not want_chart or not reader.auto_reruns:
            return total


class Lockstep:
    """Rounds that every session starts together (``--together``): ``await wait(k, deadline)`` returns
    once each of the ``n`` sessions has arrived at round ``k`` or left (:meth:`leave`: finished, failed or
    timed out), or raises ``TimeoutError`` at ``deadline`` (``time.monotonic``)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrived: dict[int, int] = {}
        self.left = 0
        self._cond = asyncio.Condition()

    async def wait(self, k: int, deadline: float) -> None:
        async with self._cond:
            self.arrived[k] = self.arrived.get(k, 0) + 1
            self._cond.notify_all()
            await asyncio.wait_for(self._cond.wait_for(lambda: self.arrived[k] + self.left >= self.n),
                                   timeout=max(0.0, deadline - time.monotonic()))

    async def leave(self) -> None:
        async with self._cond:
            self.left += 1
            self._cond.notify_all()


async def run_session(res: SessionResult, ws_url: str, query: dict[str, str], moves: int,
                      deadline: float, lockstep: Lockstep | None = None) -> SessionResult:
    """Open ``res.view`` with ``query`` on a fresh websocket, time the first view, then move the cursor
    ``moves`` times (with ``lockstep``, each move starts when every session is ready for it). Failures
    are recorded in ``res.errors``, never raised."""
    from websockets.asyncio.client import connect

    reader = RunReader()
    t0 = time.perf_counter()
    try:
        async with connect(ws_url, subprotocols=["streamlit"], max_size=None, proxy=None,
                           ping_interval=None, open_timeout=max(1.0, deadline - time.monotonic()),
                           close_timeout=2) as ws:
            await ws.send(rerun_backmsg(query_string=urlencode(query), page_name=res.view))
            run = await read_view(ws, reader, deadline, res.view)
            res.errors += run.errors
            if run.charts == 0:
                if not run.errors:
                    res.errors.append("the first view finished without a chart")
                return res
            res.first_view_s = time.perf_counter() - t0
            res.first_charts = run.charts
            cursor = find_cursor(run.elements, fragments=run.fragments)
            if cursor is None:
                if moves:
                    res.errors.append(f"no widget labelled {CURSOR_LABEL!r} in the view")
                return res
            res.positions = cursor.n_positions
            for k, target in enumerate(move_targets(cursor.n_positions, moves)):
                if lockstep is not None:
                    await lockstep.wait(k, deadline)
                t1 = time.perf_counter()
                await ws.send(rerun_backmsg(query_string=reader.query_string, page_name=res.view,
                                            page_script_hash=reader.page_script_hash,
                                            widget_states=[cursor_state(cursor, target)],
                                            fragment_id=cursor.fragment_id))
                run = await read_view(ws, reader, deadline, res.view)
                res.errors += run.errors
                res.move_s.append(time.perf_counter() - t1)
                res.move_charts.append(run.charts)
                if run.charts == 0 and not run.errors:
                    res.errors.append(f"cursor move to {target} finished without a chart")
                cursor = find_cursor(run.elements, fragments=run.fragments) or cursor
    except (TimeoutError, asyncio.TimeoutError):
        res.errors.append(f"timed out after {time.perf_counter() - t0:.0f} s")
    except Exception as exc:  # noqa: BLE001 - a session's failure is a measurement, not a crash
        res.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        res.bytes = reader.total_bytes
        if lockstep is not None:
            await lockstep.leave()
    return res


async def visit_home(ws_url: str, deadline: float) -> list[str]:
    """Open Home once and wait for its run to finish; returns the errors it showed (or met)."""
    from websockets.asyncio.client import connect

    try:
        async with connect(ws_url, subprotocols=["streamlit"], max_size=None, proxy=None,
                           ping_interval=None, close_timeout=2) as ws:
            await ws.send(rerun_backmsg(page_name=""))
            run = await read_view(ws, RunReader(), deadline, want_chart=False)
            return [f"Home: {e}" for e in run.errors]
    except Exception as exc:  # noqa: BLE001 - recorded
        return [f"Home: {type(exc).__name__}: {exc}"]
