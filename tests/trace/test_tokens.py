"""Token-level inspection: next-token predictions and the default cursor
(geomlab.trace.predictions), the attends_to figure, and the token panel of the view pages (click a token, the one
cursor moves; top-5 predictions for language models only; a link's cursor past the text says so)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import run_page
from streamlit.testing.v1 import AppTest

from geomlab.trace import predictions
from geomlab.figures import FigureError
from geomlab.figures.tokens import WINDOW, attends_to, token_window, window_after
from geomlab.trace import from_record, score_predictions
from helpers.charts import charts

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
ASSETS = ROOT / "assets" / "checkpoints"
TIMEOUT = 120


def lm_trace(n: int = 30, vocab: int = 7, seed: int = 0, heads: int = 0, layers: int = 1):
    """A made-up trace: random logits and tokens, and random queries/keys when ``heads``."""
    rng = np.random.default_rng(seed)
    rec = {"logits": rng.standard_normal((n, vocab)).astype(np.float32) * 3}
    if heads:
        rec["attention_q"] = rng.standard_normal((layers, heads, n, 4))
        rec["attention_k"] = rng.standard_normal((layers, heads, n, 4))
    return from_record(rec, "transformer", rng.integers(0, vocab, n))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


# ---------------------------------------------------------------- predictions
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_k_is_the_sorted_softmax_and_the_surprisal_is_minus_log2_p(seed):
    tr = lm_trace(seed=seed)
    names = list("abcdefg")
    for t in (0, 7, tr.n_positions - 2):
        pred = predictions.top_k(tr, t, k=4, vocab=names)
        p = softmax(tr.logits[t].astype(np.float64))
        assert list(pred.ids) == list(np.argsort(-p, kind="stable")[:4])
        np.testing.assert_allclose(pred.probs, p[list(pred.ids)], rtol=1e-6)
        assert list(pred.probs) == sorted(pred.probs, reverse=True) and sum(pred.probs) <= 1 + 1e-9
        assert pred.tokens == tuple(names[i] for i in pred.ids)
        nxt = int(tr.tokens[t + 1])
        assert pred.next_id == nxt and pred.next_token == names[nxt]
        assert pred.next_bits == pytest.approx(-math.log2(p[nxt]), rel=1e-6)
        assert pred.next_rank == 1 + int((p > p[nxt]).sum())
        assert pred.entropy_bits == pytest.approx(float(-(p * np.log2(p)).sum()), rel=1e-6)
        # the same number as the surprisal chart's score of token t + 1
        assert pred.next_bits == pytest.approx(score_predictions(tr).bits[t + 1], rel=1e-6)
    k_all = predictions.top_k(tr, 3, k=50)
    assert len(k_all.ids) == 7 and sum(k_all.probs) == pytest.approx(1.0)
    assert k_all.tokens[0].startswith("#")  # no vocabulary: ids


def test_top_k_at_the_last_position_and_bad_arguments():
    tr = lm_trace(n=5)
    last = predictions.top_k(tr, 4)
    assert last.next_id is None and last.next_bits is None and len(last.probs) == 5
    for bad in (5, -1, 2.0, True):
        with pytest.raises(ValueError):
            predictions.top_k(tr, bad)
    with pytest.raises(ValueError):
        predictions.top_k(tr, 1, k=0)
    nan = from_record({"logits": np.full((3, 4), np.nan)}, "transformer", np.zeros(3, int))
    with pytest.raises(ValueError, match="not finite"):
        predictions.top_k(nan, 0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 10, 73, 300])
def test_default_cursor_is_inside_the_text_and_not_zero(n):
    tr = lm_trace(n=n, seed=n)
    c = predictions.default_cursor(tr)
    assert 0 <= c < n
    assert (c == 0) == (n == 1)
    if n >= 4:
        bits = score_predictions(tr).bits  # bits[t + 1]: surprisal of token t + 1, read from logits[t]
        lo, hi = n // 2, n - 2
        assert lo <= c <= hi
        assert c == lo + int(np.nanargmax(bits[lo + 1: hi + 2]))
    assert predictions.default_cursor(tr) == c  # deterministic


def test_default_cursor_without_finite_scores_is_the_middle():
    tr = from_record({"logits": np.full((10, 4), np.nan)}, "transformer", np.zeros(10, int))
    assert predictions.default_cursor(tr) == 5


# ---------------------------------------------------------------- attends_to
@pytest.mark.parametrize("cursor", [0, 3, 50, 98, 99])
def test_attends_to_draws_the_cursor_row_over_a_window_mostly_before_it(cursor):
    n, H = 100, 3
    tr = lm_trace(n=n, heads=H, layers=2)
    fig, caption = attends_to(tr, cursor=cursor, layer=1)
    idx = token_window(n, cursor)
    assert len(idx) == WINDOW <= 80 and idx[0] <= cursor <= idx[-1]
    after = window_after(WINDOW)
    if WINDOW - 1 - after <= cursor <= n - 1 - after:
        assert idx[-1] == cursor + after and after < WINDOW // 4  # mostly the tokens it can attend to
    else:
        assert idx[0] == 0 or idx[-1] == n - 1  # shifted inwards at the ends, still full
    data = {d.name: d for d in fig.data}
    np.testing.assert_allclose(np.asarray(data["bars"].x, float), idx)
    rows = np.stack([tr.attention_rows(1, [cursor], h)[0] for h in range(H)])
    np.testing.assert_allclose(np.asarray(data["bars"].y, float), rows.mean(0)[idx], atol=1e-6)
    np.testing.assert_allclose(np.asarray(data["bars"].y, float), tr.attention_rows(1, [cursor])[0][idx],
                               atol=1e-6)
    z = np.asarray(data["heads"].z, float)
    assert z.shape == (H, len(idx))
    past = idx <= cursor
    np.testing.assert_allclose(z[:, past], rows[:, idx[past]], atol=1e-6)
    assert np.isnan(z[:, ~past]).all()  # masked keys after the cursor are blank
    assert [t.replace("<b style='color:#D55E00'>", "").replace("</b>", "")
            for t in fig.layout.xaxis2.ticktext] == [tr.labels[i] for i in idx]  # the text under the bars
    assert f"Over the text: what position {cursor} '{tr.labels[cursor]}'" in fig.layout.title.text
    assert f"at most {WINDOW} tokens" in caption and f"positions {idx[0]}–{idx[-1]}" in caption
    json.loads(fig.to_json())


def test_attends_to_one_head_and_errors():
    tr = lm_trace(n=20, heads=2)
    fig, _ = attends_to(tr, cursor=10, layer=0, head=1)
    bars = np.asarray(next(d for d in fig.data if d.name == "bars").y, float)
    np.testing.assert_allclose(bars, tr.attention_rows(0, [10], 1)[0], atol=1e-6)
    assert any(s.type == "rect" and s.y0 == 0.5 for s in fig.layout.shapes)  # the chosen head's row outlined
    one = lm_trace(n=12, heads=1)
    fig1, cap1 = attends_to(one, cursor=5)
    assert [d.name for d in fig1.data] == ["bars"] and "one row per head" not in cap1
    with pytest.raises(FigureError):
        attends_to(lm_trace(n=5), cursor=2)  # no attention
    with pytest.raises(FigureError):
        attends_to(tr, cursor=20)
    with pytest.raises(FigureError):
        attends_to(tr, cursor=3, head=2)


def test_the_clickable_window_stays_put_while_the_cursor_is_well_inside():
    from app_pages._tokens import clickable_window, pill_labels

    assert clickable_window(100, 50, None) == (30, 70)
    assert clickable_window(100, 60, 30) == (30, 70)  # still inside: no jump under the mouse
    assert clickable_window(100, 66, 30) == (46, 86)  # near the edge: re-centred
    assert clickable_window(100, 2, 30) == (0, 40)
    assert clickable_window(100, 99, 60) == (60, 100)  # the text's end may be the edge
    assert clickable_window(10, 4, None) == (0, 10)
    labels = pill_labels(list("abcab*"), 0, 6)
    assert len(set(labels.values())) == 6 and labels[3].startswith("a") and labels[5] == "\\*"


# ---------------------------------------------------------------- the page
@pytest.fixture
def bundled(zoo):
    return zoo


open_page = run_page


def page_trace(name: str):
    from app_pages._data import default_text_for
    from geomlab.checkpoints import catalog
    from geomlab.checkpoints import io as checkpoint
    from geomlab.trace import trace_text

    entry = next(e for e in catalog.list_checkpoints() if e.name == name)
    ck = checkpoint.load(entry.path, device="cpu")
    return trace_text(ck.model, ck.vocab, default_text_for(entry))


def chart_titles(at: AppTest) -> list[str]:
    return [json.loads(c.spec)["layout"].get("title", {}).get("text", "") for c in charts(at)]


def guesses(at) -> list[str]:
    """The probabilities the token panel's top-5 bars say, in order (``st.progress`` texts end in ``· P%``)."""
    return [el.proto.text.rsplit("· ", 1)[-1] for el in at.get("progress") if "· " in el.proto.text]


