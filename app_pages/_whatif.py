"""The view pages' "What if" panel: one intervention at the cursor (:mod:`geomlab.whatif.catalog`), a slider
for its size, and before against after: the guesses (next token, or a word problem's running product), the
effect along the text (KL divergence, change in surprisal of what really follows) and the geometry it changed
drawn over the original. Off until switched on (its state, the intervention and its size, is in the page's
link as ``wi`` and ``wis``); a click on the effect chart moves the cursor, and the intervention with it."""

from __future__ import annotations

from functools import partial
from typing import Any

import streamlit as st

from app_pages import _data as data
from app_pages import _state as state
from app_pages import _ui as ui
from app_pages._links import follow_click
from app_pages._messages import md_escape


def _outcome_charts(entry: Any, text: str, trace_opts: dict, name: str, size: float, pos: int,
                    controls: dict, labels: list[str]) -> tuple:
    """``(guesses Chart, effect Chart, geometry Chart or None, one-line summary)`` of the intervention, through
    the shared cache. The effect chart names the text's positions by ``labels``, the page's trace's
    (:func:`geomlab.trace.position_labels`: ``é→�`` where the model read the unknown token). The charts'
    text is plain (a token as :func:`geomlab.trace.visible` shows it); the summary is markdown."""
    from geomlab.figures import FigureError
    from geomlab.figures.whatif import whatif_effect, whatif_geometry, whatif_guesses
    from geomlab.trace import encode_text, visible
    from geomlab.trace.tracing import MODEL_LOCK
    from geomlab.whatif import catalog

    def compute() -> tuple:
        ck = data.load_checkpoint(str(entry.path), entry.mtime)
        tokens = encode_text(ck.vocab, text).reshape(-1)
        with MODEL_LOCK:
            out = catalog.apply(name, ck.model, tokens, pos, size, **controls)
        out = out.scored_on(entry.task)
        names = [visible(t) for t in getattr(ck.vocab, "tokens", [])] or [str(i) for i in range(out.before.shape[1])]
        line = md_escape(out.summary(pos))
        try:
            ghost = whatif_geometry(out, layer=int(controls.get("layer") or 0))
        except FigureError:
            ghost = None
        return whatif_guesses(out, pos, names, label=labels[pos]), whatif_effect(out, labels, cursor=pos), ghost, line

    key = ("whatif", str(entry.path), entry.mtime, data.KeyText(text), tuple(sorted(trace_opts.items())), name,
           round(float(size), 6), int(pos), tuple(sorted(controls.items())))
    return data.cached(key, compute, spinner="Running the model with the intervention…")


PAGE_KNOB = {"attention": ("ablate_head",), "energy": ("energy_steps",), "planes": ("rotate_plane",),
             "trajectories": ("steer",), "tangents": ("steer",)}
"""The intervention a view page's switch opens on, where the checkpoint offers it (design choice)."""


