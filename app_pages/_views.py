"""The five view pages share one renderer: pick checkpoint and text, trace (cached), choose the token cursor
and the view's controls, then draw the figures of :mod:`geomlab.figures` with their captions.

Which figures a view shows (in order) and whether each takes the full width or half of it is listed in
:data:`VIEW_FIGURES`; a figure that does not apply to the trace (``geomlab.figures.views_for``) is skipped.
Figure functions receive only the keyword arguments they accept (``layer``, ``head``, ``slot``,
``block``, ``cursor``/``position``).
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import streamlit as st

from app_pages import _ui as ui

#: view slug -> [(figure name in geomlab.figures.VIEWS, wide?)]
VIEW_FIGURES: dict[str, list[tuple[str, bool]]] = {
    "trajectories": [("phase_circle", False), ("pca_trajectory", False), ("distance_profile", True),
                     ("phase_timeline", True), ("so3_frame", False), ("torus_angles", True)],
    "tangents": [("tangent_heatmap", True), ("tangent_lines", True), ("generator_heatmap", True),
                 ("mixing_share", True)],
    "attention": [("attention_maps", True)],
    "energy": [("energy_descent", True), ("energy_tokens", True)],
    "planes": [("plane_distances", True), ("plane_angles", False), ("gate_share", False),
               ("plane_similarity", False), ("plucker_heatmap", False), ("plane_sphere", False),
               ("plane_interpolation", False), ("plane_matrix", True), ("decomposability_map", False)],
}
# Figures with panels side by side (torus_angles, generator_heatmap, plane_matrix: two columns) are wide:
# at half width their subplot titles overlap and their ticks pile up (tests/test_app.py checks every such
# figure is drawn full width).


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


K_HEAD, K_SLOT, K_BLOCK, K_SUBSTEP = "gl_head", "gl_slot", "gl_block", "gl_substep"


def n_layers(tr: Any) -> int:
    """Number of layers a trace shows (1 when it has no layer axis)."""
    for name in ("states", "energies", "reduced", "attention"):
        a = getattr(tr, name, None)
        if a is not None:
            return int(a.shape[0])
    return 1


def _accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters


@st.cache_data(max_entries=256, show_spinner=False)
def _figure(path: str, mtime: float, text: str, trace_opts: tuple, name: str, kwargs: tuple):
    """One figure (cached by checkpoint, text, trace options, figure name and its arguments)."""
    from geomlab import figures

    tr = ui._trace(path, mtime, text, trace_opts)
    fn = figures.VIEWS[name]
    kw = dict(kwargs)
    if name == "plane_interpolation" and "cursor" in kw:
        pos = kw.pop("cursor")
        try:
            return fn(tr, position=pos, **kw)
        except figures.FigureError:
            return fn(tr, **kw)
    return fn(tr, **kw)


def figure_list(slug: str, entry, text: str, trace_opts: dict, tr: Any, pos: int,
                controls: dict) -> list[tuple[str, Any, str, bool]]:
    """``[(name, figure, caption, wide)]`` of view ``slug`` for this trace (figures that fail are shown as
    one-line messages by the caller: the tuple then holds the error text instead of a figure)."""
    from geomlab import figures

    applicable = set(figures.views_for(tr))
    out = []
    for name, wide in VIEW_FIGURES[slug]:
        if name not in applicable:
            continue
        fn = figures.VIEWS[name]
        kw = {k: v for k, v in {**controls, "cursor": pos}.items()
              if v is not None and (_accepts(fn, k) or (k == "cursor" and _accepts(fn, "position")))}
        try:
            fig, caption = _figure(str(entry.path), entry.mtime, text, tuple(sorted(trace_opts.items())), name,
                                   tuple(sorted(kw.items())))
        except ValueError as exc:
            out.append((name, None, str(exc), wide))
            continue
        out.append((name, fig, caption, wide))
    return out


def controls_for(slug: str, tr: Any, where: Any) -> dict:
    """Draw the view's own controls (layer, head, offset slot, block) and return their values."""
    c: dict[str, Any] = {}
    L = n_layers(tr)
    if L > 1:
        c["layer"] = ui.int_control("Layer", ui.K_LAYER, 0, L - 1, L - 1, where=where,
                                    help="Which layer's states / maps to show (0 = first).")
    else:
        c["layer"] = 0
    tangents = getattr(tr, "tangents", None)
    if slug == "tangents" and tangents is not None and tangents.shape[1] > 1:
        options = list(range(tangents.shape[1]))
        cur = st.session_state.get(K_SUBSTEP)
        st.session_state["w_" + K_SUBSTEP] = cur if cur in options else 0
        where.radio("Update (generator heatmap)", options, key="w_" + K_SUBSTEP, horizontal=True,
                    format_func=lambda k: {0: "attention", 1: "grounding"}.get(k, f"substep {k}"),
                    on_change=ui._copy, args=("w_" + K_SUBSTEP, K_SUBSTEP))
        st.session_state[K_SUBSTEP] = st.session_state["w_" + K_SUBSTEP]
        c["substep"] = st.session_state[K_SUBSTEP]
    if slug == "attention" and hasattr(tr, "n_heads") and tr.n_heads() > 1:
        options = [-1] + list(range(tr.n_heads()))
        cur = st.session_state.get(K_HEAD)
        st.session_state["w_" + K_HEAD] = cur if cur in options else -1
        where.selectbox("Head", options, key="w_" + K_HEAD, on_change=ui._copy, args=("w_" + K_HEAD, K_HEAD),
                        format_func=lambda h: "mean over heads" if h == -1 else f"head {h}")
        st.session_state[K_HEAD] = st.session_state["w_" + K_HEAD]
        c["head"] = None if st.session_state[K_HEAD] == -1 else st.session_state[K_HEAD]
    if slug == "planes" and getattr(tr, "plucker", None) is not None and tr.plucker.shape[1] > 1:
        offsets = getattr(tr, "offsets", None)
        n = tr.plucker.shape[1]
        layer = c.get("layer", 0)

        def slot_label(s: int) -> str:
            if offsets is None:
                return f"slot {s}"
            off = int(offsets[layer, s])
            return f"offset {off}" if off else f"slot {s} (unused)"

        options = list(range(n))
        cur = st.session_state.get(K_SLOT)
        st.session_state["w_" + K_SLOT] = cur if cur in options else 0
        where.selectbox("Offset slot", options, key="w_" + K_SLOT, format_func=slot_label,
                        on_change=ui._copy, args=("w_" + K_SLOT, K_SLOT),
                        help="Which pair (t, t − Δ) spans the planes shown.")
        st.session_state[K_SLOT] = st.session_state["w_" + K_SLOT]
        c["slot"] = st.session_state[K_SLOT]
    if slug == "energy":
        options = [0, 1]
        cur = st.session_state.get(K_BLOCK)
        st.session_state["w_" + K_BLOCK] = cur if cur in options else 0
        where.radio("Sub-block (token heatmap)", options, key="w_" + K_BLOCK, horizontal=True,
                    format_func=lambda b: "attention" if b == 0 else "MLP", on_change=ui._copy,
                    args=("w_" + K_BLOCK, K_BLOCK))
        st.session_state[K_BLOCK] = st.session_state["w_" + K_BLOCK]
        c["block"] = st.session_state[K_BLOCK]
    return c


