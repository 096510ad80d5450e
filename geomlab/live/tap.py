"""Geometry while training: the weight copies a live run's training thread leaves for readers, and the probe
traces made of them (:class:`ProbeTap`, one per :class:`geomlab.live.runner.LiveRun`).

A reader (the page) asks for a trace of the run's *current* weights on a short fixed probe sequence
(:func:`geomlab.live.probes.probe_tokens`). The training thread only copies the weights (a CPU ``state_dict``
clone, between two steps, at a logging step at most every :data:`PROBE_EVERY_S` seconds and only while someone
watched in the last :data:`PROBE_WATCH_S` seconds); the copy is traced on a separate model (built once, eval
mode). Nothing the training thread computes or draws changes (no RNG use, no model mode switch), so a seeded run
reaches the same weights with or without viewers. The trace, its figure and a short history of one quantity
per probe are cached per weight copy, so several viewers share one trace. Nothing here imports streamlit.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from typing import Any

import torch

from geomlab.live.probes import Probe, ProbeCurve, draw_probe, probe_tokens

#: Geometry while training (design choices): the training thread copies the weights at most every
#: PROBE_EVERY_S seconds, and only while a reader called :meth:`ProbeTap.probe` in the last PROBE_WATCH_S
#: seconds; the history keeps PROBE_HISTORY curves (the probe sequence: geomlab.live.probes).
PROBE_EVERY_S = 2.5
PROBE_WATCH_S = 20.0
PROBE_HISTORY = 6
#: Where a probe of a training run is traced: in the training thread right after the copy (True), or in
#: the reader's thread (False). Measured (docs/app.md, Train live): tracing in a reader thread slowed
#: training by ~40% on a 2-core box (the two threads convoy on Python's GIL: every torch op of the training
#: step releases it, and re-taking it waits for the reader's Python), while tracing between two steps costs
#: the trace time once per PROBE_EVERY_S.
PROBE_IN_TRAINING_THREAD = True
#: Most share of the training thread's time that probes may take: after a probe that took c seconds in the
#: training thread, the next copy waits max(PROBE_EVERY_S, c / PROBE_BUDGET) seconds (design choice: a
#: loaded CPU or a large model refreshes the picture less often instead of slowing training).
PROBE_BUDGET = 0.04




class ProbeTap:
    """The probe state of one live run ``run`` (a :class:`geomlab.live.runner.LiveRun`: its ``model``, ``task``,
    ``spec``, and under its ``_lock`` its ``_thread``, ``_last`` progress and ``_state``).

    weights: the newest copy ``(version, step, source, state_dict)`` or None; model: the reader's CPU model
    (built at the first trace); last: the newest :class:`geomlab.live.probes.Probe`. Thread safety: the
    copy is made under the run's lock, the traces under the tap's own lock. Source: design choice.
    """

    def __init__(self, run):
        self.run = run
        self._lock = threading.Lock()
        self.wanted_at = -math.inf  # when a reader last asked
        self.copied_at = -math.inf
        self.cost_s = 0.0  # training-thread seconds the last copy (and trace) took
        self.weights: tuple[int, int, Any, dict] | None = None
        self.version = 0
        self.model = None
        self.input: torch.Tensor | None = None
        self.last: Probe | None = None
        self.history: list[tuple[int, ProbeCurve]] = []

    def probe(self) -> Probe | None:
        """The geometry of the run's current weights: a :class:`Probe` traced on :func:`probe_tokens`, or None
        while a training run has not yet reached a logging step since the first call (the page says so).

        Any thread may call it, any number of viewers: the trace is made once per weight copy (cached), on a
        separate CPU model in eval mode. While the run trains, the training thread copies its weights at a
        logging step at most every :data:`PROBE_EVERY_S` seconds, and only while a caller asked in the last
        :data:`PROBE_WATCH_S` seconds, and traces the copy there and then (:data:`PROBE_IN_TRAINING_THREAD`;
        otherwise the caller traces it); a run that is not training is copied and traced here (the copy under
        the run's lock: it cannot start meanwhile).
        Failures (a model that cannot be rebuilt or traced) come back as a Probe with a ``message``, never
        raised. Source: design choice.
        """
        run = self.run
        self.wanted_at = time.monotonic()
        with run._lock:
            idle = run._thread is None or not run._thread.is_alive()
            step = int(run._last.get("step", 0))
            w = self.weights
            if idle and (w is None or w[2] != (id(run.model), step, run._state)):
                self.keep_weights(step, (id(run.model), step, run._state))
                w = self.weights
        if w is None or (not idle and PROBE_IN_TRAINING_THREAD):
            return self.last  # a training run's probes are made by its own thread
        version, step, _src, weights = w
        with self._lock:
            last = self.last
            if last is not None and last.version >= version:
                return last
            self.last = self._make(version, step, weights)
            return self.last

    def serve(self) -> Probe | None:
        """Trace the newest weight copy unless a probe of it exists (training thread, between two steps);
        returns the new probe or None."""
        with self._lock:
            w, last = self.weights, self.last
            if w is not None and (last is None or last.version < w[0]):
                self.last = self._make(w[0], w[1], w[3])
                return self.last
        return None

    def _make(self, version: int, step: int, weights: dict) -> Probe:
        """Trace ``weights`` (a CPU state dict) on the probe sequence; build the figure. Caller holds
        the tap's lock."""
        import geomlab.figures  # noqa: F401 - first import (plotly) outside the timed part
        from geomlab.trace import trace

        try:
            if self.model is None:
                self.model = self._new_model()
            model = self.model
            model.load_state_dict(weights)
            if self.input is None:
                self.input = probe_tokens(self.run.task, self.run.spec, model)
            t0 = time.perf_counter()
            tr = trace(model, self.input, vocab=getattr(self.run.task, "vocab", None))
            trace_ms = 1000 * (time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - shown in the page, never raised into the server
            return Probe(step, version, message=f"the weights could not be traced: {type(exc).__name__}: {exc}")
        probe, self.history = draw_probe(tr, step, version, self.history, self.run.spec.kind, trace_ms,
                                         PROBE_HISTORY)
        return probe

    def _new_model(self):
        """A CPU model of the run's architecture for probe traces: rebuilt from ``model.config`` (under
        :func:`geomlab.core.rng.seeded`, so no global or run generator is drawn from; its initial values are
        replaced by the copied weights), or a deep copy of a model without a config (tests)."""
        cfg = getattr(self.run.model, "config", None)
        if cfg:
            from geomlab.models import build_model
            from geomlab.core.rng import seeded

            with seeded(0):
                model = build_model(dict(cfg))
        else:
            with self.run._lock:
                model = copy.deepcopy(self.run.model)
        model = model.to("cpu").eval()
        for prm in model.parameters():
            prm.requires_grad_(False)
        return model

    def keep_weights(self, step: int, source: Any) -> None:
        """Copy the current weights to the CPU for :meth:`probe` (training thread between two steps, or a
        reader while the run rests). Takes the run's lock."""
        weights = {k: v.detach().to("cpu", copy=True) for k, v in self.run.model.state_dict().items()}
        with self.run._lock:
            self.version += 1
            self.weights = (self.version, int(step), source, weights)
            self.copied_at = time.monotonic()

    def at_progress(self, event: str, step: int) -> None:
        """The training thread's side (its progress callback, between two steps): while a reader watched in the
        last :data:`PROBE_WATCH_S` seconds, copy the weights at a start, a logging step or the end, at most every
        ``max(PROBE_EVERY_S, cost / PROBE_BUDGET)`` seconds (``cost``: the last copy and trace), and trace the
        copy here when :data:`PROBE_IN_TRAINING_THREAD`."""
        now = time.monotonic()
        if event in ("start", "step", "done", "stopped") and now - self.wanted_at < PROBE_WATCH_S and \
                (event != "step" or now - self.copied_at >= max(PROBE_EVERY_S, self.cost_s / PROBE_BUDGET)):
            first = self.model is None
            self.keep_weights(step, ("train", step))  # a viewer is watching: the weights at a step boundary
            if PROBE_IN_TRAINING_THREAD:
                self.serve()
            # the budget counts the copy and the trace; not the first one (imports, the probe model's build)
            self.cost_s = 0.0 if first else time.monotonic() - now
