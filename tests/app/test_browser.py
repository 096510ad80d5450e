"""The app in a real browser: ``streamlit run serve.py`` (the app started warm) headless on a free port,
driven through playwright with Debian's system chromium (never ``playwright install``).

Checks that the first view is served from the cache the warm-up filled at server start (and writes the
time to that first view to ``test-artifacts/first_view.txt``), opens every page, checks that no exception element is shown and that at least one chart has rendered,
starts a 2-step training run and sees it finish, and saves a screenshot of every page to
``test-artifacts/`` (gitignored). Without chromium the test is skipped, except under ``CI=true`` where it
fails (``.ci/run`` installs chromium with apt-get).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geomlab.live import runner as live
from geomlab.bench.load import wait_for_health
from geomlab.bench.load.server import free_port
from helpers.browser import browser_exe  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
TEXT = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun. "
        "Arise, fair sun, and kill the envious moon.\n") * 3
SPECS = {
    "osm-O": dict(kind="osm-rnn", group="O", params=2_000, data="text", text=TEXT),
    "osmformer-SO": dict(kind="osmformer", group="SO", params=2_000, data="text", text=TEXT,
                         model_overrides={"d": 3, "n_layers": 2}),
    "cem": dict(kind="cem", params=5_000, data="text", text=TEXT),
    "grassmann": dict(kind="grassmann", params=5_000, data="text", text=TEXT),
}
# url path -> checkpoint for it
PAGES = {"": None, "trajectories": "osm-O", "tangents": "osm-O", "attention": "osmformer-SO",
         "energy": "cem", "planes": "grassmann", "compare": "osm-O", "checkpoints": None, "train": None}
CHART = ".js-plotly-plot .main-svg"
SERVER_INFO: dict = {}  # "log": the server's log file, "env": its environment (set by the server fixture)


@pytest.fixture(scope="module")
def server(browser_exe, tmp_path_factory):
    """``streamlit run serve.py`` on a free port with a runs folder of tiny trained checkpoints; yields the
    base URL (its log file and environment go into :data:`SERVER_INFO`)."""
    root = tmp_path_factory.mktemp("browser")
    runs, bundled = root / "runs", root / "bundled"
    bundled.mkdir()
    env = dict(os.environ, GEOMLAB_RUNS_DIR=str(runs), GEOMLAB_BUNDLED_DIR=str(bundled))
    old = {k: os.environ.get(k) for k in ("GEOMLAB_RUNS_DIR", "GEOMLAB_BUNDLED_DIR")}
    os.environ.update(GEOMLAB_RUNS_DIR=str(runs), GEOMLAB_BUNDLED_DIR=str(bundled))
    try:
        for name, kw in SPECS.items():
            run = live.LiveRun(live.RunSpec(steps=2, batch_size=2, seq_len=16, threads=1, **kw),
                               work_dir=root / "work" / name).start()
            assert live.wait_for(run, lambda s: not s.active, timeout=180).state == "finished"
            run.save(name)
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    SERVER_INFO.update(log=root / "streamlit.log", env=env)
    with _streamlit(root, env) as url:
        yield url


@contextlib.contextmanager
def _streamlit(root: Path, env: dict):
    """``streamlit run serve.py`` on a free port with environment ``env``, its log in ``root``; yields the
    base URL once the server answers its health check, and stops it afterwards."""
    port = free_port()
    log = open(root / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "serve.py"), "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(url, proc, root / "streamlit.log", timeout=90)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def zoo_server(browser_exe, tmp_path_factory):
    """A second server on the bundled zoo (assets/checkpoints) with an empty runs folder: the Tour's
    lessons and a Compare link of two bundled checkpoints need the zoo."""
    root = tmp_path_factory.mktemp("browser-zoo")
    env = {k: v for k, v in os.environ.items() if k != "GEOMLAB_BUNDLED_DIR"}
    env["GEOMLAB_RUNS_DIR"] = str(root / "runs")
    with _streamlit(root, env) as url:
        yield url


@pytest.fixture(scope="module")
def page(server, browser_exe):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_exe, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        pg.set_default_timeout(90_000)
        yield pg
        context.close()
        browser.close()


def screenshot(pg, name: str) -> None:
    """Save the whole page: Streamlit scrolls inside its main container, so the viewport is stretched to the
    content height first (capped at 8000 px)."""
    h = pg.evaluate("() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
                    " return m ? m.scrollHeight : document.body.scrollHeight; }")
    width = pg.viewport_size["width"]
    pg.set_viewport_size({"width": width, "height": int(min(max(h, 800) + 40, 8000))})
    pg.wait_for_timeout(800)  # plotly relayouts on resize
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    pg.set_viewport_size({"width": width, "height": 1000})


def wait_idle(pg) -> None:
    """Wait until the app has finished its script run (the running indicator is gone)."""
    pg.wait_for_selector('[data-testid="stApp"]')
    pg.wait_for_timeout(500)
    pg.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText.includes('Running')",
        timeout=90_000)
    pg.wait_for_timeout(300)


def _first_target(env: dict):
    """``(slug, entry)`` the warm-up builds first: the default checkpoint in its default view."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from app_pages import _warm
    from geomlab.checkpoints import catalog

    old = {k: os.environ.get(k) for k in ("GEOMLAB_RUNS_DIR", "GEOMLAB_BUNDLED_DIR")}
    os.environ.update(GEOMLAB_RUNS_DIR=env["GEOMLAB_RUNS_DIR"], GEOMLAB_BUNDLED_DIR=env["GEOMLAB_BUNDLED_DIR"])
    try:
        return _warm.warm_targets(catalog.list_checkpoints())[0]
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.mark.browser
@pytest.mark.slow
def test_the_first_view_comes_from_the_cache_the_warm_up_filled(page, server):
    """The warm-up starts with the server (serve.py), not with the first visitor: once it has built the
    default view, opening that view computes no trace and no figure. The time to the first view is written
    to test-artifacts/first_view.txt (a measurement, not asserted: the machine may be busy)."""
    slug, entry = _first_target(SERVER_INFO["env"])
    log = SERVER_INFO["log"]
    deadline = time.monotonic() + 180
    while f"warm-up: {slug} with {entry.ref}" not in log.read_text():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)
    trace_miss = f"miss ('trace', {str(entry.path)!r}"  # a trace of this checkpoint computed (cache.py logs it)
    misses = log.read_text().count(trace_miss)
    assert misses == 1  # the warm-up's
    outside: list[str] = []  # requests to any other host: the app works offline (favicon included)
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(server) else None)
    asked: list[str] = []  # every URL the page asks for (the server is looked for at the root at once)
    page.on("request", lambda r: asked.append(r.url))
    t0 = time.monotonic()
    page.goto(f"{server}/{slug}?debug=1")
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    seconds = time.monotonic() - t0
    assert page.locator('[data-testid="stException"]').count() == 0
    page.get_by_text("cache: ").first.wait_for(timeout=30_000)  # the debug caption
    assert log.read_text().count(trace_miss) == misses  # no trace computed for the first view
    # the page the browser got starts loading plotly.js at once (app_pages/_preload.py), even though the browser
    # asked for gzip; the live charts reuse that load
    import urllib.request

    req = urllib.request.Request(f"{server}/{slug}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as r:
        html = r.read().decode()
    head = html.split("<head>", 1)[1].split("</script>", 1)[0]
    assert head.startswith("<script>(function(){var p=location.pathname") and "BACKEND_BASE_URL" in head
    assert "window.__geomlabPlotly" in head and "/component/app_pages._live_chart.plotlyjs" in head
    started = page.evaluate("performance.getEntriesByType('resource').filter(e => /plotly[-.\\w]*\\.min\\.js$/"
                            ".test(e.name)).map(e => e.name)")
    assert len(started) == 1 and started[0].split(server, 1)[-1] in head  # fetched once: the preloaded one
    page.wait_for_timeout(500)
    assert not [u for u in outside if not u.startswith(("data:", "blob:"))], outside
    # the deep link's base hint (app_pages/_preload.py): no detour through /SLUG/_stcore/health (a 404 and a
    # retry delay of ~0.8 s before the websocket opened)
    assert f"{server}/_stcore/health" in asked, asked
    assert not [u for u in asked if u.startswith(f"{server}/{slug}/_stcore")], asked
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "first_view.txt").write_text(f"/{slug} ({entry.ref}): {seconds:.2f} s to the first view "
                                              f"in chromium after the warm-up\n")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 1000])
