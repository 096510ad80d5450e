"""The live chart (``app_pages/_live_chart.py``) in a real browser: a tiny Streamlit script with a heatmap
and a line chart, served under a base URL path (``--server.baseUrlPath``) and driven through playwright with
Debian's system chromium (never ``playwright install``).

Checks that a click on a heatmap cell returns that cell's x, y and z to Python (both from the mount and,
before the chart is drawn, from ``clicked``), that a rerun that changes
the figure updates the same ``<div>`` (a property set on it survives, its data and title change), that
plotly.js is loaded once for two charts, and measures click-to-updated-chart time (median of 10 clicks,
written to ``test-artifacts/live_chart_click.txt``). Without chromium the test is skipped, except under
``CI=true`` where it fails.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.bench.load import wait_for_health
from geomlab.bench.load.server import free_port
from helpers.browser import browser_exe  # noqa: F401 (a fixture)
pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
XS, YS = ["a", "b", "c", "d"], ["p", "q", "r"]
SCRIPT = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
import numpy as np, plotly.graph_objects as go, streamlit as st
from app_pages._live_chart import clicked, live_chart

st.session_state.setdefault("runs", 0)
st.session_state.setdefault("shift", 0)
st.session_state.runs += 1
if clicked("heat"):  # read before drawing: the click's rerun shows the changed figure
    st.session_state.shift += 1
z = np.arange(12).reshape(3, 4) + st.session_state.shift
fig = go.Figure(go.Heatmap(z=z, x={XS!r}, y={YS!r}))
fig.update_layout(title=dict(text=f"run {{st.session_state.runs}}"), height=360)
click = live_chart(fig, key="heat", config={{"displaylogo": False}})
mark = st.session_state.runs % 3  # the line chart's traces never change; its mark moves every run
line = go.Figure(go.Scatter(y=[1, 3, 2]))
line.update_layout(shapes=[dict(type="line", x0=mark, x1=mark, y0=0, y1=1, yref="paper")])
live_chart(line, key="line", config={{}})
live_chart(go.Figure(go.Scatter3d(x=[0, 1], y=[1, 0], z=[0, 1])), key="scene", config={{}})
st.text("result " + json.dumps({{"runs": st.session_state.runs, "click": click, "before": clicked("heat")}}))
"""


def z_at(shift: int, row: int, col: int) -> int:
    """The script's heatmap value at (row, col) after ``shift`` clicks: ``row * 4 + col + shift``."""
    return row * len(XS) + col + shift


