"""Guided tours: short lessons a teacher steps through on the bundled zoo (issue 16, "The teaching layer").

A :class:`Lesson` is a list of :class:`Step` s. Each step names everything the app needs to show it, offline,
on the bundled checkpoints (``assets/checkpoints``, docs/zoo.md): the checkpoint (a catalog ref such as
``bundled/osm-rnn-o-s5``), the text it reads, the token cursor, the view (a slug of the view pages,
:mod:`geomlab.teach.views`), the view's controls (layer, head, slot, block, substep), the CEM recursion steps T
where they matter, optionally a second checkpoint for a side-by-side comparison, which figures to show
(a subset of the view's, to keep a step readable, plus the two tour-only figures of :data:`EXTRA_FIGURES`),
and the *notice*: what to look at, in plain words (inline LaTeX ``$...$`` allowed).

The lessons are data (:data:`LESSONS`), so they can be checked without a browser: :func:`validate` checks a
lesson against a catalog listing (the checkpoint exists, the view shows its kind, the cursor is inside the
text's tokens, the figures and controls exist) and, given a tracing function, against real traces (the
figures apply and the control values are ones :func:`geomlab.teach.views.control_options` offers).

The numbers quoted in the notices were measured on the bundled checkpoints with these texts (and
``tests/test_tours.py`` re-checks the ones a figure would contradict: O(5)'s surprisal near 0 and the
torus's near chance, the return to the identity, the eigenvalue phases, energy falling at every step).

No streamlit here (the page is ``app_pages/tour.py``); plotly is imported only when a tour-only figure is
built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from geomlab.models.family import CEM, GRASSMANN, OSM, FAMILIES as _RECORDS
from geomlab.teach import views

#: The families a lesson can belong to: the ``lesson`` label of each family record that has one (the three
#: papers' families; the attention lesson, about the OSMFormer's scores, is the OSM family's).
FAMILIES = tuple(f.lesson for f in _RECORDS if f.lesson)

#: Tour-only figures a step may name besides its view's figures: name -> what it shows.
#: ``accuracy_by_length`` reads the checkpoints' cards (no trace); ``surprisal`` needs both traces.
EXTRA_FIGURES = {
    "accuracy_by_length": "final-position accuracy by word length of each checkpoint's card (word problems)",
    "surprisal": "per-position surprisal of each checkpoint on the step's text (Compare's first chart)",
}

#: Controls a step may set (the views' per-figure controls; ``steps`` is the Step's own ``steps``).
STEP_CONTROLS = ("layer", "head", "slot", "block", "substep")

#: Colours of the first and second checkpoint in comparison figures (Okabe-Ito, as on Compare).
COLOURS = ("#0072B2", "#E69F00")


@dataclass(frozen=True)
class Step:
    """One step of a lesson: what the app sets and draws, and what to notice.

    Attributes:
        title: short heading ("The task: a running product").
        checkpoint: catalog ref of the checkpoint, ``bundled/NAME`` (the zoo).
        text: the text (or word of symbols) the checkpoint reads; keep it short (a step is drawn at once).
        view: slug of a view page (``trajectories``, ``attention``, ``energy``, ``planes``, ...).
        notice: what to look at, in plain words; markdown with inline LaTeX ``$...$``, may name a figure.
        body: one or two sentences that set the scene before the notice (markdown, optional).
        cursor: 0-based token position highlighted in the figures.
        controls: values of the view's controls (keys of :data:`STEP_CONTROLS`); missing ones take the
            view's defaults (:func:`geomlab.teach.views.default_controls`).
        steps: CEM recursion steps T at inference (None: the checkpoint's trained T).
        compare: a second checkpoint ref drawn beside the first (None: a single-checkpoint step).
        figures: the figures to show, in order (names of the view's figures or of
            :data:`EXTRA_FIGURES`); empty: every figure of the view that applies.
    """

    title: str
    checkpoint: str
    text: str
    view: str
    notice: str
    body: str = ""
    cursor: int = 0
    controls: Mapping[str, Any] = field(default_factory=dict)
    steps: int | None = None
    compare: str | None = None
    figures: tuple[str, ...] = ()

    @property
    def checkpoints(self) -> tuple[str, ...]:
        """The step's checkpoint refs: ``(checkpoint,)`` or ``(checkpoint, compare)``."""
        return (self.checkpoint,) if self.compare is None else (self.checkpoint, self.compare)

    def figure_names(self, tr: Any = None) -> list[str]:
        """The figures this step shows, in order: its own list, else the view's figures (those that apply
        to ``tr`` when given). Design choice: an explicit list keeps a step to the two or three figures its
        notice talks about."""
        if self.figures:
            return list(self.figures)
        if tr is None:
            return list(views.VIEWS[self.view].figures)
        return [f.name for f in views.view_figures(self.view, tr)]

    def trace_options(self, model_config: Mapping[str, Any]) -> dict[str, Any]:
        """Options that change the trace (as ``app_pages/_data.trace_for`` takes them): ``{"steps": T}``
        when the step asks for a T other than the checkpoint's trained one, else ``{}``."""
        if self.steps is None or "steps" not in views.VIEWS[self.view].controls:
            return {}
        return {} if int(self.steps) == views.trained_steps(dict(model_config)) else {"steps": int(self.steps)}


@dataclass(frozen=True)
class Lesson:
    """A guided tour: ``slug`` (its URL key, ``/tour?lesson=SLUG&step=N``), ``title``, ``family`` (one of
    :data:`FAMILIES`), a one-line ``summary`` and its ``steps`` (3-6; design choice: short enough for one
    lesson in a class)."""

    slug: str
    title: str
    family: str
    summary: str
    steps: tuple[Step, ...]


# ---------------------------------------------------------------- the lessons
# S5 words: each token is a permutation of 0..4 in one-line notation ("12340" sends 0->1, 1->2, ..., 4->0).
_A, _B = "10234", "12340"  # a transposition (order 2) and a 5-cycle (order 5)
_S5_WORD = "12340 10234 12340 12340 10234 21034 12034 10234 01243 12340"
_S5_RETURNS = " ".join([_B] * 5 + [_A] * 2 + [_B] * 5)  # b^5 = e, a^2 = e: the identity at 4, 6 and 11
_S5_ORDER = " ".join([_A, _B, _A, _B, _B, _A, _A, _B])
_HAMLET = "To be, or not to be, that is the question."

S5_LESSON = Lesson(
    slug="s5-word-problem",
    title="Why O(d) can track the S5 word problem and the torus cannot",
    family=OSM.lesson,
    summary="Two OSM-RNNs read the same words of permutations; one keeps its state on O(5), the other on the "
            "torus T⁵. One names the running product, the other guesses.",
    steps=(
        Step(
            title="The task: name the running product",
            checkpoint="bundled/osm-rnn-o-s5", compare="bundled/osm-rnn-torus-s5",
            text=_S5_WORD, view="trajectories", cursor=4,
            figures=("accuracy_by_length", "surprisal"),
            body="Each token is a permutation of five things, an element of the group $S_5$ (one-line "
                 "notation: `12340` sends 0→1, 1→2, …, 4→0). After reading $g_1, \\dots, g_t$ a model must "
                 "name the running product $g_1 g_2 \\cdots g_t$: one of 120 answers. Both models are "
                 "OSM-RNNs trained with the same recipe; only their group differs.",
            notice="**Accuracy by length** (from the cards): O(5) (blue) is right almost always up to its "
                   "training length 32 and fades beyond; the torus (orange) sits at chance, $1/120$, at "
                   "every length. **Surprisal** on this word: O(5) needs about 0 bits at every position, "
                   "the torus hovers at the dotted chance line, $\\log_2 120 \\approx 6.9$ bits (a right "
                   "answer on this one short word, in its legend, is luck: the accuracy panel averages many "
                   "words)."),
        Step(
            title="O(5)'s spectrum shows the product's cycle type",
            checkpoint="bundled/osm-rnn-o-s5", text=_S5_WORD, view="trajectories", cursor=4,
            figures=("phase_circle", "phase_timeline"),
            body="The state $H_t$ is a 5 × 5 orthogonal matrix, so its eigenvalues lie on the unit circle. "
                 "If the running product $g$ has order $k$ ($g^k = e$) and the model represents the group, "
                 "then $H_t^k = I$: the eigenvalues must be $k$-th roots of unity.",
            notice="At the cursor (position 4) the running product `43021` is a 5-cycle, and the "
                   "**eigenvalue phases** sit at $0, \\pm 2\\pi/5, \\pm 4\\pi/5$: fifth roots of unity. "
                   "Move the cursor: at position 1 (a 4-cycle) they jump to $\\pm\\pi/2$ and $\\pi$, at "
                   "position 2 (order 6) to $\\pm 2\\pi/3$ and $\\pi$. The **phase timeline** shows the "
                   "same levels switching as the product changes: the state carries the product's cycle "
                   "type, read straight off its spectrum."),
        Step(
            title="Back to the identity",
            checkpoint="bundled/osm-rnn-o-s5", compare="bundled/osm-rnn-torus-s5",
            text=_S5_RETURNS, view="trajectories", cursor=4, figures=("distance_profile",),
            body="This word is $b^5\\, a^2\\, b^5$ with the 5-cycle $b$ = `12340` and the transposition "
                 "$a$ = `10234`. Since $b^5 = e$ and $a^2 = e$, the running product is the identity at "
                 "positions 4, 6 and 11.",
            notice="Top panel, **distance from the identity** $\\|\\log H_t\\|_F$: O(5) (the first figure) drops "
                   "to about 0 exactly at positions 4, 6 and 11 (0.09, 0.12, 0.19 rad) and is near 4 rad elsewhere. "
                   "The torus (the second) never comes back: at those positions it is 2.2, 3.3 and 2.7 rad away. "
                   "Its state does not know that the product is the identity."),
        Step(
            title="On the torus, angles only add",
            checkpoint="bundled/osm-rnn-torus-s5", text=_S5_ORDER, view="trajectories", cursor=2,
            figures=("torus_angles", "phase_circle"),
            body="A torus state is diagonal, $H_t = \\mathrm{diag}(e^{i\\varphi_1}, \\dots, e^{i\\varphi_5})$, "
                 "and every update adds angles: $\\varphi_k \\leftarrow \\varphi_k + \\theta_k$, each angle on "
                 "its own. How far it moves, $\\theta$, depends on the token and, through the pull step, on the "
                 "angles the state already has.",
            notice="In **torus angles** each of the five angles moves by adding; nothing ever mixes two of "
                   "them. The same token does not always move an angle by the same amount: here `12340` moves "
                   "$\\varphi_2$ by about +2.1 at position 1 and by about −2.1 at position 4, because the pull "
                   "reads the state. Diagonal matrices commute, $H_a H_b = H_b H_a$, but in $S_5$ the order "
                   "matters: `10234` then `12340` is not `12340` then `10234`. Were each token's step fixed, a "
                   "commuting state could follow only S5's abelian shadow, the sign of the permutation; the "
                   "state-dependent step makes that an argument, not a proof, for this model. Trained the same "
                   "way as O(5), the torus still stayed at chance (step 1), while O(5)'s rotations, which do "
                   "not commute, hold the product itself (steps 2 and 3)."),
    ),
)

ATTENTION_LESSON = Lesson(
    slug="attention-similarity",
    title="How attention becomes similarity on a group",
    family=OSM.lesson,
    summary="In an OSMFormer the attention score is the similarity of two states on the group, "
            "Re tr(Hᵢ* Hⱼ); a Transformer's score is a learned product instead.",
    steps=(
        Step(
            title="Two maps side by side",
            checkpoint="bundled/osmformer-o-linear-tinyshakespeare", text=_HAMLET, view="attention",
            cursor=14, controls={"layer": 0}, figures=("similarity_map", "attention_maps"),
            body="An OSMFormer keeps every position's state $H_i$ on the orthogonal group O(15). Its attention "
                 "score is the similarity of two states, scaled, minus a distance penalty (ALiBi): "
                 "$S_{ij} = s_\\ell\\, \\mathrm{Re\\,tr}(H_i^* H_j) - m\\,(i - j)$, then a causal softmax.",
            notice="First the **similarity** $\\mathrm{Re\\,tr}(H_i^* H_j)$, then the **attention "
                   "weights** (side by side on a wide screen). In layer 0 the states are the token matrices, so equal characters are "
                   "exactly as similar as possible ($\\mathrm{tr}(H^\\top H) = d = 15$, the darkest red): "
                   "look for the red cells off the diagonal (the two t's, the o's, the spaces). In the weights, "
                   "almost all of each row's weight stays on the diagonal (the position itself); the next "
                   "step reads one row to see where the rest goes."),
        Step(
            title="One row: where the cursor looks",
            checkpoint="bundled/osmformer-o-linear-tinyshakespeare", text=_HAMLET, view="attention",
            cursor=14, controls={"layer": 0}, figures=("attention_row",),
            body="Position 14 is the t of “to”; position 12 is the t of “not”.",
            notice="Position 14 puts most weight on itself (0.94), and the next most, 0.034, on position 12, "
                   "the earlier **t** (similarity 15, the maximum), more than on the nearer space at 13 "
                   "(0.028, similarity 5.7). Hover a point to read its weight and similarity. Similar states "
                   "win, and the distance penalty decides between near and far."),
        Step(
            title="Deeper layers: states carry context",
            checkpoint="bundled/osmformer-o-linear-tinyshakespeare", text=_HAMLET, view="attention",
            cursor=14, controls={"layer": 2}, figures=("similarity_map", "attention_maps"),
            body="Each layer moves every state along the group, $H \\leftarrow H \\exp(\\Phi)$, with an "
                 "update that depends on the positions it attended to.",
            notice="In layer 2 the red cells of equal letters are still there but weaker: the two t's "
                   "(positions 12 and 14) now have a similarity of 4.4 out of 15, since each state has absorbed "
                   "its own context. With the similarities closer together, the distance penalty counts for "
                   "more: row 14 now gives the nearer space at 13 more weight (0.14) than the earlier t "
                   "(0.08). Hover a cell to read its value."),
        Step(
            title="On the torus, similarity is a sum of cosines",
            checkpoint="bundled/osmformer-torus-tinyshakespeare", text=_HAMLET, view="attention",
            cursor=14, controls={"layer": 0}, figures=("similarity_map", "attention_maps"),
            body="On the torus $T^{128}$ a state is 128 angles, and the similarity becomes "
                 "$\\mathrm{Re\\,tr}(H_i^* H_j) = \\sum_k \\cos(\\varphi_{ik} - \\varphi_{jk})$.",
            notice="The **similarity** map is warm almost everywhere: equal letters reach the maximum, 128, and "
                   "most other pairs still score 80 to 94 out of 128. The attention sharpens those gaps: in "
                   "layer 0 the **weights** of position 14 stay mostly on the position itself (0.86), the "
                   "earlier t, whose similarity is the maximum, gets 0.11 and the space just before it only "
                   "0.02. In layer 1 (full view) the position keeps 0.73."),
        Step(
            title="A Transformer for contrast",
            checkpoint="bundled/transformer-alibi-tinyshakespeare", text=_HAMLET, view="attention",
            cursor=14, controls={"layer": 0, "head": None}, figures=("attention_maps", "attention_row"),
            body="A standard Transformer scores $q_i \\cdot k_j$ with $q = W^Q x_i$, $k = W^K x_j$: a learned "
                 "bilinear form of two vectors, not a similarity of states on a group.",
            notice="There is no **similarity** map to put beside the weights: nothing says two positions "
                   "are alike. The **weights** of position 14 (mean over heads) spread over nearby "
                   "positions (the space before it gets the most, about 0.11) and the earlier t is not singled "
                   "out. In an OSMFormer the geometry says what “alike” means; here the weights learn it."),
    ),
)

CEM_LESSON = Lesson(
    slug="cem-energy",
    title="Watching the energy fall as T grows",
    family=CEM.lesson,
    summary="A CEM layer is T gradient steps on an energy. Run more steps at inference and watch the energy "
            "keep falling, and what that does and does not mean.",
    steps=(
        Step(
            title="T = 2: the trained number of steps",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=2,
            figures=("energy_descent",),
            body="Each sub-block of a CEM layer (attention, MLP) moves its iterate $x^t$ by a gradient step "
                 "on an energy $\\varepsilon$; this checkpoint was trained with $T = 2$ steps.",
            notice="In **energy descent** each row is a layer, the columns are the attention and MLP "
                   "sub-blocks. The line is the token mean of $\\Delta\\varepsilon = \\varepsilon(x^t) - "
                   "\\varepsilon(x^0)$: it goes down at steps 1 and 2 in every panel, and no red triangle "
                   "marks a rise. Compare steps within a panel, never levels across panels."),
        Step(
            title="T = 4: more steps at inference",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=4,
            figures=("energy_descent",),
            body="The same weights, run for 4 steps instead of 2 (test-time recursion).",
            notice="Every curve keeps falling past step 2, one step after another: the energy is still a "
                   "descent objective for steps the model never trained with. Watch the first layer's MLP "
                   "panel: it falls much further than at $T = 2$."),
        Step(
            title="T = 16: falling, and drifting",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=16,
            figures=("energy_descent",),
            body="Sixteen steps, eight times the training budget.",
            notice="The energy still falls at every one of the 16 steps. Now read the **bottom panel**, the "
                   "displacement $\\|x^t - h\\| / \\rho$: in layer 0 the attention iterate (the solid blue line) "
                   "ends about 62 away from its input (about 7 at $T = 2$). The energies are unbounded below, so "
                   "a lower energy is not a better prediction: on the first 20,000 validation characters this "
                   "model's bits per character are 2.17 at $T = 2$, 2.93 at $T = 4$ and 8.1 at $T = 16$."),
        Step(
            title="Token by token",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=16,
            controls={"layer": 3, "block": 0}, figures=("energy_tokens",),
            body="The mean can hide tokens that go the other way; this heatmap shows every token.",
            notice="In **energy change per token** (layer 3, attention sub-block) every column gets bluer "
                   "step after step: each token's own energy falls, none rises (a rise would be red). They fall "
                   "by very different amounts: the t of “to” (14) and the final full stop fall furthest, while "
                   "a few columns (the q of “question” at 33, the T and the space at 0 and 2) stay almost white. "
                   "Move the cursor to follow one token's column."),
    ),
)

GRASSMANN_LESSON = Lesson(
    slug="grassmann-planes",
    title="How token pairs become planes",
    family=GRASSMANN.lesson,
    summary="A Grassmann layer mixes positions without attention: each token and an earlier one span a "
            "2-plane, encoded by its Plücker coordinates.",
    steps=(
        Step(
            title="A pair of positions spans a plane",
            checkpoint="bundled/grassmann-tinyshakespeare", text=_HAMLET, view="planes", cursor=17,
            controls={"layer": 0, "slot": 0}, figures=("plane_sphere", "plane_interpolation"),
            body="Each position $t$ is reduced to a vector $z_t \\in \\mathbb{R}^{12}$. Together with the "
                 "position $\\Delta$ earlier it spans a plane $\\mathrm{span}(z_t, z_{t-\\Delta})$: a point of "
                 "the Grassmannian $\\mathrm{Gr}(2, 12)$. Here, in layer 0, $\\Delta = 1$.",
            notice="**Plane on the sphere**: the plane at one position, seen through the three axes it uses "
                   "most (move the token cursor to follow the text). **Plane interpolation**: the shortest path "
                   "from the plane at 16 to the plane at 17 (0.81 rad). Its first principal angle is 0: both "
                   "planes contain $z_{16}$, so they share a line and only the second angle turns. Move the "
                   "cursor to 14, the t of “not to”: the planes at 13 (“t␣”) and 14 (“␣t”) are spanned by "
                   "the same two characters, yet they are 0.25 rad apart, because a vector carries its "
                   "position as well as its character (a sinusoidal code is added to each token)."),
        Step(
            title="Plücker coordinates: a plane as numbers",
            checkpoint="bundled/grassmann-tinyshakespeare", text=_HAMLET, view="planes", cursor=14,
            controls={"layer": 0, "slot": 0}, figures=("plucker_heatmap", "plane_matrix"),
            body="A plane spanned by $a, b$ is stored as its Plücker vector $p_{ij} = a_i b_j - a_j b_i$ "
                 "($i < j$), normalised: $12 \\cdot 11 / 2 = 66$ numbers that do not depend on which two "
                 "vectors span it.",
            notice="**Plücker coordinates**: one row per position, one column per pair of axes $(i, j)$; the "
                   "colour is the sign, i.e. the plane's orientation. **Plane matrix** (left): the plane "
                   "at the cursor as the antisymmetric matrix $a b^\\top - b a^\\top$; (right) which axis pairs "
                   "the layer uses most over the whole text."),
        Step(
            title="How far consecutive planes turn",
            checkpoint="bundled/grassmann-tinyshakespeare", text=_HAMLET, view="planes", cursor=14,
            controls={"layer": 0, "slot": 0}, figures=("plane_angles", "plane_distances"),
            body="Two planes are compared by their principal angles $\\theta_1 \\le \\theta_2$; the geodesic "
                 "distance on the Grassmannian is $\\sqrt{\\theta_1^2 + \\theta_2^2}$.",
            notice="In **principal angles** $\\theta_1$ stays at 0 for $\\Delta = 1$ (consecutive planes "
                   "share $z_t$) and all the motion is in $\\theta_2$, up to 1.54 rad here (at most $\\pi/2$). "
                   "**Plane deformations** (its upper panel) shows the same distance for every layer at once, one row "
                   "per layer: a plane that turns a lot marks a token that changes the local picture."),
        Step(
            title="Longer offsets and the gate",
            checkpoint="bundled/grassmann-tinyshakespeare", text=_HAMLET, view="planes", cursor=14,
            controls={"layer": 2, "slot": 0}, figures=("plane_similarity", "gate_share"),
            body="Each layer has one offset: layer $\\ell$ pairs $t$ with $t - \\Delta_\\ell$, "
                 "$\\Delta = 1, 2, 4, 8, 12, 16$ in layers 0 to 5 (the paper's list, one entry per layer). This "
                 "step shows layer 2, $\\Delta = 4$: the planes $\\mathrm{span}(z_t, z_{t-4})$.",
            notice="**Plane similarity** $|\\langle \\hat p_t, \\hat p_s\\rangle|$ compares every pair of "
                   "positions: a geometric comparison, not attention weights, and the first 4 positions "
                   "have no partner yet (blank). In layer 0 a plane is almost a function of its two characters: "
                   "positions whose pair recurs (“t␣” at 13 and 25) score 0.98 on average, the pair reversed "
                   "(“␣t”: the same plane, opposite orientation) 0.99, other pairs 0.31. Here in layer 2 the "
                   "same pair four apart scores only 0.42 on average (other pairs 0.12): the reduced "
                   "vectors now carry what came before. **Gate share**: the part of each layer's output that "
                   "comes from the plane branch, the rest being the residual the gate keeps: 0.76 in layer 0, "
                   "0.54 in layer 1, 0.26 to 0.33 in layers 2 to 5 (averages over the text)."),
    ),
)

#: Every lesson by slug, in the order the Tour page lists them.
LESSONS: dict[str, Lesson] = {lesson.slug: lesson for lesson in (S5_LESSON, ATTENTION_LESSON, CEM_LESSON,
                                                                 GRASSMANN_LESSON)}


def lesson(slug: str) -> Lesson:
    """The lesson ``slug``; ``KeyError`` with the known slugs when there is none."""
    if slug not in LESSONS:
        raise KeyError(f"no lesson {slug!r}; lessons: {', '.join(LESSONS)}")
    return LESSONS[slug]


def resolve_link(lesson_slug: str | None, step: str | int | None) -> tuple[Lesson, int, str | None]:
    """The lesson and 0-based step index a link ``?lesson=SLUG&step=N`` (N counted from 1) opens, and a
    one-line notice when the link was bad (design choice: an unknown lesson falls back to the first lesson,
    a step that is not a number or out of range to step 1 of the chosen lesson; None parts are not bad)."""
    first = next(iter(LESSONS.values()))
    notes = []
    chosen = first
    if lesson_slug is not None:
        if lesson_slug in LESSONS:
            chosen = LESSONS[lesson_slug]
        else:
            notes.append(f"The link names lesson {lesson_slug!r}, which does not exist; showing "
                         f"“{first.title}”.")
    index = 0
    if step is not None:
        try:
            n = int(str(step).strip())
        except ValueError:
            n = None
        if n is None or not 1 <= n <= len(chosen.steps):
            notes.append(f"The link's step {str(step)!r} is not a step of this lesson (1–{len(chosen.steps)}); "
                         "showing step 1.")
        else:
            index = n - 1
    return chosen, index, (" ".join(notes) or None)


# ---------------------------------------------------------------- validation
def _vocab_tokens(entry: Any, text: str) -> list[str]:
    from geomlab.data.vocab import Vocab, check_text
    from geomlab.trace import MAX_TEXT_CHARS

    return check_text(Vocab.from_json(entry.meta.get("vocab") or {}), text, MAX_TEXT_CHARS)


def validate(lesson_: Lesson, entries: Iterable[Any],
             trace_fn: Callable[[Any, str, dict], Any] | None = None) -> list[str]:
    """Problems of ``lesson_`` as sentences (empty when it is sound).

    ``entries``: catalog entries (:func:`geomlab.checkpoints.catalog.list_checkpoints`; ``ref``, ``kind``, ``meta``,
    ``model_config``, ``is_word_problem``). Checked without weights: 3-6 steps; every checkpoint ref is in
    ``entries`` and of a kind the step's view shows; the text is readable by the checkpoint's vocabulary
    and the cursor is inside its tokens; the figures are the view's or :data:`EXTRA_FIGURES` (the extras
    only where they make sense: ``surprisal`` needs a second checkpoint, ``accuracy_by_length`` word-problem
    cards); the controls are ones the view has; T is only set on a view with the ``steps`` control and in
    :func:`geomlab.teach.views.steps_range`.

    ``trace_fn(entry, text, trace_options) -> trace``: when given, each checkpoint is traced on the step's
    text and the figures must apply to the trace (:func:`geomlab.teach.views.applies`) and each control value be
    one :func:`geomlab.teach.views.control_options` offers for it (a layer on a one-layer trace must be 0). A
    step with problems already found is not traced (its T or text may not be traceable).
    """
    by_ref = {e.ref: e for e in entries}
    problems: list[str] = []
    where = f"lesson {lesson_.slug!r}"
    if lesson_.family not in FAMILIES:
        problems.append(f"{where}: unknown family {lesson_.family!r}")
    if not 3 <= len(lesson_.steps) <= 6:
        problems.append(f"{where}: {len(lesson_.steps)} steps (a lesson has 3-6)")
    for n, step in enumerate(lesson_.steps, start=1):
        at = f"{where} step {n} ({step.title!r})"
        found = len(problems)  # a step with static problems is not traced
        view = views.VIEWS.get(step.view)
        if view is None:
            problems.append(f"{at}: unknown view {step.view!r}")
            continue
        for name in step.figures:
            if name in EXTRA_FIGURES:
                if name == "surprisal" and step.compare is None:
                    problems.append(f"{at}: 'surprisal' compares two checkpoints, but the step has one")
                continue
            if name not in view.figures:
                problems.append(f"{at}: {name!r} is not a figure of view {step.view!r}")
        for name in step.controls:
            if name not in STEP_CONTROLS or name not in view.controls:
                problems.append(f"{at}: view {step.view!r} has no control {name!r}")
        if step.steps is not None and "steps" not in view.controls:
            problems.append(f"{at}: sets T = {step.steps}, but view {step.view!r} has no recursion steps")
        for ref in step.checkpoints:
            entry = by_ref.get(ref)
            if entry is None:
                problems.append(f"{at}: checkpoint {ref!r} is not in the catalog")
                continue
            if entry.kind not in view.kinds:
                problems.append(f"{at}: view {step.view!r} does not show {entry.kind!r} ({ref})")
                continue
            if "accuracy_by_length" in step.figures and not entry.is_word_problem:
                problems.append(f"{at}: 'accuracy_by_length' needs word-problem cards, {ref} is not one")
            try:
                tokens = _vocab_tokens(entry, step.text)
            except ValueError as exc:
                problems.append(f"{at}: {ref} cannot read the text: {exc}")
                continue
            if not 0 <= step.cursor < len(tokens):
                problems.append(f"{at}: cursor {step.cursor} outside the text's {len(tokens)} tokens ({ref})")
            if step.steps is not None:
                lo, hi = views.steps_range(entry.model_config)
                if not lo <= step.steps <= hi:
                    problems.append(f"{at}: T = {step.steps} outside {lo}..{hi} for {ref}")
            if trace_fn is None or len(problems) > found:
                continue
            tr = trace_fn(entry, step.text, step.trace_options(entry.model_config))
            problems += _trace_problems(step, tr, f"{at} ({ref})")
    return problems


def _trace_problems(step: Step, tr: Any, at: str) -> list[str]:
    out = []
    for name in step.figures:
        if name not in EXTRA_FIGURES and not views.applies(tr, name):
            out.append(f"{at}: figure {name!r} does not apply to this checkpoint's trace")
    if not step.figure_names(tr):
        out.append(f"{at}: no figure of view {step.view!r} applies")
    opts = views.control_options(step.view, tr)
    for name, value in step.controls.items():
        if name == "layer":
            if not isinstance(value, int) or not 0 <= value < views.n_layers(tr):
                out.append(f"{at}: layer {value!r} outside 0..{views.n_layers(tr) - 1}")
        elif name in opts and value not in opts[name]:
            out.append(f"{at}: {name} = {value!r} is not one of {opts[name]}")
        elif name not in opts and value not in (None, 0):
            out.append(f"{at}: {name} = {value!r} set, but this trace offers no choice of {name}")
    return out


def step_controls(step: Step, tr: Any) -> dict[str, Any]:
    """The control values the step's figures are drawn with for trace ``tr``: the step's own over the
    view's defaults, made valid for ``tr`` (:func:`geomlab.teach.views.clamp_controls`, so a head of None, the
    mean over heads, stays None)."""
    ctl = views.clamp_controls(step.view, tr, dict(step.controls))
    if "head" in step.controls and step.controls["head"] is None:
        ctl["head"] = None
    return ctl


# ---------------------------------------------------------------- tour-only figures
def accuracy_by_length_figure(curves: Sequence[tuple[str, Mapping[int, float], str]],
                              chance: float | None = None, train_length: int | None = None):
    """Final-position accuracy by word length of several word-problem checkpoints, from their cards.

    ``curves``: ``[(name, {length: accuracy in [0, 1]}, colour)]``; ``chance``: 1/|G| drawn as a dotted
    line; ``train_length``: a dashed vertical line. Returns a :class:`geomlab.figures.Chart` (x: length on a
    log axis, y: accuracy). Raises :class:`geomlab.figures.FigureError` when no curve has a point. Source:
    the cards' ``accuracy_by_length`` (docs/zoo.md); the chart follows the report's word-problem figure."""
    import plotly.graph_objects as go

    from geomlab.figures._chart import FigureError, finish

    curves = [(name, dict(sorted(c.items())), colour) for name, c, colour in curves if c]
    if not curves:
        raise FigureError("no accuracy-by-length curve on these cards")
    lengths = sorted({n for _, c, _ in curves for n in c})
    fig = go.Figure()
    for name, c, colour in curves:
        fig.add_trace(go.Scatter(x=list(c), y=list(c.values()), mode="lines+markers", name=name,
                                 line={"color": colour, "width": 2.5}, marker={"color": colour, "size": 8},
                                 hovertemplate="length %{x}: accuracy %{y:.2f}<extra>" + name + "</extra>"))
    if chance:
        fig.add_trace(go.Scatter(x=[lengths[0], lengths[-1]], y=[chance, chance], mode="lines",
                                 name=f"chance 1/{round(1 / chance)}", hoverinfo="skip",
                                 line={"color": "#999999", "dash": "dot"}))
    if train_length:  # a trace, not a shape: shapes on a log axis take log10 coordinates
        fig.add_trace(go.Scatter(x=[train_length, train_length], y=[0, 1], mode="lines",
                                 name=f"training length {train_length}", hoverinfo="skip",
                                 line={"color": "#999999", "dash": "dash", "width": 1}))
    fig.update_xaxes(type="log", title="word length", tickvals=lengths, ticktext=[str(n) for n in lengths])
    fig.update_yaxes(title="final-position accuracy", range=[-0.02, 1.05])
    caption = ("Accuracy of the final running product by word length, from each checkpoint's card (256 test "
               "words per length); dotted: chance, dashed: the training length.")
    return finish(fig, "Accuracy by word length", caption, "accuracy_by_length", height=340,
                  legend={"orientation": "h", "y": -0.25, "x": 0})
