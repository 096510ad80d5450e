"""The explanations of the view pages and their figures: for every view and every figure, the quantity it
shows in LaTeX, how to read it and what to look for, with this trace's facts where one applies.

* :data:`VIEW_TEXT` (slug of :data:`geomlab.teach.views.VIEWS` -> :class:`Explanation`) and, for a figure,
  the explanation declared on its function (:data:`geomlab.figures.FIGURES`); :func:`view_explanation` and
  :func:`figure_explanation` read them, with a clear fallback for an unknown figure.
* :func:`view_maths` (the page's formula, in the family's own form: an OSMFormer's attention scores are
  :math:`\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)`, a Transformer's :math:`q_i\\cdot k_j`) and
  :func:`figure_note` (one "look for" line).
* The model's facts are in :mod:`geomlab.teach.facts`, the glossary and the ``[[term]]`` links in
  :mod:`geomlab.teach.glossary`.

Texts are Streamlit markdown with inline LaTeX between single dollars (see :mod:`geomlab.core.markup`). No
streamlit import; the app draws these in ``app_pages/_explain.py``.

Sources: the papers (OSM: Nunley, arXiv 2602.18417; CEM: Xu et al., arXiv 2605.07588; Grassmann:
Zhang, arXiv 2512.19428) with the section named in each entry; the wording is a design choice.
"""

from __future__ import annotations

from typing import Any, Iterable

from geomlab.figures import FIGURES
from geomlab.figures.catalog import CEM_SRC, GR_SRC, OSM_SRC, Explanation
from geomlab.teach.facts import _group_info, _plural, energy_rises, is_abelian, sub_block
from geomlab.teach.glossary import GLOSSARY, term_refs

_E = Explanation
VIEW_TEXT: dict[str, Explanation] = {
    "trajectories": _E(
        r"H \leftarrow H\exp(\Phi),\ \ \lambda_k(H_t) = e^{i\theta_k},\ \ "
        r"d(I, H_t) = \lVert \log H_t \rVert_F",
        "Each position $t$ has a hidden state $H_t$, a matrix in the [[Lie group]] $G$. Every update turns "
        "it by $\\exp(\\Phi)$ with $\\Phi$ in the [[Lie algebra]] (token by token in an OSM-RNN, layer by "
        "layer in an OSMFormer), so the text becomes a path on the group. The figures show that path "
        "three ways: the angles of its eigenvalues ([[eigenvalue phase|eigenvalue phases]], basis-free; on the "
        "torus the state's angles themselves), its [[geodesic distance]] from the identity, and a [[PCA]] "
        "picture (2-D here; the 3-D path is under \"More figures\").",
        "Smooth turning versus sudden jumps at particular tokens (spaces, punctuation, line ends); phases that "
        "spread round the circle (the state uses the group) or stay near 0 (little rotation); the path coming "
        "back near earlier states where the text repeats.",
        ("Lie group", "Eigenvalue phase", "Geodesic distance", "PCA"), f"{OSM_SRC}"),
    "tangents": _E(
        r"\Phi_t = \Gamma(\Delta_t) \in \mathfrak{g},\quad \Delta_t = \Pi_{\mathfrak{g}}(H_t^* \bar H_t),"
        r"\ \ \lVert \Phi_t \rVert_F",
        "Every update of an OSM is an element $\\Phi_t$ of the [[Lie algebra]] (a [[tangent update]]): first "
        "the raw pull $\\Delta_t$ toward a target (the attention average, or the token itself for grounding), "
        "then [[tangent mixing]] $\\Gamma$, then $H \\leftarrow H\\exp(\\Phi_t)$. Its norm is how far the state "
        "turns, in radians.",
        "Which tokens make big updates; whether mixing mostly rescales the pull (dotted and solid lines "
        "differ by a factor) or turns it (a high mixing share); layers that barely move (their updates near 0).",
        ("Lie algebra", "Tangent update", "Tangent mixing", "Exponential map"), f"{OSM_SRC}"),
    "attention": _E(
        r"\alpha_{ij} = \operatorname{softmax}_{j \le i}\big(S_{ij}\big),\quad S_{ij} = q_i \cdot k_j + b_{ij}",
        "Row $i$ of a map is where position $i$ looks: its [[attention]] weights on the earlier positions "
        "$j \\le i$, which sum to 1. Future positions are masked. Next to an OSMFormer's weights is the state "
        "[[similarity]] its scores come from.",
        "Diagonal bands (looking a fixed distance back, e.g. the previous character), vertical stripes "
        "(positions every later token looks at, such as the start or a space), and heads that differ.",
        ("Attention", "Similarity"), "Nunley, arXiv 2602.18417; Xu et al., arXiv 2605.07588; design choice"),
    "energy": _E(
        r"x_i^{t+1} = x_i^t - \eta\,\rho_i\,P\,\nabla_{x_i}\varepsilon(x_i^t \mid h_{1:i}),\ \ "
        r"t = 0,\dots,T-1",
        "A CEM layer does not just compute its output: it starts at the input $h_i$ and takes $T$ "
        "[[recursion step|recursion steps]] of gradient descent on an [[energy]] $\\varepsilon$. The curves show "
        "the token-mean energy at each step $t$, measured from step 0, per layer and sub-block (attention, MLP).",
        "The energy should fall at every step (the curves go down). A rise means the step size (or the "
        "[[preconditioner]]) has left the descent regime, often when more steps are run than were trained. "
        "Falling is not always healthy either: past the trained $T$, a curve that plunges ever faster, far "
        "below where the trained steps left it, while the displacement climbs to tens of $\\rho$, has "
        "overshot, and the predictions get worse. Compare steps within one layer, not levels across layers.",
        ("Energy", "Recursion step", "Preconditioner"), f"{CEM_SRC}"),
    "planes": _E(
        r"p_{ij} = z_{t,i} z_{t-\Delta,j} - z_{t,j} z_{t-\Delta,i},\ \ "
        r"m_t = \alpha_t \odot h_t + (1-\alpha_t) \odot g_t",
        "A Grassmann layer has no attention. It reduces each token to $z_t \\in \\mathbb{R}^r$, pairs it with "
        "$z_{t-\\Delta}$ (one offset $\\Delta$ per layer, or several), and describes the plane they span (a point of the "
        "[[Grassmannian]]) by its [[Plücker coordinates]]. A [[gate]] mixes that back into the residual.",
        "How far consecutive planes turn ([[principal angles]]): small at repeated patterns, large at new "
        "words; which axis pairs the planes use; how much of each layer's output the gate takes from the "
        "planes.",
        ("Grassmannian", "Plücker coordinates", "Principal angles", "Gate"), f"{GR_SRC}"),
}
"""Explanation of every view page by slug (keys = :data:`geomlab.teach.views.VIEWS`)."""
del _E

