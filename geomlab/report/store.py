"""The converged campaign's store: its runs (:class:`Job`, named by :attr:`Job.key`) and one folder per run
(:class:`RunStore`), shared by every worker."""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geomlab.core.jsonread import read_json
from geomlab.core.writes import write_atomic
from geomlab.report.protocol import Arm, Comparison


def slug(text: str) -> str:
    """A folder-safe name for an arm label (lower case, ``[a-z0-9-]``)."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")


@dataclass(frozen=True)
class Job:
    """One training run of the campaign: comparison ``comp``, ``arm``, ``phase`` (``tune`` or ``full``),
    ``lr``, ``warmup``, ``seed``, ``steps`` and ``reg`` (AdamW weight decay, dropout probability); :attr:`key` is
    its folder in the store (a run without regularisation has no ``-wd..-do..`` part in its key)."""

    comp: Comparison
    arm: Arm
    phase: str
    lr: float
    warmup: float
    seed: int
    steps: int
    reg: tuple[float, float] = (0.0, 0.0)

    @property
    def key(self) -> str:
        reg = f"-wd{self.reg[0]:g}-do{self.reg[1]:g}" if any(self.reg) else ""
        return (f"{self.comp.key}/{slug(self.arm.label)}/{self.phase}-{self.steps}/"
                f"lr{self.lr:g}-wu{self.warmup:g}{reg}-seed{self.seed}")


class RunStore:
    """A folder of campaign runs: ``ROOT/<job key>/`` holds the run's resumable checkpoint (``ckpt/``, a
    :mod:`geomlab.checkpoints.io` folder), ``outcome.json`` once it finished (or diverged), ``cpu.json`` (process
    CPU seconds so far) and ``lock``, which a worker training the run holds locked (``flock``: POSIX only;
    workers on one machine, or on a file system whose ``flock`` spans machines). Raises ``OSError`` when the
    folder cannot be written."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._fds: dict[str, int] = {}  # the lock files this process holds, by job key

    def folder(self, job: Job) -> Path:
        return self.root / job.key

    def outcome(self, job: Job) -> dict[str, Any] | None:
        """The finished run's outcome (``status`` ``done`` or ``failed``), or ``None`` (also for a file that is
        unreadable, too large, too deep, not JSON or not a JSON object: not finished)."""
        f = self.folder(job) / "outcome.json"
        if not f.is_file():
            return None
        try:
            done = read_json(f)
        except (OSError, ValueError):
            return None
        return done if isinstance(done, dict) else None

    def held(self, job: Job) -> bool:
        """Whether a live worker holds ``job``: an advisory lock (``flock``) on its ``lock`` file, which the
        system drops when the holding process ends, however it ends (so no lock outlives its worker)."""
        if job.key in self._fds:
            return True
        try:
            fd = os.open(self.folder(job) / "lock", os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing also drops a lock taken just now
        return False

    def acquire(self, job: Job) -> bool:
        """Take ``job`` for this process: ``False`` when a live worker holds it, or when it finished meanwhile
        (its ``outcome.json`` is there). The lock is held until :meth:`release` or the end of the process."""
        folder = self.folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / "lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fds[job.key] = fd
        if self.outcome(job) is not None:
            self.release(job)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{socket.gethostname()} {os.getpid()} {time.time():.0f}\n".encode())  # for people only
        return True

    def release(self, job: Job) -> None:
        fd = self._fds.pop(job.key, None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def step(self, job: Job) -> int:
        """The step of the run's last checkpoint (0 when it has none)."""
        from geomlab.checkpoints import io as checkpoint

        try:
            return int((checkpoint.read_meta(self.folder(job) / "ckpt").get("card") or {}).get("steps") or 0)
        except (ValueError, OSError, TypeError):
            return 0

    def cpu_so_far(self, job: Job) -> float:
        try:
            return float(read_json(self.folder(job) / "cpu.json")["cpu_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0.0

    def write(self, job: Job, name: str, data: dict[str, Any]) -> None:
        write_atomic(self.folder(job) / name, json.dumps(data, default=float), "run record")
