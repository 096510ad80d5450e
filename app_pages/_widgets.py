"""Widgets of the app: checkpoint picker, text box, token cursor, the views' controls, charts and
trace downloads. Every widget is bound to a state key of ``app_pages/_state.py`` (seeded before it is drawn,
copied back on change), so values survive page switches."""

from __future__ import annotations

import copy

import json
import math
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from app_pages import _data as data
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
    limit = max_chars()
    if len(st.session_state[K_TEXT]) > limit:
        def cut() -> None:
            set_text(st.session_state[K_TEXT][:limit])

        where.warning(f"The text has {len(st.session_state[K_TEXT]):,} characters; views trace at most "
                      f"{limit:,}.", icon=":material/content_cut:")
        where.button(f"Keep the first {limit:,} characters", on_click=cut, key="w_text_cut", type="secondary")

    def reset() -> None:
        set_text(default_text_for(entry_for(st.session_state.get(K_CKPT))))

    where.button("Use the default text", on_click=reset, key="w_text_reset", type="tertiary")
    from geomlab.data.vocab import normalize_text

    # the one normalisation of every text (byte-order mark dropped, \r\n and \r as \n), as the CLI reads it
    st.session_state[K_TEXT] = normalize_text(st.session_state[K_TEXT])
    return st.session_state[K_TEXT]


def token_label(tok: str) -> str:
    """A readable label for a token (spaces and newlines made visible)."""
    return {" ": "␣", "\n": "⏎", "\t": "⇥"}.get(tok, tok)


def cursor_control(tokens: list[str], where: Any = None, trace: Any = None) -> int:
    """Token cursor slider bound to ``gl_pos``; returns the position. When no position was chosen (a fresh
    session, a link without ``pos``) the cursor starts at :func:`geomlab.trace.predictions.default_cursor` of
    ``trace`` (0 without one); a position past the end of the text is moved to the last token, with a
    notice saying so when the position came from a link (not when the text was just changed here)."""
    where = where or st
    n = len(tokens)
    pos = st.session_state.get(K_POS)
    text_new = st.session_state.pop(K_TEXT_NEW, False)
    if pos is None:
        from geomlab.trace.predictions import default_cursor

        pos = default_cursor(trace) if trace is not None and trace.n_positions == n else 0
    elif int(pos) > n - 1 and not text_new:
        where.warning(f"The cursor position {int(pos)} is past the end of this text ({n} token"
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
                help: str | None = None) -> int:
    """An integer slider bound to a shared state key (e.g. the layer), clamped to ``[lo, hi]``; a value from
    outside the range (a link's ``T=100000``, a layer chosen for a model the next one lacks) is moved to the
    nearest end with a notice saying so, never silently (with one value only, no slider is drawn and the key is
    cleared). A value nobody chose (the last model's ``default``, not since moved by the user:
    :func:`app_pages._state.copy` forgets it) follows the next model's default instead, without a notice."""
    where = where or st
    v = st.session_state.get(state_key)
    defaults = st.session_state.setdefault(K_INT_DEFAULTS, {})
    if v is not None and defaults.get(state_key) == v:
        v = None  # still the default it was given: this model's default, not a notice about a choice
    if v is not None and not lo <= int(v) <= hi:
        near = max(lo, min(int(v), hi))
        where.warning(f"{label} = {int(v)} is not available: this model has only {label.lower()} {lo}, shown "
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
    "substep": (K_SUBSTEP, "Update (generator heatmap)", "radio", None),
    "slot": (K_SLOT, "Offset slot", "select", "Which pair (t, t − Δ) spans the planes shown."),
    "block": (K_BLOCK, "Sub-block (token heatmap)", "radio", None),
}


