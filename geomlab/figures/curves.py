"""Training curves, several runs overlaid (design choice).

A run's history is a sequence of row dicts (or a ``pandas.DataFrame``) as kept in a checkpoint's metrics
history: numeric columns such as ``step``, ``tokens``, ``loss`` / ``train_loss`` / ``valid_loss`` (nats per
character) and ``bpc`` / ``train_bpc`` / ``valid_bpc`` (bits per character). Rows without the chosen x or
metric are skipped. With ``metric="bpc"`` and a history that has only losses, BPC = loss / ln 2 is derived
(Nunley, arXiv 2602.18417).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from geomlab.core.extras import require

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import colour
from geomlab.figures._sampling import missing_note

if TYPE_CHECKING:
    import pandas as pd

X_LABELS = {"step": "optimiser step", "tokens": "training tokens (characters)"}
METRIC_LABELS = {"bpc": "bits per character", "loss": "loss (nats per character)"}
DASHES = ("solid", "dash", "dot", "dashdot")


def history_frame(history: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """A run's history as a DataFrame of numeric columns (non-numeric values become NaN).

    ``frame.attrs["nonfinite"]`` counts the rows that recorded a metric as NaN or +-inf (a diverged run), as
    opposed to rows that did not record it at all; such values are not drawn. Needs pandas (the ``app``
    extra; :class:`geomlab.core.extras.MissingExtraError` without it)."""
    pd = require("pandas", "training curves")
    if isinstance(history, pd.DataFrame):
        df = history.copy()
        bad = 0
    else:
        rows = list(history)
        df = pd.DataFrame(rows)
        bad = sum(1 for r in rows if any(isinstance(v, (int, float)) and not isinstance(v, bool)
                                          and not math.isfinite(v) for v in dict(r).values()))
    for col in df.columns:
        df[col] = pd.to_numeric(df[col], errors="coerce")
    num = df.select_dtypes("number")
    if isinstance(history, pd.DataFrame):
        bad = int(np.isinf(num.to_numpy(dtype=np.float64)).any(axis=1).sum()) if num.size else 0
    df = df.replace([np.inf, -np.inf], np.nan)
    df.attrs["nonfinite"] = int(bad)
    return df


def metric_columns(df: pd.DataFrame, metric: str) -> dict[str, pd.Series]:
    """Series to plot for ``metric`` (``"bpc"`` or ``"loss"``): every column whose name contains it, plus
    the other unit's columns converted (BPC = loss / ln 2) where the converted name is not already there;
    e.g. the trainer's ``loss`` becomes ``bpc (from loss)`` next to ``valid_bpc``."""
    other = "loss" if metric == "bpc" else "bpc"
    factor = 1 / math.log(2) if metric == "bpc" else math.log(2)
    cols = {str(c): df[c] for c in df.columns if metric in str(c).lower() and df[c].notna().any()}
    for c in df.columns:
        name = str(c)
        if other in name.lower() and df[c].notna().any() and name.replace(other, metric) not in cols:
            cols[f"{name.replace(other, metric)} (from {other})"] = df[c] * factor
    return cols


def tokens_per_step(train_config: Mapping[str, Any] | None) -> int | None:
    """Training characters per optimiser step, ``batch_size * seq_len``, from a training config (a
    checkpoint's ``train_config``); None when either is missing."""
    if not train_config:
        return None
    b, s = train_config.get("batch_size"), train_config.get("seq_len")
    return int(b) * int(s) if isinstance(b, int) and isinstance(s, int) else None


def checkpoint_history(ckpt) -> pd.DataFrame:
    """A checkpoint's metrics history (``geomlab.checkpoints.io.Checkpoint.metrics``) as a frame, with a
    ``tokens`` column (step x batch_size x seq_len) when the training config gives those."""
    df = history_frame(getattr(ckpt, "metrics", None) or [])
    per = tokens_per_step(getattr(ckpt, "train_config", None))
    if per and "step" in df.columns and "tokens" not in df.columns:
        df["tokens"] = df["step"] * per
    return df