def whatif_panel(entry: Any, text: str, trace_opts: dict, tr: Any, pos: int, controls: dict,
                 key_prefix: str, stem: str) -> None:
    """The "What if" switch and, while it is on, the panel (see the module docstring)."""
    from geomlab.whatif import catalog

    ss = st.session_state
    ck = data.load_checkpoint(str(entry.path), entry.mtime)
    choices = catalog.available(ck.model)
    if not choices or getattr(ck, "vocab", None) is None:
        return
    names = [c.name for c in choices]
    if ss.get(state.K_WI) is not None and ss[state.K_WI] not in names:
        st.info(f"What if: '{md_escape(ss[state.K_WI])}' is not an intervention for {md_escape(entry.name)}; it "
                f"offers {', '.join(names)}. Dropped.", icon=":material/tune:")
        ss[state.K_WI], ss[state.K_WI_SIZE] = None, None
    ss["w_whatif_on"] = ss.get(state.K_WI) is not None

    # the knob that acts on what the page shows opens first (the Attention page: a head), else the first
    first = next((n for n in PAGE_KNOB.get(key_prefix, ()) if n in names), names[0])

    def switch() -> None:
        ss[state.K_WI] = first if ss.get("w_whatif_on") else None
        ss[state.K_WI_SIZE] = None

    if not st.toggle("What if: intervene in the model", key="w_whatif_on", on_change=switch,
                     help="Change one value of the forward pass (at the cursor: a state moved along its group, a "
                          "plane along the Grassmannian; in a whole layer: an energy descent's steps, a head "
                          "ablated) and see what the model predicts then."):
        return
    spec = catalog.INTERVENTIONS[ss[state.K_WI]]
    cols = st.columns([2, 3], vertical_alignment="bottom")
    if len(choices) > 1:
        ss["w_whatif"] = spec.name
        cols[0].selectbox("Intervention", names, key="w_whatif", format_func=lambda n: catalog.INTERVENTIONS[n].label,
                          on_change=lambda: (ss.__setitem__(state.K_WI, ss["w_whatif"]),
                                             ss.__setitem__(state.K_WI_SIZE, None)))
        spec = catalog.INTERVENTIONS[ss[state.K_WI]]
    else:
        cols[0].markdown(f"**{spec.label[:1].upper() + spec.label[1:]}**")
    size = ss.get(state.K_WI_SIZE)
    if size is None:
        size = float(spec.default if spec.name != "energy_steps" else catalog.neutral_size(spec.name, ck.model) + 2)
    elif not spec.lo <= size <= spec.hi:  # as the other controls do: the nearest end, said so
        near = min(max(size, spec.lo), spec.hi)
        st.warning(f"What if: size {size:g} is outside {spec.lo:g}..{spec.hi:g}; showing {near:g} instead.",
                   icon=":material/tune:")
        size = near
    ss[state.K_WI_SIZE] = ss["w_whatif_size"] = float(min(max(size, spec.lo), spec.hi))
    if spec.hi - spec.lo == spec.step:  # two sizes, off and on: a switch
        ss["w_whatif_flag"] = ss[state.K_WI_SIZE] == spec.hi
        cols[1].toggle(spec.size_label, key="w_whatif_flag", help=spec.help, on_change=lambda: ss.__setitem__(
            state.K_WI_SIZE, float(spec.hi if ss["w_whatif_flag"] else spec.lo)))
    else:
        cols[1].slider(f"{spec.size_label} ({spec.unit})" if spec.unit else spec.size_label, float(spec.lo),
                       float(spec.hi), step=float(spec.step), key="w_whatif_size", help=spec.help,
                       format="%d" if float(spec.step).is_integer() else "%.2f",
                       on_change=state.copy, args=("w_whatif_size", state.K_WI_SIZE))
    size = float(ss[state.K_WI_SIZE])
    opts = {k: controls.get(k) for k in spec.takes}
    if opts.get("head") is None and "head" in spec.takes:
        opts["head"] = 0  # "mean over heads" is not a head: the first one is ablated
        st.caption("What if: the page shows the mean over heads, which is not a head to ablate: head 0 is "
                   "ablated. Choose a head in the page's controls to ablate another.")
    try:
        guesses, effect, ghost, line = _outcome_charts(entry, text, trace_opts, spec.name, size, pos, opts,
                                                       list(tr.labels))
    except ValueError as exc:
        st.info(f"What if: {md_escape(exc)}", icon=":material/info:")
        return
    st.caption(line)
    left, right = st.columns(2, gap="medium")
    with left:
        ui.chart(guesses.figure, key=f"{key_prefix}-whatif-guesses", filename=f"{stem}-whatif-guesses", narrow=True)
    with right:
        key = f"{key_prefix}-whatif-effect"
        ui.chart(effect.figure, key=key, filename=f"{stem}-whatif-effect", narrow=True,
                 on_click=partial(follow_click, key, "position", tr))
        st.caption(effect.caption)
    if ghost is not None:
        with left:
            ui.chart(ghost.figure, key=f"{key_prefix}-whatif-geometry", filename=f"{stem}-whatif-geometry",
                     narrow=True)
            st.caption(ghost.caption)


