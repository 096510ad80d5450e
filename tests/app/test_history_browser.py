"""The browser's Back and Forward buttons on a view page (``app_pages/_state.browser_history``,
``app_pages/js/history.js``): each What-if change is a history entry, a cursor move is not, and Back / Forward
undo and redo the What-if state in the page itself (the switch, the size slider, the panel's charts), not
only in the address bar. Real chromium on the bundled zoo (``test_browser``'s server)."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import pytest

from helpers.browser import browser_exe  # noqa: F401 (a fixture)
from test_browser import CHART, wait_idle, zoo_server  # noqa: F401 (a fixture)

GUESSES = "Next token after position"  # the title of the What-if panel's first chart


@pytest.fixture(scope="module")
def page(zoo_server, browser_exe):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_exe, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--no-first-run"])
        pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        pg.set_default_timeout(90_000)
        yield pg
        browser.close()


def shown(pg) -> dict:
    """What the page shows of the What-if state: the switch, the size slider's value, whether the panel's
    guesses chart is drawn, and the URL's path and its ``wi``, ``wis`` and ``pos``."""
    switch = pg.locator('[data-testid="stCheckbox"]').filter(has_text="What if").locator("input")
    slider = pg.locator('[data-testid="stSlider"]').filter(has_text="step ε").get_by_role("slider")
    qp = parse_qs(urlsplit(pg.url).query)
    return {"on": switch.first.is_checked(),
            "size": slider.first.input_value() if slider.count() else None,
            "chart": pg.locator(".js-plotly-plot").filter(has_text=GUESSES).count() > 0,
            "url": {k: qp[k][0] for k in ("wi", "wis", "pos") if k in qp}, "path": urlsplit(pg.url).path}


def until(pg, want: dict, timeout: float = 90) -> dict:
    """Wait until :func:`shown` has every item of ``want`` (and the app's run is over); return it."""
    end = time.monotonic() + timeout
    while True:
        wait_idle(pg)
        got = shown(pg)
        if all(got[k] == v for k, v in want.items()) or time.monotonic() > end:
            assert all(got[k] == v for k, v in want.items()), (want, got)
            return got
        pg.wait_for_timeout(300)


@pytest.mark.browser
def test_back_and_forward_undo_and_redo_what_if(page, zoo_server):
    """A cursor move adds no history entry, each What-if change (the switch, a slider step) one; Back undoes
    them in the page (the size, then the switch and its panel), Forward redoes them."""
    page.goto(f"{zoo_server}/trajectories?ckpt=bundled%2Fosm-rnn-o-tinyshakespeare&pos=30")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    until(page, {"on": False, "chart": False})
    entries = page.evaluate("history.length")
    cursor = page.locator('[data-testid="stSlider"]').filter(has_text="Token cursor").get_by_role("slider")
    cursor.focus()
    cursor.press("ArrowRight")  # a cursor move replaces the entry
    until(page, {"url": {"pos": "31"}})
    assert page.evaluate("history.length") == entries
    page.locator('[data-testid="stCheckbox"]').filter(has_text="What if").locator("label").first.click()
    first = until(page, {"on": True, "chart": True})
    assert first["url"]["wi"] == "steer" and first["url"]["wis"] == first["size"]
    size = page.locator('[data-testid="stSlider"]').filter(has_text="step ε").get_by_role("slider")
    size.focus()
    size.press("ArrowRight")
    page.wait_for_function("w => new URLSearchParams(location.search).get('wis') !== w", arg=first["size"])
    second = until(page, {"on": True, "chart": True})
    assert second["size"] != first["size"] and second["url"]["wis"] == second["size"]
    cursor.focus()
    cursor.press("ArrowRight")  # moves the intervention with it: still no entry of its own
    until(page, {"url": {"pos": "32", "wi": "steer", "wis": second["size"]}})
    assert page.evaluate("history.length") == entries + 2

    page.go_back()  # the size before the slider moved
    until(page, {"on": True, "chart": True, "size": first["size"]})
    page.go_back()  # What if off again, as before the switch
    off = until(page, {"on": False, "chart": False, "size": None})
    assert "wi" not in off["url"] and "wis" not in off["url"]
    page.go_forward()
    until(page, {"on": True, "chart": True, "size": first["size"], "url": {"pos": "31", "wi": "steer",
                                                                          "wis": first["size"]}})
    page.go_forward()
    until(page, {"on": True, "chart": True, "size": second["size"]})
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_back_from_another_view_returns_to_the_what_if_state(page, zoo_server):
    """A page switch from the sidebar is one entry (Streamlit's bare address for the new page is replaced by
    the one its run writes, not kept as a What-if state of its own): one Back returns to the view as it was."""
    page.goto(f"{zoo_server}/trajectories?ckpt=bundled%2Fosm-rnn-o-tinyshakespeare&pos=30&wi=steer&wis=0.7")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    until(page, {"on": True, "chart": True, "size": "0.7"})
    entries = page.evaluate("history.length")
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Attention").first.click()
    until(page, {"path": "/attention", "on": True})
    assert page.evaluate("history.length") == entries + 1
    page.go_back()
    until(page, {"path": "/trajectories", "on": True, "chart": True, "size": "0.7",
                 "url": {"pos": "30", "wi": "steer", "wis": "0.7"}})
    assert page.locator('[data-testid="stException"]').count() == 0