def test_every_page_renders_in_chromium(page, server, width):
    """Every page at 1400 and 1000 px wide: no exception element, a chart where one is due,
    the link's checkpoint kept; a screenshot of each (test-artifacts/NAME-WIDTH.png) to look at."""
    page.set_viewport_size({"width": width, "height": 1000})
    for path, ckpt in PAGES.items():
        query = f"?ckpt=runs/{ckpt}" if ckpt else ""
        page.goto(f"{server}/{path}{query}")
        wait_idle(page)
        name = f"{path or 'home'}-{width}"
        if path == "checkpoints":
            page.wait_for_selector('[data-testid="stDataFrame"]', state="attached")
        elif path != "train":
            page.wait_for_selector(CHART, state="attached")
        screenshot(page, name)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        if path not in ("train", "checkpoints"):
            assert page.locator(CHART).count() >= 1, name
        if ckpt:
            assert f"ckpt=runs%2F{ckpt}" in page.url or f"ckpt=runs/{ckpt}" in page.url, page.url
    page.set_viewport_size({"width": 1400, "height": 1000})


PHONE_UA = ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/17.0 Mobile/15E148 Safari/604.1")


@pytest.mark.browser
@pytest.mark.slow
def test_a_link_opened_on_a_phone_shows_the_page_not_the_menu(page, server):
    """A student's phone (390 px, a mobile browser): the sidebar starts folded, the OSMFormer's similarity
    and weights maps stand under each other at the full width, and every chart's title stays inside its
    chart, clear of a toolbar cut down to the PNG download."""
    ctx = page.context.browser.new_context(viewport={"width": 390, "height": 844}, user_agent=PHONE_UA,
                                           is_mobile=True, has_touch=True)
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(90_000)
        pg.goto(f"{server}/attention?ckpt=runs/{PAGES['attention']}")
        wait_idle(pg)
        pg.wait_for_selector(CHART, state="attached")
        pg.wait_for_timeout(1500)
        assert pg.locator('[data-testid="stSidebar"]').get_attribute("data-collapsed") == "true"
        charts = pg.locator('.geomlab-plot')
        a, b = charts.nth(0).bounding_box(), charts.nth(1).bounding_box()
        assert b["y"] >= a["y"] + a["height"] - 5 and a["width"] > 300, (a, b)  # stacked, full width
        for i in range(charts.count()):
            box = charts.nth(i).bounding_box()
            title = charts.nth(i).locator(".gtitle")
            if title.count():
                t = title.first.bounding_box()
                assert t["x"] + t["width"] <= box["x"] + box["width"] + 1, (i, t, box)
            buttons = charts.nth(i).locator(".modebar-btn")
            assert buttons.count() <= 2, buttons.count()  # the PNG download (and Streamlit's full screen)
        pg.set_viewport_size({"width": 390, "height": 4000})
        pg.wait_for_timeout(800)
        pg.screenshot(path=str(ARTIFACTS / "attention-phone.png"), full_page=True)
        assert pg.locator('[data-testid="stException"]').count() == 0
        # each view's formula fits the phone's width: cut at the right edge (Planes 468 px in ~358) it
        # scrolled with no sign that it did, and Trajectories ended at "d(I, H_t) ="
        pg.set_viewport_size({"width": 390, "height": 844})
        for slug in ("trajectories", "tangents", "attention", "energy", "planes"):
            pg.goto(f"{server}/{slug}?ckpt=runs/{PAGES[slug]}")
            wait_idle(pg)
            pg.wait_for_selector(".katex-display", state="attached")
            sizes = pg.evaluate("() => [...document.querySelectorAll('.katex-display')].map(e => [e.scrollWidth,"
                                " e.closest('[data-testid=\"stElementContainer\"]').clientWidth])")
            assert sizes and all(formula <= room and room > 300 for formula, room in sizes), (slug, sizes)
    finally:
        ctx.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_first_chart_and_its_side_column_stack_when_the_page_is_narrow(page, server):
    """The first chart and the column beside it (text, guesses) sit side by side at 1400 px, and wrap under
    each other at 800 px with the sidebar open (the chart then keeps the full ~470 px content width)."""
    def boxes(width):
        page.set_viewport_size({"width": width, "height": 1000})
        page.goto(f"{server}/trajectories?ckpt=runs/{PAGES['trajectories']}")
        wait_idle(page)
        page.wait_for_selector('.geomlab-plot')
        page.wait_for_timeout(1500)
        return page.locator('.geomlab-plot').first.bounding_box(), page.locator('.st-key-view-side').bounding_box()

    a, b = boxes(1400)
    assert abs(a["y"] - b["y"]) < 60 and b["x"] > a["x"] + a["width"] - 5  # one row
    a, b = boxes(800)
    assert b["y"] >= a["y"] + a["height"] - 5 and abs(a["x"] - b["x"]) < 5  # stacked
    assert a["width"] > 400
    screenshot(page, "trajectories-800")
    page.set_viewport_size({"width": 1400, "height": 1000})


