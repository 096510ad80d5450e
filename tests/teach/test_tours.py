"""Guided tours: the lessons of ``geomlab.teach.lessons`` (types and validation in ``geomlab.teach.tours``) against
the real bundled zoo, the numbers their notices quote, link resolution, and the Tour page through ``AppTest`` (open
a step from a link, Next, Back, a bad link)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from geomlab.checkpoints import catalog
from geomlab.checkpoints import io as checkpoint
from geomlab.teach import lessons, tours
from geomlab import trace as trace_mod
from geomlab.teach import views
from helpers.charts import charts

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
ASSETS = ROOT / "assets" / "checkpoints"
TIMEOUT = 120
STEPS = [(lesson, i) for lesson in lessons.LESSONS.values() for i in range(len(lesson.steps))]

pytestmark = pytest.mark.skipif(not (ASSETS / "osm-rnn-o-s5").is_dir(), reason="bundled zoo not present")


@pytest.fixture(scope="module")
def zoo():
    """The bundled catalog entries by ref, and a cached tracer ``trace(entry, text, options)``."""
    old = os.environ.get("GEOMLAB_BUNDLED_DIR")
    os.environ["GEOMLAB_BUNDLED_DIR"] = str(ASSETS)
    entries = [e for e in catalog.list_checkpoints() if e.source == "bundled"]
    loaded, traced = {}, {}

    def trace(entry, text, opts):
        key = (entry.ref, text, tuple(sorted(opts.items())))
        if key not in traced:
            if entry.ref not in loaded:
                ck = checkpoint.load(str(entry.path))
                ck.model.eval()
                loaded[entry.ref] = ck
            ck = loaded[entry.ref]
            if opts.get("steps"):
                tokens = trace_mod.encode_text(ck.vocab, text)
                traced[key] = trace_mod.trace_cem_steps(ck.model, tokens, opts["steps"], vocab=ck.vocab, text=text)
            else:
                traced[key] = trace_mod.trace_text(ck.model, ck.vocab, text)
        return traced[key]

    yield {e.ref: e for e in entries}, trace
    if old is None:
        os.environ.pop("GEOMLAB_BUNDLED_DIR", None)
    else:
        os.environ["GEOMLAB_BUNDLED_DIR"] = old


# ---------------------------------------------------------------- the lessons as data
def test_there_is_a_lesson_per_family_with_three_to_six_steps():
    families = {lesson.family for lesson in lessons.LESSONS.values()}
    assert families == set(tours.FAMILIES)
    assert len(lessons.LESSONS) >= 4
    slugs = set(lessons.LESSONS)
    assert {"s5-word-problem", "attention-similarity", "cem-energy", "grassmann-planes"} <= slugs
    for lesson in lessons.LESSONS.values():
        assert 3 <= len(lesson.steps) <= 6, lesson.slug
        for step in lesson.steps:
            assert step.notice.strip() and step.title.strip()


@pytest.mark.parametrize("slug", list(lessons.LESSONS))
def test_every_lesson_validates_against_the_bundled_zoo(zoo, slug):
    entries, trace = zoo
    assert tours.validate(lessons.LESSONS[slug], entries.values(), trace_fn=trace) == []


def test_the_s5_lesson_compares_the_word_problem_pair():
    steps = lessons.LESSONS["s5-word-problem"].steps
    pairs = {(s.checkpoint, s.compare) for s in steps if s.compare}
    assert ("bundled/osm-rnn-o-s5", "bundled/osm-rnn-torus-s5") in pairs
    names = {n for s in steps for n in s.figures}
    assert {"accuracy_by_length", "phase_circle", "torus_angles"} <= names


def test_the_cem_lesson_raises_T():
    ts = [s.steps for s in lessons.LESSONS["cem-energy"].steps if s.steps is not None]
    assert len(set(ts)) >= 3 and ts[:3] == sorted(ts[:3])


@pytest.mark.parametrize("lesson,index", STEPS, ids=[f"{l.slug}-{i + 1}" for l, i in STEPS])
def test_each_steps_figures_build(zoo, lesson, index):
    entries, trace = zoo
    step = lesson.steps[index]
    sides = []
    for ref, colour in zip(step.checkpoints, tours.COLOURS):
        e = entries[ref]
        tr = trace(e, step.text, step.trace_options(e.model_config))
        assert step.cursor < tr.n_positions
        sides.append((e, tr, colour))
    built, animated = 0, False
    for name in step.figure_names(sides[0][1]):
        if name == "accuracy_by_length":
            fig, cap = tours.accuracy_by_length_figure([(e.name, e.accuracy_by_length, c) for e, _, c in sides],
                                                       chance=1 / 120, train_length=32)
        elif name == "surprisal":
            from geomlab.figures.surprisal import SurprisalSide, surprisal_figure

            fig, cap = surprisal_figure([SurprisalSide(tr, e.name, c, e.task, e.n_outputs) for e, tr, c in sides],
                                        step.cursor)
        else:
            for _, tr, _ in sides:
                fig, cap = views.build_figure(tr, name, tours.step_controls(step, tr), step.cursor)
                assert fig.layout.title.text and cap
        assert len(fig.data) >= 1 and cap
        built += 1
        animated |= bool(fig.frames)
    assert built >= 1
    assert animated or "Play" not in step.notice + step.body  # no Play button to press in a still figure


def test_step_controls_keep_the_mean_over_heads_and_the_steps_layer(zoo):
    entries, trace = zoo
    step = lessons.LESSONS["attention-similarity"].steps[-1]
    tr = trace(entries[step.checkpoint], step.text, {})
    ctl = tours.step_controls(step, tr)
    assert ctl["head"] is None and ctl["layer"] == 0
    deep = lessons.LESSONS["attention-similarity"].steps[2]
    assert tours.step_controls(deep, trace(entries[deep.checkpoint], deep.text, {}))["layer"] == 2


def test_trace_options_ask_for_T_only_when_it_differs_from_training(zoo):
    entries, _ = zoo
    cfg = entries["bundled/cem-t2-tinyshakespeare"].model_config
    steps = lessons.LESSONS["cem-energy"].steps
    assert steps[0].trace_options(cfg) == {}  # T = 2 is the trained T
    assert steps[1].trace_options(cfg) == {"steps": 4}


def test_validate_finds_bad_steps(zoo):
    entries, trace = zoo
    good = lessons.LESSONS["cem-energy"].steps[0]

    def lesson_of(*steps):
        return tours.Lesson("x", "x", tours.FAMILIES[1], "x", tuple(steps) + (good, good))

    def problems(step):
        return tours.validate(lesson_of(step), entries.values(), trace_fn=trace)

    from dataclasses import replace

    assert tours.validate(lesson_of(good), entries.values(), trace_fn=trace) == []
    assert any("not in the catalog" in p for p in problems(replace(good, checkpoint="bundled/nope")))
    assert any("does not show" in p for p in problems(replace(good, checkpoint="bundled/lstm-tinyshakespeare")))
    assert any("cursor 500 outside" in p for p in problems(replace(good, cursor=500)))
    assert any("not a figure of view" in p for p in problems(replace(good, figures=("phase_circle",))))
    assert any("no control" in p for p in problems(replace(good, controls={"head": 0})))
    assert any("layer 9 outside" in p for p in problems(replace(good, controls={"layer": 9})))
    assert any("block = 5" in p for p in problems(replace(good, controls={"block": 5})))
    assert any("T = 99 outside" in p for p in problems(replace(good, steps=99)))
    assert any("unknown view" in p for p in problems(replace(good, view="nope")))
    assert any("surprisal" in p for p in problems(replace(good, figures=("surprisal",))))
    s5 = lessons.LESSONS["s5-word-problem"].steps[1]
    assert any("cannot read the text" in p for p in problems(replace(s5, text="not a permutation")))
    back = next(s for s in lessons.LESSONS["s5-word-problem"].steps if s.title == "Back to the identity")
    assert any("an answer to the step's question" in p for p in problems(replace(back, cursor=4)))
    assert any("3-6" in p for p in tours.validate(tours.Lesson("y", "y", tours.FAMILIES[0], "y", (good,)),
                                                  entries.values()))


def test_resolve_link():
    first = next(iter(lessons.LESSONS.values()))
    lesson, index, note = lessons.resolve_link("cem-energy", "3")
    assert (lesson.slug, index, note) == ("cem-energy", 2, None)
    assert lessons.resolve_link(None, None) == (first, 0, None)
    lesson, index, note = lessons.resolve_link("no-such-lesson", "2")
    assert lesson is first and index == 1 and "no-such-lesson" in note
    for bad in ("0", "99", "x", "-1", "2.5"):
        lesson, index, note = lessons.resolve_link("cem-energy", bad)
        assert lesson.slug == "cem-energy" and index == 0 and repr(bad) in note


# ---------------------------------------------------------------- what the notices say, re-measured
def test_s5_notices_hold_on_the_bundled_models(zoo):
    """O(5) names the running product (about 0 bits), the torus is near chance; O(5)'s state returns to
    the identity exactly where the product does and the torus's does not; at the cursor of step 2 the
    eigenvalue phases are the fifth roots of unity."""
    from geomlab.figures.trajectory import distance_from_identity, state_phases

    entries, trace = zoo
    o, torus = entries["bundled/osm-rnn-o-s5"], entries["bundled/osm-rnn-torus-s5"]
    steps = lessons.LESSONS["s5-word-problem"].steps
    word = steps[0].text
    so = trace_mod.score_predictions(trace(o, word, {}), o.task)
    st_ = trace_mod.score_predictions(trace(torus, word, {}), torus.task)
    assert so.accuracy == 1.0 and np.max(so.bits) < 0.1
    assert st_.accuracy <= 0.2 and np.mean(st_.bits) > 6.0
    assert o.accuracy_by_length[32] > 0.9 and max(torus.accuracy_by_length.values()) < 0.05

    returns = steps[2].text
    d_o = distance_from_identity(trace(o, returns, {}))[0]
    d_t = distance_from_identity(trace(torus, returns, {}))[0]
    home = [4, 6, 11]
    assert np.all(d_o[home] < 0.3) and np.all(np.delete(d_o, home) > 3.0)
    assert np.all(d_t[home] > 1.0)

    phases = state_phases(trace(o, word, {}), 0)[steps[1].cursor]
    fifth = np.array([-4, -2, 0, 2, 4]) * np.pi / 5
    assert np.allclose(np.sort(phases), fifth, atol=0.1)
    four_cycle = state_phases(trace(o, word, {}), 0)[1]
    assert np.any(np.abs(np.abs(four_cycle) - np.pi / 2) < 0.1)

    # step 4: on the torus the same token moves an angle by different amounts ("about +2.1 at position 1 and
    # about -2.1 at position 4": the pull reads the state)
    order = trace(torus, steps[3].text, {})
    assert order.labels[1] == order.labels[4] == "12340"
    diag = np.diagonal(np.asarray(order.states)[0], axis1=-2, axis2=-1)
    step_by = np.angle(diag[1:] / diag[:-1])  # increment at position t, wrapped to (-pi, pi]
    assert abs(step_by[0, 1] - 2.1) < 0.1 and abs(step_by[3, 1] + 2.1) < 0.1


def test_cem_energy_falls_at_every_step_for_every_T(zoo):
    from geomlab.figures.energy import energy_rises, token_rises

    entries, trace = zoo
    cem = entries["bundled/cem-t2-tinyshakespeare"]
    drift = {}
    for step in lessons.LESSONS["cem-energy"].steps:
        tr = trace(cem, step.text, step.trace_options(cem.model_config))
        assert tr.energies.shape[2] == step.steps + 1
        assert not np.any(energy_rises(tr)) and not np.any(token_rises(tr))
        drift[step.steps] = float(tr.displacement[0, 0, -1].mean())
    assert drift[16] > 5 * drift[2]  # the "drifting" step's point: displacement grows with T
    assert 58 < drift[16] < 66 and 6 < drift[2] < 8  # "about 62 ... (about 7 at T = 2)"
    # step 4: every token falls, by very different amounts (14 and the full stop most, 33 least)
    last = lessons.LESSONS["cem-energy"].steps[3]
    tr = trace(cem, last.text, last.trace_options(cem.model_config))
    layer, block = last.controls["layer"], last.controls["block"]
    fall = tr.energies[layer, block, -1] - tr.energies[layer, block, 0]
    order = np.argsort(fall)
    assert set(order[:2].tolist()) == {14, len(last.text) - 1} and order[-1] == 33 and (fall < 0).all()
    assert {0, 2} <= set(order[-4:].tolist())  # "the T and the space at 0 and 2" stay almost white too


@pytest.mark.data
def test_the_cem_lesson_quotes_this_models_bpc_at_each_T():
    """CEM step 3: "validation bits per character are 2.17 at T = 2, 2.93 at T = 4 and 8.1 at T = 16" (the
    first 20,000 validation characters, windows of 128)."""
    from geomlab.training.trainer import evaluate
    from geomlab.training.zoo import make_task

    if not os.environ.get("GEOMLAB_DATA_DIR"):
        pytest.skip("needs the real corpora: set GEOMLAB_DATA_DIR")
    model = checkpoint.load(str(ASSETS / "cem-t2-tinyshakespeare")).model.eval()
    task = make_task("corpus:tinyshakespeare")
    got = {}
    for T in (2, 4, 16):
        model.set_inference_steps(T)
        got[T] = evaluate(model, task, "valid", seq_len=128, max_tokens=20_000)["bpc"]
    assert abs(got[2] - 2.17) < 0.005 and abs(got[4] - 2.93) < 0.005 and abs(got[16] - 8.1) < 0.05, got


def test_grassmann_consecutive_planes_share_a_line(zoo):
    from geomlab.figures.grassmann import consecutive_angles

    entries, trace = zoo
    step = lessons.LESSONS["grassmann-planes"].steps[2]
    tr = trace(entries[step.checkpoint], step.text, {})
    assert tr.offsets[:, 0].tolist() == [1, 2, 4, 8, 12, 16]  # step 4: "one offset per layer", layers 0 to 5
    assert tr.rank == 12 and tr.plucker.shape[-1] == 66  # steps 1-2: R^12, "12 * 11 / 2 = 66 numbers"
    ang = consecutive_angles(tr, 0, 0)
    ok = np.isfinite(ang[:, 0])
    assert ok.sum() > 10 and np.allclose(ang[ok, 0], 0, atol=1e-5) and np.nanmax(ang[:, 1]) > 0.5
    first = lessons.LESSONS["grassmann-planes"].steps[0]
    assert first.cursor == 17 and abs(ang[17, 1] - 0.81) < 0.005  # "from the plane at 16 to 17 (0.81 rad)"
    assert tr.labels[12:15] == ["t", "␣", "t"]
    assert abs(ang[14, 1] - 0.25) < 0.005  # "t␣" and "␣t" at layer 0: "0.25 rad apart"
    assert abs(np.nanmax(ang[:, 1]) - 1.54) < 0.005  # step 3: "up to 1.54 rad here"
    share = (1 - tr.gates).mean(axis=(1, 2))
    assert [round(float(x), 2) for x in share[:2]] == [0.76, 0.54]  # step 4
    assert np.all((share[2:] > 0.255) & (share[2:] < 0.335))  # "0.26 to 0.33 in layers 2 to 5"


def test_grassmann_plane_similarity_of_recurring_character_pairs(zoo):
    """Step 4: in layer 0 a recurring pair of characters scores 0.98 on average, the pair reversed 0.99, other
    pairs 0.31; in layer 2 (offset 4) the same pair 0.42, other pairs 0.12."""
    from geomlab.figures.grassmann import plane_similarity

    entries, trace = zoo
    step = lessons.LESSONS["grassmann-planes"].steps[3]
    tr = trace(entries[step.checkpoint], step.text, {})
    lab = tr.labels

    def means(layer):
        D = int(tr.offsets[layer, 0])
        S = np.asarray(plane_similarity(tr, layer, 0).figure.data[0].z, dtype=float)
        T = len(lab)
        same = np.zeros((T, T), bool)
        rev = np.zeros((T, T), bool)
        for i in range(D, T):
            for j in range(D, T):
                same[i, j] = lab[i] == lab[j] and lab[i - D] == lab[j - D]
                rev[i, j] = lab[i] == lab[j - D] and lab[i - D] == lab[j] and not same[i, j]
        keep = np.isfinite(S) & ~np.eye(T, dtype=bool)
        return [round(float(S[keep & m].mean()), 2) for m in (same, rev, ~same & ~rev)]

    assert step.controls == {"layer": 2, "slot": 0} and tr.offsets[2, 0] == 4
    assert means(0) == [0.98, 0.99, 0.31] and tr.labels[13] == tr.labels[25] == "␣" and lab[12] == lab[24] == "t"
    got = means(2)
    assert got[0] == 0.42 and got[2] == 0.12, got


def test_attention_notices_hold(zoo):
    entries, trace = zoo
    step = lessons.LESSONS["attention-similarity"].steps[1]
    tr = trace(entries[step.checkpoint], step.text, {})
    w = tr.attention_rows(0, [step.cursor])[0]
    s = tr.similarity_rows(0, [step.cursor])[0]
    order = np.argsort(-w[: step.cursor + 1])
    assert order[0] == step.cursor and order[1] == 12  # itself, then the earlier t
    assert tr.labels[12] == tr.labels[step.cursor] == "t" and abs(s[12] - tr.d) < 1e-3
    assert abs(w[14] - 0.94) < 0.005 and abs(w[12] - 0.034) < 0.0005 and abs(w[13] - 0.028) < 0.0005
    assert abs(s[13] - 5.7) < 0.05  # step 2: "(0.94) ... 0.034 ... (0.028, similarity 5.7)"
    assert abs(tr.similarity_rows(2, [14])[0][12] - 4.4) < 0.05  # step 3: "4.4 out of 15" in layer 2
    w2 = tr.attention_rows(2, [14])[0]
    assert round(float(w2[13]), 2) == 0.14 and round(float(w2[12]), 2) == 0.08  # "(0.14) than the earlier t (0.08)"
    assert w[14] > 0.9  # step 1: "almost all of each row's weight stays on the diagonal"
    torus_step = lessons.LESSONS["attention-similarity"].steps[3]
    torus = trace(entries[torus_step.checkpoint], torus_step.text, {})
    sim = torus.similarity_rows(0)
    n = sim.shape[0]
    same = [sim[i, j] for i in range(n) for j in range(i) if torus.labels[i] == torus.labels[j]]
    other = [sim[i, j] for i in range(n) for j in range(i) if torus.labels[i] != torus.labels[j]]
    assert torus.d == 128 and min(same) > 128 - 1e-3 and sim.max() <= 128 + 1e-3  # "equal letters reach ... 128"
    lo, hi = np.percentile(other, [10, 90])
    assert lo > 79.5 and hi < 94.5  # "most other pairs still score 80 to 94 out of 128"
    tw = torus.attention_rows(0, [14])[0]
    assert (round(float(tw[14]), 2), round(float(tw[12]), 2), round(float(tw[13]), 2)) == (0.86, 0.11, 0.02)
    assert torus.labels[12] == "t" and abs(sim[14, 12] - 128) < 1e-3  # "whose similarity is the maximum"
    assert torus.labels[13] == "␣"  # "the space just before it"
    assert round(float(torus.attention_rows(1, [14])[0][14]), 2) == 0.73  # "in layer 1 ... keeps 0.73"
    tf_step = lessons.LESSONS["attention-similarity"].steps[4]
    tf = trace(entries[tf_step.checkpoint], tf_step.text, {})
    row = tf.attention_rows(0, [14])[0]
    assert int(np.argmax(row)) == 13 and abs(row[13] - 0.11) < 0.01  # "the space before ... about 0.11"


# ---------------------------------------------------------------- the page
@pytest.fixture
def bundled_app(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(ASSETS))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")


def open_tour(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.switch_page("app_pages/tour.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def qp(at: AppTest, key: str):
    v = at.query_params.get(key)
    return v[0] if isinstance(v, list) else v


def heading(at: AppTest) -> str:
    """The step's title line ("2. Title"), without the note a narrow window shows beside it."""
    line = next(m.value for m in at.markdown if m.value.startswith("### "))
    return line.removeprefix("### ").split(" <span", 1)[0]


