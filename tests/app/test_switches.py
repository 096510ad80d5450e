"""No silent switches: a view that cannot show the chosen checkpoint says why and offers
the compatible ones (same family first); Compare pairs two related checkpoints on a view both can show,
with a link box that reopens the same comparison and both traces to download; each page's URL carries only
the keys that page uses. AppTest against the real bundled checkpoints (``assets/checkpoints``)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import run_page
from streamlit.testing.v1 import AppTest

from geomlab.teach import views

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
ASSETS = ROOT / "assets" / "checkpoints"
TIMEOUT = 120
OSM_RNN = "bundled/osm-rnn-o-tinyshakespeare"
OSMFORMER_O = "bundled/osmformer-o-linear-tinyshakespeare"
CEM = "bundled/cem-t2-tinyshakespeare"


@pytest.fixture(autouse=True)
def bundled(zoo):
    """The real bundled checkpoints and an empty runs folder; no pre-warming."""
    return zoo


def open_page(slug: str, **query) -> AppTest:
    at = run_page(slug, **query)
    ok(at)
    return at


def goto(at: AppTest, slug: str) -> AppTest:
    at.switch_page(f"app_pages/{slug or 'home'}.py")
    at.run()
    ok(at)
    return at


def ok(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def shown(markdown: str) -> str:
    """The text a message shows: its markdown source without the backslash escapes of user values."""
    return re.sub(r"\\(.)", r"\1", markdown)


def kind_of(ref: str) -> str:
    from app_pages import _data

    return _data.entry_for(ref).kind


def standin_note(at: AppTest) -> str | None:
    """The stand-in's message: an info box for a swapped choice, a caption for the app's default."""
    return next((shown(i.value) for i in [*at.info, *at.caption]
                 if "instead of" in i.value or i.value.startswith("Showing **")), None)


def sidebar_standin(at: AppTest) -> str | None:
    """The sidebar's note under the checkpoint box while a stand-in is shown (its label says so too)."""
    note = next((shown(c.value) for c in at.sidebar.caption if "Stand-in" in c.value), None)
    assert (note is not None) == (at.selectbox(key="w_gl_ckpt").label == "Checkpoint · stand-in")
    return note


def qp(at: AppTest) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


# ---------------------------------------------------------------- the backend's relatedness
def test_related_kinds_put_the_family_before_the_mechanism():
    osm = list(views.related_kinds("osm-rnn"))
    assert osm[0] == "osm-rnn" and osm[1] == "osmformer"  # same family before the LSTM
    assert "cem" not in osm and "grassmann" not in osm
    assert views.related_kinds("grassmann")["grassmann-attn"] == "same family"
    cem = views.related_kinds("cem")
    assert cem["transformer"] == "also attention-based" and "osm-rnn" not in cem
    assert views.related_kinds("no-such-kind") == {"no-such-kind": "same kind"}


# ---------------------------------------------------------------- views: a stand-in, said out loud
def test_an_osm_rnn_on_attention_shows_an_osmformer_and_says_why():
    at = open_page("attention", ckpt=OSM_RNN)
    assert kind_of(at.session_state["gl_ckpt"]) == "osmformer"  # same family, not a CEM or a Transformer
    assert at.session_state["gl_ckpt"] == OSMFORMER_O  # same group (O) and corpus first
    note = standin_note(at)
    assert note is not None, [i.value for i in at.info]
    assert "Attention similarity** needs a model with attention; `osm-rnn` has none" in note
    assert "Showing **osmformer-o-linear-tinyshakespeare** (osmformer, same family)" in note
    assert "instead of osm-rnn-o-tinyshakespeare, the selected checkpoint" in note
    # the other checkpoints this view can show, same family first, the shown one left out
    chips = at.pills(key="w_standin_attention")
    offered = [o.content for o in chips.proto.options]
    assert offered and not any(OSMFORMER_O.split("/")[1] == o.split(" · ")[0] for o in offered)
    families = ["same family" in o for o in offered]
    assert families == sorted(families, reverse=True) and families[0], offered
    assert any(o.startswith("cem-t2") for o in offered)  # unrelated kinds are still offered, last
    # the page links to the views that do show the chosen checkpoint
    links = {p.proto.label: p.proto.query_string for p in at.get("page_link")}
    # (by the views' short names: a full title was cut in its column at 1,000 px)
    assert "Trajectories" in links and "osm-rnn-o-tinyshakespeare" in links["Trajectories"]
    assert {p.proto.help for p in at.get("page_link") if p.proto.label == "Trajectories"} == {"Group trajectories"}
    # the URL and the link name what is on screen; the sidebar says it stands in
    assert qp(at)["ckpt"] == OSMFORMER_O
    assert sidebar_standin(at) == ("**Stand-in**: shown in place of osm-rnn-o-tinyshakespeare, which this view "
                                   "can't draw; any change here makes it your choice.")
    # only looked at, another page gives the chosen checkpoint back, silently (it is the user's own)
    goto(at, "trajectories")
    assert at.session_state["gl_ckpt"] == OSM_RNN and standin_note(at) is None and sidebar_standin(at) is None


