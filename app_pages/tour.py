"""Tour: guided lessons a teacher steps through (Back / Next) and shares as a link, on the bundled zoo.

The lessons are data in :mod:`geomlab.teach.lessons` (their types: :mod:`geomlab.teach.tours`). Entering a step
writes its checkpoint, text, cursor, layer, controls and CEM steps T into the shared state (so every other page, and
"Open this in the full view", shows the same thing) and draws the step's figures through the app's figure cache. The
page's own URL keys are ``lesson=SLUG&step=N`` (N from 1): a link with them opens that step; a bad lesson or step
falls back to the first lesson / step 1 with a notice.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import streamlit as st

from app_pages import _room as room
from app_pages import _tour_extras as extras
from app_pages import _ui as ui
from app_pages import _views
from app_pages._data import cached, figure_for, trace_key
from app_pages._messages import md_escape
from app_pages._state import K_CKPT_EXPLICIT, K_QP_WRITTEN, K_WI, K_WI_SIZE
from app_pages._warm import rendering
from geomlab.teach import lessons, tours
from geomlab.teach import views

K_LESSON, K_STEP = "gl_tour_lesson", "gl_tour_step"  # the lesson's slug, the 0-based step index
K_APPLIED = "_gl_tour_applied"  # (slug, index) last written into the shared state
K_COMPARE_VIEW = "gl_compare_view"  # Compare's chosen view (app_pages/compare.py)
#: control name -> session key of the views' per-view controls (``_widgets.CONTROL_WIDGETS``)
CONTROL_KEYS = {"head": ui.K_HEAD, "slot": ui.K_SLOT, "block": ui.K_BLOCK, "substep": ui.K_SUBSTEP}


def current() -> tuple[tours.Lesson, int]:
    """The lesson and step index of this session (first lesson, step 0 when unset or stale)."""
    ss = st.session_state
    lesson = lessons.LESSONS.get(ss.get(K_LESSON)) or next(iter(lessons.LESSONS.values()))
    index = ss.get(K_STEP)
    index = index if isinstance(index, int) and 0 <= index < len(lesson.steps) else 0
    ss[K_LESSON], ss[K_STEP] = lesson.slug, index
    return lesson, index


def adopt_link() -> bool:
    """Adopt ``?lesson=...&step=...`` when the URL did not come from this app (a link, the browser's back
    button) and the session follows no room's teacher; a bad value leaves a notice and falls back
    (:func:`geomlab.teach.lessons.resolve_link`). Returns whether a link was adopted."""
    ss = st.session_state
    qp = st.query_params.to_dict()
    if not ("lesson" in qp or "step" in qp) or qp == ss.get(K_QP_WRITTEN) or room.following():
        return False  # (a following student shows the room's step, whatever its link says)
    lesson, index, note = lessons.resolve_link(qp.get("lesson"), qp.get("step"))
    ss[K_LESSON], ss[K_STEP] = lesson.slug, index
    ss.pop(K_APPLIED, None)  # a link always (re)applies its step
    if note:
        ss[ui.K_NOTICE] = " ".join(n for n in (ss.get(ui.K_NOTICE), note) if n)
    return True


def apply_step(lesson: tours.Lesson, index: int, keep_pos: int | None = None) -> None:
    """Write step ``index`` of ``lesson`` into the shared state: checkpoint (and Compare's B and view for a
    comparison step), text, cursor (``keep_pos`` instead when given), layer, the view's controls and T."""
    ss = st.session_state
    step = lesson.steps[index]
    ss[ui.K_CKPT], ss[K_CKPT_EXPLICIT] = step.checkpoint, True
    ss[ui.K_TEXT] = step.text
    ss[ui.K_POS] = step.cursor if keep_pos is None else keep_pos
    ss[ui.K_LAYER] = step.controls.get("layer")
    for name, key in CONTROL_KEYS.items():
        if name in step.controls:
            value = step.controls[name]
            ss[key] = -1 if (name == "head" and value is None) else value  # the widgets store None as -1
        else:
            ss.pop(key, None)
    ss[ui.K_STEPS] = step.steps
    ss[K_WI], ss[K_WI_SIZE] = step.whatif if step.whatif else (None, None)
    if step.compare:
        ss[ui.K_CKPT_B], ss[K_COMPARE_VIEW] = step.compare, step.view
    ss[K_APPLIED] = (lesson.slug, index)


