"""Lesson handouts (geomlab.teach.handout): one self-contained HTML file with every step's figures, notice and
question, the answers at the end, and its PDF; ``python -m geomlab handout``. The figures' PNGs are stood in
for by a one-pixel image here (kaleido is slow); ``tests/app/test_rooms_browser.py`` looks at real ones."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.core.markup import to_plain
from geomlab.teach import handout, lessons
from test_tours import ASSETS, zoo  # noqa: F401  (the bundled zoo)

pytestmark = pytest.mark.skipif(not (ASSETS / "osm-rnn-o-s5" / "model.safetensors").is_file(), reason="bundled zoo not present")
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
LESSON = lessons.LESSONS["s5-word-problem"]


def fake_pngs(figures, folder: Path):
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in figures:
        (folder / f"{name}.png").write_bytes(PNG)
        out[name] = folder / f"{name}.png"
    fake_pngs.names.extend(figures)
    return out


fake_pngs.names = []


@pytest.fixture(scope="module")
def page(zoo):  # noqa: F811
    entries, _ = zoo
    fake_pngs.names.clear()
    return handout.build_html(LESSON, entries=entries, image_maker=fake_pngs), list(fake_pngs.names)


def md_html_plain(markdown: str) -> str:
    """A notice as the handout's text shows it (its HTML without tags)."""
    return re.sub(r"<[^>]+>", "", handout.md_html(markdown))


def words(markdown: str) -> str:
    """The first few words of a lesson's markdown as plain text (what the handout must show)."""
    plain = re.sub(r"[*`]", "", to_plain(markdown))
    return " ".join(plain.split()[:4])


def test_the_handout_holds_every_step_its_figures_notice_and_question(page):
    html, names = page
    text = re.sub(r"<[^>]+>", "", html)
    steps, answers = html.split("<h2>Answers</h2>", 1)
    for i, step in enumerate(LESSON.steps):
        assert f"{i + 1}. {step.title}".replace("'", "&#x27;") in html
        assert words(step.notice) in text
        # a step that asks keeps its notice (which may give the answer) for the answers at the end
        notice = md_html_plain(step.notice)
        assert (notice in re.sub(r"<[^>]+>", "", answers)) == (step.question is not None)
        assert (notice in re.sub(r"<[^>]+>", "", steps)) == (step.question is None)
        # on paper the cursor is the step's position, named, and the orange line is said to mark it
        assert f"cursor at position {step.cursor} (positions count from 0; the orange line" in text
    assert html.count("<img ") == len(names) > len(LESSON.steps)
    assert html.count("data:image/png;base64,") == len(names)
    q = [s.question for s in LESSON.steps if s.question is not None]
    assert text.count("Question.") == len(q)
    answers = html.split("<h2>Answers</h2>", 1)[1]
    assert answers.count("<li>") == len(q)
    choice = next(x for x in q if hasattr(x, "options"))
    assert f"A. {words(choice.options[choice.answer])}".split()[0] in re.sub(r"<[^>]+>", "", answers)


def test_the_handout_is_self_contained(page):
    html, _ = page
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", html)
    assert "**" not in re.sub(r"<[^>]+>", "", html)  # markdown rendered, not shown raw


def test_a_rooms_path_keeps_its_order_and_a_bad_step_is_refused(zoo):  # noqa: F811
    entries, _ = zoo
    html = handout.build_html(LESSON, [2, 0], entries=entries, image_maker=fake_pngs)
    t2, t0 = (html.find(f"{i + 1}. {LESSON.steps[i].title}".replace("'", "&#x27;")) for i in (2, 0))
    assert 0 < t2 < t0 and f"2. {LESSON.steps[1].title}" not in html
    with pytest.raises(handout.HandoutError, match="steps 1..5; no step 9"):
        handout.build_html(LESSON, [8], entries=entries, image_maker=fake_pngs)
    with pytest.raises(handout.HandoutError, match="needs checkpoint"):
        handout.build_html(LESSON, [0], entries={}, image_maker=fake_pngs)


def test_markdown_and_formulas_become_html_and_raw_html_is_escaped():
    assert handout.md_html("**a** $x_1$ `c` <b>x</b>") == \
        "<strong>a</strong> <i>x<sub>1</sub></i> <code>c</code> &lt;b&gt;x&lt;/b&gt;"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_the_pdf_has_a_page_per_step(page, tmp_path):
    html, _ = page
    (tmp_path / "h.html").write_text(html, encoding="utf-8")
    pdf = handout.write_pdf(tmp_path / "h.html", tmp_path / "h.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page[^s]", pdf)) >= len(LESSON.steps) + 1  # a page per step, the answers


def test_the_command_refuses_an_unknown_lesson_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "geomlab", "handout", "nope", "--out", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: handout: no lesson 'nope' (one of s5-word-problem, attention-similarity, cem-energy, grassmann-planes)"]
    assert list(tmp_path.iterdir()) == []


def test_a_what_if_step_carries_its_intervention_and_a_comparison_names_each_side(zoo):  # noqa: F811
    entries, _ = zoo
    what_if = next(i for i, s in enumerate(LESSON.steps) if s.whatif)
    figs = handout.step_figures(LESSON.steps[what_if], entries)
    assert {"whatif_guesses", "whatif_effect"} <= set(figs)
    assert "Running product at position 5" in figs["whatif_guesses"].layout.title.text
    # on paper the orange line that marks the cursor is drawn over the bars, so the cursor's bar cannot hide it
    cursor = [sh for sh in figs["whatif_effect"].layout.shapes if sh.name == "cursor"]
    assert cursor and all(sh.layer == "above" for sh in cursor)
    both = next(s for s in LESSON.steps if s.title == "Back to the identity")  # one view figure, two sides
    figs = handout.step_figures(both, entries)
    titles = [f.layout.title.text for f in figs.values()]
    assert len(titles) == 2 and titles[0] != titles[1]
    assert all(t.startswith(entries[ref].name + ":") for t, ref in zip(titles, both.checkpoints))
