"""Compare: two checkpoints on the same text, side by side (e.g. O(d) vs torus vs U(d), or T=1 vs T=2)."""

from __future__ import annotations

import streamlit as st

from app_pages import _ui as ui
from app_pages import _views as views
from app_pages._warm import rendering
from geomlab import views as registry

K_VIEW = "gl_compare_view"
COLOURS = ("#0072B2", "#E69F00")


def default_b(a_ref: str) -> str | None:
    """A sensible second checkpoint: same kind with another group or size first, then anything else."""
    entries = ui.entries()
    a = ui.entry_for(a_ref)
    others = [e for e in entries if e.ref != a_ref]
    if not others:
        return None
    if a is not None:
        same = [e for e in others if e.kind == a.kind]
        if same:
            return same[0].ref
        fam = next((v.kinds for v in registry.views_for_kind(a.kind)), ())
        related = [e for e in others if e.kind in fam]
        if related:
            return related[0].ref
    return others[0].ref


def surprisal_figure(sides, pos: int):
    """The surprisal chart of both sides and its caption (:func:`geomlab.figures.surprisal.surprisal_figure`).
    ``sides``: ``[(trace, entry, name, colour)]``."""
    from geomlab.figures.surprisal import SurprisalSide
    from geomlab.figures.surprisal import surprisal_figure as build

    return build([SurprisalSide(tr, name, colour, entry.task, entry.n_outputs)
                  for tr, entry, name, colour in sides], pos)


