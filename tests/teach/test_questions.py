"""Questions in lessons (geomlab.teach.tours.Choice, ClickPosition): checked when defined, in every bundled
lesson, and each right answer recomputed from the step's own checkpoint and text, so a retrained checkpoint
that changes an answer fails here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from geomlab.core import markup
from geomlab.teach import lessons, tours
from geomlab.teach.tours import Choice, ClickPosition, QuestionError
from test_tours import ASSETS, zoo  # noqa: F401  (the bundled zoo and its cached tracer)

needs_zoo = pytest.mark.skipif(not (ASSETS / "osm-rnn-o-s5" / "model.safetensors").is_file(), reason="bundled zoo not present")


def question(slug: str, index: int):
    step = lessons.LESSONS[slug].steps[index]
    assert step.question is not None, (slug, index)
    return step, step.question


# ---------------------------------------------------------------- definition-time checks
@pytest.mark.parametrize("kwargs,match", [
    ({"prompt": "", "options": ("a", "b"), "answer": 0}, "prompt"),
    ({"prompt": "q", "options": ("a",), "answer": 0}, "2-6 options"),
    ({"prompt": "q", "options": tuple("abcdefg"), "answer": 0}, "2-6 options"),
    ({"prompt": "q", "options": ["a", "b"], "answer": 0}, "tuple"),
    ({"prompt": "q", "options": ("a", "a"), "answer": 0}, "distinct"),
    ({"prompt": "q", "options": ("a", " "), "answer": 0}, "distinct"),
    ({"prompt": "q", "options": ("a", "b"), "answer": 2}, "option index"),
    ({"prompt": "q", "options": ("a", "b"), "answer": True}, "option index"),
    ({"prompt": "q", "options": ("a", "b"), "answer": 0, "explanation": None}, "explanation"),
])
def test_a_bad_choice_is_refused_when_defined(kwargs, match):
    with pytest.raises(QuestionError, match=match):
        Choice(**kwargs)


@pytest.mark.parametrize("positions", [(), (3, 1), (1, 1), (-1,), (True,), [1], (1.0,)])
def test_a_bad_click_question_is_refused_when_defined(positions):
    with pytest.raises(QuestionError, match="positions"):
        ClickPosition("click", positions)


def test_answers_are_judged_by_the_question():
    c = Choice("q", ("a", "b", "c"), 1)
    assert [c.is_correct(v) for v in (0, 1, 2, True)] == [False, True, False, False]
    p = ClickPosition("click", (4, 6, 11))
    assert [p.is_correct(v) for v in (4, 5, 6, 11, 12)] == [True, False, True, True, False]
    with pytest.raises(QuestionError, match="Choice or a ClickPosition"):
        tours.Step("t", "bundled/x", "text", "trajectories", "notice", question="which?")


def test_a_position_answer_reads_as_words():
    """Any of the positions is right, so the answer says "or", with the tokens when the labels are known."""
    assert ClickPosition("which?", (12,)).answer_text() == "position 12"
    assert ClickPosition("which?", (4, 6)).answer_text() == "positions 4 or 6"
    assert ClickPosition("which?", (4, 6, 11)).answer_text() == "positions 4, 6 or 11"
    labels = [f"t{i}" for i in range(8)]
    assert ClickPosition("which?", (4, 6, 11)).answer_text(labels) == "positions 4 (t4), 6 (t6) or 11"


def test_questions_do_not_assume_the_app():
    """A handout asks the same questions on paper: no prompt tells the reader to click or drag."""
    for lesson in lessons.LESSONS.values():
        for step in lesson.steps:
            words = " ".join(filter(None, [step.question and step.question.prompt, step.notice])).lower()
            assert "click" not in words and "drag" not in words, (lesson.slug, step.title)


def test_every_lesson_asks_at_least_one_question_in_valid_markup():
    for lesson in lessons.LESSONS.values():
        asked = [s.question for s in lesson.steps if s.question is not None]
        assert asked, lesson.slug
        for q in asked:
            texts = [q.prompt, q.explanation] + list(getattr(q, "options", ()))
            assert all(not markup.check_latex(t) for t in texts), (lesson.slug, q.prompt)


@needs_zoo
def test_validate_refuses_a_position_past_the_text(zoo):
    entries, trace = zoo
    lesson = lessons.LESSONS["attention-similarity"]
    step = replace(lesson.steps[1], question=ClickPosition("click", (12, 42)))  # the text has 42 tokens
    bad = replace(lesson, steps=(lesson.steps[0], step) + lesson.steps[2:])
    assert any("question position 42 outside" in p for p in tours.validate(bad, entries.values()))
    assert tours.validate(lesson, entries.values()) == []


# ---------------------------------------------------------------- the right answers, recomputed
@needs_zoo
def test_s5_questions_hold_on_the_bundled_models(zoo):
    from geomlab.figures.trajectory import distance_from_identity, state_phases

    entries, trace = zoo
    step, q = question("s5-word-problem", 1)
    phases = np.sort(state_phases(trace(entries[step.checkpoint], step.text, {}), 0)[step.cursor])
    fifth = np.array([-4, -2, 0, 2, 4]) * np.pi / 5
    assert q.options[q.answer].startswith("At $0, \\pm 2\\pi/5") and np.allclose(phases, fifth, atol=0.1)

    step, q = question("s5-word-problem", 2)
    d = distance_from_identity(trace(entries[step.checkpoint], step.text, {}))[0]
    assert tuple(np.flatnonzero(d < 1.0).tolist()) == q.positions  # where the state is back at I
    assert "4, 6 and 11" not in step.body  # the body does not give the answer away


@needs_zoo
def test_the_attention_question_holds(zoo):
    entries, trace = zoo
    step, q = question("attention-similarity", 1)
    tr = trace(entries[step.checkpoint], step.text, {})
    w = tr.attention_rows(step.controls["layer"], [step.cursor])[0][: step.cursor + 1]
    first, second = np.argsort(-w)[:2]
    assert first == step.cursor and (int(second),) == q.positions


@needs_zoo
def test_the_cem_question_holds(zoo):
    entries, trace = zoo
    step, q = question("cem-energy", 1)
    cem = entries[step.checkpoint]
    tr = trace(cem, step.text, step.trace_options(cem.model_config))
    mean = tr.energies.mean(axis=-1)  # (layer, block, step): the token mean the figure draws
    assert mean.shape[2] == step.steps + 1 == 5
    after = np.diff(mean, axis=2)[:, :, 2:]  # the change at steps 3 and 4, every panel
    assert q.answer == 0 and np.all(after < -1.0), after


@needs_zoo
def test_the_grassmann_questions_hold(zoo):
    from geomlab.figures.grassmann import consecutive_angles

    entries, trace = zoo
    step, q = question("grassmann-planes", 0)
    tr = trace(entries[step.checkpoint], step.text, {})
    ang = consecutive_angles(tr, 0, 0)
    assert tr.offsets[0, 0] == 1 and q.options[q.answer] == "0" and abs(ang[17, 0]) < 1e-5

    step, q = question("grassmann-planes", 2)
    assert step.controls["layer"] == 0
    turn = ang[:, 1]
    order = np.argsort(np.where(np.isfinite(turn), turn, np.inf))
    assert (int(order[0]),) == q.positions and turn[order[1]] - turn[order[0]] > 0.2  # a clear least turn
    assert (round(float(turn[order[0]]), 2), round(float(turn[order[1]]), 2)) == (0.25, 0.64)  # its explanation
