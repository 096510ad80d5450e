"""The glossary: every term the view and figure texts rely on (:data:`GLOSSARY`), and the text helpers that
find a term (:func:`term_slug`, :func:`find_term`, :func:`search_glossary`) and turn ``[[term]]`` references
into links (:func:`term_refs`, :func:`link_terms`).

Texts are Streamlit markdown with inline LaTeX between single dollars (see :mod:`geomlab.core.markup`); a
glossary reference is written ``[[Lie algebra]]`` or ``[[Lie algebra|the algebra]]``. No streamlit import; the
app draws the glossary in ``app_pages/glossary.py``.

Sources: the papers (OSM: Nunley, arXiv 2602.18417; CEM: Xu et al., arXiv 2605.07588; Grassmann:
Zhang, arXiv 2512.19428) with the section named in each entry; the wording is a design choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable


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



_T = Term
GLOSSARY: dict[str, Term] = {t.name: t for t in (
    _T("Lie group", "A group that is also a smooth space, so one can move continuously inside it. geomlab's "
       "states are matrices in a Lie group $G$ inside the unitary group: rotations ($O$, $SO$), unitary "
       "matrices ($U$, $SU$) or a torus ($T$).", r"G \subseteq U(d),\quad H \in G",
       "Nunley, arXiv 2602.18417", ("Lie algebra", "Orthogonal group", "Unitary group", "Torus"), ("group", "matrix group")),
    _T("Lie algebra", "The flat space of infinitesimal moves at the identity of a Lie group, written "
       r"$\mathfrak{g}$: skew-symmetric matrices for $O$/$SO$, skew-Hermitian ones for $U$, traceless "
       "skew-Hermitian for $SU$, imaginary diagonals for the torus. Updates are built here, where adding and "
       "scaling are allowed, and then mapped onto the group by the exponential map.",
       r"\mathfrak{g} = \{\Phi : \exp(s\Phi)\in G\ \text{for all } s\},\quad \mathfrak{so}(d) = \{\Phi : "
       r"\Phi^\top = -\Phi\}", "Nunley, arXiv 2602.18417", ("Exponential map", "Tangent space"), ("algebra",)),
    _T("Tangent space", "The directions in which one can leave a point $H$ of the group. With left "
       r"trivialisation every tangent direction at $H$ is $H\Phi$ with $\Phi$ in the Lie algebra, so one "
       r"algebra $\mathfrak{g}$ serves every point.", r"T_H G = \{H\Phi : \Phi \in \mathfrak{g}\}",
       "Nunley, arXiv 2602.18417", ("Lie algebra", "Tangent update"), ("tangent",)),
    _T("Tangent update", r"The step $\Phi_t$ in the Lie algebra that an OSM layer applies to a state: "
       r"$H \leftarrow H\exp(\Phi_t)$. Its size $\lVert\Phi_t\rVert_F$ is how far (in radians) the state turns.",
       r"H \leftarrow H\,\exp(\Phi_t),\qquad \Phi_t \in \mathfrak{g}", "Nunley, arXiv 2602.18417",
       ("Exponential map", "Tangent mixing"), ("update", "Phi", "generator")),
    _T("Exponential map", r"Turns an algebra element $\Phi$ into a group element $\exp(\Phi)$ (the matrix "
       "exponential): the point reached by moving along $\\Phi$ for unit time. It keeps states exactly on the "
       "group, whatever $\\Phi$ is.", r"\exp(\Phi) = \sum_{k\ge 0} \Phi^k / k!", "Nunley, arXiv 2602.18417",
       ("Lie algebra", "Matrix logarithm"), ("exp", "matrix exponential")),
    _T("Matrix logarithm", r"The inverse of the exponential map near the identity: $\log H$ is the algebra "
       "element that reaches $H$. It measures how far a state is from the identity.",
       r"\log H \in \mathfrak{g},\quad \exp(\log H) = H", "Nunley, arXiv 2602.18417 (geodesic direction)",
       ("Geodesic distance",), ("log", "matrix log")),
    _T("Geodesic distance", "Length of the shortest path between two points along the curved space (the "
       "group, or the Grassmannian), in radians. On the group: the norm of the matrix logarithm of the relative "
       "rotation; between planes: from the principal angles.",
       r"d(H_1, H_2) = \lVert \log(H_1^* H_2) \rVert_F,\qquad d_g = \sqrt{\theta_1^2 + \theta_2^2}",
       "Nunley, arXiv 2602.18417; Zhang, arXiv 2512.19428", ("Matrix logarithm", "Principal angles"), ("geodesic", "distance")),
    _T("Orthogonal group", r"$O(d)$: real $d\times d$ matrices with $H^\top H = I$ (rotations and "
       r"reflections). Its algebra is the skew-symmetric matrices, of dimension $d(d-1)/2$. Not abelian for "
       r"$d \ge 2$, although for $d = 2$ the rotations the model can reach, $SO(2)$, commute.",
       r"O(d) = \{H \in \mathbb{R}^{d\times d} : H^\top H = I\}", "Nunley, arXiv 2602.18417",
       ("Special orthogonal group", "Abelian"), ("O", "O(d)", "orthogonal")),
    _T("Special orthogonal group", r"$SO(d)$: rotations only ($\det H = 1$), the part of $O(d)$ the "
       r"exponential map reaches. $SO(2)$ (plane rotations) is abelian; $SO(3)$ and up are not.",
       r"SO(d) = \{H \in O(d) : \det H = 1\}", "Nunley, arXiv 2602.18417", ("Orthogonal group",), ("SO", "SO(d)")),
    _T("Unitary group", r"$U(d)$: complex matrices with $H^* H = I$; algebra: skew-Hermitian matrices, "
       r"dimension $d^2$. $SU(d)$ (special unitary) adds $\det H = 1$ (traceless algebra, dimension $d^2-1$). "
       "Both are not abelian for $d \\ge 2$.", r"U(d) = \{H \in \mathbb{C}^{d\times d} : H^* H = I\}",
       "Nunley, arXiv 2602.18417", ("Special unitary group", "Torus"), ("U", "U(d)", "unitary")),
    _T("Special unitary group", r"$SU(d)$: unitary matrices with determinant 1. Its algebra is the traceless "
       r"skew-Hermitian matrices ($d^2 - 1$ dimensions).", r"SU(d) = \{H \in U(d) : \det H = 1\}",
       "Nunley, arXiv 2602.18417", ("Unitary group",), ("SU", "SU(d)")),
    _T("Torus", r"$T^d$: diagonal unitary matrices $\mathrm{diag}(e^{i\varphi_1},\dots,e^{i\varphi_d})$, i.e. "
       "a list of $d$ independent angles. It is abelian: an update just adds to the angles, "
       r"$\varphi \leftarrow \varphi + \phi$, so order never matters. It therefore cannot track a non-abelian "
       "word problem such as $S_5$, whose answer depends on the order of the moves.",
       r"T^d = \{\mathrm{diag}(e^{i\varphi_1},\dots,e^{i\varphi_d})\}", "Nunley, arXiv 2602.18417",
       ("Abelian", "Eigenvalue phase", "Word problem"), ("T", "torus group")),
    _T("Eigenvalue phase", r"The eigenvalues of an orthogonal or unitary matrix have modulus 1, "
       r"$\lambda_k = e^{i\theta_k}$; their angles $\theta_k$ (radians) describe the state independently of the "
       r"basis (they do not change under $H \mapsto Q H Q^{-1}$). For the torus they are the state's angles.",
       r"\lambda_k(H_t) = e^{i\theta_k},\qquad \theta_k \in (-\pi, \pi]", "Nunley, arXiv 2602.18417; design choice",
       ("Orthogonal group", "Torus"), ("phase", "eigenvalue", "eigenvalues")),
    _T("Abelian", r"A group is abelian (commutative) when $AB = BA$ for all its elements. Then a sequence of "
       "updates has the same result in any order, so a state on an abelian group (the torus, $SO(2)$) "
       "cannot remember the order of its inputs beyond what the angles add up to.",
       r"AB = BA\ \ \forall A, B \in G", "standard; Nunley, arXiv 2602.18417", ("Torus", "Word problem"),
       ("commutative",)),
    _T("Word problem", r"A synthetic task: read a sequence of group elements $g_1, g_2, \dots$ (e.g. "
       r"permutations of $S_5$) and output the running product $g_1 \cdots g_t$ at each position. For a "
       "non-abelian group the answer depends on the order, so a model needs a non-abelian state to track it.",
       r"y_t = g_1 g_2 \cdots g_t", "design choice (docs/pipeline.md)", ("Abelian",), ("S5", "S_5")),
    _T("Attention", r"Each position $i$ takes a weighted average over earlier positions $j \le i$, with "
       r"weights from a softmax of scores $S_{ij}$ (a causal mask hides the future). A Transformer's score is "
       r"$q_i\cdot k_j$; an OSMFormer's is the state similarity $\mathrm{Re}\,\mathrm{tr}(H_i^* H_j)$.",
       r"\alpha_{ij} = \frac{\exp S_{ij}}{\sum_{j'\le i}\exp S_{ij'}}", "Nunley, arXiv 2602.18417; Xu et al., arXiv 2605.07588",
       ("Similarity",), ("attention weights",)),
    _T("Similarity", r"How alike two states are: $\mathrm{Re}\,\mathrm{tr}(H_i^* H_j)$, the Frobenius inner "
       r"product of the matrices. It is largest ($d$) when the states are equal and lies in $[-d, d]$. An "
       "OSMFormer uses it as its attention score, with no query or key matrices.",
       r"s(H_i, H_j) = \mathrm{Re}\,\mathrm{tr}(H_i^* H_j) \in [-d, d]", "Nunley, arXiv 2602.18417",
       ("Attention",), ("state similarity", "Re tr")),
    _T("Prototype readout", r"How an OSM turns a state into next-token scores: each token $v$ has a "
       r"prototype matrix $P_v$, and its logit is the similarity of the state to it, times a temperature "
       r"$\tau$.", r"\mathrm{logit}_v(H) = \tau\,\mathrm{Re}\,\mathrm{tr}(H^* P_v) + b_v", "Nunley, arXiv 2602.18417",
       ("Similarity",), ("readout", "prototype")),
    _T("Tangent mixing", r"A learned linear map $\Gamma$ on the Lie algebra applied to the raw update "
       r"(the pull toward the target) before it is exponentiated: it can rescale the update and turn it into "
       "other directions. Identity mixing only rescales.",
       r"\Phi_t = \Gamma(\Delta_t),\quad \Delta_t = \Pi_{\mathfrak{g}}(H_t^* X_t)", "Nunley, arXiv 2602.18417",
       ("Tangent update",), ("mixing", "Gamma")),
    _T("Energy", r"In CEM every layer lowers a per-token energy $\varepsilon(x_i \mid h_{1:i})$ of an "
       r"iterate $x_i$ that starts at the layer input $h_i$: attention is a gradient step on a log-sum-exp "
       "interaction energy, the MLP on an element-wise energy. Lower is better within one layer; levels of "
       "different layers are not comparable.",
       r"\varepsilon_{\text{att}}(x_i) = -\sum_k \frac{\eta_k}{\beta}\,\log\sum_{j\le i} e^{S_{k,ij}}",
       "Xu et al., arXiv 2605.07588", ("Recursion step", "Preconditioner"), ("causal energy",)),
    _T("Recursion step", r"CEM repeats its gradient step $T$ times inside a layer, with shared weights and a "
       r"fixed context: $x^{t+1} = x^t - \eta\rho P\nabla\varepsilon(x^t)$. With a small enough step the "
       "energy falls at every step; a rise means the step has left the descent regime.",
       r"x_i^{t+1} = x_i^t - \eta\,\rho_i\,P\,\nabla_{x_i}\varepsilon(x_i^t \mid h_{1:i}),\quad t = 0..T-1",
       "Xu et al., arXiv 2605.07588", ("Energy", "Preconditioner"), ("recursion", "steps", "T")),
    _T("Preconditioner", r"A matrix $P$ (diagonal plus low rank) that reshapes the gradient step of a CEM "
       r"layer. Descent is guaranteed only while $P$ is positive definite.",
       r"P = \mathrm{diag}(\mathrm{softplus}(p)) + U V^\top + V U^\top", "Xu et al., arXiv 2605.07588",
       ("Recursion step",), ("P",)),
    _T("Grassmannian", r"$\mathrm{Gr}(2, r)$: the space of all 2-dimensional planes through the origin of "
       r"$\mathbb{R}^r$. A Grassmann layer turns each pair of reduced vectors $(z_t, z_{t-\Delta})$ into the "
       "plane they span; distances between planes come from their principal angles.",
       r"\mathrm{span}(z_t, z_{t-\Delta}) \in \mathrm{Gr}(2, r)", "Zhang, arXiv 2512.19428",
       ("Plücker coordinates", "Principal angles"), ("Grassmann", "Gr(2,r)", "plane")),
    _T("Plücker coordinates", r"The numbers $p_{ij} = a_i b_j - a_j b_i$ ($i<j$) of a plane spanned by "
       r"$a, b$: the entries of the wedge $a\wedge b$, $r(r-1)/2$ of them. They do not depend on which basis "
       "of the plane is used (up to scale), and swapping $a$ and $b$ flips their sign (orientation).",
       r"p_{ij} = z_{t,i}\,z_{t-\Delta,j} - z_{t,j}\,z_{t-\Delta,i},\quad \hat p = p/\lVert p\rVert",
       "Zhang, arXiv 2512.19428", ("Grassmannian", "Decomposability"), ("Plucker", "wedge")),
    _T("Principal angles", r"The two angles $0 \le \theta_1 \le \theta_2 \le \pi/2$ that describe how two "
       r"planes sit relative to each other: $\theta_1 = 0$ means they share a line, both 0 means the same "
       "plane. They give the geodesic distance and the similarity of the Plücker vectors.",
       r"\lvert\langle \hat p_1, \hat p_2\rangle\rvert = \cos\theta_1\cos\theta_2,\qquad d_g = "
       r"\sqrt{\theta_1^2+\theta_2^2}", "Zhang, arXiv 2512.19428", ("Geodesic distance", "Grassmannian"),
       ("principal angle", "theta")),
    _T("Decomposability", r"Whether a Plücker-type vector is the wedge of two vectors, i.e. one plane. An "
       r"average of several planes usually is not; $\kappa = \lambda_1^2/\sum_k\lambda_k^2$ of its "
       r"antisymmetric matrix is 1 for a single plane and down to $1/\lfloor r/2\rfloor$ for a spread blend.",
       r"\kappa = \lambda_1^2 \Big/ \sum_k \lambda_k^2", "Zhang, arXiv 2512.19428", ("Plücker coordinates",),
       ("kappa",)),
    _T("Gate", r"A learned blend $\alpha_t \in (0,1)^d$ between the residual $h_t$ and the geometric "
       r"(plane) branch $g_t$: $m_t = \alpha_t\odot h_t + (1-\alpha_t)\odot g_t$. The gate share "
       r"$1-\alpha$ is how much of the output comes from the planes.",
       r"m_t = \alpha_t \odot h_t + (1 - \alpha_t) \odot g_t", "Zhang, arXiv 2512.19428", ("Grassmannian",),
       ("gating", "alpha")),
    _T("BPC", "Bits per character: the mean negative log-likelihood of the next character, in bits. Lower is "
       "better; a model that knew nothing about a 65-letter alphabet would need about 6 bits.",
       r"\mathrm{BPC} = \frac{1}{N}\sum_t -\log_2 p(x_{t+1}\mid x_{\le t})", "Nunley, arXiv 2602.18417",
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