def main() -> None:
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
    if st.session_state.get(ui.K_CKPT_B) is None or ui.entry_for(st.session_state[ui.K_CKPT_B]) is None:
        st.session_state[ui.K_CKPT_B] = default_b(st.session_state.get(ui.K_CKPT)) or st.session_state.get(ui.K_CKPT)
    ca, cb = st.columns(2, gap="large")
    a = ui.checkpoint_picker(where=ca, key=ui.K_CKPT, label="Checkpoint A")
    b = ui.checkpoint_picker(where=cb, key=ui.K_CKPT_B, label="Checkpoint B")
    text = ui.text_box(a)
    rows = ui.summary_rows([a, b])
    for row, label in zip(rows, ("A", "B")):
        row["side"] = label
    st.dataframe(rows, hide_index=True, width="stretch",
                 column_order=["side", "name", "kind", "group", "params", "corpus", "steps", "metric", "valid",
                               "test"])
    for side, e in (("A", a), ("B", b)):
        line = ui.accuracy_by_length_line(e)
        if line:
            st.caption(f"{side} ({e.name}): {line}")
    traces, opts = {}, {}
    cem_sides = [(side, e) for side, e in (("A", a), ("B", b)) if e.kind == "cem"]
    if cem_sides:
        cols = st.columns(2)
        for side, e in cem_sides:
            key = ui.K_STEPS if side == "A" else ui.K_STEPS_B  # both mirrored in the URL (T, TB)
            opts[side] = ui.steps_control(
                e, key, cols[0 if side == "A" else 1], label=f"{side}: recursion steps T at inference",
                help=f"{e.name} was trained with T = {registry.trained_steps(e.model_config)}. Choose the same "
                     "checkpoint on both sides with different T to see test-time recursion.")
    for side, e in (("A", a), ("B", b)):
        with ui.guard(f"Tracing checkpoint {side}"):
            ui.check_text(e, text)
            traces[side] = ui.trace_for(e, text, **opts.get(side, {}))
            unknown = ui.unknown_tokens(e, text)
            if unknown:
                st.caption(f"{side}: {len(unknown)} character(s) read as unknown: "
                           + ", ".join(repr(u) for u in unknown[:8])
                           + (f", … ({len(unknown) - 8} more)" if len(unknown) > 8 else ""))
    if not traces:
        return
    labels = list(next(iter(traces.values())).labels)
    if "A" in traces and "B" in traces and traces["A"].n_positions != traces["B"].n_positions:
        st.warning("The two checkpoints split the text into different numbers of tokens (different "
                   "vocabularies); the cursor follows A's positions.", icon=":material/warning:")
    pos = ui.cursor_control(labels, trace=next(iter(traces.values())))
    ui.cache_caption()
    with ui.guard("The surprisal chart"):
        sides = [(traces[s], e, f"{s}: {e.name}", c) for s, e, c in (("A", a, COLOURS[0]), ("B", b, COLOURS[1]))
                 if s in traces]
        fig, caption = surprisal_figure(sides, pos)
        ui.chart(fig, key="compare-surprisal", filename="geomlab-compare-surprisal")
        st.caption(caption)
    slugs = [v.slug for v in registry.VIEWS.values() if a.kind in v.kinds or b.kind in v.kinds]
    if not slugs:
        st.info("Neither checkpoint has a geometry view (both are baselines).", icon=":material/info:")
        return
    both = [s for s in slugs if a.kind in registry.VIEWS[s].kinds and b.kind in registry.VIEWS[s].kinds]
    cur = st.session_state.get(K_VIEW)
    st.session_state["w_" + K_VIEW] = cur if cur in slugs else (both or slugs)[0]  # prefer a view of both
    st.segmented_control("View", slugs, key="w_" + K_VIEW, format_func=lambda s: registry.VIEWS[s].title,
                         on_change=ui._copy, args=("w_" + K_VIEW, K_VIEW), required=True)
    slug = st.session_state.get("w_" + K_VIEW) or slugs[0]
    st.session_state[K_VIEW] = slug
    # one Options expander for both sides, above the two columns (so they start level); the controls come
    # from the first side the view applies to and are applied to both (layer clamped per side)
    ref_tr = next((traces[s] for s, e in (("A", a), ("B", b)) if s in traces and e.kind in registry.VIEWS[slug].kinds),
                  None)
    shared: dict = {}
    if ref_tr is not None:
        with ui.guard("The view's options"):
            shared = ui.view_controls(slug, ref_tr, st.expander("Options (both sides)", expanded=False))
    # figure by figure: single-panel figures side by side (A left, B right) under one header row; once any
    # figure has panels side by side (e.g. OSMFormer's similarity + attention maps) every figure of that row
    # is drawn full width, A above B, each under its own label, so tick labels and colour bars have room
    # and no header row repeats the labels
    def header(side: str, e) -> str:
        steps = opts.get(side, {}).get("steps")
        return (f"**{side}: {e.name}** · {e.kind}" + (f" · {e.group}" if e.group else "")
                + (f" · T = {steps}" if steps else ""))

    items: dict[str, list] = {}
    for side, e in (("A", a), ("B", b)):
        if e.kind not in registry.VIEWS[slug].kinds:
            st.info(f"{side} ({e.name}): {registry.VIEWS[slug].title} does not apply to a `{e.kind}`.",
                    icon=":material/block:")
            continue
        if side not in traces:
            continue
        tr = traces[side]
        with ui.guard(f"Drawing {side}"):
            p = min(pos, tr.n_positions - 1)
            controls = registry.clamp_controls(slug, tr, shared)  # e.g. A's layer clamped to B's layers
            items[side] = views.figure_list(slug, e, text, opts.get(side, {}), tr, p, controls)
    names = {"A": a.name, "B": b.name}
    entries_ab = {"A": a, "B": b}
    order = registry.VIEWS[slug].figure_names
    headed = False  # a header row stands above the current run of side-by-side rows
    for fig_name in order:
        row = {side: next((it for it in items.get(side, []) if it[0] == fig_name), None) for side in ("A", "B")}
        present = {side: it for side, it in row.items() if it is not None}
        if not present:
            continue
        if any(it[1] is not None and views.panels_side_by_side(it[1]) for it in present.values()):
            headed = False
            for side, it in present.items():
                st.markdown(header(side, entries_ab[side]) + f" · *{fig_name.replace('_', ' ')}*")
                with ui.guard(f"Drawing {side}"):
                    if views.square_single_panel(it[1]):  # one square map: half width keeps its colour bar
                        with st.columns(2, gap="large")[0]:
                            views.draw_figures([it], key_prefix=f"cmp-{side}-{slug}", stem=f"{names[side]}-{slug}",
                                               force_narrow=True)
                    else:
                        views.draw_figures([(it[0], it[1], it[2], True)], key_prefix=f"cmp-{side}-{slug}",
                                           stem=f"{names[side]}-{slug}")
        else:
            if not headed:
                hcols = st.columns(2, gap="large")
                for col, side in zip(hcols, ("A", "B")):
                    if side in items:
                        col.markdown(header(side, entries_ab[side]))
                headed = True
            fcols = st.columns(2, gap="large")
            for col, side in zip(fcols, ("A", "B")):
                if side in present:
                    with col, ui.guard(f"Drawing {side}"):
                        it = present[side]
                        views.draw_figures([it], key_prefix=f"cmp-{side}-{slug}", stem=f"{names[side]}-{slug}",
                                           force_narrow=True)


with ui.guard("The Compare page"), rendering():
    main()
