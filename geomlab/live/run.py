"""One background training run for the app (:class:`LiveRun`): a thread running
:class:`geomlab.training.trainer.Trainer`.

The Streamlit script must never train inside a script run (a widget click would interrupt it, and the page
freezes). Instead the app creates a :class:`LiveRun` in the
process-wide :data:`geomlab.live.runner.REGISTRY`; its worker thread trains and only writes plain values into a lock-protected
state. The page polls :meth:`LiveRun.snapshot` from a ``st.fragment(run_every=...)`` and redraws.

Life cycle (``LiveRun.state``)::

    created --start()--> running --(all steps)--> finished
                            |  \\--stop()--> stopping --> stopped --resume()--> running
                            |--(NaN/Inf)--> paused (message; back at the last good checkpoint) --resume()--> running
                            \\--(any other exception)--> error (message)

* **Stop** asks the trainer to stop after the current step; it writes a resumable checkpoint, and
  **Resume** continues from it with identical results for the same seed (the Trainer's guarantee).
* **NaN**: the trainer raises :class:`geomlab.training.trainer.TrainingError` and writes nothing after the failure.
  The run is *paused* with the trainer's message (which step, which quantity), and its weights, step and
  last validation go back to the last good checkpoint, so that Save, the geometry and the page's step all
  show one state. A step-0 checkpoint is written when the run starts, so a last good checkpoint always
  exists. Resuming a paused run restarts from that checkpoint with the learning rate multiplied by
  ``RunSpec.nan_lr_factor`` (design choice: an identical restart would fail at the same step).
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
:mod:`geomlab.live.probes`, when it is made :mod:`geomlab.live.tap`, and what the page reads is
:mod:`geomlab.live.snapshot`. This module holds the thread, its states and saves (:class:`LiveRun`); the
server's table of runs is :mod:`geomlab.live.runner`.
The working checkpoint of a run lives in ``<runs>/.live/<run id>/run/`` (a dot folder the catalog skips).
Nothing here imports streamlit.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

import torch

from geomlab.training import runs
from geomlab.live.probes import Probe
from geomlab.live.snapshot import ACTIVE_STATES, Snapshot
from geomlab.live.tap import ProbeTap
from geomlab.training.runs import RunError, RunSpec, check_device, is_osm

#: A live-run request that cannot be honoured (bad spec, wrong state, too many runs): the runs' error class.
LiveError = RunError


def build_task(spec: RunSpec):
    """The task of a live run: :func:`geomlab.training.runs.build_task` without downloading (a registered corpus must be
    on this machine)."""
    return runs.build_task(spec, download=False)



#: A run ending this many BPC above its best validation is said to overfit (design choice: well above the
#: step-to-step noise of the app's small validation sets)
OVERFIT_BPC = 0.1


def lowest_valid(history: list[dict], metric: str, value: float | None) -> tuple[int, float] | None:
    """``(step, lowest)``: the lowest of ``history``'s ``valid_<metric>`` entries and its step, when ``value``
    is more than :data:`OVERFIT_BPC` above it; None otherwise."""
    pts = [(h["step"], h[f"valid_{metric}"]) for h in history
           if h.get(f"valid_{metric}") is not None and not h.get("final")]
    if value is None or not pts:
        return None
    step, best = min(pts, key=lambda p: p[1])
    return (step, best) if value - best > OVERFIT_BPC else None


def overfit_note(history: list[dict], metric: str, final: float | None) -> str:
    """`` Its valid BPC was lowest, 2.104, at step 600 and rose after it: ...`` when the run's final validation
    ``final`` is more than :data:`OVERFIT_BPC` above the lowest of ``history``'s (:func:`lowest_valid`: the
    model learns its training text by heart, a short text overfits); empty otherwise."""
    low = lowest_valid(history, metric, final)
    if low is None:
        return ""
    return (f" Its valid BPC was lowest, {low[1]:.3f}, at step {low[0]:,} and rose after it: the model overfits "
            "its training text (a longer text, fewer steps or a smaller model help).")


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
        self._diverged: dict | None = None  # while paused by a divergence: {"step", "quantity"} for Save's card
        self._registry: Any = None  # the geomlab.live.runner.RunRegistry that created it: its limit applies
        self.task = task if task is not None else build_task(spec)
        if hasattr(self.task, "check_context"):  # a text shorter than the context: refused here, readable
            self.task.check_context(int(spec.seq_len))
        if model is None:
            model, self._note = runs.build_model(spec, self.task.vocab_size)
        corpus = getattr(self.task, "corpus", None)
        if corpus is not None and spec.data == "text":  # a user's text, split 90/5/5 here: does it repeat?
            from geomlab.data.corpora import repeat_note

            if repeat := repeat_note(corpus):
                self._note = " ".join(x for x in (self._note, f"Note: {repeat}; paste a text that does not "
                                                  "repeat itself to measure prediction.") if x)
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
            self._message = ("resumed" + (f" at learning rate {float(self.spec.lr) * self._lr_factor:.3g} (× "
                                          f"{self._lr_factor:g} after a divergence)" if self._lr_factor != 1.0 else ""))
        else:
            trainer = runs.build(self.spec, task=self.task, model=self.model, out=out, card=card,
                                 callback=self._on_progress, log_dir=self.log_dir).trainer
            self._message = ""
        self._trainer = trainer
        self._diverged = None
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
                # a refused write (CheckpointWriteError, LogWriteError) is already one line naming the step
                # and the file; other errors keep their type, which says more than their text
                self._message = (f"training failed: {exc}" if isinstance(exc, OSError) and str(exc) else
                                 f"training failed: {type(exc).__name__}: {exc}")
            self._serve_saves(trainer, final=True)
            return
        good = self._last_good(trainer) if result.status == "failed" else None
        with self._lock:
            if result.status == "failed":
                err = result.error
                self._state = "paused"
                if good is not None:  # what Save writes, the probe traces and Resume starts from
                    self._back_to(good)
                    if isinstance(err, TrainingError):
                        self._diverged = {"step": err.step, "quantity": err.quantity}
                    # "good" is finite, not necessarily the best: a validation that had risen is said
                    there = good.last_valid.get("bpc")
                    low = lowest_valid(self._history, "bpc", there)
                    worse = (f"; its valid BPC, {there:.3f}, is above the run's lowest, {low[1]:.3f} at step "
                             f"{low[0]:,}" if low else "")
                    back = f"Back at the last good checkpoint (step {good.step:,}{worse}); "
                else:
                    back = ""
                # (the trainer's "stopped" is what "paused" says here)
                reason = err.reason.removesuffix("; stopped") if isinstance(err, TrainingError) else str(err)
                now = float(self.spec.lr) * self._lr_factor
                self._message = (f"Training paused: {reason}. {back}Resume restarts from it at learning rate "
                                 f"{now * self.spec.nan_lr_factor:.3g} (this try: {now:.3g})."
                                 if isinstance(err, TrainingError) and back else f"Training paused: {err}")
            elif result.status == "stopped":
                self._state = "stopped"
                self._message = f"Stopped at step {result.step:,}; Resume continues from here."
                if result.checkpoint:
                    self._checkpoint = str(result.checkpoint)
            else:
                self._state = "finished"
                m = result.metrics
                metric = getattr(self.task, "metric", "loss")
                val = m.get(f"valid_{metric}")
                shown = {"bpc": "BPC"}.get(metric, metric)
                self._message = (f"Finished {result.step:,} steps"
                                 + (f"; valid {shown} {val:.3f}" if val is not None else "") + "."
                                 + (overfit_note(self._history, metric, val) if metric == "bpc" else ""))
                if result.checkpoint:
                    self._checkpoint = str(result.checkpoint)
                if val is not None:
                    self._last["metric"] = val
        self._serve_saves(trainer, final=True)

    def _back_to(self, good) -> None:
        """The run as trainer ``good`` (at the last good checkpoint) left it: its model, step, time, last
        validation, and the curves and tiles up to its step (a resumed run logs the later steps again).
        Caller holds the lock."""
        self._trainer, self.model = good, good.model
        self._history = [h for h in self._history if h["step"] <= good.step]
        last = self._last
        last.update(step=good.step, elapsed_s=good.elapsed_s)
        logged = next((h for h in reversed(self._history) if "loss" in h), None)
        if logged is not None:
            last.update(loss=logged["loss"], train_bpc=logged.get("train_bpc"),
                        tokens_per_s=logged.get("tokens_per_s"))
        metric = good.last_valid.get(getattr(self.task, "metric", "loss"))
        if metric is not None:
            last["metric"] = metric

    def _last_good(self, trainer):
        """After a divergence: a trainer at the run's last good checkpoint (its weights, step, history and last
        validation), or None when there is none or it cannot be read (the diverged trainer is kept then)."""
        from geomlab.training.trainer import Trainer

        if not self._checkpoint:
            return None
        try:
            return Trainer.from_checkpoint(self._checkpoint, self.task, out=trainer.out, log_dir=self.log_dir)
        except Exception:  # noqa: BLE001 - the message says the diverged weights are kept
            return None

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
            # a finished run's final evaluation (valid and test splits) goes on the card; otherwise the last
            # validation does
            final = next((h for h in reversed(trainer.history) if h.get("final")), None)
            final_metrics = ({k: v for k, v in final.items() if k not in ("step", "final")}
                             if final is not None and final.get("step") == trainer.step else None)
            try:
                card = trainer.full_card(final_metrics)
            except Exception:  # noqa: BLE001 - fall back to a minimal card
                card = {}
            train_config = trainer.config.to_dict()
            metrics = list(trainer.history)
        card.setdefault("corpus", getattr(self.task, "name", "?"))
        card["saved_from"] = "geomlab live run"
        if self._diverged is not None:  # paused: the weights of the last good checkpoint, before the divergence
            card["diverged_at"] = dict(self._diverged)
        if self.spec.group and is_osm(self.spec.kind):
            card.setdefault("group", self.spec.group)
        return ckpt.save(stem, self.model, getattr(self.task, "vocab", None), card,
                         train_config=train_config, metrics=metrics, exclusive=exclusive, layout="auto")
