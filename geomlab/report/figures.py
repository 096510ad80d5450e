"""The report's figures: plotly figures of a results dict (:func:`figures_for`: BPC per model with the paper's
marks, speed ratios, training curves, word-problem accuracy by length) and their PNG images
(:func:`write_pngs`, through :mod:`geomlab.figures.images`: kaleido and the machine's Chrome/Chromium, offline)."""

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
    p = results.get("protocol") or {}
    # a figure seen alone says what run it is from: the reduced runs' numbers are far from the converged ones
    n_seeds = len(p.get("seeds") or [0])
    budget = "" if results.get("kind") == "converged" or not isinstance(p.get("steps"), int) else (
        f" ({p['steps']:,} steps, {n_seeds} seed{'s' if n_seeds != 1 else ''}: not converged)")
    comps = [c for c in results["comparisons"] if any(r.get("test_mean") is not None for r in c["rows"])]
    if comps:
        figs["bpc"] = _bpc_figure(comps, budget)
        figs["speed"] = _speed_figure(comps)
        if any(r.get("history") for c in comps for r in c["rows"]):
            figs["curves"] = _stacked_lines(
                [(c["title"], [(r["label"], [e["step"] for e in r["history"]],
                                [e["loss"] / math.log(2) for e in r["history"]])
                               for r in c["rows"] if r.get("history")]) for c in comps],
                "Training loss (bits per character, seed 0)" + budget, "step", "train BPC")
    curved = [c for c in results["comparisons"] if any(r.get("curves") for r in c["rows"])]
    if curved:
        def by_step(r):  # mean over seeds at the validation steps every seed has
            steps = sorted(set.intersection(*[{p[0] for p in cv} for cv in r["curves"]]))
            return steps, [sum(dict((p[0], p[2]) for p in cv)[st] for cv in r["curves"]) / len(r["curves"])
                           for st in steps]

        figs["valid_curves"] = _stacked_lines(
            [(c["title"], [(r["label"], *by_step(r)) for r in c["rows"] if r.get("curves")]) for c in curved],
            "Validation BPC by step (mean over finished seeds)", "step", "valid BPC")
        figs["time_curves"] = _stacked_lines(
            [(c["title"], [(r["label"], [p[1] / 60 for p in r["curves"][0]], [p[2] for p in r["curves"][0]])
                           for r in c["rows"] if r.get("curves")]) for c in curved],
            "Validation BPC by training time (minutes; first finished seed)", "training minutes", "valid BPC")
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


#: Report figures: width in px, px per model row, room for a section's title and axis (design choice: one
#: section under another, labels left of their own row, so a 12-model section stays readable in a PNG).
WIDTH, ROW_PX, SECTION_PX = 1100, 26, 90


def _bpc_figure(comps: list[dict[str, Any]], budget: str = ""):
    """Dot plot, one section per comparison (under each other): valid BPC (open circle), test BPC (filled, with
    the 95% interval over seeds when there is one) and the paper's test BPC (diamond), each model on a row
    of its own. The x axes start near the numbers, not at 0 (dots, not bars, so no length is implied)."""
    from plotly.subplots import make_subplots

    sections = [[r for r in c["rows"] if r.get("test_mean") is not None] for c in comps]
    heights = [ROW_PX * max(len(rows), 2) for rows in sections]
    height = 140 + sum(heights) + SECTION_PX * len(comps)
    fig = make_subplots(rows=len(comps), cols=1, row_heights=heights, subplot_titles=[c["title"] for c in comps],
                        vertical_spacing=SECTION_PX / height)
    for i, rows in enumerate(sections, start=1):
        names = [r["label"] + (" (baseline)" if r.get("baseline") else "") for r in rows]
        fig.add_scatter(x=[r.get("valid_mean") for r in rows], y=names, mode="markers", name="valid (ours)",
                        legendgroup="valid", showlegend=i == 1, row=i, col=1,
                        marker={"symbol": "circle-open", "size": 10, "color": "#6baed6", "line": {"width": 2}})
        fig.add_scatter(x=[r["test_mean"] for r in rows], y=names, mode="markers",
                        name="test (ours; bar: 95% interval over seeds)", legendgroup="test", showlegend=i == 1,
                        error_x={"type": "data", "array": [r.get("test_ci95") or 0 for r in rows], "width": 4},
                        marker={"size": 10, "color": "#08519c"}, row=i, col=1)
        paper = [(n, r["paper"]["test"]) for n, r in zip(names, rows) if (r.get("paper") or {}).get("test")]
        if paper:
            fig.add_scatter(x=[v for _, v in paper], y=[n for n, _ in paper], mode="markers", name="test (paper)",
                            legendgroup="paper", showlegend=not any(t.name == "test (paper)" for t in fig.data),
                            marker={"symbol": "diamond", "size": 11, "color": "#e6550d"}, row=i, col=1)
        fig.update_yaxes(autorange="reversed", automargin=True, row=i, col=1)
        fig.update_xaxes(title={"text": "bits per character", "standoff": 4}, row=i, col=1)
    fig.update_layout(title="Bits per character (lower is better)" + budget, height=height, width=WIDTH,
                      template="plotly_white", legend={"orientation": "h", "y": 0, "yanchor": "bottom",
                                                       "yref": "container", "x": 0},
                      margin={"t": 100, "b": 90})
    fig.update_annotations(font_size=13)
    return fig