def test_a_link_opens_its_step_and_next_back_move_state_and_url(bundled_app):
    lesson = lessons.LESSONS["s5-word-problem"]
    at = open_tour(lesson=lesson.slug, step="2")
    s2, s3 = lesson.steps[1], lesson.steps[2]
    assert heading(at) == f"2. {s2.title}"
    assert any(f"Step 2 of {len(lesson.steps)}" in str(p.proto) for p in at.get("progress"))
    assert at.session_state["gl_ckpt"] == s2.checkpoint and at.session_state["gl_text"] == s2.text
    assert at.session_state["gl_pos"] == s2.cursor
    assert not any(s2.notice[:40] in i.value for i in at.info)  # the step's question comes first
    at.radio(key=f"w_q_{lesson.slug}_1").set_value(s2.question.answer).run()
    assert any(s2.notice[:40] in i.value for i in at.info)  # the notice, highlighted
    assert len(charts(at)) == 2  # the step's two figures, not the whole view
    assert qp(at, "lesson") == lesson.slug and qp(at, "step") == "2"
    assert at.button(key="tour_back").label == "Back" and at.button(key="tour_next").label == "Next"

    at.button(key="tour_next").click().run()
    assert not at.exception and not at.error
    assert heading(at) == f"3. {s3.title}"
    assert at.session_state["gl_text"] == s3.text and at.session_state["gl_ckpt_b"] == s3.compare
    assert qp(at, "step") == "3" and at.session_state["gl_text"] == s3.text
    assert at.session_state["gl_ckpt_b"] == s3.compare
    assert qp(at, "text") is None and qp(at, "b") is None  # the Tour's URL: lesson and step only
    assert len(charts(at)) == 2  # one distance profile per checkpoint

    at.button(key="tour_back").click().run()
    assert heading(at) == f"2. {s2.title}" and qp(at, "step") == "2"
    assert at.session_state["gl_text"] == s2.text