def test_a_stand_in_for_a_word_problem_model_reads_its_own_text_and_gives_the_tour_s_back():
    """A trial user opened the Tour (its first step: the S5 word-problem OSM-RNN reading ``12340 10234 ...``),
    then Attention similarity: the Shakespeare OSMFormer standing in read those digits as unknown
    characters. The stand-in now reads its own text; the tour's text comes back with the chosen model."""
    from geomlab.teach import lessons

    step = next(iter(lessons.LESSONS.values())).steps[0]
    at = open_page("tour")
    assert at.session_state["gl_ckpt"] == step.checkpoint and at.session_state["gl_text"] == step.text
    goto(at, "attention")
    shown = at.session_state["gl_ckpt"]
    from app_pages import _data

    assert not _data.entry_for(shown).is_word_problem and standin_note(at) is not None
    assert at.session_state["gl_text"] == _data.default_text_for(_data.entry_for(shown))
    assert not [w.value for w in at.warning if "unknown" in w.value.lower()]
    goto(at, "trajectories")  # the OSM-RNN's own view: the tour's checkpoint and text are given back
    assert at.session_state["gl_ckpt"] == step.checkpoint and at.session_state["gl_text"] == step.text


def test_choosing_an_offered_checkpoint_ends_the_stand_in():
    at = open_page("attention", ckpt=OSM_RNN)
    at.pills(key="w_standin_attention").set_value(CEM).run()
    ok(at)
    assert at.session_state["gl_ckpt"] == CEM and standin_note(at) is None
    goto(at, "trajectories")  # the pick is the selection now: CEM stood in for on trajectories
    note = standin_note(at)
    assert note and "`cem` has none" in note and "instead of cem-t2-tinyshakespeare" in note


def test_a_default_checkpoint_is_replaced_with_a_message_too():
    at = open_page("planes")  # a fresh session's default (the CEM) cannot be shown here
    assert kind_of(at.session_state["gl_ckpt"]) == "grassmann"
    note = standin_note(at)
    assert note and note.startswith("Showing **grassmann-tinyshakespeare** (grassmann)"), note
    # a neutral note naming both, not an error: the page has already chosen a checkpoint it draws
    assert (", a checkpoint **Grassmann planes** draws; the app's default, cem-t2-tinyshakespeare (cem), is on the "
            "pages that draw its kind.") in note, note
    assert "cannot" not in note and "Choose another" not in note, note
    assert not at.info  # one quiet line: the newcomer chose nothing, so nothing was swapped from them


