"""The view pages: one :class:`ViewSpec` per page of figures, the single place a page is defined.

A view is a page of figures about one model family (Group trajectories, Tangent updates, Attention
similarity, CEM energy, Grassmann planes). Its spec says which model kinds it shows, its title and blurb,
its figures in display order (names of figures declared in :data:`geomlab.figures.FIGURES`, which say
themselves when they apply, which controls they take, their width and whether they open with the page) and
which controls the page draws (layer, head, offset slot, sub-block, substep, CEM inference steps). The app
pages, the Compare page and ``python -m geomlab trace --html`` all read it; :func:`build_figure` builds one
figure from a trace, the control values and the cursor, passing each figure only the controls it takes;
:func:`applies` decides whether a figure applies to a trace.

No streamlit and no plotly import at module level (the app imports this to list its pages); the figure
declarations are imported when a figure is looked up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from geomlab.teach.kinds import Shows, related_kinds  # noqa: F401 (related_kinds: the pages' name)

#: Every control a view can ask for: name -> what it selects (its values come from :func:`control_options`).
CONTROLS = {
    "layer": "which layer one-layer figures show (0 = first)",
    "head": "attention head (None = mean over heads)",
    "substep": "OSMFormer update shown by the generator heatmap (0 = attention, 1 = grounding)",
    "slot": "Grassmann offset slot (the pair (t, t - offset) spanning the planes)",
    "block": "CEM sub-block of the token heatmap (0 = attention, 1 = MLP)",
    "steps": "CEM recursion steps T at inference (changes the trace itself, not only the figure)",
}


@dataclass(frozen=True)
class ViewSpec:
    """One view page. ``slug`` is its URL path, ``title``/``short`` its names (page list, buttons), ``icon``
    a Material icon name string (``":material/timeline:"``), ``shows`` which model kinds it shows (by family
    and class flag, :class:`~geomlab.teach.kinds.Shows`; :attr:`kinds` lists them), ``family`` and ``blurb``
    its one-line texts, ``figures`` the names of its figures in display order (each declared in
    :data:`geomlab.figures.FIGURES`), ``controls`` the controls the page draws (keys of :data:`CONTROLS`, in
    the order they are drawn)."""

    slug: str
    title: str
    short: str
    icon: str
    shows: Shows
    family: str
    blurb: str
    figures: tuple[str, ...]
    controls: tuple[str, ...] = field(default=("layer",))

    @property
    def kinds(self) -> tuple[str, ...]:
        """The model kinds this view shows (read from the model registry), in the order its messages list
        them."""
        return self.shows.kinds(self.slug)

    @property
    def preferred_kinds(self) -> tuple[str, ...]:
        """:attr:`kinds` in the order to open this view on when any of them will do (``shows.prefer``)."""
        return self.shows.preferred(self.slug)


#: The layer lens's figures, on every view (declared ``shared``, not default: under "More figures").
LENS = ("lens_heatmap", "lens_table")

#: At most this many figures open a view (a small default set a newcomer can read, and a cheap cursor move);
#: the view's other figures are under "More figures" (:func:`default_figures`).
MAX_DEFAULT = 4
# A view's default set is its first MAX_DEFAULT applicable figures declared default, less those another
# applicable default figure replaces (the torus angles take the place of the phase timeline and the
# eigenvalue circle: one chart fewer to draw again on every cursor move).
VIEWS: dict[str, ViewSpec] = {v.slug: v for v in (
    ViewSpec("trajectories", "Group trajectories", "Trajectories", ":material/timeline:", Shows(),
             "orthogonal-state (OSM)",
             "Where the hidden state $H_t$ travels on its group: eigenvalue phases on the unit circle, distance "
             "from the identity, and a picture of the path.",
             ("phase_circle", "pca_projection", "distance_profile", "phase_timeline", "torus_angles",
              "pca_trajectory", "so3_frame", *LENS),
             ("layer",)),
    # best on an OSMFormer (attention kinds first), whose layers mix the tangents across positions
    ViewSpec("tangents", "Tangent updates", "Tangents", ":material/north_east:", Shows(prefer="attention"),
             "orthogonal-state (OSM)",
             "How big each update $\\Phi_t$ in the Lie algebra is, per position and layer, before and after "
             "tangent mixing.",
             ("tangent_lines", "tangent_heatmap", "generator_heatmap", "mixing_share", *LENS),
             ("layer", "substep")),
    # the OSMFormer first (the state similarity its scores come from is this view's own panel), then the
    # Transformer baselines and CEM, then the other kinds with attention
    ViewSpec("attention", "Attention similarity", "Attention", ":material/grid_on:",
             Shows("attention", ("osm", "transformer", "cem")),
             "attention-based (OSMFormer, CEM, Transformers)",
             "Which earlier positions each position looks at; for an OSMFormer, next to the state similarity "
             "$\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$ its scores come from.",
             ("attention_overview", "similarity_map", "attention_maps", "attends_to", "attention_row",
              "residual_updates", "residual_paths", *LENS),
             ("layer", "head")),
    # ${...}$: one group, which KaTeX does not break after "t =" at a line end (a phone showed "t =" alone)
    ViewSpec("energy", "CEM energy", "Energy", ":material/trending_down:", Shows(),
             "causal energy minimisation (CEM)",
             "Energy of each token's iterate across recursion steps ${t = 0, \\dots, T}$: a CEM layer is gradient "
             "descent on this energy, so it should go down.",
             ("energy_layer", "energy_descent", "energy_tokens", *LENS),
             ("steps", "layer", "block")),
    ViewSpec("planes", "Grassmann planes", "Planes", ":material/change_history:", Shows(),
             "Grassmann flow",
             "The 2-planes a Grassmann layer builds from pairs of positions, their Plücker coordinates, and how "
             "far apart consecutive planes are.",
             ("plane_distances", "plane_angles", "plucker_heatmap", "gate_share", "plane_similarity",
              "plane_sphere", "plane_interpolation", "plane_matrix", "decomposability_map", *LENS),
             ("layer", "slot")),
)}
"""Every view page by slug, in the order the app lists them."""

#: Every figure name of the views in one order (views in page order, figures in display order).
#: The layer lens's figures, listed by every view, come last.
FIGURE_ORDER: tuple[str, ...] = tuple(dict.fromkeys(
    [name for v in VIEWS.values() for name in v.figures if name not in LENS] + list(LENS)))


# ---------------------------------------------------------------- shape facts of a trace
def n_layers(tr: Any) -> int:
    """Number of layers a trace shows (``tr.n_layers``; 1 when it has no layer axis)."""
    return max(int(tr.n_layers), 1)


def n_heads(tr: Any) -> int:
    """Number of attention heads of a trace (``tr.n_heads``; 0 without attention)."""
    return int(tr.n_heads)


def _n_substeps(tr: Any) -> int:
    return int(tr.tangent_shape[1]) if getattr(tr, "has_tangents", False) else 0


def _n_slots(tr: Any) -> int:
    return int(getattr(tr, "n_slots", 0))


# ---------------------------------------------------------------- which figures apply
def _declared() -> dict[str, Any]:
    """:data:`geomlab.figures.FIGURES` (imported here, not at module level: it imports plotly)."""
    from geomlab.figures import FIGURES

    return FIGURES


def figure_spec(name: str):
    """The declaration (:class:`geomlab.figures.FigureSpec`) of figure ``name``; ``KeyError`` when no view
    lists it."""
    if name not in FIGURE_ORDER:
        raise KeyError(f"no view lists a figure {name!r}")
    return _declared()[name]


def applies(tr: Any, name: str) -> bool:
    """Whether figure ``name`` can be drawn for trace ``tr`` (its declared predicate; False for a name no
    view lists)."""
    spec = _declared().get(name) if name in FIGURE_ORDER else None
    return bool(spec and spec.applies(tr))


def figures_for(tr: Any) -> list[str]:
    """Names of every figure of the views that applies to ``tr``, in :data:`FIGURE_ORDER` (none when only
    ``shared`` figures apply: no view shows the trace)."""
    names = [n for n in FIGURE_ORDER if applies(tr, n)]
    return names if any(not figure_spec(n).shared for n in names) else []


def views_for_kind(kind: str) -> list[ViewSpec]:
    """The views that show model kind ``kind``, in page order."""
    return [v for v in VIEWS.values() if kind in v.kinds]


def default_view(kind: str) -> ViewSpec | None:
    """The view a checkpoint of ``kind`` opens on: of the views that show it, the most specific (fewest
    kinds; the first on a tie), e.g. CEM energy for ``cem``, Group trajectories for ``osmformer``,
    Attention similarity for ``transformer``; None for a kind no view shows. Design choice."""
    fitting = views_for_kind(kind)
    return min(fitting, key=lambda v: len(v.kinds)) if fitting else None


def view_figures(slug: str, tr: Any) -> list:
    """The declarations of the figures of view ``slug`` that apply to ``tr``, in display order
    (``KeyError``: unknown slug). A ``shared`` figure (the layer lens) is one of them only beside a figure of
    the view's own: alone it does not make the view one for ``tr``."""
    specs = [figure_spec(n) for n in VIEWS[slug].figures if applies(tr, n)]
    return specs if any(not f.shared for f in specs) else []