def view_controls(slug: str, tr: Any, where: Any, used: set[str] | None = None) -> dict[str, Any]:
    """Draw the controls view ``slug`` needs for ``tr`` (from :mod:`geomlab.teach.views`: layer, head, substep, slot,
    block; only those with a choice to make) and return their values, the view's defaults for the others.
    ``used``: the controls the figures on screen take (a control no shown figure takes is not drawn, e.g.
    the generator heatmap's substep while that figure is under "More figures"); None draws them all. The
    layer is always drawn (it is shared by the pages)."""
    opts = views.control_options(slug, tr)
    values = views.default_controls(slug, tr)
    for name in views.VIEWS[slug].controls:
        if name == "layer":
            L = views.n_layers(tr)
            # one layer: no slider, but a link's layer=5 is still named and dropped (int_control)
            values["layer"] = int_control("Layer", K_LAYER, 0, L - 1, L - 1, where=where,
                                          help="Which layer's states / maps to show (0 = first).")
            continue
        if name not in CONTROL_WIDGETS:
            continue
        if used is not None and name not in used:  # not drawn (its figure is under "More figures"), yet a
            key, label = CONTROL_WIDGETS[name][:2]  # link's substep=9 is named and dropped, not kept
            cur = st.session_state.get(key)
            store = [-1 if v is None else v for v in opts.get(name, [])]
            if cur is not None and cur != URL_DEFAULTS.get(key) and cur not in store and cur != 0:
                url, choices = URL_KEYS.get(key, key), ", ".join(str(c) for c in store) or "it has only one"
                where.warning(f"{label} {cur} (the link's `{url}={cur}`) is not one of this model's choices "
                              f"({choices}); dropped.", icon=":material/tune:")
                st.session_state[key] = URL_DEFAULTS.get(key)
            continue
        if name not in opts:  # one choice only, so no widget: a link's slot=3 is still not kept silently
            key, label = CONTROL_WIDGETS[name][:2]
            cur = st.session_state.get(key)
            if cur not in (None, 0, URL_DEFAULTS.get(key)):  # 0: the one head, slot or update there is
                where.warning(f"{label} {cur} is not one of this model's choices: it has only one, shown here.",
                              icon=":material/tune:")
                st.session_state[key] = URL_DEFAULTS.get(key)
            continue
        key, label, kind, help_ = CONTROL_WIDGETS[name]
        options = opts[name]
        store = [-1 if v is None else v for v in options]  # None (mean over heads) stored as -1
        cur = st.session_state.get(key)
        wkey = "w_" + key
        st.session_state[wkey] = cur if cur in store else store[0]
        now = dict(values)

        def fmt(v: Any, name: str = name, now: dict = now) -> str:
            return views.control_label(name, None if v == -1 and name == "head" else v, tr, now)

        if cur is not None and cur not in store:  # a link's head=9, a slot the last model had: never silently
            where.warning(f"{label} {cur} is not one of this model's choices: showing {fmt(store[0])} instead.",
                          icon=":material/tune:")

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
                  help: str | None = None) -> dict[str, Any]:
    """The CEM inference-steps slider for ``entry`` (range from :func:`geomlab.teach.views.steps_range`); returns
    the trace options: ``{}`` at the trained T, else ``{"steps": T}``."""
    cfg = entry.model_config
    trained = views.trained_steps(cfg)
    lo, hi = views.steps_range(cfg)
    T = int_control(label or "Recursion steps T at inference", state_key, lo, hi, trained, where=where,
                    help=help or f"The model was trained with T = {trained}. More steps should keep lowering "
                                 "the energy (test-time recursion); the figure flags any step where it rose.")
    return {} if T == trained else {"steps": int(T)}


PLOTLY_CONFIG = {
    "displaylogo": False,
    "toImageButtonOptions": {"format": "png", "scale": 2},
    "modeBarButtonsToRemove": ["lasso2d", "select2d"],
}
#: On a phone the toolbar keeps only its PNG download (the zoom and pan buttons, always shown on a touch
#: screen, covered the figure's title), titles wrap at this many characters (a ~360 px chart) and a
#: square map gets a height that fits its width.
PHONE_REMOVE = ["zoom2d", "pan2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "resetScale2d", "zoom3d", "pan3d",
                "orbitRotation", "tableRotation", "resetCameraDefault3d", "resetCameraLastSave3d", "hoverClosest3d",
                "hoverClosestCartesian", "hoverCompareCartesian", "toggleSpikelines"]
PHONE_TITLE = 32


def is_phone() -> bool:
    """Whether this session's browser says it is a phone (``Mobi`` in its User-Agent, the usual test; a
    narrow desktop window is not one). False without a browser (tests, bare mode). Design choice."""
    try:
        return "Mobi" in (st.context.headers.get("User-Agent") or "")
    except Exception:  # noqa: BLE001 - no request context
        return False