def test_typing_a_text_or_keep_it_makes_the_stand_in_the_choice_and_its_message_goes():
    """A stand-in's message must not go stale: once the user works with the stand-in (types a text) or
    presses "Keep it", the shown checkpoint is the selection, on this page and the others."""
    at = open_page("attention", ckpt=OSM_RNN)
    assert standin_note(at) is not None and at.session_state["gl_ckpt"] == OSMFORMER_O
    at.text_area(key="w_text").set_value("To be, or not to be").run()
    ok(at)
    assert standin_note(at) is None and at.session_state["gl_ckpt"] == OSMFORMER_O
    goto(at, "trajectories")  # no longer given back: the OSMFormer is the selection now
    assert at.session_state["gl_ckpt"] == OSMFORMER_O and standin_note(at) is None
    at = open_page("attention", ckpt=OSM_RNN)
    at.button(key="w_standin_keep_attention").click().run()
    ok(at)
    assert standin_note(at) is None and at.session_state["gl_ckpt"] == OSMFORMER_O
    goto(at, "tangents")
    assert at.session_state["gl_ckpt"] == OSMFORMER_O


def test_using_a_stand_in_makes_it_the_choice():
    """A fresh user on Group trajectories sees an OSM-RNN standing in for the app's default (the CEM) and
    moves the cursor on it: that is choosing it, so Attention (which draws the CEM, not an OSM-RNN) no longer
    switches back to the CEM silently but stands in for the OSM-RNN, saying so."""
    at = open_page("trajectories")
    assert at.session_state["gl_ckpt"] == OSM_RNN and "cem-t2-tinyshakespeare" in sidebar_standin(at)
    at.select_slider(key="w_pos").set_value(3).run()
    ok(at)
    assert at.session_state["gl_ckpt"] == OSM_RNN and standin_note(at) is None and sidebar_standin(at) is None
    goto(at, "attention")
    assert at.session_state["gl_ckpt"] == OSMFORMER_O and at.session_state["gl_pos"] == 3
    assert "instead of osm-rnn-o-tinyshakespeare, the selected checkpoint" in standin_note(at)
    goto(at, "tangents")
    assert at.session_state["gl_ckpt"] == OSM_RNN


def test_turning_what_if_on_makes_the_stand_in_the_choice():
    at = open_page("trajectories")
    at.toggle(key="w_whatif_on").set_value(True).run()
    ok(at)
    assert at.session_state["gl_whatif"] is not None and sidebar_standin(at) is None
    goto(at, "energy")  # draws only the CEM: the OSM-RNN is the choice, a CEM stands in for it, saying so
    assert "instead of osm-rnn-o-tinyshakespeare, the selected checkpoint" in standin_note(at)


def test_a_stand_in_only_looked_at_gives_the_default_back():
    at = open_page("trajectories")
    at.toggle(key="w_more_figures").set_value(True).run()  # only shows more: not working with the model
    ok(at)
    goto(at, "attention")
    assert at.session_state["gl_ckpt"] == CEM and standin_note(at) is None and sidebar_standin(at) is None


# ---------------------------------------------------------------- Compare
def test_compare_opens_on_the_view_you_came_from_when_both_sides_have_it():
    at = open_page("attention", ckpt=OSMFORMER_O)
    goto(at, "compare")  # B: another OSMFormer; Attention shows both (Trajectories is more specific)
    assert kind_of(at.session_state["gl_ckpt_b"]) == "osmformer"
    assert at.session_state["gl_compare_view"] == "attention"
    goto(at, "energy")  # a CEM stands in: it is A, and Energy (CEM only) does not show its B
    goto(at, "compare")
    a, b = at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]
    assert kind_of(a) == "cem" and kind_of(b) != "cem" and at.session_state["gl_compare_view"] == "attention"
    goto(at, "attention")
    assert at.session_state["gl_ckpt"] == OSMFORMER_O  # the choice is back: Compare only showed the CEM
    at.query_params.clear()
    at.query_params.update(view="trajectories")  # an address's view wins
    goto(at, "compare")
    assert at.session_state["gl_compare_view"] == "trajectories"


