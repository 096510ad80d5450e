"""The teaching layer: geomlab.teach.explain (texts for every view and figure, the model's facts, the
glossary), geomlab.core.markup (captions as markdown + inline LaTeX, user text escaped, plain/HTML versions), the
figure captions' maths, ``trace --html``'s captions, and the app's view intro and Glossary page (AppTest)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import run_page
from streamlit.testing.v1 import AppTest

from geomlab import figures
from geomlab.teach import explain
from geomlab.teach import facts
from geomlab.teach import glossary
from geomlab.core import markup
from geomlab.teach import views
from geomlab.trace import CEMTrace, from_record
from helpers.models import MODELS, get_trace

APP = str(Path(__file__).resolve().parents[2] / "app.py")
ASSETS = Path(__file__).resolve().parents[2] / "assets" / "checkpoints"
TIMEOUT = 120

#: Plain-text formula pieces that must not appear outside $...$ in a caption.
FORMULA_LEFTOVERS = re.compile(r"‖|Φ|θ|κ|ρ|ε|α|γ|π|√|⟨|⟩|⌊|ᵀ|₁|ₜ|φ"
                               r"|\b[A-Za-z]_[{A-Za-z0-9]|[A-Za-z]\^[{A-Za-z0-9]|\bspan\(|\bRe tr\b|\bvec\(")


def outside_math(text: str) -> str:
    """``text`` without its formulas and without backslash-escaped characters."""
    return re.sub(r"\\.", "", "".join(p for m, p in markup.split_math(text) if not m))


# ------------------------------------------------------------------ every view and figure is explained
def test_every_view_has_maths_how_to_read_and_look_for():
    assert set(explain.VIEW_TEXT) == set(views.VIEWS)
    for slug in views.VIEWS:
        ex = explain.view_explanation(slug)
        assert ex.maths and len(ex.read) > 80 and len(ex.look) > 40 and ex.source and not ex.fallback, slug
        assert ex.terms and all(glossary.find_term(t) for t in ex.terms), slug


def test_every_registered_figure_has_an_entry():
    names = set(figures.FIGURES) - {"training_curves"}
    assert names == set(views.FIGURE_ORDER)
    missing = sorted(n for n in names if explain.figure_explanation(n).fallback)
    assert not missing, f"figures declared without an explanation: {missing}"
    for n in names:
        ex = explain.figure_explanation(n)
        assert ex.maths and ex.read and ex.look, n
        assert len(ex.look) < 160, (n, "a look-for line should stay one short line")


def test_an_unknown_figure_gets_the_clear_fallback():
    ex = explain.figure_explanation("token_surprisal_strip_not_yet_written")
    assert ex.fallback and not ex.maths and "No explanation" in ex.read
    assert explain.figure_note("token_surprisal_strip_not_yet_written") == ex.look


def test_every_term_reference_is_a_glossary_term():
    bad = [(where, r) for where, refs in explain.every_term_reference().items() for r in refs
           if glossary.find_term(r) is None]
    assert not bad


def test_latex_of_the_explanations_parses():
    for where, text in explain.all_texts():
        assert not markup.check_latex(text), (where, markup.check_latex(text))
        assert not FORMULA_LEFTOVERS.search(outside_math(text)), (where, text)
    for where, tex in explain.all_maths():
        assert "$" not in tex and not markup.check_latex(f"${tex}$"), (where, tex)


def test_check_latex_finds_problems():
    assert markup.check_latex("a $x_{t$ b") and markup.check_latex("one $ alone")
    assert not markup.check_latex("cost \\$5 and $x^2$")


# ------------------------------------------------------------------ glossary
REQUIRED_TERMS = ["Lie group", "Lie algebra", "tangent", "tangent update", "exponential map", "matrix log",
                  "geodesic distance", "orthogonal", "unitary", "SO", "SU", "torus", "eigenvalue phase",
                  "abelian", "attention", "similarity", "prototype readout", "tangent mixing", "energy",
                  "recursion step", "preconditioner", "Grassmannian", "Plücker coordinates", "principal angles",
                  "decomposability", "gate", "BPC", "surprisal", "PCA"]


@pytest.mark.parametrize("name", REQUIRED_TERMS)
def test_glossary_covers_the_issue_terms(name):
    t = glossary.find_term(name)
    assert t is not None, name
    assert len(t.text) > 40 and t.source
    assert not markup.check_latex(t.text)


def test_glossary_slugs_and_search():
    slugs = [glossary.term_slug(t) for t in glossary.GLOSSARY]
    assert len(set(slugs)) == len(slugs) and all(re.fullmatch(r"[a-z0-9-]+", s) for s in slugs)
    assert glossary.term_slug("Plücker coordinates") == "plucker-coordinates"
    assert glossary.find_term("plucker-coordinates").name == "Plücker coordinates"
    assert glossary.find_term("no-such-term") is None and glossary.find_term(None) is None
    hits = glossary.search_glossary("principal angle")
    assert hits[0].name == "Principal angles"
    assert all("angle" in (h.name + h.text).lower() for h in hits)
    assert len(glossary.search_glossary("")) == len(glossary.GLOSSARY)
    assert glossary.search_glossary("zzzz-nothing") == []


def test_link_terms():
    text = "the [[Lie algebra]] and [[tangent update|its updates]] and [[nothing here]]"
    assert glossary.link_terms(text) == "the Lie algebra and its updates and nothing here"
    linked = glossary.link_terms(text, lambda s: f"glossary?term={s}")
    assert "[Lie algebra](glossary?term=lie-algebra)" in linked
    assert "[its updates](glossary?term=tangent-update)" in linked and "[nothing here]" not in linked


# ------------------------------------------------------------------ facts depend on the model
def _texts(said):
    return " ".join(f.text for f in said)


def test_torus_is_abelian_and_orthogonal_is_not():
    torus = _texts(facts.model_facts(get_trace("osmformer-T4")))
    assert "$T^{4}$ is abelian" in torus and "add" in torus
    so3 = _texts(facts.model_facts(get_trace("osm-rnn-SO3")))
    assert "not abelian" in so3 and "$SO(3)$" in so3 and "dimension 3" in so3
    u3 = _texts(facts.model_facts(get_trace("osmformer-U3")))
    assert "not abelian" in u3 and "dimension 9" in u3 and "2 layers" in u3
    assert facts.is_abelian("SO", 2) and not facts.is_abelian("O", 3) and facts.is_abelian("T", 8)
    assert not facts.is_abelian("SU", 2) and facts.is_abelian("O-block", 8, block=2)
    assert facts.algebra_dim("SU", 3) == 8 and facts.algebra_dim("O-block", 8, 4) == 12


def test_a_torus_trained_on_s5_is_warned_about():
    tr = get_trace("osmformer-T4")
    said = facts.model_facts(tr, task={"task": "word-problem", "group": "S5"})
    warn = [f for f in said if f.warn]
    assert len(warn) == 1 and "$S_{5}$" in warn[0].text and "cannot track" in warn[0].text
    assert not [f for f in facts.model_facts(tr, task="word-problem:Z7:16") if f.warn]  # Z7 is abelian
    o = facts.model_facts(get_trace("osm-rnn-SO3"), task="word-problem:S5:32")
    assert not [f for f in o if f.warn] and "can represent" in _texts(o)


def _cem_trace(E: np.ndarray, config: dict | None = None) -> CEMTrace:
    n = E.shape[-1]
    return from_record({"logits": np.zeros((n, 3)), "energies": E, "displacement": np.abs(E)}, "cem",
                       np.arange(n), config=config)


def test_cem_facts_say_whether_the_energy_fell():
    rng = np.random.default_rng(0)
    E = -np.cumsum(rng.random((2, 2, 4, 5)), axis=2)  # falls at every step
    tr = _cem_trace(E, {"kind": "cem", "recursion_steps": 3})
    assert facts.energy_rises(tr) == []
    said = facts.model_facts(tr)
    assert "fell" in _texts(said) and not any(f.warn for f in said) and "$T = 3$" in _texts(said)
    assert "every line goes down" in explain.figure_note("energy_descent", tr)

    E[1, 0, 2] = E[1, 0, 1] + 3.0  # layer 1, attention: rises at step 2
    tr = _cem_trace(E, {"kind": "cem", "recursion_steps": 1})
    assert [(l, b, t) for l, b, t, _ in facts.energy_rises(tr)] == [(1, 0, 2)]
    warn = [f for f in facts.model_facts(tr) if f.warn]
    assert len(warn) == 1 and "ROSE" in warn[0].text and "layer 1 attention, step 2" in warn[0].text
    assert "$T = 3 > 1$" in warn[0].text  # more steps than trained
    assert "rose" in explain.figure_note("energy_descent", tr)


def test_a_descent_that_runs_away_past_the_trained_t_is_a_warning_not_a_healthy_fall():
    """Every step falls, but past the trained T = 2 each one falls further than the last (the MLP): a
    warning fact naming the sub-block, and a look-for line that says it overshoots; the view's and the
    figures' look-for texts say what an overshoot looks like even when there is none."""
    steps = np.arange(9, dtype=float)
    E = np.zeros((2, 2, 9, 5))
    E[:, 0] = (-10.0 * steps)[:, None]  # attention: the same pace at every step
    E[1, 1] = (-10.0 * steps * 2.0 ** steps)[:, None]  # layer 1's MLP: faster and faster
    E[0, 1] = E[:, 0][0]
    tr = _cem_trace(E, {"kind": "cem", "recursion_steps": 2})
    warn = [f.text for f in facts.model_facts(tr) if f.warn]
    assert len(warn) == 1 and warn[0].startswith("Overshoot past the trained $T = 2$: layer 1's MLP energy falls")
    assert "as gradient descent should" not in _texts(facts.model_facts(tr)) and not markup.check_latex(warn[0])
    for name in ("energy_layer", "energy_descent"):
        note = explain.figure_note(name, tr)
        assert "overshoots" in note and "layer 1's MLP" in note and "every line goes down" not in note
    tame = _cem_trace(np.stack([E[:, 0]] * 2, axis=1), {"kind": "cem", "recursion_steps": 2})
    assert not [f for f in facts.model_facts(tame) if f.warn]
    assert explain.OVERSHOOT_LOOK in explain.figure_note("energy_layer", tame)
    assert explain.OVERSHOOT_LOOK in explain.figure_note("energy_descent")
    assert "overshot" in explain.VIEW_TEXT["energy"].look