def _start_training(page, server, steps: int) -> None:
    """Open Train live, set the step count and press Start training."""
    page.goto(f"{server}/train")
    wait_idle(page)
    box = page.get_by_role("spinbutton", name="Steps")
    box.fill(str(steps))
    box.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Start training").click()


@pytest.mark.browser
@pytest.mark.slow
def test_two_step_training_run_shows_progress(page, server):
    _start_training(page, server, 2)
    page.get_by_text("state: running").or_(page.get_by_text("Finished 2 steps")).first.wait_for(timeout=60_000)
    page.get_by_text("step 2 / 2").wait_for(timeout=120_000)
    page.get_by_text("Finished 2 steps").wait_for(timeout=120_000)
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    _curves_whole_in_view(page, "train-finished")  # the finished run's curves stay in view
    assert page.locator('[data-testid="stException"]').count() == 0
    assert page.locator(CHART).count() >= 1


def _curves_whole_in_view(page, name: str) -> None:
    """At 1400x900 and 1000x800, scrolled to the top, Train live's curves chart lies whole in the window, with
    the run's progress bar beside it (not under it); screenshots ``name``-WIDTH."""
    try:
        for width, height in ((1400, 900), (1000, 800)):
            page.set_viewport_size({"width": width, "height": height})
            page.wait_for_timeout(1200)
            page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")
            page.wait_for_timeout(300)
            box = page.locator(".st-key-train-curves-col .js-plotly-plot").first.bounding_box()
            bar = page.locator('.st-key-train-panel [data-testid="stProgress"]').first.bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, (width, box)
            assert bar["x"] >= box["x"] + box["width"] - 5 and bar["y"] < box["y"] + box["height"], (width, box, bar)
            screenshot(page, f"{name}-{width}")
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


@pytest.mark.browser
@pytest.mark.slow
def test_a_run_started_from_the_open_form_folds_it_and_keeps_its_curves_in_view(page, server):
    """The form for the next run stays open while it is used (a click inside it), and the run it starts
    shows with the form folded, its curves whole in the window (an open form would push them below it)."""
    _start_training(page, server, 300)
    page.get_by_text("state: ").first.wait_for(timeout=60_000)
    wait_idle(page)
    page.get_by_text("Next run's settings").click()
    start = page.get_by_role("button", name="Start training")
    start.wait_for(timeout=30_000)
    box = page.get_by_role("spinbutton", name="Steps")
    box.fill("200")
    box.press("Enter")
    wait_idle(page)
    assert start.is_visible()  # still open after a change inside it
    start.click()
    page.wait_for_function("() => document.body.innerText.includes('/ 200')", timeout=60_000)
    wait_idle(page)
    assert not page.get_by_role("button", name="Start training").is_visible()
    page.locator(".st-key-train-curves-col .js-plotly-plot").first.wait_for(timeout=60_000)
    _curves_whole_in_view(page, "train-second-run")


def _step(pg) -> int:
    import re

    txt = pg.locator('[data-testid="stProgress"]').first.inner_text()
    m = re.search(r"step ([\d,]+) /", txt)
    return int(m.group(1).replace(",", "")) if m else -1


@pytest.mark.browser
@pytest.mark.slow
def test_resume_keeps_updating_and_a_reload_reattaches(page, server):
    _start_training(page, server, 100000)
    page.get_by_text("state: running").first.wait_for(timeout=60_000)
    # while it trains the form folds away and the curves chart is in view beside the run's panel
    page.locator(CHART).first.wait_for(timeout=60_000)
    _curves_whole_in_view(page, "train-running")
    page.wait_for_timeout(1500)
    page.get_by_role("button", name="Stop").click()
    page.get_by_text("state: stopped").first.wait_for(timeout=60_000)
    assert "run=" in page.url and "key=" not in page.url, page.url
    # another browser opening that address (a student's copied link) watches the run but cannot change it,
    # and follows when its owner resumes it
    watching = page.context.browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        student = watching.new_page()
        student.goto(page.url)
        wait_idle(student)
        student.get_by_text("state: stopped").first.wait_for(timeout=60_000)
        page.get_by_role("button", name="Resume").click()
        page.get_by_text("state: running").first.wait_for(timeout=60_000)
        student.get_by_text("state: running").first.wait_for(timeout=30_000)
        assert student.get_by_role("button", name="Stop").is_disabled()
    finally:
        watching.close()
    first = _step(page)
    page.wait_for_function(  # the fragment keeps polling after Resume: the step counter moves on
        f"() => {{ const p = document.querySelector('[data-testid=\"stProgress\"]');"
        f" const m = p && p.innerText.match(/step ([\\d,]+) \\//);"
        f" return m && parseInt(m[1].replace(/,/g, '')) > {first}; }}", timeout=60_000)
    # a reload is a new session: it re-attaches to the run through ?run= and keeps control (the cookie)
    page.reload()
    wait_idle(page)
    page.get_by_text("state: running").first.wait_for(timeout=60_000)
    assert page.get_by_text("No run on this page yet").count() == 0
    assert page.get_by_role("button", name="Stop").is_enabled()
    page.get_by_role("button", name="Stop").click()
    page.get_by_text("state: stopped").first.wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
@pytest.mark.slow
def test_a_link_to_an_unknown_checkpoint_says_so(page, server):
    page.goto(f"{server}/?ckpt=../../etc/passwd")
    wait_idle(page)
    page.get_by_text("which is not here").first.wait_for(timeout=30_000)