def visible_len(text: str) -> int:
    """Characters of ``text`` a reader sees: Plotly's markup tags (``<sub>``, ``<b>``, ...) left out."""
    import re

    return len(re.sub(r"<[^>]*>", "", text))


def wrap_markup(text: str, width: int) -> list[str]:
    """``text`` cut into lines of at most ``width`` visible characters at spaces (a word longer than that
    keeps its own line): a tag such as ``<sub>`` is never cut, and does not count."""
    lines: list[str] = []
    for word in text.split():
        if lines and visible_len(lines[-1]) + 1 + visible_len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def wrapped_title(layout: dict, width: int) -> dict:
    """Layout update that wraps a figure's title (``layout``: its plotly JSON) onto lines of at most ``width``
    visible characters, pinned to the top with the top margin grown by a line per extra line; ``{}`` when
    the title fits or already has line breaks."""
    title = (layout.get("title") or {}).get("text") or ""
    if visible_len(title) <= width or "<br>" in title:
        return {}
    lines = wrap_markup(title, width)
    top = (layout.get("margin") or {}).get("t", 60)
    # pinned to the top, each extra line pushes the plot (and its subplot titles) down by a line and a bit
    height = int(layout.get("height") or 450)
    return {"title": {"text": "<br>".join(lines), "yref": "container", "y": 1 - 28 / height, "yanchor": "top"},
            "margin": {"t": top + 30 * (len(lines) - 1) + 8}}


PHONE_PANEL, PHONE_GAP = 230, 110
"""On a phone a figure whose layout ``meta`` asks for it (``{"phone": "stack"}``: side-by-side panels too
different to share an axis title, e.g. the torus angles' heatmap and square torus) has its panels stacked,
each this many px high (a square map narrows to it), this far apart (the upper panel's tick labels and axis
title, the next subplot title). Design choice."""


def stacked(layout: dict) -> dict:
    """Layout update that puts the panels of a one-row figure (``layout``: its plotly JSON) under each other,
    left to right becoming top to bottom, each at the full width, with their subplot titles over them and the
    height grown to fit: on a phone two panels side by side were ~130 px wide each."""
    xs = sorted((a["domain"][0], k) for k, a in layout.items() if k.startswith("xaxis") and a.get("domain"))
    plot = len(xs) * PHONE_PANEL + (len(xs) - 1) * PHONE_GAP
    margin = layout.get("margin") or {}
    anns = [dict(a) for a in layout.get("annotations") or []]
    upd: dict = {"height": plot + margin.get("t", 60) + margin.get("b", 50), "annotations": anns}
    for i, (_, xk) in enumerate(xs):
        above = i * (PHONE_PANEL + PHONE_GAP)  # px above the panel in the plot area
        top = 1 - above / plot
        upd[xk] = {"domain": [0, 1]}
        upd["yaxis" + layout[xk].get("anchor", "y")[1:]] = {"domain": [1 - (above + PHONE_PANEL) / plot, top]}
        centre = sum(layout[xk]["domain"]) / 2
        for a in anns:  # the panel's subplot title: centred over it on the paper
            if a.get("yref") == "paper" and abs(a.get("x", -1) - centre) < 1e-6:
                a.update(x=0.5, y=top)
    return upd


def colorbar_holders(fig: go.Figure) -> list[tuple[Any, Any]]:
    """``[(trace, holder)]`` for each colour bar a trace of ``fig`` sets: the trace itself (unless its
    ``showscale`` is off) or its ``marker``. Read from the JSON, as reading ``t.marker.colorbar`` would
    create a bar."""
    out = []
    for t in fig.data:
        j = t.to_plotly_json()
        where = t if "colorbar" in j and j.get("showscale") is not False else t.marker if "colorbar" in (
            j.get("marker") or {}) else None
        if where is not None:
            out.append((t, where))
    return out


def has_scene(layout: dict) -> bool:
    """Whether a figure's layout (its plotly JSON) holds a 3-D scene."""
    return any(k.startswith("scene") for k in layout)