def test_compare_pairs_one_kind_on_the_most_specific_view_both_show():
    at = open_page("compare", ckpt=OSMFORMER_O)
    b = at.session_state["gl_ckpt_b"]
    assert kind_of(b) == "osmformer" and b != OSMFORMER_O  # same kind, another group
    view = at.session_state["gl_compare_view"]
    assert view == "trajectories"  # shows both, fewer kinds than Attention similarity
    assert {"osmformer"} <= set(views.VIEWS[view].kinds)
    assert not any("does not apply" in i.value for i in at.info)
    assert any("B chosen to go with A: the same kind" in shown(c.value) for c in at.caption)
    # A changes: the automatic B follows it (a word problem gets a word problem of its kind)
    at.selectbox(key="w_gl_ckpt").set_value("bundled/osm-rnn-o-s5").run()
    at.button(key="w_text_reset").click().run()  # the text was English; a word problem reads symbols
    ok(at)
    assert at.session_state["gl_ckpt_b"] == "bundled/osm-rnn-torus-s5"
    # a B the user picked is kept when A changes
    at.selectbox(key="w_gl_ckpt_b").set_value("bundled/osm-rnn-o-s3").run()
    at.selectbox(key="w_gl_ckpt").set_value(OSM_RNN).run()
    assert not at.exception  # (B cannot read A's default text: an error message, not a crash)
    assert at.session_state["gl_ckpt_b"] == "bundled/osm-rnn-o-s3"
    assert not any("B chosen" in c.value for c in at.caption)


def test_a_fresh_compare_opens_on_a_view_both_sides_show():
    at = open_page("compare")
    a, b = at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]
    view = views.VIEWS[at.session_state["gl_compare_view"]]
    assert kind_of(a) in view.kinds and kind_of(b) in view.kinds
    assert kind_of(b) in views.related_kinds(kind_of(a))  # related, not any other checkpoint


def test_compare_opens_on_the_checkpoint_the_view_page_showed():
    """A is the checkpoint on screen on the view page Compare was opened from (a pick, or the stand-in a view
    shows for a checkpoint it cannot draw), B the one Compare pairs with it."""
    from app_pages.compare import default_pair_b

    at = open_page("trajectories")
    at.selectbox(key="w_gl_ckpt").set_value("bundled/osm-rnn-o-s5").run()
    goto(at, "compare")
    assert (at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]) == (
        "bundled/osm-rnn-o-s5", "bundled/osm-rnn-torus-s5")
    goto(at, "attention")  # draws no OSM-RNN: another checkpoint stands in for it
    shown = at.session_state["gl_ckpt"]
    assert shown != "bundled/osm-rnn-o-s5" and standin_note(at)
    goto(at, "compare")
    assert at.session_state["gl_ckpt"] == shown
    assert at.session_state["gl_ckpt_b"] == default_pair_b(shown)[0] != shown
    assert qp(at)["ckpt"] == shown


def test_compare_address_wins_over_the_view_page():
    """A ``b`` in Compare's address is B, with A from the view page; a ``ckpt`` there is A."""
    at = open_page("trajectories")  # a fresh session: the view shows its own default, not the app's (CEM)
    shown = at.session_state["gl_ckpt"]
    assert shown != CEM and standin_note(at)
    at.query_params.clear()
    at.query_params.update(b=OSMFORMER_O)
    goto(at, "compare")
    assert (at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]) == (shown, OSMFORMER_O)
    goto(at, "trajectories")
    torus = "bundled/osmformer-torus-tinyshakespeare"
    at.query_params.clear()
    at.query_params.update(ckpt=torus, b=OSMFORMER_O)
    goto(at, "compare")
    assert (at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]) == (torus, OSMFORMER_O)


