"""The four bundled guided lessons (:class:`geomlab.teach.tours.Lesson`), by slug in :data:`LESSONS`, and the
lesson and step a link ``/tour?lesson=SLUG&step=N`` opens (:func:`resolve_link`).

Each lesson runs offline on the bundled checkpoints (``assets/checkpoints``, docs/zoo.md). The numbers quoted
in the notices were measured on these checkpoints with these texts; ``tests/teach/test_tours.py`` re-checks
the ones a figure would contradict (O(5)'s surprisal near 0 and the torus's near chance, the return to the
identity, the eigenvalue phases, energy falling at every step). Every lesson passes
:func:`geomlab.teach.tours.validate` and asks at least one question, whose right answer
``tests/teach/test_questions.py`` recomputes from the step's checkpoint and text.
"""

from __future__ import annotations

from geomlab.models.family import CEM, GRASSMANN, OSM
from geomlab.teach.tours import Choice, ClickPosition, Lesson, Step


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
                   "training length 32 and fades beyond; the torus (green) sits at chance, $1/120$, at "
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
            question=Choice(
                prompt="At the cursor (position 4) the running product is a 5-cycle. Where do the eigenvalue "
                       "phases of O(5)'s state $H_4$ sit?",
                options=("At $0, \\pm 2\\pi/5, \\pm 4\\pi/5$: fifth roots of unity",
                         "At $\\pm\\pi/2$ and $\\pi$: fourth roots of unity",
                         "All at 0: the state is the identity",
                         "Anywhere on the circle: a trained state has no reason to be exact"),
                answer=0,
                explanation="A 5-cycle $g$ has $g^5 = e$; a state that represents it has $H^5 = I$, so its "
                            "eigenvalues are fifth roots of unity."),
            notice="At the cursor (position 4) the running product `43021` is a 5-cycle, and the "
                   "**eigenvalue phases** sit at $0, \\pm 2\\pi/5, \\pm 4\\pi/5$: fifth roots of unity. "
                   "Elsewhere they move: at position 1 (a 4-cycle) they jump to $\\pm\\pi/2$ and $\\pi$, at "
                   "position 2 (order 6) to $\\pm 2\\pi/3$ and $\\pi$. The **phase timeline** shows the "
                   "same levels switching as the product changes: the state carries the product's cycle "
                   "type, read straight off its spectrum."),
        Step(
            title="Back to the identity",
            checkpoint="bundled/osm-rnn-o-s5", compare="bundled/osm-rnn-torus-s5",
            text=_S5_RETURNS, view="trajectories", cursor=2, figures=("distance_profile",),
            body="This word is $b^5\\, a^2\\, b^5$ with the 5-cycle $b$ = `12340` and the transposition "
                 "$a$ = `10234`. Since $b^5 = e$ and $a^2 = e$, the running product comes back to the identity "
                 "more than once (positions count from 0).",
            question=ClickPosition(
                prompt="At which position is the running product the identity, so that O(5)'s state should "
                       "come back to $I$?",
                positions=(4, 6, 11),
                explanation="$b^5 = e$ after the fifth token (position 4), $b^5 a^2 = e$ at position 6 and "
                            "$b^5 a^2 b^5 = e$ at position 11."),
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
        Step(
            title="What if: undo a token by steering the state",
            checkpoint="bundled/osm-rnn-o-s5", text=_S5_WORD, view="trajectories", cursor=5,
            figures=("phase_circle",), whatif=("steer", -3.0),
            body="An intervention moves the state along its own group and lets the model run on: here $H_5$ "
                 "becomes $H_5 \\exp(\\varepsilon \\hat\\Phi_5)$, a step of $\\varepsilon$ radians along the "
                 "model's own update at position 5 (the token `21034`; that update is "
                 "$\\lVert\\Phi_5\\rVert = 4.44$ long). The state never leaves O(5).",
            notice="At $\\varepsilon = 0$ the model names `03421`, the running product. Along its own update "
                   "it keeps naming `03421` for every $\\varepsilon$ from −2 to +1.5: the readout is robust to a "
                   "push of half the step. At $\\varepsilon = -3$ (**Running product at position 5**) it names "
                   "`43021`, the product *before* token 5: walking back along the update undoes the token. "
                   "In the app, the size slider of the full view's What if finds where the answer flips."),
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
            body="Position 14 is the t of “to”. The chart is its row of attention weights over the "
                 "positions before it.",
            question=ClickPosition(
                prompt="Position 14 puts most of its weight on itself. Which position gets the next most "
                       "weight?",
                positions=(12,),
                explanation="The earlier t: its state is the same token matrix as position 14's, the "
                            "similarity is the maximum, 15, and that outweighs the distance penalty."),
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
            controls={"layer": 0}, figures=("energy_layer",),
            body="Each sub-block of a CEM layer (attention, MLP) moves its iterate $x^t$ by a gradient step "
                 "on an energy $\\varepsilon$; this checkpoint was trained with $T = 2$ steps.",
            notice="The chart is **layer 0**, its attention and MLP sub-blocks side by side. The line is the "
                   "token mean of $\\Delta\\varepsilon = \\varepsilon(x^t) - \\varepsilon(x^0)$: it goes down "
                   "at steps 1 and 2 in both, and no red triangle marks a rise. Every other layer does the same "
                   "(the full view's **energy descent**, under More figures, draws them all). Compare steps "
                   "within a panel, never levels across panels."),
        Step(
            title="T = 4: more steps at inference",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=4,
            controls={"layer": 0}, figures=("energy_layer",),
            body="The same weights, run for 4 steps instead of 2 (test-time recursion).",
            question=Choice(
                prompt="The model was trained to take 2 steps. Run for 4, what does the mean energy do at "
                       "steps 3 and 4?",
                options=("It keeps falling, in every panel", "It climbs back up towards its start",
                         "It stays flat at its step-2 value"),
                answer=0,
                explanation="Each step is a gradient step on the energy, trained or not; a small enough step "
                            "lowers it."),
            notice="Every curve keeps falling past step 2, one step after another: the energy is still a "
                   "descent objective for steps the model never trained with. Watch the MLP panel: it "
                   "falls much further than at $T = 2$."),
        Step(
            title="T = 16: falling, and drifting",
            checkpoint="bundled/cem-t2-tinyshakespeare", text=_HAMLET, view="energy", cursor=14, steps=16,
            controls={"layer": 0}, figures=("energy_layer",),
            body="Sixteen steps, eight times the training budget.",
            notice="The energy still falls at every one of the 16 steps. Now read the **bottom panel**, the "
                   "displacement $\\|x^t - h\\| / \\rho$: in layer 0 the attention iterate (the "
                   "solid blue line) ends about 62 away from its input (about 7 at $T = 2$). The energies are "
                   "unbounded below, so a lower energy is not a better prediction: on the first 20,000 validation "
                   "characters this model's bits per character are 2.17 at $T = 2$, 2.93 at $T = 4$ and 8.1 at "
                   "$T = 16$."),
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
            question=Choice(
                prompt="With $\\Delta = 1$ the planes at 16 and 17 are $\\mathrm{span}(z_{16}, z_{15})$ and "
                       "$\\mathrm{span}(z_{17}, z_{16})$. What is their first principal angle $\\theta_1$?",
                options=("0", "$\\pi/4$", "$\\pi/2$", "It depends on the characters"),
                answer=0,
                explanation="Both planes contain $z_{16}$: they share a line, so the smallest angle between "
                            "them is 0."),
            notice="**Plane on the sphere**: the plane at one position, seen through the three axes it uses "
                   "most (move the token cursor to follow the text). **Plane interpolation**: the shortest path "
                   "from the plane at 16 to the plane at 17 (0.81 rad). Its first principal angle is 0: both "
                   "planes contain $z_{16}$, so they share a line and only the second angle turns."),
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
            checkpoint="bundled/grassmann-tinyshakespeare", text=_HAMLET, view="planes", cursor=6,
            controls={"layer": 0, "slot": 0}, figures=("plane_angles", "plane_distances"),
            body="Two planes are compared by their principal angles $\\theta_1 \\le \\theta_2$; the geodesic "
                 "distance on the Grassmannian is $\\sqrt{\\theta_1^2 + \\theta_2^2}$.",
            question=ClickPosition(
                prompt="In layer 0, which position's plane turns least from the plane before it?",
                positions=(14,),
                explanation="The planes at 13 (“t␣”) and 14 (“␣t”) are spanned by the same two characters; "
                            "only their position codes differ (0.25 rad, the next smallest turn is 0.64): a "
                            "vector carries its position as well as its character (a sinusoidal code is added "
                            "to each token)."),
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