def _swap(ck: Any, text: str, pos: int, stand_in: str) -> tuple:
    """``(clean ids (T,), the stand-in's id)`` of the sweep's swap; ``ValueError`` (one line) for a stand-in
    that is empty, outside the vocabulary, more than one token or the cursor's own token."""
    from geomlab.data.vocab import unknown_symbols_error, unknown_tokens
    from geomlab.trace import encode_text
    from geomlab.trace.tracing import from_visible

    if not stand_in:
        raise ValueError("type the token to put in the cursor's place")
    typed = from_visible(stand_in, ck.vocab)  # '␣' as the charts show a space
    if unknown_tokens(ck.vocab, typed):  # it would read as the unknown token, not as typed
        raise unknown_symbols_error(ck.vocab, unknown_tokens(ck.vocab, typed))
    ids = encode_text(ck.vocab, typed).reshape(-1)
    if ids.numel() != 1:
        raise ValueError(f"{stand_in!r} is {ids.numel()} tokens for this checkpoint: give one token")
    clean = encode_text(ck.vocab, text).reshape(-1)
    if int(ids[0]) == int(clean[pos]):
        raise ValueError(f"{stand_in!r} is the cursor's own token: type a different one")
    return clean, int(ids[0])


def _default_target(entry: Any, text: str, pos: int, stand_in: str) -> Any:
    """The sweep's target when none was chosen (:func:`geomlab.whatif.patching.choose_target`, a
    :class:`~geomlab.whatif.patching.Target`), through the shared cache; ``ValueError`` as :func:`_swap`."""
    from geomlab.trace.tracing import MODEL_LOCK
    from geomlab.whatif.patching import choose_target

    def compute() -> Any:
        ck = data.load_checkpoint(str(entry.path), entry.mtime)
        clean, stand_in_id = _swap(ck, text, pos, stand_in)
        with MODEL_LOCK:
            return choose_target(ck.model, clean, pos, stand_in_id)

    key = ("patching-target", str(entry.path), entry.mtime, data.KeyText(text), int(pos), stand_in)
    return data.cached(key, compute, spinner="Choosing where to read the prediction…")


def _sweep_chart(entry: Any, text: str, pos: int, stand_in: str, target: int, labels: list[str]) -> tuple:
    """``(patching Chart, summary line, whether the swap barely changes the prediction)`` of the sweep,
    through the shared cache; ``labels`` name the text's positions (the page's trace's)."""
    from geomlab.figures.whatif import patching_heatmap
    from geomlab.trace.tracing import MODEL_LOCK, visible
    from geomlab.whatif.patching import SWEEP_SPAN, token_swap_sweep

    def compute() -> tuple:
        ck = data.load_checkpoint(str(entry.path), entry.mtime)
        clean, stand_in_id = _swap(ck, text, pos, stand_in)
        with MODEL_LOCK:
            sweep = token_swap_sweep(ck.model, clean, pos, stand_in_id, target)
        start = int(sweep.positions[0])
        names = [md_escape(visible(t)) for t in getattr(ck.vocab, "tokens", [])]
        line = (f"The cursor's token {md_escape(labels[pos])!r} replaced by {md_escape(stand_in)!r} "
                f"({sweep.runs} patched runs in {sweep.seconds:.1f} s"
                + (f", the {SWEEP_SPAN} positions ending at the target" if start else "")
                + f"): {sweep.describe(names)}.")
        chart = patching_heatmap(sweep, labels, names, recovered=not sweep.small(), swapped=pos)
        return chart, line, sweep.barely_changes

    key = ("patching", str(entry.path), entry.mtime, data.KeyText(text), int(pos), stand_in, int(target))
    return data.cached(key, compute, spinner="Patching every layer and position…")