def stack_colorbars(fig: go.Figure) -> None:
    """After :func:`stacked` (on the phone's copy ``fig``): each trace's colour bar just right of the plot,
    as tall as its own panel (a bar placed between two panels side by side sat over the full-width panel)."""
    for t, where in colorbar_holders(fig):
        lo, hi = fig.layout["yaxis" + (t.yaxis or "y")[1:]].domain
        where.colorbar.update(x=1.02, xanchor="left", y=hi, yanchor="top", len=hi - lo, lenmode="fraction")


def shared_titles(layout: dict) -> dict:
    """Layout update that drops the y-axis title of every panel right of a row's first one where it repeats
    that one's (``layout``: a figure's plotly JSON): on a phone the gap between two panels holds just their
    tick labels, so a second "Δε (a.u.)" ran over the panel on its left; the row's first title names them all."""
    rows: dict[tuple, list] = {}
    for k, a in layout.items():
        if k.startswith("yaxis") and isinstance(a, dict):
            x = layout.get("xaxis" + str(a.get("anchor", "x"))[1:]) or {}
            rows.setdefault(tuple(a.get("domain") or (0, 1)), []).append(((x.get("domain") or [0])[0], k))

    def title(k: str) -> str | None:
        return (layout[k].get("title") or {}).get("text")

    return {k: {"title": {"text": ""}} for row in rows.values() for _, k in sorted(row)[1:]
            if title(k) and title(k) == title(sorted(row)[0][1])}


PHONE_SUBTITLE, PHONE_SUBTITLE_CHARS = 11, 52
"""Font size (px) of a subplot title on a phone where panels stand side by side or the title is longer than
:data:`PHONE_TITLE` characters (Plotly's 16 px ran two titles together over ~165 px panels: "attention:
before mixattention: after mixing", and cut a long one at both edges), and the visible characters a line
of it then holds (longer ones wrap). Design choice."""


def subplot_titles(layout: dict) -> dict:
    """Layout update of a figure's subplot titles and ticks on a phone (``layout``: its plotly JSON): with
    panels side by side, titles at :data:`PHONE_SUBTITLE` px and every second tick where a small map labels
    each row and column (``dtick`` 1: 0 to 11 overlapped at ~165 px); a title over :data:`PHONE_TITLE`
    characters also smaller, wrapped at :data:`PHONE_SUBTITLE_CHARS`. ``{}`` when nothing changes."""
    starts = {round((a.get("domain") or [0])[0], 3) for k, a in layout.items() if k.startswith("xaxis")}
    side = len(starts) > 1
    anns, changed = [], False
    for a in layout.get("annotations") or []:
        text = a.get("text") or ""
        if a.get("yanchor") == "bottom" and (a.get("font") or {}).get("size") == 16 and (
                side or visible_len(text) > PHONE_TITLE):  # Plotly's subplot titles: 16 px, over their panel
            a = dict(a, font={**a["font"], "size": PHONE_SUBTITLE},
                     text="<br>".join(wrap_markup(text, PHONE_SUBTITLE_CHARS)) if "<br>" not in text else text)
            changed = True
        anns.append(a)
    upd: dict = {"annotations": anns} if changed else {}
    extra = max((a["text"].count("<br>") for a in anns), default=0)
    if changed and extra:  # a wrapped title grows upward: room for it under the figure's title
        upd["margin"] = {"t": (layout.get("margin") or {}).get("t", 100) + 14 * extra}
    if side:
        upd.update({k: {"dtick": 2} for k, a in layout.items() if k[1:5] == "axis" and a.get("dtick") == 1})
    return upd


PHONE_SCENE, PHONE_EYE, PHONE_SCENE_B = 340, 2.6, 30
"""On a phone a 3-D scene is this many px high (its column is ~340 px wide: at the desktop's 560 px height
~250 px stood blank over it) and spans the full width, its camera at least this far from the centre (the
sphere's, at ~2.4, cut its axis titles: "xis 8"), with smaller axis titles and no tick labels; the bottom
margin when the figure sets none. Design choice."""


