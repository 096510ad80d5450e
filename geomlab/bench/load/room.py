"""The load benchmark's room mode (``geomlab bench load --room N``): one teacher and N students following on
one server, or split over two replicas sharing rooms through a real ``redis-server`` (``--replicas 2``).

Every client speaks the websocket protocol (:mod:`geomlab.bench.load.protocol`) and serves its fragments'
``run_every`` timers as a browser does, so the students' follow fragment polls the room as in a class. The
teacher opens the Tour, presses "Start a room" (the token stays in its server-side session) and reads the
join code from the page; the students open ``/?room=CODE`` and land on the teacher's step. Then the teacher
moves the token cursor ``moves`` times and presses Next ``steps`` times; for each event, every student's
latency is the time from the teacher's message until that student's session finished a run that shows it
(the cursor widget at the new position; the step's heading). Reported: median and p95 latencies, students
that never saw an event, each server's peak RSS and the load average. Source: design choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

from geomlab.bench.load.protocol import (FINISHED_FRAGMENT_OK, FINISHED_OK, Run, RunReader, cursor_state,
                                         find_cursor, rerun_backmsg)
from geomlab.bench.load.server import RssMonitor, app_server, free_port, log_errors

LESSON = "s5-word-problem"  # a lesson of the bundled zoo whose steps all show the token cursor
_CODE = re.compile(r"\*\*Room\*\* `([0-9A-Z]{4})-([0-9A-Z]{4})`")


@dataclass
class RoomResult:
    """One room run's measurements (seconds, MB) and failures."""

    students: int
    replicas: int
    join_s: list[float] = field(default_factory=list)
    cursor_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    missed: int = 0
    rss_mb: list[float] = field(default_factory=list)
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.missed


def cursor_after(run: Run, before: int | None) -> int | None:
    """The token cursor's position once ``run`` is drawn, as the browser holds it: a value the server set
    (``set_value``: the formatted option of a select_slider in ``raw_value``, a slider's number in ``value``)
    replaces it; a slider drawn without one keeps the browser's value (``before``), or its default the
    first time. None when the run drew no cursor."""
    cur = find_cursor(run.elements)
    if cur is None:
        return before
    s = [e for e in run.elements if e.WhichOneof("type") == "slider" and e.slider.id == cur.id][-1].slider
    if s.set_value and s.raw_value and cur.kind == "select_slider" and s.raw_value[0] in cur.options:
        return cur.options.index(s.raw_value[0])
    if s.set_value and s.value:
        return int(s.value[0]) - (cur.lo if cur.kind == "slider" else 0)
    if before is None and s.default:
        return int(s.default[0]) - (cur.lo if cur.kind == "slider" else 0)
    return before


def shows_step(run: Run, number: int) -> bool:
    """Whether ``run`` drew the heading of Tour step ``number`` (from 1)."""
    return any(e.WhichOneof("type") == "heading" and e.heading.body.startswith(f"{number}. ") for e in run.elements)


class Client:
    """One browser-like session: a websocket, its run reader, a pump that serves the fragment timers and
    hands every finished run to ``on_run(run, perf_counter time)``."""

    def __init__(self, ws_url: str) -> None:
        self.ws_url, self.reader, self.ws, self.page = ws_url, RunReader(), None, ""
        self.on_run: Callable[[Run, float], None] = lambda run, t: None
        self.last: Run | None = None
        self.cursor: int | None = None  # the token cursor's position as a browser would show it
        self.errors: list[str] = []
        self._task: asyncio.Task | None = None

    async def open(self, page: str, query: dict[str, str]) -> None:
        from websockets.asyncio.client import connect

        self.page = page
        self.ws = await connect(self.ws_url, subprotocols=["streamlit"], max_size=None, proxy=None,
                                ping_interval=None, close_timeout=2)
        await self.ws.send(rerun_backmsg(query_string=urlencode(query), page_name=page))
        self._task = asyncio.create_task(self._pump())

    async def send(self, states: list[Any], fragment_id: str = "") -> None:
        await self.ws.send(rerun_backmsg(query_string=self.reader.query_string, page_name=self.page,
                                         page_script_hash=self.reader.page_script_hash, widget_states=states,
                                         fragment_id=fragment_id))

    async def _pump(self) -> None:
        due: dict[str, float] = {}
        try:
            while True:
                now = time.monotonic()
                for fid, interval in self.reader.auto_reruns.items():
                    due.setdefault(fid, now + interval)
                for fid in [f for f in due if f not in self.reader.auto_reruns]:
                    del due[fid]
                for fid, when in list(due.items()):
                    if when <= now:
                        await self.ws.send(rerun_backmsg(
                            query_string=self.reader.query_string, page_name=self.page,
                            page_script_hash=self.reader.page_script_hash, fragment_id=fid, is_auto_rerun=True))
                        due[fid] = now + self.reader.auto_reruns[fid]
                wait = min([1.0] + [w - now for w in due.values()])
                try:
                    data = await asyncio.wait_for(self.ws.recv(), timeout=max(0.01, wait))
                except (TimeoutError, asyncio.TimeoutError):
                    continue
                if isinstance(data, str):
                    continue
                run = self.reader.feed(data)
                if run is not None:
                    self.errors += [e for e in run.errors if e not in self.errors]
                    if run.status in (FINISHED_OK, FINISHED_FRAGMENT_OK):
                        self.cursor = cursor_after(run, self.cursor)
                        if run.status == FINISHED_OK:
                            self.last = run
                        self.on_run(run, time.perf_counter())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a client's failure is a measurement
            self.errors.append(f"{type(exc).__name__}: {exc}")

    async def wait_for(self, check: Callable[[Run], bool], deadline: float) -> Run:
        """The first full run (from now on, or the last one) for which ``check`` holds; TimeoutError at
        ``deadline``."""
        while time.monotonic() < deadline:
            if self.last is not None and check(self.last):
                return self.last
            await asyncio.sleep(0.05)
        raise TimeoutError("the page never showed what was waited for")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()