def test_a_fresh_view_opens_at_the_default_cursor_with_the_token_panel_and_a_click_moves_it(bundled):
    at = open_page("attention", ckpt="bundled/cem-t2-tinyshakespeare")
    tr = page_trace("cem-t2-tinyshakespeare")
    c = predictions.default_cursor(tr)
    assert c != 0 and at.session_state["gl_pos"] == c
    assert at.select_slider(key="w_pos").value == c and at.query_params.get("pos") == str(c)
    pills = at.pills(key="w_tok")
    assert pills.value == c and len(pills.options) == min(40, tr.n_positions)
    shown = [o.replace("\u200b", "") for o in pills.options]  # the text around the cursor, in order
    assert "".join(shown) in "".join(tr.labels) and shown[pills.indices[0]] == tr.labels[c]
    assert any(f"Over the text: what position {c} '{tr.labels[c]}' attends to" in t for t in chart_titles(at))
    # top-5 next-token predictions at the cursor and the surprisal of the token that follows
    pred = predictions.top_k(tr, c, 5)
    assert guesses(at) == [f"{100 * p:.1f}%" for p in pred.probs]
    assert any(f"surprisal {pred.next_bits:.2f} bits" in m.value for m in at.caption)
    # a click on another token moves the one cursor: slider, URL, the figures and the predictions follow
    target = c - 3
    at.pills(key="w_tok").set_value(target).run()
    assert not at.exception
    assert at.session_state["gl_pos"] == target and at.select_slider(key="w_pos").value == target
    assert at.query_params.get("pos") == str(target)
    assert any(f"Over the text: what position {target} '{tr.labels[target]}' attends to" in t
               for t in chart_titles(at))
    assert any(f"cursor at {target} " in m.value for m in at.caption)
    assert guesses(at) == [f"{100 * p:.1f}%" for p in predictions.top_k(tr, target, 5).probs]
    # and the slider moves the clickable text's selection
    at.select_slider(key="w_pos").set_value(target + 1).run()
    assert at.pills(key="w_tok").value == target + 1