@pytest.mark.browser
@pytest.mark.slow
def test_a_link_to_an_unknown_page_says_so(page, server):
    """Streamlit opens the default page for an unknown path and says so only in the console: the app says
    it on the page; a known page's link says nothing of the kind."""
    page.goto(f"{server}/nosuchpage")
    wait_idle(page)
    page.get_by_text("There is no page '/nosuchpage'; this is Home.").first.wait_for(timeout=30_000)
    page.goto(f"{server}/glossary")
    wait_idle(page)
    page.get_by_role("heading", name="Glossary").first.wait_for(timeout=30_000)
    assert page.get_by_text("There is no page").count() == 0


@pytest.mark.browser
@pytest.mark.slow
def test_a_cursor_move_redraws_the_view_without_retracing(page, server):
    """Pressing → on the token cursor moves it by one position: the page caption and the cursor-row figure
    follow, and no trace is computed (one forward pass per checkpoint and text). The time from the key press
    to the redrawn figure is written to test-artifacts/cursor_move.txt (a measurement, not asserted)."""
    ref = f"runs/{PAGES['attention']}"
    page.goto(f"{server}/attention?ckpt={ref}")
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    pos = int(page.get_by_text("cursor at ").first.inner_text().split("cursor at ")[1].split()[0])
    log = SERVER_INFO["log"]
    traces_before = log.read_text().count("miss ('trace'")
    cursor = page.locator('[data-testid="stSlider"]').filter(has_text="Token cursor").get_by_role("slider")
    cursor.focus()
    t0 = time.monotonic()
    cursor.press("ArrowRight")
    page.get_by_text(f"cursor at {pos + 1} ").first.wait_for(timeout=60_000)
    page.locator(".gtitle", has_text=f"What position {pos + 1} ").first.wait_for(timeout=60_000)
    seconds = time.monotonic() - t0
    assert log.read_text().count("miss ('trace'") == traces_before  # the model did not run again
    assert page.locator('[data-testid="stException"]').count() == 0
    assert f"ckpt={ref.replace('/', '%2F')}" in page.url or f"ckpt={ref}" in page.url, page.url
    screenshot(page, "attention-cursor-moved")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "cursor_move.txt").write_text(f"/attention ({ref}): {seconds:.2f} s from a cursor key press "
                                               "to the redrawn cursor-row figure in chromium\n")


@pytest.mark.browser
@pytest.mark.slow
def test_clicking_a_token_moves_the_cursor_and_the_attention_over_the_text(page, server):
    """a click on a token of the clickable text (the token panel's pills, ``.st-key-w_tok
    [role="radio"]``) moves the page's one cursor: the page caption, the selected pill and the ``attends_to``
    figure ("Over the text: what position N ...") follow. The time from the click to the redrawn figure is
    written to test-artifacts/token_click.txt (a measurement, not asserted)."""
    import re

    ref = f"runs/{PAGES['attention']}"
    page.goto(f"{server}/attention?ckpt={ref}")
    wait_idle(page)
    pills = page.locator('.st-key-w_tok [role="radio"]')
    pills.first.wait_for()
    pos = int(page.get_by_text("cursor at ").first.inner_text().split("cursor at ")[1].split()[0])
    checked = [i for i in range(pills.count()) if pills.nth(i).get_attribute("aria-checked") == "true"]
    assert len(checked) == 1  # the cursor's pill is the selected one
    k = checked[0] - 3 if checked[0] >= 3 else checked[0] + 3
    target = pos + (k - checked[0])
    t0 = time.monotonic()
    pills.nth(k).click()
    page.get_by_text(f"cursor at {target} ").first.wait_for(timeout=60_000)
    page.locator(".gtitle", has_text=f"Over the text: what position {target} ").first.wait_for(timeout=60_000)
    seconds = time.monotonic() - t0
    wait_idle(page)
    now = [i for i in range(pills.count()) if pills.nth(i).get_attribute("aria-checked") == "true"]
    assert len(now) == 1 and pills.nth(now[0]).inner_text() == pills.nth(k).inner_text() or now == [k]
    assert re.search(r"[?&]pos=%d\b" % target, page.url), page.url
    assert page.locator('[data-testid="stException"]').count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "token_click.txt").write_text(f"/attention ({ref}): {seconds:.2f} s from a click on a token to "
                                               "the redrawn attends_to figure in chromium\n")


@pytest.mark.browser
@pytest.mark.slow
def test_a_tour_steps_forward_and_back_and_its_link_reopens_the_step(page, zoo_server):
    """the Tour on the bundled zoo. Next moves to step 2 (heading, URL ``step=2``, the step's
    figures drawn), Back returns to step 1, and the step's link opens that step in a fresh page load."""
    page.goto(f"{zoo_server}/tour?lesson=s5-word-problem&step=1")
    wait_idle(page)
    page.get_by_text("Step 1 of ").first.wait_for(timeout=60_000)
    page.wait_for_selector(CHART, state="attached")
    page.get_by_role("button", name="Next").click()
    page.get_by_text("Step 2 of ").first.wait_for(timeout=60_000)
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    assert "step=2" in page.url, page.url
    assert page.locator('[data-testid="stException"]').count() == 0
    screenshot(page, "tour-step2-1400")
    link = page.url
    page.get_by_role("button", name="Back").click()
    page.get_by_text("Step 1 of ").first.wait_for(timeout=60_000)
    wait_idle(page)
    assert "step=1" in page.url or "step=" not in page.url, page.url
    page.goto(link)  # the shared link: a new page load lands on step 2
    wait_idle(page)
    page.get_by_text("Step 2 of ").first.wait_for(timeout=60_000)
    page.wait_for_selector(CHART, state="attached")
    page.set_viewport_size({"width": 1000, "height": 1000})
    screenshot(page, "tour-step2-1000")
    page.set_viewport_size({"width": 800, "height": 1000})  # the buttons keep their whole labels
    page.wait_for_timeout(500)
    for name in ("Back", "Next"):
        button = page.get_by_role("button", name=name)  # no element of it clips its label (an ellipsis)
        assert button.evaluate("b => [b, ...b.querySelectorAll('*')].every(e => e.scrollWidth <= e.clientWidth + 1)"
                               ), f"{name} is cut at 800 px"
    screenshot(page, "tour-step2-800")
    page.set_viewport_size({"width": 1400, "height": 1000})
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
@pytest.mark.slow
def test_a_compare_link_reopens_the_same_comparison(page, zoo_server):
    """Compare of the word-problem pair (O(5) vs torus) opened from a link: both sides drawn, and the
    page's "Link to this comparison" box holds a link that reopens the same pair, view and cursor."""
    from urllib.parse import parse_qs, urlsplit

    page.goto(f"{zoo_server}/compare?ckpt=bundled/osm-rnn-o-s5&b=bundled/osm-rnn-torus-s5&pos=5")
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    assert page.locator('[data-testid="stException"]').count() == 0
    page.get_by_text("osm-rnn-torus-s5").first.wait_for(timeout=30_000)
    box = page.locator('[data-testid="stExpander"]').filter(has_text="Link to this comparison")
    box.locator("summary").first.click()
    link = box.locator("code").first.text_content().strip()
    q = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert q["ckpt"] == "bundled/osm-rnn-o-s5" and q["b"] == "bundled/osm-rnn-torus-s5", link
    assert q["pos"] == "5" and q.get("view"), link
    screenshot(page, "compare-link-1400")
    page.goto(link)  # a fresh page load of the shared link
    wait_idle(page)
    page.wait_for_selector(CHART, state="attached")
    box = page.locator('[data-testid="stExpander"]').filter(has_text="Link to this comparison")
    box.locator("summary").first.click()
    again = box.locator("code").first.text_content().strip()
    assert {k: v[0] for k, v in parse_qs(urlsplit(again).query).items()} == q, (link, again)
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_the_checkpoints_table_shows_every_column_beside_the_sidebar_at_1000_px(page, zoo_server):
    """The bundled zoo's table on Checkpoints at 1000x800 (sidebar open): its grid does not scroll sideways,
    so the last column (model) is whole."""
    page.set_viewport_size({"width": 1000, "height": 800})
    try:
        page.goto(f"{zoo_server}/checkpoints")
        wait_idle(page)
        page.wait_for_selector('[data-testid="stDataFrame"] .dvn-scroller', state="attached")
        page.wait_for_timeout(800)
        widths = page.evaluate("() => [...document.querySelectorAll('[data-testid=\"stDataFrame\"] .dvn-scroller')]"
                               ".map(e => [e.scrollWidth, e.clientWidth])")
        assert widths and all(s <= c + 1 for s, c in widths), widths
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


