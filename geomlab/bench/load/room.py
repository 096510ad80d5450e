"""The load benchmark's room mode (``geomlab bench load --room N``): one teacher and N students following on
one server, or split over two replicas sharing rooms through a real ``redis-server`` (``--replicas 2``).

Every client speaks the websocket protocol (:mod:`geomlab.bench.load.protocol`), serves its fragments'
``run_every`` timers as a browser does, and does what a student's page does with the room's follow channel
(``app_pages/js/room_listener.js``, :mod:`geomlab.rooms.watch`): one long poll over HTTP; on a change of the
cursor alone, it fetches the teacher's charts (what the browser then draws) and triggers its session's
catch-up rerun after the same quiet time; on any other change it triggers its session's rerun at once. The
teacher opens the Tour, presses "Start a room" (the token stays in its server-side session) and reads the
join code from the page; the students open ``/?room=CODE`` and land on the teacher's step. Then the teacher
moves the token cursor ``moves`` times and presses Next ``steps`` times. For each event, every student's
latency is the time from the teacher's message until that student holds it: for a cursor move, the
teacher's charts at the new position (fetched; the browser's drawing, on the student's own machine, is not
counted), and separately until its session finished a run with the cursor widget there (the whole page);
for a step, a run that shows the step's heading. Reported: median and p95 latencies, students that never saw
an event, each server's peak RSS and the load average. Source: design choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode, urlsplit

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
    page_s: list[float] = field(default_factory=list)
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
    """Whether ``run`` drew the title of Tour step ``number`` (from 1): the Tour's markdown line ``### 2. …``
    over its figures, or the presenter view's heading ``2. …``."""
    def title(e) -> bool:
        kind = e.WhichOneof("type")
        return ((kind == "heading" and e.heading.body.startswith(f"{number}. "))
                or (kind == "markdown" and e.markdown.body.startswith(f"### {number}. ")))

    return any(title(e) for e in run.elements)


LISTENER = "geomlab_room_listener"  # app_pages/_room.py's component


async def http_get(url: str, timeout: float = 30.0) -> tuple[int, bytes]:
    """``(status, body)`` of one HTTP/1.1 GET of ``url`` (http, a local server; a new connection each time,
    as a browser's long poll may be)."""
    parts = urlsplit(url)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, parts.port), timeout)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body


def cursor_only(a: dict | None, b: dict) -> bool:
    """js/room_listener.js's test: two room states that differ in the cursor alone."""
    if not a:
        return False
    strip = lambda s: {k: v for k, v in s.items() if k not in ("cursor", "version")}  # noqa: E731
    return a.get("cursor") != b.get("cursor") and strip(a) == strip(b)


class Client:
    """One browser-like session: a websocket, its run reader, a pump that serves the fragment timers and
    hands every finished run to ``on_run(run, perf_counter time)``, and a student's follow channel
    (:meth:`_listen`), which hands the cursor of each set of teacher's charts it fetched to
    ``on_charts(cursor, perf_counter time)``."""

    def __init__(self, ws_url: str) -> None:
        self.ws_url, self.reader, self.ws, self.page = ws_url, RunReader(), None, ""
        self.on_run: Callable[[Run, float], None] = lambda run, t: None
        self.on_charts: Callable[[int, float], None] = lambda cursor, t: None
        self.last: Run | None = None
        self.cursor: int | None = None  # the token cursor's position as a browser would show it
        self.errors: list[str] = []
        self._task: asyncio.Task | None = None
        self._listening: tuple[str, asyncio.Task] | None = None  # (listener's data, its task)

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
                            self._mount_listener(run)
                        self.on_run(run, time.perf_counter())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a client's failure is a measurement
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _mount_listener(self, run: Run) -> None:
        """As the browser mounts the listener component: a run that draws it with new data replaces the loop."""
        found = [e.bidi_component for e in run.elements if e.WhichOneof("type") == "bidi_component"
                 and e.bidi_component.component_name == LISTENER]
        if not found:
            return
        el = found[-1]
        if self._listening is not None:
            if self._listening[0] == el.json:
                return
            self._listening[1].cancel()
        self._listening = (el.json, asyncio.create_task(self._listen(json.loads(el.json), el.id)))

    async def _trigger(self, widget_id: str, event: str, value: Any) -> None:
        from streamlit.components.v2.bidi_component.main import _make_trigger_id
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        ws = WidgetState()
        ws.id = _make_trigger_id(widget_id, "events")
        ws.json_trigger_value = json.dumps([{"event": event, "value": value}])
        await self.send([ws])

    async def _listen(self, data: dict, widget_id: str) -> None:
        """js/room_listener.js, as a browser runs it (module docstring)."""
        parts = urlsplit(self.ws_url)
        base = f"http://{parts.netloc}{data['url']}"
        since, shown = data["since"], data["state"]
        mode = "follow" if data["mode"] == "follow" and not data["away"] else "explore"
        catch_up: asyncio.Task | None = None

        async def later(version: int) -> None:
            await asyncio.sleep(data["catch_up_s"] * random.uniform(1, 2))
            await self._trigger(widget_id, "changed", version)

        try:
            while True:
                try:
                    query = urlencode({"since": since, "me": data["me"], "mode": mode})
                    status, body = await http_get(f"{base}/wait?{query}")
                    got = json.loads(body)
                except (OSError, ValueError, TimeoutError, asyncio.TimeoutError) as exc:
                    self.errors.append(f"follow channel: {type(exc).__name__}: {exc}"[:200])
                    await asyncio.sleep(5)
                    continue
                if status == 404:
                    await self._trigger(widget_id, "changed", -2)
                    return
                if status != 200 or got["version"] == since:
                    continue
                if data["mode"] != "follow":
                    since = got["version"]
                    continue
                if not data["away"] and cursor_only(shown, got["state"]) and got["charts"] == got["version"]:
                    status, body = await http_get(f"{base}/charts")
                    charts = json.loads(body) if status == 200 else {}
                    if charts.get("version") == got["version"] and charts.get("charts", {}).get("charts"):
                        since, shown = got["version"], got["state"]
                        self.on_charts(int(got["state"]["cursor"]), time.perf_counter())
                        if catch_up is not None:
                            catch_up.cancel()
                        catch_up = asyncio.create_task(later(since))
                        continue
                if catch_up is not None:
                    catch_up.cancel()
                since, shown = got["version"], got["state"]
                await self._trigger(widget_id, "changed", since)
        except asyncio.CancelledError:
            if catch_up is not None:
                catch_up.cancel()
            raise

    async def wait_for(self, check: Callable[[Run], bool], deadline: float) -> Run:
        """The first full run (from now on, or the last one) for which ``check`` holds; TimeoutError at
        ``deadline``."""
        while time.monotonic() < deadline:
            if self.last is not None and check(self.last):
                return self.last
            await asyncio.sleep(0.05)
        raise TimeoutError("the page never showed what was waited for")

    async def close(self) -> None:
        if self._listening is not None:
            self._listening[1].cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close()


