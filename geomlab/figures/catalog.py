"""The figure catalogue: every per-trace figure declared once, on its own function, by :func:`figure`.

A declaration (:class:`FigureSpec`) says everything about a figure that is not its drawing: its name (the
function's name), its short label, when it applies (a predicate on the trace), the page controls it takes
as keyword arguments (keys of :data:`geomlab.teach.views.CONTROLS`), which keyword receives the token
cursor, how a page lays it out (full or half width, in the default set or under "More figures", which
figures it replaces) and its :class:`Explanation` (the quantity in LaTeX, how to read it, what to look for).
:data:`FIGURES` collects the declarations by name as the family modules are imported
(:mod:`geomlab.figures` imports them all). A view page (:mod:`geomlab.teach.views`) lists figure names only.

Adding a figure: write its function in its family module under ``@figure(...)`` and list its name in one
view of :data:`geomlab.teach.views.VIEWS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

OSM_SRC = "Nunley, arXiv 2602.18417"
CEM_SRC = "Xu et al., arXiv 2605.07588"
GR_SRC = "Zhang, arXiv 2512.19428"


@dataclass(frozen=True)
class Explanation:
    """What a newcomer needs next to one view or figure.

    ``maths``: the quantity as one display-LaTeX string (no dollars; ``st.latex`` draws it), empty for the
    fallback; ``read``: how to read it, ``look``: what to look for (markdown with ``$...$`` and ``[[term]]``
    glossary references, :mod:`geomlab.teach.glossary`); ``terms``: glossary terms it relies on; ``source``:
    paper and equation, or "design choice"."""

    maths: str
    read: str
    look: str
    terms: tuple[str, ...] = ()
    source: str = "design choice"
    fallback: bool = False


@dataclass(frozen=True)
class FigureSpec:
    """The declaration of one figure.

    ``name``: the figure function's name; ``label``: a short readable name (the app's "More figures" list;
    the figure's own title says more); ``applies``: whether it can be drawn for a trace; ``draw``: the
    figure function (trace first, returns a :class:`~geomlab.figures.Chart`); ``explanation``: see
    :class:`Explanation`; ``controls``: the page controls the function takes as keyword arguments;
    ``cursor_arg``: the keyword that receives the cursor (``"cursor"``, ``"position"`` or None);
    ``cursor_fallback``: on a :class:`~geomlab.figures.FigureError` at that cursor, draw it at the figure's
    default position instead (the plane interpolation needs a plane pair at the cursor); ``wide``: full
    width, else half width (two per row; figures with panels side by side are wide, at half width their
    subplot titles overlap); ``default``: shown when a page opens (the others wait under "More figures");
    ``replaces``: the figures this one takes the place of in the default set when both apply (on the torus
    the eigenvalues of H_t are its diagonal entries, so the torus angles replace the phase timeline and the
    eigenvalue circle, which draw the same angles again; both stay under "More figures"); ``shared``: a
    figure of every family (the layer lens), listed by several views; it alone never makes a view one of a
    trace's views; ``default_if``: where set, the figure opens with the page only for traces it holds for
    (a layer x position heatmap of a one-layer model is one row, the line chart beside it again: it opens
    only with two or more layers, and the figure that shows the one layer's other axis opens instead);
    ``click``: what a click on the figure chooses (:func:`click_target`): ``"position"`` (a point or cell
    stands for a position: the page's cursor moves there), ``"layer_head"`` (a panel per layer and head:
    the page opens that layer and head), None (not linked).

    Every figure marks the page's one token cursor, the 3-D scenes included, and none has an animation
    slider of its own. The browser draws a 3-D scene anew whenever its spec changes (0.5-0.8 s per cursor
    move in chromium), so the 3-D scenes are not in any default set."""

    name: str
    label: str
    applies: Callable[[Any], bool]
    draw: Callable[..., Any]
    explanation: Explanation
    controls: tuple[str, ...] = ()
    cursor_arg: str | None = "cursor"
    cursor_fallback: bool = False
    wide: bool = True
    default: bool = True
    replaces: tuple[str, ...] = ()
    shared: bool = False
    default_if: Callable[[Any], bool] | None = None
    click: str | None = None


FIGURES: dict[str, FigureSpec] = {}
"""Every declared per-trace figure by name, in import order (page order is the views' business)."""


def figure(*, label: str, applies: Callable[[Any], bool], explain: Explanation, controls: tuple[str, ...] = (),
           cursor_arg: str | None = "cursor", cursor_fallback: bool = False, wide: bool = True,
           default: bool = True, replaces: tuple[str, ...] = (), shared: bool = False,
           default_if: Callable[[Any], bool] | None = None, click: str | None = None) -> Callable:
    """Decorator declaring the function below as a figure of :data:`FIGURES` under its own name (the fields
    are those of :class:`FigureSpec`); returns the function unchanged. ``ValueError`` for a name declared
    twice. Design choice."""
    def declare(fn: Callable) -> Callable:
        if fn.__name__ in FIGURES:
            raise ValueError(f"figure {fn.__name__!r} is declared twice")
        FIGURES[fn.__name__] = FigureSpec(fn.__name__, label, applies, fn, explain, tuple(controls), cursor_arg,
                                          cursor_fallback, wide, default, tuple(replaces), shared, default_if,
                                          click)
        return fn
    return declare


CLICKS = ("position", "row", "layer_head")
"""The ways a figure's click can be read (:attr:`FigureSpec.click`)."""


def click_target(rule: str | None, click: dict | None, n_heads: int = 1) -> dict[str, int]:
    """What a click on a figure chooses, from Plotly's click data ``click`` (``x``, ``y``, ``curve``,
    ``point``, ``customdata``, as the app's live chart reports it) and the figure's ``rule``
    (:attr:`FigureSpec.click`):

    * ``"position"``: ``{"position": p}``: the point's ``customdata`` when it is a number, or the first
      number of a list (a position x position map's cell carries ``[row, column]``: the row, the query, is
      the position), else its ``x`` (a number, or a category label that starts with the position, ``"12 'a'"``);
    * ``"row"``: ``{"position": p}`` of the clicked row of a map whose rows are positions (a position x position
      map: the row is the query), read from its ``y``: a number, or a category label that starts with the
      position (such a map carries no per-cell ``customdata``: half its JSON);
    * ``"layer_head"``: ``{"layer": l, "head": h}`` of the clicked panel, the ``curve``-th of a grid of
      ``n_heads`` panels per layer, layer by layer.

    ``{}`` when the rule is None or the click carries nothing that reads as such (never an error: a click on
    a legend-only or decoration trace chooses nothing). Design choice."""
    if not click or rule is None:
        return {}
    if rule == "layer_head":
        k = click.get("curve")
        if isinstance(k, int) and not isinstance(k, bool) and k >= 0 and n_heads >= 1:
            layer, head = divmod(k, n_heads)
            return {"layer": int(layer), "head": int(head)}
        return {}
    if rule == "row":
        return _number_or_label(click.get("y"))
    cd = click.get("customdata")
    if isinstance(cd, (list, tuple)) and cd:
        cd = cd[0]
    if isinstance(cd, (int, float)) and not isinstance(cd, bool) and np.isfinite(cd) and float(cd).is_integer():
        return {"position": int(cd)}
    return _number_or_label(click.get("x"))


def _number_or_label(v: Any) -> dict[str, int]:
    """``{"position": p}`` from an axis value: a finite number (rounded), or a category label that starts with
    the position (``"12 'a'"``); ``{}`` otherwise."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v):
        return {"position": int(round(v))}
    if isinstance(v, str):
        m = re.match(r"\s*(\d+)", v)
        if m:
            return {"position": int(m.group(1))}
    return {}


# ---------------------------------------------------------------- predicates on a trace (design choice)
def is_osm(tr: Any) -> bool:
    """An orthogonal-state trace (OSM-RNN, OSMFormer)."""
    return tr.family == "osm"


def is_cem(tr: Any) -> bool:
    """A CEM trace (recorded energies)."""
    return tr.family == "cem"


def is_grassmann(tr: Any) -> bool:
    """A Grassmann-flow trace (recorded planes)."""
    return tr.family == "grassmann"


def has_tangents(tr: Any) -> bool:
    """An OSM trace with recorded tangent updates."""
    return is_osm(tr) and bool(getattr(tr, "has_tangents", False))


def several_layers(tr: Any) -> bool:
    """A trace with two or more layers (a layer axis worth a heatmap row each)."""
    return int(tr.n_layers) > 1


def one_layer(tr: Any) -> bool:
    """A trace with one layer (or none)."""
    return int(tr.n_layers) <= 1


def has_attention(tr: Any) -> bool:
    """A trace with at least one attention head."""
    return int(tr.n_heads) > 0
