"""The app's background training runs: the server's table of live runs (:class:`RunRegistry`, one per
process: :data:`REGISTRY`; :func:`held_before` for a run a restarted server no longer holds, :func:`wait_for`
for tests and notebooks), the folder of a run's TensorBoard logs (:func:`tensorboard_dir`), and the names the
Train live page uses, gathered here: a run (:class:`geomlab.live.run.LiveRun`), its progress
(:class:`geomlab.live.snapshot.Snapshot`), what the app offers (:mod:`geomlab.live.offer`) and the run spec
(:mod:`geomlab.training.runs`). Nothing here imports streamlit.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

from geomlab.live.offer import BUDGETS, SYNTHETIC_TASKS, corpus_availability, default_threads  # noqa: F401
from geomlab.live.run import LiveError, LiveRun, build_task  # noqa: F401 (the app's names)
from geomlab.live.snapshot import ACTIVE_STATES, STATES, Snapshot  # noqa: F401 (the app's names)
from geomlab.training.runs import (  # noqa: F401 (the app's names)
    RunError, RunSpec, check_device, is_osm,
)


def tensorboard_dir(spec: RunSpec) -> Path:
    """A new folder for a live run's TensorBoard logs: ``<runs>/tensorboard/<UTC start time>-<kind>-<4 hex>``
    (design choice: ``tensorboard --logdir <runs>/tensorboard`` lists the app's runs by start time and kind;
    the catalog ignores the folder, which holds no checkpoints)."""
    from geomlab.checkpoints import catalog

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return catalog.runs_dir() / "tensorboard" / f"{stamp}-{catalog.safe_name(spec.kind)}-{uuid.uuid4().hex[:4]}"


class RunRegistry:
    """Process-wide table of live runs (the app keeps one run id per browser session).

    ``max_active`` limits how many runs train at once on this server (design choice: 2, so a shared
    CPU stays usable). The limit is checked inside the registry's lock at the moment a run becomes active
    (:meth:`LiveRun.start` / :meth:`LiveRun.resume` of a run made by :meth:`create`), so concurrent
    sessions can never exceed it; :meth:`create` also refuses early when the limit is already reached.
    Both raise :class:`LiveError`.
    """

    def __init__(self, max_active: int = 2):
        self.max_active = max_active
        self._runs: dict[str, LiveRun] = {}
        self._lock = threading.Lock()
        self._counter = itertools.count(1)

    def create(self, spec: RunSpec, **kwargs) -> LiveRun:
        """Build (not start) a run for ``spec``; raises :class:`LiveError`/``ValueError`` for bad specs.
        ``owner=`` (passed on to :class:`LiveRun`): the session that may change the run."""
        with self._lock:
            self._check_room()
        run = LiveRun(spec, **kwargs)  # builds the task and the model: outside the lock
        run._registry = self
        with self._lock:
            self._runs[run.run_id] = run
        return run

    def _check_room(self, exclude: LiveRun | None = None) -> None:
        """:class:`LiveError` when ``max_active`` runs (other than ``exclude``) are training. Call with
        ``self._lock`` held."""
        active = sum(1 for r in self._runs.values() if r is not exclude and r.state in ACTIVE_STATES)
        if active >= self.max_active:
            raise LiveError(f"{active} runs are already training on this server; stop one first "
                            "(or wait for it to finish)")

    def get(self, run_id: str | None) -> LiveRun | None:
        """The run with ``run_id`` or None."""
        if not run_id:
            return None
        with self._lock:
            return self._runs.get(run_id)

    def runs(self) -> list[LiveRun]:
        """Every run held by this server, in creation order."""
        with self._lock:
            return list(self._runs.values())

    def recent(self, limit: int = 10) -> list[LiveRun]:
        """The ``limit`` most recently created runs held by this server, newest first. A new browser
        session (a page reload) uses this to re-attach to a run it started before (design choice: runs
        live as long as the server process, so nothing is lost on a reload)."""
        with self._lock:
            runs = list(self._runs.values())
        return sorted(runs, key=lambda r: r.created_at, reverse=True)[:max(0, int(limit))]

    def forget(self, run_id: str, *, by: str | None = None) -> None:
        """Drop a run that is not training (its files stay on disk). :class:`LiveError` for a caller ``by``
        that may not change the run."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                run._check_owner(by, "removed")
            if run is not None and run.state in ACTIVE_STATES:
                raise LiveError("stop the run before removing it")
            self._runs.pop(run_id, None)


#: The registry the app uses (one per server process).
REGISTRY = RunRegistry()


def held_before(run_id: str) -> bool:
    """Whether a run with this id once worked on this machine: its working folder ``<runs>/.live/<run_id>``
    is still there (a server restart empties :data:`REGISTRY` but leaves the files). Only the ids this module
    makes (10 lower-case hex digits) are looked up, so a link's value never names another path. Design
    choice: tells a restarted server's run from an id that never existed."""
    import re

    from geomlab.checkpoints import catalog

    return bool(re.fullmatch(r"[0-9a-f]{10}", run_id or "")) and (catalog.runs_dir() / ".live" / run_id).is_dir()


def wait_for(run: LiveRun, predicate: Callable[[Snapshot], bool], timeout: float = 60.0,
             poll: float = 0.05) -> Snapshot:
    """Poll ``run.snapshot()`` until ``predicate`` holds; returns the snapshot. ``TimeoutError`` otherwise.
    (For tests and notebooks.)"""
    end = time.monotonic() + timeout
    while True:
        snap = run.snapshot()
        if predicate(snap):
            return snap
        if time.monotonic() > end:
            raise TimeoutError(f"run {run.run_id} still {snap.state} at step {snap.step} after {timeout} s")
        time.sleep(poll)