def scenes(layout: dict) -> dict:
    """Layout update of a figure's 3-D scenes on a phone (``layout``: its plotly JSON); ``{}`` without one:
    each scene over the full width (a colour bar goes under it, :func:`scene_colorbars`) with its camera at
    least :data:`PHONE_EYE` away and smaller axis fonts, the height one :data:`PHONE_SCENE` px scene plus
    the margins."""
    names = [k for k in layout if k.startswith("scene") and isinstance(layout[k], dict)]
    if not names:
        return {}
    upd: dict = {}
    axes = {a: {"title": {"font": {"size": 11}}, "showticklabels": False} for a in ("xaxis", "yaxis", "zaxis")}
    for k in names:
        eye = (layout[k].get("camera") or {}).get("eye") or {"x": 1.25, "y": 1.25, "z": 1.25}  # plotly's default
        far = PHONE_EYE / max(math.sqrt(sum(v * v for v in eye.values())), 1e-9)
        upd[k] = {"domain": {"x": [0, 1], "y": [0, 1]}, "camera": {"eye": {a: v * far for a, v in eye.items()}},
                  **axes}
    margin = layout.get("margin") or {}
    top = margin.get("t", 60)
    legend = layout.get("legend") or {}
    if legend.get("orientation") == "h" and legend.get("y", 1) >= 1:  # a legend over the scene: a gap under
        top += 16  # the title's second line (they touched on a phone)
        upd["margin"] = {"t": top}
    upd["height"] = top + margin.get("b", PHONE_SCENE_B) + PHONE_SCENE
    return upd


PHONE_BAR = 56
"""Px under a phone's 3-D scene for its horizontal colour bar and the bar's title. Design choice."""


def scene_colorbars(fig: go.Figure) -> None:
    """After :func:`scenes` (on the phone's copy ``fig``): a colour bar of a 3-D figure lies under the scene,
    horizontal and titled above, the figure :data:`PHONE_BAR` px taller (upright at the right it took ~80 px
    of a ~340 px width and the scene was cut at the right)."""
    bars = colorbar_holders(fig)
    for _, where in bars:
        where.colorbar.update(orientation="h", x=0.5, xanchor="center", y=0, yanchor="top", len=0.8,
                              lenmode="fraction", thickness=10, title={"side": "top"})
    if bars:
        m = fig.layout.margin
        fig.update_layout(margin={"b": (m.b if m.b is not None else 30) + PHONE_BAR},
                          height=(fig.layout.height or 450) + PHONE_BAR)


PHONE_LEGEND_ROW, PHONE_LEGEND_WIDTH = 20, 330
"""On a phone a legend beside the plot goes under it: px per legend row, and the px a row holds (a phone's
column, less a little). Design choice."""


