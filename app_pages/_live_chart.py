"""A Plotly chart that is updated in place and reports clicks: :func:`live_chart`.

``st.plotly_chart`` gives a changed figure a new element, so the browser draws it from scratch
(``Plotly.newPlot``) on every rerun that changes it. Here the figure is mounted as a Streamlit custom
component (``st.components.v2``, in the page, no iframe) under a fixed key: the component keeps its identity
when its data changes, and its JavaScript (``js/live_chart.js``) updates the same ``<div>`` with
``Plotly.react``. A click on a point (heatmap cell, curve point, bar, 3-D marker) comes back as the trigger
``click`` for one rerun.

plotly.js is not copied into the repository. A figure whose traces are all 2-D loads the cartesian bundle of
the plotly.js version the ``plotly`` package ships, when it is in the user cache (``app_pages/_plotlyjs.py``:
a third of the full bundle's evaluation time); any other figure, or every one without it, loads the
``plotly`` package's own ``package_data/plotly.min.js``. Each is served by Streamlit's component file route,
registered once as a ``components.v1`` path component (``/component/<name>/<file>``; ``serve.py``'s
middleware also answers those two addresses itself, from the first request), and loaded once per browser
page; a chart keeps the bundle that drew it. The chart's own script, ``js/live_chart.js``, is served the same
way and imported once per page by the small loader each element carries.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import plotly.graph_objects as go
import streamlit as st
from streamlit.components.v1 import declare_component
from streamlit.runtime import get_instance

from geomlab.core.cache import IdentityMemo

#: Names of the v1 path components that serve plotly.js's folders, by bundle (Streamlit prefixes the module's).
_ASSETS = {"full": "plotlyjs", "cartesian": "plotlyjs_cartesian"}
#: Name of the v2 component that draws one figure.
_NAME = "geomlab_live_chart"
#: The chart's script, an ES module served from its own folder by the v1 path component :data:`_JS_ASSET`.
_JS = Path(__file__).parent / "js" / "live_chart.js"
_JS_ASSET = "livechartjs"
_CSS = ".geomlab-plot { width: 100%; }"
#: The v2 component's own script: it imports :data:`_JS` (once per page) and hands each mount to it. An
#: element carries its component's script inline, on every run; the chart's 14 KB would travel with every
#: chart of every run.
_LOADER = """const SRC = new URL(%s, window.location.href).href;
let chart = null;
export default function (component) {
  let cleanup = null, gone = false;
  (chart = chart || import(SRC)).then((m) => { if (!gone) cleanup = m.default(component); })
    .catch((err) => console.error("geomlab component:", err));
  return () => { gone = true; if (typeof cleanup === "function") cleanup(); };
}
"""
#: Session key: ``{chart key: digest of the traces last sent to it}``.
K_SENT = "_live_chart_sent"
#: Session key: ``{chart key: figure_json}`` of the charts drawn, kept only while a session sets it to a dict
#: (a classroom's teacher: ``app_pages/_room.py``).
K_DRAWN = "_live_chart_drawn"
ALWAYS_SEND_TRACES = False
"""Send every chart's traces on every run, even to a browser that holds them (the AppTest suite reads each
run's figures from its elements: it sets this)."""


@functools.cache
def _js_version(file: str = _JS.name) -> str:
    """A digest of script ``file`` (of ``js/``), in its address so that a browser never runs an older copy."""
    return hashlib.blake2b((_JS.parent / file).read_bytes(), digest_size=8).hexdigest()


def js_url(base: str, file: str = _JS.name) -> str:
    """Path, from the server's root, of script ``file`` of ``js/`` (default: the chart's) under the server's
    base path ``base``, with its version (:func:`_js_version`)."""
    base = base.strip("/")
    name = f"{__name__}.{_JS_ASSET}"
    return "/" + (base + "/" if base else "") + f"component/{name}/{file}?v={_js_version(file)}"


