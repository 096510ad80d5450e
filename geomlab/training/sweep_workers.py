"""The workers of one sweep: who a worker is (:class:`Worker`: host, pid, a random id), the sampler seed each
derives (:func:`register`), and the trials a dead worker left ``RUNNING`` (:func:`recover_stale`).

* **Sampler seeds**: every worker registers on the study (a study user attribute of its own, marked ended when
  it ends). A worker that finds no other registered worker seeds its sampler with ``--sampler-seed`` as
  given (a single worker stays reproducible); any other derives ``sha256("BASE:WORKER_ID")`` (first 4 bytes),
  so two workers started with the same seed never propose the same sequence. Each worker writes its record
  before reading the others', so of two starting together at least one sees the other (design choice).
* **Stale trials**: each trial records its worker (``worker`` user attribute: host, pid, the process's start
  time where the system tells it). At start a worker fails every ``RUNNING`` trial of a worker on the same
  host whose process is gone (or whose pid now belongs to a process started later) and enqueues it again with
  the same parameters (Optuna's ``RetryHeartbeatStaleTrialCallback``, so ``failed_trial`` / ``retry_history`` system
  attributes say what it retries). A database storage also has Optuna's heartbeat
  (:func:`geomlab.training.sweep_study.open_storage`): there a trial of a dead worker on another machine is
  failed and retried after the grace period. A journal file has no heartbeat: a dead worker's trials on
  another machine are recovered when a worker starts on that machine.

Source: Optuna's heartbeat and ``RetryHeartbeatStaleTrialCallback`` (optuna.storages); the rest is a design choice.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

#: Prefix of the study user attributes that register live workers.
WORKER_ATTR = "worker:"
#: How many times one trial is retried after its worker died.
MAX_RETRY = 3


def _proc_start(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Worker:
    """This process as a sweep worker: ``host``, ``pid``, ``start`` (the process's start time, or None) and a
    random ``id`` (unique per worker, also across machines)."""

    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    start: int | None = field(default_factory=lambda: _proc_start(os.getpid()))
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def record(self) -> dict[str, Any]:
        """What a trial and the study store of this worker (JSON)."""
        return {"host": self.host, "pid": self.pid, "start": self.start, "id": self.id}


def is_gone(rec: Any, host: str | None = None) -> bool:
    """Whether the worker of ``rec`` (a :meth:`Worker.record`) is known dead: it ran on this host (``host``,
    default this machine's name) and its pid is no longer running, or runs a process started at another time
    (the pid reused). False when it cannot be told (another host, a malformed record)."""
    if not isinstance(rec, dict) or rec.get("host") != (host or socket.gethostname()):
        return False
    pid = rec.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by another user
        return False
    start = rec.get("start")
    now = _proc_start(pid)
    return start is not None and now is not None and now != start


def derive_seed(base: int, worker_id: str) -> int:
    """A 32-bit sampler seed from the base seed and a worker id: ``sha256(f"{base}:{worker_id}")``, first 4
    bytes big-endian (design choice)."""
    return int.from_bytes(hashlib.sha256(f"{base}:{worker_id}".encode()).digest()[:4], "big")


def register(study, worker: Worker, base_seed: int | None) -> tuple[int | None, str | None]:
    """Register ``worker`` on ``study`` and return ``(sampler seed, note)``: ``base_seed`` when no other live
    worker is registered (or ``base_seed`` is None), else :func:`derive_seed`; ``note`` a line saying so
    (None when the seed is the base). Ended registrations and those of dead workers on this host are not
    counted."""
    study.set_user_attr(WORKER_ATTR + worker.id, {**worker.record(), "since": time.time()})
    others = [k for k, v in study.user_attrs.items() if k.startswith(WORKER_ATTR) and k != WORKER_ATTR + worker.id
              and isinstance(v, dict) and "ended" not in v and not is_gone(v)]
    if base_seed is None or not others:
        return base_seed, None
    seed = derive_seed(base_seed, worker.id)
    return seed, (f"  {len(others)} other worker(s) on this study: this worker's sampler seed is {seed}, derived "
                  f"from --sampler-seed {base_seed} and its id {worker.id[:8]} (no duplicate proposals)")


def unregister(study, worker: Worker) -> None:
    """Mark ``worker``'s registration ended (at its end: Optuna cannot delete a study attribute; errors of a
    storage gone away are ignored)."""
    import contextlib

    with contextlib.suppress(Exception):
        study.set_user_attr(WORKER_ATTR + worker.id, {**worker.record(), "ended": time.time()})


def retry_callback(max_retry: int = MAX_RETRY):
    """Optuna's callback that enqueues a failed trial again with its parameters (at most ``max_retry`` times
    for one trial), its "experimental" warning silenced."""
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry)


def recover_stale(study, host: str | None = None, max_retry: int = MAX_RETRY) -> list[int]:
    """Fail every ``RUNNING`` trial of ``study`` whose worker is gone (:func:`is_gone`) and enqueue it again
    with the same parameters (at most ``max_retry`` retries of one trial). Returns the failed trials'
    numbers. Source: Optuna's ``RetryHeartbeatStaleTrialCallback``."""
    import optuna
    from optuna.trial import TrialState

    retry = retry_callback(max_retry)
    failed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not is_gone(t.user_attrs.get("worker"), host):
            continue
        try:
            study._storage.set_trial_user_attr(t._trial_id, "error", "its worker died (failed at a worker's start)")
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
        except (RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another worker failed it first
        retry(study, study._storage.get_trial(t._trial_id))
        failed.append(t.number)
    return failed