def go(delta: int) -> None:
    """Back / Next callback: move ``delta`` steps within the lesson."""
    lesson, index = current()
    st.session_state[K_STEP] = max(0, min(index + delta, len(lesson.steps) - 1))


def choose_lesson() -> None:
    """Lesson select callback: start the chosen lesson at step 1."""
    st.session_state[K_LESSON] = st.session_state["w_tour_lesson"]
    st.session_state[K_STEP] = 0


def step_link(lesson: tours.Lesson, index: int) -> str:
    """Absolute URL of this step (``/tour?lesson=SLUG&step=N``): what a teacher sends."""
    base = ui.share_link("tour").split("?", 1)[0]
    return f"{base}?{urlencode({'lesson': lesson.slug, 'step': index + 1})}"


# ---------------------------------------------------------------- figures
def extra_item(name: str, sides: list[tuple[Any, Any, str, dict]], pos: int, text: str
               ) -> tuple[str, Any, str, bool]:
    """A tour-only figure (:data:`geomlab.teach.tours.EXTRA_FIGURES`) as a ``_views.draw_figures`` item,
    through the app's figure cache (a class following one step asks for it a hundred times). ``sides``:
    ``[(entry, trace, colour, trace options)]``; ``text``: the step's text (the traces' key)."""
    traces = tuple((trace_key(str(e.path), e.mtime, text, opts), c) for e, _, c, opts in sides)
    key = ("tourfig", name, traces, None if name == "accuracy_by_length" else pos)
    try:  # full width: the surprisal legend sits under its axis title
        return name, *cached(key, lambda: _extra_chart(name, sides, pos)), True
    except ValueError as exc:
        return name, None, str(exc), True


def _extra_chart(name: str, sides: list[tuple[Any, Any, str, dict]], pos: int) -> Any:
    """:func:`extra_item`'s figure and caption, built (a :class:`geomlab.figures.Chart`; ValueError when it
    does not apply)."""
    if name == "accuracy_by_length":
        first = sides[0][0]
        n = first.n_outputs
        return tours.accuracy_by_length_figure(
            [(e.name, e.accuracy_by_length, c) for e, _, c, _ in sides], chance=1 / n if n else None,
            train_length=(first.task or {}).get("length"))
    from geomlab.figures.surprisal import SurprisalSide, surprisal_figure

    chart = surprisal_figure([SurprisalSide(tr, e.name, c, e.task, e.n_outputs) for e, tr, c, _ in sides], pos)
    # the legend moved below the x axis title
    chart.figure.update_layout(legend={"y": -0.38}, height=360, margin={"b": 40})
    return chart


def view_item(step: tours.Step, entry, tr, trace_opts: dict, name: str, pos: int) -> tuple[str, Any, str, bool]:
    """View figure ``name`` of the step for one checkpoint, through the app's figure cache."""
    spec = views.figure_spec(name)
    if not views.applies(tr, name):
        return name, None, f"does not apply to {entry.name}", spec.wide
    try:
        fig, cap = figure_for(entry, step.text, trace_opts, tr, name, tours.step_controls(step, tr),
                              min(pos, tr.n_positions - 1))
    except ValueError as exc:
        return name, None, str(exc), spec.wide
    return name, fig, cap, spec.wide


# Height budget of a step's first chart in px: a view page's, less the line that Back, Next and the progress
# take under the lesson select on a narrow window (1000 px), so the chart stays whole in a 1000x800 window.
FIRST_PX = _views.FIRST_CHART_PX - 40


