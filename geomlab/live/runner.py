"""Background training runs for the app: a thread running :class:`geomlab.training.trainer.Trainer`.

The Streamlit script must never train inside a script run (a widget click would interrupt it, and the page
freezes). Instead the app creates a :class:`LiveRun` in the
process-wide :data:`REGISTRY`; its worker thread trains and only writes plain values into a lock-protected
state. The page polls :meth:`LiveRun.snapshot` from a ``st.fragment(run_every=...)`` and redraws.

Life cycle (``LiveRun.state``)::

    created --start()--> running --(all steps)--> finished
                            |  \\--stop()--> stopping --> stopped --resume()--> running
                            |--(NaN/Inf)--> paused (message; last good checkpoint kept) --resume()--> running
                            \\--(any other exception)--> error (message)

* **Stop** asks the trainer to stop after the current step; it writes a resumable checkpoint, and
  **Resume** continues from it with identical results for the same seed (the Trainer's guarantee).
* **NaN**: the trainer raises :class:`geomlab.training.trainer.TrainingError` and writes nothing after the failure.
  The run is *paused* with the trainer's message (which step, which quantity). A step-0 checkpoint is
  written when the run starts, so a last good checkpoint always exists. Resuming a paused run restarts
  from that checkpoint with the learning rate multiplied by ``RunSpec.nan_lr_factor`` (design choice:
  an identical restart would fail at the same step).
* **Save** (:meth:`LiveRun.save`) writes the current weights as the checkpoint folder ``<runs>/<name>/``, so
  the catalog (:mod:`geomlab.checkpoints.catalog`) lists it on every page. While the run trains, the save happens in
  the worker between two steps (never while weights change); otherwise at once. A save never replaces a
  checkpoint the caller may not change: a taken name gets ``-2``, ``-3``... (created exclusively), and only
  a checkpoint this session saved before is saved over (as one unit, :func:`geomlab.checkpoints.io.save`).
* **Ownership**: a run made with ``owner=`` (the app passes its session's token) is changed (stopped,
  resumed, saved, forgotten) only by calls with ``by=`` that owner; other sessions may watch it. The server
  setting ``GEOMLAB_SHARED_RUNS=1`` (:func:`geomlab.checkpoints.catalog.shared_mode`) lets everyone change every run.
  A run made without an owner (tests, notebooks) is anyone's.

* **Geometry while training** (:meth:`LiveRun.probe`): a reader asks for a trace of the run's *current*
  weights; the training thread only copies them between two steps while someone watches, so a seeded run
  reaches the same weights with or without viewers (:class:`geomlab.live.tap.ProbeTap`).

What a run trains is a :class:`geomlab.training.runs.RunSpec` (the app's preset), built by
:mod:`geomlab.training.runs` like every other run; what a probe shows (sequence, figure, curve) is
:mod:`geomlab.live.probes`, when it is made :mod:`geomlab.live.tap`. This module holds the thread, its states
and saves (:class:`LiveRun`) and the server's table of runs (:class:`RunRegistry`).
The working checkpoint of a run lives in ``<runs>/.live/<run id>/run/`` (a dot folder the catalog skips).
Nothing here imports streamlit.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch

from geomlab.training import runs
from geomlab.live.probes import Probe
from geomlab.live.tap import ProbeTap
from geomlab.live.offer import BUDGETS, SYNTHETIC_TASKS, corpus_availability, default_threads  # noqa: F401
from geomlab.training.runs import (  # noqa: F401 (the app's names)
    RunError, RunSpec, check_device, is_osm,
)

#: States of a run.
STATES = ("created", "running", "stopping", "stopped", "paused", "finished", "error")
ACTIVE_STATES = ("running", "stopping")
#: A live-run request that cannot be honoured (bad spec, wrong state, too many runs): the runs' error class.
LiveError = RunError


# ---------------------------------------------------------------------------------------------- data
def build_task(spec: RunSpec):
    """The task of a live run: :func:`geomlab.training.runs.build_task` without downloading (a registered corpus must be
    on this machine)."""
    return runs.build_task(spec, download=False)


def tensorboard_dir(spec: RunSpec) -> Path:
    """A new folder for a live run's TensorBoard logs: ``<runs>/tensorboard/<UTC start time>-<kind>-<4 hex>``
    (design choice: ``tensorboard --logdir <runs>/tensorboard`` lists the app's runs by start time and kind;
    the catalog ignores the folder, which holds no checkpoints)."""
    from geomlab.checkpoints import catalog

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return catalog.runs_dir() / "tensorboard" / f"{stamp}-{catalog.safe_name(spec.kind)}-{uuid.uuid4().hex[:4]}"


# ---------------------------------------------------------------------------------------------- state
@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of a run's progress, safe to read from any thread.

    state: one of :data:`STATES`. step/total: optimizer steps done / planned. loss: latest mean training
    loss (nats). metric_name/metric: the task's main validation metric (``bpc`` for text, ``accuracy`` for
    word problems) and its latest value. train_bpc: ``loss / ln 2`` for character text, else None.
    tokens_per_s: training targets per second (latest interval). eta_s: seconds left (estimate). elapsed_s:
    training seconds so far. history: list of dicts (``step``, ``loss``, ``train_bpc``, ``valid`` metrics,
    ``tokens_per_s``, ``elapsed_s``). message: human line for paused/error/finished/stopped. checkpoint:
    the run's last good (working) checkpoint path or None. saved: checkpoints saved by :meth:`LiveRun.save`.
    device: the device training runs on. note: remarks about the spec (budget not met...).
    """

    run_id: str
    state: str
    step: int
    total: int
    spec: dict
    loss: float | None = None
    metric_name: str = "loss"
    metric: float | None = None
    train_bpc: float | None = None
    tokens_per_s: float | None = None
    eta_s: float | None = None
    elapsed_s: float = 0.0
    history: tuple = ()
    message: str = ""
    checkpoint: str | None = None
    saved: tuple = ()
    device: str = ""
    note: str = ""
    params: int | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else max(0.0, min(1.0, self.step / self.total))

    @property
    def can_resume(self) -> bool:
        return self.state in ("stopped", "paused") and self.checkpoint is not None

    @property
    def can_save(self) -> bool:
        return self.state not in ("created", "error") or self.checkpoint is not None


