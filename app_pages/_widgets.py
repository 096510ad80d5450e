"""Widgets of the app: checkpoint picker, text box, token cursor, the views' controls, charts and
trace downloads. Every widget is bound to a state key of ``app_pages/_state.py`` (seeded before it is drawn,
copied back on change), so values survive page switches."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app_pages import _data as data
from app_pages import _relayout as relayout
from app_pages._live_chart import live_chart
from app_pages._state import (K_BLOCK, K_CKPT, K_HEAD, K_INT_DEFAULTS, K_LAYER, K_POS, K_SLOT, K_SUBSTEP, K_TEXT,
                              K_TEXT_NEW, URL_DEFAULTS, URL_KEYS, set_text,
                              copy as _copy, seed as _seed)
from geomlab.checkpoints import catalog
from geomlab.teach import views

entries, entry_for, default_text_for, max_chars = data.entries, data.entry_for, data.default_text_for, data.max_chars


def checkpoint_picker(where: Any = None, key: str = K_CKPT, label: str = "Checkpoint",
                      kinds: tuple[str, ...] | None = None, help: str | None = None,
                      only: bool = False) -> catalog.CheckpointEntry | None:
    """Selectbox over the catalog bound to state ``key``; checkpoints of ``kinds`` are listed first (or,
    with ``only``, exclusively). Returns the chosen entry or None when nothing can be listed."""
    where = where or st.sidebar
    all_entries = entries()
    if kinds and only:
        all_entries = [e for e in all_entries if e.kind in kinds]
    if not all_entries:
        return None
    if kinds:
        all_entries = ([e for e in all_entries if e.kind in kinds]
                       + [e for e in all_entries if e.kind not in kinds])
    refs = [e.ref for e in all_entries]
    if st.session_state.get(key) not in refs:
        st.session_state[key] = refs[0]
    by_ref = {e.ref: e for e in all_entries}
    wkey = "w_" + key
    _seed(wkey, key)

    shorts = short_labels(all_entries)

    def label_of(ref: str) -> str:
        e = by_ref[ref]
        mark = "" if not kinds or e.kind in kinds else " (not for this view)"
        src = "" if e.source == "bundled" else " · yours"
        return f"{shorts[ref]}{src}{mark}"

    where.selectbox(label, refs, format_func=label_of, key=wkey, on_change=_copy, args=(wkey, key),
                    help=help or "Bundled checkpoints first, then yours (newest first). Upload or train "
                                 "more on the Checkpoints and Train live pages.")
    chosen = by_ref[st.session_state[key]]
    from app_pages._messages import md_escape

    # the full title (kind · group · params · corpus) under the short option; name and card are the
    # checkpoint's own (an upload's): shown literally
    where.caption(md_escape(chosen.title))
    return chosen


def short_labels(found: list[catalog.CheckpointEntry]) -> dict[str, str]:
    """``ref -> label`` short enough for the sidebar select: the name without a trailing ``-<corpus>``
    (the caption under the select names it) plus the parameter count, e.g. ``osmformer-o-linear · 88k``;
    names are kept whole where dropping the corpus would make two labels equal. Design choice."""
    def params(e: catalog.CheckpointEntry) -> str:
        n = e.params
        if not n:
            return ""
        return " · " + (f"{n / 1e6:.1f}M" if n >= 1_000_000 else f"{n / 1e3:.0f}k" if n >= 1_000 else str(n))

    def stem(e: catalog.CheckpointEntry) -> str:
        suffix = f"-{e.corpus}"
        return e.name[:-len(suffix)] if e.corpus and e.name.endswith(suffix) and e.name != suffix else e.name

    stems = [stem(e) for e in found]
    out = {e.ref: (s if stems.count(s) == 1 else e.name) + params(e) for e, s in zip(found, stems)}
    # two checkpoints of one name in different folders (a run and its upload): the folder tells them apart
    labels = list(out.values())
    for e in found:
        if labels.count(out[e.ref]) > 1 and "/" in e.ref:
            out[e.ref] += f" · {e.ref.rsplit('/', 1)[0]}"
    return out


def text_box(entry: catalog.CheckpointEntry | None, where: Any = None) -> str:
    """Text area bound to the shared text; filled with the checkpoint's default text when unset."""
    where = where or st.sidebar
    if st.session_state.get(K_TEXT) is None:
        st.session_state[K_TEXT] = default_text_for(entry)
    _seed("w_text", K_TEXT)
    # no max_chars: Streamlit drops a paste longer than it without a word; a long text is offered a cut instead
    where.text_area("Text", key="w_text", on_change=_copy, args=("w_text", K_TEXT), height=110,
                    help=f"The text every view traces (at most {max_chars():,} characters). "
                         "Press Ctrl+Enter or click outside to apply.")

    def reset() -> None:
        set_text(default_text_for(entry_for(st.session_state.get(K_CKPT))))

    where.button("Use the default text", on_click=reset, key="w_text_reset", type="tertiary")
    from geomlab.data.vocab import normalize_text

    # the one normalisation of every text (byte-order mark dropped, \r\n and \r as \n), as the CLI reads it
    st.session_state[K_TEXT] = normalize_text(st.session_state[K_TEXT])
    return st.session_state[K_TEXT]