FALLBACK = Explanation(
    "", "No explanation has been written for this figure yet; its caption says what it shows.",
    "See the caption and the glossary.", (), "none", fallback=True)
"""What :func:`figure_explanation` returns for a name that is not a declared figure (every declared figure
carries its own explanation)."""


def view_explanation(slug: str) -> Explanation:
    """The explanation of view ``slug``; ``KeyError`` for a slug that is not a view."""
    return VIEW_TEXT[slug]


def figure_explanation(name: str) -> Explanation:
    """The explanation declared on figure ``name`` (:data:`geomlab.figures.FIGURES`), or :data:`FALLBACK`
    (``fallback=True``) for a name that is not a declared figure."""
    spec = FIGURES.get(name)
    return spec.explanation if spec else FALLBACK


def view_maths(slug: str, tr: Any = None) -> str:
    """The display formula of view ``slug`` for trace ``tr`` (``tr`` None: the generic form). The attention
    view gives an OSMFormer's score as the state similarity; the trajectories view the torus's angles for a
    torus trace. ``KeyError`` for an unknown slug."""
    base = VIEW_TEXT[slug].maths
    family = getattr(tr, "family", None)
    if slug == "attention" and family == "osm":
        return (r"\alpha_{ij} = \operatorname{softmax}_{j \le i}\big(S_{ij}\big),\quad S_{ij} = \beta\,"
                r"\mathrm{Re}\,\mathrm{tr}(H_i^* H_j)/d + b_{ij}")
    if slug == "trajectories" and family == "osm":
        info = _group_info(tr, None)
        if info and info[0] == "T":
            return (r"H_t = \mathrm{diag}(e^{i\varphi_{t,1}}, \dots, e^{i\varphi_{t,d}}),\quad "
                    r"\varphi \leftarrow \varphi + \phi\ \ \text{(angles add)}")
    return base


