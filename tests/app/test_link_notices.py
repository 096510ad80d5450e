"""Every value of a link that the app replaces leaves a notice naming the link's key and value (docs/app.md,
"Opening such a link"): out of range, not a whole number, not a view, a view that shows neither side on
Compare, a value too long to repeat (quoted cut short)."""

from __future__ import annotations

import pytest
from conftest import run_page

CEM = "bundled/cem-t2-tinyshakespeare"

#: (page, link, what the notice must say); Compare opens on the cem checkpoint with a transformer as B
CASES = [
    ("energy", {"ckpt": CEM, "pos": "-1"}, "Ignored the link's pos='-1': it must be a position ≥ 0."),
    ("energy", {"ckpt": CEM, "layer": "-1"}, "Ignored the link's layer='-1': it must be a layer ≥ 0."),
    ("energy", {"ckpt": CEM, "T": "1e30"}, "Ignored the link's T='1e30': not a whole number."),
    ("energy", {"ckpt": CEM, "layer": "1.5"}, "Ignored the link's layer='1.5': not a whole number."),
    ("energy", {"ckpt": CEM, "T": "100000"}, "Steps T = 100000 is outside this model's range 1–16: showing 16"),
    ("energy", {"ckpt": CEM, "layer": "99"}, "Layer = 99 is outside this model's range 0–3: showing 3 instead."),
    ("energy", {"ckpt": CEM, "pos": "100000"}, "The cursor position 100000 is past the end of this text"),
    ("attention", {"ckpt": CEM, "head": "-7"}, "Ignored the link's head='-7': it must be a head ≥ 0."),
    ("compare", {"view": "nosuch"}, "Ignored the link's view='nosuch': not a view"),
    ("compare", {"view": "tangents"}, "Ignored the link's view='tangents': Tangent updates shows neither A (cem) "
                                      "nor B (transformer); showing Attention similarity instead."),
    ("compare", {"TB": "1e30"}, "Ignored the link's TB='1e30': not a whole number."),
    ("energy", {"ckpt": CEM, "pos": "9" * 100_000}, "Ignored the link's pos='" + "9" * 58 + "…: not a whole number."),
]


@pytest.mark.parametrize("slug,query,want", CASES, ids=[f"{s}-{'&'.join(q)}-{i}" for i, (s, q, _) in enumerate(CASES)])
def test_a_replaced_link_value_leaves_a_notice(zoo, slug, query, want):
    at = run_page(slug, **query)
    shown = [w.value.replace("\\", "") for w in at.warning]  # notices are markdown-escaped
    assert any(want in m for m in shown), shown
    assert all(len(m) < 1000 for m in shown)  # a value is named, never repeated in full


@pytest.mark.parametrize("slug,query", [("energy", {"ckpt": CEM, "T": "100000"}),
                                        ("energy", {"ckpt": CEM, "layer": "99"}),
                                        ("attention", {"ckpt": CEM, "head": "7"}),
                                        ("energy", {"ckpt": CEM, "pos": "100000"})])
def test_a_controls_notice_spans_the_page_not_a_column_of_the_controls_row(zoo, slug, query):
    """A notice about a link's value for a control (T, layer, head, the cursor) sits under the controls row
    at the page's width, in no column of that row (a fifth of the page would make it a tall, narrow box)."""
    at = run_page(slug, **query)
    word = {"T": "Steps T", "layer": "Layer", "head": "Head", "pos": "The cursor position"}[
        next(iter(set(query) - {"ckpt"}))]
    shown = [w for w in at.warning if w.value.startswith(word)]
    assert shown, [w.value for w in at.warning]
    in_columns = [w.value for col in at.columns for w in col.warning]
    assert not any(w.value in in_columns for w in shown), in_columns