FIRST_CHART_PAGES = ["trajectories", "tangents", "attention", "energy", "planes", "tour", "compare",
                     "tour?lesson=s5-word-problem&step=3"]  # (a step comparing two checkpoints, one above the other)


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1400, 900), (1000, 800)], ids=["1400x900", "1000x800"])
def test_the_first_chart_is_whole_in_the_window_on_every_view_the_tour_and_compare(page, zoo_server, size):
    """Chart first: on every view page, the Tour and Compare, opened on the bundled zoo at 1400x900 and
    1000x800, the first chart's bounding box lies inside the window without scrolling."""
    from geomlab.teach import views

    assert set(views.VIEWS) <= set(FIRST_CHART_PAGES)
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    try:
        for slug in FIRST_CHART_PAGES:
            page.goto(f"{zoo_server}/{slug}")
            page.wait_for_selector(CHART, state="attached", timeout=120_000)
            wait_idle(page)
            page.wait_for_timeout(800)  # plotly sizes the chart to its column
            box = page.locator(".js-plotly-plot").first.bounding_box()
            assert box is not None, slug
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, (slug, size, box)
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, (slug, size, box)
            assert page.locator('[data-testid="stException"]').count() == 0, slug
            page.screenshot(path=str(ARTIFACTS / f"first-chart-{slug.replace('?', '-').replace('&', '-').replace('=', '')}-{width}.png"))
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


@pytest.mark.browser
def test_a_tour_step_is_named_above_its_figures_and_says_where_its_text_went(page, zoo_server):
    """The step's title sits over the figures at both sizes; on a window that puts the step's text under the
    figures (1000x800, sidebar open) a note beside the title says so, and on a wide one it is hidden."""
    try:
        for (width, height), shown in [((1000, 800), True), ((1400, 900), False)]:
            page.set_viewport_size({"width": width, "height": height})
            page.goto(f"{zoo_server}/tour?lesson=s5-word-problem&step=3")
            page.wait_for_selector(CHART, state="attached", timeout=120_000)
            wait_idle(page)
            title = page.locator(".st-key-tour-head h3").first
            assert title.inner_text().startswith("3. Back to the identity")
            assert title.bounding_box()["y"] < page.locator(".js-plotly-plot").first.bounding_box()["y"]
            note = page.locator(".gl-tour-note").first
            assert note.is_visible() == shown, (width, note.inner_text())
            if shown:
                assert "question under the figures" in note.inner_text()
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


def _cursor_at(pg) -> int:
    """The page's cursor, read from its context line ("… cursor at 37 (“o”) …")."""
    return int(pg.get_by_text("cursor at ").first.inner_text().split("cursor at ")[1].split()[0])