def test_cem_energy_of_a_real_trace_is_checked_against_its_numbers():
    tr = get_trace("cem")
    mean = tr.energy_mean()
    expected = [(l, b, t) for l in range(mean.shape[0]) for b in range(mean.shape[1])
                for t in range(1, mean.shape[2]) if mean[l, b, t] - mean[l, b, t - 1] > 1e-6 * max(
                    abs(mean[l, b, t - 1]), 1.0)]
    assert [(l, b, t) for l, b, t, _ in facts.energy_rises(tr)] == expected
    rose = any(f.warn for f in facts.model_facts(tr))
    assert rose == bool(expected)


def test_the_facts_name_the_steps_the_energy_chart_flags():
    """A rise tiny beside the layer's largest energy but not beside the step before it: the chart flags it,
    and the facts name the same step with its size."""
    from geomlab.figures.energy import energy_rises as flagged

    E = np.zeros((1, 2, 3, 4))
    E[..., 0, :], E[..., 1, :], E[..., 2, :] = 1000.0, 1.0, 1.0 + 1.5e-6
    tr = _cem_trace(E, {"kind": "cem", "recursion_steps": 2})
    steps = [tuple(int(i) for i in s) for s in zip(*np.nonzero(flagged(tr)))]
    assert steps == [(0, 0, 2), (0, 1, 2)]
    rises = facts.energy_rises(tr)
    assert [(l, b, t) for l, b, t, _ in rises] == steps and all(abs(r - 1.5e-6) < 1e-9 for *_, r in rises)
    assert flagged(tr) is flagged(tr)  # computed once per trace


