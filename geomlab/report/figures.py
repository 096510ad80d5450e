"""The report's figures: plotly figures of a results dict (:func:`figures_for`: BPC per model with the paper's
marks, speed ratios, training curves, word-problem accuracy by length) and their PNG images
(:func:`write_pngs`, through :mod:`geomlab.images`: kaleido and the machine's Chrome/Chromium, offline)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def figures_for(results: dict[str, Any]) -> dict[str, Any]:
    """Plotly figures of the run: ``bpc`` (test/valid BPC per model, paper marks), ``speed`` (tokens/s ratio),
    ``curves`` (training loss per step), ``valid_curves`` / ``time_curves`` (a converged campaign's validation
    BPC by step and by training time), ``word_problem`` (accuracy vs length per group). Returns
    ``{name: plotly Figure}`` (only those with data)."""
    import plotly.colors
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figs: dict[str, Any] = {}
    comps = [c for c in results["comparisons"] if any(r.get("test_mean") is not None for r in c["rows"])]
    if comps:
        fig = make_subplots(rows=1, cols=len(comps), subplot_titles=[c["key"] for c in comps], shared_yaxes=False)
        for i, c in enumerate(comps, start=1):
            rows = [r for r in c["rows"] if r.get("test_mean") is not None]
            x = [r["label"] for r in rows]
            fig.add_bar(x=x, y=[r["valid_mean"] for r in rows], name="valid (ours)", marker_color="#9ecae1",
                        showlegend=i == 1, row=1, col=i)
            fig.add_bar(x=x, y=[r["test_mean"] for r in rows], name="test (ours)", marker_color="#3182bd",
                        error_y={"type": "data", "array": [r["test_std"] or 0 for r in rows]},
                        showlegend=i == 1, row=1, col=i)
            px = [r["label"] for r in rows if (r.get("paper") or {}).get("test") is not None]
            py = [r["paper"]["test"] for r in rows if (r.get("paper") or {}).get("test") is not None]
            if px:
                fig.add_scatter(x=px, y=py, mode="markers", name="test (paper)", showlegend=i == 1,
                                marker={"symbol": "diamond", "size": 11, "color": "#e6550d"}, row=1, col=i)
        fig.update_layout(title="Bits per character (lower is better)", barmode="group", height=460,
                          width=max(700, 330 * len(comps)), template="plotly_white")
        figs["bpc"] = fig
        fig = go.Figure()
        for c in comps:
            rows = [r for r in c["rows"] if r.get("speed_ratio") is not None]
            fig.add_bar(x=[f"{c['key']}: {r['label']}" for r in rows], y=[r["speed_ratio"] for r in rows],
                        name=c["key"])
        fig.add_hline(y=1.0, line_dash="dot")
        fig.update_layout(title="Training tokens/s relative to each comparison's baseline (same run)",
                          height=460, width=900, template="plotly_white")
        figs["speed"] = fig
        fig = make_subplots(rows=1, cols=len(comps), subplot_titles=[c["key"] for c in comps])
        for i, c in enumerate(comps, start=1):
            for r in c["rows"]:
                h = r.get("history") or []
                if h:
                    fig.add_scatter(x=[e["step"] for e in h], y=[e["loss"] / math.log(2) for e in h], mode="lines",
                                    name=r["label"], row=1, col=i)
        fig.update_layout(title="Training loss (bits per character, seed 0)", height=420,
                          width=max(700, 330 * len(comps)), template="plotly_white")
        if any(r.get("history") for c in comps for r in c["rows"]):
            figs["curves"] = fig
    curved = [c for c in results["comparisons"] if any(r.get("curves") for r in c["rows"])]
    for name, axis, title in (("valid_curves", 0, "Validation BPC by step (mean over finished seeds)"),
                              ("time_curves", 1, "Validation BPC by training time (minutes; first finished seed)")):
        if not curved:
            break
        palette = plotly.colors.qualitative.Plotly
        fig = make_subplots(rows=1, cols=len(curved), subplot_titles=[c["key"] for c in curved])
        for i, c in enumerate(curved, start=1):
            for k, r in enumerate(r for r in c["rows"] if r.get("curves")):
                if axis == 0:  # mean over seeds at the shared validation steps
                    steps = sorted(set.intersection(*[{p[0] for p in cv} for cv in r["curves"]]))
                    ys = [sum(dict((p[0], p[2]) for p in cv)[st] for cv in r["curves"]) / len(r["curves"])
                          for st in steps]
                    xs = steps
                else:
                    xs = [p[1] / 60 for p in r["curves"][0]]
                    ys = [p[2] for p in r["curves"][0]]
                fig.add_scatter(x=xs, y=ys, mode="lines", name=r["label"], legendgroup=r["label"],
                                line={"color": palette[k % len(palette)]}, showlegend=True, row=1, col=i)
        fig.update_xaxes(title="step" if axis == 0 else "training minutes")
        fig.update_yaxes(title="valid BPC")
        fig.update_layout(title=title, height=440, width=max(700, 420 * len(curved)), template="plotly_white")
        figs[name] = fig
    wp = results.get("word_problem")
    if wp and any(r["acc"] and any(v is not None for v in r["acc"].values()) for r in wp["rows"]):
        groups = wp["groups"]
        fig = make_subplots(rows=1, cols=len(groups), subplot_titles=groups, shared_yaxes=True)
        palette = plotly.colors.qualitative.Plotly
        labels = list(dict.fromkeys(r["label"] for r in wp["rows"]))
        colour = {label: palette[k % len(palette)] for k, label in enumerate(labels)}  # one colour per model
        shown: set[str] = set()
        for i, g in enumerate(groups, start=1):
            for r in [r for r in wp["rows"] if r["group"] == g and not r.get("error")]:
                fig.add_scatter(x=wp["lengths"], y=[r["acc"].get(str(n)) for n in wp["lengths"]],
                                mode="lines+markers", name=r["label"], legendgroup=r["label"],
                                showlegend=r["label"] not in shown, line={"color": colour[r["label"]]},
                                marker={"color": colour[r["label"]]}, row=1, col=i)
                shown.add(r["label"])
            chance = next((r["chance"] for r in wp["rows"] if r["group"] == g), None)
            if chance:
                fig.add_hline(y=chance, line_dash="dot", row=1, col=i)
        fig.add_vline(x=wp["train_len"], line_dash="dash", line_color="gray")
        fig.update_xaxes(type="log", title="sequence length", tickvals=wp["lengths"],
                         ticktext=[str(n) for n in wp["lengths"]])
        fig.update_yaxes(title="final-position accuracy", range=[0, 1.02])
        fig.update_layout(title="Group word problem: accuracy by sequence length (dashed: training length)",
                          height=420, width=900, template="plotly_white")
        figs["word_problem"] = fig
    return figs


def write_pngs(figs: dict[str, Any], png_dir: Path) -> dict[str, Path]:
    """PNG images of the report's figures (:func:`geomlab.images.write_pngs`: kaleido and the machine's
    Chrome/Chromium, offline). Returns ``{name: png path}``; empty when no browser is available."""
    from geomlab import images

    try:
        return images.write_pngs(figs, png_dir)
    except images.ImageExportError:
        return {}
