"""The renderer shared by the five view pages and Compare: pick checkpoint and text, trace (cached), choose
the token cursor and the view's controls, then draw the view's figures with their captions.

What a view shows (figures in order, full or half width, the controls it needs, which figures apply to a
trace, the arguments each figure takes) comes from the view pages, :mod:`geomlab.teach.views`; this module only
lays the figures out.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import numpy as np
import streamlit as st

from app_pages import _explain, _tokens
from app_pages import _room as room
from app_pages import _state as state
from app_pages import _ui as ui
from app_pages._data import figure_for
from app_pages._links import follow_click
from app_pages._messages import md_escape
from app_pages._relayout import square_width
from app_pages._warm import rendering
from geomlab.figures.catalog import FIGURES
from geomlab.teach import views


def panels_side_by_side(fig: Any) -> bool:
    """Whether a Plotly figure has two or more panels next to each other (x axes or 3-D scenes with
    different horizontal domains), i.e. needs the full width to stay legible."""
    lay = fig.layout.to_plotly_json() if hasattr(fig, "layout") else dict(fig.get("layout", {}))
    domains = set()
    for key, axis in lay.items():
        if key.startswith(("xaxis", "scene", "polar")) and isinstance(axis, dict):
            if axis.get("overlaying"):
                continue  # a second axis on the same panel
            dom = axis.get("domain") if key.startswith("xaxis") else (axis.get("domain") or {}).get("x")
            domains.add(tuple(round(float(v), 3) for v in (dom or (0.0, 1.0))))
    return len(domains) > 1


def square_single_panel(fig: Any) -> bool:
    """Whether a Plotly figure is one panel with equal axis scales (``yaxis.scaleanchor``, e.g. a single
    attention map): at full width it would sit in a narrow square with its colour bar far away at the right
    edge, so the pages draw it in a half-width column instead (design choice)."""
    if fig is None or panels_side_by_side(fig):
        return False
    lay = fig.layout.to_plotly_json() if hasattr(fig, "layout") else dict(fig.get("layout", {}))
    return bool((lay.get("yaxis") or {}).get("scaleanchor")) and not any(k.startswith("scene") for k in lay)


def figure_list(slug: str, entry, text: str, trace_opts: dict, tr: Any, pos: int,
                controls: dict, part: str = "default") -> list[tuple[str, Any, str, bool]]:
    """``[(name, figure, caption, wide)]`` of view ``slug`` for this trace, in the view's order (figures
    that fail are shown as one-line messages by the caller: the tuple then holds the error text instead of
    a figure). ``part``: ``"default"`` (the set a view opens on, :func:`geomlab.teach.views.default_figures`),
    ``"more"`` (the rest, :func:`geomlab.teach.views.more_figures`) or ``"all"``; only those are built."""
    specs = {"default": views.default_figures, "more": views.more_figures,
             "all": views.view_figures}[part](slug, tr)
    out = []
    for spec in specs:
        try:
            fig, caption = figure_for(entry, text, trace_opts, tr, spec.name, controls, pos)
        except ValueError as exc:
            out.append((spec.name, None, str(exc), spec.wide))
            continue
        out.append((spec.name, fig, caption, spec.wide))
    return out


def trace_options(slug: str, entry, where: Any, notes: Any = None) -> dict:
    """Options that change the trace itself (the view's ``steps`` control: CEM inference steps T; a notice
    about a link's T goes in ``notes``)."""
    if "steps" not in views.VIEWS[slug].controls:
        return {}
    return ui.steps_control(entry, ui.K_STEPS, where, notes=notes)


def draw_figures(items: list[tuple[str, Any, str, bool]], key_prefix: str, stem: str,
                 force_narrow: bool = False, tr: Any = None, captions: bool = True) -> int:
    """Draw ``figure_list`` output: wide figures full width, narrow ones two per row; captions below (none
    with ``captions=False``: a Tour step's open question). Returns the number of charts drawn."""
    drawn = 0
    pending: list = []

    def flush() -> None:
        nonlocal pending, drawn
        if not pending:
            return
        # a narrow figure without a partner gets two thirds of the row (half left the other half empty and
        # shrank a square map to unreadable at a 1,000 px window; full width put its colour bar far away)
        cols = st.columns(2 if len(pending) == 2 else [2, 1], gap="medium")
        for col, (name, fig, cap, _) in zip(cols, pending):
            with col:
                drawn += _one(name, fig, cap, key_prefix, stem, narrow=True, tr=tr, captions=captions)
        pending = []

    for item in items:
        if (item[3] and not square_single_panel(item[1])) or force_narrow:
            flush()
            drawn += _one(item[0], item[1], item[2], key_prefix, stem, narrow=force_narrow, tr=tr,
                          captions=captions)
        else:
            pending.append(item)
            if len(pending) == 2:
                flush()
    flush()
    return drawn


K_MORE = state.K_MORE
"""Session key of the "More figures" switch (one for every view page: opened once, it stays open; its
widget ``w_more_figures`` is seeded from it, the ``_state`` pattern, so it survives page switches; in the
URL as ``more=1``)."""


def more_figures(slug: str, entry, text: str, trace_opts: dict, tr: Any, pos: int, controls: dict,
                 key_prefix: str, stem: str) -> int:
    """The "More figures" switch under a view's default set and, only while it is on, the view's other
    figures (built then, not before: an expander's body would run, and cost, on every rerun). Returns the
    number of charts drawn."""
    rest = views.more_figures(slug, tr)
    if not rest:
        return 0
    names = ", ".join(f.label for f in rest)
    st.session_state[K_MORE] = bool(st.session_state.get(K_MORE))  # None until set (init_state)
    state.seed("w_more_figures", K_MORE)
    if not st.toggle(f"More figures ({len(rest)})", key="w_more_figures", on_change=state.copy,
                     args=("w_more_figures", K_MORE),
                     help=f"Also show: {names}. Each figure makes a cursor move a little slower."):
        st.caption(f"More figures: {names}.")
        return 0
    items = figure_list(slug, entry, text, trace_opts, tr, pos, controls, part="more")
    return draw_figures(items, key_prefix=key_prefix, stem=stem, tr=tr)


def click_handler(name: str, key: str, tr: Any = None) -> Any:
    """The ``on_click`` of chart ``key`` drawing figure ``name``: its declared click rule
    (:attr:`geomlab.figures.catalog.FigureSpec.click`) applied to the page's cursor, layer and head
    (:func:`app_pages._links.follow_click`; ``tr`` bounds the position); None for a figure without one."""
    rule = views.figure_spec(name).click if name in FIGURES else OUTCOME_CLICKS.get(name)
    return partial(follow_click, key, rule, tr) if rule else None


OUTCOME_CLICKS = {"whatif_effect": "position"}
"""Click rules of the figures of an intervention drawn through :func:`draw_figures` (the Tour's What-if step):
they take an outcome, not a trace, so they are not in the catalogue that declares the others'."""


def _one(name: str, fig, caption: str, key_prefix: str, stem: str, narrow: bool = False,
         tr: Any = None, captions: bool = True) -> int:
    if fig is None:
        st.info(f"{name.replace('_', ' ')}: {md_escape(caption)}", icon=":material/info:")
        return 0
    key = f"{key_prefix}-{name}"
    # a square map is at most as wide as its height makes it: where its column is wider (a view's first chart
    # or a Compare column, wrapped under its neighbour on a narrow window) its colour bar stays beside it
    width = square_width(fig) if square_single_panel(fig) else None
    ui.chart(fig, key=key, filename=f"{stem}-{name}", narrow=narrow, width=width,
             on_click=click_handler(name, key, tr))
    if captions:
        note = _explain.figure_note(name, tr)
        st.caption(f"{caption}\n\n{note}" if note else caption)  # one element: each is re-rendered on a move
    return 1


def _choose_fitting(view: views.ViewSpec) -> bool:
    """Make the checkpoint on screen one ``view`` shows, never silently: keep the chosen one when the view
    shows its kind; else show the most related checkpoint it can show (same kind, same family, same way
    of mixing positions: :func:`app_pages._data.related_entries`; the view's default when none is
    related) with a message saying why, what it shows, and the other checkpoints it could show (related
    first). The message stays while that stand-in is on screen and the user only looks; another page gives
    the chosen checkpoint back (:func:`app_pages._state.restore_choice`) unless the user worked with the
    stand-in (:func:`app_pages._state.standin_acted`). False (with a message) when no checkpoint fits."""
    from app_pages import _data, _messages, _state

    ss = st.session_state
    _state.restore_choice(view.slug)
    fitting = [e for e in ui.entries() if e.kind in view.kinds]
    current = ui.entry_for(ss.get(ui.K_CKPT))
    if not fitting:
        if current is not None:
            ui.wrong_kind_message(view, current)
        return False
    if current is None:
        ss[ui.K_CKPT] = ui.default_ref(view.kinds) or fitting[0].ref
        return True
    if current.kind not in view.kinds:
        # a default nobody chose gives way to the view's own default (the one Home links to and the warm-up
        # builds: a first visit's view comes from the cache); a chosen checkpoint to its closest relative
        ranked = _data.related_entries(current, fitting) if ss.get(ui.K_CKPT_EXPLICIT) else []
        if ranked:
            target, how = ranked[0]
        else:
            target, how = ui.entry_for(ui.default_ref(view.kinds)) or fitting[0], ""
        _state.standin(view.slug, current.ref, target.ref, how)
    rec = _state.current_standin(view.slug)
    chosen = ui.entry_for(rec["chosen"]) if rec else None
    shown = ui.entry_for(ss.get(ui.K_CKPT))
    if rec and chosen is not None and shown is not None:
        ranked = _data.related_entries(chosen, fitting)
        listed = {e.ref for e, _ in ranked}
        others = [(e, how) for e, how in ranked if e.ref != shown.ref] + [
            (e, "") for e in fitting if e.ref not in listed and e.ref != shown.ref]
        _messages.standin_message(view, chosen, shown, rec["how"], others, explicit=rec.get("explicit", True))
    return True


FIRST_CHART_PX = 460
"""Height budget of a view's first chart in px (design choice: under the page's title and controls row it
stays whole in a 1000x800 window; a taller figure is drawn shorter, its panels giving up the height)."""


def fit_first(items: list[tuple[str, Any, str, bool]], px: int | None = None) -> list[tuple[str, Any, str, bool]]:
    """``items`` with the first figure's height at most ``px`` (default :data:`FIRST_CHART_PX`): a copy
    drawn shorter, the gaps between its panels kept (:func:`app_pages._relayout.shorter`); the other items
    as they are."""
    px = px or FIRST_CHART_PX
    out = list(items)
    for i, (name, fig, caption, wide) in enumerate(out):
        if fig is None:
            continue
        if (fig.layout.height or 450) > px:
            from app_pages import _relayout
            out[i] = (name, _relayout.shorter(fig, px), caption, wide)
        break
    return out


def first_row(items: list[tuple[str, Any, str, bool]], key_prefix: str, stem: str, tr: Any,
              side: Any = None) -> tuple[Any, list[tuple[str, Any, str, bool]]]:
    """Draw the page's top row: the first figure of ``items`` (at most :data:`FIRST_CHART_PX` high) in a wide
    column and, beside it, the returned side column (keyed ``view-side``; ``side(column)`` fills it when
    given). Returns ``(side column, the items still to draw)``. On a narrow window the side column wraps
    under the chart (the CSS in ``app.py``)."""
    at = next((i for i, it in enumerate(items) if it[1] is not None), None)
    square = at is not None and square_single_panel(items[at][1])
    main, aside = st.columns([3, 2] if square else [5, 2], gap="medium")
    with aside:
        box = st.container(key="view-side")
        if side is not None:
            side(box)
    if at is None:
        return box, items
    name, fig, caption, _ = fit_first([items[at]])[0]
    with main:
        _one(name, fig, caption, key_prefix, stem, narrow=False, tr=tr)
    return box, items[:at] + items[at + 1:]


def overview(tr: Any, pos: int, key_prefix: str, stem: str, where: Any) -> None:
    """The whole text as a strip (:func:`geomlab.figures.text_overview`) with the window of positions the
    figures draw shaded on it, when the text is longer than that window; a click on it moves the cursor there
    (and the window with it)."""
    from geomlab.figures import needs_overview, text_overview

    if not needs_overview(tr):
        return
    fig, caption = text_overview(tr, pos)
    key = f"{key_prefix}-overview"
    with where:
        ui.chart(fig, key=key, filename=f"{stem}-overview", narrow=True,
                 on_click=partial(follow_click, key, "position", tr))
        st.caption(caption)


def length_note(entry: Any, tr: Any, where: Any = None) -> None:
    """A warning (in ``where``, the side column beside the first chart) when the text is longer than the sequences the checkpoint was trained on (its card's
    ``seq_len``) and its predictions past that length are clearly worse (:func:`geomlab.trace.past_training_length`:
    over 1 bit per token and 1.5 times more than before it): its views past there show a model that no
    longer reads the text. Nothing for a model that extrapolates. Design choice."""
    from geomlab.trace import past_training_length

    card = entry.meta.get("card") or {}
    seq_len = card.get("seq_len") or (entry.meta.get("train_config") or {}).get("seq_len")
    if not isinstance(seq_len, int) or getattr(entry, "is_word_problem", False):
        return
    try:
        scores = past_training_length(tr, seq_len, card.get("task"))
    except ValueError:
        return
    if scores is None or getattr(tr, "logits", None) is None:
        return
    inside, past = scores
    if past > inside + 1.0 and past > 1.5 * inside:
        chance = float(np.log2(tr.logits.shape[-1]))
        (where or st).warning(f"{md_escape(entry.name)} was trained on {seq_len}-token sequences; this text has "
                              f"{tr.n_positions:,}. Its guesses cost {inside:.2f} bits per token up to position "
                              f"{seq_len - 1}, {past:.2f} after (chance {chance:.2f}): past its training length "
                              "it no longer reads the text.", icon=":material/straighten:")


def controls_row(n: int) -> list:
    """The compact row of a view's controls: the token cursor (twice as wide) and ``n`` more slots."""
    cols = st.columns([3] + [1.3] * max(n, 1), gap="small", vertical_alignment="bottom")
    return cols


def render_view(slug: str) -> None:
    """The whole body of a view page, chart first: title and context line, one row of controls (cursor,
    layer, head...), then the first chart with the text, the next-token guesses and "How to read this" beside
    it, then the view's other figures."""
    view = views.VIEWS[slug]
    ui.wait_warm()
    ui.show_notice()
    st.title(view.title)
    st.caption(view.blurb)
    if not ui.entries():
        ui.no_checkpoint_message()
        return
    if not _choose_fitting(view):
        return
    st.session_state[state.K_FROM_VIEW] = slug  # Compare opens on this view when it shows both sides
    rec = state.current_standin(slug)
    chosen = ui.entry_for(rec["chosen"]) if rec else None
    with st.sidebar:  # a stand-in is named in the box's label (in view on any window) and explained under it
        entry = ui.checkpoint_picker(kinds=view.kinds, only=True,
                                     label="Checkpoint · stand-in" if chosen is not None else "Checkpoint")
        if chosen is not None:
            st.caption(f"**Stand-in**: shown in place of {md_escape(chosen.name)}, which this view can't draw; "
                       "any change here makes it your choice.")
    text = ui.text_box(entry)
    view_body(slug, entry, text)


@st.fragment
def view_body(slug: str, entry: Any, text: str) -> None:
    """Everything of a view page under its title and sidebar: the controls row, the charts, the side column,
    what-if, the link and downloads. A Streamlit fragment: a click on a chart or a token, the cursor, the
    layer and every control here rerun this part only (the sidebar, the text box and the page frame stay as
    they are), then write the new state to the URL. Another checkpoint or text reruns the page, which calls
    it with them. Design choice (a cursor move costs the charts, not the page)."""
    view = views.VIEWS[slug]
    if state.in_fragment_rerun() and state.standin_acted():
        st.rerun(scope="app")  # the stand-in is the choice now: its message and sidebar note go
    t0 = time.perf_counter()
    if ui.too_long(text):
        return
    with ui.guard("Tracing the text"), rendering():
        tokens = ui.check_text(entry, text, hint=ui.TEXT_HINT)
        unknown = ui.unknown_tokens(entry, text)
        if unknown:
            from geomlab.data.vocab import unknown_note

            st.warning(md_escape(unknown_note(unknown, ui.vocab_of(entry).unk or "�")) + ".", icon=":material/help:")
        bar = controls_row(len(view.controls))
        notes = st.container()  # what a link's out-of-range value became: under the row, at full width
        trace_opts = trace_options(slug, entry, bar[-1], notes)
        tr = ui.trace_for(entry, text, **trace_opts)
        pos = ui.cursor_control(list(tr.labels), where=bar[0], trace=tr, notes=notes)
        shown = views.default_figures(slug, tr)
        if st.session_state.get(K_MORE):
            shown += views.more_figures(slug, tr)
        controls = ui.view_controls(slug, tr, bar[1:-1] if "steps" in view.controls else bar[1:],
                                    used={a for f in shown for a in f.controls}, notes=notes)
        items = figure_list(slug, entry, text, trace_opts, tr, pos, controls)
        if not any(fig is not None for _, fig, _, _ in items):
            st.info("No figure of this view applies to this checkpoint.", icon=":material/info:")

        def side(box: Any) -> None:
            length_note(entry, tr, where=box)
            overview(tr, pos, key_prefix=slug, stem=f"{entry.name}-{slug}", where=box)
            _explain.view_intro(view, entry, tr, where=box)
            _tokens.token_panel(entry, tr, pos, where=box)

        box, rest = first_row(items, key_prefix=slug, stem=f"{entry.name}-{slug}", tr=tr, side=side)
        if trace_opts:  # a CEM trace at other inference steps is itself a what-if
            st.caption(f"What if and Patching work on the model as trained (Steps T = {trace_opts.get('steps', '')} "
                       "here is itself an intervention on every layer): set T back to the model's own to use them. "
                       "What if's energy-steps knob changes one layer's T.")
        else:
            from app_pages._whatif import patching_section, whatif_panel

            with ui.guard("What if"):
                whatif_panel(entry, text, trace_opts, tr, pos, controls, key_prefix=slug, stem=f"{entry.name}-{slug}")
            with ui.guard("Patching"):
                patching_section(entry, text, tr, pos, key_prefix=slug, stem=f"{entry.name}-{slug}")
        draw_figures(rest, key_prefix=slug, stem=f"{entry.name}-{slug}", tr=tr)
        more_figures(slug, entry, text, trace_opts, tr, pos, controls, key_prefix=slug, stem=f"{entry.name}-{slug}")
        box.caption(f"`{entry.ref}` · {len(tokens)} token{'' if len(tokens) == 1 else 's'} · cursor at {pos} "
                    f"(“{tr.labels[pos]}”) · {1000 * (time.perf_counter() - t0):.0f} ms")
        ui.cache_caption()
        with st.expander("Link to this view · download its trace", icon=":material/link:"):
            st.caption("Anyone who opens this link sees this view as it is now: checkpoint, text, cursor and every "
                       "choice above (the address bar holds the same link). Every figure downloads as PNG from the "
                       "camera icon in its toolbar. The .npz trace holds every array behind these figures "
                       "(geomlab.trace.load_trace reads it back); the JSON holds the 256 positions around the "
                       "cursor, for tools that do not read .npz.")
            st.text_input("Link", ui.share_link(slug), label_visibility="collapsed")  # not st.code: its highlighter bundle
            ui.trace_downloads(tr, stem=f"{entry.name}-{slug}", cursor=pos)
    state.note_standin_state(slug)  # what this run left: a change of it by the next is the user's
    if state.in_fragment_rerun():  # (a whole run does both in app.py, after the page)
        room.publish(slug)
        room.sync_url(slug)
