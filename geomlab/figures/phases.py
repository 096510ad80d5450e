"""OSM eigenvalue figures: the eigenvalues of the state H_t on the unit circle at the cursor and their phases
along the text (Nunley, arXiv 2602.18417), and the angle lines and rows they share with the torus angles
(:mod:`geomlab.figures.group_coords`).

The phases (``group.eigen_angles``, radians in (-pi, pi]) are conjugation invariant, so they mean the same
for every subgroup of U(d); :func:`geomlab.figures.trajectory.tracked_phases` follows each eigenvalue along
the text so that one colour reads as one eigenvalue.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, Chart, finish
from geomlab.figures._style import (
    COLUMN_HOVER, CYCLIC, HIGHLIGHT, add_cursor_line, hover_tokens, index_colorscale, index_colour_range, index_colours,
    token_ticks,
)
from geomlab.figures._sampling import MAX_FRAMES, WINDOW, check_cursor, check_index, window, window_note
from geomlab.figures._animation import animated_figure, animation_controls, without_play
from geomlab.figures.catalog import OSM_SRC, Explanation, figure, is_osm
from geomlab.figures.trajectory import _layer_name, _osm, tracked_phases
from geomlab.trace import OSMTrace

TWO_PI_TICKS = {"tickmode": "array", "tickvals": [-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi],
                "ticktext": ["−π", "−π/2", "0", "π/2", "π"]}
MAX_ANGLE_LINES = 32
"""Most angles :func:`torus_angles` and :func:`phase_timeline` draw as lines; past it, one heatmap row per
angle (:func:`angle_rows`; design choice)."""


def angle_lines(fig: FigureBuilder, idx: np.ndarray, theta: np.ndarray, hover: list[str], what: str,
                bar_title: str, bar_x: float = 1.02, bar_len: float = 0.8, row: int | None = None,
                col: int | None = None) -> None:
    """Draw angles ``theta [position, k]`` (radians) at positions ``idx`` as one SVG line per column k, in
    the colours of :func:`~geomlab.figures._style.index_colours` (no repeats), broken where an angle wraps
    across ±π; a colour bar (titled ``bar_title``, at ``bar_x``) names the colours instead of a legend of k
    entries. Lines, not WebGL markers: a WebGL chart takes about 1 s to (re)draw in headless chromium, k x
    1,024 SVG markers as long. Hover: ``what`` k, the position and the angle. Design choice."""
    k = theta.shape[1]
    cols = index_colours(k)
    for j in range(k):
        y = np.asarray(theta[:, j], dtype=np.float64)
        x = np.asarray(idx, dtype=np.float64)
        jump = np.flatnonzero(np.abs(np.diff(y)) > np.pi) + 1  # a wrap: break the line there
        if len(jump):
            y = np.insert(y, jump, np.nan)
            x = np.insert(x, jump, np.nan)
        text = np.insert(np.array(hover, dtype=object), jump, "") if len(jump) else np.array(hover)
        name = f"{what}<sub>{j + 1}</sub>" if len(what) == 1 else f"{what} {j + 1}"  # φ₁, eigenvalue 1
        fig.add_trace(dict(type="scatter", x=x, y=y, mode="lines", name=name, showlegend=False,
                           line={"color": cols[j], "width": 1.3}, text=text, connectgaps=False,
                           hovertemplate=f"position %{{text}}<br>{name}: %{{y:.3f}} rad<extra></extra>"),
                      row=row, col=col)
    scale, bar = index_colorscale(k, bar_title, x=bar_x, length=bar_len)
    # the colour bar's carrier: k invisible points with the index colours (drawn nowhere, no hover)
    fig.add_trace(dict(type="scatter", x=[None] * k, y=[None] * k, mode="markers", name="colour bar",
                       showlegend=False, hoverinfo="skip",
                       marker={"color": np.arange(k), "colorscale": scale, "colorbar": bar, "showscale": True,
                               **index_colour_range(k)}), row=row, col=col)


def _cursor_meta(trace: dict) -> dict:
    """Mark a trace as the cursor's mark (``meta="cursor"``; the tests find every figure's cursor this way)."""
    trace["meta"] = "cursor"
    return trace


@figure(click="position", label="eigenvalues on the circle", applies=is_osm, controls=("layer",), wide=False, explain=Explanation(
    r"\lambda_k(H_t) = e^{i\theta_k}",
    "Each dot is one eigenvalue of the state, on the unit circle at the token cursor; grey dots are the states "
    "before it.",
    "Dots turning together (a common rotation) or separately; jumps at particular tokens.",
    ("Eigenvalue phase",), f"{OSM_SRC}; design choice"))
def phase_circle(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
                 max_frames: int = MAX_FRAMES, animate: bool = False, size: int = WINDOW) -> Chart:
    """Eigenvalues ``exp(i theta)`` of H_t at the cursor (default position 0) on the unit circle, one colour
    per eigenvalue (the colours of :func:`phase_timeline`: eigenvalues followed along the text by
    :func:`tracked_phases`), with a faint trail of the eigenvalues at up to 800 / d consecutive positions
    around the cursor, inside the window of ``size`` positions (:func:`~geomlab.figures._sampling.window`).

    ``animate=True`` adds Plotly frames (Play/Pause and a position slider, in the browser): one per position
    of the ``max_frames`` consecutive positions around the cursor, inside the window; for a standalone
    figure; the app's pages have one cursor of their own.
    Traces: 0 = unit circle, 1 = trail (``customdata`` = [position, θ, k] of each dot: a click moves the
    cursor there; it holds the cursor's own eigenvalues, so they keep their hover). The eigenvalues at the
    cursor are layout shapes, one ring per eigenvalue named ``cursor <position> '<token>' λ<k>: θ = <angle> rad``
    (the live chart shows the name on hover): a cursor move within the trail's window
    then changes the layout only, which the browser redraws without
    recomputing the 800 dots (design choice). ``animate=True`` draws them as trace 2 instead
    (``meta="cursor"``, ``customdata`` = [position, θ, k]), which the frames replace.
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor.
    """
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    start = cursor if cursor is not None else 0
    idx = window(tr.n_positions, start, size)
    tracked = tracked_phases(tr, layer, idx)
    theta = dict(zip(idx.tolist(), tracked))
    d = tracked.shape[1]
    cols = index_colours(d)
    phi = np.linspace(0, 2 * np.pi, 181)

    def points(t: int) -> dict:
        th = theta[t]
        return _cursor_meta({
            "type": "scatter", "x": np.cos(th), "y": np.sin(th), "mode": "markers",
            "name": f"eigenvalues at {t} '{tr.labels[t]}'",
            "marker": {"size": 12, "color": cols, "line": {"width": 1.5, "color": "#333"}},
            "customdata": np.stack([np.full(d, t), th, np.arange(1, d + 1)], axis=-1),
            "hovertemplate": (f"position {t} '{tr.labels[t]}'<br>eigenvalue %{{customdata[2]}}: "
                              "θ = %{customdata[1]:.3f} rad<extra></extra>")})

    # the trail: the eigenvalues at up to 800 / d consecutive positions of the window around the cursor (where
    # the spectrum has been nearby), small
    # translucent grey on a light circle so the points that sit on it stay visible; SVG markers, bounded: each
    # one is drawn anew on every cursor move, see angle_lines
    trail_pos = window(len(idx), int(np.searchsorted(idx, start)), max(2, 800 // max(d, 1)))
    trail_th = tracked[trail_pos]
    trail_at = np.repeat(idx[trail_pos], d)  # each grey dot's position: a click there moves the cursor to it
    trail = {"type": "scatter",
             "x": np.cos(trail_th).reshape(-1), "y": np.sin(trail_th).reshape(-1), "mode": "markers",
             "name": "all positions", "marker": {"size": 6, "color": "#777777", "opacity": 0.3},
             "customdata": np.stack([trail_at, trail_th.reshape(-1), np.tile(np.arange(1, d + 1), len(trail_pos))],
                                    axis=-1),
             "text": [f"{p} '{tr.labels[p]}'" for p in trail_at],
             "hovertemplate": "position %{text}<br>eigenvalue %{customdata[2]}: θ = %{customdata[1]:.3f} rad"
                              "<extra></extra>", "showlegend": False}
    base = [dict(type="scatter", x=np.cos(phi), y=np.sin(phi), mode="lines", name="unit circle",
                 line={"color": "#d0d0d0", "width": 1}, hoverinfo="skip", showlegend=False), trail]
    if animate:
        base.append(points(start))
    fidx = window(tr.n_positions, start, min(max_frames, len(idx))) if animate else np.array([], dtype=int)
    names = [str(t) for t in fidx.tolist()]
    if animate:
        theta.update(zip(fidx.tolist(), tracked_phases(tr, layer, fidx)))
    fig = animated_figure(base, [{"data": [points(t)], "traces": [2], "name": n}
                                 for t, n in zip(fidx.tolist(), names)])
    if not animate:
        th = theta[start]
        fig.update_layout(
            # each ring's name is its hover (the live chart shows a cursor ring's name under the pointer: the
            # trail's dots of nearby positions lie under the ring too, and the closest of them would answer)
            shapes=[dict(type="circle", xref="x", yref="y", xsizemode="pixel", ysizemode="pixel",
                         xanchor=float(np.cos(a)), yanchor=float(np.sin(a)), x0=-6, x1=6, y0=-6, y1=6, fillcolor=c,
                         line={"width": 1.5, "color": "#333"},
                         name=f"cursor {start} '{tr.labels[start]}' λ{k + 1}: θ = {a:.3f} rad")
                    for k, (a, c) in enumerate(zip(th, cols))])
    else:
        fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in fidx.tolist()], names,
                                               int(np.searchsorted(fidx, start))))
    lim = 1.2
    fig.update_xaxes(title_text="Re λ", range=[-lim, lim], zeroline=True, constrain="domain", dtick=0.5)
    fig.update_yaxes(title_text="Im λ", range=[-lim, lim], zeroline=True, scaleanchor="x", scaleratio=1,
                     constrain="domain", dtick=0.5)
    # no legend: the title names the position, the caption the grey trail (at half width a legend row wraps
    # into the title)
    fig.update_layout(showlegend=False)
    cap = (f"Eigenvalues of the hidden state $H_t$ ({_layer_name(tr, layer)}) on the unit circle; their angles "
           f"(radians) are conjugation-invariant. Press Play or drag the slider to move along the text."
           + window_note(tr.n_positions, idx)
           + (f" Frames: positions {fidx[0]:,}–{fidx[-1]:,}." if animate and len(fidx) < tr.n_positions else ""))
    near = idx[trail_pos]
    cap = without_play(cap, animate) + (f" Grey: the eigenvalues at positions {near[0]:,}–{near[-1]:,}; one "
                                         "colour per eigenvalue.")
    # a short title: at half width a longer one ("of H_t ... (O(5))") is cut at the right edge
    return finish(fig, f"Eigenvalues at {start} '{tr.labels[start]}'",
                  cap, "phase_circle", height=480, margin={"l": 55, "r": 15, "t": 80, "b": 45})


def angle_rows(fig: FigureBuilder, idx: np.ndarray, theta: np.ndarray, hov, symbol: str, bar_title: str,
               row: int | None = None, col: int | None = None, colorbar: dict | None = None) -> None:
    """Angles ``theta`` ``[position, k]`` (radians, in (-pi, pi]) at positions ``idx`` as one heatmap row per
    angle ``k = 1..k`` along the text, on a cyclic colour scale (the two ends of the circle one colour): what
    :func:`torus_angles` and :func:`phase_timeline` draw past :data:`MAX_ANGLE_LINES` angles, where one line
    per angle is a solid tangle. Design choice."""
    k = theta.shape[1]
    bar = {"title": {"text": bar_title, "side": "right"}, "thickness": 12, "tickfont": {"size": 11}, **TWO_PI_TICKS,
           **(colorbar or {})}
    kw = {"row": row, "col": col} if row is not None else {}
    fig.add_trace(dict(type="heatmap", x=idx, y=np.arange(1, k + 1), z=np.asarray(theta).T, zmin=-np.pi,
                       zmax=np.pi, colorscale=CYCLIC, name=symbol, showlegend=False, colorbar=bar,
                       customdata=np.broadcast_to(np.asarray(hov, dtype=object), (k, len(idx))),
                       hovertemplate=f"position %{{customdata}}<br>{symbol}<sub>%{{y}}</sub> = %{{z:.3f}} rad"
                                     "<extra></extra>"), **kw)


def outline_column(fig: FigureBuilder, cursor: int | None, k: int, xref: str = "x", yref: str = "y") -> None:
    """The cursor's column of an :func:`angle_rows` heatmap outlined (a dashed line vanishes in its colours)."""
    if cursor is not None:
        fig.add_shape(type="rect", x0=cursor - 0.5, x1=cursor + 0.5, y0=0.5, y1=k + 0.5, xref=xref, yref=yref,
                      line={"color": HIGHLIGHT, "width": 2}, name="cursor")


@figure(click="position", label="eigenvalue phases along the text", applies=is_osm, controls=("layer",), explain=Explanation(
    r"\theta_k(t) = \arg \lambda_k(H_t)",
    r"Every eigenvalue angle of the state against position (radians, wrapped to $(-\pi, \pi]$).",
    "Steady slopes (a constant turn per token) versus steps at particular tokens.",
    ("Eigenvalue phase",), "design choice"))
def phase_timeline(tr: OSMTrace, layer: int = -1, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Eigenvalue phases (radians) of H_t against position: one line per eigenvalue (followed along the
    text, :func:`tracked_phases`; broken where it wraps across ±π), coloured per eigenvalue with a colour bar
    (:func:`angle_lines`: no colour repeats); past :data:`MAX_ANGLE_LINES` eigenvalues one heatmap row each
    (:func:`angle_rows`). Draws the window of ``size`` positions around the cursor
    (:func:`~geomlab.figures._sampling.window`).
    Traces: ``eigenvalue k`` lines, then the colour bar's carrier (or the one heatmap).
    Raises :class:`FigureError` for a non-OSM trace, a bad layer or cursor."""
    tr = _osm(tr)
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    d = tr.d
    idx = window(tr.n_positions, cursor, size)
    theta = tracked_phases(tr, layer, idx)
    fig = FigureBuilder()
    if d <= MAX_ANGLE_LINES:
        angle_lines(fig, idx, theta, hover_tokens(tr.labels, idx), "eigenvalue", "eigenvalue k")
        fig.update_yaxes(title_text="eigenvalue phase θ (rad)", range=[-np.pi - 0.1, np.pi + 0.1], **TWO_PI_TICKS)
        add_cursor_line(fig, cursor)
    else:
        angle_rows(fig, idx, theta, hover_tokens(tr.labels, idx), "θ", "θ<sub>k</sub> (rad)")
        fig.update_yaxes(title_text="eigenvalue k", range=[0.5, d + 0.5])
        outline_column(fig, cursor, d)
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    cap = (f"Angles of the {d} eigenvalues of $H_t$ ({_layer_name(tr, layer)}) at every position, in radians"
           + ("." if d <= MAX_ANGLE_LINES else ": one row each, the angle as a colour that wraps around like the "
              "angle.") + window_note(tr.n_positions, idx))
    return finish(fig, "Eigenvalue phases along the text", cap, "phase_timeline", **COLUMN_HOVER)