@pytest.mark.parametrize("stand_in", ["😀", "zz"], ids=["emoji", "two"])
def test_patching_refuses_a_stand_in_the_checkpoint_cannot_read_as_one_token(zoo, stand_in):
    """A stand-in outside the vocabulary would run as the unknown token under its own name; two tokens
    cannot stand in for one: both are refused with a notice, and no sweep is drawn."""
    at = run_page("trajectories", ckpt="bundled/osm-rnn-o-tinyshakespeare", pos="5", patch=stand_in)
    shown = [i.value for i in at.info if i.value.startswith("Patching:")]
    want = "Unknown symbols for this checkpoint" if stand_in == "😀" else "give one token"
    assert shown and want in shown[0], [i.value for i in at.info]
    assert not [c for c in at.caption if "patched runs" in c.value]


def test_a_dropped_intervention_takes_its_size_with_it(zoo):
    """``wi=steer`` on a CEM checkpoint is not one of its interventions: the notice says so, and its size
    leaves the link too (a later intervention would open at the stale size)."""
    at = run_page("energy", ckpt=CEM, wi="steer", wis="3")
    assert any("is not an intervention for" in i.value for i in at.info), [i.value for i in at.info]
    assert at.session_state["gl_whatif"] is None and at.session_state["gl_whatif_size"] is None
    assert "wis" not in at.query_params and "wi" not in at.query_params


def test_head_ablation_is_a_switch_and_says_which_head_the_mean_stands_for(zoo):
    """Ablating a head has two sizes, off and on: a switch (not a 0-1 slider), on for wis=1; with the page on
    the mean over heads, a caption says head 0 is the one ablated."""
    at = run_page("attention", ckpt=CEM, wi="ablate_head", wis="1")
    assert at.toggle(key="w_whatif_flag").value is True
    assert not [s for s in at.slider if s.key == "w_whatif_size"]
    assert any("head 0 is ablated" in c.value for c in at.caption), [c.value for c in at.caption]
    at.toggle(key="w_whatif_flag").set_value(False).run()
    assert at.session_state["gl_whatif_size"] == 0.0


def test_on_the_last_token_the_patching_switch_stays_in_view_off(zoo):
    """Patching reads a prediction after the cursor: on the last token its switch is shown, off and disabled,
    and the link keeps the stand-in for when the cursor moves back."""
    at = run_page("trajectories", ckpt="bundled/osm-rnn-o-tinyshakespeare", pos="100000", patch="e")
    end = at.toggle(key="w_patch_end")
    assert end.value is False and end.disabled
    assert at.session_state["gl_patch"] == "e"


def test_steps_t_off_the_trained_t_says_why_what_if_and_patching_are_gone(zoo):
    at = run_page("energy", ckpt=CEM, T="4", wi="energy_steps", patch="e")
    assert any("set T back to the model's own" in c.value for c in at.caption), [c.value for c in at.caption]
    assert not [t for t in at.toggle if t.key in ("w_whatif_on", "w_patch_on")]
    at = run_page("energy", ckpt=CEM)
    assert not any("set T back" in c.value for c in at.caption)
    assert [t for t in at.toggle if t.key == "w_whatif_on"]


def test_a_space_stand_in_may_be_typed_as_the_charts_show_it(zoo):
    at = run_page("trajectories", ckpt="bundled/osm-rnn-o-tinyshakespeare", pos="5", patch="␣")
    assert not [i.value for i in at.info if i.value.startswith("Patching:")]
    assert [c for c in at.caption if "replaced by '␣'" in c.value and "patched runs" in c.value]


def test_a_whole_number_size_reads_as_one_in_the_link(zoo):
    at = run_page("trajectories", ckpt="bundled/osm-rnn-o-s5", text="12340 10234 12340 12340 10234 21034", pos="5",
                  wi="steer", wis="-3.0")
    assert at.query_params.get("wis") in ("-3", ["-3"])


def test_the_what_if_switch_opens_on_the_pages_own_knob(zoo):
    """CEM offers energy steps and head ablation: on the Attention page the switch opens on the head."""
    at = run_page("attention", ckpt=CEM)
    at.toggle(key="w_whatif_on").set_value(True).run()
    assert at.session_state["gl_whatif"] == "ablate_head"
    at = run_page("energy", ckpt=CEM)
    at.toggle(key="w_whatif_on").set_value(True).run()
    assert at.session_state["gl_whatif"] == "energy_steps"