def test_compare_without_a_shared_view_says_so_and_offers_a_b():
    at = open_page("compare", ckpt="bundled/osm-rnn-o-s5", b="bundled/grassmann-tinyshakespeare")
    note = next((i.value for i in at.info if "No view shows both" in i.value), None)
    # the kinds as code spans, literally (a code span shows a backslash escape as typed)
    assert note and "(`osm-rnn`)" in note and "(`grassmann`)" in note, [i.value for i in at.info]
    chips = at.pills(key="w_cmp_b_choice")
    assert chips.proto.options[0].content.startswith("osm-rnn-torus-s5 · same kind")  # same task, kind first
    # with no view for both, the view is one of A's (not one that shows only B)
    assert kind_of("bundled/osm-rnn-o-s5") in views.VIEWS[at.session_state["gl_compare_view"]].kinds
    swapped = open_page("compare", ckpt="bundled/grassmann-tinyshakespeare",
                        b="bundled/osmformer-torus-tinyshakespeare")
    assert swapped.session_state["gl_compare_view"] == "planes"
    infos = [i.value for i in swapped.info]
    assert any("Grassmann planes does not apply to an `osmformer`." in v for v in infos), infos
    assert any(v.startswith("No view shows both") and v.endswith(" show B.") for v in infos), infos
    chips.set_value("bundled/osm-rnn-torus-s5").run()
    ok(at)
    assert at.session_state["gl_ckpt_b"] == "bundled/osm-rnn-torus-s5"
    assert at.session_state["gl_compare_view"] == "trajectories"
    assert not any("No view shows both" in i.value for i in at.info)


def _link(at: AppTest) -> str:
    links = [c.value for c in at.code if "/compare?" in c.value]
    assert len(links) == 1, [c.value for c in at.code]
    return links[0]


STATE = ("gl_ckpt", "gl_ckpt_b", "gl_text", "gl_pos", "gl_layer", "gl_compare_view", "gl_steps", "gl_steps_b")


def test_the_compare_link_reopens_the_same_comparison():
    at = open_page("compare", ckpt=CEM, b="bundled/transformer-alibi-tinyshakespeare")
    at.text_area(key="w_text").set_value("But soft, what light").run()
    at.select_slider(key="w_pos").set_value(6).run()
    at.slider(key="w_gl_steps").set_value(4).run()
    at.segmented_control(key="w_gl_compare_view").set_value("energy").run()  # a view only A shows: chosen
    ok(at)
    before = {k: at.session_state[k] for k in STATE}
    assert before["gl_compare_view"] == "energy" and before["gl_steps"] == 4 and before["gl_pos"] == 6
    link = _link(at)
    query = dict(parse_qsl(urlsplit(link).query))
    assert urlsplit(link).path == "/compare"
    assert {"ckpt", "b", "text", "pos", "view", "T"} <= set(query) and "TB" not in query  # B has no T
    assert query == qp(at)  # the address bar holds the same link
    again = open_page("compare", **query)  # a new session opens the link
    after = {k: again.session_state[k] for k in STATE}
    assert after == before
    assert _link(again) == link
    assert not any("B chosen" in c.value for c in again.caption)
    # the downloads: each side's trace as .npz and JSON
    names = sorted(d.proto.label for d in again.get("download_button"))
    assert names == ["Trace (.json)", "Trace (.json)", "Trace (.npz)", "Trace (.npz)"]


def test_a_link_to_one_checkpoint_at_two_depths_round_trips_both_t():
    at = open_page("compare", ckpt=CEM, b=CEM, T="1", TB="3")
    assert (at.session_state["gl_steps"], at.session_state["gl_steps_b"]) == (1, 3)
    query = dict(parse_qsl(urlsplit(_link(at)).query))
    assert (query["T"], query["TB"]) == ("1", "3")
    again = open_page("compare", **query)
    assert {k: again.session_state[k] for k in STATE} == {k: at.session_state[k] for k in STATE}


def test_a_link_with_an_unknown_view_gives_a_notice():
    at = open_page("compare", ckpt=OSMFORMER_O, view="nope")
    assert any("view='nope'" in shown(w.value) for w in at.warning), [w.value for w in at.warning]
    assert at.session_state["gl_compare_view"] in views.VIEWS


# ---------------------------------------------------------------- each page's URL: only its own keys
ALLOWED = {
    "": set(), "train": set(), "checkpoints": set(),
    "compare": {"ckpt", "b", "text", "pos", "layer", "view", "T", "TB"},
    **{slug: {"ckpt", "text", "pos", "layer"} | ({"T"} if "steps" in v.controls else set())
       for slug, v in views.VIEWS.items()},
}


