"""OSM tangent figures: update magnitudes of an OSM model (Nunley, arXiv 2602.18417).

``||Phi||`` is the Frobenius norm ``sqrt(Re tr(Phi^* Phi))`` of a Lie-algebra element, i.e. the norm of
the group's ``inner`` (Nunley, arXiv 2602.18417); for a skew matrix it is the geodesic length of
``exp(Phi)`` (radians). ``tangents_raw`` is the update before tangent mixing, ``tangents`` after mixing and step size.

The *share moved between directions* (design choice) is ``1 - cos^2`` of the angle between raw and mixed
update, ``1 - <Delta, Phi>^2 / (||Delta||^2 ||Phi||^2)``: 0 when mixing only rescales the update (identity
mixing ``Gamma = eta Id``), 1 when it turns it to an orthogonal direction; NaN where either is zero.
"""

from __future__ import annotations

import numpy as np

from geomlab.figures._chart import FigureBuilder, FigureError, Chart, finish
from geomlab.figures._style import (
    COLUMN_HOVER, DIVERGING, SEQUENTIAL, add_cursor_line, colour, hover_tokens, token_ticks,
)
from geomlab.figures._sampling import (
    WINDOW, blank, check_cursor, check_index, finite_abs_max, finite_max, missing_note, nonfinite_count, window,
    window_note,
)
from geomlab.figures.catalog import OSM_SRC, Explanation, figure, has_tangents, one_layer, several_layers
from geomlab.core.markup import md_label
from geomlab.trace import OSMTrace

SUBSTEP_NAMES = ("attention", "grounding")


def _tangent_trace(tr) -> OSMTrace:
    if not isinstance(tr, OSMTrace) or not tr.has_tangents:
        raise FigureError("this view needs an OSM trace with 'tangents' and 'tangents_raw'")
    return tr


def tangent_norms(tr: OSMTrace, mixed: bool = True) -> np.ndarray:
    """``[layer, substep, position]`` Frobenius norms of the tangent updates (radians); ``mixed=False``
    for ``tangents_raw``."""
    return _tangent_trace(tr).tangent_norms(mixed)


def mixing_share_values(tr: OSMTrace) -> np.ndarray:
    """``[layer, substep, position]`` share of each update that mixing moved between directions, in
    [0, 1]: ``1 - <raw, mixed>^2 / (||raw||^2 ||mixed||^2)`` with ``<A, B> = Re tr(A^* B)``; NaN where a norm
    is below 1e-12 or a recorded value is not finite."""
    tr = _tangent_trace(tr)
    ip = tr.tangent_inner()
    na, nb = tr.tangent_norms(False) ** 2, tr.tangent_norms(True) ** 2
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        share = 1.0 - ip ** 2 / (na * nb)
    share = np.clip(blank(share), 0.0, 1.0)
    share[(na < 1e-24) | (nb < 1e-24) | ~np.isfinite(na * nb * ip)] = np.nan
    return share


def _missing_positions(tr: OSMTrace, idx: np.ndarray) -> int:
    """Shown positions where a recorded tangent statistic (norm before/after mixing, inner product) is not
    finite."""
    return nonfinite_count(tr.tangent_stats[..., idx], axis=-1)


def _substep_name(tr: OSMTrace, s: int) -> str:
    if tr.tangent_shape[1] == 1:
        return "update"
    return SUBSTEP_NAMES[s] if s < len(SUBSTEP_NAMES) else f"substep {s}"


@figure(click="position", label="update sizes (heatmap)", applies=has_tangents, default_if=several_layers, explain=Explanation(
    r"\lVert \Phi_t \rVert_F \ \text{per layer and position}",
    "Colour = update size, before tangent mixing (the raw pull) and after it.",
    "Tokens or layers with large updates; columns that are dark everywhere.",
    ("Tangent update", "Tangent mixing"), f"{OSM_SRC}"))
