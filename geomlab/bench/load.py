"""``geomlab bench load``: many concurrent sessions against the real app server.

Starts ``streamlit run serve.py`` (or ``app.py`` with ``--entry``; headless, loopback, a free port) as a subprocess with its log captured,
then drives ``--sessions`` concurrent sessions the way a browser talks to the server: Streamlit's own
websocket protocol (``/_stcore/stream``; ``BackMsg`` with a ``rerun_script`` ``ClientState`` up,
``ForwardMsg`` down, the protobuf classes of the installed streamlit package), through the ``websockets``
client that streamlit itself depends on. Each session opens a view page (round-robin over ``--views``)
with its own ``--chars``-character text (slices of Tiny Shakespeare when ``GEOMLAB_DATA_DIR`` has it, else
a built-in text) in the page's ``text`` URL parameter and a bundled checkpoint suited to the view
(``ckpt=bundled/NAME``), waits for the first view, then moves the token cursor ``--moves`` times.

Printed: median and p95 time to the first view (connect -> the first successful ``script_finished`` whose
run drew at least one Plotly chart) and per cursor move (rerun sent -> ``script_finished``), charts and
bytes received, the server's peak RSS (process tree, sampled from ``/proc``), every error shown in a page
(``st.error`` alerts, exception elements) and every ERROR/Traceback line of the server log. ``--browser M``
also opens M real chromium pages (playwright, Debian's chromium, never ``playwright install``) on the URLs
of the first M sessions, at the same time, and reports their time to the first rendered
``.js-plotly-plot``, as a check that the protocol client sees what a browser sees. Before the load, one
session runs alone on the first view (after untimed visits to Home and that view): the baseline the
load's medians are compared with, as a ratio measured in the same run. ``--together`` moves the cursors
in rounds that all sessions start at once, after every first view (the worst case for a redraw).

The contract with the app is what a user sees: page URL paths (the view slugs), the URL keys ``ckpt`` and
``text``, and a slider or select_slider labelled ``"Token cursor"`` (:data:`CURSOR_LABEL`). Nothing of
``app_pages`` is imported. It is a benchmark, not a timed test: the exit status is non-zero only when
something failed (a page error, a log error, a session that did not finish), never for being slow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator
from urllib.parse import urlencode

from geomlab.core.locate import APP_DIR, bundled_dir
from geomlab.teach.views import VIEWS

ROOT = APP_DIR  # app.py, serve.py and assets/, in the repository or installed (geomlab.core.locate)

#: The label of the token cursor widget: the one thing the client looks up in the page (the contract).
CURSOR_LABEL = "Token cursor"

#: Every view page's URL path, in page order (the view registry, :data:`geomlab.teach.views.VIEWS`).
DEFAULT_VIEWS = tuple(VIEWS)

#: Text used when Tiny Shakespeare is not in GEOMLAB_DATA_DIR (public domain: Sonnet 18 and Hamlet III.1).
BUILTIN_TEXT = (
    "Shall I compare thee to a summer's day?\nThou art more lovely and more temperate:\n"
    "Rough winds do shake the darling buds of May,\nAnd summer's lease hath all too short a date;\n"
    "Sometime too hot the eye of heaven shines,\nAnd often is his gold complexion dimm'd;\n"
    "And every fair from fair sometime declines,\nBy chance or nature's changing course untrimm'd;\n"
    "But thy eternal summer shall not fade,\nNor lose possession of that fair thou ow'st;\n"
    "Nor shall Death brag thou wander'st in his shade,\nWhen in eternal lines to time thou grow'st:\n"
    "So long as men can breathe or eyes can see,\nSo long lives this, and this gives life to thee.\n\n"
    "HAMLET:\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\nOr to take arms against a sea of troubles\n"
    "And by opposing end them. To die: to sleep;\nNo more; and by a sleep to say we end\n"
    "The heart-ache and the thousand natural shocks\nThat flesh is heir to, 'tis a consummation\n"
    "Devoutly to be wish'd. To die, to sleep;\nTo sleep: perchance to dream: ay, there's the rub;\n"
    "For in that sleep of death what dreams may come\nWhen we have shuffled off this mortal coil,\n"
    "Must give us pause: there's the respect\nThat makes calamity of so long life;\n"
)

_FINISHED_OK = 0           # ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
_FINISHED_COMPILE_ERROR = 1
_FINISHED_FRAGMENT_OK = 3  # FINISHED_FRAGMENT_RUN_SUCCESSFULLY
_ALERT_ERROR = 1           # Alert.Format.ERROR


# ---------------------------------------------------------------- texts and checkpoints
def corpus_text() -> str:
    """Tiny Shakespeare from ``$GEOMLAB_DATA_DIR/tinyshakespeare/input.txt`` when it is there, else
    :data:`BUILTIN_TEXT` (never downloads)."""
    base = os.environ.get("GEOMLAB_DATA_DIR")
    if base:
        path = Path(base) / "tinyshakespeare" / "input.txt"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return BUILTIN_TEXT


def session_texts(n: int, chars: int, source: str | None = None) -> list[str]:
    """``n`` texts of ``chars`` characters each, pairwise different: slices of ``source`` (default
    :func:`corpus_text`) at offsets spread over it; a source shorter than ``chars + n`` is repeated.

    Raises ``ValueError`` for ``n < 0`` or ``chars < 1``."""
    if n < 0 or chars < 1:
        raise ValueError(f"need n >= 0 and chars >= 1, got n={n}, chars={chars}")
    src = source if source is not None else corpus_text()
    if not src:
        raise ValueError("empty source text")
    while len(src) < chars + n:
        src = src + src
    span = len(src) - chars
    out: list[str] = []
    for i in range(n):
        start = (i * span) // max(n, 1)
        text = src[start:start + chars]
        shift = 0
        while text in out and shift < span:  # tiny sources: nudge until the text differs
            shift += 1
            s = (start + shift) % (span + 1)
            text = src[s:s + chars]
        out.append(text)
    return out


def bundled_checkpoints(folder: Path | None = None) -> list[tuple[str, str, str]]:
    """``[(name, kind, vocab level)]`` of the bundled checkpoints (``assets/checkpoints/*.json``, or
    ``GEOMLAB_BUNDLED_DIR``), sorted by name. Reads only the JSON cards."""
    folder = folder or bundled_dir()
    out = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        kind = (meta.get("model_config") or {}).get("kind")
        if kind and (path.with_suffix(".safetensors")).is_file():
            out.append((path.stem, str(kind), str((meta.get("vocab") or {}).get("level", "char"))))
    return out


def checkpoints_for(views: Iterable[str], found: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """view slug -> bundled checkpoint names that read characters and suit the view (kinds in the order
    the view prefers, :attr:`geomlab.teach.views.ViewSpec.preferred_kinds`, e.g. Tangent updates on an
    OSMFormer; names sorted within a kind); an empty list means the app picks one itself."""
    out: dict[str, list[str]] = {}
    for slug in views:
        names: list[str] = []
        for kind in (VIEWS[slug].preferred_kinds if slug in VIEWS else ()):
            names += [n for n, k, level in found if k == kind and level == "char"]
        out[slug] = names
    return out


# ---------------------------------------------------------------- protocol messages
def rerun_backmsg(*, query_string: str = "", page_name: str = "", page_script_hash: str = "",
                  widget_states: Iterable[Any] = (), fragment_id: str = "",
                  is_auto_rerun: bool = False) -> bytes:
    """A serialized ``BackMsg`` asking for a script run, as the frontend sends it: the URL query string
    (without ``?``), the page (``page_name`` = its URL path on the first request; ``page_script_hash``
    once the server has named it), the widget states that changed, and for a fragment's run its id
    (``is_auto_rerun`` for the fragment's own ``run_every`` timer)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    msg = BackMsg()
    cs = msg.rerun_script
    cs.query_string = query_string
    cs.page_name = page_name
    cs.page_script_hash = page_script_hash
    cs.fragment_id = fragment_id
    cs.is_auto_rerun = is_auto_rerun
    for state in widget_states:
        cs.widget_states.widgets.add().CopyFrom(state)
    return msg.SerializeToString()


@dataclass
class CursorWidget:
    """The token cursor as found in a run's deltas: widget id, kind (``"select_slider"`` or
    ``"slider"``), its formatted options (select_slider) and its range."""

    id: str
    kind: str
    options: list[str]
    lo: int
    hi: int
    fragment_id: str = ""

    @property
    def n_positions(self) -> int:
        return len(self.options) if self.kind == "select_slider" else self.hi - self.lo + 1


def find_cursor(elements: Iterable[Any], label: str = CURSOR_LABEL,
                fragments: dict[str, str] | None = None) -> CursorWidget | None:
    """The last slider/select_slider element labelled ``label`` among ``Element`` protos, or None;
    ``fragments`` (widget id -> id of the fragment whose delta drew it, :attr:`Run.fragments`) gives its
    ``fragment_id``, which a rerun from that widget must carry, as the frontend's does."""
    from streamlit.proto.Slider_pb2 import Slider

    found = None
    for el in elements:
        if el.WhichOneof("type") != "slider" or el.slider.label != label:
            continue
        s = el.slider
        frag = (fragments or {}).get(s.id, "")
        if s.type == Slider.Type.SELECT_SLIDER:
            found = CursorWidget(s.id, "select_slider", list(s.options), 0, max(len(s.options) - 1, 0), frag)
        else:
            found = CursorWidget(s.id, "slider", [], int(s.min), int(s.max), frag)
    return found


def cursor_state(widget: CursorWidget, index: int) -> Any:
    """The ``WidgetState`` that sets the cursor to position ``index`` (0-based, clamped to the widget):
    a select_slider sends its formatted option as ``string_array_value``, a slider its number as
    ``double_array_value`` (what the frontend sends for each)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    st = WidgetState()
    st.id = widget.id
    if widget.kind == "select_slider":
        i = max(0, min(int(index), len(widget.options) - 1))
        st.string_array_value.data[:] = [widget.options[i]]
    else:
        st.double_array_value.data[:] = [float(max(widget.lo, min(int(index) + widget.lo, widget.hi)))]
    return st


def move_targets(n_positions: int, moves: int) -> list[int]:
    """Cursor positions for ``moves`` moves over a text of ``n_positions`` tokens, spread evenly and each
    different from the one before (the cursor starts at 0); empty when there is nowhere to move."""
    if n_positions < 2 or moves < 1:
        return []
    out, prev = [], 0
    for k in range(moves):
        t = max(1, min(n_positions - 1, round((k + 1) * (n_positions - 1) / moves)))
        if t == prev:
            t = prev - 1 if prev > 0 else 1
        out.append(t)
        prev = t
    return out


def element_errors(el: Any) -> str | None:
    """The message of an error shown in the page (``st.error`` alert or an exception element), else None."""
    kind = el.WhichOneof("type")
    if kind == "alert" and el.alert.format == _ALERT_ERROR:
        return el.alert.body.strip()
    if kind == "exception" and not el.exception.is_warning:
        return f"{el.exception.type}: {el.exception.message}".strip()
    return None


@dataclass
class Run:
    """What one script run sent: its ``script_finished`` status, Plotly charts, errors shown, every new
    element (``Element`` protos, in order), bytes and messages."""

    status: int | None = None
    charts: int = 0
    errors: list[str] = field(default_factory=list)
    elements: list[Any] = field(default_factory=list)
    fragments: dict[str, str] = field(default_factory=dict)
    nbytes: int = 0
    messages: int = 0

    @property
    def finished_ok(self) -> bool:
        return self.status in (_FINISHED_OK, _FINISHED_FRAGMENT_OK)

    def absorb(self, later: "Run") -> "Run":
        """This run followed by ``later`` (e.g. a fragment's runs filling in a view): counts and lists
        added, the status of the later one."""
        self.status = later.status
        self.charts += later.charts
        self.errors += later.errors
        self.elements += later.elements
        self.fragments.update(later.fragments)
        self.nbytes += later.nbytes
        self.messages += later.messages
        return self


class RunReader:
    """Folds ``ForwardMsg``s into :class:`Run` records: a run starts at ``new_session`` and ends at
    ``script_finished``. Also tracks what the browser would keep between runs: the page's script hash,
    the URL query string the app wrote (``page_info_changed``) and the fragments that asked to be rerun
    on a timer (``auto_rerun``: fragment id -> interval in seconds)."""

    def __init__(self) -> None:
        self.current = Run()
        self.page_script_hash = ""
        self.query_string = ""
        self.total_bytes = 0
        self.auto_reruns: dict[str, float] = {}

    def feed(self, data: bytes) -> Run | None:
        """Parse one websocket frame; return the finished :class:`Run` when this frame ended one."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = ForwardMsg()
        msg.ParseFromString(data)
        self.total_bytes += len(data)
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.current = Run()
            if msg.new_session.page_script_hash:
                self.page_script_hash = msg.new_session.page_script_hash
        run = self.current
        run.nbytes += len(data)
        run.messages += 1
        if kind == "navigation" and msg.navigation.page_script_hash:
            self.page_script_hash = msg.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "auto_rerun":
            self.auto_reruns[msg.auto_rerun.fragment_id] = max(0.05, float(msg.auto_rerun.interval))
        elif kind == "stop_auto_rerun":
            for fid in msg.stop_auto_rerun.fragment_ids:
                self.auto_reruns.pop(fid, None)
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            run.elements.append(el)
            if el.WhichOneof("type") == "slider" and msg.delta.fragment_id:
                run.fragments[el.slider.id] = msg.delta.fragment_id
            if el.WhichOneof("type") == "plotly_chart":
                run.charts += 1
            err = element_errors(el)
            if err:
                run.errors.append(err)
        elif kind == "script_finished":
            run.status = int(msg.script_finished)
            self.current = Run()
            return run
        return None


# ---------------------------------------------------------------- one session
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


async def _read_view(ws: Any, reader: RunReader, deadline: float, page: str = "",
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
        if run is None or run.status not in (_FINISHED_OK, _FINISHED_COMPILE_ERROR, _FINISHED_FRAGMENT_OK):
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
            run = await _read_view(ws, reader, deadline, res.view)
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
                run = await _read_view(ws, reader, deadline, res.view)
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


# ---------------------------------------------------------------- browser check
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


# ---------------------------------------------------------------- server
def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_tree(root_pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class RssMonitor:
    """Samples the summed RSS of a process and its descendants from ``/proc`` every ``interval`` seconds
    in a daemon thread; ``peak_mb`` is the largest sum seen, ``hwm_mb`` the largest ``VmHWM`` (the
    kernel's own per-process peak) of any process in the tree. Zero where ``/proc`` is not available."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid, self.interval = pid, interval
        self.peak_kb = self.hwm_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="rss-monitor")

    def _sample(self) -> None:
        pids = _proc_tree(self.pid) if os.path.isdir("/proc") else []
        self.peak_kb = max(self.peak_kb, sum(_status_kb(p, "VmRSS") for p in pids))
        self.hwm_kb = max([self.hwm_kb] + [_status_kb(p, "VmHWM") for p in pids])

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> "RssMonitor":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._sample()
        self._stop.set()
        self._thread.join(5)

    @property
    def peak_mb(self) -> float:
        return self.peak_kb / 1024

    @property
    def hwm_mb(self) -> float:
        return self.hwm_kb / 1024


def wait_for_health(base_url: str, proc: subprocess.Popen, log_path: Path, timeout: float = 180.0) -> None:
    """Poll ``base_url/_stcore/health`` (no proxy) until the server answers 200. Raises ``RuntimeError`` with
    the tail of ``log_path`` when ``proc`` exits or ``timeout`` seconds pass first."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while True:
        try:
            with opener.open(f"{base_url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = Path(log_path).read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(f"streamlit did not start at {base_url}:\n{tail}")
        time.sleep(0.3)


@contextlib.contextmanager
def app_server(port: int, log_path: Path, start_timeout: float = 180.0,
               entry: str = "serve.py", env: dict[str, str] | None = None) -> Iterator[subprocess.Popen]:
    """``streamlit run ENTRY`` (``serve.py``, the README's command, by default; ``app.py`` starts cold)
    headless on ``127.0.0.1:port`` from the repository root, stdout and
    stderr to ``log_path``; yields once ``/_stcore/health`` answers. The server runs in its own process
    group, which is always terminated (then killed) on exit. Raises ``RuntimeError`` with the log's tail when it does not come up in
    ``start_timeout`` seconds. ``env``: variables set for the server on top of this process's environment."""
    env = {**os.environ, **(env or {})}
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(k, None)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(ROOT / entry), "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            log.flush()
            wait_for_health(f"http://127.0.0.1:{port}", proc, log_path, start_timeout)
            yield proc
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen) -> None:
    """Terminate the server and anything it started (its own process group), then kill what is left."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived the server


_LOG_ERROR = re.compile(r"\bERROR\b|Traceback \(most recent call last\)")


def log_errors(text: str) -> list[str]:
    """Every ERROR line and every traceback of a server log, one string each: an ERROR line as it is; a
    traceback as the line before it (the message logged with it), ``Traceback ...`` and its last line
    (the exception)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Traceback (most recent call last)"):
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
            last = lines[j] if j < len(lines) else ""
            before = lines[i - 1] if i > 0 and not _LOG_ERROR.search(lines[i - 1]) else ""
            out.append(" | ".join(s for s in (before.strip(), line.strip(), last.strip()) if s))
            i = j + 1
            continue
        if _LOG_ERROR.search(line):
            out.append(line.strip())
        i += 1
    return out


# ---------------------------------------------------------------- the whole run
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
            t0 = time.monotonic()
            warm_errors = asyncio.run(_warm(ws_url, t0 + min(timeout, 300.0)))
            view = views[0]
            ckpt = ckpts[view][0] if ckpts[view] else None
            query = {"ckpt": f"bundled/{ckpt}"} if ckpt else {}
            query["text"] = texts[sessions]
            warm_view = SessionResult(-2, view, ckpt, "", errors=warm_errors)
            asyncio.run(run_session(warm_view, ws_url, {**query, "text": texts[sessions + 1]}, 0,
                                    time.monotonic() + min(timeout, 300.0)))  # model load, first calls
            warm_s = time.monotonic() - t0
            baseline = SessionResult(-1, view, ckpt, f"{base}/{view}?{urlencode(query)}",
                                     errors=warm_view.errors)
            asyncio.run(run_session(baseline, ws_url, query, moves, time.monotonic() + min(timeout, 300.0)))

        async def everything() -> tuple[list[SessionResult], list[BrowserResult]]:
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

        t0, c0 = time.monotonic(), time.process_time()
        done, browsers = asyncio.run(everything())
        wall, client_cpu = time.monotonic() - t0, time.process_time() - c0
        monitor.stop()
        stack.close()  # stops the server before its log is read
        text = Path(log_path).read_text(encoding="utf-8", errors="replace")
    return LoadResult(done, browsers, server_up, warm_s, wall, monitor.peak_mb, monitor.hwm_mb,
                      log_errors(text), chars, moves, baseline, together, client_cpu)


async def _warm(ws_url: str, deadline: float) -> list[str]:
    """Open Home once and wait for its run to finish; returns the errors it showed (or met)."""
    from websockets.asyncio.client import connect

    try:
        async with connect(ws_url, subprotocols=["streamlit"], max_size=None, proxy=None,
                           ping_interval=None, close_timeout=2) as ws:
            await ws.send(rerun_backmsg(page_name=""))
            run = await _read_view(ws, RunReader(), deadline, want_chart=False)
            return [f"Home: {e}" for e in run.errors]
    except Exception as exc:  # noqa: BLE001 - recorded
        return [f"Home: {type(exc).__name__}: {exc}"]


def _fmt(v: float | None, unit: str = " s") -> str:
    return "–" if v is None else f"{v:.2f}{unit}"


def report(r: LoadResult) -> str:
    """The printed summary of a :class:`LoadResult`."""
    n = len(r.sessions)
    fv, mv = r.first_views, r.move_times
    lines = [f"load: {n} sessions, {r.chars} characters each, {r.moves} cursor moves"
             f"{' (in rounds, all sessions together)' if r.together else ''}; server up in "
             f"{r.server_up_s:.1f} s" + (f", warm-up {r.warmup_s:.1f} s" if r.warmup_s is not None else "")
             + f"; load phase {r.wall_s:.1f} s (client CPU {r.client_cpu_s:.1f} s)"]
    b = r.baseline
    alone_f = b.first_view_s if b else None
    alone_m = percentile(b.move_s, 50) if b else None

    def ratio(v: float | None, ref: float | None) -> str:
        return f"   = {v / ref:.1f}x alone" if v is not None and ref else ""

    if b is not None:
        lines.append(f"alone        first view {_fmt(alone_f)}, move median {_fmt(alone_m)} (one session on "
                     f"{b.view}, {b.ckpt or 'app default'}, before the load)")
    lines += [f"first view   {len(fv)}/{n}   median {_fmt(percentile(fv, 50))}   p95 {_fmt(percentile(fv, 95))}"
              f"   max {_fmt(max(fv) if fv else None)}{ratio(percentile(fv, 50), alone_f)}",
              f"cursor move  {len(mv)}/{n * r.moves}   median {_fmt(percentile(mv, 50))}   "
              f"p95 {_fmt(percentile(mv, 95))}   max {_fmt(max(mv) if mv else None)}"
              f"{ratio(percentile(mv, 50), alone_m)}"]
    by_view: dict[tuple[str, str | None], list[SessionResult]] = {}
    for s in r.sessions:
        by_view.setdefault((s.view, s.ckpt), []).append(s)
    for (view, ckpt), ss in by_view.items():
        f = [s.first_view_s for s in ss if s.first_view_s is not None]
        m = [t for s in ss for t in s.move_s]
        charts = sorted({s.first_charts for s in ss if s.first_view_s is not None})
        pos = sorted({s.positions for s in ss if s.positions})
        lines.append(f"  {view:<13} {ckpt or '(app default)':<36} first {len(f)}/{len(ss)} median "
                     f"{_fmt(percentile(f, 50))}, move median {_fmt(percentile(m, 50))}, charts "
                     f"{charts or '–'}, cursor positions {pos or '–'}")
    total = sum(s.bytes for s in r.sessions)
    per_first = [s.bytes for s in r.sessions]
    lines.append(f"received     {total / 1e6:.1f} MB in all; median per session "
                 f"{(percentile(per_first, 50) or 0) / 1e6:.2f} MB (decompressed protobuf frames)")
    lines.append(f"server RSS   peak {r.peak_rss_mb:.0f} MB (process tree, sampled), VmHWM {r.hwm_mb:.0f} MB")
    if r.browsers:
        bt = [b.first_chart_s for b in r.browsers if b.first_chart_s is not None]
        same = [s.first_view_s for s in r.sessions[:len(r.browsers)] if s.first_view_s is not None]
        bp = [b.protocol_s for b in r.browsers if b.protocol_s is not None]
        lines.append(f"chromium     {len(bt)}/{len(r.browsers)} pages: first .js-plotly-plot median "
                     f"{_fmt(percentile(bt, 50))}; its websocket's first view median {_fmt(percentile(bp, 50))}"
                     f" (protocol sessions on the same URLs: median {_fmt(percentile(same, 50))})")
        for b, s in zip(r.browsers, r.sessions):
            lines.append(f"  {s.view:<13} chromium: chart drawn {_fmt(b.first_chart_s)}, script_finished "
                         f"{_fmt(b.protocol_s)}   protocol session {_fmt(s.first_view_s)}")
    errs = r.page_errors
    lines.append(f"page errors  {len(errs)}")
    lines += [f"  {e}" for e in errs]
    lines.append(f"server log   {len(r.log_errors)} ERROR/Traceback entries")
    lines += [f"  {e}" for e in r.log_errors]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="geomlab bench load", description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=3, help="concurrent protocol sessions (default 3)")
    p.add_argument("--views", nargs="+", default=list(DEFAULT_VIEWS),
                   help=f"view pages, round-robin (default: {' '.join(DEFAULT_VIEWS)}; commas also work)")
    p.add_argument("--moves", type=int, default=3, help="cursor moves per session (default 3)")
    p.add_argument("--chars", type=int, default=512, help="characters of text per session (default 512)")
    p.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    p.add_argument("--browser", type=int, default=0,
                   help="also open this many chromium pages on the first sessions' URLs (default 0)")
    p.add_argument("--timeout", type=float, default=900.0,
                   help="wall-clock limit of the load phase in seconds (default 900)")
    p.add_argument("--together", action="store_true",
                   help="move the cursors in rounds that all sessions start at once (after every first view)")
    p.add_argument("--ramp", type=float, default=0.0, help="seconds between session starts (default 0)")
    p.add_argument("--rotate", action="store_true",
                   help="cycle each view's sessions through all its bundled checkpoints (default: the first)")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the Home visit and the one-session baseline before the load")
    p.add_argument("--log", type=Path, default=None, help="keep the server log at this path")
    p.add_argument("--entry", default="serve.py", choices=("serve.py", "app.py"),
                   help="what `streamlit run` starts (default serve.py: warm at start; app.py warms up with the "
                        "first visitor)")
    args = p.parse_args(argv)
    views = [v for item in args.views for v in item.split(",") if v]
    # a SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the server is always stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = run_load(args.sessions, views, moves=args.moves, chars=args.chars, port=args.port,
                          browser=args.browser, timeout=args.timeout, warmup=not args.no_warmup,
                          rotate=args.rotate, ramp=args.ramp, together=args.together, log_path=args.log,
                          entry=args.entry)
    except (ValueError, RuntimeError) as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 2
    print(report(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
