"""The attention overview (geomlab.figures.attention_overview): one small map per (layer, head) whose numbers
are the attention weights computed independently from the model's record (numpy softmax of q k^T plus the
ALiBi bias, and geomlab.trace.dense_attention), the window around the cursor of a long text, the hover
fields, the marks and JSON serialisation."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from geomlab import figures
from geomlab.figures import FigureError, _chart
from geomlab.figures.attention_overview import overview_positions
from geomlab.teach import views
from geomlab.trace import dense_attention, encode_text, trace
from helpers.models import SUB, VOCAB, get_model, get_trace, small_model

KINDS = ["transformer", "llama", "cem", "grassmann-attn", "osmformer-U3", "osmformer-identity"]


@pytest.fixture
def validate(monkeypatch):
    """Let plotly validate every property."""
    monkeypatch.setattr(_chart, "VALIDATE", True)


def _numpy_attention(rec: dict) -> np.ndarray | None:
    """``[layer, head, T, T]`` causal softmax of ``q_i . k_j`` (+ the shared part) ``- m (i - j)`` in numpy,
    straight from the record's queries and keys; None for a record without them (OSM scores states)."""
    if "attention_q" not in rec:
        return None
    arr = {k: v.detach().double().numpy() for k, v in rec.items() if k.startswith("attention_")}
    q, k = arr["attention_q"], arr["attention_k"]
    L, H, T, _ = q.shape
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    out = np.zeros((L, H, T, T))
    for l in range(L):
        for h in range(H):
            s = q[l, h] @ k[l, h].T
            if "attention_q_shared" in arr:
                s = s + arr["attention_q_shared"][l] @ arr["attention_k_shared"][l].T
            if "attention_slopes" in arr:
                s = s - arr["attention_slopes"][l, h] * (i - j)
            s = np.where(j > i, -np.inf, s)
            e = np.exp(s - s.max(1, keepdims=True))
            out[l, h] = e / e.sum(1, keepdims=True)
    return out


def _panels(fig) -> dict[tuple[int, int], object]:
    out = {}
    for t in fig.data:
        l, h = map(int, re.fullmatch(r"layer (\d+) head (\d+)", t.name).groups())
        out[(l, h)] = t
    return out


def _positions(categories) -> list[int]:
    return [int(c.split(" ", 1)[0]) for c in categories]


@pytest.mark.parametrize("name", KINDS)
def test_each_panel_is_the_attention_of_its_layer_and_head(name, validate):
    tr, model = get_trace(name), get_model(name)
    rec = model.record(encode_text(VOCAB, SUB).reshape(1, -1))
    want = dense_attention(rec, heads=tr.n_heads)
    ref = _numpy_attention(rec)
    if ref is not None:  # the trace layer's formula against a numpy one written here
        np.testing.assert_allclose(want, ref, atol=1e-6)
    assert want.shape[:2] == (tr.n_layers, tr.n_heads)
    fig, cap = figures.attention_overview(tr, cursor=5)
    panels = _panels(fig)
    assert sorted(panels) == [(l, h) for l in range(tr.n_layers) for h in range(tr.n_heads)]
    T = tr.n_positions
    lower = np.tril(np.ones((T, T), bool))
    for (l, h), t in panels.items():
        z = np.asarray(t.z, dtype=float)
        assert z.shape == (T, T) and _positions(t.x) == _positions(t.y) == list(range(T))
        np.testing.assert_allclose(z[lower], want[l, h][lower], atol=1e-6)
        assert np.isnan(z[~lower]).all()
        assert t.coloraxis == "coloraxis"  # one colour scale for every panel
    zmax = max(np.nanmax(np.asarray(t.z, dtype=float)) for t in fig.data)
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == pytest.approx(zmax, rel=1e-6)
    assert "positions" not in fig.layout.title.text and "too large" not in cap  # a short text: every position


def test_hover_names_layer_head_query_key_and_weight(validate):
    tr = get_trace("cem")
    fig, _ = figures.attention_overview(tr, layer=1, head=0, cursor=5)
    for (l, h), t in _panels(fig).items():
        tpl = t.hovertemplate
        assert tpl.startswith(f"layer {l}, head {h}<br>")
        assert "query %{y}" in tpl and "key %{x}" in tpl and "weight %{z:.4f}" in tpl
        assert list(t.x) == [f"{p} '{tr.labels[p]}'" for p in range(tr.n_positions)] == list(t.y)
    text = fig.to_json()
    assert f"5 '{tr.labels[5]}'" in text
    json.loads(text)
    fig.to_html(include_plotlyjs=False)