def module_component(name: str, file: str, css: str | None = None) -> Any:
    """The mounting command of v2 component ``name`` whose script is module ``file`` of ``js/``, imported
    once per page through the :data:`_LOADER` (the folder is registered here as a v1 path component, once
    per Streamlit runtime). Registered on every call: the registry belongs to the running Streamlit
    runtime (AppTest starts several in one process), and registering the same definition again is a silent
    dictionary update."""
    if get_instance().component_registry.get_component_path(f"{__name__}.{_JS_ASSET}") is None:
        declare_component(_JS_ASSET, path=str(_JS.parent))
    loader = _LOADER % json.dumps(js_url(st.get_option("server.baseUrlPath") or "", file))
    return st.components.v2.component(name, js=loader, css=css, isolate_styles=False)


def _component() -> Any:
    """The chart's v2 component (:func:`module_component` of ``js/live_chart.js``)."""
    return module_component(_NAME, _JS.name, _CSS)


def bundle_files() -> dict[str, Path]:
    """``{"full": plotly.min.js, "cartesian": the cached cartesian bundle}``, the latter only when it is there."""
    from app_pages import _plotlyjs

    out = {"full": _plotlyjs.full_dir() / "plotly.min.js"}
    cart = _plotlyjs.cartesian()
    if cart is not None:
        out["cartesian"] = cart
    return out


def bundle_url(bundle: str, file: Path, base: str) -> str:
    """Path, from the server's root, of plotly.js ``bundle`` ("full" or "cartesian"), the file ``file`` of
    :func:`bundle_files`, under the server's base path ``base`` (``server.baseUrlPath``, e.g. ``"lab"``)."""
    name = f"{__name__}.{_ASSETS[bundle]}"  # what declare_component, called from this module, names it
    base = base.strip("/")
    return "/" + (base + "/" if base else "") + f"component/{name}/{file.name}"


def _plotly_url(full: bool) -> str:
    """:func:`bundle_url` of the bundle a figure needs (the full one when ``full`` or when the cartesian one is
    not cached), registering its folder as a file-serving component once per Streamlit runtime (the registry
    is the runtime's; AppTest starts several in one process)."""
    files = bundle_files()
    bundle = "full" if full or "cartesian" not in files else "cartesian"
    name = f"{__name__}.{_ASSETS[bundle]}"
    if get_instance().component_registry.get_component_path(name) is None:
        declare_component(_ASSETS[bundle], path=str(files[bundle].parent))
    return bundle_url(bundle, files[bundle], st.get_option("server.baseUrlPath") or "")


_JSON = IdentityMemo()


def figure_json(fig: go.Figure) -> dict[str, str]:
    """:func:`_figure_json` of ``fig``, made once per figure object while it lives: the figures of the app's
    cache are shared by every session and never changed, and a class's students all draw the same one (its
    JSON anew was a tenth of a following student's run). A figure may not be changed after it was drawn.
    Design choice."""
    return _JSON.get(fig, "json", lambda: _figure_json(fig))


def _figure_json(fig: go.Figure) -> dict[str, str]:
    """The figure as Plotly JSON, in two parts: ``{"data": traces, "layout": the rest}`` (layout, frames) and
    the plotly.js bundle it needs, ``"bundle"``: ``"full"`` or ``"cartesian"`` (:func:`app_pages._plotlyjs.needs_full`);
    each part exactly as ``st.plotly_chart`` writes it (``plotly.io``'s encoder, no validation; the "streamlit"
    template Streamlit makes Plotly's default is kept, its placeholder colours are replaced in the browser),
    except ``layout.meta["caption"]`` (printed under the chart; nothing in the browser reads it; the figure's
    name, ``meta["view"]``, stays).
    Two parts so that the browser parses and diffs the traces only when they change: a cursor moved within
    a figure's window changes its layout (the cursor's mark) and keeps its data. Design choice."""
    from plotly.io._utils import validate_coerce_fig_to_dict
    from plotly.io.json import to_json_plotly

    from app_pages._plotlyjs import needs_full

    d = validate_coerce_fig_to_dict(fig, False)
    rest = {k: v for k, v in d.items() if k != "data"}
    layout = rest["layout"] = dict(rest.get("layout", {}))
    if isinstance(layout.get("meta"), dict):  # the caption changes with the cursor: the marks alone would not
        layout["meta"] = {k: v for k, v in layout["meta"].items() if k != "caption"}
    return {"data": to_json_plotly(d.get("data", [])), "layout": to_json_plotly(rest),
            "bundle": "full" if needs_full(d) else "cartesian"}


