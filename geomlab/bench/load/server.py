"""The app server under load: ``streamlit run`` in its own process group on a free loopback port, waited for
until healthy and always stopped; the resident memory of its process tree sampled from ``/proc``; the
ERROR lines and tracebacks of its log. Source: design choice."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from geomlab.core.locate import APP_DIR

ROOT = APP_DIR  # app.py, serve.py and assets/, in the repository or installed (geomlab.core.locate)


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
               entry: str = "serve.py", env: dict[str, str] | None = None,
               root: Path | None = None) -> Iterator[subprocess.Popen]:
    """``streamlit run ENTRY`` (``serve.py``, the README's command, by default; ``app.py`` starts cold)
    headless on ``127.0.0.1:port`` from the repository root, stdout and
    stderr to ``log_path``; yields once ``/_stcore/health`` answers. The server runs in its own process
    group, which is always terminated (then killed) on exit. Raises ``RuntimeError`` with the log's tail when it does not come up in
    ``start_timeout`` seconds. ``env``: variables set for the server on top of this process's environment.
    ``root``: another checkout of the app to serve (e.g. an earlier commit, a benchmark's baseline), its
    own ``geomlab`` first on the path; default: this one."""
    env = {**os.environ, **(env or {})}
    root = Path(root) if root is not None else ROOT
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(k, None)
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(root / entry), "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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