def training_curves(runs: Mapping[str, Sequence[Mapping[str, Any]] | pd.DataFrame], x: str = "step",
                    metric: str = "bpc", log_x: bool = False) -> Chart:
    """Loss or BPC against steps or tokens, one colour per run, one dash style per series (train/valid).

    Args:
        runs: run name -> history (rows of metrics, a DataFrame, or a loaded
            ``geomlab.checkpoints.io.Checkpoint``, whose ``tokens`` are derived by :func:`checkpoint_history`).
        x: ``"step"`` or ``"tokens"``; metric: ``"bpc"`` or ``"loss"``; log_x: logarithmic x axis.

    Traces: one per (run, series) with data, named ``"{run}: {series}"``.
    Raises :class:`FigureError` for an unknown x/metric, no runs, or no run with data for them.
    """
    if x not in X_LABELS:
        raise FigureError(f"x must be one of {sorted(X_LABELS)}, got {x!r}")
    if metric not in METRIC_LABELS:
        raise FigureError(f"metric must be one of {sorted(METRIC_LABELS)}, got {metric!r}")
    if not runs:
        raise FigureError("no runs to plot")
    fig = FigureBuilder()
    n_bad = 0
    for i, (name, history) in enumerate(runs.items()):
        df = checkpoint_history(history) if hasattr(history, "metrics") else history_frame(history)
        n_bad += int(df.attrs.get("nonfinite", 0))
        if x not in df.columns:
            continue
        for j, (series, values) in enumerate(sorted(metric_columns(df, metric).items())):
            ok = df[x].notna() & values.notna()
            if not ok.any():
                continue
            xs, ys = df[x][ok].to_numpy(), values[ok].to_numpy()
            order = np.argsort(xs, kind="stable")
            fig.add_trace(dict(type="scatter",
                x=xs[order], y=ys[order], mode="lines+markers" if ok.sum() < 30 else "lines",
                name=f"{name}: {series}", line={"color": colour(i), "dash": DASHES[j % len(DASHES)]},
                hovertemplate=(f"{name}<br>{series}<br>{X_LABELS[x]} %{{x:,}}<br>%{{y:.4f}} "
                               f"{'bits/char' if metric == 'bpc' else 'nats/char'}<extra></extra>")))
    if not fig.data:
        raise FigureError(f"no run has both {x!r} and a {metric!r} column")
    fig.update_xaxes(title_text=X_LABELS[x], type="log" if log_x else "linear")
    if not log_x:  # steps and tokens are whole numbers: no fractional ticks on short runs
        fig.update_xaxes(tickformat=",d", rangemode="tozero")
        xmax = max((float(np.nanmax(t["x"])) for t in fig.data if len(t["x"])), default=0.0)
        if xmax <= 20:  # plotly's automatic ticks go fractional below ~10 units
            fig.update_xaxes(tickmode="linear", tick0=0, dtick=1 if xmax <= 10 else 2)
    fig.update_yaxes(title_text=METRIC_LABELS[metric])
    cap = (f"{'Bits per character' if metric == 'bpc' else 'Cross-entropy loss (nats per character)'} "
           f"against {X_LABELS[x]}, one colour per run, one dash style per series (training / validation); "
           "lower is better." + missing_note(n_bad, "logged rows").replace("are left blank", "are not drawn")
           .replace("is left blank", "is not drawn"))
    return finish(fig, "Training curves", cap, "training_curves")


#: Units of one prediction target in :func:`run_overlay` (word problems predict a group element, "symbol").
UNITS = ("character", "symbol", "target")


def _series(df: pd.DataFrame, metric: str, valid: bool) -> pd.Series | None:
    """Training (``loss``) or validation (``valid_nll``, else ``valid_loss``) loss of a history frame in
    nats, or as bits (``/ ln 2``) for ``metric="bpc"`` (``valid_bpc`` used as is when there is no nll)."""
    names = ("valid_nll", "valid_loss") if valid else ("loss", "train_loss")
    for n in names:
        if n in df.columns and df[n].notna().any():
            return df[n] / math.log(2) if metric == "bpc" else df[n]
    if metric == "bpc":
        n = "valid_bpc" if valid else "train_bpc"
        if n in df.columns and df[n].notna().any():
            return df[n]
    return None


