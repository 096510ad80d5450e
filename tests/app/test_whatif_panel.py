"""The What-if panel's and the Patching sweep's texts (AppTest on the bundled checkpoints): chart text is
plain (no Markdown escapes, a space as ␣), a position the model read as unknown is named 'é→�' there and in
the page's own token chips and charts, and a swap that barely changes the prediction is a warning."""

from __future__ import annotations

import json

from conftest import run_page
from helpers.charts import charts

GRASSMANN = "bundled/grassmann-tinyshakespeare"


def _chart(at, key: str) -> dict:
    return next(json.loads(c.spec) for c in charts(at) if c.key == key)


def test_the_guesses_chart_names_tokens_as_the_app_does_not_as_markdown(zoo):
    at = run_page("planes", ckpt=GRASSMANN, pos="20", layer="2", wi="rotate_plane", wis="1.2")
    shown = {y for d in _chart(at, "planes-whatif-guesses")["data"] for y in d["y"]}
    # not “\\!” (a Markdown escape) nor “ ” (looks empty)
    assert "“!”" in shown and "“␣”" in shown, shown
    assert not any("\\" in y for y in shown), shown


def test_a_position_read_as_unknown_is_named_as_typed_and_as_read(zoo):
    text = "ROMEO: Bé🙂t soft, what light through yonder window breaks?"
    at = run_page("planes", ckpt=GRASSMANN, text=text, pos="8", wi="rotate_plane", wis="1.2", patch="e")
    effect = _chart(at, "planes-whatif-effect")
    assert [d["text"][8] for d in effect["data"]] == ["8 'é→�'", "8 'é→�'"]  # hover: each position
    assert any("at position 8 'é→�'" in c.value for c in at.caption), [c.value for c in at.caption]
    assert any("The cursor's token 'é→�' replaced by 'e'" in c.value for c in at.caption)
    heat = _chart(at, "planes-patching")
    assert "9 '🙂→�'" in heat["layout"]["xaxis"]["ticktext"], heat["layout"]["xaxis"]
    # the page names the position as What-if does: its token chips and its own charts' hovers
    assert at.pills(key="w_tok").options[8:10] == ["é→�", "🙂→�"]
    view = json.dumps(_chart(at, "planes-plane_distances"), ensure_ascii=False)
    assert "8 'é→�'" in view and view.count("é") == view.count("é→�"), view[:400]


def test_a_swap_that_barely_changes_the_prediction_is_a_warning_beside_a_muted_heatmap(zoo):
    at = run_page("planes", ckpt=GRASSMANN, pos="37", patch="e", pat="40")
    warn = [w.value for w in at.warning if "patched runs" in w.value]
    assert len(warn) == 1 and "Warning: the swap barely changes this prediction (0.184 nats apart" in warn[0]
    assert any("colours are muted" in c.value for c in at.caption)
    at = run_page("planes", ckpt=GRASSMANN, pos="30", patch="e")  # a clear one: a caption, no warning
    assert not [w for w in at.warning if "patched runs" in w.value]
    assert [c for c in at.caption if "patched runs" in c.value]


def test_without_a_chosen_target_the_sweep_reads_where_the_swap_moves_the_prediction(zoo):
    """No `pat`: the slider opens at choose_target's position (not 40, 3 on, where the swap of 'o' for 'e'
    barely changes the prediction, above), the line says how it was chosen and no warning shows; the
    explicit `pat=40` above still wins."""
    from geomlab.checkpoints.catalog import DEMO_TEXT
    from geomlab.commands import load_checkpoint
    from geomlab.trace import encode_text
    from geomlab.whatif.patching import choose_target

    ck = load_checkpoint(GRASSMANN)
    want = choose_target(ck.model, encode_text(ck.vocab, DEMO_TEXT).reshape(-1), 37, ck.vocab.tokens.index("e"))
    at = run_page("planes", ckpt=GRASSMANN, pos="37", patch="e")
    assert at.slider(key="w_patch_at").value == want.position != 40
    assert not [w for w in at.warning if "patched runs" in w.value]
    line = next(c.value for c in at.caption if "patched runs" in c.value)
    assert f"the prediction at position {want.position} of" in line
    assert line.endswith(f"The {want.describe()}; move the slider to read elsewhere."), line
    at = run_page("planes", ckpt=GRASSMANN, pos="37", patch="e", pat="40")
    assert at.slider(key="w_patch_at").value == 40
    assert not [c for c in at.caption if "chosen" in c.value]


def test_the_guesses_title_names_the_position_and_the_unknown_token_can_stand_in(zoo):
    """The guesses chart's title names the position as the prediction panel does; a stand-in the vocabulary
    lacks is refused with the vocabulary as the charts name it (␣, ↵) and how to type the unknown token,
    which then stands in."""
    at = run_page("planes", ckpt=GRASSMANN, text="Bé🙂t ΑΒΓ", pos="1", wi="rotate_plane", wis="1.2", patch="Ω")
    title = _chart(at, "planes-whatif-guesses")["layout"]["title"]["text"]
    assert title.startswith("Next token after position 1 “é→�”"), title
    refusal = next(i.value for i in at.info if "Patching:" in i.value).replace("\\", "")  # Markdown escapes
    assert "(U+03A9). It reads characters from: ↵ ␣ " in refusal and "or type �, the unknown token" in refusal
    at = run_page("planes", ckpt=GRASSMANN, text="Bé🙂t ΑΒΓ", pos="3", patch="�")
    assert any("The cursor's token 't' replaced by '�'" in c.value for c in at.caption)


def test_patching_offers_a_stand_in_other_than_the_cursors_token_named_as_the_charts_name_it(zoo):
    """The cursor on 'e' (the first stand-in tried): Patching offers the next one, a space, shown as ␣ in its
    box (typed back as a space), and its sweep runs."""
    from geomlab.checkpoints.catalog import DEMO_TEXT

    pos = DEMO_TEXT.index("e")
    at = run_page("planes", ckpt=GRASSMANN, pos=str(pos))
    at.toggle(key="w_patch_on").set_value(True).run()
    assert at.text_input(key="w_patch").value == "␣"
    assert any("The cursor's token 'e' replaced by '␣'" in c.value for c in [*at.caption, *at.warning])