@pytest.mark.browser
def test_clicking_a_heatmap_cell_moves_the_cursor_and_every_chart_follows(page, zoo_server):
    """Linked charts: a click on a cell of the attention map (rows are query positions) moves the page's
    cursor to that row; the slider, the caption and the other charts (the cursor's attention over the text)
    follow, in place."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/attention?ckpt=bundled%2Fcem-t2-tinyshakespeare&pos=5")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    assert _cursor_at(page) == 5
    n_tokens = int(page.get_by_text(" tokens · cursor at").first.inner_text().split(" tokens")[0].split("·")[-1])
    first = page.locator(".js-plotly-plot").first
    first.evaluate("el => { el.__marked = true; }")  # the same node after the click: updated, not rebuilt
    other = page.locator(".js-plotly-plot").nth(1)
    before = other.evaluate("el => JSON.stringify(el.data.map(t => t.y || t.z))")
    box = first.locator(".nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + 0.15 * box["width"], box["y"] + 0.8 * box["height"])
    page.wait_for_function("() => !document.body.innerText.includes('cursor at 5 ')", timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(500)
    pos = _cursor_at(page)
    assert abs(pos - 0.8 * (n_tokens - 1)) <= 3, (pos, n_tokens)  # the clicked row
    assert first.evaluate("el => el.__marked === true")
    after = other.evaluate("el => JSON.stringify(el.data.map(t => t.y || t.z))")
    assert after != before
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_a_click_on_compares_charts_moves_its_cursor(page, zoo_server):
    """Compare's charts are linked too: a click on the surprisal chart, then on the first view chart,
    moves the shared cursor."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/compare?pos=37")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    page.wait_for_timeout(800)

    def cursor() -> int:
        return int(page.locator(".st-key-w_pos").first.inner_text().split("Token cursor")[-1].split("·")[0])

    assert cursor() == 37
    for where in (".st-key-compare-surprisal", "[class*='st-key-cmp-']"):  # the surprisal chart, the first view chart
        chart = page.locator(f"{where} .js-plotly-plot").first
        chart.scroll_into_view_if_needed()
        before = cursor()
        box = chart.locator(".nsewdrag").first.bounding_box()
        page.mouse.click(box["x"] + 0.3 * box["width"], box["y"] + 0.5 * box["height"])
        page.wait_for_function(f"() => !document.querySelector('.st-key-w_pos').innerText.includes('{before} ·')",
                               timeout=60_000)
        wait_idle(page)
        assert cursor() != before, where
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
@pytest.mark.parametrize("width", [1000, 1400])
def test_square_maps_keep_their_colour_bar_beside_them(page, zoo_server, width):
    """The attention view's first map and Compare's maps side by side: each square map's colour bar is within
    20 px of its plot area (its chart narrowed to the map, no blank between them) and no blank stands under
    it (a chart that can grow no wider has its height follow the map), at 1,400 px and at 1,000 px, where
    the view's side column and Compare's second column wrap under the map."""
    page.set_viewport_size({"width": width, "height": 900})
    try:
        for path, where, n in (("attention", "", 1), ("compare?layout=side&view=attention", "[class*='st-key-cmp-']", 2)):
            page.goto(f"{zoo_server}/{path}")
            page.wait_for_selector(CHART, state="attached", timeout=120_000)
            wait_idle(page)
            page.wait_for_timeout(800)
            maps = page.locator(f"{where} .js-plotly-plot".strip()).filter(has=page.locator(".colorbar"))
            assert maps.count() >= n, path
            for i in range(n):
                m = maps.nth(i)
                m.scroll_into_view_if_needed()
                plot, bar = m.locator(".nsewdrag").first.bounding_box(), m.locator(".colorbar").first.bounding_box()
                gap = bar["x"] - (plot["x"] + plot["width"])
                assert 0 <= gap <= 20, (path, width, i, plot, bar)
                assert abs(plot["width"] - plot["height"]) <= 0.05 * plot["height"], (path, width, i, plot)
                # under the map only its tick labels and axis title (~70 px): a map held by its chart's width
                # (Compare's side by side at 1,400 px) has the chart's height follow it, no blank below
                box = m.bounding_box()
                assert box["y"] + box["height"] - (plot["y"] + plot["height"]) <= 90, (path, width, i, box, plot)
            if path.startswith("compare"):  # the note that the columns wrapped shows exactly when they did
                a, b = maps.nth(0).bounding_box(), maps.nth(1).bounding_box()
                wrapped = b["y"] > a["y"] + a["height"] - 5
                assert wrapped == (width == 1000)
                assert page.locator(".gl-wrap-note").is_visible() == wrapped, width
        # A above B: a square map's wrapped title ends short of the toolbar a hover shows at its top right
        page.goto(f"{zoo_server}/compare?view=attention")
        page.wait_for_selector(CHART, state="attached", timeout=120_000)
        wait_idle(page)
        _title_clears_the_toolbar(page.locator("[class*='st-key-cmp-stk'] .js-plotly-plot").first, width)
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


TITLE_LINES_JS = """(el) => { const t = el.querySelector('.gtitle'), lines = t.querySelectorAll('tspan.line');
  return [...(lines.length ? lines : [t])].map((n) => { const b = n.getBoundingClientRect();
    return { left: b.left, right: b.right, top: b.top, bottom: b.bottom }; }); }"""


def _title_clears_the_toolbar(chart, where) -> list[dict]:
    """Hover ``chart`` (its toolbar shows) and check that every line of its title ends left of the toolbar
    or lies below its band; returns the lines' boxes."""
    chart.scroll_into_view_if_needed()
    chart.hover(position={"x": 40, "y": 200})
    chart.page.wait_for_timeout(400)
    bar = chart.locator(".modebar").first.bounding_box()
    assert chart.locator(".modebar").first.evaluate("e => getComputedStyle(e).opacity") == "1", where
    lines = chart.evaluate(TITLE_LINES_JS)
    for ln in lines:
        assert ln["right"] <= bar["x"] or ln["top"] >= bar["y"] + bar["height"], (where, ln, bar)
    return lines


@pytest.mark.browser
@pytest.mark.parametrize("size", [(1400, 900), (1000, 800)], ids=["1400x900", "1000x800"])
def test_a_half_width_charts_title_ends_short_of_the_toolbar(page, zoo_server, size):
    """Titles wrap to the width their chart has in the browser: the half-width "State trajectory (2-D PCA)"
    and "Energy of layer 3 per step, before and after" (What if's energy steps), hovered so their toolbar
    shows, have every title line end left of the toolbar or lie below its band; at 1000x800 the first
    wraps onto a second line, under the first."""
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    try:
        for path, start in (("trajectories", "State trajectory"),
                            ("energy?wi=energy_steps&wis=4", "Energy of layer 3 per step")):
            page.goto(f"{zoo_server}/{path}")
            page.wait_for_selector(CHART, state="attached", timeout=120_000)
            wait_idle(page)
            page.wait_for_timeout(800)
            chart = page.locator(".js-plotly-plot").filter(has=page.locator(".gtitle", has_text=start)).first
            lines = _title_clears_the_toolbar(chart, (path, size))
            if path == "trajectories" and width == 1000:
                assert len(lines) == 2 and lines[1]["top"] >= lines[0]["bottom"] - 1, lines
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