def run_overlay(runs: Mapping[str, Sequence[Mapping[str, Any]] | pd.DataFrame], metric: str = "loss",
                unit: str = "character") -> Chart:
    """Several live runs' training and validation curves on one chart: one colour per run (Okabe-Ito,
    colour-blind safe), training loss solid, validation loss dashed with markers.

    Args:
        runs: run label -> history rows as :class:`geomlab.live.runner.Snapshot` keeps them (``step``, ``loss`` in
            nats per target; validation rows ``valid_nll``/``valid_bpc``...). Rows without a step are skipped.
        metric: ``"loss"`` (nats per target) or ``"bpc"`` (bits, loss / ln 2; Nunley, arXiv 2602.18417).
        unit: what one target is, one of :data:`UNITS` (axis title and hover only).

    Traces: per run with data, ``"{run}: training"`` and, when it has validation rows,
    ``"{run}: validation"`` (same colour; ``legendgroup`` = run). Raises :class:`FigureError` for an unknown
    metric/unit, no runs, or no run with a logged loss. Design choice.
    """
    if metric not in ("loss", "bpc"):
        raise FigureError(f"metric must be 'loss' or 'bpc', got {metric!r}")
    if unit not in UNITS:
        raise FigureError(f"unit must be one of {UNITS}, got {unit!r}")
    if not runs:
        raise FigureError("no runs to plot")
    per = "bits" if metric == "bpc" else "nats"
    fig = FigureBuilder()
    for i, (name, history) in enumerate(runs.items()):
        df = history_frame(history)
        if "step" not in df.columns:
            continue
        for valid in (False, True):
            ys = _series(df, metric, valid)
            if ys is None:
                continue
            ok = df["step"].notna() & ys.notna()
            if not ok.any():
                continue
            xs, yv = df["step"][ok].to_numpy(), ys[ok].to_numpy()
            order = np.argsort(xs, kind="stable")
            what = "validation" if valid else "training"
            fig.add_trace(dict(type="scatter", x=xs[order], y=yv[order],
                               mode="lines+markers" if valid or ok.sum() < 30 else "lines",
                               name=f"{name}: {what}", legendgroup=name,
                               line={"color": colour(i), "dash": "dash" if valid else "solid"},
                               marker={"size": 6 if valid else 4},
                               hovertemplate=(f"{name}<br>{what}<br>step %{{x:,}}<br>%{{y:.4f}} {per}/{unit}"
                                              "<extra></extra>")))
    if not fig.data:
        raise FigureError("no run has logged a training loss yet")
    fig.update_xaxes(title_text=X_LABELS["step"], tickformat=",d", rangemode="tozero")
    xmax = max((float(np.nanmax(t["x"])) for t in fig.data if len(t["x"])), default=0.0)
    if xmax <= 20:
        fig.update_xaxes(tickmode="linear", tick0=0, dtick=1 if xmax <= 10 else 2)
    fig.update_yaxes(title_text=f"bits per {unit}" if metric == "bpc" else f"loss (nats per {unit})", automargin=True)
    n = len({t["legendgroup"] for t in fig.data})
    cap = (f"{'Bits' if metric == 'bpc' else 'Cross-entropy loss (nats)'} per {unit} against optimiser step"
           + (f" for {n} runs, one colour per run" if n > 1 else "")
           + "; solid: training (mean over the logging interval)"
           + (", dashed: validation" if any(t["line"]["dash"] == "dash" for t in fig.data)
              else "; no validation yet (dashed when there is)") + ". Lower is better.")
    # legend under the plot: beside it, it took a third of a half-width chart; automargin keeps the y title
    return finish(fig, "Training curves", cap, "run_overlay",
                  legend={"orientation": "h", "yanchor": "top", "y": -0.22, "x": 0},
                  margin={"l": 70, "r": 20, "t": 50, "b": 40})


def probe_history(history: Sequence[tuple[int, Any]], title: str | None = None) -> Chart:
    """How one probe quantity changed over training: one line per probe (``(step, curve)`` pairs, curve a
    :class:`geomlab.live.runner.ProbeCurve`: ``x``, ``y``, ``x_label``, ``y_label``, ``what``), coloured from dark
    (early) to light (late) along Viridis (perceptually uniform, colour-blind safe), the newest drawn thickest.

    Traces: one per probe, named ``"step N"``, oldest first. Raises :class:`FigureError` when ``history`` is
    empty. Design choice (geometry visibly changing while training)."""
    import plotly.colors as pc

    history = list(history)
    if not history:
        raise FigureError("no probe yet")
    fig = FigureBuilder()
    n = len(history)
    for k, (step, c) in enumerate(history):
        frac = 0.0 if n == 1 else k / (n - 1)
        col = pc.sample_colorscale("Viridis", [0.85 * frac])[0]  # 0.85: the palest yellow is unreadable
        newest = k == n - 1
        fig.add_trace(dict(type="scatter", x=np.asarray(c.x, dtype=np.float64), y=np.asarray(c.y, dtype=np.float64),
                           mode="lines+markers" if len(c.x) <= 16 else "lines", name=f"step {step:,}",
                           line={"color": col, "width": 3 if newest else 1.5}, marker={"size": 5},
                           hovertemplate=f"step {step:,}<br>%{{x}}: %{{y:.4f}}<extra></extra>"))
    last = history[-1][1]
    fig.update_xaxes(title_text=last.x_label)
    fig.update_yaxes(title_text=last.y_label, automargin=True)
    if len(last.x) <= 20:
        fig.update_xaxes(tickmode="linear", tick0=0, dtick=1 if len(last.x) <= 10 else 2)
    cap = (f"The {last.what} on the probe sequence at {n} moment{'s' if n > 1 else ''} of training, dark = early, "
           "light = late (thick: now).")
    return finish(fig, title or "How it changed while training", cap, "probe_history", height=360,
                  legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0},
                  margin={"l": 70, "r": 20, "t": 50, "b": 40})
