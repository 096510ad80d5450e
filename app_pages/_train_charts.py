"""The Train live page's figures: the training curves of a run and of the runs overlaid on it
(:func:`curves`), and "Geometry now", the current weights traced on the run's probe sequence
(:func:`geometry`, :meth:`geomlab.live.run.LiveRun.probe`)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from geomlab.live import runner as live
from app_pages import _ui as ui
from app_pages._train_form import P


def unit(snap: live.Snapshot) -> str:
    """What one target is: ``"symbol"`` (a group element of a word problem) or ``"character"`` (text)."""
    data = str(snap.spec.get("data", ""))
    return "symbol" if snap.metric_name == "accuracy" or data.startswith("word-problem:") else "character"


def _run_name(run: live.LiveRun, current: str | None) -> str:
    """Legend name of a run in the overlay: ``this run`` or ``kind[-group] · id``."""
    if run.run_id == current:
        return "this run"
    group = f"-{run.spec.group}" if run.spec.group and live.is_osm(run.spec.kind) else ""
    return f"{run.spec.kind}{group} · {run.run_id[:6]}"


def overlay_choice(run: live.LiveRun) -> list[live.LiveRun]:
    """The runs drawn on the curves chart: this run, then the other runs of this server picked in the
    "Overlay other runs" box (shown only when there are others)."""
    others = [r for r in live.REGISTRY.recent(10) if r.run_id != run.run_id]
    if not others:
        return [run]
    labels = {r.run_id: f"{_run_name(r, None)} · {r.spec.label()} · {r.snapshot().state}" for r in others}
    key = P + "overlay"
    kept = [rid for rid in (st.session_state.get(key) or []) if rid in labels]
    if kept != (st.session_state.get(key) or []):
        st.session_state[key] = kept  # runs forgotten since: dropped before the widget sees them
    picked = st.multiselect("Overlay other runs", list(labels), key=key, format_func=labels.get,
                            placeholder="compare with runs started earlier on this server…",
                            help="Their training and validation losses are drawn on the same chart, one "
                                 "colour per run.")
    return [run] + [r for r in others if r.run_id in picked]


def curves(run: live.LiveRun, snap: live.Snapshot) -> None:
    """Training curves of this run and the runs picked in the overlay box (under the chart), then the word
    problem's validation accuracy."""
    from geomlab.figures import FigureError
    from geomlab.figures.curves import run_overlay

    chart_slot = st.container()  # the chart above its "Overlay other runs" box: in view sooner
    chosen = overlay_choice(run)
    snaps = {r.run_id: (snap if r.run_id == run.run_id else r.snapshot()) for r in chosen}
    units = {unit(s) for s in snaps.values()}
    one_unit = units.pop() if len(units) == 1 else "target"
    metric = "bpc" if all(s.metric_name == "bpc" for s in snaps.values()) else "loss"
    hists = {_run_name(r, run.run_id): snaps[r.run_id].history for r in chosen}
    if not any("loss" in h for h in snap.history):
        chart_slot.caption("The curves appear after the first logged steps.")
        return
    try:
        fig, caption = run_overlay(hists, metric=metric, unit=one_unit)
    except (FigureError, ValueError) as exc:
        chart_slot.caption(str(exc))
        return
    fig.update_layout(height=340 + 20 * max(0, len(chosen) - 1), uirevision="live")
    with chart_slot:
        ui.chart(fig, key="train-curves", filename="geomlab-training-curves")
        st.caption(caption)
    acc = [(h["step"], h["valid_accuracy"]) for h in snap.history if "valid_accuracy" in h]
    if acc:
        f2 = go.Figure(go.Scatter(x=[a for a, _ in acc], y=[b for _, b in acc], mode="lines+markers",
                                  line={"color": "#009E73"}, name="valid accuracy",
                                  hovertemplate="step %{x}: accuracy %{y:.3f}<extra></extra>"))
        f2.update_layout(title={"text": "Validation accuracy", "x": 0.01, "xanchor": "left"}, height=260,
                         template="plotly_white", margin={"l": 70, "r": 20, "t": 50, "b": 40}, uirevision="live")
        # whole steps from 0 to the last validation, as far as the curves above go (one validation point
        # must not read 39…41)
        last = max(1, max(a for a, _ in acc))
        f2.update_xaxes(title_text="optimiser step", range=[0, last], tickformat=",d", tickmode="linear",
                        tick0=0, dtick=_nice_dtick(last))  # ≤ 9 whole-step ticks, none repeated
        # a short title: a longer one ("accuracy (all positions)") is cut in the 260 px tall chart
        f2.update_yaxes(title_text="accuracy", range=[0, 1.02], automargin=True)
        ui.chart(f2, key="train-acc", filename="geomlab-accuracy")


def _nice_dtick(total: int) -> int:
    """A whole tick step 1, 2 or 5 × 10^k giving at most 8 intervals on ``0..total`` (ticks such as 375, 750,
    1,125... are rotated and hard to read)."""
    raw = max(1, -(-int(total) // 8))
    k = 1
    while True:
        for m in (1, 2, 5):
            if m * k >= raw:
                return m * k
        k *= 10


def geometry(run: live.LiveRun, snap: live.Snapshot) -> None:
    """"Geometry now": the current weights traced on the run's probe sequence (geomlab.live.runner.LiveRun.probe),
    the kind's figure and how its probe quantity changed over training."""
    import copy

    probe = run.probe()
    if probe is None:
        st.caption("The first picture appears at the next logged step (a few seconds).")
        return
    if probe.view is None:
        st.info(probe.message or "No geometry view for this run.", icon=":material/info:")
        return
    T = probe.trace.n_positions if probe.trace is not None else 0
    what = ("the group word problem's probe sequence" if unit(snap) == "symbol"
            else "the start of the validation text")
    st.markdown(f"**Weights at step {probe.step:,}** of {snap.total:,}"
                + (" · refreshed every few seconds while the run trains" if snap.active else ""))
    st.caption(f"A copy of the weights traced on {what} ({T} positions) in {probe.trace_ms:.0f} ms; the run "
               "itself is not changed by it.")
    fig = copy.deepcopy(probe.view.figure)  # the probe's figure is shared by every viewer: never changed
    fig.update_layout(uirevision="probe")
    ui.chart(fig, key="train-geometry", filename=f"geomlab-{probe.figure}-step{probe.step}")
    st.caption(probe.view.caption)
    if probe.history:
        from geomlab.figures import FigureError
        from geomlab.figures.curves import probe_history

        try:
            hfig, hcap = probe_history(probe.history)
        except FigureError as exc:
            st.caption(str(exc))
            return
        hfig.update_layout(uirevision="probe-history")
        ui.chart(hfig, key="train-geometry-history", filename="geomlab-probe-history")
        st.caption(hcap)