def tangent_heatmap(tr: OSMTrace, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Heatmaps of ``||Phi_t||`` (radians), rows = layers, columns = positions; one row of panels per
    substep (attention, grounding), left before mixing, right after. Shared colour range per substep, over
    every position; the window of ``size`` positions around the cursor drawn
    (:func:`~geomlab.figures._sampling.window`).
    Traces: for each substep s, ``raw`` then ``mixed`` heatmap."""
    tr = _tangent_trace(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    raw, mixed = blank(tangent_norms(tr, mixed=False)), blank(tangent_norms(tr, mixed=True))
    idx = window(tr.n_positions, cursor, size)
    n_sub = raw.shape[1]
    L = raw.shape[0]
    titles = []
    for s in range(n_sub):
        titles += [f"{_substep_name(tr, s)}: before mixing", f"{_substep_name(tr, s)}: after mixing"]
    fig = FigureBuilder.grid(rows=n_sub, cols=2, subplot_titles=titles, horizontal_spacing=0.12,
                        vertical_spacing=0.2 if n_sub > 1 else 0.1)
    layers = np.arange(L)
    hov = np.array(hover_tokens(tr.labels, idx))
    text = np.broadcast_to(hov, (L, len(idx)))
    for s in range(n_sub):
        # over every position (the colour scale stays put as the window moves) and finite values only (a NaN
        # leaves a gap)
        zmax = finite_max(raw[:, s], mixed[:, s])
        for c, (vals, what) in enumerate(((raw, "before mixing"), (mixed, "after mixing")), start=1):
            fig.add_trace(dict(type="heatmap",
                z=vals[:, s][:, idx], x=idx, y=layers, colorscale=SEQUENTIAL, zmin=0, zmax=zmax,
                text=text, name=f"{_substep_name(tr, s)} {what}",
                colorbar={"title": {"text": "rad"}, "len": 1.0 / n_sub, "y": 1 - (s + 0.5) / n_sub,
                          "x": 1.02} if c == 2 else None,
                showscale=c == 2,
                hovertemplate=(f"{_substep_name(tr, s)} {what}<br>layer %{{y}}, position %{{text}}"
                               "<br>‖Φ‖ = %{z:.4f} rad<extra></extra>")), row=s + 1, col=c)
            fig.update_yaxes(title_text="layer", tickmode="array", tickvals=layers.tolist(), row=s + 1, col=c)
            fig.update_xaxes(title_text="position t (token)", row=s + 1, col=c,
                             **token_ticks(tr.labels, idx, 8))
            add_cursor_line(fig, cursor, row=s + 1, col=c)
    cap = ("Size of each state update $\\lVert\\Phi_t\\rVert$ (radians of rotation) per layer and position, before "
           "tangent mixing (the raw pull) and after it (what was exponentiated)."
           + window_note(tr.n_positions, idx)
           + missing_note(_missing_positions(tr, idx)))
    return finish(fig, "Tangent update magnitudes ‖Φ<sub>t</sub>‖", cap, "tangent_heatmap", height=330 * n_sub + 60)


@figure(click="position", label="update sizes by layer", applies=has_tangents, controls=("layer",), explain=Explanation(
    r"\lVert \Phi_t \rVert_F,\ \lVert \Delta_t \rVert_F",
    "Update size per position, one colour per layer; solid after mixing, dotted before.",
    "The ratio of solid to dotted: how much mixing amplifies or damps each layer.",
    ("Tangent update", "Tangent mixing"), f"{OSM_SRC}"))
def tangent_lines(tr: OSMTrace, cursor: int | None = None, size: int = WINDOW, layer: int | None = None) -> Chart:
    """``||Phi_t||`` against position, one solid line per layer after mixing and a dotted one before, one
    panel per substep, over the window of ``size`` positions around the cursor. ``layer``: the layer whose
    lines are drawn thicker, ``▸`` before its name (the one the view's one-layer figures show; every layer
    is drawn); None, or a model of one layer: all alike. :class:`FigureError` when ``layer`` is out of range. Traces per panel: for
    each layer, ``mixed`` then ``raw``."""
    tr = _tangent_trace(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    raw, mixed = blank(tangent_norms(tr, mixed=False)), blank(tangent_norms(tr, mixed=True))
    idx = window(tr.n_positions, cursor, size)
    n_sub = raw.shape[1]
    if layer is not None:
        layer = check_index("layer", layer, raw.shape[0])
        layer = layer if raw.shape[0] > 1 else None  # one layer: nothing to tell apart
    hov = hover_tokens(tr.labels, idx)
    fig = FigureBuilder.grid(rows=n_sub, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=[_substep_name(tr, s) for s in range(n_sub)])
    for s in range(n_sub):
        for l in range(raw.shape[0]):
            mark = "▸ " if l == layer else ""
            for vals, dash, what in ((mixed, "solid", "after mixing"), (raw, "dot", "before mixing")):
                fig.add_trace(dict(type="scatter",
                    x=idx, y=vals[l, s, idx], mode="lines",
                    line={"color": colour(l), "dash": dash, "width": 3.5 if mark else 1.5},
                    name=f"{mark}layer {l} {what}", legendgroup=f"L{l}{what}", showlegend=s == 0, text=hov,
                    hovertemplate=(f"layer {l} {_substep_name(tr, s)} {what}<br>position %{{text}}"
                                   "<br>‖Φ‖ = %{y:.4f} rad<extra></extra>")), row=s + 1, col=1)
        fig.update_yaxes(title_text="‖Φ<sub>t</sub>‖<sub>F</sub> (rad)", rangemode="tozero", row=s + 1, col=1)
        add_cursor_line(fig, cursor, row=s + 1, col=1)
    fig.update_xaxes(title_text="position t (token)", row=n_sub, col=1, **token_ticks(tr.labels, idx))
    cap = ("Update size per position, one colour per layer: solid after tangent mixing, dotted before."
           + (f" Every layer is drawn; the thick lines (▸) are layer {layer}, the one the Layer control picks for "
              "the figures below." if layer is not None else "")
           + window_note(tr.n_positions, idx) + missing_note(_missing_positions(tr, idx)))
    return finish(fig, "Tangent update magnitudes by layer", cap, "tangent_lines", height=280 * n_sub + 80,
                  **COLUMN_HOVER)


@figure(click="position", label="share turned by mixing", applies=has_tangents, default=False, explain=Explanation(
    r"1 - \cos^2\angle(\Delta_t, \Phi_t)",
    "How much tangent mixing turned each update into other directions (0 = only rescaled, 1 = turned orthogonal).",
    "Values near 0: mixing acts like a step size; clearly above 0: it reroutes updates.",
    ("Tangent mixing",), f"{OSM_SRC}; design choice"))
def mixing_share(tr: OSMTrace, cursor: int | None = None, size: int = WINDOW) -> Chart:
    """Share of each update that tangent mixing moved between directions (:func:`mixing_share_values`, in [0, 1])
    against position, one line per layer and substep (dashed = grounding), over the window of ``size``
    positions around the cursor."""
    tr = _tangent_trace(tr)
    cursor = check_cursor(cursor, tr.n_positions)
    share = mixing_share_values(tr)
    idx = window(tr.n_positions, cursor, size)
    hov = hover_tokens(tr.labels, idx)
    fig = FigureBuilder()
    for layer in range(share.shape[0]):
        for s in range(share.shape[1]):
            fig.add_trace(dict(type="scatter",
                x=idx, y=share[layer, s, idx], mode="lines",
                line={"color": colour(layer), "dash": "solid" if s == 0 else "dash"},
                name=f"layer {layer} {_substep_name(tr, s)}", text=hov,
                hovertemplate=(f"layer {layer} {_substep_name(tr, s)}<br>position %{{text}}"
                               "<br>share turned = %{y:.3f}<extra></extra>")))
    fig.update_yaxes(title_text="share moved to other directions (fraction)", range=[-0.02, 1.02])
    fig.update_xaxes(title_text="position t (token)", **token_ticks(tr.labels, idx))
    add_cursor_line(fig, cursor)
    cap = ("How much tangent mixing turned each update rather than rescaling it: $1 - \\cos^2$ of the angle "
           "between the update before and after mixing (0 = only rescaled, 1 = turned to an orthogonal "
           "direction)." + window_note(tr.n_positions, idx) + missing_note(_missing_positions(tr, idx)))
    return finish(fig, "Share of each update moved between directions", cap, "mixing_share", **COLUMN_HOVER)


def _torus_generator(tr: OSMTrace, layer: int, substep: int, t: int, cursor: int | None, raw: np.ndarray,
                     mixed: np.ndarray) -> Chart:
    """:func:`generator_heatmap` on the torus, whose algebra is the imaginary diagonals Φ = i diag(θ): the
    phase speeds θ_a (radians) per axis a as bars, before and after mixing, instead of a d x d matrix whose
    off-diagonal entries are all 0 (design choice). Traces ``"before mixing (θ)"``, ``"after mixing (θ)"``."""
    d = tr.d
    theta = {what: np.imag(np.diagonal(A)).astype(np.float64) for what, A in (("before mixing", raw),
                                                                           ("after mixing", mixed))}
    n_bad = sum(int((~np.isfinite(v)).sum()) for v in theta.values())
    fig = FigureBuilder()
    for k, (what, vals) in enumerate(theta.items()):
        fig.add_trace(dict(type="bar", x=np.arange(d), y=blank(vals), name=f"{what} (θ)",
                           marker={"color": colour(k)}, meta="cursor" if t == cursor else None,
                           hovertemplate=(f"{what}: θ[%{{x}}] = %{{y:.4f}} rad<br>position {t} "
                                          f"'{tr.labels[t]}'<extra></extra>")))
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text="axis a (diagonal entry)", dtick=1 if d <= 16 else None)
    fig.update_yaxes(title_text="θ<sub>a</sub> (rad)", zeroline=True)
    step = _substep_name(tr, substep)
    what_step = "update" if step == "update" else f"{step} update"
    cap = (f"The {what_step} $\\Phi_t$ of layer {layer} at position {t} '{md_label(tr.labels[t])}'. On the torus "
           "the Lie algebra is the imaginary diagonal matrices, $\\Phi_t = i\\,\\mathrm{diag}(\\theta)$: axis $a$ "
           "turns its own phase by $\\theta_a$ radians and every off-diagonal entry is exactly 0, so the bars are "
           "the whole matrix, before and after tangent mixing." + missing_note(n_bad, "entries"))
    return finish(fig, f"Update generator Φ<sub>t</sub> at position {t} '{tr.labels[t]}'", cap, "generator_heatmap",
                  height=380)


@figure(label="update generator at the cursor", applies=has_tangents, controls=("layer", "substep"),
        default_if=one_layer, explain=Explanation(
    r"\Phi_t \in \mathfrak{g}\ (d \times d)",
    "The update at the cursor as a matrix: entry $(a, b)$ is the rotation speed in the plane of axes $a$ and $b$ "
    "(radians). On the torus, bars: one phase speed per axis (the algebra is the imaginary diagonals).",
    r"Skew symmetry ($\Phi^\top = -\Phi$ for real groups); which planes (torus: which axes) carry the rotation, "
    "before and after mixing.",
    ("Lie algebra", "Tangent mixing"), f"{OSM_SRC}"))
def generator_heatmap(tr: OSMTrace, layer: int = -1, substep: int = 0, cursor: int | None = None) -> Chart:
    """The Lie-algebra update Φ_t at one position as a d x d matrix (a heatmap of the
    skew/Hermitian generator): before mixing (left) and after mixing (right, what was exponentiated);
    complex groups get a second row for the imaginary part. Signed, colour-blind-safe diverging scale
    centred at 0, shared range; entries in radians. ``cursor`` picks the position (default: the last).
    Traces: ``"before mixing (Re)"``, ``"after mixing (Re)"`` and, for complex states, the ``(Im)`` pair.
    Raises :class:`FigureError` for a trace without tangents or a bad layer/substep/cursor."""
    tr = _tangent_trace(tr)
    L, S, _ = tr.tangent_shape
    layer = check_index("layer", layer, L)
    substep = check_index("substep", substep, S)
    cursor = check_cursor(cursor, tr.n_positions)
    t = tr.n_positions - 1 if cursor is None else cursor
    raw, mixed = tr.tangent_at(layer, substep, t, mixed=False), tr.tangent_at(layer, substep, t, mixed=True)
    if getattr(tr, "diagonal", False):
        return _torus_generator(tr, layer, substep, t, cursor, raw, mixed)
    parts = [("Re", np.real)] + ([("Im", np.imag)] if np.iscomplexobj(mixed) else [])
    lim = finite_abs_max(raw, mixed)  # a NaN entry is left blank, not the whole range
    n_bad = int((~np.isfinite(raw)).sum() + (~np.isfinite(mixed)).sum())
    titles = [f"{w} ({p})" for p, _ in parts for w in ("before mixing", "after mixing")]
    fig = FigureBuilder.grid(rows=len(parts), cols=2, subplot_titles=titles, horizontal_spacing=0.12,
                        vertical_spacing=0.15)
    d = tr.d
    for r, (pname, f) in enumerate(parts, start=1):
        for c, (A, what) in enumerate(((raw, "before mixing"), (mixed, "after mixing")), start=1):
            fig.add_trace(dict(type="heatmap",
                z=blank(f(A).astype(np.float64)), x=np.arange(d), y=np.arange(d), colorscale=DIVERGING, zmid=0,
                meta="cursor" if t == cursor else None,
                zmin=-lim, zmax=lim, name=f"{what} ({pname})", showscale=(r == 1 and c == 2),
                colorbar={"title": {"text": "rad"}},
                hovertemplate=(f"{what}, {pname} Φ[%{{y}}, %{{x}}] = %{{z:.4f}} rad<br>position {t} "
                               f"'{tr.labels[t]}'<extra></extra>")), row=r, col=c)
            k = (r - 1) * 2 + c
            fig.update_xaxes(title_text="column j", row=r, col=c, dtick=1 if d <= 16 else None,
                             constrain="domain")
            fig.update_yaxes(title_text="row i", row=r, col=c, autorange="reversed", dtick=1 if d <= 16 else None,
                             scaleanchor=f"x{'' if k == 1 else k}", scaleratio=1, constrain="domain")
    step = _substep_name(tr, substep)
    what_step = "update" if step == "update" else f"{step} update"
    cap = (f"The {what_step} $\\Phi_t$ of layer {layer} at position {t} '{md_label(tr.labels[t])}' as a matrix in "
           "the Lie algebra (skew-symmetric or skew-Hermitian; entries in radians, blue negative, red positive): the "
           "direction the state was turned, before and after tangent mixing." + missing_note(n_bad, "entries"))
    return finish(fig, f"Update generator Φ<sub>t</sub> at position {t} '{tr.labels[t]}'", cap, "generator_heatmap",
                  height=380 * len(parts) + 60)
