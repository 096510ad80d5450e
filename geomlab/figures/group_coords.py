"""OSM state figures in the group's own coordinates: for 3 x 3 real groups (SO(3), O(3)) the rotating frame,
the columns ``H_t e_k``; for the torus T^k the angles of the diagonal entries themselves
(Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import HIGHLIGHT, SEQUENTIAL, add_cursor_line, colour, hover_tokens, token_ticks
from geomlab.figures._sampling import MAX_FRAMES_3D, WINDOW, check_cursor, check_index, window, window_note
from geomlab.figures._animation import animated_figure, animation_controls, without_play
from geomlab.figures.catalog import OSM_SRC, Explanation, figure, is_osm
from geomlab.figures.phases import MAX_ANGLE_LINES, TWO_PI_TICKS, angle_lines, angle_rows, outline_column
from geomlab.figures.trajectory import _layer_name, _osm
from geomlab.trace import OSMTrace


def _real3(tr: OSMTrace) -> bool:
    """Whether the states are real 3 x 3 matrices (a rotating frame can be drawn)."""
    return tr.d == 3 and not np.iscomplexobj(tr.state_data)


@figure(click="position", label="rotating frame (3 x 3)", applies=lambda tr: is_osm(tr) and _real3(tr), controls=("layer",),
        wide=False, default=False, explain=Explanation(
    r"H_t = [\,h_1\ h_2\ h_3\,] \in SO(3)",
    r"The three columns of a $3\times 3$ rotation drawn as arrows: the state is a rotating frame.",
    "How much the frame turns per token and around which axis.",
    ("Special orthogonal group",), "design choice"))
def so3_frame(tr: OSMTrace, layer: int = -1, cursor: int | None = None,
              max_frames: int = MAX_FRAMES_3D, size: int = WINDOW, animate: bool = False) -> Chart:
    """For 3 x 3 real states (SO(3), O(3)): the rotating frame ``H_t e_1, H_t e_2, H_t e_3`` at the cursor
    (default position 0) as three arrows from the origin, with the path of each arrow tip over the window of
    ``size`` positions around it (:func:`~geomlab.figures._sampling.window`). ``animate=True`` adds Plotly
    frames over the ``max_frames`` consecutive positions around it (Play and a slider) for a standalone
    figure; the app's pages move it with their cursor.
    Traces: 0-2 = tip paths (``customdata`` = position), 3-5 = frame axes at the cursor (``meta="cursor"``; animated).
    Raises :class:`FigureError` unless the states are real 3 x 3."""
    tr = _osm(tr)
    if tr.d != 3 or np.iscomplexobj(tr.states):
        raise FigureError(f"the rotating frame needs real 3 x 3 states (SO(3)/O(3)); this trace has "
                          f"{'complex ' if np.iscomplexobj(tr.states) else ''}{tr.d} x {tr.d}")
    layer = check_index("layer", layer, tr.n_layers)
    cursor = check_cursor(cursor, tr.n_positions)
    H = tr.states[layer].astype(np.float64)
    start = cursor if cursor is not None else 0
    pidx = window(tr.n_positions, start, size)
    idx = window(tr.n_positions, start, min(max_frames, len(pidx))) if animate else np.array([], dtype=int)
    axes = ("e₁", "e₂", "e₃")
    hov = hover_tokens(tr.labels, pidx)
    P = H[pidx]
    data = [dict(type="scatter3d",
        x=P[:, 0, k], y=P[:, 1, k], z=P[:, 2, k], mode="lines", name=f"path of H<sub>t</sub> {axes[k]}",
        line={"color": colour(k), "width": 2}, opacity=0.35, text=hov, customdata=pidx,
        hovertemplate=f"H<sub>t</sub> {axes[k]} at position %{{text}}<extra></extra>")
            for k in range(3)]

    def arrows(t: int) -> list[dict]:
        return [{"type": "scatter3d", "x": [0, H[t, 0, k]], "y": [0, H[t, 1, k]], "z": [0, H[t, 2, k]],
                 "mode": "lines+markers", "name": f"H<sub>t</sub> {axes[k]}", "meta": "cursor",
                 "line": {"color": colour(k), "width": 8},
                 "marker": {"size": [0, 5], "color": colour(k)},
                 "hovertemplate": f"H<sub>t</sub> {axes[k]} at position {t} '{tr.labels[t]}'<extra></extra>"}
                for k in range(3)]

    names = [str(t) for t in idx.tolist()]
    fig = animated_figure(data + arrows(start),
                          [{"data": arrows(t), "traces": [3, 4, 5], "name": n} for t, n in zip(idx.tolist(), names)])
    if animate:
        fig.update_layout(**animation_controls([f"{t} '{tr.labels[t]}'" for t in idx.tolist()], names,
                                               int(np.searchsorted(idx, start))))
    rng = [-1.1, 1.1]
    fig.update_layout(scene={"xaxis": {"title": {"text": "x"}, "range": rng},
                             "yaxis": {"title": {"text": "y"}, "range": rng},
                             "zaxis": {"title": {"text": "z"}, "range": rng}, "aspectmode": "cube",
                             "camera": {"eye": {"x": 1.55, "y": 1.55, "z": 1.1}}})
    cap = ("The state $H_t$ as a rotating frame: its three columns (unit vectors) drawn from the origin, with "
           "the path each one traces over the text. Press Play to watch the frame turn token by token.")
    cap += window_note(tr.n_positions, pidx, what="Paths through positions")
    if animate and len(idx) < tr.n_positions:
        cap += f" Frames: positions {idx[0]:,}–{idx[-1]:,}."
    cap = without_play(cap, animate)
    return finish(fig, f"Rotating frame of H<sub>t</sub> at {start} '{tr.labels[start]}' ({_layer_name(tr, layer)})",
                  cap, "so3_frame", height=560, margin={"l": 10, "r": 10, "t": 70, "b": 10})


@figure(click="position", label="torus angles",
        applies=lambda tr: is_osm(tr) and (getattr(tr, "group", None) or {}).get("name") == "T", controls=("layer",),
        replaces=("phase_timeline", "phase_circle"), explain=Explanation(
    r"H_t = \mathrm{diag}(e^{i\varphi_{t,1}}, \dots, e^{i\varphi_{t,d}})",
    "On the torus the state is just $d$ angles; *each angle*: every angle along the text; *flat torus*: the first "
    "two as a point on the square torus (edges wrap).",
    "The angles add (the group is abelian), never mixing; how far each moves depends on the token and, through "
    "the pull or attention, on the state.",
    ("Torus", "Abelian"), f"{OSM_SRC}"))
def torus_angles(tr: OSMTrace, layer: int = -1, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """For the torus T^k (diagonal unitary states): left, the angle of each diagonal entry against position;
    right, the first two angles as a path on the flat torus [-pi, pi]^2 (equal axes); both over the window
    of ``size`` positions around the cursor (:func:`~geomlab.figures._sampling.window`).
    Traces: k angle lines (:func:`angle_lines`) and their colour bar's carrier, then the torus points (colour
    = position over the window, ``customdata`` = position), then the cursor marker (if given).
    Raises :class:`FigureError` unless the states are diagonal (group ``T``)."""
    tr = _osm(tr)
    name = str(tr.group.get("name", ""))
    layer = check_index("layer", layer, tr.n_layers)
    if tr.diagonal:  # compact torus storage: the diagonals themselves (no d x d expansion)
        diag = tr.state_data[layer]
    else:
        H = tr.state_data
        off = H - np.einsum("...ii->...i", H)[..., None] * np.eye(tr.d)
        if name != "T" and not (np.iscomplexobj(H) and np.abs(off).max() < 1e-5):
            raise FigureError(f"torus angles need diagonal unitary states (group T); this trace is on {name or '?'}")
        diag = np.einsum("tii->ti", H[layer])
    cursor = check_cursor(cursor, tr.n_positions)
    ang = np.angle(diag)
    ang[ang <= -np.pi] = np.pi  # one convention, (-pi, pi], as groups.matrix_to_angles (-1 - 0j is +pi)
    k = ang.shape[1]
    idx = window(tr.n_positions, cursor, size)
    hov = hover_tokens(tr.labels, idx)
    # room between the panels for the torus panel's tick labels and its axis title (at 0.1 "φ2 (rad)" sits
    # over its tick labels in a 1,000 px window)
    spacing, widths = 0.14, [0.6, 0.4]
    fig = FigureBuilder.grid(rows=1, cols=2, column_widths=widths, horizontal_spacing=spacing,
                        subplot_titles=("each angle φ<sub>k</sub>", "flat torus (φ<sub>1</sub>, φ<sub>2</sub>)"))
    # one line per angle φ_k, one colour each (no repeats) with a colour bar instead of a legend of
    # k entries (angle_lines: SVG lines, not WebGL markers); both colour bars at the right edge, stacked (one
    # between the panels runs into the torus panel's tick labels at 1,000 px). Past MAX_ANGLE_LINES angles the
    # lines are a tangle (T^128: a solid block): one row per angle instead, the angle as a cyclic colour
    lines = k <= MAX_ANGLE_LINES
    if lines:
        angle_lines(fig, idx, ang[idx], hov, "φ", "angle k", bar_x=1.02, bar_len=0.44, row=1, col=1)
        fig.data[-1]["marker"]["colorbar"].update(y=1.0, yanchor="top")
    else:
        angle_rows(fig, idx, ang[idx], hov, "φ", "φ<sub>k</sub> (rad)", row=1, col=1,
                   colorbar={"x": 1.02, "xanchor": "left", "len": 0.44, "y": 1.0, "yanchor": "top"})
    b = ang[:, 1] if k > 1 else np.zeros(len(ang))
    # coloured by position: a colour bar says so (a legend entry would show one colour for all points)
    # the window's positions as SVG markers (the cursor among them)
    tidx = idx
    thov = hover_tokens(tr.labels, tidx)
    fig.add_trace(dict(type="scatter", x=ang[tidx, 0], y=b[tidx], mode="markers",
                       name="(φ<sub>1</sub>, φ<sub>2</sub>)", showlegend=False,
                                       marker={"size": 5, "color": tidx, "colorscale": SEQUENTIAL, "cmin": int(idx[0]),
                                     "cmax": max(int(idx[-1]), int(idx[0]) + 1),
                                     "colorbar": {"title": {"text": "position", "side": "right"},
                                                  "x": 1.02, "xanchor": "left", "len": 0.44, "y": 0.0,
                                                  "yanchor": "bottom",
                                                  "thickness": 12, "tickfont": {"size": 11}}},
                                       text=thov, customdata=tidx,
                                       hovertemplate="position %{text}<br>φ<sub>1</sub> = %{x:.3f} rad, "
                                                     "φ<sub>2</sub> = %{y:.3f} rad<extra></extra>"), row=1, col=2)
    if cursor is not None:
        fig.add_trace(dict(type="scatter", x=[ang[cursor, 0]], y=[b[cursor]], mode="markers", name="cursor",
                           meta="cursor", showlegend=False,
                                           marker={"size": 12, "color": HIGHLIGHT, "symbol": "circle-open",
                                         "line": {"width": 3}},
                                           hovertemplate=f"cursor {cursor} '{tr.labels[cursor]}'<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="position t (token)", row=1, col=1, **token_ticks(tr.labels, idx, 10))
    if lines:
        fig.update_yaxes(title_text="angle φ<sub>k</sub> (rad)", row=1, col=1, range=[-3.3, 3.3], **TWO_PI_TICKS)
    else:
        fig.update_yaxes(title_text="angle k", row=1, col=1, range=[0.5, k + 0.5])
    # the square torus shrinks its domain (not widens its range) where the panel is narrow, so the y axis's
    # title is placed beside the tick labels actually drawn
    fig.update_xaxes(title_text="φ<sub>1</sub> (rad)", row=1, col=2, range=[-3.3, 3.3], constrain="domain",
                     **TWO_PI_TICKS)
    fig.update_yaxes(title_text="φ<sub>2</sub> (rad)", row=1, col=2, range=[-3.3, 3.3], scaleanchor="x2",
                     scaleratio=1, constrain="domain", title_standoff=4, **TWO_PI_TICKS)
    if lines:
        add_cursor_line(fig, cursor, row=1, col=1)
    else:
        outline_column(fig, cursor, k)
    # no legend: its one entry (the cursor ring) would sit on the torus's top gridline, over any point there;
    # the caption names the ring
    fig.update_layout(showlegend=False)
    # the panels are named by their titles, not "left"/"right": a phone stacks them
    cap = ("On the torus each state is a list of independent angles (diagonal entries $e^{i\\varphi_k}$). "
           "*Each angle*: every angle along the text" + ("" if lines else f" ({k} angles: one row each, the angle "
                                                          "as a colour that wraps around like the angle)")
           + "; *flat torus*: the first two as a point on the square torus (edges wrap), coloured by position "
             "(colour bar)"
           + ("; the orange ring is the cursor." if cursor is not None else ".")
           + window_note(tr.n_positions, idx))
    # meta "phone": "stack": on a phone the app stacks the panels (side by side the square torus is ~130 px
    # wide and its axis title runs over the heatmap; the two share no axis title, app_pages/_widgets.stacked)
    return finish(fig, f"Torus angles ({_layer_name(tr, layer)})", cap, "torus_angles", height=480,
                  meta={"phone": "stack"})