def _speed_figure(comps: list[dict[str, Any]]):
    """Horizontal bars: each model's training tokens/s over its comparison's baseline's (same run), grouped and
    coloured by comparison, with the baseline's 1.0 dotted."""
    import plotly.colors
    import plotly.graph_objects as go

    fig = go.Figure()
    palette = plotly.colors.qualitative.Plotly
    n = 0
    for k, c in enumerate(comps):
        rows = [r for r in c["rows"] if r.get("speed_ratio") is not None]
        n += len(rows)
        fig.add_bar(y=[f"{c['key']}: {r['label']}" for r in rows], x=[r["speed_ratio"] for r in rows],
                    orientation="h", name=c["key"], marker_color=palette[k % len(palette)],
                    text=[f"{r['speed_ratio']:.2f}x" for r in rows], textposition="outside", cliponaxis=False)
    fig.add_vline(x=1.0, line_dash="dot")
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(title="training tokens/s over the baseline's (1 = as fast)")
    fig.update_layout(title="Training tokens/s relative to each comparison's baseline (same run)",
                      height=160 + ROW_PX * max(n, 2), width=WIDTH, template="plotly_white", showlegend=False,
                      margin={"t": 70})  # each bar's label names its comparison
    return fig


def _stacked_lines(sections: list[tuple[str, list[tuple[str, list, list]]]], title: str, xtitle: str,
                   ytitle: str):
    """One line plot per section ``(title, [(label, xs, ys)])``, under each other, each with its own legend
    beside it (one legend for all mixed the sections' colours). The y axis spans the lines after their first
    fifth (the steep start is cut; the HTML zooms out)."""
    import plotly.colors
    from plotly.subplots import make_subplots

    per = [max(260, 20 * len(lines) + 40) for _, lines in sections]
    height = 100 + sum(per) + SECTION_PX * len(sections)
    fig = make_subplots(rows=len(sections), cols=1, row_heights=per, subplot_titles=[t for t, _ in sections],
                        vertical_spacing=SECTION_PX / height)
    for i, (_, lines) in enumerate(sections, start=1):
        # Plotly's ten colours and four more unlike them (the zoo's twelve models repeated two of ten; Dark24
        # gave two near-identical magentas)
        palette = plotly.colors.qualitative.Plotly + ["#222A2A", "#B68100", "#750D86", "#1CA71C"]
        for k, (label, xs, ys) in enumerate(lines):
            fig.add_scatter(x=xs, y=ys, mode="lines", name=label, legend=f"legend{i}" if i > 1 else "legend",
                            line={"color": palette[k % len(palette)], "width": 2}, row=i, col=1)
        tail = [y for _, _, ys in lines for y in ys[len(ys) // 5:] if y is not None]
        if tail:
            lo, hi = min(tail), max(tail)
            pad = 0.05 * max(hi - lo, 0.05)
            fig.update_yaxes(range=[lo - pad, hi + pad], row=i, col=1)
        fig.update_yaxes(title=ytitle, row=i, col=1)
        fig.update_xaxes(title={"text": xtitle, "standoff": 4}, domain=[0, 0.62], row=i, col=1)
    legends = {}
    for i in range(1, len(sections) + 1):
        top = fig.layout[f"yaxis{'' if i == 1 else i}"].domain[1]
        legends["legend" if i == 1 else f"legend{i}"] = {"x": 0.64, "y": top, "yanchor": "top", "xanchor": "left",
                                                         "font": {"size": 11}, "tracegroupgap": 2}
    fig.update_layout(title=title, height=height, width=WIDTH, template="plotly_white", margin={"t": 80, "b": 40},
                      **legends)
    fig.update_annotations(font_size=13, x=0.31)
    return fig


def write_pngs(figs: dict[str, Any], png_dir: Path) -> dict[str, Path]:
    """PNG images of the report's figures (:func:`geomlab.figures.images.write_pngs`: kaleido and the machine's
    Chrome/Chromium, offline). Returns ``{name: png path}``; empty when no browser is available."""
    from geomlab.figures import images

    try:
        return images.write_pngs(figs, png_dir)
    except images.ImageExportError:
        return {}