def test_moving_the_cursor_within_a_step_keeps_the_step(bundled_app):
    at = open_tour(lesson="s5-word-problem", step="2")
    before = [c.spec for c in charts(at)]
    at.select_slider(key="w_pos").set_value(1).run()
    assert at.session_state["gl_pos"] == 1 and qp(at, "step") == "2" and qp(at, "pos") is None
    after = [c.spec for c in charts(at)]
    assert before != after


def test_a_step_sets_layer_controls_and_T_and_opens_in_the_full_view(bundled_app):
    at = open_tour(lesson="cem-energy", step="4")
    step = lessons.LESSONS["cem-energy"].steps[3]
    assert at.session_state["gl_steps"] == step.steps and qp(at, "T") is None
    assert at.session_state["gl_layer"] == 3 and at.session_state["gl_block"] == 0
    links = {p.proto.label: p.proto.page for p in at.get("page_link")}
    assert any("energy" in page for label, page in links.items() if label == "Open this in the full view")
    code = [c.value for c in at.code]
    assert any(v.endswith("/tour?lesson=cem-energy&step=4") for v in code)  # the share box
    # the full view shows what the step set
    at.switch_page("app_pages/energy.py").run()
    assert not at.exception and not at.error
    assert at.session_state["gl_steps"] == step.steps and at.session_state["gl_layer"] == 3