def test_marks_the_cursor_row_and_the_chosen_layer_and_head():
    tr = get_trace("transformer")
    L, H = tr.n_layers, tr.n_heads
    fig, _ = figures.attention_overview(tr, layer=1, head=1, cursor=7)
    shapes = fig.layout.shapes
    rows = [s for s in shapes if s.name == "cursor"]
    assert len(rows) == L * H and all(s.y0 == 6.5 and s.y1 == 7.5 for s in rows)
    chosen = [s for s in shapes if s.name == "chosen"]
    refs = _chart.FigureBuilder.grid(rows=L, cols=H).refs
    assert [(s.xref, s.yref) for s in chosen] == [(f"{refs[(2, 2)][0]} domain", f"{refs[(2, 2)][1]} domain")]
    mean, _ = figures.attention_overview(tr, layer=0, cursor=7)  # head mean: every head of the layer framed
    assert len([s for s in mean.layout.shapes if s.name == "chosen"]) == H
    plain, _ = figures.attention_overview(tr)  # no layer, no cursor: nothing marked
    assert not [s for s in plain.layout.shapes if s.name in ("chosen", "cursor")]
    # layers label the rows, heads the columns
    lay = fig.layout.to_plotly_json()
    ytitles = [lay[f"yaxis{refs[(l + 1, 1)][1][1:]}"]["title"]["text"] for l in range(L)]
    xtitles = [lay[f"xaxis{refs[(L, h + 1)][0][1:]}"]["title"]["text"] for h in range(H)]
    assert ytitles == [f"layer {l}" for l in range(L)] and xtitles == [f"head {h}" for h in range(H)]
    with pytest.raises(FigureError):
        figures.attention_overview(tr, layer=L)
    with pytest.raises(FigureError):
        figures.attention_overview(tr, layer=0, head=H)
    with pytest.raises(FigureError):
        figures.attention_overview(get_trace("lstm"))


@pytest.mark.parametrize("kind", ["transformer", "cem"])
def test_a_long_text_shows_a_contiguous_window_with_the_cursor(kind, validate):
    chars = sorted(set(SUB))  # characters the vocabulary encodes
    rng = np.random.default_rng(1)
    text = "".join(rng.choice(chars, 2000))
    model = small_model(kind)
    tr = trace(model, encode_text(VOCAB, text), vocab=VOCAB, text=text)
    assert tr.n_positions == 2000
    rec = model.record(encode_text(VOCAB, text).reshape(1, -1))
    for cursor, lo in ((1000, 937), (10, 0), (None, 1936)):
        fig, cap = figures.attention_overview(tr, layer=0, cursor=cursor)
        shown = list(range(lo, lo + 64))
        for (l, h), t in _panels(fig).items():
            assert _positions(t.x) == _positions(t.y) == shown  # contiguous, the cursor among them
            # the window's rows, softmax over every earlier key (not only the shown ones), in numpy
            q = rec["attention_q"][l, h].double().numpy()
            k = rec["attention_k"][l, h].double().numpy()
            rows = np.array(shown)
            s = q[rows] @ k.T
            if "attention_q_shared" in rec:
                qs, ks = rec["attention_q_shared"][l].double().numpy(), rec["attention_k_shared"][l].double().numpy()
                s += qs[rows] @ ks.T
            if "attention_slopes" in rec:
                s -= float(rec["attention_slopes"][l, h]) * (rows[:, None] - np.arange(2000)[None, :])
            s = np.where(np.arange(2000)[None, :] > rows[:, None], -np.inf, s)
            w = np.exp(s - s.max(1, keepdims=True))
            w = (w / w.sum(1, keepdims=True))[:, rows]
            z = np.asarray(t.z, dtype=float)
            causal = rows[None, :] <= rows[:, None]
            np.testing.assert_allclose(z[causal], w[causal], atol=1e-6)
        assert f"positions {lo}–{lo + 63}" in fig.layout.title.text
        assert f"positions {lo}–{lo + 63}" in cap and "2,000 positions" in cap
        json.loads(fig.to_json())
    np.testing.assert_array_equal(overview_positions(30, 12), np.arange(30))  # short: all of them


def test_the_attention_view_lists_the_overview_first_under_more_figures():
    tr = get_trace("transformer")
    assert views.VIEWS["attention"].figures[0] == "attention_overview"
    assert "attention_overview" not in [f.name for f in views.default_figures("attention", tr)]
    assert [f.name for f in views.more_figures("attention", tr)][0] == "attention_overview"
    chart = views.build_figure(tr, "attention_overview", {"layer": 1, "head": None}, cursor=3)
    assert len([s for s in chart.figure.layout.shapes if s.name == "chosen"]) == tr.n_heads
