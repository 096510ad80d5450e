"""A sweep's Optuna study: where it is stored (:func:`open_storage`), creating or resuming it
(:func:`open_study`), running its trials (:func:`optimize`) and the study as JSON (:func:`summary`).

* **A diverged trial** (:class:`geomlab.training.trainer.TrainingError`: a non-finite loss, gradient or weight) and a
  trial whose searched config the kind refuses (``ValueError``, e.g. no width meets the budget) end as
  Optuna ``PRUNED`` with the reason in the user attribute ``error`` (the summary calls them ``diverged`` /
  ``invalid``); the sweep goes on. Pruned rather than failed so that TPE counts them as worse than every
  finished trial and moves away from them (Optuna ignores failed trials; design choice).
* **Storage** (:func:`open_storage`): a file path is an Optuna journal (``JournalFileBackend``, one
  append-only log guarded by a lock file): several processes on one machine, or machines sharing a folder
  (NFS), can work on one study. SQLite is not the default because Optuna does not recommend it for
  parallel workers (its database lock makes concurrent writers fail with "database is locked"). A URL
  (``sqlite:///x.db``, ``postgresql://...``, ``mysql://...``) is an SQLAlchemy database
  (``optuna.storages.RDBStorage``, with a heartbeat so a killed worker's trial is marked failed and retried).
* **Resuming**: a study is created once and loaded afterwards (``load_if_exists``); its setup (kind, task,
  budget, fixed keys, seeds, search space, metric) is stored on the study and a different setup under the
  same name is refused, so trials of different experiments never mix.

Sources: Optuna (Akiba et al., KDD 2019: define-by-run studies); everything else here is a design choice.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from geomlab.core.extras import require
from geomlab.core.jsonread import MAX_JSON_DEPTH, JSONInputError, parse_json, read_limited
from geomlab.training.sweep_space import Dimension, SweepError, edges
from geomlab.training.sweep_workers import retry_callback
from geomlab.training.trainer import TrainingError


# ------------------------------------------------------------------------------------------------ storage
#: A database storage's heartbeat: seconds between a running trial's beats, and the silence after which
#: another worker fails the trial and enqueues it again (Optuna's ``RetryHeartbeatStaleTrialCallback``).
HEARTBEAT_S, GRACE_S = 60, 120


def open_storage(storage: str | Path | None):
    """An Optuna storage: ``None`` -> in memory (nothing written); a URL with ``://`` -> ``RDBStorage``
    (SQLAlchemy: ``sqlite:///runs/x.db``, ``postgresql://user@host/db``, ...; heartbeat :data:`HEARTBEAT_S`,
    so a trial of a killed worker is marked failed after :data:`GRACE_S` and enqueued again); anything else ->
    a journal file at that path (``JournalStorage(JournalFileBackend(path, JournalFileOpenLock))``; its folder is created).

    Raises :class:`SweepError` (one line) when the database cannot be opened (unknown dialect, missing
    driver, unreachable server), or when the journal path is not a regular file (a FIFO is never opened: that
    would wait for a writer forever) or its records are not an Optuna journal's (naming the file)."""
    optuna = require("optuna", "a sweep")

    if storage is None:
        return optuna.storages.InMemoryStorage()
    text = str(storage)
    if "://" in text:
        import warnings

        try:
            with warnings.catch_warnings():  # Optuna marks the heartbeat "experimental"
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    text, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                    heartbeat_stale_trial_callback=retry_callback())
        except Exception as exc:  # sqlalchemy's ArgumentError / NoSuchModuleError / OperationalError, a driver
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise SweepError(f"cannot open the storage {text}: {reason}") from None
    from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

    path = Path(text)
    if path.exists() and not path.is_file():  # opening a FIFO blocks until a writer comes: refused, never opened
        raise SweepError(f"the storage {path} is not a regular file (a folder, FIFO or device); give the path of "
                         "a journal file, or a database URL")
    path.parent.mkdir(parents=True, exist_ok=True)
    check_journal(path)
    with read_journal(path):  # the journal is read (replayed) here, and again when the study is made
        journal = optuna.storages.JournalStorage(JournalFileBackend(str(path), JournalFileOpenLock(str(path))))
    journal.geomlab_path = str(path)  # for open_study's message
    return journal