def test_a_step_showing_figures_outside_the_views_default_set_opens_more_figures_in_the_full_view(bundled_app):
    """Grassmann step 4 shows plane similarity and gate share, which the planes view keeps under "More
    figures": the full view opens with that switch on, so both figures are there."""
    s5 = open_tour(lesson="s5-word-problem", step="2")  # its figures are the view's defaults: switch untouched
    assert "gl_more_figures" not in s5.session_state or not s5.session_state["gl_more_figures"]
    at = open_tour(lesson="grassmann-planes", step="4")
    step = lessons.LESSONS["grassmann-planes"].steps[3]
    assert not at.exception and not at.error and at.session_state["gl_more_figures"] is True
    at.switch_page("app_pages/planes.py").run()
    assert not at.exception and not at.error
    titles = " ".join(c.spec for c in charts(at))
    assert all(t in titles for t in ("Plane similarity", "Gate share")), step.figures


def test_the_lesson_select_starts_another_lesson_at_step_one(bundled_app):
    at = open_tour(lesson="s5-word-problem", step="3")
    at.selectbox(key="w_tour_lesson").set_value("grassmann-planes").run()
    assert not at.exception and not at.error
    assert qp(at, "lesson") == "grassmann-planes" and qp(at, "step") == "1"
    assert at.session_state["gl_ckpt"] == "bundled/grassmann-tinyshakespeare"
    assert at.session_state["gl_slot"] == 0