class LiveRun:
    """One background training run (see the module docstring for the life cycle).

    Args:
        spec: a :class:`RunSpec`.
        work_dir: folder for the working checkpoint (default ``<runs>/.live/<run_id>``).
        task, model: optional ready-made task/model (tests, notebooks); default built from ``spec``.
        log_dir: a folder for TensorBoard event files of the run's metrics history (:mod:`geomlab.training.log`;
            a resumed run appends to it), or ``None``. :class:`LiveError` when it cannot be written.

    Thread safety: every public method may be called from any thread; the worker only touches the
    trainer, and shares state through ``self._lock``.
    """

    def __init__(self, spec: RunSpec, work_dir: str | Path | None = None, *, task=None, model=None,
                 run_id: str | None = None, owner: str | None = None, log_dir: str | Path | None = None):
        spec.validate()
        check_device(spec.device)
        self.log_dir = Path(log_dir) if log_dir is not None else None
        if self.log_dir is not None:  # refused here, before anything trains
            from geomlab.training.log import check_log_dir

            try:
                check_log_dir(self.log_dir)
            except ValueError as exc:
                raise LiveError(str(exc)) from None
        self.spec = spec
        self.run_id = run_id or uuid.uuid4().hex[:10]
        self.created_at = time.time()  # wall clock (s since the epoch), for the "recent runs" picker
        self.owner = owner  # the session that may change this run (None: anyone)
        from geomlab.checkpoints import catalog

        self.work_dir = Path(work_dir) if work_dir else catalog.runs_dir() / ".live" / self.run_id
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        self._trainer = None
        self._state = "created"
        self._message = ""
        self._note = ""
        self._history: list[dict] = []
        self._last: dict[str, Any] = {}
        self._checkpoint: str | None = None
        self._saved: list[str] = []
        self._save_requests: list[tuple[Path, str | None, threading.Event, list]] = []
        self._lr_factor = 1.0
        self._registry: "RunRegistry | None" = None  # set by RunRegistry.create: its limit applies
        self.task = task if task is not None else build_task(spec)
        if hasattr(self.task, "check_context"):  # a text shorter than the context: refused here, readable
            self.task.check_context(int(spec.seq_len))
        if model is None:
            model, self._note = runs.build_model(spec, self.task.vocab_size)
        self.model = model
        self._tap = ProbeTap(self)  # geometry while training (see the module docstring)
        from geomlab.models import count_params

        try:
            self._params = count_params(model)
        except Exception:  # noqa: BLE001 - a foreign model in tests
            self._params = sum(p.numel() for p in model.parameters())

    # ------------------------------------------------------------------ public API
    def may_change(self, by: str | None) -> bool:
        """Whether a caller identified as ``by`` may stop, resume, save or forget this run: the run has no
        owner, ``by`` is its owner, or the server shares everything (``GEOMLAB_SHARED_RUNS=1``)."""
        from geomlab.checkpoints import catalog

        return self.owner is None or (by is not None and by == self.owner) or catalog.shared_mode()

    def _check_owner(self, by: str | None, what: str) -> None:
        if not self.may_change(by):
            raise LiveError(f"this run was started by another session: it can be watched here, not {what} "
                            "(a server started with GEOMLAB_SHARED_RUNS=1 shares every run)")

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def snapshot(self) -> Snapshot:
        """A consistent copy of the run's progress (cheap; called by the page several times a second)."""
        with self._lock:
            last = self._last
            metric_name = getattr(self.task, "metric", "loss")
            return Snapshot(
                run_id=self.run_id, state=self._state, step=int(last.get("step", 0)),
                total=int(last.get("total", self._total_steps())), spec=asdict(self.spec),
                loss=last.get("loss"), metric_name=metric_name, metric=last.get("metric"),
                train_bpc=last.get("train_bpc"), tokens_per_s=last.get("tokens_per_s"),
                eta_s=last.get("eta_s") if self._state in ACTIVE_STATES else None,
                elapsed_s=float(last.get("elapsed_s", 0.0)), history=tuple(dict(h) for h in self._history),
                message=self._message, checkpoint=self._checkpoint, saved=tuple(self._saved),
                device=str(last.get("device", "")), note=self._note, params=self._params)

    def start(self, *, by: str | None = None) -> "LiveRun":
        """Start training in a background thread. :class:`LiveError` unless the run is new, or when its
        registry already has ``max_active`` runs training (checked atomically with the start), or for a
        caller ``by`` that may not change the run."""
        self._check_owner(by, "started")

        def go():
            if self._state != "created":
                raise LiveError(f"the run is {self._state}; only a new run can be started")
            self._begin(resume=False)

        self._activate(go)
        return self

    def _activate(self, go: Callable[[], None]) -> None:
        """Run ``go`` (which makes the run active) under the run's lock and, for a run of a registry, under
        the registry's lock after counting the runs already training: two sessions starting runs at the same
        moment cannot both pass a limit that has room for one (lock order: registry, then run)."""
        registry = self._registry
        if registry is None:
            with self._lock:
                go()
            return
        with registry._lock:
            registry._check_room(exclude=self)
            with self._lock:
                go()

    def stop(self, wait: float | None = None, *, by: str | None = None) -> None:
        """Ask the run to stop after the current step (it then saves a resumable checkpoint). Returns at
        once, or after at most ``wait`` seconds for the worker to finish. No-op unless running.
        :class:`LiveError` for a caller ``by`` that may not change the run (:meth:`may_change`)."""
        self._check_owner(by, "stopped")
        with self._lock:
            if self._state != "running":
                return
            self._state = "stopping"
            trainer = self._trainer
        if trainer is not None:
            trainer.stop()
        if wait:
            self.join(wait)

    def resume(self, *, by: str | None = None) -> "LiveRun":
        """Continue a stopped or paused run from its checkpoint (see the module docstring).
        :class:`LiveError` in any other state, without a checkpoint, or for a caller ``by`` that may not
        change the run."""
        self._check_owner(by, "resumed")

        def go():
            if self._state not in ("stopped", "paused"):
                raise LiveError(f"the run is {self._state}; only a stopped or paused run can be resumed")
            if not self._checkpoint:
                raise LiveError("the run has no checkpoint to resume from")
            if self._state == "paused":
                self._lr_factor *= self.spec.nan_lr_factor
            self._begin(resume=True)

        self._activate(go)
        return self

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the worker thread; True when it has finished (or never started)."""
        t = self._thread
        if t is not None:
            t.join(timeout)
            return not t.is_alive()
        return True

    def probe(self) -> Probe | None:
        """The geometry of the run's current weights (:meth:`geomlab.live.tap.ProbeTap.probe`), or None while a
        training run has not yet reached a logging step since the first call. Never raises."""
        return self._tap.probe()

    def save(self, name: str, dest_dir: str | Path | None = None, timeout: float = 60.0, *,
             by: str | None = None) -> Path:
        """Save the current weights as the checkpoint folder ``<dest_dir or runs>/<name>/``
        (:mod:`geomlab.checkpoints.io`; a flat pair ``<name>.json`` this session saved before stays flat); returns
        its path. While training, the worker saves between two steps (waits up to ``timeout`` s).

        Never replaces a checkpoint that ``by`` may not change (:func:`geomlab.checkpoints.catalog.may_change`: one the
        same session saved before is saved over; anything else, e.g. a command-line run or another session's
        save, keeps its files and this one is saved as ``NAME-2``, ``NAME-3``..., created exclusively).
        The saved checkpoint is recorded as ``by``'s (or the run owner's).

        Raises :class:`LiveError` for a run with nothing to save, a timeout, or a caller that may not change
        the run, and ``ValueError`` from the checkpoint writer (e.g. non-finite weights are never saved).
        """
        from geomlab.checkpoints import catalog

        self._check_owner(by, "saved")
        by = by if by is not None else self.owner
        dest = Path(dest_dir) if dest_dir else catalog.runs_dir()
        stem = dest / catalog.safe_name(name)
        with self._lock:
            state = self._state
            if state == "created":
                raise LiveError("nothing to save yet: start the run first")
            if state in ACTIVE_STATES and self._thread is not None and self._thread.is_alive():
                done, box = threading.Event(), []
                self._save_requests.append((stem, by, done, box))
            else:
                done = None
        if done is None:
            path = self._save_as(stem, by)
        else:
            end = time.monotonic() + timeout
            while not done.wait(0.05):
                t = self._thread
                if t is None or not t.is_alive():  # the worker ended before serving the request
                    self._serve_saves(None)
                    break
                if time.monotonic() > end:
                    raise LiveError("the run did not reach a step boundary in time; try again")
            if box and isinstance(box[0], BaseException):
                raise box[0]
            path = box[0] if box else self._save_as(stem, by)
        with self._lock:
            self._saved.append(str(path))
        return path

    # ------------------------------------------------------------------ internals
    def _total_steps(self) -> int:
        return int(self.spec.steps)

    def _begin(self, resume: bool) -> None:
        from geomlab.training.trainer import Trainer

        self.work_dir.mkdir(parents=True, exist_ok=True)
        out = self.work_dir / "run"
        card = {"live_spec": {k: v for k, v in asdict(self.spec).items() if k != "text"},
                "kind": self.spec.kind}
        if self.spec.group and is_osm(self.spec.kind):
            card["group"] = self.spec.group
        if resume:
            overrides = {}
            if self._lr_factor != 1.0:
                overrides["lr"] = float(self.spec.lr) * self._lr_factor
            trainer = Trainer.from_checkpoint(self._checkpoint, self.task, out=out, overrides=overrides,
                                              callback=self._on_progress, log_dir=self.log_dir)
            self.model = trainer.model
            self._message = ("resumed" + (f" with learning rate × {self._lr_factor:g} after the NaN"
                                          if self._lr_factor != 1.0 else ""))
        else:
            trainer = runs.build(self.spec, task=self.task, model=self.model, out=out, card=card,
                                 callback=self._on_progress, log_dir=self.log_dir).trainer
            self._message = ""
        self._trainer = trainer
        self._state = "running"
        self._thread = threading.Thread(target=self._work, args=(trainer,), daemon=True,
                                        name=f"geomlab-live-{self.run_id}")
        self._thread.start()

    def _work(self, trainer) -> None:
        from geomlab.training.trainer import TrainingError

        if self.spec.threads:
            torch.set_num_threads(int(self.spec.threads))
        try:
            result = trainer.run(raise_errors=False)
        except Exception as exc:  # noqa: BLE001 - shown in the page, never raised into the server
            with self._lock:
                self._state = "error"
                self._message = f"training failed: {type(exc).__name__}: {exc}"
            self._serve_saves(trainer, final=True)
            return
        with self._lock:
            if result.status == "failed":
                err = result.error
                good = self._checkpoint
                self._state = "paused"
                at = f" (step {self._checkpoint_step()})" if good else ""
                self._message = (f"Training paused: {err}. The last good checkpoint{at} is kept; "
                                 f"Resume restarts from it with the learning rate × {self.spec.nan_lr_factor:g}."
                                 if isinstance(err, TrainingError) else f"Training paused: {err}")
            elif result.status == "stopped":
                self._state = "stopped"
                self._message = f"Stopped at step {result.step}; Resume continues from here."
                if result.checkpoint:
                    self._checkpoint = str(result.checkpoint)
            else:
                self._state = "finished"
                m = result.metrics
                metric = getattr(self.task, "metric", "loss")
                val = m.get(f"valid_{metric}")
                self._message = (f"Finished {result.step} steps"
                                 + (f"; valid {metric} {val:.4g}" if val is not None else "") + ".")
                if result.checkpoint:
                    self._checkpoint = str(result.checkpoint)
                if val is not None:
                    self._last["metric"] = val
        self._serve_saves(trainer, final=True)

    def _checkpoint_step(self) -> int | str:
        try:
            from geomlab.checkpoints import io as ckpt

            meta = ckpt.read_meta(self._checkpoint)
            return int((meta.get("train_state") or {}).get("step", 0))
        except Exception:  # noqa: BLE001
            return "?"

    def _on_progress(self, p) -> None:
        """Trainer callback (worker thread): record progress; write the step-0 checkpoint; serve saves."""
        trainer = self._trainer
        if p.event == "start" and trainer is not None and trainer.last_checkpoint is None and \
                trainer.out is not None and not (self._checkpoint and Path(self._checkpoint).exists()):
            path = trainer.save_checkpoint()  # step-0 checkpoint: a "last good" one exists from the start
            p = replace(p, checkpoint=str(path) if path else None)
        metric_name = getattr(self.task, "metric", "loss")
        with self._lock:
            last = self._last
            last.update(step=p.step, total=p.total, elapsed_s=p.elapsed_s)
            if trainer is not None:
                last["device"] = trainer.device.type
            if p.loss is not None and p.event == "step":
                last.update(loss=p.loss, train_bpc=p.train_bpc, tokens_per_s=p.tokens_per_s, eta_s=p.eta_s)
                self._history.append({"step": p.step, "loss": p.loss, "train_bpc": p.train_bpc,
                                      "tokens_per_s": p.tokens_per_s, "elapsed_s": p.elapsed_s,
                                      "lr": p.lr})
            if p.event == "eval" and p.valid:
                if metric_name in p.valid:
                    last["metric"] = p.valid[metric_name]
                self._history.append({"step": p.step, **{f"valid_{k}": v for k, v in p.valid.items()}})
            if p.event in ("done", "stopped") and p.valid and metric_name in p.valid:
                last["metric"] = p.valid[metric_name]
                if p.event == "done":
                    self._history.append({"step": p.step, "final": True,
                                          **{f"valid_{k}": v for k, v in p.valid.items()}})
            if p.checkpoint and p.event in ("start", "eval", "done", "stopped"):
                self._checkpoint = p.checkpoint
        self._tap.at_progress(p.event, p.step)
        self._serve_saves(trainer)

    def _serve_saves(self, trainer, final: bool = False) -> None:
        with self._lock:
            requests, self._save_requests = self._save_requests, []
        for stem, by, done, box in requests:
            try:
                box.append(self._save_as(stem, by))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller of save()
                box.append(exc)
            done.set()

    def _save_as(self, stem: Path, by: str | None) -> Path:
        """Write the snapshot under ``stem`` or, when that name is taken by a checkpoint ``by`` may not
        change, under the first free ``stem-2``, ``stem-3``... (exclusive creation: never a replace)."""
        from geomlab.checkpoints import catalog
        from geomlab.checkpoints import io as ckpt

        for i in range(1, 1000):
            s = stem if i == 1 else stem.with_name(f"{stem.name}-{i}")
            own = catalog.owner_of(s) is not None and catalog.may_change(s, by)
            try:
                path = self._write_snapshot(s, exclusive=not own)
            except ckpt.CheckpointExistsError:
                continue
            catalog.record_owner(path, by)
            return path
        raise LiveError(f"no free checkpoint name for {stem.name} (tried {stem.name}-2 to -999)")

    def _write_snapshot(self, stem: Path, exclusive: bool = False) -> Path:
        from geomlab.checkpoints import io as ckpt

        trainer = self._trainer
        card: dict[str, Any] = {}
        train_config = None
        metrics: list = []
        if trainer is not None:
            try:
                card = trainer.full_card()
            except Exception:  # noqa: BLE001 - fall back to a minimal card
                card = {}
            train_config = trainer.config.to_dict()
            metrics = list(trainer.history)
        card.setdefault("corpus", getattr(self.task, "name", "?"))
        card["saved_from"] = "geomlab live run"
        if self.spec.group and is_osm(self.spec.kind):
            card.setdefault("group", self.spec.group)
        return ckpt.save(stem, self.model, getattr(self.task, "vocab", None), card,
                         train_config=train_config, metrics=metrics, exclusive=exclusive, layout="auto")


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
