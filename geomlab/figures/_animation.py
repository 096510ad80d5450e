"""Animated figures and their static form: frames that carry only what changes, the Play/Pause buttons and
position slider, and the captions of the static figure (the app's pages move a figure with their one token
cursor instead of a slider of its own). Design choices, documented in docs/views.md."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from geomlab.figures._chart import FigureBuilder


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
        except (TypeError, ValueError):
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def animated_figure(data: list, frames: list[dict]) -> FigureBuilder:
    """A figure builder from trace dicts ``data`` and frame dicts ``frames`` (each ``{"name", "data",
    "traces"}``); see :class:`FigureBuilder`.

    Frames carry only what changes: plotly.js merges a frame's trace into the trace it animates, so a
    property that has the base trace's value in every frame (style, name, mesh triangles) is left out of
    all frames (``type`` stays, for validation)."""
    frames = [dict(f) for f in frames]
    slots: dict[int, list[tuple[int, int]]] = {}  # animated trace index -> [(frame, position in frame)]
    for fi, f in enumerate(frames):
        f["data"] = [dict(t) for t in f["data"]]
        for j, ti in enumerate(f.get("traces", range(len(f["data"])))):
            slots.setdefault(ti, []).append((fi, j))
    for ti, where in slots.items():
        base = data[ti]
        keys = set.intersection(*(set(frames[fi]["data"][j]) for fi, j in where)) - {"type"}
        for key in keys:
            if key in base and all(_same(frames[fi]["data"][j][key], base[key]) for fi, j in where):
                for fi, j in where:
                    del frames[fi]["data"][j][key]
    return FigureBuilder(data=data, frames=frames)


_PLAY_SENTENCES = (
    (" Press Play or drag the slider to move along the text.", " Move the token cursor to move along the text."),
    (" Press Play to watch the frame turn token by token.", " Move the token cursor to turn it token by token."),
    (" Play moves along the text.", " The token cursor moves it along the text."),
    (" Play moves along the text", " The token cursor moves it along the text"),
    (" animated (", " drawn ("),
)
#: a view page's pointer to a figure it keeps under "More figures" (the PCA trajectory's 3-D form)
MORE_FIGURES_3D = " The 3-D projection is under More figures."


def without_cursor(caption: str) -> str:
    """``caption`` of a static figure shown outside a view page, with no token cursor and no "More figures"
    (the Train page's probe, ``geomlab trace --html``): the sentence :func:`without_play` put there about
    moving the cursor, and :data:`MORE_FIGURES_3D`, are dropped. Source: design choice."""
    for _, sentence in _PLAY_SENTENCES[:-1]:
        caption = caption.replace(sentence, "")
    return caption.replace(MORE_FIGURES_3D, "")


def without_play(caption: str, animate: bool) -> str:
    """``caption`` of a figure that can be animated, for its static form (``animate=False``, the app's: one
    cursor per page): its Play/slider sentence says the token cursor moves it instead. The caption
    strings stay as written (and as translated elsewhere); unknown wording is left alone."""
    if animate:
        return caption
    for old, new in _PLAY_SENTENCES:
        caption = caption.replace(old, new)
    return caption


def animation_controls(labels: Sequence[str], frame_names: Sequence[str], active: int,
                       duration_ms: int = 120, prefix: str = "position ") -> dict:
    """``updatemenus`` (Play/Pause) and ``sliders`` layout entries for frames named ``frame_names``,
    played in the browser (no server round trip)."""
    play = {"label": "▶ Play", "method": "animate",
            "args": [None, {"frame": {"duration": duration_ms, "redraw": True}, "fromcurrent": True,
                            "transition": {"duration": 0}}]}
    pause = {"label": "❚❚ Pause", "method": "animate",
             "args": [[None], {"frame": {"duration": 0, "redraw": False}, "mode": "immediate",
                               "transition": {"duration": 0}}]}
    steps = [{"label": lab, "method": "animate",
              "args": [[name], {"frame": {"duration": 0, "redraw": True}, "mode": "immediate",
                                "transition": {"duration": 0}}]}
             for lab, name in zip(labels, frame_names)]
    return {
        "updatemenus": [{"type": "buttons", "direction": "left", "buttons": [play, pause],
                         "x": 0.0, "y": -0.08, "xanchor": "left", "yanchor": "top", "showactive": False}],
        "sliders": [{"active": int(active), "steps": steps, "x": 0.18, "len": 0.82, "y": -0.04,
                     "currentvalue": {"prefix": prefix, "font": {"color": "#333"}, "xanchor": "right"}, "pad": {"t": 30},
                     # past ~20 steps the per-step labels overlap: hide them, the current value names the step
                     "font": {"color": "#333" if len(steps) <= 20 else "rgba(0,0,0,0)"},
                     "ticklen": 4 if len(steps) <= 20 else 0, "minorticklen": 2 if len(steps) <= 20 else 0}],
    }