def default_figures(slug: str, tr: Any) -> list:
    """The figures view ``slug`` opens on for ``tr`` (a small set a newcomer can read): the first
    :data:`MAX_DEFAULT` applicable figures declared ``default`` (and whose ``default_if`` holds for ``tr``)
    and not replaced by another of them (``FigureSpec.replaces``), in display order."""
    fitting = [f for f in view_figures(slug, tr) if f.default and (f.default_if is None or f.default_if(tr))]
    replaced = {name for f in fitting for name in f.replaces}
    return [f for f in fitting if f.name not in replaced][:MAX_DEFAULT]


def more_figures(slug: str, tr: Any) -> list:
    """The applicable figures of view ``slug`` that are not in :func:`default_figures` (the app shows them
    under "More figures"), in display order."""
    shown = {f.name for f in default_figures(slug, tr)}
    return [f for f in view_figures(slug, tr) if f.name not in shown]


# ---------------------------------------------------------------- controls
def control_options(slug: str, tr: Any, controls: dict[str, Any] | None = None) -> dict[str, list]:
    """The values each figure control of view ``slug`` can take for ``tr`` (only controls with a choice to
    make: a one-layer trace gets no ``layer`` entry). ``head`` lists None (mean over heads) first.
    ``steps`` is not listed (it depends on the checkpoint, see :func:`steps_range`)."""
    spec = VIEWS[slug]
    out: dict[str, list] = {}
    if "layer" in spec.controls and n_layers(tr) > 1:
        out["layer"] = list(range(n_layers(tr)))
    if "head" in spec.controls and n_heads(tr) > 1:
        out["head"] = [None, *range(n_heads(tr))]
    if "substep" in spec.controls and _n_substeps(tr) > 1:
        out["substep"] = list(range(_n_substeps(tr)))
    if "slot" in spec.controls and _n_slots(tr) > 1:
        out["slot"] = list(range(_n_slots(tr)))
    if "block" in spec.controls and tr.family == "cem":
        out["block"] = [0, 1]
    return out