def test_grassmann_and_attention_facts():
    gr = _texts(facts.model_facts(get_trace("grassmann-r5")))
    assert "$r = 5$" in gr and "= 10$ Plücker" in gr and "\\{1, 3\\}" in gr and "%" in gr
    tf = _texts(facts.model_facts(get_trace("transformer")))
    assert "2 attention heads" in tf
    assert "q_i \\cdot k_j" in explain.view_maths("attention", get_trace("transformer"))
    assert "Re}\\,\\mathrm{tr}(H_i^* H_j)" in explain.view_maths("attention", get_trace("osmformer-U3"))
    assert "angles add" in explain.view_maths("trajectories", get_trace("osmformer-T4"))
    assert "similarity" in _texts(facts.view_facts("attention", get_trace("osmformer-U3")))
    for slug in views.VIEWS:  # every generated fact parses
        for name in MODELS:
            for f in facts.view_facts(slug, get_trace(name)):
                assert not markup.check_latex(f.text), (slug, name, f.text)


# ------------------------------------------------------------------ captions
@pytest.fixture(scope="module")
def all_captions():
    out = []
    for name in MODELS:
        tr = get_trace(name)
        for view in views.views_of_trace(tr):
            for fig_name, v in views.build_view(tr, view.slug, cursor=3).items():
                out.append((name, fig_name, v.caption))
    return out