class Watcher:
    """A student's expectation: the first full run after which ``check(client, run)`` holds gives its
    latency."""

    def __init__(self, client: "Client") -> None:
        self.client = client
        self.check: Callable[[Client, Run], bool] | None = None
        self.t0 = 0.0
        self.seen: float | None = None

    def expect(self, check: Callable[[Client, Run], bool], t0: float) -> None:
        self.check, self.t0, self.seen = check, t0, None

    def __call__(self, run: Run, t: float) -> None:
        if self.check is not None and self.seen is None and run.status == FINISHED_OK and self.check(self.client, run):
            self.seen = t - self.t0


def _button(run: Run, label: str) -> str | None:
    ids = [e.button.id for e in run.elements if e.WhichOneof("type") == "button" and e.button.label == label]
    return ids[-1] if ids else None


def _trigger(widget_id: str) -> Any:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    st = WidgetState()
    st.id, st.trigger_value = widget_id, True
    return st


async def _event(teacher: Client, students: list[tuple[Client, Watcher]], send, check, wait_s: float,
                 out: list[float], result: RoomResult) -> None:
    """Send one teacher event and collect every student's latency (missed ones counted)."""
    t0 = time.perf_counter()
    for _, w in students:
        w.expect(check, t0)
    await send()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(w.seen is None for _, w in students):
        await asyncio.sleep(0.05)
    out += [w.seen for _, w in students if w.seen is not None]
    result.missed += sum(w.seen is None for _, w in students)
    await asyncio.sleep(1.0)  # the class settles before the next event


async def _class(ws_urls: list[str], n: int, moves: int, steps: int, timeout: float, result: RoomResult) -> None:
    deadline = time.monotonic() + timeout
    teacher = Client(ws_urls[0])
    students: list[tuple[Client, Watcher]] = []
    try:
        await teacher.open("tour", {"lesson": LESSON, "step": "1"})
        run = await teacher.wait_for(lambda r: _button(r, "Start a room") is not None and r.charts > 0, deadline)
        await teacher.send([_trigger(_button(run, "Start a room"))])
        run = await teacher.wait_for(lambda r: any(e.WhichOneof("type") == "markdown" and _CODE.search(e.markdown.body)
                                                   for e in r.elements), deadline)
        code = next("".join(m.groups()) for e in run.elements if e.WhichOneof("type") == "markdown"
                    for m in [_CODE.search(e.markdown.body)] if m)
        t_join = time.perf_counter()
        for i in range(n):
            c = Client(ws_urls[(i + 1) % len(ws_urls)])
            w = c.on_run = Watcher(c)
            w.expect(lambda c, r: shows_step(r, 1), t_join)
            students.append((c, w))
        await asyncio.gather(*(c.open("", {"room": code}) for c, _ in students))
        while time.monotonic() < deadline and any(w.seen is None for _, w in students):
            await asyncio.sleep(0.1)
        result.join_s = [w.seen for _, w in students if w.seen is not None]
        result.missed += sum(w.seen is None for _, w in students)
        await asyncio.sleep(2.0)
        for k in range(moves):
            cur = find_cursor(teacher.last.elements, fragments=teacher.last.fragments)
            if cur is None:
                result.errors.append("the teacher's page has no token cursor")
                break
            target = (5 + 3 * k) % cur.n_positions

            async def move(cur=cur, target=target):
                await teacher.send([cursor_state(cur, target)], cur.fragment_id)
            await _event(teacher, students, move, lambda c, r, t=target: c.cursor == t, 30.0, result.cursor_s,
                         result)
        for k in range(steps):
            nxt = _button(teacher.last, "Next")

            async def press(nxt=nxt):
                await teacher.send([_trigger(nxt)])
            await _event(teacher, students, press, lambda c, r, s=k + 2: shows_step(r, s), 30.0, result.step_s, result)
    except (TimeoutError, asyncio.TimeoutError) as exc:
        result.errors.append(f"teacher: {exc}")
    finally:
        for c in [teacher] + [c for c, _ in students]:
            result.errors += [e for e in c.errors if e not in result.errors][:5]
        await asyncio.gather(*(c.close() for c in [teacher] + [c for c, _ in students]))