class Watcher:
    """A student's expectation: the first full run after which ``check(client, run)`` holds gives its page's
    latency (``page``); with ``cursor``, also the first teacher's charts at that cursor (``charts``). ``seen``:
    the first of the two."""

    def __init__(self, client: "Client") -> None:
        self.client = client
        self.check: Callable[[Client, Run], bool] | None = None
        self.cursor: int | None = None
        self.t0 = 0.0
        self.page: float | None = None
        self.charts: float | None = None

    @property
    def seen(self) -> float | None:
        got = [x for x in (self.page, self.charts) if x is not None]
        return min(got) if got else None

    def expect(self, check: Callable[[Client, Run], bool], t0: float, cursor: int | None = None) -> None:
        self.check, self.t0, self.page, self.charts, self.cursor = check, t0, None, None, cursor

    def __call__(self, run: Run, t: float) -> None:
        if self.check is not None and self.page is None and run.status == FINISHED_OK and self.check(self.client, run):
            self.page = t - self.t0

    def on_charts(self, cursor: int, t: float) -> None:
        if self.cursor is not None and self.charts is None and cursor == self.cursor:
            self.charts = t - self.t0


def _button(run: Run, label: str) -> str | None:
    ids = [e.button.id for e in run.elements if e.WhichOneof("type") == "button" and e.button.label == label]
    return ids[-1] if ids else None


def _trigger(widget_id: str) -> Any:
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    st = WidgetState()
    st.id, st.trigger_value = widget_id, True
    return st


async def _event(teacher: Client, students: list[tuple[Client, Watcher]], send, check, wait_s: float,
                 out: list[float], result: RoomResult, cursor: int | None = None) -> None:
    """Send one teacher event and collect every student's latency (missed ones counted); with ``cursor``,
    also every student's page's latency (its session's catch-up), in ``result.page_s``."""
    t0 = time.perf_counter()
    for _, w in students:
        w.expect(check, t0, cursor)
    await send()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(w.page is None for _, w in students):
        await asyncio.sleep(0.05)
    out += [w.seen for _, w in students if w.seen is not None]
    result.missed += sum(w.seen is None for _, w in students)
    if cursor is not None:
        result.page_s += [w.page for _, w in students if w.page is not None]
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
            c.on_charts = w.on_charts
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
                         result, cursor=target)
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
             f"  cursor move -> each student's charts: {fmt(r.cursor_s)}",
             f"  cursor move -> each student's whole page (its catch-up run): {fmt(r.page_s)}",
             f"  step change -> each student's rerun: {fmt(r.step_s)}",
             f"  missed (a student never showed an event within 30 s): {r.missed}",
             "  (a student's session catches up on a cursor move after 2.5-5 s of quiet: js/room_listener.js)",
             "  server peak RSS: " + ", ".join(f"{mb:.0f} MB" for mb in r.rss_mb),
             "  load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in r.load)]
    lines += [f"  error: {e}" for e in r.errors[:10]]
    return "\n".join(lines)


def room_figures(r: RoomResult) -> dict:
    """What :func:`room_report` prints, as data: every measured time (s), ``missed``, the servers' peak RSS
    (MB), the load average, the errors and ``ok``. Design choice."""
    from dataclasses import asdict

    return {"mode": "room", **asdict(r), "ok": r.ok}