def test_captions_write_their_formulas_as_latex(all_captions):
    assert len({f for _, f, _ in all_captions}) >= 20
    for model, fig, cap in all_captions:
        assert not markup.check_latex(cap), (model, fig, markup.check_latex(cap))
        left = FORMULA_LEFTOVERS.search(outside_math(cap))
        assert not left, (model, fig, left.group(0), cap)
    assert any("$\\lVert\\Phi_t\\rVert$" in c for _, _, c in all_captions)
    assert any("$\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$" in c for _, _, c in all_captions)


def test_view_blurbs_write_their_formulas_as_latex():
    for v in views.VIEWS.values():
        assert not markup.check_latex(v.blurb), v.slug
        assert not FORMULA_LEFTOVERS.search(outside_math(v.blurb)), v.slug


def test_a_dollar_in_a_token_cannot_open_a_formula():
    tr = get_trace("transformer")
    fields = {k: v for k, v in tr.__dict__.items() if not k.startswith("_")}  # (not what figures keep on it)
    tr2 = type(tr)(**{**fields, "labels": ["$", "*", "_", "`", "x$y"] + list(tr.labels[5:])})
    v = figures.attention_row(tr2, cursor=4)
    assert "'x\\$y'" in v.caption and not markup.check_latex(v.caption)
    assert "'x$y'" in markup.to_plain(v.caption)
    assert markup.md_label("$a*b_c`[x](y)") == "\\$a\\*b\\_c\\`\\[x\\](y)"
    assert markup.to_plain(markup.md_label("$5 and $6")) == "$5 and $6"


def test_plain_and_html_versions_of_captions():
    cap = "Size $\\lVert\\Phi_t\\rVert$ of $\\mathrm{span}(z_t, z_{t-\\Delta})$ at 'a\\$b' <b>"
    assert markup.to_plain(cap) == "Size ‖Φ_t‖ of span(z_t, z_{t−Δ}) at 'a$b' <b>"
    html = markup.to_html(cap)
    assert "<i>‖Φ<sub>t</sub>‖</i>" in html and "z<sub>t−Δ</sub>" in html
    assert "&lt;b&gt;" in html and "$" not in html.replace("a$b", "")


def test_trace_html_index_has_readable_captions(tmp_path):
    from geomlab.commands.trace import write_html

    tr = get_trace("grassmann-r5")
    names = write_html(tr, tmp_path)
    index = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "span(z<sub>t</sub>" in index and "\\mathrm" not in index and "$" not in index
    # each figure once, a figure several views show (the layer lens) under the first of them
    assert len(names) == len(set(names)) and "lens_heatmap" in names
    assert all(index.count(f'href="{n}.html"') == 1 for n in names)


# ------------------------------------------------------------------ the app
@pytest.fixture
def bundled(zoo):
    return zoo


def open_page(slug: str, **query) -> AppTest:
    at = run_page(slug, **query)
    assert not at.error, [e.value for e in at.error]
    return at