def test_each_page_url_carries_only_the_keys_that_page_uses():
    at = open_page("trajectories", ckpt=OSM_RNN)
    at.text_area(key="w_text").set_value("But soft, what light").run()
    at.select_slider(key="w_pos").set_value(4).run()
    seen = {}
    for slug in ("trajectories", "energy", "compare", "train", "checkpoints", "", "attention", "compare",
                 "tangents"):
        goto(at, slug)
        keys = set(qp(at))
        assert keys <= ALLOWED[slug], (slug, keys)
        seen[slug] = keys
        assert at.session_state["gl_pos"] == 4 and at.session_state["gl_text"] == "But soft, what light"
    assert {"ckpt", "text", "pos"} <= seen["trajectories"] and "b" not in seen["trajectories"]
    assert "T" in seen["energy"]
    assert {"ckpt", "b", "view", "pos"} <= seen["compare"]
    assert seen["train"] == set() and seen["checkpoints"] == set() and seen[""] == set()
    assert "T" not in seen["attention"] and "view" not in seen["tangents"]


def test_a_link_with_other_pages_keys_still_works():
    at = open_page("train", ckpt=OSM_RNN, b=CEM, pos="2", text="But soft", view="energy", debug="1")
    assert qp(at) == {"debug": "1"}  # Train's URL: none of the shared keys; debug as typed
    goto(at, "compare")  # the state was adopted all the same
    assert (at.session_state["gl_ckpt"], at.session_state["gl_ckpt_b"]) == (OSM_RNN, CEM)
    assert at.session_state["gl_pos"] == 2 and at.session_state["gl_text"] == "But soft"
    assert qp(at)["b"] == CEM and qp(at)["debug"] == "1"


def test_the_view_link_box_has_only_the_view_keys():
    at = open_page("energy", ckpt=CEM, b=OSM_RNN, view="attention", pos="1")
    link = next(t.value for t in at.text_input if "/energy?" in (t.value or ""))
    query = dict(parse_qsl(urlsplit(link).query))
    assert set(query) <= ALLOWED["energy"] and query["ckpt"] == CEM and query["pos"] == "1" and "T" in query


def test_a_layer_nobody_chose_follows_the_next_model_without_a_notice():
    """The layer starts at each model's last layer; switching checkpoints moves an untouched layer to the new
    model's last layer silently, while a layer the user chose that the next model lacks gets the notice."""
    transformer, torus = "bundled/transformer-alibi-tinyshakespeare", "bundled/osmformer-torus-tinyshakespeare"
    at = open_page("attention", ckpt=CEM)
    first = at.session_state["gl_layer"]
    assert first >= 3  # CEM's last layer, more layers than the next two models have
    at.selectbox(key="w_gl_ckpt").select(transformer).run()
    ok(at)
    assert not [w.value for w in at.warning if "outside this model's range" in w.value]
    assert at.session_state["gl_layer"] == at.slider(key="w_gl_layer").max < first
    at.selectbox(key="w_gl_ckpt").select(CEM).run()
    at.slider(key="w_gl_layer").set_value(2).run()  # chosen, and beyond the torus model's layers
    at.selectbox(key="w_gl_ckpt").select(torus).run()
    ok(at)
    warned = [w.value for w in at.warning if "Layer = 2 is outside this model's range" in w.value]
    assert warned and at.session_state["gl_layer"] == at.slider(key="w_gl_layer").max == 1
    at.selectbox(key="w_gl_ckpt").select(CEM).run()
    at.slider(key="w_gl_layer").set_value(first).run()  # chosen, though it is CEM's default (its last layer)
    at.selectbox(key="w_gl_ckpt").select(transformer).run()
    assert [w.value for w in at.warning if f"Layer = {first} is outside this model's range" in w.value]


def test_a_link_value_outside_a_slider_range_says_so():
    """/energy?T=100000: the recursion-steps slider shows its largest T with a notice, not silently."""
    at = open_page("energy", ckpt=CEM, T="100000")
    assert not at.exception
    warned = [w.value for w in at.warning if "100000 is outside this model's range" in w.value]
    assert warned and "showing" in warned[0]
    lo, hi = (int(x) for x in warned[0].split("range ")[1].split(":")[0].split("–"))
    assert at.session_state["gl_steps"] == hi and lo >= 1