def draw_step(lesson: tours.Lesson, index: int) -> None:
    """Trace the step's checkpoint(s) and draw its figures. In a comparison step, half-width figures of the
    view sit side by side (first checkpoint left); full-width ones (e.g. the distance profile, whose
    token ticks pile up at half width) and figures with panels side by side go full width, one above the
    other."""
    step = lesson.steps[index]
    entries = [ui.entry_for(ref) for ref in step.checkpoints]
    missing = [ref for ref, e in zip(step.checkpoints, entries) if e is None]
    if missing:
        st.info(f"This step needs the bundled checkpoint {', '.join(f'`{m}`' for m in missing)}, which is not "
                "here. Rebuild the zoo with `python -m geomlab zoo --rebuild` (docs/zoo.md).",
                icon=":material/info:")
        return
    sides = []
    for e, colour in zip(entries, tours.COLOURS):
        opts = step.trace_options(e.model_config)
        ui.check_text(e, step.text)
        sides.append((e, ui.trace_for(e, step.text, **opts), colour, opts))
    labels = list(sides[0][1].labels)
    pos = ui.cursor_control(labels)
    captions = not extras.open_question(lesson, index)  # (the question's box says why they wait)
    prefix, stem = f"tour-{lesson.slug}-{index}", f"{entries[0].name}-{step.view}"
    names = step.figure_names(sides[0][1])
    added = [extra_item(n, sides, pos, step.text) for n in names if n in tours.EXTRA_FIGURES]
    if added:
        _views.draw_figures(_views.fit_first(added, FIRST_PX), key_prefix=prefix, stem=stem, captions=captions)
    shown = [n for n in names if n not in tours.EXTRA_FIGURES]
    if {f.name for f in views.more_figures(step.view, sides[0][1])} & set(shown):
        st.session_state[_views.K_MORE] = True  # "Open this in the full view" then shows the step's figures too
    if len(sides) == 1:
        e, tr, _, opts = sides[0]
        _views.draw_figures(_views.fit_first([view_item(step, e, tr, opts, n, pos) for n in shown], FIRST_PX),
                            key_prefix=prefix, stem=stem, captions=captions)
        if step.whatif:
            draw_whatif(step, e, tr, pos, prefix, stem)
        return
    for i, name in enumerate(shown):
        row = [(e, view_item(step, e, tr, opts, name, pos)) for e, tr, _, opts in sides]
        if i == 0 and not added:  # the page's first charts: at most FIRST_PX high, whole in the window
            row = [(e, _views.fit_first([it], FIRST_PX)[0]) for e, it in row]
        wide = views.figure_spec(name).wide and not any(_views.square_single_panel(it[1]) for _, it in row)
        if wide or any(it[1] is not None and _views.panels_side_by_side(it[1]) for _, it in row):
            for side, (e, it) in zip("AB", row):
                st.markdown(f"**{e.name}** · {e.group or e.kind}")
                _views.draw_figures([(it[0], it[1], it[2], True)], key_prefix=f"{prefix}-{side}", stem=e.name,
                                    captions=captions)
            continue
        cols = st.columns(2, gap="large")
        for col, side, (e, it) in zip(cols, "AB", row):
            with col:
                st.markdown(f"**{e.name}** · {e.group or e.kind}")
                _views.draw_figures([it], key_prefix=f"{prefix}-{side}", stem=e.name, force_narrow=True,
                                    captions=captions)


def draw_whatif(step: tours.Step, entry, tr, pos: int, prefix: str, stem: str) -> None:
    """The step's intervention at the cursor: the next-token guesses before and after, and its effect."""
    from app_pages._whatif import _outcome_charts

    name, size = step.whatif
    controls = {k: step.controls.get(k) or 0 for k in ("layer", "head", "slot")}
    guesses, effect, ghost, line = _outcome_charts(entry, step.text, {}, name, float(size), pos, controls,
                                                   list(tr.labels))
    st.caption(line)
    items = [("whatif_guesses", guesses.figure, guesses.caption, False)]
    if ghost is not None:
        items.append(("whatif_geometry", ghost.figure, ghost.caption, False))
    items.append(("whatif_effect", effect.figure, effect.caption, True))
    _views.draw_figures(items, key_prefix=prefix, stem=stem, tr=tr)