def legend_below(fig: go.Figure, layout: dict | None = None) -> dict:
    """Layout update of the phone's copy of a 2-D figure ``fig`` whose legend stands beside the plot
    (Plotly's default, right of it): under the figure instead, horizontal, the figure taller by its rows
    (beside it, a six-entry legend took ~45% of a phone's width, leaving the plot ~170 px and its tick labels
    turned upright; a lone entry, e.g. Trajectories' "state", took ~90 px). ``{}`` for 3-D figures,
    horizontal legends, and figures whose legend shows no entry.
    ``layout``: ``fig``'s plotly JSON when the caller has it already."""
    lay, js = fig.layout, fig.layout.to_plotly_json() if layout is None else layout
    if js.get("showlegend") is False or (js.get("legend") or {}).get("orientation") == "h" or has_scene(js):
        return {}
    names = [str(t.name) for t in fig.data if t.name and t.type not in ("heatmap", "contour", "histogram2d")
             and (t.showlegend is True or (t.showlegend is None and len(fig.data) > 1))]
    if not names:
        return {}
    rows, used = 1, 0.0
    for name in names:  # pack the entries into rows: ~40 px of symbol and gap plus ~6.5 px a character
        w = 40 + 6.5 * visible_len(name)
        if used and used + w > PHONE_LEGEND_WIDTH:
            rows, used = rows + 1, 0.0
        used += w
    extra = rows * PHONE_LEGEND_ROW + 10
    b = lay.margin.b if lay.margin.b is not None else 80
    return {"legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                       "xanchor": "left"}, "margin": {"b": b + extra}, "height": (lay.height or 450) + extra}


def phone_layout(layout: dict) -> list[dict]:
    """The layout updates a phone's copy of a figure gets (``layout``: its plotly JSON), in order; empty when
    it is drawn as it is: panels stacked where the figure asks (:func:`stacked`), else repeated y-axis titles
    of a row dropped (:func:`shared_titles`) and smaller subplot titles, sparser ticks side by side
    (:func:`subplot_titles`), 3-D scenes at the full width and a phone's height (:func:`scenes`); a long
    title wrapped and one square map shortened to its width."""
    stack = stacked(layout) if (layout.get("meta") or {}).get("phone") == "stack" else {}
    # stacked, each panel has a row of its own: no title to share, nothing side by side
    scene = {} if stack else scenes(layout)
    rows = [stack] if stack else [shared_titles(layout), subplot_titles(layout), scene]
    top = {k: v for u in rows for k, v in u.items() if k == "margin"}  # a wrapped title adds to what they set
    height = stack.get("height") or scene.get("height") or layout.get("height")
    upd = wrapped_title({**layout, **top, "height": height}, PHONE_TITLE)
    if scene and "margin" in upd:  # the scene keeps its height under the longer title
        upd["height"] = upd["margin"]["t"] + (layout.get("margin") or {}).get("b", PHONE_SCENE_B) + PHONE_SCENE
    if (layout.get("yaxis") or {}).get("scaleanchor") and "xaxis2" not in layout and (layout.get("height") or 0) > 400:
        upd["height"] = 400  # one square map ~330 px wide: its full height left ~200 px blank under it
    return [u for u in (*rows, upd) if u]


def chart(fig: go.Figure, key: str, filename: str = "geomlab", narrow: bool = False,
          width: int | None = None) -> None:
    """Draw a Plotly figure at the container's width (at most ``width`` px when given) with the PNG download
    button in its toolbar (``narrow``: it sits in a half-width column). On a phone, a copy laid out for a
    narrow screen (:func:`phone_layout`) and a toolbar without the zoom and pan buttons."""
    phone = is_phone()
    lay = fig.layout.to_plotly_json() if narrow or phone else {}  # (a desktop's full-width chart needs none)
    if narrow and not phone and has_scene(lay):
        # half-width 3-D figures: legend under the scene so it does not cover the colour bar (a phone's
        # columns stand under each other at the full width, its colour bar under the scene: left as it was)
        fig = copy.deepcopy(fig)  # unvalidated views copy without plotly's validation
        fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0})
    cfg = json.loads(json.dumps(PLOTLY_CONFIG))
    cfg["toImageButtonOptions"]["filename"] = filename
    if phone:
        ups = phone_layout(lay)
        if ups:
            fig = copy.deepcopy(fig)  # a copy: the cached figure is shared by every session
            for upd in ups:
                fig.update_layout(upd)
            if (lay.get("meta") or {}).get("phone") == "stack":
                stack_colorbars(fig)
            if has_scene(lay):
                scene_colorbars(fig)
        below = legend_below(fig, lay)
        if below:
            fig = fig if ups else copy.deepcopy(fig)  # (a copy already when ``ups`` changed it)
            fig.update_layout(below)
        cfg["modeBarButtonsToRemove"] = cfg["modeBarButtonsToRemove"] + PHONE_REMOVE
    st.plotly_chart(fig, key=key, config=cfg, width=width or "stretch")


def trace_downloads(tr: Any, stem: str, where: Any = None, cursor: int | None = None) -> None:
    """Two download buttons: the whole trace as compressed ``.npz`` (``geomlab.trace.load_trace`` reads it
    back and reproduces the view) and strict JSON of the 256 positions around the cursor. Both are built
    only when clicked."""
    where = where or st
    from geomlab import trace as trace_mod

    c1, c2 = where.columns(2)
    c1.download_button("Trace (.npz)", lambda: trace_mod.trace_bytes(tr), file_name=f"{stem}.trace.npz",
                       mime="application/octet-stream", icon=":material/download:", on_click="ignore",
                       key=f"dl-npz-{stem}",
                       help="Load it back with geomlab.trace.load_trace: it reproduces this view exactly.")
    start, stop = data.json_window(tr.n_positions, cursor)
    c2.download_button("Trace (.json)", lambda: data.trace_json(tr, cursor), file_name=f"{stem}.trace.json",
                       mime="application/json", icon=":material/data_object:", on_click="ignore",
                       key=f"dl-json-{stem}",
                       help=f"Positions {start}–{stop - 1} around the cursor, every array cut to them; "
                            "non-finite values as null.")