def clicked(key: str) -> dict | None:
    """The click on the live chart ``key`` that started this rerun, else None: readable in its ``on_click``
    callback and anywhere in the script, before or after the chart is drawn (a page that moves its cursor
    on a click reads it before drawing, so the click's rerun already shows the new cursor)."""
    value = st.session_state.get(key)
    return value.get("click") if hasattr(value, "get") else None


def live_chart(fig: go.Figure, key: str, config: dict, height: int | None = None,
               width: int | str = "stretch", on_click: Callable[[], None] | None = None) -> dict | None:
    """Draw ``fig`` under the element key ``key`` and return this rerun's click on it.

    ``config``: Plotly's config (toolbar buttons, PNG download options). ``height`` in px overrides the
    figure's ``layout.height`` (Plotly's 450 px when neither is set). ``width``: ``"stretch"`` (the
    container's width, redrawn when the container resizes) or an int, a width in px (at most the
    container's). ``on_click``: called
    before the rerun a click starts (read the click there with :func:`clicked`).

    Returns ``{"x", "y", "curve", "point", "customdata"}`` plus ``"z"`` where the trace has one (heatmap
    value, 3-D coordinate) when the user clicked a point of this chart since the previous rerun, else
    None. ``point`` is the point's index in its trace (a heatmap's is ``[row, column]``). Raises
    ``StreamlitAPIException`` when two charts share ``key``. Source: design choice (Plotly's
    ``plotly_click`` event data, https://plotly.com/javascript/plotlyjs-events/).
    """
    if height is not None:
        fig = go.Figure(fig).update_layout(height=height)
    whole = figure_json(fig)
    drawn = st.session_state.get(K_DRAWN)
    if drawn is not None:  # a session that collects its charts (a classroom's teacher)
        drawn[key] = whole
    spec = _traces_once(key, whole)
    data = {"key": key, "figure": spec, "config": config, "plotly": _plotly_url(spec["bundle"] == "full"),
            "max_width": None if width == "stretch" else int(width)}
    result = _component()(data=data, key=key, on_click_change=on_click or (lambda: None))
    return result.get("click") if hasattr(result, "get") else getattr(result, "click", None)


def traces_digest(traces: str) -> str:
    """The digest that names a chart's traces (JSON text) in the browser's store of them."""
    return hashlib.blake2b(traces.encode(), digest_size=16).hexdigest()


def _traces_once(key: str, spec: dict[str, str]) -> dict[str, str | None]:
    """``spec`` (:func:`figure_json`) with its digest, ``"digest"``, and without its traces (``"data"`` None)
    when this session last sent chart ``key`` the same traces: a cursor move within a figure's window
    changes only its layout, and the traces (most of a chart's bytes) would travel again on every run.

    The browser keeps each chart's last traces for the page's life (``js/live_chart.js``, by chart key), so
    a chart drawn again after a page switch still has them (a reload is a new session, sent them whole);
    where it lacks them (a run superseded before the page drew it) it answers with the trigger ``missing``,
    and the run that starts sends them whole. Design choice."""
    digest = traces_digest(spec["data"])
    sent = st.session_state.setdefault(K_SENT, {})
    value = st.session_state.get(key)
    missing = hasattr(value, "get") and value.get("missing") is not None
    held = sent.get(key) == digest and not missing and not ALWAYS_SEND_TRACES
    sent[key] = digest
    return dict(spec, digest=digest, data=None if held else spec["data"])
