"""A real ``redis-server`` (Debian's package) on a free local port for the rooms tests, without persistence;
skipped with a reason when the binary is missing (CI installs it, see .ci/run)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process: ``url``, ``stop()`` (kill it), ``start()`` (again on the same port)."""

    def __init__(self, tmp_path):
        self.binary = shutil.which("redis-server")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tmp_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def redis_server(tmp_path):
    """A started :class:`RedisServer`, killed after the test."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()