@pytest.fixture(scope="module")
def page(browser_exe, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    root = tmp_path_factory.mktemp("live-chart")
    (root / "chart_app.py").write_text(SCRIPT)
    port = free_port()
    log = open(root / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(root / "chart_app.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--server.baseUrlPath", "lab",
         "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/lab/"
    try:
        wait_for_health(url.rstrip("/"), proc, root / "streamlit.log", timeout=90)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_exe, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            pg = browser.new_page(viewport={"width": 1000, "height": 900})
            pg.set_default_timeout(60_000)
            pg.goto(url)
            pg.wait_for_function("() => document.querySelectorAll('.geomlab-plot .main-svg').length >= 6")
            yield pg
            browser.close()
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def result(pg) -> dict:
    text = pg.locator("[data-testid=stText]").inner_text()
    return json.loads(text.split("result ", 1)[1])


def click_cell(pg, row: int, col: int) -> dict:
    """Click the heatmap cell (row, col) (row 0 at the bottom) and return the next run's result."""
    runs = result(pg)["runs"]
    box = pg.locator(".geomlab-plot").first.locator(".nsewdrag").first.bounding_box()
    pg.mouse.click(box["x"] + box["width"] * (col + 0.5) / len(XS),
                   box["y"] + box["height"] * (1 - (row + 0.5) / len(YS)))
    pg.wait_for_function(f"() => (document.querySelector('[data-testid=stText]') || {{}}).innerText"
                         f"?.includes('\"runs\": {runs + 1}')")
    return result(pg)


def test_plotly_js_is_loaded_once_from_the_base_path(page):
    from app_pages._plotlyjs import cartesian

    srcs = page.evaluate("() => [...document.scripts].map(s => s.src).filter(s => /plotly[-.\\w]*\\.min\\.js$/.test(s))")
    names = sorted(s.rsplit("/", 1)[-1] for s in srcs)
    # the two 2-D charts take the cartesian bundle when it is cached, the 3-D one the full bundle
    assert names == sorted({cartesian().name if cartesian() else "plotly.min.js", "plotly.min.js"})
    assert all("/lab/component/" in s for s in srcs)
    assert page.locator(".geomlab-plot .js-plotly-plot, .geomlab-plot.js-plotly-plot").count() == 3
    page.wait_for_function("() => !!document.querySelectorAll('.geomlab-plot')[2]._fullLayout?.scene")


def test_a_click_returns_the_cell_and_the_chart_is_updated_in_place(page):
    page.evaluate("() => { document.querySelector('.geomlab-plot').__mark = 'same node'; }")
    shift = result(page)["runs"] - 1  # every run after the first followed one click
    out = click_cell(page, row=1, col=2)
    assert out["click"]["x"] == "c" and out["click"]["y"] == "q"
    assert out["click"]["z"] == z_at(shift, 1, 2) and out["click"]["point"] == [1, 2]
    assert out["before"] == out["click"]
    page.wait_for_function(f"() => document.querySelector('.geomlab-plot .gtitle').textContent === "
                           f"'run {out['runs']}'")
    mark, z = page.evaluate("() => { const d = document.querySelector('.geomlab-plot'); "
                            "return [d.__mark, Array.from(d._fullData[0].z, r => Array.from(r))]; }")
    assert mark == "same node"
    assert z[1][2] == z_at(shift + 1, 1, 2)  # the data changed with the click's rerun


def test_a_chart_whose_marks_alone_changed_moves_them_without_react(page):
    page.evaluate("async () => { window.__reacted = []; for (const loaded of Object.values(window.__geomlabPlotly)) {"
                  " const P = await loaded; if (P.__spied) continue; P.__spied = true; const o = P.react.bind(P);"
                  " P.react = (gd, ...a) => { window.__reacted.push(gd.parentElement.className); return o(gd, ...a); }; } }")
    out = click_cell(page, row=0, col=0)
    mark = out["runs"] % 3
    page.wait_for_function(f"() => document.querySelectorAll('.geomlab-plot')[1]._fullLayout.shapes[0].x0 === {mark}")
    page.wait_for_function("() => window.__reacted.length >= 1")  # the heatmap's data changed: Plotly.react
    reacted = page.evaluate("() => { const [heat, line] = document.querySelectorAll('.geomlab-plot'); "
                            "window.__heat = heat; return [window.__reacted.length, "
                            "heat.parentElement.className === window.__reacted[0]]; }")
    assert reacted == [1, True]  # the line chart's shape moved by Plotly.relayout alone


def test_traces_that_did_not_change_are_not_sent_again(page):
    """A run that leaves a chart's traces as they were sends its layout and the traces' digest only: the
    line chart's traces (y = [1, 3, 2], never changed) are in no frame of a click's run, the heatmap's are,
    and the line chart still draws them with its moved mark."""
    frames: list[bytes] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(
        f if isinstance(f, bytes) else f.encode())))
    page.reload()
    page.wait_for_function("() => document.querySelectorAll('.geomlab-plot .main-svg').length >= 6")
    page.wait_for_timeout(500)
    assert any(b"[1,3,2]" in f for f in frames)  # a new page (a new session) gets them whole
    frames.clear()
    out = click_cell(page, row=2, col=3)
    page.wait_for_function(f"() => document.querySelectorAll('.geomlab-plot')[1]._fullLayout.shapes[0].x0"
                           f" === {out['runs'] % 3}")
    assert frames and not any(b"[1,3,2]" in f for f in frames)
    assert page.evaluate("() => Array.from(document.querySelectorAll('.geomlab-plot')[1]._fullData[0].y)") == [1, 3, 2]


def test_a_page_that_lost_the_traces_asks_for_them(page):
    """A chart sent only the digest of traces the page does not hold asks for them (the trigger
    ``missing``): one more run sends them whole, and the chart draws them."""
    runs = result(page)["runs"]
    page.evaluate("() => window.__geomlabTraces.clear()")
    box = page.locator(".geomlab-plot").first.locator(".nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + 5, box["y"] + 5)
    page.wait_for_function(f"() => document.querySelector('[data-testid=stText]').innerText"
                           f".includes('\"runs\": {runs + 2}')")  # the click's run, then the asked one
    mark = (runs + 2) % 3
    page.wait_for_function(f"() => document.querySelectorAll('.geomlab-plot')[1]._fullLayout.shapes[0].x0 === {mark}")
    assert page.evaluate("() => Array.from(document.querySelectorAll('.geomlab-plot')[1]._fullData[0].y)") == [1, 3, 2]
    assert page.evaluate("() => window.__geomlabTraces.has('line')")


#: Installed before a click: the time of the mouse press and the time the heatmap's title first reads
#: ``run <n>`` (its SVG redrawn), both from performance.now() in the page.
TIMER = """n => {
  window.__clickT = [null, null];
  document.addEventListener('mousedown', () => { window.__clickT[0] = performance.now(); },
                            { once: true, capture: true });
  const plot = document.querySelector('.geomlab-plot');
  const seen = new MutationObserver(() => {
    const title = plot.querySelector('.gtitle');
    if (title && title.textContent === 'run ' + n) { window.__clickT[1] = performance.now(); seen.disconnect(); }
  });
  seen.observe(plot, { subtree: true, childList: true, characterData: true });
}"""


def test_click_to_updated_chart_time(page):
    times = []
    box = page.locator(".geomlab-plot").first.locator(".nsewdrag").first.bounding_box()
    for i in range(10):
        runs = result(page)["runs"]
        page.evaluate(TIMER, runs + 1)
        page.mouse.click(box["x"] + box["width"] * ((i % 4) + 0.5) / 4, box["y"] + box["height"] * 0.5)
        page.wait_for_function("() => window.__clickT[1] !== null")
        t0, t1 = page.evaluate("() => window.__clickT")
        times.append((t1 - t0) / 1000)
        page.wait_for_function(f"() => document.querySelector('[data-testid=stText]').innerText"
                               f".includes('\"runs\": {runs + 1}')")  # the run finished before the next click
    median = statistics.median(times)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "live_chart_click.txt").write_text(
        f"click to updated chart, chromium, median of 10: {median:.3f} s ({', '.join(f'{t:.3f}' for t in times)})\n")
    print(f"click to updated chart: median {median:.3f} s")
    assert median < 2.0  # a generous bound: the number is reported, the target (0.25 s) is not asserted here