def test_view_page_shows_the_intro_with_the_models_facts(bundled):
    at = open_page("trajectories", ckpt="bundled/osm-rnn-torus-s5")
    assert at.latex and "angles add" in at.latex[0].value
    exp = [e for e in at.expander if "How to read this" in e.label]
    assert len(exp) == 1
    body = " ".join(m.value for m in exp[0].markdown)
    assert "**How to read this.**" in body and "**What to look for.**" in body
    assert "$T^{" in body and "is abelian" in body
    assert "(glossary?term=lie-group)" in body
    warn = [c.value for c in at.caption if ":material/warning:" in c.value]
    assert len(warn) == 1 and "$S_{5}$" in warn[0]  # a torus trained on S5: said up front
    looks = [c.value for c in at.caption if "**Look for:**" in c.value]
    assert len(looks) >= 3 and any("abelian" in c for c in looks)

    o = open_page("trajectories", ckpt="bundled/osm-rnn-o-s5")
    body = " ".join(m.value for e in o.expander if "How to read this" in e.label for m in e.markdown)
    assert "not abelian" in body and not [c for c in o.caption if ":material/warning:" in c.value]


def test_energy_page_intro_states_the_recursion_steps(bundled):
    at = open_page("energy", ckpt="bundled/cem-t2-tinyshakespeare")
    assert "varepsilon" in at.latex[0].value
    body = " ".join(m.value for e in at.expander if "How to read this" in e.label for m in e.markdown)
    assert "$T = 2$" in body and ("fell" in body or "ROSE" in body)


def test_energy_page_warns_when_the_descent_runs_away(bundled):
    """At T = 16 the bundled cem-t2's MLP energy plunges: a warning beside the chart and a look-for line
    under it say it overshoots; at its own T = 2, neither."""
    at = open_page("energy", ckpt="bundled/cem-t2-tinyshakespeare", T="16")
    warn = [c.value for c in at.caption if ":material/warning:" in c.value]
    assert len(warn) == 1 and "Overshoot past the trained $T = 2$" in warn[0] and "layer 3's MLP" in warn[0]
    assert any("**Look for:**" in c.value and "overshoots" in c.value for c in at.caption)
    at = open_page("energy", ckpt="bundled/cem-t2-tinyshakespeare")
    assert not [c for c in at.caption if "Overshoot" in c.value or "overshoots" in c.value]


def test_glossary_page_lists_filters_and_opens_a_term(bundled):
    at = open_page("glossary")
    names = [h.value for h in at.subheader]
    assert names == list(glossary.GLOSSARY) and len(at.latex) >= 20
    at.text_input(key="glossary-filter").set_value("principal angle").run()
    assert [h.value for h in at.subheader][0] == "Principal angles"
    assert len(at.subheader) < len(glossary.GLOSSARY)
    at.text_input(key="glossary-filter").set_value("qqqq").run()
    assert not at.subheader and any("No term matches" in i.value for i in at.info)

    one = open_page("glossary", term="plucker-coordinates")
    assert one.subheader[0].value == "Plücker coordinates"
    assert one.query_params.get("term") == ["plucker-coordinates"] or \
        one.query_params.get("term") == "plucker-coordinates"
    bad = open_page("glossary", term="$nope$")
    assert any("No glossary entry" in i.value and "\\$nope\\$" in i.value for i in bad.info)


def test_a_views_formula_stacks_its_parts_for_the_narrow_column():
    """The intro's formula sits in a 230-330 px column: its comma-separated parts go one under the other, every
    part kept, in order; a formula of one part stays as it is."""
    from app_pages._explain import stacked

    for slug in ("trajectories", "tangents", "attention", "energy", "planes"):
        maths = explain.view_maths(slug)
        out = stacked(maths)
        assert out.startswith(r"\begin{gathered}") and out.endswith(r"\end{gathered}")
        lines = out.removeprefix(r"\begin{gathered}").removesuffix(r"\end{gathered}").split(r" \\ ")
        assert len(lines) >= 2 and all(line in maths for line in lines)
        assert maths.index(lines[0]) < maths.index(lines[-1])
    assert stacked(r"a = b,\ c") == r"a = b,\ c"