def test_a_link_cursor_wins_and_one_past_the_text_says_so(bundled):
    at = open_page("attention", ckpt="bundled/cem-t2-tinyshakespeare", pos="4")
    assert at.session_state["gl_pos"] == 4 and at.pills(key="w_tok").value == 4
    assert not any("past the end" in w.value for w in at.warning)
    at = open_page("attention", ckpt="bundled/cem-t2-tinyshakespeare", pos="99999")
    n = page_trace("cem-t2-tinyshakespeare").n_positions
    assert at.session_state["gl_pos"] == n - 1
    assert any("99999 is past the end of this text" in w.value and str(n - 1) in w.value for w in at.warning)


def test_a_word_problem_checkpoint_shows_no_next_character_prediction_but_its_cursor_works(bundled):
    at = open_page("trajectories", ckpt="bundled/osm-rnn-o-s5")
    assert not guesses(at)  # no top-5 guesses
    assert any("word problem" in m.value and "no next-token prediction" in m.value for m in at.caption)
    assert not any("Next token after" in m.value for m in at.markdown)
    pos = at.session_state["gl_pos"]
    assert pos != 0
    at.pills(key="w_tok").set_value(pos - 1).run()
    assert not at.exception and at.session_state["gl_pos"] == pos - 1


def test_a_one_token_text_still_shows_the_prediction(bundled):
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update({"ckpt": "bundled/transformer-alibi-tinyshakespeare", "text": "R"})
    at.switch_page("app_pages/attention.py")
    at.run()
    assert not at.exception and at.session_state["gl_pos"] == 0
    assert at.pills(key="w_tok").value == 0 and len(at.pills(key="w_tok").options) == 1
    assert len(guesses(at)) == 5
    assert any("The text ends here" in m.value for m in at.caption)


def test_prediction_panel_quotes_an_apostrophe_readably():
    # the token ' in the panel reads “'”, not ''' (curly quotes around every token)
    from app_pages._tokens import _q

    assert _q("'") == "“'”" and _q("h") == "“h”"


def test_the_panel_names_what_follows_by_its_label_and_the_notice_gives_code_points(bundled):
    """The token that really follows is named as its chip is ('🙂→�', not the bare unknown token); the notice
    gives each character outside ASCII its code point (Greek Alpha looks exactly like Latin A)."""
    at = open_page("attention", ckpt="bundled/cem-t2-tinyshakespeare", text="Bé🙂t ΑΒΓ", pos="1")
    assert at.pills(key="w_tok").options[2] == "🙂→�"
    assert any(m.value.startswith("Actually next: “🙂→�” (position 2)") for m in at.caption), \
        [m.value for m in at.caption]
    note = next(w.value for w in at.warning if "read as the unknown token" in w.value).replace("\\", "")
    assert "'🙂' (U+1F642), 'Α' (U+0391), 'Β' (U+0392)" in note, note