def _planes_layer(tr: Any) -> int:
    """The layer whose output draws most on its planes (:func:`geomlab.figures.grassmann.most_geometric_layer`),
    the last layer of a trace that is not a Grassmann one."""
    from geomlab.figures import FigureError
    from geomlab.figures.grassmann import most_geometric_layer

    try:
        return most_geometric_layer(tr)
    except FigureError:
        return n_layers(tr) - 1


#: The layer a view opens on where nobody chose one, by slug: a function of the trace; the last layer on the
#: others. Design choice: the Planes view opens where the planes count (a late Grassmann layer's gate keeps
#: nearly all of its input, and moving its plane hardly changes a prediction).
OPENING_LAYER = {"planes": _planes_layer}


def default_controls(slug: str, tr: Any) -> dict[str, Any]:
    """Control values of a first visit (design choice: the view's :data:`OPENING_LAYER`, else the last layer;
    mean over heads, the first substep, slot and sub-block); always has ``layer``."""
    opts = control_options(slug, tr)
    opening = OPENING_LAYER.get(slug)
    out: dict[str, Any] = {"layer": opening(tr) if opening is not None else n_layers(tr) - 1}
    for name, values in opts.items():
        if name != "layer":
            out[name] = values[0]
    return out


def clamp_controls(slug: str, tr: Any, controls: dict[str, Any]) -> dict[str, Any]:
    """``controls`` made valid for ``tr`` (e.g. Compare applies side A's controls to side B): values a trace
    does not have fall back to :func:`default_controls`; the layer is clamped to the last layer."""
    opts = control_options(slug, tr)
    out = default_controls(slug, tr)
    for name, value in controls.items():
        if name == "layer" and isinstance(value, int):
            out["layer"] = max(0, min(value, n_layers(tr) - 1))
        elif name in opts and value in opts[name]:
            out[name] = value
    return out


