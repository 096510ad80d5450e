"""Guided tours: the :class:`Lesson` and :class:`Step` data types of the short lessons a teacher steps through
on the bundled zoo, their validation, the control values a step's figures are drawn with and the tour-only
figure. The lessons themselves are :data:`geomlab.teach.lessons.LESSONS`.

A :class:`Lesson` is a list of :class:`Step` s. Each step names everything the app needs to show it, offline,
on the bundled checkpoints (``assets/checkpoints``, docs/zoo.md): the checkpoint (a catalog ref such as
``bundled/osm-rnn-o-s5``), the text it reads, the token cursor, the view (a slug of the view pages,
:mod:`geomlab.teach.views`), the view's controls (layer, head, slot, block, substep), the CEM recursion steps T
where they matter, optionally a second checkpoint for a side-by-side comparison, which figures to show
(a subset of the view's, to keep a step readable, plus the two tour-only figures of :data:`EXTRA_FIGURES`),
and the *notice*: what to look at, in plain words (inline LaTeX ``$...$`` allowed). A step may ask a
*question* before its notice (:class:`Choice`, multiple choice, or :class:`ClickPosition`, a token position to
click), checked when it is defined (:class:`QuestionError`).

Lessons are data, so they can be checked without a browser: :func:`validate` checks a lesson against a
catalog listing (the checkpoint exists, the view shows its kind, the cursor is inside the text's tokens,
the figures and controls exist) and, given a tracing function, against real traces (the figures apply and
the control values are ones :func:`geomlab.teach.views.control_options` offers).

No streamlit here (the page is ``app_pages/tour.py``); plotly is imported only when a tour-only figure is
built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from geomlab.models.family import FAMILIES as _RECORDS
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

#: Colours of the first and second checkpoint in comparison figures (Okabe-Ito, as on Compare): blue and
#: bluish green, both far from the cursor's orange (an orange side's spikes read as the cursor).
COLOURS = ("#0072B2", "#009E73")


#: Options of a multiple-choice question: at least two, at most six (design choice: readable on a phone).
CHOICES = (2, 6)


class QuestionError(ValueError):
    """A question that cannot be asked: no prompt, too few or repeated options, an answer that is not one."""


def _prompt(prompt: Any, explanation: Any) -> None:
    if not isinstance(prompt, str) or not prompt.strip():
        raise QuestionError("a question needs a prompt")
    if not isinstance(explanation, str):
        raise QuestionError(f"the explanation of {prompt[:40]!r} must be text")


@dataclass(frozen=True)
class Choice:
    """A multiple-choice question shown before a step's notice: ``prompt``, ``options`` (2-6 distinct
    markdown strings), ``answer`` (0-based index of the right option) and an optional ``explanation`` shown
    on reveal. Checked on construction (:class:`QuestionError`)."""

    prompt: str
    options: tuple[str, ...]
    answer: int
    explanation: str = ""
    kind = "choice"

    def __post_init__(self):
        _prompt(self.prompt, self.explanation)
        opts = self.options
        if not isinstance(opts, tuple) or not CHOICES[0] <= len(opts) <= CHOICES[1]:
            raise QuestionError(f"{self.prompt[:40]!r}: {CHOICES[0]}-{CHOICES[1]} options, as a tuple")
        if any(not isinstance(o, str) or not o.strip() for o in opts) or len(set(opts)) != len(opts):
            raise QuestionError(f"{self.prompt[:40]!r}: options must be distinct, non-empty text")
        if isinstance(self.answer, bool) or not isinstance(self.answer, int) or not 0 <= self.answer < len(opts):
            raise QuestionError(f"{self.prompt[:40]!r}: answer {self.answer!r} is not an option index "
                                f"0..{len(opts) - 1}")

    def is_correct(self, value: Any) -> bool:
        """Whether ``value`` (an option index) is the right option."""
        return not isinstance(value, bool) and value == self.answer


@dataclass(frozen=True)
class ClickPosition:
    """A "which position ...?" question shown before a step's notice (answered with the cursor in the app,
    in writing on a handout): ``prompt``, the right token ``positions`` (0-based, sorted, at least one; any
    of them is a right answer) and an optional ``explanation``. Checked on construction
    (:class:`QuestionError`); :func:`validate` checks the positions against the step's text."""

    prompt: str
    positions: tuple[int, ...]
    explanation: str = ""
    kind = "position"

    def __post_init__(self):
        _prompt(self.prompt, self.explanation)
        pos = self.positions
        if not isinstance(pos, tuple) or not pos or any(isinstance(p, bool) or not isinstance(p, int) or p < 0
                                                         for p in pos):
            raise QuestionError(f"{self.prompt[:40]!r}: positions must be a non-empty tuple of positions >= 0")
        if list(pos) != sorted(set(pos)):
            raise QuestionError(f"{self.prompt[:40]!r}: positions must be sorted and distinct")

    def is_correct(self, value: Any) -> bool:
        """Whether ``value`` (a clicked token position) is one of the right positions."""
        return not isinstance(value, bool) and value in self.positions

    def answer_text(self, labels: Sequence[str] | None = None) -> str:
        """The right positions in words: "position 4", "positions 4 or 6", "positions 4, 6 or 11" (any one
        is right); with ``labels`` (the text's token labels) each is followed by its token in brackets. Plain
        text: the caller escapes it for markdown or HTML."""
        words = [f"{p} ({labels[p]})" if labels is not None and p < len(labels) else str(p)
                 for p in self.positions]
        if len(words) == 1:
            return f"position {words[0]}"
        return f"positions {', '.join(words[:-1])} or {words[-1]}"