@pytest.mark.browser
def test_on_a_390_px_window_subplot_titles_wrap_and_ticks_stay_level(page, zoo_server):
    """At 390x844 the Grassmann planes chart's subplot titles wrap to its width (every annotation's text
    lies inside the chart's box; centred, "offset slot 0: planes of pairs ..." was cut at both ends) and its
    token tick labels, thinned, stay horizontal (no rotate in their transform); at 1000 px it is two lines again."""
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        page.goto(f"{zoo_server}/planes")
        page.wait_for_selector(CHART, state="attached", timeout=120_000)
        wait_idle(page)
        page.wait_for_timeout(800)
        chart = page.locator(".js-plotly-plot").filter(
            has=page.locator(".gtitle", has_text="Grassmann plane deformations")).first
        box = chart.bounding_box()
        notes = chart.evaluate("el => [...el.querySelectorAll('.annotation-text')].map((n) => {"
                               " const b = n.getBoundingClientRect(); return [n.textContent, b.left, b.right]; })")
        assert any("offset slot" in t for t, _, _ in notes), notes
        for text, left, right in notes:
            assert box["x"] <= left and right <= box["x"] + box["width"], (text, left, right, box)
        turned = chart.evaluate("el => [...el.querySelectorAll('.xtick text')]"
                                ".filter((n) => (n.getAttribute('transform') || '').includes('rotate')).length")
        assert turned == 0
        page.set_viewport_size({"width": 1000, "height": 800})  # fitted again: the figure's own two lines
        page.wait_for_timeout(1500)
        lines = chart.evaluate("el => [...el.querySelectorAll('.annotation-text')].find((n) =>"
                               " n.textContent.includes('offset slot')).querySelectorAll('tspan.line').length")
        assert lines == 2
    finally:
        page.set_viewport_size({"width": 1400, "height": 1000})


