"""The classroom in a real browser: one app server on the bundled zoo sharing rooms through a real
``redis-server``, a teacher and two students in separate playwright contexts (separate sessions, cookies and
storage). The teacher opens a room; the students join by its link and follow the cursor, the page (view) and
the Tour's steps; a student explores and comes back; a student cannot drive the room (URL parameters, a
guessed token); two students answer a question and the teacher's tally shows 2. The room's state is read
from Redis by the test itself, an independent witness of what the teacher's session wrote."""

from __future__ import annotations

import os
import re
import shutil
import time

import pytest

from geomlab import rooms
from geomlab.teach import lessons
from helpers.browser import browser_exe  # noqa: F401 (a fixture)
from helpers.redis_server import RedisServer
from test_browser import ARTIFACTS, ROOT, _streamlit, wait_idle

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not (ROOT / "assets" / "checkpoints" / "osm-rnn-o-s5" / "model.safetensors").is_file(),
                                 reason="bundled zoo not present")]
LESSON = "s5-word-problem"
QUESTION_STEP = 1  # a Choice (tests/teach/test_questions.py checks its answer)
THUMB = "[data-testid='stMain'] [data-testid='stSliderThumbValue']"  # the token cursor's value, "4 · 10234"
SIDEBAR = "section[data-testid='stSidebar']"
#: The cursor's marks (shapes, annotations) of the main area's first chart as drawn, a JavaScript function.
CHART_MARKS = ("() => { const p = document.querySelector(\"[data-testid='stMain'] .geomlab-plot\"); "
               "const l = p && p.layout; return l ? [l.shapes || [], l.annotations || []] : null; }")
CATCH_UP_S = 8  # GEOMLAB_ROOM_CATCH_UP_S here: a student's session catches up 8-16 s after its charts


@pytest.fixture(scope="module")
def room_server(browser_exe, tmp_path_factory):
    """``(base URL, redis URL)``: the app on the zoo with ``GEOMLAB_ROOMS_URL`` set to a fresh redis-server."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    root = tmp_path_factory.mktemp("rooms-browser")
    redis = RedisServer(root).start()
    env = {k: v for k, v in os.environ.items() if k != "GEOMLAB_BUNDLED_DIR"}
    env.update(GEOMLAB_RUNS_DIR=str(root / "runs"), GEOMLAB_ROOMS_URL=redis.url, GEOMLAB_WARM_WAIT_S="0",
               GEOMLAB_ROOM_CATCH_UP_S=str(CATCH_UP_S))
    try:
        with _streamlit(root, env) as url:
            yield url, redis.url
    finally:
        redis.stop()


@pytest.fixture(scope="module")
def browser(room_server, browser_exe):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser_exe, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
        yield b
        b.close()


def new_page(browser, url: str):
    pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    pg.set_default_timeout(60_000)
    pg.goto(url)
    wait_idle(pg)
    return pg


def classroom(pg):
    """The sidebar's Classroom box, opened."""
    box = pg.locator(f"{SIDEBAR} [data-testid='stExpander']").filter(has_text="Classroom")
    if box.locator("details[open]").count() == 0 and box.get_attribute("open") is None:
        summary = box.locator("summary")
        if box.locator("[data-testid='stExpanderDetails']").is_hidden():
            summary.click()
    return box


def room_code(pg) -> str:
    code = pg.locator(f"{SIDEBAR} code").filter(has_text=re.compile(r"^[0-9A-Z]{4}-[0-9A-Z]{4}$")).first
    code.wait_for()
    return code.inner_text().replace("-", "")


def step_titles(pg) -> list[str]:
    """The main area's h3 titles as drawn (a Tour step's title is one)."""
    return pg.locator("[data-testid='stMain'] h3").all_inner_texts()


def shots(*pages) -> None:
    """Screenshots of ``pages`` (teacher first) into the artifacts, for a failure's reader."""
    for i, pg in enumerate(pages):
        pg.screenshot(path=str(ARTIFACTS / f"room_fail{i}.png"))


def cursor(pg) -> int:
    return int(pg.locator(THUMB).first.inner_text().split("·")[0])