@pytest.mark.parametrize("query", [{"lesson": "no-such-lesson", "step": "2"},
                                   {"lesson": "cem-energy", "step": "99"},
                                   {"lesson": "cem-energy", "step": "x"}])
def test_a_bad_link_gives_a_notice_and_falls_back(bundled_app, query):
    at = open_tour(**query)
    notes = [w.value for w in at.warning]
    assert notes and any("showing" in n for n in notes)
    want = "cem-energy" if query["lesson"] == "cem-energy" else next(iter(lessons.LESSONS))
    assert qp(at, "lesson") == want and qp(at, "step") in ("1", "2")
    step = lessons.LESSONS[want].steps[int(qp(at, "step")) - 1]
    assert at.session_state["gl_ckpt"] == step.checkpoint
    at.button(key="tour_next").click().run()  # the notice is shown once
    assert not at.warning and not at.exception


@pytest.mark.parametrize("slug", list(lessons.LESSONS))
def test_every_step_draws_in_the_app(bundled_app, slug):
    lesson = lessons.LESSONS[slug]
    at = open_tour(lesson=slug, step="1")
    for i, step in enumerate(lesson.steps):
        assert heading(at) == f"{i + 1}. {step.title}"
        assert not at.exception and not at.error, (slug, i, [e.value for e in at.error])
        assert len(charts(at)) >= 1, (slug, i)
        assert not [x.value for x in at.info if not x.value.startswith("**What to notice")], (slug, i)
        if i < len(lesson.steps) - 1:
            at.button(key="tour_next").click().run()
    assert at.button(key="tour_next").disabled