@pytest.mark.browser
def test_a_click_anywhere_in_a_positions_column_of_a_line_chart_moves_the_cursor(page, zoo_server):
    """On a line chart along the positions (the geodesic distances), a click well away from every line (over
    25 px from each point in that column, so Plotly's "closest" point would be none) moves the cursor to
    the position of the clicked column."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/trajectories?pos=37")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    chart = page.locator(".js-plotly-plot").filter(has=page.locator(".gtitle", has_text="Geodesic distances")).first
    chart.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    x, y, away = chart.evaluate("""(p) => { const fl = p._fullLayout, box = fl._paper.node().getBoundingClientRect();
      const xa = fl.xaxis, ya = fl.yaxis, px = xa._offset + xa.l2p(20);
      const ys = p._fullData.filter((t) => (t.yaxis || 'y') === 'y' && t.visible === true)
        .flatMap((t) => [...t.x].map((x, i) => [x, t.y[i]]).filter(([x]) => x === 20).map(([, y]) => ya._offset + ya.l2p(y)));
      let best = null;
      for (let y = ya._offset + 4; y <= ya._offset + ya._length - 4; y += 2) {
        const d = Math.min(...ys.map((v) => Math.abs(v - y)));
        if (!best || d > best[1]) best = [y, d];
      }
      return [box.left + px, box.top + best[0], best[1]]; }""")
    assert away > 25, away
    page.mouse.click(x, y)
    page.wait_for_function("() => document.body.innerText.includes('cursor at 20 ')", timeout=60_000)
    wait_idle(page)
    assert _cursor_at(page) == 20
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_a_long_text_shows_full_resolution_positions_around_the_cursor(page, zoo_server):
    """2,000 characters: the attention map draws the 128 consecutive positions around the cursor (every one,
    not every 8th), the overview strip draws the whole text with the window on it, and a click on the
    overview moves the cursor and the window there."""
    from urllib.parse import urlencode

    text = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun. "
            * 25)[:2000]
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/attention?" + urlencode({"ckpt": "bundled/cem-t2-tinyshakespeare", "text": text,
                                                       "pos": 1000}))
    page.wait_for_selector(CHART, state="attached", timeout=180_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    maps = page.locator(".js-plotly-plot").first
    rows = maps.evaluate("el => el.data[0].y")
    positions = [int(str(r).split()[0]) for r in rows]
    assert positions == list(range(positions[0], positions[0] + 128)) and positions[0] <= 1000 < positions[-1]
    assert page.get_by_text("at full resolution").count() >= 1
    overview = page.locator(".js-plotly-plot").filter(has_text="Whole text").first
    assert overview.evaluate("el => el._fullData[0].x.length") == 2000
    box = overview.locator(".nsewdrag").first.bounding_box()
    page.mouse.click(box["x"] + 0.1 * box["width"], box["y"] + 0.5 * box["height"])
    page.wait_for_function("() => !document.body.innerText.includes('cursor at 1000 ')", timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(500)
    assert _cursor_at(page) < 400
    rows = maps.evaluate("el => el.data[0].y")
    assert int(str(rows[0]).split()[0]) < 400


def _eigenvalue_circle(page, zoo_server, query: dict):
    """/trajectories opened with ``query`` at 1400x900, drawn and idle; its eigenvalue circle (a locator),
    scrolled into view."""
    from urllib.parse import urlencode

    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/trajectories?{urlencode(query)}")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    plot = page.locator(".js-plotly-plot").filter(has_text=f"Eigenvalues at {query['pos']}").first
    plot.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    return plot


@pytest.mark.browser
def test_hovering_a_cursor_ring_names_the_cursor_not_a_dot_under_it(page, zoo_server):
    """The eigenvalue circle's cursor rings lie over the grey trail's dots of nearby positions: a hover on a
    ring (its centre or its edge) shows the ring's own name (the cursor's position, λk, θ), and a trail dot
    away from the rings still answers with its own position."""
    plot = _eigenvalue_circle(page, zoo_server, {"pos": 37})
    marks = plot.evaluate("""(p) => { const fl = p._fullLayout, box = fl._paper.node().getBoundingClientRect();
      const at = (x, y) => [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + fl.yaxis.l2p(y)];
      const rings = fl.shapes.filter((s) => s.type === "circle").map((s) => [s.name, ...at(s.xanchor, s.yanchor)]);
      const t = p._fullData[1], dots = [];
      for (let i = 0; i < t.x.length; i++) {
        const [x, y] = at(t.x[i], t.y[i]);
        if (rings.every((r) => Math.hypot(r[1] - x, r[2] - y) > 10)) dots.push([x, y]);
      }
      return { rings, dots: dots.slice(0, 3) }; }""")
    assert len(marks["rings"]) >= 2 and marks["dots"]

    def hover(x: float, y: float) -> str:
        page.mouse.move(x, y)
        page.wait_for_timeout(150)
        return plot.locator(".hoverlayer").first.text_content() or ""

    for name, x, y in marks["rings"]:
        assert name.startswith("cursor 37 ")
        for dx, dy in ((0, 0), (4, 0), (0, -4)):
            assert hover(x + dx, y + dy) == name
    for x, y in marks["dots"]:
        assert hover(x, y).startswith("position ")


@pytest.mark.browser
def test_a_click_on_a_dot_under_a_cursor_ring_moves_the_cursor_there(page, zoo_server):
    """The rings hold the hover of the trail's dots under them back (see the hover test above), and with it
    Plotly's click: a click on such a dot, away from the ring's centre, still moves the cursor to the dot's
    position."""
    plot = _eigenvalue_circle(page, zoo_server, {"text": TEXT * 4, "pos": 300})  # a trail of 128 positions
    dot = plot.evaluate("""(p) => { const fl = p._fullLayout, box = fl._paper.node().getBoundingClientRect();
      const at = (x, y) => [box.left + fl.xaxis._offset + fl.xaxis.l2p(x), box.top + fl.yaxis._offset + fl.yaxis.l2p(y)];
      const rings = fl.shapes.filter((s) => s.type === "circle").map((s) => [...at(s.xanchor, s.yanchor),
        Math.max(Math.abs(s.x1 - s.x0), Math.abs(s.y1 - s.y0)) / 2]);
      const t = p._fullData[1], dots = [];
      for (let i = 0; i < t.x.length; i++) dots.push([...at(t.x[i], t.y[i]), t.customdata[i][0]]);
      for (const [x, y, pos] of dots) {
        const inRing = rings.some(([cx, cy, r]) => { const d = Math.hypot(cx - x, cy - y); return d > 4 && d < r; });
        const alone = dots.every(([x2, y2, p2]) => p2 === pos || Math.hypot(x2 - x, y2 - y) > 2);
        if (pos !== 300 && inRing && alone) return [x, y, pos];
      }
      return null; }""")
    assert dot is not None, "no trail dot of another position lies under a ring"
    x, y, pos = dot
    page.mouse.click(x, y)
    page.wait_for_function(f"() => document.body.innerText.includes('cursor at {int(pos)} ')", timeout=60_000)


DRAWS_JS = """(() => { window.__draws = []; let P;
  Object.defineProperty(window, "Plotly", { configurable: true, get() { return P; }, set(v) { P = v;
    if (v.__counted) return; v.__counted = true; const draw = v.newPlot;
    v.newPlot = function (gd, ...rest) {
      const d = { top: gd.getBoundingClientRect().top, drawnThen: null };
      window.__draws.push(d);
      setTimeout(() => { d.drawnThen = document.querySelectorAll(".js-plotly-plot").length; }, 0);
      return draw.call(v, gd, ...rest); }; } }); })();"""


@pytest.mark.browser
def test_a_pages_first_chart_is_drawn_first_and_alone(page, zoo_server):
    """A fresh /trajectories draws its four charts for the first time one per task, the highest first: the
    task queued as the first draw begins runs while that chart is the only one drawn, so the first chart is
    painted without waiting for the charts below it. Two page loads at most: on a machine busy with other
    work (a campaign's runs beside the suite) a lower chart's frame can arrive first once."""
    for attempt in range(2):
        ctx = page.context.browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            ctx.add_init_script(DRAWS_JS)
            fresh = ctx.new_page()
            fresh.goto(f"{zoo_server}/trajectories")
            fresh.wait_for_function("() => window.__draws.length >= 4 && window.__draws.every((d) => d.drawnThen)",
                                    timeout=120_000)
            draws = fresh.evaluate("window.__draws")
        finally:
            ctx.close()
        if draws[0]["top"] == min(d["top"] for d in draws) or attempt == 1:
            break
    assert draws[0]["top"] == min(d["top"] for d in draws), draws
    assert draws[0]["drawnThen"] == 1


@pytest.mark.browser
def test_the_what_if_slider_changes_the_prediction_bars(page, zoo_server):
    """The What-if panel on an OSM-RNN: at size 0 the bars after equal those before; moving the size slider
    (keyboard) re-runs the model with the steered state and the bars after change, before stay."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/trajectories?ckpt=bundled%2Fosm-rnn-o-tinyshakespeare&pos=30&wi=steer&wis=0")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    guesses = page.locator(".js-plotly-plot").filter(has_text="Next token after position")
    guesses.first.wait_for(timeout=60_000)

    def bars():  # {"before": {token: probability}, "after": {...}}
        return guesses.first.evaluate("el => Object.fromEntries(el._fullData.map(t => [t.name, Object.fromEntries("
                                      "Array.from(t.y).map((y, i) => [y, t.x[i]]))]))")

    first = bars()
    assert first["before"] == first["after"]
    slider = page.locator('[data-testid="stSlider"]').filter(has_text="step ε").get_by_role("slider")
    slider.focus()
    for _ in range(10):
        slider.press("ArrowRight")  # 10 steps of 0.05: ε = 0.5
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(el => el.textContent.includes("
        "'Next token after position') && el._fullData && JSON.stringify(Array.from(el._fullData[0].x)) !== "
        "JSON.stringify(Array.from(el._fullData[1].x)))", timeout=60_000)
    wait_idle(page)
    after = bars()
    assert after["after"] != first["after"]
    # the tokens listed are the union of both top-k, so new ones may join: the plain run's own values stay
    assert all(after["before"][k] == v for k, v in first["before"].items() if k in after["before"])
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_the_patching_heatmap_follows_its_slider(page, zoo_server):
    """The patching sweep on the bundled transformer: a layers x positions heatmap; moving the "Read the
    prediction at position" slider runs the sweep for the new target and the heatmap changes."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{zoo_server}/attention?ckpt=bundled%2Ftransformer-alibi-tinyshakespeare&pos=30&patch=e&pat=31")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    heat = page.locator(".js-plotly-plot").filter(has_text="Patching: where the difference lives")
    heat.first.wait_for(timeout=60_000)

    def cells():
        return heat.first.evaluate("el => JSON.stringify([el._fullData[0].x, el._fullData[0].z].map(a => Array.from(a)"
                                   ".map(r => r.length !== undefined ? Array.from(r) : r)))")

    first = cells()
    slider = page.locator('[data-testid="stSlider"]').filter(has_text="Read the prediction at").get_by_role("slider")
    slider.focus()
    for _ in range(3):
        slider.press("ArrowRight")
    page.wait_for_function("() => location.search.includes('pat=') && !location.search.includes('pat=31')", timeout=60_000)
    wait_idle(page)
    page.wait_for_timeout(800)
    assert cells() != first
    assert page.locator('[data-testid="stException"]').count() == 0