def default_controls(slug: str, tr: Any) -> dict:
    """What :func:`controls_for` returns on a first visit (fresh session), without drawing widgets."""
    L = n_layers(tr)
    c: dict[str, Any] = {"layer": L - 1 if L > 1 else 0}
    tangents = getattr(tr, "tangents", None)
    if slug == "tangents" and tangents is not None and tangents.shape[1] > 1:
        c["substep"] = 0
    if slug == "attention" and hasattr(tr, "n_heads") and tr.n_heads() > 1:
        c["head"] = None
    if slug == "planes" and getattr(tr, "plucker", None) is not None and tr.plucker.shape[1] > 1:
        c["slot"] = 0
    if slug == "energy":
        c["block"] = 0
    return c


def prewarm(max_views: int = 6) -> int:
    """Run the default views of the bundled checkpoints Home links to once, outside Streamlit's caches
    (called from the warm-up thread): this pays the first-call costs of torch and the figure code before
    a visitor does. Streamlit's cached functions are deliberately not called from that thread (no script
    context there). Returns how many views were built."""
    from geomlab import figures
    from geomlab import trace as trace_mod

    from geomlab import catalog

    bundled = catalog.list_checkpoints(user=False)  # not ui.entries(): no st.cache_* in this thread
    targets = []
    for view in ui.VIEWS.values():
        entry = next((e for e in bundled if e.kind in view.kinds), None)
        if entry is not None:
            targets.append((view.slug, entry))
    built = 0
    loaded: dict[str, Any] = {}
    for slug, entry in targets[:max_views]:
        try:
            ck = loaded.get(entry.ref) or ui._load_uncached(str(entry.path))
            loaded[entry.ref] = ck
            tr = trace_mod.trace_text(ck.model, ck.vocab, ui.default_text_for(entry))
            applicable = set(figures.views_for(tr))
            kw = default_controls(slug, tr)
            for name, _ in VIEW_FIGURES[slug]:
                if name in applicable:
                    fn = figures.VIEWS[name]
                    fn(tr, **{k: v for k, v in {**kw, "cursor": 0}.items()
                              if v is not None and _accepts(fn, k)})
            built += 1
        except Exception:  # noqa: BLE001 - best effort
            ui.log.debug("pre-warming %s for %s failed", slug, entry.ref, exc_info=True)
    return built


def trace_options(slug: str, entry, where: Any) -> dict:
    """Options that change the trace itself: the CEM inference-time recursion steps T."""
    if slug != "energy":
        return {}
    cfg = entry.model_config
    trained = int(cfg.get("inference_recursion_steps") or cfg.get("recursion_steps") or 1)
    hi = max(16, 2 * trained)
    T = ui.int_control("Recursion steps T at inference", ui.K_STEPS, 1, hi, trained, where=where,
                       help=f"The model was trained with T = {trained}. More steps should keep lowering the "
                            "energy (test-time recursion); the figure flags any step where it rose.")
    return {} if T == trained else {"steps": int(T)}