#: A step's question: multiple choice or a position to click.
Question = Choice | ClickPosition


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
        whatif: ``(intervention, size)`` of :data:`geomlab.whatif.catalog.INTERVENTIONS` applied at the cursor
            (the step then shows its before-and-after figures too); None: none.
        question: a :class:`Choice` or :class:`ClickPosition` asked before the notice is shown; None: none.
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
    whatif: tuple[str, float] | None = None
    question: Question | None = None

    def __post_init__(self):
        if self.question is not None and not isinstance(self.question, (Choice, ClickPosition)):
            raise QuestionError(f"step {self.title!r}: a question is a Choice or a ClickPosition")

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


# ---------------------------------------------------------------- validation
def _vocab_tokens(entry: Any, text: str) -> list[str]:
    from geomlab.data.vocab import Vocab, check_text
    from geomlab.trace import MAX_TEXT_CHARS

    return check_text(Vocab.from_json(entry.meta.get("vocab") or {}), text, MAX_TEXT_CHARS)


def _whatif_problems(step: Step, entry: Any, at: str) -> list[str]:
    """Problems of a step's ``whatif``: an intervention the catalog has, for the checkpoint's kind, its size in
    range."""
    if step.whatif is None:
        return []
    from geomlab.whatif.catalog import INTERVENTIONS

    name, size = step.whatif
    spec = INTERVENTIONS.get(name)
    if spec is None:
        return [f"{at}: unknown intervention {name!r} (one of {', '.join(INTERVENTIONS)})"]
    out = []
    if entry is not None and entry.kind not in spec.kinds:
        out.append(f"{at}: {name!r} does not apply to a {entry.kind} (it applies to {', '.join(spec.kinds)})")
    if not spec.lo <= float(size) <= spec.hi:
        out.append(f"{at}: {name!r} size {size} is outside {spec.lo}..{spec.hi}")
    return out


def validate(lesson_: Lesson, entries: Iterable[Any],
             trace_fn: Callable[[Any, str, dict], Any] | None = None) -> list[str]:
    """Problems of ``lesson_`` as sentences (empty when it is sound).

    ``entries``: catalog entries (:func:`geomlab.checkpoints.catalog.list_checkpoints`; ``ref``, ``kind``, ``meta``,
    ``model_config``, ``is_word_problem``). Checked without weights: 3-6 steps; every checkpoint ref is in
    ``entries`` and of a kind the step's view shows; the text is readable by the checkpoint's vocabulary
    and the cursor (and a :class:`ClickPosition` question's positions) inside its tokens, the cursor not on one
    of those positions (it would answer the question before it is asked); the figures are the
    view's or :data:`EXTRA_FIGURES` (the extras only where they make sense: ``surprisal`` needs a second
    checkpoint, ``accuracy_by_length`` word-problem cards); the controls are ones the view has; T is only set on a view with the ``steps`` control and in
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
    by_ref = {e.ref: e for e in entries}
    for i, step in enumerate(lesson_.steps, 1):
        problems += _whatif_problems(step, by_ref.get(step.checkpoint), f"{where} step {i}")
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
            if isinstance(step.question, ClickPosition) and step.question.positions[-1] >= len(tokens):
                problems.append(f"{at}: question position {step.question.positions[-1]} outside the text's "
                                f"{len(tokens)} tokens ({ref})")
            if isinstance(step.question, ClickPosition) and step.cursor in step.question.positions:
                problems.append(f"{at}: the cursor opens on {step.cursor}, an answer to the step's question")
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
