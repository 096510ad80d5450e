"""The geometry of a training run's weights: the probe sequence, the figure and the curve drawn while it trains.

A live run (:meth:`geomlab.live.runner.LiveRun.probe`) traces a copy of its current weights on a short fixed probe
sequence (:func:`probe_tokens`) and shows one figure per model family (:func:`probe_figure`) and a short
history of one quantity (:func:`probe_curve`). This module holds those choices and the :class:`Probe` record;
when and in which thread the weights are copied is the live run's. Nothing here imports streamlit. Source:
design choice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from geomlab.models.family import FAMILIES
from geomlab.training.runs import RunError, RunSpec

#: Most positions of a probe sequence (design choice: one short sequence reads at half width).
PROBE_POSITIONS = 64


@dataclass(frozen=True)
class ProbeCurve:
    """One number per probe position (or per CEM recursion step) of one probe trace, for the history chart.

    x, y: 1-D float arrays of equal length (NaN where undefined). x_label, y_label: axis titles with units.
    what: one phrase naming the quantity (used in titles and captions)."""

    x: Any
    y: Any
    x_label: str
    y_label: str
    what: str


@dataclass(frozen=True)
class Probe:
    """The geometry of a run's weights at one step, traced on the run's probe sequence.

    step: the optimiser step of the weights. version: serial number of the weight copy (two copies at the
    same step, e.g. after a NaN restart, differ). trace: the :class:`geomlab.trace.Trace` (None on failure).
    figure: the figure name (:func:`probe_figure`) or None when the kind has no geometry view. view: the
    :class:`geomlab.figures.Chart` ``(figure, caption)`` or None. curve: :func:`probe_curve` of the trace or
    None. history: ``((step, ProbeCurve), ...)`` of earlier probes of this run, oldest first, this one last
    (at most :data:`PROBE_HISTORY`, spread over the run). trace_ms / figure_ms: wall time of the trace and of
    the figure (milliseconds). message: why there is no figure (empty otherwise).
    """

    step: int
    version: int
    trace: Any = None
    figure: str | None = None
    view: Any = None
    curve: ProbeCurve | None = None
    history: tuple = ()
    trace_ms: float = 0.0
    figure_ms: float = 0.0
    message: str = ""


def probe_tokens(task, spec: RunSpec, model=None) -> torch.Tensor:
    """The fixed probe sequence of a run, ``LongTensor`` ``(1, T)`` on the CPU (design choice).

    Word problems (a task with ``sample_batch`` and no ``tokens``): ``T = min(PROBE_POSITIONS,
    max(32, seq_len))`` group elements drawn with a private generator seeded 4321 (never the run's or
    torch's global generator). Language-model tasks: the first ``T = PROBE_POSITIONS`` tokens of the
    validation split (the training split when the validation split is shorter than 2 tokens). ``T`` is
    capped at the model's ``max_len`` for learned position tables. Raises ``ValueError`` for a task with
    neither form or without tokens."""
    cap = PROBE_POSITIONS
    cfg = dict(getattr(model, "config", {}) or {})
    max_len = cfg.get("max_len")
    if isinstance(max_len, int) and cfg.get("positions", "learned") == "learned":
        cap = min(cap, max_len)
    if hasattr(task, "tokens"):
        toks = task.tokens("valid")
        if toks.numel() < 2:
            toks = task.tokens("train")
        toks = toks[:cap]
    elif hasattr(task, "sample_batch"):
        n = min(cap, max(32, int(spec.seq_len)))
        toks = task.sample_batch(1, n, torch.Generator().manual_seed(4321))[0][0]
    else:
        raise RunError(f"no probe sequence for a task of type {type(task).__name__}")
    if toks.numel() < 1:
        raise RunError("the task has no tokens to probe the model with")
    return toks.reshape(1, -1).long().cpu()


def probe_figure(tr) -> tuple[str, str] | None:
    """``(figure name, view slug)`` drawn while a run of this trace's kind trains, or None when it has no
    geometry view: the ``probe`` of the family whose geometry the trace records (``Family.trace``; OSM ->
    ``phase_circle``, CEM -> ``energy_descent``, Grassmann -> ``plane_distances``: one 2-D figure per family
    that reads at half width), any other trace with attention -> ``attention_maps``, else None (e.g. an
    LSTM). Design choice."""
    fam = getattr(tr, "family", None)
    for family in FAMILIES:
        if family.probe and family.trace == fam:
            return family.probe
    if int(getattr(tr, "n_heads", 0) or 0) > 0:
        return "attention_maps", "attention"
    return None


def probe_curve(tr) -> ProbeCurve | None:
    """One quantity of a probe trace whose change over training the history chart shows (design choice):

    * OSM: geodesic distance of the last layer's state from the identity ``||log H_t||_F`` per position
      (radians; :func:`geomlab.figures.trajectory.distance_from_identity`);
    * CEM: token-mean energy change ``eps(x^t) - eps(x^0)`` of the last layer's attention sub-block per
      recursion step t (arbitrary units; Xu et al., arXiv 2605.07588);
    * Grassmann: geodesic distance between the last layer's planes at t - 1 and t, offset slot 0, per
      position (radians; Zhang, arXiv 2512.19428);
    * attention (Transformer, LLaMA): entropy of the last layer's head-mean attention row per query
      position (nats; 0 = looks at one position, ln(t + 1) = uniform);
    * otherwise None."""
    import numpy as np

    fam = getattr(tr, "family", None)
    if fam == "osm":
        from geomlab.figures.trajectory import distance_from_identity

        y = np.asarray(distance_from_identity(tr, np.arange(tr.n_positions))[-1], dtype=np.float64)
        return ProbeCurve(np.arange(len(y), dtype=np.float64), y, "position t (token)",
                          "‖log H<sub>t</sub>‖<sub>F</sub> (rad)", "distance of the state from the identity")
    if fam == "cem":
        from geomlab.figures.energy import token_mean

        m = token_mean(np.asarray(tr.energy_change(), dtype=np.float64))[-1, 0]
        return ProbeCurve(np.arange(len(m), dtype=np.float64), m, "recursion step t",
                          "Δε (a.u.)", "mean energy change over recursion steps (last layer, attention)")
    if fam == "grassmann":
        from geomlab.figures.grassmann import position_distances

        y = np.asarray(position_distances(tr, 0)[-1], dtype=np.float64)
        return ProbeCurve(np.arange(len(y), dtype=np.float64), y, "position t (token)",
                          "d<sub>g</sub>(U<sub>t−1</sub>, U<sub>t</sub>) (rad)",
                          "plane distance between consecutive positions (last layer, slot 0)")
    if int(getattr(tr, "n_heads", 0) or 0) > 0:
        w = np.asarray(tr.attention_weights(tr.n_layers - 1), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.where(w > 0, w * np.log(w), 0.0).sum(-1)
        return ProbeCurve(np.arange(len(ent), dtype=np.float64), ent, "query position t (token)",
                          "attention entropy (nats)", "entropy of the attention rows (last layer, mean over heads)")
    return None


def _thin_history(hist: list, keep: int) -> list:
    """Drop interior entries of ``hist`` (``(step, curve)`` sorted by step) whose removal leaves the smallest
    gap, until ``keep`` remain: the first and newest probe stay, the rest spread over the run."""
    hist = list(hist)
    while len(hist) > max(2, keep):
        gaps = [hist[i + 1][0] - hist[i - 1][0] for i in range(1, len(hist) - 1)]
        hist.pop(1 + gaps.index(min(gaps)))
    return hist


def draw_probe(tr, step: int, version: int, history: list, kind: str, trace_ms: float = 0.0,
               keep: int = 6) -> tuple[Probe, list]:
    """The :class:`Probe` of trace ``tr`` (the weights of optimiser ``step``, copy ``version``, traced in
    ``trace_ms`` milliseconds) of a run of model ``kind``: its figure (:func:`probe_figure`) and curve
    (:func:`probe_curve`), with ``history`` (``[(step, ProbeCurve), ...]`` of earlier probes) extended by
    this curve and thinned to ``keep`` entries. Returns ``(probe, new history)``. A figure that cannot be
    drawn comes back as a probe with a ``message``, never raised. Source: design choice."""
    choice = probe_figure(tr)
    try:
        curve = probe_curve(tr)
    except Exception:  # noqa: BLE001 - the history is optional
        curve = None
    if curve is not None:
        history = _thin_history([h for h in history if h[0] < step] + [(step, curve)], keep)
    shown = tuple(history) if curve is not None else ()
    if choice is None:
        return Probe(step, version, tr, curve=curve, history=shown, trace_ms=trace_ms,
                     message=f"{kind} has no geometry view (no group state, energy, planes or "
                             "attention to draw); its loss curves are all there is to watch."), history
    name, slug = choice
    from geomlab.teach import views

    t0 = time.perf_counter()
    try:
        cursor = tr.n_positions - 1 if name == "phase_circle" else None  # the state after the whole probe
        view = views.build_figure(tr, name, views.default_controls(slug, tr), cursor)
        from geomlab.figures._animation import without_cursor

        view = view._replace(caption=without_cursor(view.caption))  # the Train page has no token cursor
    except Exception as exc:  # noqa: BLE001 - e.g. a FigureError for a degenerate probe
        return Probe(step, version, tr, name, curve=curve, history=shown, trace_ms=trace_ms,
                     message=f"the {name} figure could not be drawn: {exc}"), history
    return Probe(step, version, tr, name, view, curve, shown, trace_ms, 1000 * (time.perf_counter() - t0)), history