# ---------------------------------------------------------------- page
def main() -> None:
    ui.wait_warm()
    from_link = adopt_link()
    ui.show_notice()
    lesson, index = current()
    step = lesson.steps[index]
    ss = st.session_state
    if ss.get(K_APPLIED) != (lesson.slug, index) or ss.get(ui.K_CKPT) != step.checkpoint \
            or ss.get(ui.K_TEXT) != step.text:
        qp = st.query_params.to_dict()
        keep = None  # a copied address bar may carry the teacher's own cursor for this very step
        if from_link and qp.get("ckpt") == step.checkpoint and qp.get("text") in (None, step.text):
            try:
                keep = int(qp["pos"]) if "pos" in qp and int(qp["pos"]) >= 0 else None
            except ValueError:
                keep = None
        apply_step(lesson, index, keep)
    ss[ui.K_PAGE_QP] = {"lesson": lesson.slug, "step": str(index + 1)}
    extras.remember_step(lesson, index)
    if extras.presenting():
        extras.present(lesson, index, draw_step, go)
        return

    st.title("Tour")
    slugs = list(lessons.LESSONS)
    ss["w_tour_lesson"] = lesson.slug
    n = len(lesson.steps)
    # the lesson select in what the row leaves beside Back, Next and the progress (its whole name on a wide
    # window; cut on a narrow one, where one row keeps the first chart in view)
    row = st.container(horizontal=True, vertical_alignment="bottom", gap="small")
    row.selectbox("Lesson", slugs, key="w_tour_lesson", on_change=choose_lesson, width="stretch",
                     format_func=lambda s: f"{lessons.LESSONS[s].title} · {lessons.LESSONS[s].family}",
                     help="Short guided lessons on the bundled checkpoints, one per model family, 4-5 steps "
                          "each. Each step loads a checkpoint, a text and a view, and says what to look at; "
                          "step through with Back and Next, or send a step as a link.")
    # Back, Next and the progress in one line: the buttons as wide as their labels, the bar in what is left
    nav = row.container(horizontal=True, gap="small", vertical_alignment="center", width=360)
    led = room.following()  # the teacher steps for the class
    nav.button("Back", key="tour_back", icon=":material/arrow_back:", on_click=go, args=(-1,),
               disabled=index == 0 or led, width="content")
    nav.button("Next", key="tour_next", icon=":material/arrow_forward:", on_click=go, args=(1,),
               disabled=index == n - 1 or led, type="primary", width="content")
    nav.progress((index + 1) / n, text=f"Step {index + 1} of {n}")
    # the step's title over both columns, so a narrow window, which puts the text under the figures, still
    # names the step above them, and says where its text went
    step = lesson.steps[index]
    below = "its text and question" if step.question else "its text"
    with st.container(key="tour-head"):
        st.markdown(f"### {index + 1}. {step.title} <span class='gl-tour-note'>↓ {below} under the "
                    "figures</span>", unsafe_allow_html=True)
    # chart first: the step's figures on the left, its text beside them (under them on a narrow window)
    left, right = st.columns([3, 2], gap="medium")
    with left, ui.guard("This step"), rendering():
        if ui.entries():
            draw_step(lesson, index)
        else:
            ui.no_checkpoint_message()
    with right.container(key="tour-side"):
        step_text(lesson, index)  # after the step: its links carry the step's cursor


def step_text(lesson: lessons.Lesson, index: int) -> None:
    """The step's words beside its figures: body, what to notice, what it shows, and its links."""
    step = lesson.steps[index]
    if step.body:
        st.markdown(step.body)
    if extras.question(lesson, index):  # a question first; the notice once answered or revealed
        st.info(f"**What to notice.** {step.notice}", icon=":material/visibility:")
    refs = " vs ".join(f"`{r}`" for r in step.checkpoints)
    t_note = f" · T = {step.steps}" if step.steps else ""
    st.caption(f"{refs} · {views.VIEWS[step.view].title}{t_note} · text: {md_escape(step.text)}")
    st.caption(lesson.summary)
    view = views.VIEWS[step.view]
    query = ui.state_query()
    st.page_link(ui.page_path(step.view), label="Open this in the full view", icon=view.icon, query_params=query,
                 help=f"{view.title} with the same checkpoint, text, cursor and layer, and every figure "
                      "and control of the view.")
    if step.compare:
        st.page_link(ui.page_path("compare"), label="Open both in Compare", icon=":material/compare:",
                     query_params=query)
    with st.expander("Link to this step", icon=":material/link:"):
        st.caption("Anyone who opens this link lands on this lesson at this step (offline, on the bundled "
                   "checkpoints).")
        st.code(step_link(lesson, index), language=None, wrap_lines=True)
        st.page_link(ui.page_path("tour"), label="Presenter view", icon=":material/slideshow:",
                     query_params={"lesson": lesson.slug, "step": str(index + 1), "present": "1"},
                     help="Large type, no sidebar, the chart and the notice only; arrow keys for Back and Next.")
    extras.handout_button(lesson)


with ui.guard("The Tour page"):
    main()
