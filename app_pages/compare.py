"""Compare: two checkpoints on the same text, side by side (e.g. O(d) vs torus vs U(d), or T=1 vs T=2)."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import streamlit as st

from app_pages import _data, _state
from app_pages import _ui as ui
from app_pages import _views
from app_pages._links import follow_click
from app_pages._relayout import narrow_copy, relaid, same_row, square_width
from app_pages._messages import NAME_WIDTH, STEPS_HELP, checkpoint_choices, md_escape
from app_pages._warm import rendering
from geomlab.checkpoints import catalog
from geomlab.teach import tours, views

K_VIEW = _state.K_VIEW  # "gl_compare_view", in the URL as view=
COLOURS = tours.COLOURS  # blue and bluish green: neither reads as the cursor's orange line
K_LAYOUT = _state.K_LAYOUT  # "stacked" (A above B) or "side" (A | B); in the URL as layout=side


def _code(text: str) -> str:
    """``text`` as a markdown code span, shown literally (a code span takes no escapes: backticks dropped)."""
    return f"`{str(text).replace('`', '')}`"


def shared_views(a_kind: str, b_kind: str) -> list[views.ViewSpec]:
    """The views that show both kinds, most specific (fewest kinds) first, page order on a tie."""
    both = [v for v in views.VIEWS.values() if a_kind in v.kinds and b_kind in v.kinds]
    return sorted(both, key=lambda v: len(v.kinds))  # sorted() is stable: page order within a size


def default_pair_b(a_ref: str) -> tuple[str, str] | None:
    """``(ref, how)``: the checkpoint Compare pairs with ``a_ref`` when the user has not chosen B: the most
    related one that shares a view with A (same task first, then same kind, same family, same way of
    mixing positions; :func:`app_pages._data.related_entries`), else the most related one, else another
    checkpoint of the same task, else any other (``how`` ``""``); None when A is the only checkpoint. A copy
    of A (identical weights, :func:`geomlab.checkpoints.catalog.same_weights`: its lines would lie on A's) is
    skipped unless every other checkpoint is one."""
    a = ui.entry_for(a_ref)
    others = [e for e in ui.entries() if e.ref != a_ref]
    if not others:
        return None
    if a is None:
        return others[0].ref, ""
    copies = {e.ref for e in others if catalog.same_weights(a, e)}
    skip = copies if len(copies) < len(others) else set()
    others = [e for e in others if e.ref not in skip]
    ranked = [(e, how) for e, how in _data.related_entries(a, pair=True) if e.ref not in skip]
    sharing = [(e, how) for e, how in ranked if shared_views(a.kind, e.kind)]
    if sharing or ranked:
        e, how = (sharing or ranked)[0]
        return e.ref, how
    same_task = [e for e in others if e.is_word_problem == a.is_word_problem]
    return (same_task or others)[0].ref, ""


def compare_columns(phone: bool) -> list[str]:
    """The Compare table's column order: the side, name, valid and test first (they fit beside the sidebar
    at 1000 px), or on a phone (~390 px: the side and three more columns fit) the side, the metric, valid
    and test, then the name (each side's name is under its picker above). Design choice."""
    if phone:
        return ["side", "metric", "valid", "test", "name", "trained", "model"]
    return ["side", "name", "valid", "test", "trained", "metric", "model"]


def _pick_view(pair: tuple[str, str]) -> None:
    """``on_change`` of the view control: the user chose this view for this pair."""
    st.session_state[K_VIEW] = st.session_state["w_" + K_VIEW]
    st.session_state[_state.K_VIEW_FOR] = pair


def choose_view(a, b, slugs: list[str], came: str | None = None) -> str:
    """The view Compare shows: a link's view; else ``came``, the view page Compare was opened from, when it
    shows both sides; else the one the user chose for this pair (a click), else the current one when it
    shows both sides, else the most specific view that shows both, else the first view that shows A, else
    the first that shows B. Design choice (what you were looking at, when both sides have it)."""
    ss = st.session_state
    pair = (a.ref, b.ref)
    both = [v.slug for v in shared_views(a.kind, b.kind)]
    if ss.get(_state.K_VIEW_FOR) == "link":
        ss[_state.K_VIEW_FOR] = pair
    elif came in both:
        ss[K_VIEW] = came
    cur = ss.get(K_VIEW)
    if cur in slugs and (ss.get(_state.K_VIEW_FOR) == pair or cur in both):
        return cur
    of_a = [v.slug for v in views.views_for_kind(a.kind) if v.slug in slugs]
    return (both or of_a or slugs)[0]


def _shown_by(kind: str, side: str) -> str:
    """``"Trajectories, Tangents show A"`` (the views of ``kind``), or ``"no view shows A"``."""
    fitting = views.views_for_kind(kind)
    if not fitting:
        return f"no view shows {side}"
    return ", ".join(v.title for v in fitting) + f" show{'s' if len(fitting) == 1 else ''} {side}"


def _b_choices(a, b) -> None:
    """No view shows both sides: say so and offer the checkpoints that share a view with A as B."""
    if not views.views_for_kind(a.kind):
        st.info(f"A ({md_escape(a.name)}) is a {_code(a.kind)}, a baseline with no geometry view: only "
                "the surprisal chart compares it. Choose an A that a view shows to compare figures.",
                icon=":material/info:")
        return
    fits = [(e, how) for e, how in _data.related_entries(a, pair=True) if shared_views(a.kind, e.kind)]
    listed = {e.ref for e, _ in fits}
    fits += [(e, "") for e in ui.entries()
             if e.ref not in listed and e.ref != a.ref and shared_views(a.kind, e.kind)]
    st.info(f"No view shows both A ({_code(a.kind)}) and B ({_code(b.kind)}): {_shown_by(a.kind, 'A')}; "
            f"{_shown_by(b.kind, 'B')}." + (" Choose a B that shares a view with A below." if fits else ""),
            icon=":material/join_inner:")
    if fits:
        checkpoint_choices("B that shares a view with A (related ones first)", fits[:8], key="w_cmp_b_choice",
                           which=ui.K_CKPT_B)


def surprisal_figure(sides, pos: int):
    """The surprisal chart of both sides and its caption (:func:`geomlab.figures.surprisal.surprisal_figure`).
    ``sides``: ``[(trace, entry, name, colour)]``."""
    from geomlab.figures.surprisal import SurprisalSide
    from geomlab.figures.surprisal import surprisal_figure as build

    return build([SurprisalSide(tr, name, colour, entry.task, entry.n_outputs)
                  for tr, entry, name, colour in sides], pos)


def main() -> None:
    """The Compare page: two checkpoint pickers (B paired with A unless chosen), their metrics, both traces
    of the text, the surprisal chart, then one view of both sides, figure by figure."""
    _page()
    _state.note_standin_state(None)  # what this run left (a control's default too) is not the user's action


def _page() -> None:
    ui.wait_warm()
    ui.show_notice()
    st.title("Compare")
    st.caption("Two checkpoints read the same text; their figures sit side by side with the same token cursor.")
    entries = ui.entries()
    if len(entries) < 2:
        st.info("Compare needs two checkpoints. Train one on **Train live** or upload one on **Checkpoints**.",
                icon=":material/info:")
        if not entries:
            ui.no_checkpoint_message()
            return
    _state.restore_choice("compare", keep=True)  # A: the checkpoint the view page showed, a stand-in too
    came = st.session_state.pop(_state.K_FROM_VIEW, None)  # that view page, once: the View control's first choice
    _pair_b()
    phone = ui.is_phone()  # a phone stacks the two pickers; a large gap would leave ~70 px empty between them
    a, b = _pickers(phone)
    text = ui.text_box(a)
    if ui.too_long(text):
        return
    # chart first: one row of controls (cursor, each CEM side's steps), the surprisal chart, then the table
    bar = st.columns([3, 1.3, 1.3], vertical_alignment="bottom")
    traces, opts = _trace_sides(a, b, text, bar[1:])
    if not traces:
        return
    labels = list(next(iter(traces.values())).labels)
    if "A" in traces and "B" in traces and traces["A"].n_positions != traces["B"].n_positions:
        st.warning("The two checkpoints split the text into different numbers of tokens (different "
                   "vocabularies); the cursor follows A's positions.", icon=":material/warning:")
    pos = ui.cursor_control(labels, where=bar[0], trace=next(iter(traces.values())))
    with ui.guard("The surprisal chart"):
        sides = [(traces[s], e, f"{s}: {e.name}", c) for s, e, c in (("A", a, COLOURS[0]), ("B", b, COLOURS[1]))
                 if s in traces]
        fig, caption = surprisal_figure(sides, pos)
        key = "compare-surprisal"  # a click on a token's point moves the cursor there
        ui.chart(fig, key=key, filename="geomlab-compare-surprisal",
                 on_click=partial(follow_click, key, "position", traces.get("A", next(iter(traces.values())))))
        st.caption(caption)
        for s, e in (("A", a), ("B", b)):  # under the chart: a side whose model stops reading a long text
            if s in traces:
                _views.length_note(e, traces[s])
    _summary_table(a, b, phone)
    ui.cache_caption()
    slugs = [v.slug for v in views.VIEWS.values() if a.kind in v.kinds or b.kind in v.kinds]
    if not slugs:
        st.info("Neither checkpoint has a geometry view (both are baselines).", icon=":material/info:")
        link_and_downloads(a, b, traces, opts, pos, None)
        return
    if not shared_views(a.kind, b.kind):
        _b_choices(a, b)
    slug = _view_control(a, b, slugs, came)
    _layout_control()
    # one Options expander for both sides, above the two columns (so they start level); the controls come
    # from the first side the view applies to and are applied to both (layer matched by relative depth)
    ref_tr = next((traces[s] for s, e in (("A", a), ("B", b)) if s in traces and e.kind in views.VIEWS[slug].kinds),
                  None)
    shared: dict = {}
    if ref_tr is not None:
        with ui.guard("The view's options"):
            shared = ui.view_controls(slug, ref_tr, st.expander("Options (both sides)", expanded=False))
    items = _figure_items(slug, {"A": a, "B": b}, text, traces, opts, pos, shared, ref_tr)
    _draw_rows(slug, {"A": a, "B": b}, traces, opts, items)
    link_and_downloads(a, b, traces, opts, pos, slug)


def _pair_b() -> None:
    """B follows A until the user picks one: a B that is unset, gone, or was paired with another A is
    replaced by :func:`default_pair_b` (remembered with how it relates to A); a B the user chose ends that."""
    ss = st.session_state
    a_ref = ss.get(ui.K_CKPT)
    auto = ss.get(_state.K_B_AUTO)
    b_now = ss.get(ui.K_CKPT_B)
    if (b_now is None or ui.entry_for(b_now) is None
            or (auto is not None and auto[1] == b_now and auto[0] != a_ref)):  # B was paired with another A
        pair = default_pair_b(a_ref)
        ss[ui.K_CKPT_B] = pair[0] if pair else a_ref
        ss[_state.K_B_AUTO] = (a_ref, ss[ui.K_CKPT_B], pair[1] if pair else "")
    elif auto is not None and auto[1] != b_now:
        ss.pop(_state.K_B_AUTO, None)


def _pickers(phone: bool):
    """The two checkpoint pickers side by side, and under B how it was chosen when Compare chose it;
    returns the two catalog entries ``(a, b)``."""
    ss = st.session_state
    ca, cb = st.columns(2, gap="small" if phone else "large")
    a = ui.checkpoint_picker(where=ca, key=ui.K_CKPT, label="Checkpoint A")
    b = ui.checkpoint_picker(where=cb, key=ui.K_CKPT_B, label="Checkpoint B")
    rec = _state.current_standin(None)  # A is a view's stand-in, not the choice (the next page gives that back)
    chosen = ui.entry_for(rec["chosen"]) if rec else None
    if chosen is not None:
        ca.caption(f"A: {md_escape(a.name)}, the stand-in {views.VIEWS[rec['slug']].title} showed for "
                   f"{md_escape(chosen.name)}.")
    auto = ss.get(_state.K_B_AUTO)
    if a.ref != b.ref and catalog.same_weights(a, b):
        cb.caption("B has the same weights as A (a copy of it): their lines coincide.")
    elif auto is not None and auto[:2] == (a.ref, b.ref) and a.ref != b.ref:
        how = {"same kind": f"the same kind, {_code(a.kind)}",
               "same family": "the same family", "also recurrent": "also recurrent",
               "also attention-based": "also attention-based"}.get(auto[2], "")
        cb.caption("B chosen to go with A" + (f": {how}" if how else ": no checkpoint related to A is here")
                   + (f", another group ({md_escape(b.group)})" if auto[2] == "same kind" and b.group
                      and b.group != a.group else "")
                   + ". Pick any other B above.")
    return a, b


def _summary_table(a, b, phone: bool) -> None:
    """One row per side (metric, steps, model) and each side's accuracy by length when its card has it."""
    rows = ui.summary_rows([a, b])
    for row, label in zip(rows, ("A", "B")):
        row["side"] = label
        row["model"] = row["kind"] + (f" · {row['group']}" if row["group"] else "")
    # widths that fit beside the sidebar at 1000 px, the numbers first (at 800 px the metric and model scroll);
    # each side's full title is under its picker above. On a phone (~390 px) the numbers with their unit come
    # before the name. No column is pinned: Streamlit draws a pinned column's text faded
    st.dataframe(rows, hide_index=True, width="content", column_order=compare_columns(phone), column_config={
        "side": st.column_config.TextColumn("side", width=40),
        "name": st.column_config.TextColumn("name", width=NAME_WIDTH),
        "trained": st.column_config.TextColumn("steps", width=60, help=STEPS_HELP),
        "model": st.column_config.TextColumn("model", width=112, help="model kind · group (OSM models)"),
        "metric": st.column_config.TextColumn("metric", width=84),
        "valid": st.column_config.TextColumn("valid", width=50),
        "test": st.column_config.TextColumn("test", width=50)})
    for side, e in (("A", a), ("B", b)):
        line = ui.accuracy_by_length_line(e)
        if line:
            st.caption(f"{side} ({e.name}): {line}")


def _trace_sides(a, b, text: str, slots: list) -> tuple[dict, dict]:
    """``(traces, opts)`` by side (``"A"``, ``"B"``): a CEM side's recursion-steps control first (in
    ``slots``, two containers of the controls row), then each side's trace of ``text`` (a side that cannot
    trace it says why and is left out)."""
    traces, opts = {}, {}
    cem_sides = [(side, e) for side, e in (("A", a), ("B", b)) if e.kind == "cem"]
    if cem_sides:
        cols = slots
        for side, e in cem_sides:
            key = ui.K_STEPS if side == "A" else ui.K_STEPS_B  # both mirrored in the URL (T, TB)
            opts[side] = ui.steps_control(
                e, key, cols[0 if side == "A" else 1], label=f"{side}: steps T",
                help=f"Recursion steps T at inference. {e.name} was trained with T = "
                     f"{views.trained_steps(e.model_config)}. Choose the same "
                     "checkpoint on both sides with different T to see test-time recursion.")
    for side, e in (("A", a), ("B", b)):
        with ui.guard(f"Tracing checkpoint {side}", prefix=f"{side} ({e.name}): "):
            ui.check_text(e, text, hint=ui.TEXT_HINT if side == "A" else ui.TEXT_HINT_B)
            traces[side] = ui.trace_for(e, text, **opts.get(side, {}))
            unknown = ui.unknown_tokens(e, text)
            if unknown:
                from geomlab.data.vocab import unknown_note

                st.caption(f"{side}: {md_escape(unknown_note(unknown, ui.vocab_of(e).unk or '�'))}.")
    return traces, opts


def _view_control(a, b, slugs: list[str], came: str | None = None) -> str:
    """The View control over ``slugs``, opened on :func:`choose_view`'s view (``came``: the view page Compare
    was opened from); returns the view shown."""
    ss = st.session_state
    linked = ss.get(K_VIEW) if ss.get(_state.K_VIEW_FOR) == "link" else None
    slug = choose_view(a, b, slugs, came)
    if linked in views.VIEWS and linked != slug:  # a link's view that shows neither side: said, not swapped silently
        st.warning(md_escape(f"Ignored the link's view={_state.quoted(linked)}: {views.VIEWS[linked].title} shows "
                             f"neither A ({a.kind}) nor B ({b.kind}); showing {views.VIEWS[slug].title} instead."),
                   icon=":material/link_off:")
    ss[K_VIEW] = ss["w_" + K_VIEW] = slug
    st.segmented_control("View", slugs, key="w_" + K_VIEW, format_func=lambda s: views.VIEWS[s].title,
                         on_change=_pick_view, args=((a.ref, b.ref),), required=True,
                         help="Views that show at least one side; the page opens on one that shows both.")
    slug = ss.get("w_" + K_VIEW) or slug
    ss[K_VIEW] = slug
    return slug


def _layout_control() -> None:
    """The Layout control: A above B (the default) or side by side."""
    ss = st.session_state
    # A above B by default: the server cannot know the window's width, and side by side each figure got
    # ~260 px at a 1,000 px window with the sidebar open (maps ~100 px, titles cut)
    if ss.get(K_LAYOUT) not in _state.LAYOUTS:
        ss[K_LAYOUT] = _state.LAYOUTS[0]
    _state.seed("w_" + K_LAYOUT, K_LAYOUT)
    st.segmented_control("Layout", list(_state.LAYOUTS), key="w_" + K_LAYOUT, required=True,
                         on_change=_state.copy, args=("w_" + K_LAYOUT, K_LAYOUT),
                         format_func={"side": "A | B side by side", "stacked": "A above B, full width"}.get,
                         help="A above B gives every figure the whole width; side by side suits a wide window "
                              "(about 1,300 px or more with the sidebar open).")
    if ss.get(K_LAYOUT) == "side" and ui.is_phone():
        st.caption("On a phone A and B stand one above the other (side by side they would not fit).")
    elif ss.get(K_LAYOUT) == "side":
        # shown by the browser only while the page is too narrow for two figure columns (the CSS in app.py):
        # the server cannot know the width, and the columns wrap without a word
        st.html(f'<div class="gl-wrap-box"><p class="gl-wrap-note">{WRAP_NOTE}</p></div>')


WRAP_NOTE = ("This window is too narrow for A and B side by side, so B stands under A. Widen it or fold the "
             "sidebar, or choose A above B for full-width figures.")


def layer_titled(fig: Any, layer: int, n: int, ref: tuple[str, int, int] | None = None) -> Any:
    """A copy of ``fig`` whose title says which layer of how many it shows: ``"…, layer 2"`` becomes ``"…,
    layer 2 of 3"``, and a title that names no layer gets ``" · layer 2 of 3 (0 = first)"``; for the side
    whose layer was matched by depth to the shared control's ``ref = (side, layer, n)``, then ``"matched by
    depth to A's layer 1 of 2"``. The side is not repeated (its label heads the column). None stays None;
    the cached figure is not changed."""
    if fig is None:
        return None
    title = fig.layout.title.text or ""
    matched = f"matched by depth to {ref[0]}'s layer {ref[1]} of {ref[2]}" if ref is not None else ""
    at = re.search(rf"\blayer {layer}\b(?! of)", title)
    if at:
        text = title[:at.end()] + f" of {n}" + title[at.end():] + (f" · {matched}" if matched else "")
    else:
        text = ((f"{title} · " if title else "") + f"layer {layer} of {n} (0 = first)"
                + (f", {matched}" if matched else ""))
    return relaid(fig, [{"title": {"text": text}}])


def _side_layers(slug: str, sides: dict, traces: dict, shared: dict, ref_tr: Any) -> dict[str, tuple]:
    """Side -> ``(layer, n_layers, ref)`` when the view has a layer control and the sides' layer counts
    differ: the shared layer is the reference side's; the other side shows the layer at the same relative
    depth (:func:`geomlab.teach.views.match_layer`), ``ref`` naming the reference ``(side, layer, n)``.
    Empty when every side has the same number of layers (each shows the shared layer)."""
    shown = {s: traces[s] for s, e in sides.items() if s in traces and e.kind in views.VIEWS[slug].kinds}
    if "layer" not in shared or ref_tr is None or len({views.n_layers(t) for t in shown.values()}) < 2:
        return {}
    n_ref = views.n_layers(ref_tr)
    ref_side = next(s for s, t in shown.items() if t is ref_tr)
    out = {}
    for s, t in shown.items():
        n = views.n_layers(t)
        out[s] = ((shared["layer"], n, None) if t is ref_tr
                  else (views.match_layer(shared["layer"], n_ref, n), n, (ref_side, shared["layer"], n_ref)))
    return out


def _figure_items(slug: str, sides: dict, text: str, traces: dict, opts: dict, pos: int, shared: dict,
                  ref_tr: Any) -> dict[str, list]:
    """Side -> the view's figures for that side (:func:`app_pages._views.figure_list`), with the shared
    controls made valid for the side's trace: the layer matched by relative depth when the sides' layer
    counts differ (each layer figure then names its side's layer in its title), another control a side lacks
    said in a caption; a side the view does not show gets a note instead."""
    items: dict[str, list] = {}
    layers = _side_layers(slug, sides, traces, shared, ref_tr)
    for side, e in sides.items():
        if e.kind not in views.VIEWS[slug].kinds:
            article = "an" if e.kind[:1] in "aeiou" else "a"
            st.info(f"{side} ({e.name}): {views.VIEWS[slug].title} does not apply to {article} `{e.kind}`.",
                    icon=":material/block:")
            continue
        if side not in traces:
            continue
        tr = traces[side]
        with ui.guard(f"Drawing {side}"):
            p = min(pos, tr.n_positions - 1)
            wanted = dict(shared, **({"layer": layers[side][0]} if side in layers else {}))
            controls = views.clamp_controls(slug, tr, wanted)
            changed = [n for n in wanted if n in controls and controls[n] != wanted[n] and n != "layer"]
            if changed and ref_tr is not None:  # said, not done silently: B's head 0 beside A's head 3
                st.caption(f"{side} ({e.name}) has no "
                           + ", no ".join(views.control_label(n, shared[n], ref_tr, shared) for n in changed)
                           + ": it shows " + ", ".join(views.control_label(n, controls[n], tr, controls)
                                                       for n in changed) + ".")
            figs = _views.figure_list(slug, e, text, opts.get(side, {}), tr, p, controls)
            if side in layers:  # said on the chart itself: which layer of how many this side shows
                figs = [(n, layer_titled(f, *layers[side]) if "layer" in views.figure_spec(n).controls else f,
                         *rest) for n, f, *rest in figs]
            items[side] = figs
    return items


def _header(side: str, e, opts: dict) -> str:
    """A side's label over its figures: name, kind, group and (CEM) the recursion steps (markdown)."""
    steps = opts.get(side, {}).get("steps")
    return (f"**{side}: {e.name}** · {e.kind}" + (f" · {e.group}" if e.group else "")
            + (f" · T = {steps}" if steps else ""))


def _draw_rows(slug: str, sides: dict, traces: dict, opts: dict, items: dict[str, list]) -> None:
    """The view's figures, figure by figure: single-panel figures side by side (A left, B right), each column
    under its side's label (the full header over a run's first row, the name over the next); once any figure has panels side by side (e.g. the torus angles, a generator before and after
    mixing), or A above B is chosen or it is a phone, every figure of that row is drawn full width, A above
    B, each under its own label, so tick labels and colour bars have room. A side without a figure the other has says why (:func:`missing_figure_note`)."""
    names = {side: e.name for side, e in sides.items()}
    # a phone stacks columns anyway: side by side, its header row would sit above A's figure and B's label
    # over nothing, so A's map would read as B's; there every figure is drawn A above B under its own label
    stacked = st.session_state.get(K_LAYOUT) == "stacked" or ui.is_phone()
    headed = False  # the current run of side-by-side rows has its full header (over its first row)
    for fig_name in views.VIEWS[slug].figures:
        row = {side: next((it for it in items.get(side, []) if it[0] == fig_name), None) for side in ("A", "B")}
        present = {side: it for side, it in row.items() if it is not None}
        if not present:
            continue
        present = shared_scale_items(present)
        # the side without this figure says why (e.g. the torus shows its angles instead of the circle)
        absent = {side: missing_figure_note(slug, fig_name, side, sides[side], traces[side])
                  for side in ("A", "B") if side not in present and side in items}
        if stacked or any(it[1] is not None and _views.panels_side_by_side(it[1]) for it in present.values()):
            headed = False
            for side, it in present.items():
                st.markdown(_header(side, sides[side], opts) + f" · *{fig_name.replace('_', ' ')}*")
                with ui.guard(f"Drawing {side}"):
                    _draw_full_width(it, side, slug, names[side], stacked)
            for note in absent.values():
                st.caption(note)
        else:
            # each side's label sits in its own figure's column: on a page too narrow for two figures side by
            # side the columns wrap (A above B), and a label in a row of its own would stand over the wrong map
            fcols = st.columns(2, gap="large")
            narrow = same_row({k: narrow_copy(it[1]) for k, it in present.items()}, f"cmp-{slug}-{fig_name}")
            for col, side in zip(fcols, ("A", "B")):
                if side in items:
                    if headed:
                        col.caption(md_escape(f"{side}: {names[side]}"))
                    else:
                        col.markdown(_header(side, sides[side], opts))
                if side in absent:
                    col.caption(absent[side])
                if side in present:
                    with col, ui.guard(f"Drawing {side}"):
                        it = present[side]
                        _views.draw_figures([(it[0], narrow[side], *it[2:])], key_prefix=f"cmp-{side}-{slug}",
                                            stem=f"{names[side]}-{slug}", force_narrow=True)
            headed = True


def shared_scale_items(present: dict[str, tuple]) -> dict[str, tuple]:
    """``present`` (side -> ``(name, figure, caption, ...)`` of one figure) with both sides' figures on one
    colour scale and one value axis (:func:`geomlab.figures.shared_scales.share_scales`) when both sides
    drew it; as given otherwise (one side, or a side whose figure failed)."""
    if set(present) != {"A", "B"} or any(it[1] is None for it in present.values()):
        return present
    from geomlab.figures.shared_scales import share_scales

    fa, fb = share_scales(present["A"][1], present["B"][1])
    return {"A": (present["A"][0], fa, *present["A"][2:]), "B": (present["B"][0], fb, *present["B"][2:])}


def _draw_full_width(it: tuple, side: str, slug: str, name: str, stacked: bool) -> None:
    """One side's figure ``it`` (name, figure, caption, ...) in a row of its own: A above B chosen, the whole
    width (a square map as wide as its height makes it, colour bar beside it); else a square map at half
    width (keeping its colour bar), any other figure at the full width."""
    if stacked and it[1] is not None:  # keys of their own: a side-by-side chart's element would keep its
        # narrow size
        key = f"cmp-stk-{side}-{slug}-{it[0]}"
        width = square_width(it[1]) if _views.square_single_panel(it[1]) else None
        ui.chart(it[1], key=key, filename=f"{name}-{slug}-{it[0]}", width=width,
                 on_click=_views.click_handler(it[0], key))
        st.caption(it[2])
    elif _views.square_single_panel(it[1]):  # one square map: half width keeps its colour bar
        with st.columns(2, gap="large")[0]:
            _views.draw_figures([(it[0], narrow_copy(it[1]), *it[2:])], key_prefix=f"cmp-{side}-{slug}",
                               stem=f"{name}-{slug}", force_narrow=True)
    else:
        _views.draw_figures([(it[0], it[1], it[2], True)], key_prefix=f"cmp-{side}-{slug}", stem=f"{name}-{slug}")


def missing_figure_note(slug: str, fig_name: str, side: str, entry, tr: Any) -> str:
    """Why side ``side`` (its checkpoint ``entry``, trace ``tr``) has no figure ``fig_name`` in Compare's
    view ``slug`` (which shows its kind) while the other side has one: another of its figures takes that
    one's place, or the figure does not apply to this model (its group named) (markdown, one line)."""
    label = views.figure_spec(fig_name).label
    if views.applies(tr, fig_name):
        shown = views.default_figures(slug, tr)
        by = next((f for f in shown if fig_name in f.replaces), None)
        why = (f"it shows {by.label} in its place" if by is not None
               else "it is under \"More figures\" on the view page")
    else:  # the view shows this kind (a side it does not show gets no cell), so the figure's own rule
        why = "it does not apply to " + (f"this model's group, {md_escape(entry.group)}" if entry.group
                                         else "this model")
    return f"{side} ({md_escape(entry.name)}): no {label}; {why}."


def link_and_downloads(a, b, traces: dict, opts: dict, pos: int, slug: str | None) -> None:
    """The link box (the full address that reopens this comparison: both checkpoints, text, cursor, view,
    layer, T and TB) and each side's trace downloads (.npz and JSON, as on the view pages)."""
    with st.expander("Link to this comparison", icon=":material/link:"):
        st.caption("Anyone who opens this link sees these two checkpoints, this text, token cursor and view "
                   "(the address bar holds the same link).")
        st.code(ui.share_link("compare"), language=None, wrap_lines=True)
    with st.expander("Download both traces", icon=":material/download:"):
        st.caption("Every figure, side by side ones included, downloads as PNG from the camera icon in its "
                   "toolbar. Each .npz trace holds every array behind its side's figures "
                   "(geomlab.trace.load_trace reads it back); the JSON holds the 256 positions around the cursor.")
        for side, e in (("A", a), ("B", b)):
            if side not in traces:
                continue
            steps = opts.get(side, {}).get("steps")
            st.markdown(f"**{side}: {md_escape(e.name)}**" + (f" · T = {steps}" if steps else ""))
            ui.trace_downloads(traces[side], stem=f"{e.name}-{side}" + (f"-T{steps}" if steps else ""),
                               cursor=min(pos, traces[side].n_positions - 1))


with ui.guard("The Compare page"), rendering():
    main()