def test_home_links_to_the_tour(bundled_app):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any(p.proto.page.endswith("tour.py") or "tour" in p.proto.page for p in at.get("page_link"))


def test_the_tour_without_the_bundled_zoo_explains_instead_of_failing(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")
    at = open_tour(lesson="cem-energy", step="2")
    assert heading(at).startswith("2. ")
    assert any("No checkpoint is available" in i.value for i in at.info)
    assert not charts(at)


def test_the_plucker_step_names_the_axes_the_figure_draws(zoo):
    """Grassmann step 2 says rows are positions and columns axis pairs: so does the heatmap."""
    entries, trace = zoo
    step = lessons.LESSONS["grassmann-planes"].steps[1]
    tr = trace(entries[step.checkpoint], step.text, {})
    fig, _ = views.build_figure(tr, "plucker_heatmap", tours.step_controls(step, tr), step.cursor)
    assert "position" in fig.layout.yaxis.title.text and "position" not in fig.layout.xaxis.title.text
    assert "one row per position, one column per pair of axes" in step.notice


def test_the_what_if_step_undoes_the_token_as_its_notice_says(bundled_app):
    """The S5 lesson's intervention step: steering H_5 by −3 rad along its own update makes the O(5) model
    name the product before token 5 (its notice's claim, read off the step's guesses figure), while the
    plain run names the running product; the step's link state carries the intervention."""
    import json

    lesson = lessons.LESSONS["s5-word-problem"]
    index = next(i for i, s in enumerate(lesson.steps) if s.whatif)
    at = open_tour(lesson=lesson.slug, step=str(index + 1))
    assert not at.exception and not at.error
    assert at.session_state["gl_whatif"] == "steer" and at.session_state["gl_whatif_size"] == -3.0
    specs = [json.loads(c.spec) if isinstance(c.spec, str) else c.spec for c in charts(at)]
    guesses = next(s for s in specs if "Running product at position 5" in json.dumps(s.get("layout", {})))
    data = {t["name"]: t for t in guesses["data"]}
    top = lambda t: t["y"][int(np.argmax(t["x"]))].strip("“”")  # noqa: E731
    assert top(data["before"]) == "03421" and top(data["after"]) == "43021"


def test_a_step_with_an_unknown_or_unfitting_intervention_is_refused():
    from dataclasses import replace

    lesson = lessons.LESSONS["s5-word-problem"]
    entries = [e for e in catalog.list_checkpoints() if e.ref.startswith("bundled/")]
    if not entries:
        pytest.skip("needs the bundled zoo")
    bad = replace(lesson, steps=lesson.steps[:-1] + (replace(lesson.steps[-1], whatif=("rotate_plane", 0.5)),))
    assert any("does not apply" in p for p in tours.validate(bad, entries))
    bad = replace(lesson, steps=lesson.steps[:-1] + (replace(lesson.steps[-1], whatif=("nope", 0.5)),))
    assert any("unknown intervention" in p for p in tours.validate(bad, entries))
    assert not [p for p in tours.validate(lesson, entries) if "intervention" in p or "applies" in p]