def test_planes_opens_on_the_layer_that_draws_most_on_its_planes_and_a_link_keeps_its_own():
    """The Planes page's layer, nobody's choice, is the one whose gate passes most of its planes (computed from
    the trace: the bundled model's first), and its link says so; a link's layer=5 opens layer 5; the layer
    another page then opens on is that page's own default again."""
    gr = "bundled/grassmann-tinyshakespeare"
    at = open_page("planes", ckpt=gr)
    assert at.session_state["gl_layer"] == at.slider(key="w_gl_layer").value == 0
    assert at.slider(key="w_gl_layer").max == 5 and at.query_params["layer"] == "0"
    linked = open_page("planes", ckpt=gr, layer="5")
    assert linked.session_state["gl_layer"] == 5 == linked.slider(key="w_gl_layer").value
    at.switch_page("app_pages/energy.py").run()
    assert at.session_state["gl_layer"] == at.slider(key="w_gl_layer").max  # the CEM's last layer


def test_compare_s_automatic_b_skips_a_copy_of_a(tmp_path, monkeypatch):
    """The same run saved under two names ranks first as B (same kind, group and corpus) and its line lay on
    A's: the automatic pick takes the next checkpoint instead, and the copy only when nothing else is there."""
    import shutil

    from app_pages import _data, _ui
    from app_pages.compare import default_pair_b
    from geomlab.checkpoints import catalog

    for name in ("osm-rnn-o-s3", "osm-rnn-o-s5"):
        shutil.copytree(ASSETS / name, tmp_path / name)
    shutil.copytree(ASSETS / "osm-rnn-o-s3", tmp_path / "s3-copy")

    def listed(*names: str) -> None:
        found = [catalog.read_folder(tmp_path / n, tmp_path, "user") for n in names]
        monkeypatch.setattr(_data, "entries", lambda: found)
        monkeypatch.setattr(_ui, "entries", lambda: found)

    listed("osm-rnn-o-s3", "s3-copy", "osm-rnn-o-s5")
    assert [e.ref for e, _ in _data.related_entries(_data.entry_for("runs/osm-rnn-o-s3"), pair=True)][0] == "runs/s3-copy"
    assert default_pair_b("runs/osm-rnn-o-s3") == ("runs/osm-rnn-o-s5", "same kind")
    listed("osm-rnn-o-s3", "s3-copy")
    assert default_pair_b("runs/osm-rnn-o-s3") == ("runs/s3-copy", "same kind")


def test_visiting_compare_does_not_make_a_stand_in_the_choice():
    """Compare opens on a view's stand-in as its A and says so, but only looking at it there chooses nothing:
    the next view page has the chosen checkpoint (the app's default here) back, without a stand-in."""
    at = open_page("trajectories")
    assert at.session_state["gl_ckpt"] == OSM_RNN and sidebar_standin(at)
    goto(at, "compare")
    assert at.session_state["gl_ckpt"] == OSM_RNN
    assert any(shown(c.value) == "A: osm-rnn-o-tinyshakespeare, the stand-in Group trajectories showed for "
               "cem-t2-tinyshakespeare." for c in at.caption), [c.value for c in at.caption]
    at.segmented_control(key="w_gl_compare_view").set_value("attention").run()  # seeds its controls' defaults
    ok(at)
    goto(at, "attention")
    assert at.session_state["gl_ckpt"] == CEM and standin_note(at) is None and sidebar_standin(at) is None


def test_a_choice_comes_back_after_compare():
    at = open_page("trajectories")
    at.select_slider(key="w_pos").set_value(3).run()  # the OSM-RNN is the choice now
    goto(at, "attention")
    assert at.session_state["gl_ckpt"] == OSMFORMER_O and standin_note(at)
    goto(at, "compare")
    assert at.session_state["gl_ckpt"] == OSMFORMER_O
    goto(at, "trajectories")
    assert at.session_state["gl_ckpt"] == OSM_RNN and standin_note(at) is None and sidebar_standin(at) is None