@contextlib.contextmanager
def redis_server(folder: Path):
    """A ``redis-server`` without persistence on a free local port; yields its URL. RuntimeError when the
    binary is missing (Debian: apt-get install redis-server) or it does not answer."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("--replicas 2 needs redis-server (Debian: apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"redis-server did not answer on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(10)


def run_room(students: int, replicas: int = 1, moves: int = 3, steps: int = 2, timeout: float = 600.0,
             entry: str = "serve.py") -> RoomResult:
    """Start ``replicas`` app servers (two share a fresh redis-server through ``GEOMLAB_ROOMS_URL``; one keeps
    rooms in its process), run one teacher (on the first server) and ``students`` students (split evenly),
    stop everything; see the module docstring. Raises ValueError for bad counts, RuntimeError when a server
    or Redis does not start."""
    if students < 1 or replicas not in (1, 2) or moves < 0 or steps < 0:
        raise ValueError("need --room N >= 1, --replicas 1 or 2, moves >= 0, steps >= 0")
    result = RoomResult(students, replicas)
    with tempfile.TemporaryDirectory(prefix="geomlab-room-") as tmp, contextlib.ExitStack() as stack:
        env = {"GEOMLAB_WARM_WAIT_S": "0"}
        if replicas == 2:
            env["GEOMLAB_ROOMS_URL"] = stack.enter_context(redis_server(Path(tmp)))
        else:
            env["GEOMLAB_ROOMS_URL"] = ""
        ports, monitors, logs = [], [], []
        for i in range(replicas):
            port = free_port()
            logs.append(Path(tmp) / f"streamlit{i}.log")
            proc = stack.enter_context(app_server(port, logs[-1], entry=entry, env=env))
            monitors.append(RssMonitor(proc.pid).start())
            ports.append(port)
        asyncio.run(_class([f"ws://127.0.0.1:{p}/_stcore/stream" for p in ports], students, moves, steps, timeout,
                           result))
        result.load = os.getloadavg()
        for m in monitors:
            m.stop()
        result.rss_mb = [m.peak_mb for m in monitors]
        stack.close()
        for log in logs:
            result.errors += log_errors(log.read_text(encoding="utf-8", errors="replace"))
    return result


def room_report(r: RoomResult) -> str:
    """The room run's summary, a few lines."""
    from geomlab.bench.load.run import percentile

    def fmt(xs: list[float]) -> str:
        if not xs:
            return "none"
        return f"median {percentile(xs, 50):.2f} s, p95 {percentile(xs, 95):.2f} s, max {max(xs):.2f} s (n={len(xs)})"

    where = "one server" if r.replicas == 1 else "two replicas sharing Redis"
    lines = [f"room: 1 teacher, {r.students} students, {where}",
             f"  join (link -> the teacher's step): {fmt(r.join_s)}",
             f"  cursor move -> each student's rerun: {fmt(r.cursor_s)}",
             f"  step change -> each student's rerun: {fmt(r.step_s)}",
             f"  missed (a student never showed an event within 30 s): {r.missed}",
             "  server peak RSS: " + ", ".join(f"{mb:.0f} MB" for mb in r.rss_mb),
             "  load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in r.load)]
    lines += [f"  error: {e}" for e in r.errors[:10]]
    return "\n".join(lines)