def draw_figures(items: list[tuple[str, Any, str, bool]], key_prefix: str, stem: str, force_narrow: bool = False) -> int:
    """Draw ``figure_list`` output: wide figures full width, narrow ones two per row; captions below.
    Returns the number of charts drawn."""
    drawn = 0
    pending: list = []

    def flush() -> None:
        nonlocal pending, drawn
        if not pending:
            return
        cols = st.columns(2, gap="medium")
        for col, (name, fig, cap, _) in zip(cols, pending):
            with col:
                drawn += _one(name, fig, cap, key_prefix, stem, narrow=True)
        pending = []

    for item in items:
        if (item[3] and not square_single_panel(item[1])) or force_narrow:
            flush()
            drawn += _one(item[0], item[1], item[2], key_prefix, stem, narrow=force_narrow)
        else:
            pending.append(item)
            if len(pending) == 2:
                flush()
    flush()
    return drawn


def _one(name: str, fig, caption: str, key_prefix: str, stem: str, narrow: bool = False) -> int:
    if fig is None:
        st.info(f"{name.replace('_', ' ')}: {caption}", icon=":material/info:")
        return 0
    ui.chart(fig, key=f"{key_prefix}-{name}", filename=f"{stem}-{name}", narrow=narrow)
    st.caption(caption)
    return 1


def render_view(slug: str) -> None:
    """The whole body of a view page."""
    view = ui.VIEWS[slug]
    ui.wait_warm()
    ui.show_notice()
    st.title(view.title)
    st.caption(view.blurb)
    if not ui.entries():
        ui.no_checkpoint_message()
        return
    fitting = [e for e in ui.entries() if e.kind in view.kinds]
    current = ui.entry_for(st.session_state.get(ui.K_CKPT))
    if not fitting:
        if current is not None:
            ui.wrong_kind_message(view, current)
        return
    if current is None or current.kind not in view.kinds:
        # arriving with a checkpoint this view cannot show: switch to the one Home links to, and say so
        # only when the user chose that checkpoint (a link, a pick); a default is replaced silently
        target = ui.entry_for(ui.default_ref(view.kinds)) or fitting[0]
        st.session_state[ui.K_CKPT] = target.ref
        explicit = st.session_state.get(ui.K_CKPT_EXPLICIT, False)
        st.session_state[ui.K_CKPT_EXPLICIT] = False  # the view's default now, not the user's pick
        if current is not None and explicit:
            st.info(f"{view.title} shows {view.family} models, not `{current.kind}`: showing "
                    f"**{target.name}** instead of {current.name}.", icon=":material/swap_horiz:")
    with st.sidebar:
        entry = ui.checkpoint_picker(kinds=view.kinds, only=True)
    text = ui.text_box(entry)
    t0 = time.perf_counter()
    with ui.guard("Tracing the text"):
        tokens = ui.check_text(entry, text)
        unknown = ui.unknown_tokens(entry, text)
        if unknown:
            shown = ", ".join(repr(u) for u in unknown[:10]) + (f", … ({len(unknown) - 10} more)"
                                                                 if len(unknown) > 10 else "")
            st.warning(f"{len(unknown)} character{'s' if len(unknown) > 1 else ''} not in this checkpoint's "
                       f"vocabulary ({shown}) read as the unknown token �.", icon=":material/help:")
        top = st.container()
        ctrl_cols = st.columns([3, 2])
        trace_opts = trace_options(slug, entry, ctrl_cols[1])
        tr = ui.trace_for(entry, text, **trace_opts)
        with ctrl_cols[0]:
            pos = ui.cursor_control(list(tr.labels))
        controls = controls_for(slug, tr, ctrl_cols[1])
        items = figure_list(slug, entry, text, trace_opts, tr, pos, controls)
        if not any(fig is not None for _, fig, _, _ in items):
            st.info("No figure of this view applies to this checkpoint.", icon=":material/info:")
        draw_figures(items, key_prefix=slug, stem=f"{entry.name}-{slug}")
        top.caption(f"`{entry.ref}` · {len(tokens)} tokens · cursor at {pos} "
                    f"('{tr.labels[pos]}') · {1000 * (time.perf_counter() - t0):.0f} ms")
        with st.expander("Link to this view", icon=":material/link:"):
            st.caption("Anyone who opens this link sees this checkpoint, text and token cursor (the address bar "
                       "holds the same link).")
            st.code(ui.share_link(slug), language=None, wrap_lines=True)
        with st.expander("Download this trace", icon=":material/download:"):
            st.caption("Every figure downloads as PNG from the camera icon in its toolbar. The trace holds "
                       "every array behind these figures.")
            ui.trace_downloads(tr, stem=f"{entry.name}-{slug}")
