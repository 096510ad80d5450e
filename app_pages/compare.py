"""Compare: two checkpoints on the same text, side by side (e.g. O(d) vs torus vs U(d), or T=1 vs T=2)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app_pages import _ui as ui
from app_pages import _views as views

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
        fam = next((v.kinds for v in ui.VIEWS.values() if a.kind in v.kinds), ())
        related = [e for e in others if e.kind in fam]
        if related:
            return related[0].ref
    return others[0].ref


def surprisal(tr) -> np.ndarray:
    """``[position]`` bits to predict token t from tokens < t (NaN at t = 0)."""
    lp = tr.log_probs()
    out = np.full(tr.n_positions, np.nan)
    if tr.n_positions > 1:
        out[1:] = -lp[np.arange(tr.n_positions - 1), tr.tokens[1:]] / math.log(2)
    return out


def surprisal_figure(a, b, names: tuple[str, str], pos: int) -> go.Figure:
    fig = go.Figure()
    for tr, name, colour in ((a, names[0], COLOURS[0]), (b, names[1], COLOURS[1])):
        if tr is None:
            continue
        s = surprisal(tr)
        fig.add_trace(go.Scatter(
            x=np.arange(tr.n_positions), y=s, mode="lines", name=f"{name} (mean {np.nanmean(s):.2f} bits)",
            line={"color": colour}, customdata=tr.labels,
            hovertemplate="position %{x} '%{customdata}'<br>%{y:.2f} bits<extra>" + name + "</extra>"))
    fig.add_vline(x=pos, line={"color": "#D55E00", "dash": "dash", "width": 1.5})
    fig.update_layout(title={"text": "Surprisal of each token", "x": 0.01}, template="plotly_white", height=300,
                      margin={"l": 60, "r": 20, "t": 60, "b": 50}, hovermode="x unified",
                      legend={"orientation": "h", "y": -0.25})
    fig.update_xaxes(title_text="position")
    fig.update_yaxes(title_text="bits to predict the token", rangemode="tozero")
    return fig


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
    rows = [e.summary() for e in (a, b)]
    for row, label in zip(rows, ("A", "B")):
        row["side"] = label
    st.dataframe(rows, hide_index=True, width="stretch",
                 column_order=["side", "name", "kind", "group", "params", "corpus", "steps", "valid BPC", "test BPC"])
    traces, opts = {}, {}
    cem_sides = [(side, e) for side, e in (("A", a), ("B", b)) if e.kind == "cem"]
    if cem_sides:
        cols = st.columns(2)
        for side, e in cem_sides:
            trained = int(e.model_config.get("inference_recursion_steps") or e.model_config.get("recursion_steps") or 1)
            key = ui.K_STEPS if side == "A" else ui.K_STEPS_B  # both mirrored in the URL (T, TB)
            T = ui.int_control(f"{side}: recursion steps T at inference", key, 1, max(16, 2 * trained), trained,
                               where=cols[0 if side == "A" else 1],
                               help=f"{e.name} was trained with T = {trained}. Choose the same checkpoint on "
                                    "both sides with different T to see test-time recursion.")
            opts[side] = {} if T == trained else {"steps": int(T)}
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
    pos = ui.cursor_control(labels)
    fig = surprisal_figure(traces.get("A"), traces.get("B"), (f"A: {a.name}", f"B: {b.name}"), pos)
    ui.chart(fig, key="compare-surprisal", filename="geomlab-compare-surprisal")
    st.caption("How many bits each model needs for each token of this text given the tokens before it (lower "
               "is better); the legend gives the mean, i.e. the bits per character on this text.")
    slugs = [v.slug for v in ui.VIEWS.values() if a.kind in v.kinds or b.kind in v.kinds]
    if not slugs:
        st.info("Neither checkpoint has a geometry view (both are baselines).", icon=":material/info:")
        return
    both = [s for s in slugs if a.kind in ui.VIEWS[s].kinds and b.kind in ui.VIEWS[s].kinds]
    cur = st.session_state.get(K_VIEW)
    st.session_state["w_" + K_VIEW] = cur if cur in slugs else (both or slugs)[0]  # prefer a view of both
    st.segmented_control("View", slugs, key="w_" + K_VIEW, format_func=lambda s: ui.VIEWS[s].title,
                         on_change=ui._copy, args=("w_" + K_VIEW, K_VIEW), required=True)
    slug = st.session_state.get("w_" + K_VIEW) or slugs[0]
    st.session_state[K_VIEW] = slug
    # one Options expander for both sides, above the two columns (so they start level); the controls come
    # from the first side the view applies to and are applied to both (layer clamped per side)
    ref_tr = next((traces[s] for s, e in (("A", a), ("B", b)) if s in traces and e.kind in ui.VIEWS[slug].kinds),
                  None)
    shared: dict = {}
    if ref_tr is not None:
        with ui.guard("The view's options"):
            shared = views.controls_for(slug, ref_tr, st.expander("Options (both sides)", expanded=False))
    cols = st.columns(2, gap="large")
    for col, side, e in ((cols[0], "A", a), (cols[1], "B", b)):
        with col:
            steps = opts.get(side, {}).get("steps")
            st.markdown(f"**{side}: {e.name}** · {e.kind}" + (f" · {e.group}" if e.group else "")
                        + (f" · T = {steps}" if steps else ""))
            if e.kind not in ui.VIEWS[slug].kinds:
                st.info(f"{ui.VIEWS[slug].title} does not apply to a `{e.kind}`.", icon=":material/block:")
                continue
            if side not in traces:
                continue
            tr = traces[side]
            with ui.guard(f"Drawing {side}"):
                p = min(pos, tr.n_positions - 1)
                controls = dict(shared)
                if "layer" in controls:
                    controls["layer"] = max(0, min(controls["layer"], views.n_layers(tr) - 1))
                items = views.figure_list(slug, e, text, opts.get(side, {}), tr, p, controls)
                views.draw_figures(items, key_prefix=f"cmp-{side}-{slug}", stem=f"{e.name}-{slug}", force_narrow=True)


with ui.guard("The Compare page"):
    main()