@contextlib.contextmanager
def read_journal(path: str | Path | None):
    """Turn an error of Optuna replaying the journal file ``path`` (its records are not JSON, not UTF-8, or not
    an Optuna journal's) into one :class:`SweepError` naming the file; ``path`` None (not a journal) changes
    nothing. Design choice: Optuna takes a damaged last line for a write in progress, so a damaged journal may
    only fail when the study is made, after the next record is written: both places are covered."""
    try:
        yield
    except SweepError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, AssertionError) as exc:
        if path is None:
            raise
        reason = (str(exc).strip().splitlines() or [""])[0][:200] or type(exc).__name__
        raise SweepError(f"the storage {path} is not an Optuna journal ({type(exc).__name__}: {reason}); give "
                         "another --storage, or move this file away to start the study afresh") from None


#: Largest journal file read (bytes; design choice: a trial adds a few KB).
MAX_JOURNAL_BYTES = 256 * 1024 * 1024


def check_journal(path: Path) -> None:
    """Check an existing Optuna journal file before Optuna reads it: a regular file (opened without
    blocking, so a FIFO never hangs) of at most :data:`MAX_JOURNAL_BYTES`, each complete line a JSON object
    with an integer ``op_code`` (every Optuna journal record has one) within
    :func:`geomlab.core.jsonread.parse_json`'s limits (a last line without its newline is a write cut short,
    which Optuna skips). Lines are read one at a time and the first bad one stops the check, so a large file
    of garbage is refused at once; a line with at most :data:`~geomlab.core.jsonread.MAX_JSON_DEPTH` brackets
    cannot nest deeper and is parsed directly (an Optuna record holds a few). A missing file is fine (a new
    journal). :class:`SweepError` naming the file (and the line) otherwise."""
    try:
        data = read_limited(path, MAX_JOURNAL_BYTES)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SweepError(f"cannot read the study journal {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_JOURNAL_BYTES:
        raise SweepError(f"the study journal {path} is larger than {MAX_JOURNAL_BYTES / 2**20:.0f} MiB")
    for i, line in enumerate(io.BytesIO(data), 1):
        if not line.endswith(b"\n"):
            break  # a write cut short: Optuna skips it
        if not line.strip():
            continue
        try:
            if line.count(b"[") + line.count(b"{") <= MAX_JSON_DEPTH:
                entry = json.loads(line)
            else:
                entry = parse_json(line, f"line {i}")
        except JSONInputError as exc:
            raise SweepError(f"the study journal {path} is not an Optuna journal: {exc}") from None
        except ValueError as exc:  # json's own error (not JSON, not UTF-8)
            raise SweepError(f"the study journal {path} is not an Optuna journal: line {i} is not JSON "
                             f"({str(exc)[:80]})") from None
        op = entry.get("op_code") if isinstance(entry, dict) else None
        if isinstance(op, bool) or not isinstance(op, int):
            raise SweepError(f"the study journal {path} is not an Optuna journal: line {i} is not a record "
                             "(a JSON object with an integer op_code)")


def open_study(storage, study_name: str, direction: str, setup: dict[str, Any] | None = None, *,
               sampler=None, pruner=None):
    """Create study ``study_name`` in ``storage`` (from :func:`open_storage`) or load it when it exists.

    ``setup`` (JSON-able) is stored on a new study (user attribute ``setup``); loading a study whose stored
    setup or direction differs raises :class:`SweepError` naming the differing fields (trials of another
    experiment are never mixed in)."""
    optuna = require("optuna", "a sweep")

    with read_journal(getattr(storage, "geomlab_path", None)):
        study = optuna.create_study(storage=storage, study_name=study_name, direction=direction, sampler=sampler,
                                    pruner=pruner, load_if_exists=True)
    if study.direction.name.lower() != direction:
        raise SweepError(f"study {study_name!r} exists with direction {study.direction.name.lower()}, this sweep "
                         f"would {direction}; use another --study-name")
    if setup is not None:
        setup = json.loads(json.dumps(setup))
        old = study.user_attrs.get("setup")
        if old is None:
            study.set_user_attr("setup", setup)
        elif old != setup:
            diff = sorted(k for k in set(old) | set(setup) if old.get(k) != setup.get(k))
            raise SweepError(f"study {study_name!r} was made with another setup (differs in: {', '.join(diff)}); "
                             "use another --study-name, or the same options to continue it")
    return study


# --------------------------------------------------------------------------------------------- optimizing
def optimize(study, objective: Callable[[dict[str, Any], Any], float], space: Sequence[Dimension], *,
             n_trials: int | None = None, timeout: float | None = None,
             on_trial: Callable[[Any], None] | None = None) -> None:
    """Run ``n_trials`` more trials of ``study`` (or until ``timeout`` seconds have passed: no trial starts
    after it; the running one finishes), each calling ``objective(params, trial)`` with ``params`` = this
    trial's value of every :class:`Dimension` in ``space`` (``{"lr": 0.003, "config.tau": 4.0}``).

    ``objective`` returns the value (mean validation metric). It may raise
    :class:`geomlab.training.trainer.TrainingError` (a diverged run) or ``ValueError`` (a config the kind refuses): the
    trial then ends ``PRUNED`` with user attributes ``outcome`` (``"diverged"`` / ``"invalid"``) and
    ``error`` (the reason), and the study goes on; so does a non-finite value (``"diverged"``). It may raise
    ``optuna.TrialPruned`` after setting ``outcome`` ``"pruned"``. ``on_trial(frozen_trial)`` is called
    after each trial. Any other exception is recorded in ``error`` and propagates (Optuna marks the trial
    ``FAIL``)."""
    optuna = require("optuna", "a sweep")

    def _objective(trial) -> float:
        params = {d.key: d.suggest(trial) for d in space}
        t0 = time.perf_counter()
        try:
            value = objective(params, trial)
        except TrainingError as exc:  # its reason alone (a trial keeps no checkpoint)
            _end(trial, "diverged", str(exc).split("; stopped")[0], t0)
        except optuna.TrialPruned:
            trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
            raise
        except ValueError as exc:
            _end(trial, "invalid", str(exc).splitlines()[0] if str(exc) else type(exc).__name__, t0)
        except Exception as exc:  # a bug or a machine error: recorded on the trial, then raised (Optuna: FAIL)
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
            raise
        value = float(value)
        if not math.isfinite(value):
            _end(trial, "diverged", f"the objective is {value} (non-finite)", t0)
        trial.set_user_attr("outcome", "complete")
        trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
        return value

    callbacks = [lambda s, t: on_trial(t)] if on_trial else None
    study.optimize(_objective, n_trials=n_trials, timeout=timeout, callbacks=callbacks)


def _end(trial, outcome: str, reason: str, t0: float):
    optuna = require("optuna", "a sweep")

    trial.set_user_attr("outcome", outcome)
    trial.set_user_attr("error", reason)
    trial.set_user_attr("duration_s", round(time.perf_counter() - t0, 3))
    raise optuna.TrialPruned(reason)


def trial_record(t) -> dict[str, Any]:
    """One trial as JSON: ``number``, ``state`` (``complete``, ``pruned`` (median pruner), ``diverged``,
    ``invalid``, ``failed`` (crashed or killed worker), ``running``), ``value`` (the objective; for a pruned
    trial Optuna's last intermediate value, the first seed's validation at ``pruned_at``; ``None`` when there
    is none), ``params``, and when known ``seed_values``, ``error``, ``pruned_at`` (step), ``duration_s``."""
    attrs = dict(t.user_attrs)
    state = t.state.name.lower()
    if state == "fail":
        state = "failed"
    elif state == "pruned":
        state = attrs.get("outcome", "pruned")
    rec = {"number": t.number, "state": state, "value": t.value, "params": dict(t.params)}
    for key in ("seed_values", "error", "pruned_at", "duration_s"):
        if key in attrs:
            rec[key] = attrs[key]
    return rec


def summary(study, space: Sequence[Dimension]) -> dict[str, Any]:
    """The study as JSON: ``study_name``, ``direction``, ``setup``, ``n_trials``, ``states`` (count per
    state), ``best`` (``number``, ``value``, ``params``, ``seed_values``; ``None`` until a trial completes),
    ``edges`` (:func:`edges` of the best params) and ``trials`` (:func:`trial_record` of every trial)."""
    trials = [trial_record(t) for t in study.get_trials(deepcopy=False)]
    states: dict[str, int] = {}
    for t in trials:
        states[t["state"]] = states.get(t["state"], 0) + 1
    complete = [t for t in trials if t["state"] == "complete" and t["value"] is not None]
    best = None
    if complete:
        pick = max if study.direction.name == "MAXIMIZE" else min
        b = pick(complete, key=lambda t: t["value"])
        best = {k: b[k] for k in ("number", "value", "params") if k in b}
        if "seed_values" in b:
            best["seed_values"] = b["seed_values"]
    return {"study_name": study.study_name, "direction": study.direction.name.lower(),
            "setup": study.user_attrs.get("setup"), "n_trials": len(trials), "states": states, "best": best,
            "edges": edges(space, best["params"]) if best else [], "trials": trials}


def write_json(data: dict[str, Any], path: str | Path) -> Path:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename: workers writing the
    same summary never leave a half-written file). Returns the path. Raises ``OSError`` naming the file when
    the system refuses (:func:`geomlab.core.writes.write_atomic`; the old summary is kept)."""
    from geomlab.core.writes import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(data, indent=1, default=float, allow_nan=True), "sweep summary")