def until(check, timeout: float = 20.0) -> None:
    """Wait until ``check()`` is true (polled every 0.1 s); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def wait_for(pg, js: str, arg=None, timeout: float = 20_000) -> None:
    pg.wait_for_function(js, arg=arg, timeout=timeout)


def test_a_class_follows_its_teacher(room_server, browser):
    base, redis_url = room_server
    lesson = lessons.LESSONS[LESSON]
    store = rooms.open_store(redis_url)
    teacher = new_page(browser, f"{base}/tour?lesson={LESSON}&step=1")
    classroom(teacher).get_by_role("button", name="Start a room").click()
    code = room_code(teacher)
    classroom(teacher).get_by_role("button", name="Show code and QR").click()
    dialog = teacher.locator("[role='dialog']")
    qr = dialog.locator("img[alt='QR code']")
    qr.wait_for()
    assert qr.evaluate("i => i.complete && i.naturalWidth") >= 200  # drawn, large
    assert f"{code[:4]}-{code[4:]}" in dialog.inner_text() and f"?room={code}" in dialog.inner_text()
    teacher.screenshot(path=str(ARTIFACTS / "room_code_dialog.png"))
    teacher.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    until(lambda: (store.state(code).page, store.state(code).lesson) == ("tour", LESSON))

    students = [new_page(browser, f"{base}/?room={code}") for _ in range(2)]
    title0 = f"1. {lesson.steps[0].title}"
    for s in students:  # they land on the teacher's page and step
        wait_for(s, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))", title0)
        assert "/tour" in s.url and f"room={code}" in s.url
    wait_for(teacher, "() => /2 following/.test(document.body.innerText)", timeout=30_000)

    # the cursor: the teacher moves it with the keyboard; the students' charts follow through the follow
    # channel, before their sessions run (their sliders still show the old position), then their sliders
    before = [cursor(s) for s in students]
    teacher.locator("[data-testid='stMain'] input[type='range']").first.focus()
    t_move = time.monotonic()
    teacher.keyboard.press("ArrowRight")
    wait_idle(teacher)
    moved = cursor(teacher)
    assert moved == lesson.steps[0].cursor + 1
    marks = teacher.evaluate(CHART_MARKS)
    for s, old in zip(students, before):
        wait_for(s, f"m => JSON.stringify(({CHART_MARKS})()) === JSON.stringify(m)", marks, timeout=10_000)
        assert cursor(s) == old != moved  # the page's charts moved, its session has not run yet
    assert time.monotonic() - t_move < CATCH_UP_S  # (the session's catch-up waits at least that long)
    for s in students:
        wait_for(s, "a => { const e = document.querySelector(a[0]); return !!e && e.innerText.startsWith(a[1] + ' '); }",
                 [THUMB, moved], timeout=60_000)
    until(lambda: store.state(code).cursor == moved)

    # the Tour's step: the teacher's session writes it into the room, the students' pages show it
    teacher.get_by_role("button", name="Next").click()
    try:
        until(lambda: store.state(code).step == 1, timeout=30)
    except AssertionError:
        shots(teacher, *students)
        raise AssertionError(f"the teacher's Next did not reach the room: {store.state(code)}") from None
    title1 = f"2. {lesson.steps[1].title}"
    for i, s in enumerate(students):
        try:
            wait_for(s, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))", title1,
                     timeout=30_000)
        except Exception:
            shots(teacher, *students)
            raise AssertionError(f"student {i} shows {step_titles(s)} with the room at {store.state(code)}") from None

    # a question: two students answer, the teacher's tally shows 2, the reveal shows them the notice
    q = lesson.steps[QUESTION_STEP].question
    for s in students:
        s.locator("[data-testid='stRadio'] [role='radiogroup'] label").nth(q.answer).click()
    try:
        wait_for(teacher, "() => /Answers: 2/.test(document.body.innerText)", timeout=30_000)
    except Exception:
        shots(teacher, *students)
        raise AssertionError(str(store.tally(code, LESSON, QUESTION_STEP)) + str(store.state(code)))
    assert store.tally(code, LESSON, QUESTION_STEP).total == 2
    for s in students:
        assert "What to notice" not in s.locator("[data-testid='stMain']").inner_text()
    teacher.get_by_role("button", name="Reveal the answer").click()
    for s in students:
        wait_for(s, "() => /What to notice/.test(document.body.innerText) && /Right\\./.test(document.body.innerText)")

    # the view: the teacher opens the step in the full view page, the students go there too
    teacher.get_by_role("link", name="Open this in the full view").click()
    wait_idle(teacher)
    view = lesson.steps[1].view
    for s in students:
        s.wait_for_url(re.compile(rf"/{view}\b"), timeout=30_000)
    until(lambda: store.state(code).page == view)

    # a student explores: the teacher's moves no longer move them; "Follow the teacher" brings them back
    explorer, follower = students
    classroom(explorer).get_by_role("button", name="Explore on my own").click()
    wait_idle(explorer)
    wait_for(teacher, "() => /1 following · 1 exploring/.test(document.body.innerText)", timeout=30_000)
    # a move of its own (a fragment's run) keeps the room in its address: a reload stays in the room
    explorer.locator(".st-key-w_tok [role='radio'][aria-checked='false']").first.click()
    wait_idle(explorer)
    explorer.wait_for_timeout(500)
    assert f"room={code}" in explorer.url, explorer.url
    teacher.locator(SIDEBAR).get_by_role("link", name="Tour").click()  # back to the Tour, at its step 2
    wait_idle(teacher)
    teacher.get_by_role("button", name="Next").click()
    title2 = f"3. {lesson.steps[2].title}"
    wait_for(follower, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))", title2)
    explorer.wait_for_timeout(1500)
    assert f"/{view}" in explorer.url
    classroom(explorer).get_by_role("button", name="Follow the teacher").click()
    wait_for(explorer, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))", title2)

    # a student cannot drive: URL parameters change only their own session, a guessed token is refused
    before = store.state(code)
    rogue = new_page(browser, f"{base}/tour?room={code}&lesson={LESSON}&step=5&pos=0&token=guess&teacher=1")
    rogue.wait_for_timeout(1500)
    after = store.state(code)
    assert (after.step, after.cursor, after.version) == (before.step, before.cursor, before.version)
    with pytest.raises(rooms.RoomError, match="only the teacher"):
        store.update(code, "guess", step=4)
    assert store.state(code).version == before.version
    for pg, name in ((teacher, "room_teacher"), (follower, "room_student")):
        pg.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_the_presenter_view_fits_a_projector_and_steps_with_the_arrow_keys(room_server, browser, size):
    base, _ = room_server
    lesson = lessons.LESSONS[LESSON]
    pg = browser.new_context(viewport={"width": size[0], "height": size[1]}).new_page()
    pg.set_default_timeout(60_000)
    pg.goto(f"{base}/tour?lesson={LESSON}&step=1&present=1")
    wait_idle(pg)
    pg.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    assert pg.locator(SIDEBAR).is_hidden()
    main = pg.locator("[data-testid='stMain']").inner_text()
    assert "What to notice" in main and "Lesson" not in main  # the chart and the notice, not the Tour's controls
    size_px = pg.evaluate("() => parseFloat(getComputedStyle(document.querySelector("
                          "\"[data-testid='stMain'] [data-testid='stMarkdownContainer'] p\")).fontSize)")
    assert size_px >= 23  # large type (the app's is 16 px)
    pg.screenshot(path=str(ARTIFACTS / f"presenter_{size[0]}x{size[1]}.png"))
    pg.mouse.click(3, size[1] - 3)  # focus the page, away from the slider
    pg.keyboard.press("ArrowRight")
    wait_for(pg, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))",
             f"2. {lesson.steps[1].title}")
    assert "present=1" in pg.url
    wait_idle(pg)  # Back is enabled once the run that drew step 2 has finished
    pg.keyboard.press("ArrowLeft")
    wait_for(pg, "t => [...document.querySelectorAll('h3')].some(h => h.innerText.includes(t))",
             f"1. {lesson.steps[0].title}")
    pg.context.close()