@pytest.mark.browser
def test_a_cursor_move_on_compare_adds_no_entry(page, zoo_server):
    """Compare keeps one history entry per visit: a cursor move replaces it, and Back leaves the page."""
    page.goto(f"{zoo_server}/trajectories?ckpt=bundled%2Fosm-rnn-o-tinyshakespeare&pos=30")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    until(page, {"path": "/trajectories", "on": False})
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text="Compare").first.click()
    page.wait_for_function("location.pathname === '/compare' && location.search.includes('pos=30')")
    page.wait_for_selector(CHART, state="attached", timeout=120_000)
    wait_idle(page)
    entries = page.evaluate("history.length")
    cursor = page.locator('[data-testid="stSlider"]').filter(has_text="Token cursor").get_by_role("slider")
    cursor.first.focus()
    cursor.first.press("ArrowRight")
    page.wait_for_function("new URLSearchParams(location.search).get('pos') === '31'")
    wait_idle(page)
    assert page.evaluate("history.length") == entries
    page.go_back()
    until(page, {"path": "/trajectories", "on": False})


@pytest.mark.browser
def test_one_back_returns_home_after_a_click_while_home_loads(page, zoo_server):
    """A sidebar click while Home is still loading (right away, or while the browser draws Home's charts) is
    one history entry: one Back returns to Home, the next leaves the app. The next page's address pushed on
    Home's path (as Streamlit does when the page switch reaches a busy browser out of order) adds no entry; a
    view opened from a bare link, which the app completes, is one entry too."""
    def fresh(path: str):
        ctx = page.context.browser.new_context(viewport={"width": 1400, "height": 900})
        pg = ctx.new_page()
        pg.set_default_timeout(90_000)
        pg.goto("about:blank")
        pg.goto(f"{zoo_server}{path}")
        return ctx, pg

    for delay in (0, 1500):
        ctx, pg = fresh("/")
        link = pg.locator('[data-testid="stSidebarNav"] a').filter(has_text="Trajectories").first
        link.wait_for()
        pg.wait_for_timeout(delay)
        link.click()
        pg.wait_for_function("location.pathname === '/trajectories' && location.search.includes('ckpt=')")
        wait_idle(pg)
        pg.go_back()
        wait_idle(pg)
        assert urlsplit(pg.url).path == "/" and not urlsplit(pg.url).query, (delay, pg.url)
        pg.evaluate("history.pushState({}, '', '/?ckpt=x&pos=3')")
        assert not urlsplit(pg.url).query, (delay, pg.url)
        pg.go_back()
        pg.wait_for_function("location.href === 'about:blank'", timeout=10_000)
        ctx.close()
    ctx, pg = fresh("/trajectories")
    pg.wait_for_function("location.search.includes('ckpt=')")
    wait_idle(pg)
    pg.go_back()
    pg.wait_for_function("location.href === 'about:blank'", timeout=10_000)
    ctx.close()
