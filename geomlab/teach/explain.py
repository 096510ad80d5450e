"""The teaching layer (issue 16): for every view page and every figure, the quantity it shows in LaTeX, how
to read it and what to look for, filled in with the current model's facts; and the glossary.

* :data:`VIEW_TEXT` (slug of :data:`geomlab.teach.views.VIEWS` -> :class:`Explanation`) and :data:`FIGURE_TEXT`
  (figure name of :data:`geomlab.figures.VIEWS` -> :class:`Explanation`); :func:`view_explanation` and
  :func:`figure_explanation` read them, with a clear fallback for a figure nobody has explained yet.
* :func:`view_maths` (the page's formula, in the family's own form: an OSMFormer's attention scores are
  :math:`\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)`, a Transformer's :math:`q_i\\cdot k_j`), :func:`model_facts` and
  :func:`view_facts` (group, abelian or not, d, layers, heads, CEM recursion steps and whether the recorded
  energy fell at every step, Grassmann rank and offsets...), :func:`figure_note` (one "look for" line).
* :data:`GLOSSARY` (term -> :class:`Term`), :func:`term_slug`, :func:`find_term`, :func:`search_glossary`.

Texts are Streamlit markdown with inline LaTeX between single dollars (see :mod:`geomlab.core.markup`); a
glossary reference is written ``[[Lie algebra]]`` or ``[[Lie algebra|the algebra]]`` and turned into a link
(or plain words) by :func:`link_terms`. No streamlit import; the app draws these in ``app_pages/_explain.py``.

Sources: the paper notes (osm.md: Nunley, arXiv 2602.18417; cem.md: Xu et al., arXiv 2605.07588;
grassmann.md: Zhang, arXiv 2512.19428) with the section named in each entry; the wording is a design choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from geomlab.teach import views as registry
from geomlab.teach.kinds import has_flag
from geomlab.core.markup import md_label


@dataclass(frozen=True)
class Explanation:
    """What a newcomer needs next to one view or figure.

    ``maths``: the quantity as one display-LaTeX string (no dollars; ``st.latex`` draws it), empty for the
    fallback; ``read``: how to read it, ``look``: what to look for (markdown with ``$...$`` and ``[[term]]``
    references); ``terms``: glossary terms it relies on; ``source``: paper and equation, or "design choice"."""

    maths: str
    read: str
    look: str
    terms: tuple[str, ...] = ()
    source: str = "design choice"
    fallback: bool = False


@dataclass(frozen=True)
class Term:
    """One glossary entry: ``name`` (as shown), ``text`` (one to three sentences, markdown with ``$...$``),
    optional ``latex`` (a display formula, no dollars), ``source`` and ``see`` (related term names)."""

    name: str
    text: str
    latex: str = ""
    source: str = "standard"
    see: tuple[str, ...] = ()
    aliases: tuple[str, ...] = field(default=())


# =====================================================================================================
# Glossary
# =====================================================================================================
_T = Term
GLOSSARY: dict[str, Term] = {t.name: t for t in (
    _T("Lie group", "A group that is also a smooth space, so one can move continuously inside it. geomlab's "
       "states are matrices in a Lie group $G$ inside the unitary group: rotations ($O$, $SO$), unitary "
       "matrices ($U$, $SU$) or a torus ($T$).", r"G \subseteq U(d),\quad H \in G",
       "osm.md §1", ("Lie algebra", "Orthogonal group", "Unitary group", "Torus"), ("group", "matrix group")),
    _T("Lie algebra", "The flat space of infinitesimal moves at the identity of a Lie group, written "
       r"$\mathfrak{g}$: skew-symmetric matrices for $O$/$SO$, skew-Hermitian ones for $U$, traceless "
       "skew-Hermitian for $SU$, imaginary diagonals for the torus. Updates are built here, where adding and "
       "scaling are allowed, and then mapped onto the group by the exponential map.",
       r"\mathfrak{g} = \{\Phi : \exp(s\Phi)\in G\ \text{for all } s\},\quad \mathfrak{so}(d) = \{\Phi : "
       r"\Phi^\top = -\Phi\}", "osm.md §1, §4.1", ("Exponential map", "Tangent space"), ("algebra",)),
    _T("Tangent space", "The directions in which one can leave a point $H$ of the group. With left "
       r"trivialisation every tangent direction at $H$ is $H\Phi$ with $\Phi$ in the Lie algebra, so one "
       r"algebra $\mathfrak{g}$ serves every point.", r"T_H G = \{H\Phi : \Phi \in \mathfrak{g}\}",
       "osm.md §2.2", ("Lie algebra", "Tangent update"), ("tangent",)),
    _T("Tangent update", r"The step $\Phi_t$ in the Lie algebra that an OSM layer applies to a state: "
       r"$H \leftarrow H\exp(\Phi_t)$. Its size $\lVert\Phi_t\rVert_F$ is how far (in radians) the state turns.",
       r"H \leftarrow H\,\exp(\Phi_t),\qquad \Phi_t \in \mathfrak{g}", "osm.md §2.3",
       ("Exponential map", "Tangent mixing"), ("update", "Phi", "generator")),
    _T("Exponential map", r"Turns an algebra element $\Phi$ into a group element $\exp(\Phi)$ (the matrix "
       "exponential): the point reached by moving along $\\Phi$ for unit time. It keeps states exactly on the "
       "group, whatever $\\Phi$ is.", r"\exp(\Phi) = \sum_{k\ge 0} \Phi^k / k!", "osm.md §2.3",
       ("Lie algebra", "Matrix logarithm"), ("exp", "matrix exponential")),
    _T("Matrix logarithm", r"The inverse of the exponential map near the identity: $\log H$ is the algebra "
       "element that reaches $H$. It measures how far a state is from the identity.",
       r"\log H \in \mathfrak{g},\quad \exp(\log H) = H", "osm.md §2.2 (geodesic direction)",
       ("Geodesic distance",), ("log", "matrix log")),
    _T("Geodesic distance", "Length of the shortest path between two points along the curved space (the "
       "group, or the Grassmannian), in radians. On the group: the norm of the matrix logarithm of the relative "
       "rotation; between planes: from the principal angles.",
       r"d(H_1, H_2) = \lVert \log(H_1^* H_2) \rVert_F,\qquad d_g = \sqrt{\theta_1^2 + \theta_2^2}",
       "osm.md §2.2; grassmann.md §5.4", ("Matrix logarithm", "Principal angles"), ("geodesic", "distance")),
    _T("Orthogonal group", r"$O(d)$: real $d\times d$ matrices with $H^\top H = I$ (rotations and "
       r"reflections). Its algebra is the skew-symmetric matrices, of dimension $d(d-1)/2$. Not abelian for "
       r"$d \ge 2$, although for $d = 2$ the rotations the model can reach, $SO(2)$, commute.",
       r"O(d) = \{H \in \mathbb{R}^{d\times d} : H^\top H = I\}", "osm.md §4.1-4.2",
       ("Special orthogonal group", "Abelian"), ("O", "O(d)", "orthogonal")),
    _T("Special orthogonal group", r"$SO(d)$: rotations only ($\det H = 1$), the part of $O(d)$ the "
       r"exponential map reaches. $SO(2)$ (plane rotations) is abelian; $SO(3)$ and up are not.",
       r"SO(d) = \{H \in O(d) : \det H = 1\}", "osm.md §4.2", ("Orthogonal group",), ("SO", "SO(d)")),
    _T("Unitary group", r"$U(d)$: complex matrices with $H^* H = I$; algebra: skew-Hermitian matrices, "
       r"dimension $d^2$. $SU(d)$ (special unitary) adds $\det H = 1$ (traceless algebra, dimension $d^2-1$). "
       "Both are not abelian for $d \\ge 2$.", r"U(d) = \{H \in \mathbb{C}^{d\times d} : H^* H = I\}",
       "osm.md §4.1, §4.4", ("Special unitary group", "Torus"), ("U", "U(d)", "unitary")),
    _T("Special unitary group", r"$SU(d)$: unitary matrices with determinant 1. Its algebra is the traceless "
       r"skew-Hermitian matrices ($d^2 - 1$ dimensions).", r"SU(d) = \{H \in U(d) : \det H = 1\}",
       "osm.md §4.1", ("Unitary group",), ("SU", "SU(d)")),
    _T("Torus", r"$T^d$: diagonal unitary matrices $\mathrm{diag}(e^{i\varphi_1},\dots,e^{i\varphi_d})$, i.e. "
       "a list of $d$ independent angles. It is abelian: an update just adds to the angles, "
       r"$\varphi \leftarrow \varphi + \phi$, so order never matters. It therefore cannot track a non-abelian "
       "word problem such as $S_5$, whose answer depends on the order of the moves.",
       r"T^d = \{\mathrm{diag}(e^{i\varphi_1},\dots,e^{i\varphi_d})\}", "osm.md §4.5",
       ("Abelian", "Eigenvalue phase", "Word problem"), ("T", "torus group")),
    _T("Eigenvalue phase", r"The eigenvalues of an orthogonal or unitary matrix have modulus 1, "
       r"$\lambda_k = e^{i\theta_k}$; their angles $\theta_k$ (radians) describe the state independently of the "
       r"basis (they do not change under $H \mapsto Q H Q^{-1}$). For the torus they are the state's angles.",
       r"\lambda_k(H_t) = e^{i\theta_k},\qquad \theta_k \in (-\pi, \pi]", "osm.md §2.5; design choice",
       ("Orthogonal group", "Torus"), ("phase", "eigenvalue", "eigenvalues")),
    _T("Abelian", r"A group is abelian (commutative) when $AB = BA$ for all its elements. Then a sequence of "
       "updates has the same result in any order, so a state on an abelian group (the torus, $SO(2)$) "
       "cannot remember the order of its inputs beyond what the angles add up to.",
       r"AB = BA\ \ \forall A, B \in G", "standard; osm.md §4.5", ("Torus", "Word problem"),
       ("commutative",)),
    _T("Word problem", r"A synthetic task: read a sequence of group elements $g_1, g_2, \dots$ (e.g. "
       r"permutations of $S_5$) and output the running product $g_1 \cdots g_t$ at each position. For a "
       "non-abelian group the answer depends on the order, so a model needs a non-abelian state to track it.",
       r"y_t = g_1 g_2 \cdots g_t", "design choice (docs/pipeline.md)", ("Abelian",), ("S5", "S_5")),
    _T("Attention", r"Each position $i$ takes a weighted average over earlier positions $j \le i$, with "
       r"weights from a softmax of scores $S_{ij}$ (a causal mask hides the future). A Transformer's score is "
       r"$q_i\cdot k_j$; an OSMFormer's is the state similarity $\mathrm{Re}\,\mathrm{tr}(H_i^* H_j)$.",
       r"\alpha_{ij} = \frac{\exp S_{ij}}{\sum_{j'\le i}\exp S_{ij'}}", "osm.md §2.6; cem.md §1.2",
       ("Similarity",), ("attention weights",)),
    _T("Similarity", r"How alike two states are: $\mathrm{Re}\,\mathrm{tr}(H_i^* H_j)$, the Frobenius inner "
       r"product of the matrices. It is largest ($d$) when the states are equal and lies in $[-d, d]$. An "
       "OSMFormer uses it as its attention score, with no query or key matrices.",
       r"s(H_i, H_j) = \mathrm{Re}\,\mathrm{tr}(H_i^* H_j) \in [-d, d]", "osm.md §2.5",
       ("Attention",), ("state similarity", "Re tr")),
    _T("Prototype readout", r"How an OSM turns a state into next-token scores: each token $v$ has a "
       r"prototype matrix $P_v$, and its logit is the similarity of the state to it, times a temperature "
       r"$\tau$.", r"\mathrm{logit}_v(H) = \tau\,\mathrm{Re}\,\mathrm{tr}(H^* P_v) + b_v", "osm.md §2.8",
       ("Similarity",), ("readout", "prototype")),
    _T("Tangent mixing", r"A learned linear map $\Gamma$ on the Lie algebra applied to the raw update "
       r"(the pull toward the target) before it is exponentiated: it can rescale the update and turn it into "
       "other directions. Identity mixing only rescales.",
       r"\Phi_t = \Gamma(\Delta_t),\quad \Delta_t = \Pi_{\mathfrak{g}}(H_t^* X_t)", "osm.md §2.4",
       ("Tangent update",), ("mixing", "Gamma")),
    _T("Energy", r"In CEM every layer lowers a per-token energy $\varepsilon(x_i \mid h_{1:i})$ of an "
       r"iterate $x_i$ that starts at the layer input $h_i$: attention is a gradient step on a log-sum-exp "
       "interaction energy, the MLP on an element-wise energy. Lower is better within one layer; levels of "
       "different layers are not comparable.",
       r"\varepsilon_{\text{att}}(x_i) = -\sum_k \frac{\eta_k}{\beta}\,\log\sum_{j\le i} e^{S_{k,ij}}",
       "cem.md §1.0, §2.4", ("Recursion step", "Preconditioner"), ("causal energy",)),
    _T("Recursion step", r"CEM repeats its gradient step $T$ times inside a layer, with shared weights and a "
       r"fixed context: $x^{t+1} = x^t - \eta\rho P\nabla\varepsilon(x^t)$. With a small enough step the "
       "energy falls at every step; a rise means the step has left the descent regime.",
       r"x_i^{t+1} = x_i^t - \eta\,\rho_i\,P\,\nabla_{x_i}\varepsilon(x_i^t \mid h_{1:i}),\quad t = 0..T-1",
       "cem.md §2.3", ("Energy", "Preconditioner"), ("recursion", "steps", "T")),
    _T("Preconditioner", r"A matrix $P$ (diagonal plus low rank) that reshapes the gradient step of a CEM "
       r"layer. Descent is guaranteed only while $P$ is positive definite.",
       r"P = \mathrm{diag}(\mathrm{softplus}(p)) + U V^\top + V U^\top", "cem.md §2.2",
       ("Recursion step",), ("P",)),
    _T("Grassmannian", r"$\mathrm{Gr}(2, r)$: the space of all 2-dimensional planes through the origin of "
       r"$\mathbb{R}^r$. A Grassmann layer turns each pair of reduced vectors $(z_t, z_{t-\Delta})$ into the "
       "plane they span; distances between planes come from their principal angles.",
       r"\mathrm{span}(z_t, z_{t-\Delta}) \in \mathrm{Gr}(2, r)", "grassmann.md §1.3",
       ("Plücker coordinates", "Principal angles"), ("Grassmann", "Gr(2,r)", "plane")),
    _T("Plücker coordinates", r"The numbers $p_{ij} = a_i b_j - a_j b_i$ ($i<j$) of a plane spanned by "
       r"$a, b$: the entries of the wedge $a\wedge b$, $r(r-1)/2$ of them. They do not depend on which basis "
       "of the plane is used (up to scale), and swapping $a$ and $b$ flips their sign (orientation).",
       r"p_{ij} = z_{t,i}\,z_{t-\Delta,j} - z_{t,j}\,z_{t-\Delta,i},\quad \hat p = p/\lVert p\rVert",
       "grassmann.md §1.3-1.4", ("Grassmannian", "Decomposability"), ("Plucker", "wedge")),
    _T("Principal angles", r"The two angles $0 \le \theta_1 \le \theta_2 \le \pi/2$ that describe how two "
       r"planes sit relative to each other: $\theta_1 = 0$ means they share a line, both 0 means the same "
       "plane. They give the geodesic distance and the similarity of the Plücker vectors.",
       r"\lvert\langle \hat p_1, \hat p_2\rangle\rvert = \cos\theta_1\cos\theta_2,\qquad d_g = "
       r"\sqrt{\theta_1^2+\theta_2^2}", "grassmann.md §5.3-5.4", ("Geodesic distance", "Grassmannian"),
       ("principal angle", "theta")),
    _T("Decomposability", r"Whether a Plücker-type vector is the wedge of two vectors, i.e. one plane. An "
       r"average of several planes usually is not; $\kappa = \lambda_1^2/\sum_k\lambda_k^2$ of its "
       r"antisymmetric matrix is 1 for a single plane and down to $1/\lfloor r/2\rfloor$ for a spread blend.",
       r"\kappa = \lambda_1^2 \Big/ \sum_k \lambda_k^2", "grassmann.md §5.9", ("Plücker coordinates",),
       ("kappa",)),
    _T("Gate", r"A learned blend $\alpha_t \in (0,1)^d$ between the residual $h_t$ and the geometric "
       r"(plane) branch $g_t$: $m_t = \alpha_t\odot h_t + (1-\alpha_t)\odot g_t$. The gate share "
       r"$1-\alpha$ is how much of the output comes from the planes.",
       r"m_t = \alpha_t \odot h_t + (1 - \alpha_t) \odot g_t", "grassmann.md §1.6", ("Grassmannian",),
       ("gating", "alpha")),
    _T("BPC", "Bits per character: the mean negative log-likelihood of the next character, in bits. Lower is "
       "better; a model that knew nothing about a 65-letter alphabet would need about 6 bits.",
       r"\mathrm{BPC} = \frac{1}{N}\sum_t -\log_2 p(x_{t+1}\mid x_{\le t})", "osm.md §2.9",
       ("Surprisal",), ("bits per character",)),
    _T("Surprisal", r"How surprised a model is by one token: $-\log_2 p$ of the token it should predict, in "
       "bits. Its mean over a text is the BPC on that text.", r"s_t = -\log_2 p(x_{t+1} \mid x_{\le t})",
       "standard", ("BPC",), ("bits",)),
    _T("PCA", "Principal component analysis: the few directions along which a cloud of points varies most. "
       r"Projecting the states $\mathrm{vec}(H_t)$ on the first three gives a 3-D picture of a path that "
       "lives in many dimensions; the variance shares say how much of it the picture keeps.",
       r"\mathrm{vec}(H_t) \approx \bar h + \sum_{k=1}^{3} c_{t,k}\,u_k", "standard (scikit-learn)",
       (), ("principal components", "principal component analysis")),
)}
"""Every glossary term by name (display order = insertion order)."""
del _T


def term_slug(name: str) -> str:
    """URL/anchor form of a term name: ``"Lie algebra"`` -> ``"lie-algebra"``, ``"Plücker coordinates"`` ->
    ``"plucker-coordinates"`` (ASCII, lower case, words joined by ``-``)."""
    import unicodedata

    ascii_ = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_.lower()).strip("-")


def find_term(query: str | None) -> Term | None:
    """The glossary term named ``query`` (a name, a slug or an alias, any case); None when none fits."""
    if not query:
        return None
    q = term_slug(str(query))
    for t in GLOSSARY.values():
        if q == term_slug(t.name) or q in (term_slug(a) for a in t.aliases):
            return t
    return None


def search_glossary(query: str | None) -> list[Term]:
    """The terms whose name, aliases or text contain every word of ``query`` (case-insensitive), names
    matching first; every term for an empty query."""
    terms = list(GLOSSARY.values())
    words = [w for w in re.split(r"\s+", (query or "").lower().strip()) if w]
    if not words:
        return terms

    def hay(t: Term, with_text: bool) -> str:
        return " ".join([t.name, *t.aliases, term_slug(t.name)] + ([t.text] if with_text else [])).lower()

    by_name = [t for t in terms if all(w in hay(t, False) for w in words)]
    rest = [t for t in terms if t not in by_name and all(w in hay(t, True) for w in words)]
    return by_name + rest


_REF = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")


def term_refs(text: str) -> list[str]:
    """The term names referenced as ``[[name]]``/``[[name|words]]`` in ``text``."""
    return [m.group(1).strip() for m in _REF.finditer(text)]


def link_terms(text: str, url: Callable[[str], str] | None = None) -> str:
    """``text`` with its ``[[term]]`` references as markdown links ``[words](url(slug))`` (``url`` None: plain
    words). A reference to an unknown term becomes its plain words."""
    def sub(m: re.Match) -> str:
        name, words = m.group(1).strip(), (m.group(2) or m.group(1)).strip()
        term = find_term(name)
        if url is None or term is None:
            return words
        return f"[{words}]({url(term_slug(term.name))})"
    return _REF.sub(sub, text)


# =====================================================================================================
# Views and figures
# =====================================================================================================
_E = Explanation
_OSM_SRC = "osm.md (Nunley, arXiv 2602.18417)"
_CEM_SRC = "cem.md (Xu et al., arXiv 2605.07588)"
_GR_SRC = "grassmann.md (Zhang, arXiv 2512.19428)"

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
        ("Lie group", "Eigenvalue phase", "Geodesic distance", "PCA"), f"{_OSM_SRC} §2.3, §2.5"),
    "tangents": _E(
        r"\Phi_t = \Gamma(\Delta_t) \in \mathfrak{g},\quad \Delta_t = \Pi_{\mathfrak{g}}(H_t^* \bar H_t),"
        r"\ \ \lVert \Phi_t \rVert_F",
        "Every update of an OSM is an element $\\Phi_t$ of the [[Lie algebra]] (a [[tangent update]]): first "
        "the raw pull $\\Delta_t$ toward a target (the attention average, or the token itself for grounding), "
        "then [[tangent mixing]] $\\Gamma$, then $H \\leftarrow H\\exp(\\Phi_t)$. Its norm is how far the state "
        "turns, in radians.",
        "Which tokens make big updates; whether mixing mostly rescales the pull (dotted and solid lines "
        "differ by a factor) or turns it (a high mixing share); layers that barely move (their updates near 0).",
        ("Lie algebra", "Tangent update", "Tangent mixing", "Exponential map"), f"{_OSM_SRC} §2.2-2.4, §2.6-2.7"),
    "attention": _E(
        r"\alpha_{ij} = \operatorname{softmax}_{j \le i}\big(S_{ij}\big),\quad S_{ij} = q_i \cdot k_j + b_{ij}",
        "Row $i$ of a map is where position $i$ looks: its [[attention]] weights on the earlier positions "
        "$j \\le i$, which sum to 1. Future positions are masked. Next to an OSMFormer's weights is the state "
        "[[similarity]] its scores come from.",
        "Diagonal bands (looking a fixed distance back, e.g. the previous character), vertical stripes "
        "(positions every later token looks at, such as the start or a space), and heads that differ.",
        ("Attention", "Similarity"), "osm.md §2.6; cem.md §1.2; design choice"),
    "energy": _E(
        r"x_i^{t+1} = x_i^t - \eta\,\rho_i\,P\,\nabla_{x_i}\varepsilon(x_i^t \mid h_{1:i}),\ \ "
        r"t = 0,\dots,T-1",
        "A CEM layer does not just compute its output: it starts at the input $h_i$ and takes $T$ "
        "[[recursion step|recursion steps]] of gradient descent on an [[energy]] $\\varepsilon$. The curves show "
        "the token-mean energy at each step $t$, measured from step 0, per layer and sub-block (attention, MLP).",
        "The energy should fall at every step (the curves go down). A rise means the step size (or the "
        "[[preconditioner]]) has left the descent regime, often when more steps are run than were trained. "
        "Compare steps within one layer, not levels across layers.",
        ("Energy", "Recursion step", "Preconditioner"), f"{_CEM_SRC} §1.0, §2.3-2.4"),
    "planes": _E(
        r"p_{ij} = z_{t,i} z_{t-\Delta,j} - z_{t,j} z_{t-\Delta,i},\ \ "
        r"m_t = \alpha_t \odot h_t + (1-\alpha_t) \odot g_t",
        "A Grassmann layer has no attention. It reduces each token to $z_t \\in \\mathbb{R}^r$, pairs it with "
        "$z_{t-\\Delta}$ (one offset $\\Delta$ per layer, or several), and describes the plane they span (a point of the "
        "[[Grassmannian]]) by its [[Plücker coordinates]]. A [[gate]] mixes that back into the residual.",
        "How far consecutive planes turn ([[principal angles]]): small at repeated patterns, large at new "
        "words; which axis pairs the planes use; how much of each layer's output the gate takes from the "
        "planes.",
        ("Grassmannian", "Plücker coordinates", "Principal angles", "Gate"), f"{_GR_SRC} §1.2-1.6, §5"),
}
"""Explanation of every view page by slug (keys = :data:`geomlab.teach.views.VIEWS`)."""

FIGURE_TEXT: dict[str, Explanation] = {
    # ---------------------------------------------------------------- trajectories
    "phase_circle": _E(r"\lambda_k(H_t) = e^{i\theta_k}", "Each dot is one eigenvalue of the state, on the unit "
                       "circle at the token cursor; grey dots are the states before it.",
                       "Dots turning together (a common rotation) or separately; jumps at particular tokens.",
                       ("Eigenvalue phase",), f"{_OSM_SRC} §2.5; design choice"),
    "pca_projection": _E(r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2})",
                         "The path of the states projected on their first two principal components (the axis "
                         "titles give the share of variance each keeps); the last steps into the cursor are "
                         "drawn darker.", "Loops (the state comes back), drifts, clusters of similar states; "
                         "if the two axes keep little variance, the path is higher-dimensional than this "
                         "picture.", ("PCA",), "design choice"),
    "pca_trajectory": _E(r"\mathrm{vec}(H_t) \mapsto (c_{t,1}, c_{t,2}, c_{t,3})",
                         "The path of the states through their first three principal components; colour is "
                         "the position.", "Loops (the state returns), drifts, and how much variance the "
                         "picture keeps (if it is low, the path is really higher-dimensional).",
                         ("PCA",), "design choice"),
    "distance_profile": _E(r"\lVert \log H_t \rVert_F,\qquad \lVert \log(H_{t-1}^* H_t) \rVert_F",
                           "Top: geodesic distance of each state from the identity; bottom: how far the state "
                           "moved when token $t$ arrived (radians).",
                           "Spikes in the bottom panel mark tokens that turn the state a lot; a top curve "
                           "that saturates means the state wanders far from the identity.",
                           ("Geodesic distance", "Matrix logarithm"), f"{_OSM_SRC} §2.2"),
    "phase_timeline": _E(r"\theta_k(t) = \arg \lambda_k(H_t)",
                         "Every eigenvalue angle of the state against position (radians, wrapped to "
                         "$(-\\pi, \\pi]$).", "Steady slopes (a constant turn per token) versus steps at "
                         "particular tokens.", ("Eigenvalue phase",), "design choice"),
    "so3_frame": _E(r"H_t = [\,h_1\ h_2\ h_3\,] \in SO(3)", "The three columns of a $3\\times 3$ rotation "
                    "drawn as arrows: the state is a rotating frame.", "How much the frame turns per token "
                    "and around which axis.", ("Special orthogonal group",), "design choice"),
    "torus_angles": _E(r"H_t = \mathrm{diag}(e^{i\varphi_{t,1}}, \dots, e^{i\varphi_{t,d}})",
                       "On the torus the state is just $d$ angles; *each angle*: every angle along the text; "
                       "*flat torus*: the first two as a point on the square torus (edges wrap).",
                       "The angles add (the group is abelian), never mixing; how far each moves depends "
                       "on the token and, through the pull or attention, on the state.",
                       ("Torus", "Abelian"), f"{_OSM_SRC} §4.5"),
    # ---------------------------------------------------------------- tangents
    "tangent_heatmap": _E(r"\lVert \Phi_t \rVert_F \ \text{per layer and position}",
                          "Colour = update size, before tangent mixing (the raw pull) and after it.",
                          "Tokens or layers with large updates; columns that are dark everywhere.",
                          ("Tangent update", "Tangent mixing"), f"{_OSM_SRC} §2.3-2.4"),
    "tangent_lines": _E(r"\lVert \Phi_t \rVert_F,\ \lVert \Delta_t \rVert_F",
                        "Update size per position, one colour per layer; solid after mixing, dotted before.",
                        "The ratio of solid to dotted: how much mixing amplifies or damps each layer.",
                        ("Tangent update", "Tangent mixing"), f"{_OSM_SRC} §2.4"),
    "generator_heatmap": _E(r"\Phi_t \in \mathfrak{g}\ (d \times d)", "The update at the cursor as a matrix: "
                            "entry $(a, b)$ is the rotation speed in the plane of axes $a$ and $b$ (radians). On the "
                            "torus, bars: one phase speed per axis (the algebra is the imaginary diagonals).",
                            "Skew symmetry ($\\Phi^\\top = -\\Phi$ for real groups); which planes (torus: which "
                            "axes) carry the rotation, before and after mixing.", ("Lie algebra", "Tangent mixing"),
                            f"{_OSM_SRC} §2.2, §4.3"),
    "mixing_share": _E(r"1 - \cos^2\angle(\Delta_t, \Phi_t)", "How much tangent mixing turned each update into "
                       "other directions (0 = only rescaled, 1 = turned orthogonal).",
                       "Values near 0: mixing acts like a step size; clearly above 0: it reroutes updates.",
                       ("Tangent mixing",), f"{_OSM_SRC} §2.4; design choice"),
    # ---------------------------------------------------------------- attention
    "similarity_map": _E(r"\mathrm{Re}\,\mathrm{tr}(H_i^* H_j) \in [-d, d]",
                         "Rows are query positions, columns key positions; colour = how alike the two states "
                         "on the group are (red alike, d when equal; blue opposed). The attention score is this, "
                         "scaled, minus a distance penalty.",
                         "Red cells off the diagonal: equal or related tokens far apart, which attention can "
                         "then pick out.", ("Similarity", "Attention"), "osm.md §2.5-2.6"),
    "attention_maps": _E(r"\alpha_{ij} = \operatorname{softmax}_{j\le i} S_{ij}",
                         "Rows are query positions, columns key positions; colour = the weight each query puts "
                         "on each earlier key (a row sums to 1).",
                         "Diagonal bands (fixed look-back) and vertical stripes (anchor tokens).",
                         ("Attention",), "osm.md §2.6; design choice"),
    "attention_window": _E(r"\alpha_{ij},\ i, j \text{ near the cursor}",
                           "The same map at full resolution around the cursor (long texts are subsampled "
                           "in the overview).", "The exact look-back pattern of the positions near the "
                           "cursor.", ("Attention",), "design choice"),
    "attention_row": _E(r"\alpha_{i,j},\ j \le i \ (i = \text{cursor})", "Where the cursor token looks: its "
                        "weight on every earlier position, one line per head and their mean.",
                        "Which earlier tokens get the most weight; with several heads, where they disagree.",
                        ("Attention",), "design choice"),
    "attends_to": _E(r"\alpha_{i,j},\ j \le i \ (i = \text{cursor}),\ \text{per head and mean}",
                     "The text around the cursor, with the cursor's attention weight on each token as a bar "
                     "(mean over heads, or the chosen head) and one row per head below; later tokens are "
                     "greyed (the model cannot see them).", "Which words the cursor token reads: the "
                     "previous character, the start of the word, a matching letter earlier on; heads that "
                     "specialise.", ("Attention",), "design choice"),
    # ---------------------------------------------------------------- energy
    "energy_descent": _E(r"\bar\varepsilon(x^t) - \bar\varepsilon(x^0),\quad \lVert x^t - h \rVert / \rho",
                         "Top: token-mean energy change per recursion step, one line per layer and "
                         "sub-block; bottom: how far the iterate moved from the input.",
                         "Every line should go down; red triangles mark a step where it rose.",
                         ("Energy", "Recursion step"), f"{_CEM_SRC} §2.4"),
    "energy_tokens": _E(r"\varepsilon(x_i^t) - \varepsilon(x_i^0)", "Per-token energy change for one layer and "
                        "sub-block: blue fell, red rose.", "Tokens whose energy rises while the mean falls.",
                        ("Energy",), f"{_CEM_SRC} §2.4"),
    # ---------------------------------------------------------------- planes
    "plane_distances": _E(r"d_g(U_{t-1}, U_t) = \sqrt{\theta_1^2 + \theta_2^2}",
                          "Geodesic distance between consecutive planes (top) and between a layer's input and "
                          "output planes (bottom), radians.", "Spikes at word boundaries or new patterns; "
                          "flat stretches at repetitions.", ("Geodesic distance", "Grassmannian"),
                          f"{_GR_SRC} §5.4, §5.8"),
    "plane_angles": _E(r"0 \le \theta_1 \le \theta_2 \le \pi/2", "The two principal angles between the plane "
                       "at $t-1$ and at $t$.", "$\\theta_1 = 0$: the planes share a line, always for offset "
                       "$\\Delta = 1$ (both hold $z_{t-1}$) and for $r = 3$.",
                       ("Principal angles",), f"{_GR_SRC} §5.3"),
    "gate_share": _E(r"1 - \bar\alpha_t", "Share of each layer's output that comes from the plane branch.",
                     "Layers that ignore the planes (near 0) or rely on them.", ("Gate",), f"{_GR_SRC} §5.1"),
    "plane_similarity": _E(r"\lvert\langle \hat p_t, \hat p_s \rangle\rvert = \cos\theta_1\cos\theta_2",
                           "How alike the planes at two positions are (1 = the same plane).",
                           "Bright cells off the diagonal (early layers: a pair of characters that recurs), "
                           "stripes along it (a position code), blocks (a phrase).",
                           ("Plücker coordinates", "Principal angles"), f"{_GR_SRC} §5.4"),
    "plucker_heatmap": _E(r"\hat p_{ij}(t),\ 0 \le i < j < r", "The normalised Plücker coordinates of the "
                          "plane at each position; colour = value and sign.",
                          "Columns (axis pairs) that dominate; sign flips (the orientation turns).",
                          ("Plücker coordinates",), f"{_GR_SRC} §1.3-1.4"),
    "plane_sphere": _E(r"n = (p_{23}, -p_{13}, p_{12}) / \lVert p \rVert", "For rank 3 the plane is a great "
                       "circle on the sphere with pole $\\pm n$; for higher rank, a disc seen through 3 axes.",
                       "How the circle tilts from token to token.", ("Grassmannian",), f"{_GR_SRC} §5.6-5.7"),
    "plane_interpolation": _E(r"\gamma(s) = Y_1\cos(s\Theta) + G\sin(s\Theta),\ s \in [0, 1]",
                              "The shortest path on the Grassmannian from the previous plane to the cursor's.",
                              "A short path (small angles) or a big turn.", ("Geodesic distance",
                                                                             "Principal angles"),
                              f"{_GR_SRC} §5.5"),
    "plane_matrix": _E(r"\hat A = (a b^\top - b a^\top)/\lVert a \wedge b \rVert",
                       "$\\hat A$: the plane at the cursor as an antisymmetric matrix; axis-pair energy: how "
                       "much each axis pair is used over the text.", "A few bright axis pairs: the layer works in a small "
                       "subspace.", ("Plücker coordinates",), f"{_GR_SRC} §5.1"),
    "decomposability_map": _E(r"\kappa_t = \lambda_1^2 / \textstyle\sum_k \lambda_k^2",
                              "Whether the planes of the last few positions average to a single plane (1) or "
                              "a blend (lower).", "Drops where the layer's planes turn as the text goes on.",
                              ("Decomposability",), f"{_GR_SRC} §5.9"),
}
"""Explanation of every per-trace figure by name (keys = :data:`geomlab.figures.VIEWS` minus
``training_curves``)."""
del _E

FALLBACK = Explanation(
    "", "No explanation has been written for this figure yet; its caption says what it shows.",
    "See the caption and the glossary.", (), "none", fallback=True)
"""What :func:`figure_explanation` returns for a figure without an entry (a new figure, before its text is
written; tests/test_explain.py fails until every registered figure has one)."""


def view_explanation(slug: str) -> Explanation:
    """The explanation of view ``slug``; ``KeyError`` for a slug that is not a view."""
    return VIEW_TEXT[slug]


def figure_explanation(name: str) -> Explanation:
    """The explanation of figure ``name``, or :data:`FALLBACK` (``fallback=True``) when none is written."""
    return FIGURE_TEXT.get(name, FALLBACK)


# =====================================================================================================
# The current model's facts
# =====================================================================================================
GROUP_TITLES = {"O": "orthogonal group", "SO": "special orthogonal group", "U": "unitary group",
                "SU": "special unitary group", "T": "torus", "O-block": "block-diagonal orthogonal group"}


def algebra_dim(name: str, d: int, block: int | None = None) -> int:
    """Real dimension of the Lie algebra of group ``name`` at size ``d`` (osm.md §1): O/SO ``d(d-1)/2``,
    U ``d^2``, SU ``d^2-1``, T ``d``, O-block ``(d/b) b(b-1)/2``. ``ValueError`` for an unknown name."""
    if name in ("O", "SO"):
        return d * (d - 1) // 2
    if name == "U":
        return d * d
    if name == "SU":
        return d * d - 1
    if name == "T":
        return d
    if name == "O-block":
        b = int(block or 2)
        return (d // b) * b * (b - 1) // 2
    raise ValueError(f"unknown group {name!r}")


def is_abelian(name: str, d: int, block: int | None = None) -> bool:
    """Whether the states' updates commute, i.e. the Lie algebra is abelian (the exponential map reaches the
    identity component only, so this is what the model can use): always for the torus T; for O/SO when
    ``d <= 2`` (plane rotations); U when ``d <= 1``; SU when ``d <= 1``; O-block when the blocks are
    ``2 x 2`` or smaller. Source: standard Lie theory; osm.md §4.5."""
    if name == "T":
        return True
    if name in ("O", "SO"):
        return d <= 2
    if name in ("U", "SU"):
        return d <= 1
    if name == "O-block":
        return int(block or 2) <= 2
    return False


def _group_info(tr: Any, config: dict | None) -> tuple[str, int, int | None] | None:
    g = getattr(tr, "group", None) or {}
    name = g.get("name") or (config or {}).get("group") or (getattr(tr, "config", None) or {}).get("group")
    if not name:
        return None
    d = int(g.get("d") or (config or {}).get("d") or getattr(tr, "d", 0) or 0)
    block = (g.get("options") or {}).get("block") or (config or {}).get("block")
    return str(name), d, (int(block) if block else None)


def group_symbol(name: str, d: int) -> str:
    """The group as inline LaTeX: ``$O(16)$``, ``$T^{8}$``, ``$O(2)^{4}$`` style for O-block is written
    ``$O\\text{-block}(d)$``."""
    if name == "T":
        return f"$T^{{{d}}}$"
    if name == "O-block":
        return f"$O\\text{{-block}}({d})$"
    return f"${name}({d})$"


def _word_problem_group(task: Any) -> str | None:
    """The group of a word-problem task: ``"S5"`` from a card's task dict (``{"task": "word-problem",
    "group": "S5"}``) or a corpus spec (``"word-problem:S5:32"``, ``"word-problem S5"``); None otherwise."""
    if isinstance(task, dict):
        return str(task["group"]) if task.get("task") == "word-problem" and task.get("group") else None
    m = re.match(r"word-problem[: ]([A-Za-z0-9]+)", str(task or ""))
    return m.group(1) if m else None


def _nonabelian_task(group: str) -> bool:
    """Whether word-problem group ``group`` (``S3``, ``S5``, ``A5``, ``Z<n>``, ``parity``) is non-abelian:
    the symmetric groups from S3 on and the alternating groups from A4 on."""
    m = re.fullmatch(r"([SA])(\d+)", group.upper())
    return bool(m) and int(m.group(2)) >= (3 if m.group(1) == "S" else 4)


def _task_symbol(group: str) -> str:
    """``"S5"`` -> ``"$S_{5}$"``; other names escaped as text."""
    m = re.fullmatch(r"([SAZ])(\d+)", group)
    return f"${m.group(1)}_{{{m.group(2)}}}$" if m else md_label(group)


@dataclass(frozen=True)
class Fact:
    """One sentence about the current model (markdown with ``$...$``); ``warn`` marks something that looks
    wrong on this trace (e.g. an energy that rose), shown prominently."""

    text: str
    warn: bool = False


def energy_rises(tr: Any, tol: float = 1e-6) -> list[tuple[int, int, int, float]]:
    """Steps where the token-mean CEM energy rose: ``[(layer, block, step, rise)]`` with ``step`` t >= 1 the
    step whose energy is higher than at t - 1 by more than ``tol`` times the layer's energy scale (non-finite
    positions ignored). Empty for a trace without energies. Source: cem.md §2.4 (monotone decrease is the
    sanity check)."""
    E = getattr(tr, "energies", None)
    if E is None:
        return []
    E = np.asarray(E, dtype=np.float64)
    with np.errstate(all="ignore"):
        mean = np.where(np.isfinite(E), E, np.nan)
        counts = np.isfinite(mean).sum(axis=-1)
        m = np.nansum(np.nan_to_num(mean, nan=0.0), axis=-1) / np.maximum(counts, 1)
        m = np.where(counts > 0, m, np.nan)
    out = []
    for layer in range(m.shape[0]):
        for block in range(m.shape[1]):
            row = m[layer, block]
            scale = float(np.nanmax(np.abs(row))) if np.isfinite(row).any() else 1.0
            for t in range(1, row.shape[0]):
                rise = row[t] - row[t - 1]
                if np.isfinite(rise) and rise > tol * max(scale, 1.0):
                    out.append((layer, block, t, float(rise)))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


#: Trace family (``Family.trace``: ``"osm"``, ``"cem"``, ``"grassmann"``) -> the function stating the facts of
#: its traces, ``(trace, config, task) -> [Fact]`` (:func:`facts_for`); a trace of any other family (a
#: baseline) gets :func:`_baseline_facts`.
FAMILY_FACTS: dict[str, Callable[[Any, dict, Any], list[Fact]]] = {}


def facts_for(family: str) -> Callable:
    """Decorator: register a function ``(trace, config, task) -> [Fact]`` as the facts :func:`model_facts`
    states about the traces of trace family ``family``."""
    def register(fn: Callable) -> Callable:
        FAMILY_FACTS[family] = fn
        return fn
    return register


def model_facts(tr: Any, config: dict | None = None, task: Any = None) -> list[Fact]:
    """Facts about the model behind trace ``tr`` as sentences, family by family (:data:`FAMILY_FACTS`):

    * OSM: the group, its size $d$ and algebra dimension, whether it is abelian (torus: the angles add
      independently, so it cannot track a non-abelian word problem; with ``task`` such a problem, a warning);
      layers and heads.
    * CEM: layers, heads, recursion steps T of this trace (and the trained T from ``config``), the
      preconditioner, and whether the recorded token-mean energy fell at every step (:func:`energy_rises`).
    * Grassmann: rank r, Plücker size r(r-1)/2, offsets per layer, the mean gate share on this text.
    * Attention models: layers, heads, positions (ALiBi/RoPE) from ``config``.

    ``config``: the checkpoint's model config (defaults to ``tr.config``); ``task``: the checkpoint card's
    task (a dict such as ``{"task": "word-problem", "group": "S5"}``) or corpus (``"word-problem:S5:32"``).
    Source: the paper notes named per family; wording: design choice.
    """
    cfg = dict(getattr(tr, "config", None) or {})
    cfg.update(config or {})
    return FAMILY_FACTS.get(getattr(tr, "family", "baseline"), _baseline_facts)(tr, cfg, task)


@facts_for("osm")
def _osm_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = registry.n_layers(tr)
    heads = registry.n_heads(tr)
    info = _group_info(tr, cfg)
    if info:
        name, d, block = info
        title = GROUP_TITLES.get(name, name)
        dim = algebra_dim(name, d, block) if name in GROUP_TITLES else None
        dim_s = f", Lie algebra of dimension {dim}" if dim is not None else ""
        shape = f"diagonal unitary ${d}\\times{d}$ matrices" if name == "T" else f"${d}\\times{d}$ matrices"
        facts.append(Fact(f"States live in the {title} {group_symbol(name, d)}: {shape}{dim_s}."))
        if is_abelian(name, d, block):
            what = ("its states are independent angles, so updates just add to them and their order "
                    "never matters" if name == "T" else "its updates commute, so their order never matters")
            facts.append(Fact(f"{group_symbol(name, d)} is abelian: {what}. It cannot track a "
                              "non-abelian word problem such as $S_5$."))
        else:
            facts.append(Fact(f"{group_symbol(name, d)} is not abelian: the same updates in another order "
                              "give another state, so the state can remember order (needed for a "
                              "non-abelian word problem such as $S_5$)."))
        wp = _word_problem_group(task)
        if wp and _nonabelian_task(wp):
            if is_abelian(name, d, block):
                facts.append(Fact(f"This checkpoint was trained on the {_task_symbol(wp)} word problem, which "
                                  "is not abelian: an abelian state cannot track it, so expect accuracy near "
                                  "chance on long inputs.", warn=True))
            else:
                facts.append(Fact(f"Trained on the {_task_symbol(wp)} word problem (not abelian): this group "
                                  "can represent the running product, order included."))
    kind = getattr(tr, "kind", "") or cfg.get("kind", "")
    if has_flag(kind, "recurrent"):
        facts.append(Fact("An OSM-RNN: one state per position, updated token by token (no layers, no "
                          "attention)."))
    else:
        facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(max(heads, 1), 'attention head')}; "
                          f"mixing: {md_label(cfg.get('mixing', '?'))}, positions: "
                          f"{md_label(cfg.get('position', '?'))}."))
    return facts


@facts_for("cem")
def _cem_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = registry.n_layers(tr)
    heads = registry.n_heads(tr)
    T = int(getattr(tr, "recursion_steps", 0) or 0)
    trained = registry.trained_steps(cfg) if cfg else None
    facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(heads, 'head')}, each layer a gradient step on its "
                      f"energy repeated $T = {T}$ times" + (f" (trained with $T = {trained}$)"
                                                             if trained and trained != T else "") + "."))
    pre = cfg.get("preconditioner")
    if pre:
        facts.append(Fact(f"Preconditioner: {md_label(pre)}; diagonal interaction: "
                          f"{md_label(cfg.get('diagonal', '?'))}."))
    rises = energy_rises(tr)
    if not rises:
        facts.append(Fact("On this text the mean energy fell (or stayed) at every recursion step in every "
                          "layer and sub-block, as gradient descent should."))
    else:
        names = ("attention", "MLP")
        shown = "; ".join(f"layer {l} {names[b] if b < 2 else b}, step {t}" for l, b, t, _ in rises[:4])
        more = f" and {len(rises) - 4} more" if len(rises) > 4 else ""
        hint = (f" More steps are run than were trained ($T = {T} > {trained}$)." if trained and T > trained
                else "")
        facts.append(Fact(f"On this text the mean energy ROSE at {_plural(len(rises), 'step')} ({shown}"
                          f"{more}): the step has left the descent regime there.{hint}", warn=True))
    return facts


@facts_for("grassmann")
def _grassmann_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = registry.n_layers(tr)
    r = int(getattr(tr, "rank", 0) or 0)
    offs = getattr(tr, "offsets", None)
    per_layer = ([sorted({int(o) for o in row if int(o) > 0}) for row in np.asarray(offs)]
                 if offs is not None else [])
    if per_layer and all(p == per_layer[0] for p in per_layer):
        off_s = "offsets $\\Delta \\in \\{" + ", ".join(map(str, per_layer[0])) + "\\}$ in every layer"
    elif per_layer:
        off_s = "offsets " + "; ".join(f"layer {i}: {', '.join(map(str, p)) or 'none'}"
                                       for i, p in enumerate(per_layer))
    else:
        off_s = "offsets " + md_label(cfg.get("offsets", "?"))
    facts.append(Fact(f"{_plural(L, 'layer')}; tokens reduced to rank $r = {r}$, so each plane has "
                      f"$r(r-1)/2 = {r * (r - 1) // 2}$ Plücker coordinates; {off_s}."))
    gates = getattr(tr, "gates", None)
    if gates is not None and np.size(gates):
        with np.errstate(all="ignore"):
            share = 1.0 - np.nanmean(np.asarray(gates, dtype=np.float64), axis=(1, 2))
        if np.isfinite(share).all():
            facts.append(Fact("On this text the gate takes " + ", ".join(
                f"{100 * s:.0f}%" for s in share) + " of each layer's output from the planes (layer 0 "
                "first)."))
    return facts


def _baseline_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = registry.n_layers(tr)
    heads = registry.n_heads(tr)
    if heads:
        pos = (cfg.get("positional") or cfg.get("position")
               or {"transformer": "ALiBi", "llama": "RoPE"}.get(cfg.get("kind") or getattr(tr, "kind", "")))
        facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(heads, 'attention head')}"
                          + (f", positions: {md_label(pos)}" if pos else "") + "."))
    return facts

#: The facts of :func:`model_facts` each view shows (by family; all of them, design choice), plus
#: view-specific ones from :func:`view_facts`.
def view_facts(slug: str, tr: Any, config: dict | None = None, task: Any = None) -> list[Fact]:
    """The facts a view page states about the current model: :func:`model_facts` plus, on the attention
    view, how this model scores (OSM similarity or query-key products) and the number of heads."""
    facts = model_facts(tr, config, task)
    if slug == "attention" and getattr(tr, "family", "") == "osm":
        facts.append(Fact("This OSMFormer has no query or key matrices: its scores are the state similarity "
                          "$\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$ of the layer's input states, scaled."))
    return facts


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


def figure_note(name: str, tr: Any = None) -> str:
    """One line under figure ``name``: what to look for, with a fact of this trace where one applies (the
    torus's independent angles, an energy that rose at a named step). Markdown with ``$...$``."""
    ex = figure_explanation(name)
    note = ex.look
    if tr is None:
        return note
    if name == "energy_descent":
        rises = energy_rises(tr)
        if rises:
            l, b, t, _ = rises[0]
            note = (f"Here the mean energy rose at {_plural(len(rises), 'step')} (first: layer {l}, "
                    f"{('attention', 'MLP')[b] if b < 2 else b}, step {t}): look for the red triangles.")
        else:
            note = "Here every line goes down: the energy fell at every recursion step."
    elif name in ("phase_circle", "phase_timeline") and getattr(tr, "family", "") == "osm":
        info = _group_info(tr, None)
        if info and is_abelian(*info):
            note += " Here the group is abelian, so each angle moves on its own."
    return note


def every_term_reference() -> dict[str, list[str]]:
    """``{where: [term names]}`` of every ``[[term]]`` in the view and figure texts and the terms lists (for
    the tests: each must be a glossary term)."""
    out: dict[str, list[str]] = {}
    for key, ex in [*(("view " + k, v) for k, v in VIEW_TEXT.items()),
                    *(("figure " + k, v) for k, v in FIGURE_TEXT.items())]:
        out[key] = term_refs(ex.read) + term_refs(ex.look) + list(ex.terms)
    for t in GLOSSARY.values():
        out["term " + t.name] = list(t.see)
    return out


def all_texts() -> Iterable[tuple[str, str]]:
    """Every markdown text of this module as ``(where, text)`` (for LaTeX checks)."""
    for k, ex in VIEW_TEXT.items():
        yield f"view {k}", ex.read
        yield f"view {k}", ex.look
    for k, ex in FIGURE_TEXT.items():
        yield f"figure {k}", ex.read
        yield f"figure {k}", ex.look
    for t in GLOSSARY.values():
        yield f"term {t.name}", t.text


def all_maths() -> Iterable[tuple[str, str]]:
    """Every display formula of this module as ``(where, latex)``."""
    for k, ex in VIEW_TEXT.items():
        yield f"view {k}", ex.maths
    for k, ex in FIGURE_TEXT.items():
        yield f"figure {k}", ex.maths
    for t in GLOSSARY.values():
        if t.latex:
            yield f"term {t.name}", t.latex


__all__ = ["Explanation", "Term", "Fact", "GLOSSARY", "VIEW_TEXT", "FIGURE_TEXT", "FALLBACK",
           "view_explanation", "figure_explanation", "view_maths", "model_facts", "facts_for", "FAMILY_FACTS",
           "view_facts", "figure_note",
           "energy_rises", "is_abelian", "algebra_dim", "term_slug", "find_term", "search_glossary",
           "link_terms", "term_refs"]