def match_layer(layer: int, n_from: int, n_to: int) -> int:
    """The layer of a model with ``n_to`` layers at the same relative depth as layer ``layer`` (0 = first)
    of a model with ``n_from`` layers: ``round(layer * (n_to - 1) / (n_from - 1))``, halves rounded up (the
    first layer goes to the first, the last to the last); equal layer counts keep the layer (clamped to
    ``0 .. n_to - 1``), a one-layer model on either side gives or takes layer 0. Compare applies one layer
    control to two models of different depths this way. Raises ``ValueError`` when a count is below 1.
    Source: design choice."""
    if n_from < 1 or n_to < 1:
        raise ValueError(f"layer counts must be at least 1, got {n_from} and {n_to}")
    layer = max(0, min(int(layer), n_from - 1))
    if n_from == n_to:
        return layer
    if n_from == 1 or n_to == 1:
        return 0
    return min(n_to - 1, (2 * layer * (n_to - 1) + (n_from - 1)) // (2 * (n_from - 1)))


def control_label(name: str, value: Any, tr: Any = None, controls: dict[str, Any] | None = None) -> str:
    """How a control value reads in a widget: ``"mean over heads"``, ``"head 2"``, ``"attention"`` /
    ``"grounding"`` (substep), ``"attention"`` / ``"MLP"`` (block), ``"offset 3"`` or ``"slot 1 (unused)"``
    (slot, from the trace's offsets at ``controls["layer"]``), the number otherwise."""
    if name == "head":
        return "mean over heads" if value is None else f"head {value}"
    if name == "substep":
        return {0: "attention", 1: "grounding"}.get(value, f"substep {value}")
    if name == "block":
        return "attention" if value == 0 else "MLP"
    if name == "slot":
        offsets = getattr(tr, "offsets", None)
        if offsets is None:
            return f"slot {value}"
        off = int(offsets[(controls or {}).get("layer", 0) or 0, value])
        return f"offset {off}" if off else f"slot {value} (unused)"
    return str(value)


def trained_steps(model_config: dict[str, Any]) -> int:
    """The CEM recursion steps T a checkpoint uses by default (``inference_recursion_steps`` or
    ``recursion_steps``, else 1)."""
    return int(model_config.get("inference_recursion_steps") or model_config.get("recursion_steps") or 1)


def steps_range(model_config: dict[str, Any]) -> tuple[int, int]:
    """``(1, hi)``: the inference steps T offered for a CEM checkpoint (design choice: up to
    ``max(16, 2 x trained)``)."""
    return 1, max(16, 2 * trained_steps(model_config))


# ---------------------------------------------------------------- building figures
def figure_kwargs(name: str, controls: dict[str, Any] | None = None, cursor: int | None = None) -> dict[str, Any]:
    """The keyword arguments figure ``name`` receives: the controls it takes (None values left out) and the
    cursor under its ``cursor_arg``. Also the figure's cache key (with the name)."""
    spec = figure_spec(name)
    kw = {k: (controls or {}).get(k) for k in spec.controls}
    kw = {k: v for k, v in kw.items() if v is not None}
    if spec.cursor_arg and cursor is not None:
        kw[spec.cursor_arg] = int(cursor)
    return kw


def build_figure(tr: Any, name: str, controls: dict[str, Any] | None = None, cursor: int | None = None):
    """Figure ``name`` of trace ``tr`` as a :class:`geomlab.figures.Chart` ``(figure, caption)``.

    ``controls``: control values (extra keys ignored, missing ones take the figure's defaults);
    ``cursor``: the highlighted position. Raises :class:`geomlab.figures.FigureError` (a ``ValueError``) when
    the figure does not apply or an argument is out of range; ``KeyError`` for an unknown figure."""
    from geomlab.figures import FigureError

    spec = figure_spec(name)
    kw = figure_kwargs(name, controls, cursor)
    if spec.cursor_fallback and spec.cursor_arg in kw:
        try:
            return spec.draw(tr, **kw)
        except FigureError:
            kw.pop(spec.cursor_arg)
    return spec.draw(tr, **kw)


def build_view(tr: Any, slug: str, controls: dict[str, Any] | None = None, cursor: int | None = None,
               skip_errors: bool = True) -> dict[str, Any]:
    """Every applicable figure of view ``slug`` for ``tr`` as ``{name: Chart}`` in display order, with
    ``controls`` over :func:`default_controls`. Figures that cannot be drawn for this particular trace (a
    ``FigureError``, e.g. no plane pair in a one-character text) are left out unless ``skip_errors`` is
    False."""
    from geomlab.figures import FigureError

    ctl = clamp_controls(slug, tr, controls or {})
    out: dict[str, Any] = {}
    for f in view_figures(slug, tr):
        try:
            out[f.name] = build_figure(tr, f.name, ctl, cursor)
        except FigureError:
            if not skip_errors:
                raise
    return out


def all_figures(tr: Any, cursor: int | None = None) -> dict[str, Any]:
    """Every figure of :func:`figures_for` as ``{name: Chart}`` with the figures' default arguments
    (``cursor`` passed to those that take it; ``plane_interpolation`` uses it as its position when it has a
    plane pair there). Figures that cannot be drawn for this particular trace (a ``FigureError``, e.g. no
    plane pair in a very short text) are left out. The app and ``trace --html`` use :func:`build_view` (a
    view's own controls) instead; the tests and ``geomlab bench figures`` use this."""
    from geomlab.figures import FigureError

    out: dict[str, Any] = {}
    for name in figures_for(tr):
        try:
            out[name] = build_figure(tr, name, {}, cursor)
        except FigureError:
            continue
    return out


def views_of_trace(tr: Any) -> list[ViewSpec]:
    """The views with at least one figure for ``tr`` (by its figures, not its kind: a trace file of an
    unregistered kind that records a family's arrays gets that family's views)."""
    return [v for v in VIEWS.values() if view_figures(v.slug, tr)]


def check_views(names: Iterable[str] | None = None) -> list[str]:
    """Problems of the views as sentences (empty when consistent): every figure a view lists is declared in
    :data:`geomlab.figures.FIGURES` (or ``names``) and listed by one view only (unless declared ``shared``), every declared figure is on
    some view, every control a view draws is a key of :data:`CONTROLS`, every control a figure takes is one
    its view draws, and a figure replaces only figures of its own view."""
    declared = _declared()
    names = set(declared if names is None else names)
    problems = []
    seen: dict[str, str] = {}
    for v in VIEWS.values():
        for c in v.controls:
            if c not in CONTROLS:
                problems.append(f"{v.slug}: unknown control {c!r}")
        for name in v.figures:
            if name not in names or name not in declared:
                problems.append(f"{v.slug}: {name!r} is not declared in geomlab.figures.FIGURES")
                continue
            if name in seen and not declared[name].shared:
                problems.append(f"{name!r} is listed by {seen[name]} and {v.slug}")
            seen[name] = v.slug
            spec = declared[name]
            for a in spec.controls:
                if a not in v.controls:
                    problems.append(f"{v.slug}: {name!r} takes {a!r}, which the view does not offer")
            for r in spec.replaces:
                if r not in v.figures:
                    problems.append(f"{v.slug}: {name!r} replaces {r!r}, which the view does not list")
    for name in sorted(names - set(seen)):
        problems.append(f"{name!r} is declared but no view lists it")
    return problems
