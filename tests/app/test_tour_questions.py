"""The Tour's questions through AppTest, alone (no room): the question comes before the notice, an answer
shows whether it was right and then the notice; a "click the position" question takes the cursor's position;
the presenter view keeps the question and the notice and hides the sidebar."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geomlab.teach import lessons

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
ASSETS = ROOT / "assets" / "checkpoints"
pytestmark = pytest.mark.skipif(not (ASSETS / "osm-rnn-o-s5" / "model.safetensors").is_file(), reason="bundled zoo not present")


@pytest.fixture
def zoo_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("GEOMLAB_BUNDLED_DIR", raising=False)
    monkeypatch.delenv("GEOMLAB_ROOMS_URL", raising=False)


def tour(lesson: str, step: int, **extra) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.query_params.update(lesson=lesson, step=str(step + 1), **extra)
    at.switch_page("app_pages/tour.py")
    return at.run()


def notices(at: AppTest) -> list[str]:
    return [i.value for i in at.info if "What to notice" in i.value]


def test_a_choice_question_hides_the_notice_until_answered_then_judges_the_answer(zoo_env):
    step = lessons.LESSONS["s5-word-problem"].steps[1]
    q = step.question
    at = tour("s5-word-problem", 1)
    assert not at.exception, at.exception
    assert any(q.prompt[:30] in m.value for m in at.markdown), "the question is shown"
    assert notices(at) == [], "no notice before an answer"
    radio = at.radio(key="w_q_s5-word-problem_1")
    assert list(radio.options) and len(radio.options) == len(q.options)
    wrong = next(i for i in range(len(q.options)) if i != q.answer)
    radio.set_value(wrong).run()
    assert notices(at) and step.notice[:20] in notices(at)[0]
    assert any("Not quite" in w.value for w in at.warning)
    at.radio(key="w_q_s5-word-problem_1").set_value(q.answer).run()
    assert any(s.value == "Right." for s in at.success)


def test_a_click_question_takes_the_cursor_position(zoo_env):
    q = lessons.LESSONS["s5-word-problem"].steps[2].question
    at = tour("s5-word-problem", 2)
    assert notices(at) == []
    at.session_state["gl_pos"] = q.positions[0]
    at.run()
    at.button(key="q_pos_s5-word-problem_2").click().run()
    assert at.session_state["_gl_answers"]["s5-word-problem/2"] == q.positions[0]
    # several positions are right: a right answer says so, so "4" does not read as the only one
    assert len(q.positions) > 1 and notices(at)
    assert any(s.value == f"Right (any of {q.answer_text()} is right)." for s in at.success), at.success
    # the question says how to answer: the chart or the cursor, then the button
    assert any("Click the position's point in a chart" in c.value for c in at.caption)


def test_a_step_without_question_shows_its_notice_at_once(zoo_env):
    lesson = lessons.LESSONS["s5-word-problem"]
    i = next(i for i, s in enumerate(lesson.steps) if s.question is None)
    at = tour(lesson.slug, i)
    assert notices(at) and len(at.radio) == 0


def test_the_presenter_view_keeps_question_notice_and_arrow_buttons(zoo_env):
    at = tour("s5-word-problem", 0, present="1")
    assert not at.exception, at.exception
    assert at.button(key="tour_next") and at.button(key="tour_back").disabled
    assert notices(at)
    at.button(key="tour_next").click().run()
    assert at.session_state["gl_tour_step"] == 1
    assert at.query_params["present"] == ["1"] or at.query_params["present"] == "1"


def test_the_tours_what_if_effect_chart_moves_the_cursor_on_a_click():
    """The Tour draws an intervention's effect through draw_figures: it gets the position click rule (it is
    not a catalogue figure, whose rules the catalogue declares)."""
    from app_pages._views import click_handler

    handler = click_handler("whatif_effect", "tour-whatif_effect", None)
    assert handler is not None and handler.args[1] == "position"
    assert click_handler("whatif_guesses", "k", None) is None  # bars of tokens, not positions


def test_a_questions_figures_keep_their_captions_until_it_is_answered(zoo_env):
    """The CEM lesson's step 2 asks what the energy does past step 2; its chart's caption says it: hidden, with
    a line saying why, until the question is answered."""
    q = lessons.LESSONS["cem-energy"].steps[1].question
    at = tour("cem-energy", 1)
    said = [c.value for c in at.caption]
    assert any("captions show once the answer is given" in c for c in said)
    assert not any("energy fell" in c for c in said), said
    at.radio(key="w_q_cem-energy_1").set_value(q.answer).run()
    said = [c.value for c in at.caption]
    assert not any("captions show once" in c for c in said) and any("energy fell" in c for c in said), said
