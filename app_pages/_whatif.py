"""The view pages' "What if" panel: one intervention at the cursor (:mod:`geomlab.whatif.catalog`), a slider
for its size, and before against after: the next-token guesses and the effect along the text (KL divergence,
change in surprisal of the real next token). Off until switched on (its state, the intervention and its size,
is in the page's link as ``wi`` and ``wis``); a click on the effect chart moves the cursor, and the
intervention with it."""

from __future__ import annotations

from functools import partial
from typing import Any

import streamlit as st

from app_pages import _data as data
from app_pages import _state as state
from app_pages import _ui as ui
from app_pages._links import follow_click
from app_pages._messages import md_escape


def _outcome_charts(entry: Any, text: str, trace_opts: dict, labels: list[str], name: str, size: float,
                    pos: int, controls: dict) -> tuple:
    """``(guesses Chart, effect Chart, one-line summary)`` of the intervention, through the shared cache."""
    from geomlab.figures.whatif import whatif_effect, whatif_guesses
    from geomlab.trace import encode_text
    from geomlab.trace.tracing import MODEL_LOCK
    from geomlab.whatif import catalog

    def compute() -> tuple:
        ck = data.load_checkpoint(str(entry.path), entry.mtime)
        tokens = encode_text(ck.vocab, text)
        with MODEL_LOCK:
            out = catalog.apply(name, ck.model, tokens, pos, size, **controls)
        names = [md_escape(t) for t in getattr(ck.vocab, "tokens", [])] or [str(i) for i in range(out.before.shape[1])]
        kl = out.kl_bits()
        ds = out.surprisal_change_bits()
        line = (f"{md_escape(out.what)}: KL at the cursor {kl[pos]:.3f} bits, largest {kl.max():.3f} bits; the "
                f"real text's surprisal {ds[pos:].sum():+.2f} bits from the cursor on.")
        return whatif_guesses(out, pos, names), whatif_effect(out, labels), line

    key = ("whatif", str(entry.path), entry.mtime, data.KeyText(text), tuple(sorted(trace_opts.items())), name,
           round(float(size), 6), int(pos), tuple(sorted(controls.items())))
    return data.cached(key, compute, spinner="Running the model with the intervention…")


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
        ss[state.K_NOTICE] = (f"“What if” {ss[state.K_WI]!r} does not apply to {entry.name}: it offers "
                              f"{', '.join(names)}.")
        ss[state.K_WI] = None
    ss["w_whatif_on"] = ss.get(state.K_WI) is not None

    def switch() -> None:
        ss[state.K_WI] = names[0] if ss.get("w_whatif_on") else None
        ss[state.K_WI_SIZE] = None

    if not st.toggle("What if: intervene at the cursor", key="w_whatif_on", on_change=switch,
                     help="Change one value of the forward pass at the cursor (a state moved along its group, a "
                          "plane along the Grassmannian, an energy descent's steps, a head ablated) and see what "
                          "the model predicts then."):
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
        cols[0].markdown(f"**{spec.label.capitalize()}**")
    size = ss.get(state.K_WI_SIZE)
    if size is None or not spec.lo <= size <= spec.hi:
        if size is not None:
            ss[state.K_NOTICE] = f"The link's what-if size {size} is outside {spec.lo}..{spec.hi}: reset."
        size = float(spec.default if spec.name != "energy_steps" else catalog.neutral_size(spec.name, ck.model) + 2)
    ss[state.K_WI_SIZE] = ss["w_whatif_size"] = float(min(max(size, spec.lo), spec.hi))
    cols[1].slider(f"{spec.size_label} ({spec.unit})" if spec.unit else spec.size_label, float(spec.lo),
                   float(spec.hi), step=float(spec.step), key="w_whatif_size", help=spec.help,
                   on_change=state.copy, args=("w_whatif_size", state.K_WI_SIZE))
    size = float(ss[state.K_WI_SIZE])
    opts = {k: controls.get(k) for k in spec.takes}
    if opts.get("head") is None and "head" in spec.takes:
        opts["head"] = 0  # "mean over heads" is not a head: the first one is ablated
    try:
        guesses, effect, line = _outcome_charts(entry, text, trace_opts, list(tr.labels), spec.name, size, pos,
                                                opts)
    except ValueError as exc:
        st.info(f"What if: {md_escape(exc)}", icon=":material/info:")
        return
    st.caption(line)
    left, right = st.columns([2, 3], gap="medium")
    with left:
        ui.chart(guesses.figure, key=f"{key_prefix}-whatif-guesses", filename=f"{stem}-whatif-guesses", narrow=True)
    with right:
        key = f"{key_prefix}-whatif-effect"
        ui.chart(effect.figure, key=key, filename=f"{stem}-whatif-effect", narrow=True,
                 on_click=partial(follow_click, key, "position", tr))
        st.caption(effect.caption)
