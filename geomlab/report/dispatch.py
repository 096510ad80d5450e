"""A campaign's runs through a job scheduler: submitit (https://github.com/facebookincubator/submitit) runs each
run as a job, on this machine (its local executor: one process per run) or on a SLURM cluster (the same
command on the cluster's login node). :func:`dispatch` keeps up to ``parallel`` runs in flight, submitting the
next ready run of :func:`geomlab.report.campaign.jobs` as one finishes, until none is left.

Resumable as the store is: every run checkpoints every ``eval_every`` steps, so stopping the dispatcher (and
its runs) and starting it again resumes each unfinished run from its checkpoint; a run that a live process
still trains (its lock, :meth:`geomlab.report.store.RunStore.held`) is not submitted twice. Source: design
choice."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from geomlab.core.extras import require
from geomlab.report.campaign import Campaign, blocked, jobs
from geomlab.report.store import RunStore
from geomlab.report.worker import run_job

#: The executors :func:`executor` makes: submitit's cluster names.
CLUSTERS = ("local", "slurm", "debug")


def executor(cluster: str, folder: str | Path, threads: int = 1, timeout_min: int = 24 * 60,
             slurm: dict[str, Any] | None = None):
    """A submitit executor: ``cluster`` ``"local"`` (a process per run on this machine), ``"slurm"`` (a SLURM
    job per run, ``slurm``: extra ``slurm_*`` parameters such as ``{"slurm_partition": "cpu"}``) or
    ``"debug"`` (in this process; tests). Logs and submitit's files go to ``folder``. Raises ``ValueError``
    for an unknown cluster or one submitit cannot reach from here (SLURM without ``srun``), and
    :class:`geomlab.core.extras.MissingExtra` (one line) without submitit."""
    if cluster not in CLUSTERS:
        raise ValueError(f"--executor {cluster!r}: use one of {', '.join(CLUSTERS)}")
    submitit = require("submitit", "dispatching the campaign's runs")
    try:
        ex = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    except RuntimeError as exc:  # e.g. no `srun` here: not a SLURM login node
        raise ValueError(f"--executor {cluster}: {str(exc).strip().splitlines()[0][:200]}") from None
    params: dict[str, Any] = {"timeout_min": int(timeout_min)}
    if cluster == "slurm":
        params.update(cpus_per_task=int(threads), **(slurm or {}))
    ex.update_parameters(**params)
    return ex


def dispatch(campaign: Campaign, store: RunStore, ex, parallel: int = 1, only: tuple[str, ...] | None = None,
             device: str = "cpu", threads: int = 1, nice: int = 19, max_jobs: int | None = None,
             poll_s: float = 5.0, log: Callable[[str], None] = print, deadline: float | None = None,
             cost: Callable[[Any], float] | None = None, progress: Callable[[Any], float] | None = None) -> int:
    """Run the campaign's runs through executor ``ex`` (:func:`executor`), at most ``parallel`` at a time, each
    with ``threads`` torch threads at ``nice`` priority on ``device``, until no run is left (or ``max_jobs``
    were submitted).

    With a ``deadline`` (a ``time.time()`` value; a machine lent for a few hours, a cluster allocation's time
    limit) and ``cost`` (a job's expected seconds, e.g. :func:`geomlab.report.plan.seconds_left` with a
    margin), the ready runs expected to finish by then are submitted first; a free slot left then takes a run
    that will not finish but is expected to reach its next checkpoint by then (``progress``: a job's expected
    seconds to it, e.g. :func:`geomlab.report.plan.seconds_to_checkpoint`; without it, none), so runs longer
    than a session still advance. At the deadline the runs in flight are stopped (each resumes from its last
    checkpoint next time) and the dispatcher returns; it returns earlier once its runs finished and none fits.

    A run whose job raised (a bad checkpoint, a missing corpus, a killed job) is logged and not submitted again
    by this dispatcher; a diverged run is an outcome, not an error. When the dispatcher itself stops (an
    interrupt, an error) it cancels its runs in flight, which submitit would otherwise leave running; each
    resumes from its checkpoint next time. Returns the number of runs that finished here. Source: design
    choice."""
    running: dict[str, Any] = {}
    broken: set[str] = set()
    submitted = finished = 0
    try:
        while True:
            for key, sj in list(running.items()):
                if not sj.done():
                    continue
                del running[key]
                try:
                    finished += sj.result() is not None
                    log(f"[dispatch] {key}: finished")
                except Exception as exc:  # the job's own error (submitit re-raises it here): say so, go on
                    broken.add(key)
                    log(f"[dispatch] {key}: failed ({type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}); "
                        "not submitted again by this dispatcher")
            if deadline is not None and running and time.time() >= deadline:
                log(f"[dispatch] the deadline: stopping {len(running)} run(s) in flight; each resumes from its "
                    "last checkpoint next time")
                _cancel(running)
                return finished
            room = parallel - len(running)
            ready = [] if room <= 0 or (max_jobs is not None and submitted >= max_jobs) else [
                j for j in jobs(campaign, store, only) if j.key not in running and j.key not in broken
                and not store.held(j)]
            late, partial = False, set()
            if deadline is not None and cost is not None and ready:
                now = time.time()
                fits = [j for j in ready if now + cost(j) <= deadline]
                if progress is not None:
                    partial = {j.key for j in ready if j not in fits and now + progress(j) <= deadline}
                late, ready = not fits and not partial, fits + [j for j in ready if j.key in partial]
            ready = ready[:room]
            for j in ready[:None if max_jobs is None else max_jobs - submitted]:
                with _stderr_to(Path(getattr(ex, "folder", store.root)) / "controllers.log"):
                    running[j.key] = ex.submit(run_job, campaign, str(store.root), j, device, threads, nice)
                submitted += 1
                log(f"[dispatch] {j.key}: submitted ({getattr(running[j.key], 'job_id', '?')}"
                    + ("; it will not finish before the deadline: it trains until then and resumes from its last "
                       "checkpoint next time" if j.key in partial else "") + ")")
            if not running:
                if late or (deadline is not None and time.time() >= deadline):
                    log("[dispatch] no run left is expected to finish before the deadline: stopping")
                    return finished
                if ready or (blocked(campaign, store, only) and not broken and max_jobs is None):
                    time.sleep(poll_s)  # other processes hold runs this campaign waits on
                    continue
                return finished
            time.sleep(poll_s)
    except BaseException:  # Ctrl-C, SIGTERM (the command makes it KeyboardInterrupt), an error of its own
        _cancel(running)
        raise


@contextmanager
def _stderr_to(path: Path):
    """Standard error (file descriptor 2) appended to ``path`` for the block: a process started in it inherits
    that file. submitit's local job controller writes a KeyboardInterrupt traceback when a job is cancelled;
    this keeps it in the executor's folder, beside the jobs' own logs, out of the dispatcher's output."""
    sys.stderr.flush()
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    try:
        with open(path, "ab") as f:
            os.dup2(f.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _cancel(running: dict[str, Any]) -> None:
    """Stop submitit's jobs in flight: they outlive their submitter (each resumes from its checkpoint later)."""
    for sj in running.values():
        try:
            sj.cancel()
        except Exception:  # noqa: BLE001 - a job that ended meanwhile
            pass