def too_long(text: str) -> bool:
    """Whether ``text`` is over the views' limit; if so, the page says so in one place, with the button that
    keeps the first :func:`max_chars` characters (the text is kept whole until then: a pasted text is never
    cut without a word). Returns True when the page should draw nothing else. Design choice."""
    limit = max_chars()
    if len(text) <= limit:
        return False
    st.error(f"The text has {len(text):,} characters; the views trace at most {limit:,}. Shorten it in the "
             "text box, or keep its first characters:", icon=":material/content_cut:")
    if st.button(f"Keep the first {limit:,} characters", key="w_text_cut", type="primary"):
        set_text(text[:limit])
        st.rerun(scope="app")  # the sidebar's text box shows the cut text too
    return True


def token_label(tok: str) -> str:
    """A readable label for a token (spaces and newlines made visible)."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(tok, tok)


def cursor_control(tokens: list[str], where: Any = None, trace: Any = None, notes: Any = None) -> int:
    """Token cursor slider bound to ``gl_pos``; returns the position. When no position was chosen (a fresh
    session, a link without ``pos``) the cursor starts at :func:`geomlab.trace.predictions.default_cursor` of
    ``trace`` (0 without one); a position past the end of the text is moved to the last token, with a
    notice saying so when the position came from a link (not when the text was just changed here), in
    ``notes`` (default: with the slider)."""
    where = where or st
    notes = notes or where
    n = len(tokens)
    pos = st.session_state.get(K_POS)
    text_new = st.session_state.pop(K_TEXT_NEW, False)
    if pos is None:
        from geomlab.trace.predictions import default_cursor

        pos = default_cursor(trace) if trace is not None and trace.n_positions == n else 0
    elif int(pos) > n - 1 and not text_new:
        notes.warning(f"The cursor position {int(pos)} is past the end of this text ({n} token"
                      f"{'s' if n != 1 else ''}): showing the last position, {n - 1}, instead.",
                      icon=":material/last_page:")
    pos = max(0, min(int(pos), n - 1))
    st.session_state[K_POS] = pos
    if n == 1:
        where.caption("Token cursor: position 0 (the text has one token).")
        return 0
    _seed("w_pos", K_POS)
    where.select_slider(
        "Token cursor", options=list(range(n)), key="w_pos", on_change=_copy, args=("w_pos", K_POS),
        format_func=lambda i: f"{i} · {token_label(tokens[i])}",
        help="Choose a position: it is highlighted in every figure on the page, and kept when you "
             "switch pages.")
    return st.session_state[K_POS]


def int_control(label: str, state_key: str, lo: int, hi: int, default: int, where: Any = None,
                help: str | None = None, notes: Any = None) -> int:
    """An integer slider bound to a shared state key (e.g. the layer), clamped to ``[lo, hi]``; a value from
    outside the range (a link's ``T=100000``, a layer chosen for a model the next one lacks) is moved to the
    nearest end with a notice saying so, never silently (with one value only, no slider is drawn and the key is
    cleared). A value nobody chose (the last model's ``default``, not since moved by the user:
    :func:`app_pages._state.copy` forgets it) follows the next model's default instead, without a notice.
    ``notes``: where that notice goes (default: with the slider)."""
    where = where or st
    notes = notes or where
    v = st.session_state.get(state_key)
    defaults = st.session_state.setdefault(K_INT_DEFAULTS, {})
    if v is not None and defaults.get(state_key) == v:
        v = None  # still the default it was given: this model's default, not a notice about a choice
    if v is not None and not lo <= int(v) <= hi:
        near = max(lo, min(int(v), hi))
        notes.warning(f"{label} = {int(v)} is not available: this model has only {label.lower()} {lo}, shown "
                      "here." if hi <= lo
                      else f"{label} = {int(v)} is outside this model's range {lo}–{hi}: showing {near} instead.",
                      icon=":material/tune:")
    if hi <= lo:  # one value only: nobody's choice (kept out of the URL), the next model opens on its default
        st.session_state[state_key] = None
        return lo
    if v is None:
        v = defaults[state_key] = default
    else:
        v = max(lo, min(int(v), hi))
    st.session_state[state_key] = v
    wkey = "w_" + state_key
    _seed(wkey, state_key)
    where.slider(label, lo, hi, key=wkey, on_change=_copy, args=(wkey, state_key), help=help)
    return st.session_state[state_key]

#: control name -> (session key, widget label, widget kind, help) of the views' choice controls
CONTROL_WIDGETS = {
    "head": (K_HEAD, "Head", "select", None),
    "substep": (K_SUBSTEP, "Update", "select", "The update the generator heatmap shows (attention or grounding)."),
    "slot": (K_SLOT, "Offset slot", "select", "Which pair (t, t − Δ) spans the planes shown."),
    "block": (K_BLOCK, "Sub-block", "select", "The sub-block the token heatmap shows (attention or MLP)."),
}


def view_controls(slug: str, tr: Any, where: Any, used: set[str] | None = None, notes: Any = None) -> dict[str, Any]:
    """Draw the controls view ``slug`` needs for ``tr`` (from :mod:`geomlab.teach.views`: layer, head, substep, slot,
    block; only those with a choice to make) and return their values, the view's defaults for the others.
    ``used``: the controls the figures on screen take (a control no shown figure takes is not drawn, e.g.
    the generator heatmap's substep while that figure is under "More figures"); None draws them all. The
    layer is always drawn (it is shared by the pages). ``where``: one container, or a list of containers
    (the columns of a controls row) that the drawn widgets take in turn, the last one holding the rest.
    ``notes``: where the notices about a link's values go (a value dropped or moved); default: with the
    widget concerned."""
    slots = list(where) if isinstance(where, (list, tuple)) else [where]
    taken = [0]

    def slot() -> Any:
        """The container of the next widget (a message about a dropped value goes with it)."""
        here = slots[min(taken[0], len(slots) - 1)]
        taken[0] += 1
        return here

    where = slots[-1]  # messages about controls that draw no widget
    opts = views.control_options(slug, tr)
    values = views.default_controls(slug, tr)
    for name in views.VIEWS[slug].controls:
        if name == "layer":
            L = views.n_layers(tr)
            # one layer: no slider, but a link's layer=5 is still named and dropped (int_control)
            values["layer"] = int_control("Layer", K_LAYER, 0, L - 1, values["layer"],
                                          where=slot() if L > 1 else where,
                                          help="Which layer's states / maps to show (0 = first).", notes=notes)
            continue
        if name not in CONTROL_WIDGETS:
            continue
        if used is not None and name not in used:  # not drawn (its figure is under "More figures"), yet a
            key, label = CONTROL_WIDGETS[name][:2]  # link's substep=9 is named and dropped, not kept
            cur = st.session_state.get(key)
            store = [-1 if v is None else v for v in opts.get(name, [])]
            if cur is not None and cur != URL_DEFAULTS.get(key) and cur not in store and cur != 0:
                url, choices = URL_KEYS.get(key, key), ", ".join(str(c) for c in store) or "it has only one"
                (notes or where).warning(f"{label} {cur} (the link's `{url}={cur}`) is not one of this model's "
                                         f"choices ({choices}); dropped.", icon=":material/tune:")
                st.session_state[key] = URL_DEFAULTS.get(key)
            continue
        if name not in opts:  # one choice only, so no widget: a link's slot=3 is still not kept silently
            key, label = CONTROL_WIDGETS[name][:2]
            cur = st.session_state.get(key)
            if cur not in (None, 0, URL_DEFAULTS.get(key)):  # 0: the one head, slot or update there is
                (notes or where).warning(f"{label} {cur} is not one of this model's choices: it has only one, "
                                         "shown here.", icon=":material/tune:")
                st.session_state[key] = URL_DEFAULTS.get(key)
            continue
        key, label, kind, help_ = CONTROL_WIDGETS[name]
        where = slot()
        options = opts[name]
        store = [-1 if v is None else v for v in options]  # None (mean over heads) stored as -1
        cur = st.session_state.get(key)
        wkey = "w_" + key
        st.session_state[wkey] = cur if cur in store else store[0]
        now = dict(values)

        def fmt(v: Any, name: str = name, now: dict = now) -> str:
            return views.control_label(name, None if v == -1 and name == "head" else v, tr, now)

        if cur is not None and cur not in store:  # a link's head=9, a slot the last model had: never silently
            (notes or where).warning(f"{label} {cur} is not one of this model's choices: showing "
                                     f"{fmt(store[0])} instead.", icon=":material/tune:")

        if kind == "radio":
            where.radio(label, store, key=wkey, horizontal=True, format_func=fmt, on_change=_copy,
                        args=(wkey, key), help=help_)
        else:
            where.selectbox(label, store, key=wkey, format_func=fmt, on_change=_copy, args=(wkey, key),
                            help=help_)
        st.session_state[key] = st.session_state[wkey]
        v = st.session_state[key]
        values[name] = None if (name == "head" and v == -1) else v
    return values


def steps_control(entry: catalog.CheckpointEntry, state_key: str, where: Any, label: str | None = None,
                  help: str | None = None, notes: Any = None) -> dict[str, Any]:
    """The CEM inference-steps slider for ``entry`` (range from :func:`geomlab.teach.views.steps_range`); returns
    the trace options: ``{}`` at the trained T, else ``{"steps": T}``. ``notes``: as :func:`int_control`'s."""
    cfg = entry.model_config
    trained = views.trained_steps(cfg)
    lo, hi = views.steps_range(cfg)
    T = int_control(label or "Steps T", state_key, lo, hi, trained, where=where, notes=notes,
                    help=help or f"Recursion steps T at inference. The model was trained with T = {trained}. More steps should keep lowering "
                                 "the energy (test-time recursion); the figure flags any step where it rose.")
    return {} if T == trained else {"steps": int(T)}


PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}
#: On a phone the toolbar keeps only its PNG download (the zoom and pan buttons, always shown on a touch
#: screen, covered the figure's title).
PHONE_REMOVE = ["zoom2d", "pan2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "resetScale2d", "zoom3d", "pan3d",
                "orbitRotation", "tableRotation", "resetCameraDefault3d", "resetCameraLastSave3d", "hoverClosest3d",
                "hoverClosestCartesian", "hoverCompareCartesian", "toggleSpikelines"]


def is_phone() -> bool:
    """Whether this session's browser says it is a phone (``Mobi`` in its User-Agent, the usual test; a
    narrow desktop window is not one). False without a browser (tests, bare mode). Design choice."""
    try:
        return "Mobi" in (st.context.headers.get("User-Agent") or "")
    except Exception:  # noqa: BLE001 - no request context
        return False


def chart(fig: go.Figure, key: str, filename: str = "geomlab", narrow: bool = False,
          width: int | None = None, on_click: Any = None) -> dict | None:
    """Draw a Plotly figure at the container's width (at most ``width`` px when given) with the PNG download
    button in its toolbar (``narrow``: it sits in a half-width column). On a phone, a copy laid out for a
    narrow screen (:func:`app_pages._relayout.phone_copy`) and a toolbar without the zoom and pan buttons.

    The chart is a :func:`app_pages._live_chart.live_chart`: a rerun that changes the figure updates it in
    place. Returns the click on it since the previous rerun (``x``, ``y``, ``z`` where the trace has one,
    ``curve``, ``point``, ``customdata``), else None. ``on_click``: called before the rerun a click starts
    (:func:`app_pages._live_chart.clicked` reads the click there)."""
    phone = is_phone()
    lay = fig.layout.to_plotly_json() if narrow or phone else {}  # (a desktop's full-width chart needs none)
    if narrow and not phone and relayout.has_scene(lay):
        # half-width 3-D figures: legend under the scene so it does not cover the colour bar (a phone's
        # columns stand under each other at the full width, its colour bar under the scene: left as it was)
        fig = relayout.relaid(fig, [{"legend": {"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0}}])
    cfg = json.loads(json.dumps(PLOTLY_CONFIG))
    cfg["toImageButtonOptions"]["filename"] = filename
    if phone:
        fig = relayout.phone_copy(fig, lay)
        cfg["modeBarButtonsToRemove"] = cfg["modeBarButtonsToRemove"] + PHONE_REMOVE
    return live_chart(fig, key=key, config=cfg, width=width or "stretch", on_click=on_click)


def trace_downloads(tr: Any, stem: str, where: Any = None, cursor: int | None = None) -> None:
    """Two download buttons: the whole trace as compressed ``.npz`` (``geomlab.trace.load_trace`` reads it
    back and reproduces the view) and strict JSON of the 256 positions around the cursor. Both are built
    only when clicked."""
    where = where or st
    from geomlab import trace as trace_mod

    row = where.container(horizontal=True)  # one element for the row: no columns to re-render on each move
    row.download_button("Trace (.npz)", lambda: trace_mod.trace_bytes(tr), file_name=f"{stem}.trace.npz",
                        mime="application/octet-stream", icon=":material/download:", on_click="ignore",
                        key=f"dl-npz-{stem}",
                        help="Load it back with geomlab.trace.load_trace: it reproduces this view exactly.")
    start, stop = data.json_window(tr.n_positions, cursor)
    row.download_button("Trace (.json)", lambda: data.trace_json(tr, cursor), file_name=f"{stem}.trace.json",
                        mime="application/json", icon=":material/data_object:", on_click="ignore",
                        key=f"dl-json-{stem}",
                        help=f"Positions {start}–{stop - 1} around the cursor, every array cut to them; "
                             "non-finite values as null.")