OVERSHOOT_LOOK = ("Down is not always healthy: past the trained $T$, a line that plunges ever faster while the "
                  "displacement climbs has overshot.")
"""What an overshoot looks like on the energy figures, after their "look for" line (design choice)."""

ENERGY_FIGURES = ("energy_descent", "energy_layer")
"""The energy-per-step figures, whose "look for" line :func:`figure_note` writes from the trace."""


def figure_note(name: str, tr: Any = None) -> str:
    """One line under figure ``name``: what to look for, with a fact of this trace where one applies (the
    torus's independent angles, an energy that rose at a named step, a descent that runs away past the
    trained steps: :func:`geomlab.whatif.energy.overshoot`; the energy figures say what an overshoot looks
    like, :data:`OVERSHOOT_LOOK`). Markdown with ``$...$``."""
    ex = figure_explanation(name)
    note = ex.look
    if name in ENERGY_FIGURES:
        return _energy_note(name, note, tr)
    if tr is None:
        return note
    elif name in ("phase_circle", "phase_timeline") and getattr(tr, "family", "") == "osm":
        info = _group_info(tr, None)
        if info and is_abelian(*info):
            note += " Here the group is abelian, so each angle moves on its own."
    return note


def _energy_note(name: str, look: str, tr: Any) -> str:
    """The "look for" line of energy figure ``name`` (:func:`figure_note`): where the mean energy rose or
    where it runs away; else that every line goes down (the whole descent; ``look``, the figure's own line,
    for one layer), then :data:`OVERSHOOT_LOOK`."""
    if tr is None:
        return f"{look} {OVERSHOOT_LOOK}"
    from geomlab.whatif.energy import overshoot

    rises = energy_rises(tr)
    if rises:
        l, b, t, _ = rises[0]
        return (f"Here the mean energy rose at {_plural(len(rises), 'step')} (first: layer {l}, "
                f"{('attention', 'MLP')[b] if b < 2 else b}, step {t}): look for the red triangles.")
    o = overshoot(tr)
    if o is not None:
        runs = ", ".join(sub_block(*lb) for lb in ((o.layer, o.block), *o.others))
        return (f"Every line goes down, but past the trained $T = {o.trained}$ the descent overshoots: a line "
                f"that plunges ever faster ({runs}) while the displacement climbs. Lower is not better here.")
    healthy = look if name == "energy_layer" else "Here every line goes down: the energy fell at every recursion step."
    return f"{healthy} {OVERSHOOT_LOOK}"


def every_term_reference() -> dict[str, list[str]]:
    """``{where: [term names]}`` of every ``[[term]]`` in the view and figure texts and the terms lists (for
    the tests: each must be a glossary term)."""
    out: dict[str, list[str]] = {}
    for key, ex in [*(("view " + k, v) for k, v in VIEW_TEXT.items()),
                    *(("figure " + k, f.explanation) for k, f in FIGURES.items())]:
        out[key] = term_refs(ex.read) + term_refs(ex.look) + list(ex.terms)
    for t in GLOSSARY.values():
        out["term " + t.name] = list(t.see)
    return out


def all_texts() -> Iterable[tuple[str, str]]:
    """Every markdown text of the views, figures and glossary as ``(where, text)`` (for LaTeX checks)."""
    for k, ex in VIEW_TEXT.items():
        yield f"view {k}", ex.read
        yield f"view {k}", ex.look
    for k, f in FIGURES.items():
        yield f"figure {k}", f.explanation.read
        yield f"figure {k}", f.explanation.look
    for t in GLOSSARY.values():
        yield f"term {t.name}", t.text


def all_maths() -> Iterable[tuple[str, str]]:
    """Every display formula of the views, figures and glossary as ``(where, latex)``."""
    for k, ex in VIEW_TEXT.items():
        yield f"view {k}", ex.maths
    for k, f in FIGURES.items():
        yield f"figure {k}", f.explanation.maths
    for t in GLOSSARY.values():
        if t.latex:
            yield f"term {t.name}", t.latex


__all__ = ["Explanation", "VIEW_TEXT", "FALLBACK", "view_explanation", "figure_explanation", "view_maths",
           "figure_note", "every_term_reference", "all_texts", "all_maths"]