def patching_section(entry: Any, text: str, tr: Any, pos: int, key_prefix: str, stem: str) -> None:
    """The patching sweep switch and, while on, the sweep: the cursor's token replaced by another one (the
    corrupted text), every (layer, position) of the corrupted run patched from the clean text, and how much
    of the clean prediction at a later position each patch restores (a layers x positions heatmap)."""
    from geomlab.trace import visible
    from geomlab.whatif.patching import SWEEP_SPAN, default_stand_in

    ss = st.session_state
    ck = data.load_checkpoint(str(entry.path), entry.mtime)
    n = int(tr.n_positions)
    if getattr(ck, "vocab", None) is None:
        return
    label = "Patching: where does the model carry the cursor's token?"
    if pos >= n - 1:  # nothing follows to read: the switch stays in view, off, and says why
        st.toggle(label, value=False, disabled=True, key="w_patch_end",
                  help="Patching reads the prediction at a position after the cursor: move the cursor off the "
                       "last token.")
        return
    ss["w_patch_on"] = ss.get(state.K_PATCH) is not None

    def switch() -> None:  # the stand-in as the charts name it (a space as ␣), unlike the cursor's own token
        tokens = list(getattr(ck.vocab, "tokens", []))
        own = int(tr.tokens[pos])
        current = tokens[own] if 0 <= own < len(tokens) else None
        ss[state.K_PATCH] = visible(default_stand_in(tokens, current)) if ss.get("w_patch_on") else None
        ss[state.K_PATCH_AT] = None

    if not st.toggle(label, key="w_patch_on",
                     on_change=switch, help="Replace the token at the cursor, then put back one layer's state at "
                                            "one position from the real text at a time: the cells that restore "
                                            "the prediction further on are where the token's information lives."):
        return
    cols = st.columns([1, 2], vertical_alignment="bottom")
    ss["w_patch"] = ss[state.K_PATCH]
    cols[0].text_input("Put in its place", key="w_patch", max_chars=32, on_change=state.copy,
                       args=("w_patch", state.K_PATCH), help="One token of this checkpoint's vocabulary (a space "
                       "may be typed as ␣ and a line break as ↵, as the charts show them).")
    hi = min(n - 1, pos + SWEEP_SPAN - 1)  # as far as the sweep's window reaches, as geomlab whatif allows
    at = ss.get(state.K_PATCH_AT)  # None until the slider moves: the default target, chosen for this swap
    try:
        chosen = None if at is not None else _default_target(entry, text, pos, ss[state.K_PATCH])
        if chosen is None:
            want = int(at)
            at = min(max(want, pos + 1), hi)
            if want != at:
                st.caption(f"Patching: position {want} is outside {pos + 1}–{hi} (after the cursor, at most "
                           f"{SWEEP_SPAN - 1} on); reading at {at}.")
                ss[state.K_PATCH_AT] = at
        else:
            at = chosen.position
        ss["w_patch_at"] = at
        if hi > pos + 1:
            cols[1].slider("Read the prediction at position", pos + 1, hi, key="w_patch_at", on_change=state.copy,
                           args=("w_patch_at", state.K_PATCH_AT))
        chart, line, barely = _sweep_chart(entry, text, pos, ss[state.K_PATCH], at, list(tr.labels))
    except ValueError as exc:
        st.info(f"Patching: {md_escape(exc)}", icon=":material/info:")
        return
    if chosen is not None:  # how the default target was chosen, after the line (and its warning, if any)
        line = f"{line} The {chosen.describe()}" + ("; move the slider to read elsewhere." if hi > pos + 1 else ".")
    if barely:  # the line ends with the warning (Sweep.describe): shown as one
        st.warning(line, icon=":material/warning:")
    else:
        st.caption(line)
    key = f"{key_prefix}-patching"
    ui.chart(chart.figure, key=key, filename=f"{stem}-patching", on_click=partial(follow_click, key, "position", tr))
    st.caption(chart.caption)
