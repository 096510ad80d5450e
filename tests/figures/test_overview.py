"""A long text through the window: the per-position figures draw the consecutive positions around the
cursor (read back from the figure JSON), the overview strip draws every position with the window on it."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from geomlab import figures
from geomlab.figures.catalog import click_target
from geomlab.figures import FigureError, _sampling
from geomlab.trace import encode_text, from_record, trace
from helpers.models import MODELS, TEXT, VOCAB, small_model

N = 2000
CURSOR = 1000
LO = _sampling.window(2 * CURSOR, CURSOR)[0]  # the window from a multiple of WINDOW // 2: 960..1087
HI = LO + _sampling.WINDOW - 1


@pytest.fixture(scope="module")
def long_trace():
    text = (TEXT * (N // len(TEXT) + 1))[:N]
    kind, over = MODELS["osmformer-T4"]
    return trace(small_model(kind, **over), encode_text(VOCAB, text), vocab=VOCAB, text=text)


def _data(fig) -> list[dict]:
    """The figure's traces as sent to the browser (its JSON), typed arrays decoded to numpy arrays."""
    def dec(v):
        if isinstance(v, dict) and "bdata" in v:
            a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
            return a.reshape([int(k) for k in str(v["shape"]).split(",")]) if "shape" in v else a
        return np.asarray(v, dtype=float) if isinstance(v, list) and v and isinstance(v[0], (int, float)) else v
    return [{k: dec(v) for k, v in t.items()} for t in json.loads(fig.to_json())["data"]]


def _note(lo=LO, hi=HI, n=N):
    return f"Positions {lo:,}–{hi:,} of {n:,} at full resolution"


def test_the_attention_map_is_the_window(long_trace):
    tr = long_trace
    fig, cap = figures.attention_maps(tr, layer=1, cursor=CURSOR)
    heat = _data(fig)[0]
    want = [f"{p} '{tr.labels[p]}'" for p in range(LO, HI + 1)]
    assert list(heat["x"]) == want and list(heat["y"]) == want
    assert _note() in cap
    assert "customdata" not in heat  # a click reads the row's label (click="row")
    assert [click_target("row", {"y": y})["position"] for y in heat["y"]] == list(range(LO, HI + 1))
    # the exact weights, normalised over every earlier key (not only those in the window)
    full = tr.attention_rows(1, np.arange(LO, HI + 1))[:, LO:HI + 1]
    z = np.asarray(heat["z"], dtype=float)
    lower = np.tril(np.ones(z.shape, bool))
    np.testing.assert_allclose(z[lower], full[lower], atol=1e-6)
    assert np.nansum(z, axis=1).max() < 1.0 + 1e-5  # window rows hold part of each row's weight


def test_a_path_and_a_curve_are_the_window(long_trace):
    tr = long_trace
    fig, cap = figures.pca_projection(tr, cursor=CURSOR)
    path = _data(fig)[0]
    coords, _ = figures.trajectory.pca_coords(tr, -1)  # fitted on every position
    np.testing.assert_allclose(path["x"], coords[LO:HI + 1, 0], rtol=1e-5, atol=1e-7)
    assert list(path["text"]) == [f"{p} '{tr.labels[p]}'" for p in range(LO, HI + 1)]
    assert _note() in cap
    fig, cap = figures.distance_profile(tr, cursor=CURSOR)
    for t in _data(fig):
        assert t["x"].tolist() == list(range(LO, HI + 1))
    assert _note() in cap
    row, cap = figures.attention_row(tr, layer=0, cursor=CURSOR)
    x = _data(row)[-1]["x"]
    assert x.tolist() == list(range(CURSOR - _sampling.WINDOW + 1, CURSOR + 1))  # the keys up to the query
    assert f"Keys {CURSOR - _sampling.WINDOW + 1:,}–{CURSOR:,} of {CURSOR + 1:,}" in cap


def test_the_window_shifts_inwards_at_the_ends(long_trace):
    fig, cap = figures.distance_profile(long_trace, cursor=N - 3)
    assert fig.data[0].x.tolist() == list(range(N - _sampling.WINDOW, N))
    assert _note(N - _sampling.WINDOW, N - 1) in cap
    fig, _ = figures.distance_profile(long_trace, cursor=5)
    assert fig.data[0].x.tolist() == list(range(_sampling.WINDOW))


def _surprisal_reference(tr) -> np.ndarray:
    """Bits of token t from the output at t - 1, by hand (log-softmax in float64); NaN at position 0."""
    z = np.asarray(tr.logits, dtype=np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    bits = np.full(len(z), np.nan)
    bits[1:] = (lse[:-1] - z[np.arange(len(z) - 1), np.asarray(tr.tokens[1:])]) / np.log(2)
    return bits


def test_overview_draws_every_position_with_the_window_on_it(long_trace):
    tr = long_trace
    assert figures.needs_overview(tr)
    fig, cap = figures.text_overview(tr, cursor=CURSOR)
    line = _data(fig)[0]
    assert line["x"].tolist() == list(range(N)) and line["customdata"].tolist() == list(range(N))
    y = np.asarray(line["y"], dtype=float)
    np.testing.assert_allclose(y, _surprisal_reference(tr), rtol=1e-5, atol=1e-5)
    shapes = {s.name: s for s in fig.layout.shapes}
    assert (shapes["window"].x0, shapes["window"].x1) == (LO - 0.5, HI + 0.5)
    assert shapes["cursor"].x0 == CURSOR
    assert f"Shaded: positions {LO:,}–{HI:,}" in cap
    assert fig.layout.height == 140 and len(fig.layout.xaxis.tickvals) <= 10  # a strip, thinned ticks
    fig, cap = figures.text_overview(tr)  # no cursor: the window the figures draw, the last positions
    assert fig.layout.shapes[0].x0 == N - _sampling.WINDOW - 0.5 and len(fig.layout.shapes) == 1
    with pytest.raises(FigureError):
        figures.text_overview(tr, cursor=N)


def test_overview_of_a_short_text_and_blank_outputs():
    n = _sampling.WINDOW
    logits = np.zeros((n, 3))
    logits[4] = np.nan
    tr = from_record({"logits": logits}, "lstm", np.arange(n) % 3)
    assert not figures.needs_overview(tr)
    fig, cap = figures.text_overview(tr, cursor=4)
    y = np.asarray(fig.data[0].y, dtype=float)
    assert np.isnan(y[[0, 5]]).all() and np.allclose(y[1:5], np.log2(3))  # logits[4] scores token 5
    assert (fig.layout.shapes[0].x0, fig.layout.shapes[0].x1) == (-0.5, n - 0.5)


def test_points_off_a_position_axis_carry_their_position(long_trace):
    """The PCA path and markers and the flat torus (x is not a position there) name each point's position
    in customdata, which matches the point: the PCA coordinates of that position, its torus angles."""
    tr = long_trace
    window = np.arange(LO, HI + 1)
    coords, _ = figures.trajectory.pca_coords(tr, -1)
    for t in _data(figures.pca_projection(tr, cursor=CURSOR).figure)[:2]:
        assert t["customdata"].tolist() == window.tolist()
        np.testing.assert_allclose(t["x"], coords[t["customdata"].astype(int), 0], rtol=1e-5, atol=1e-7)
    torus = _data(figures.torus_angles(tr, cursor=CURSOR).figure)
    flat = next(t for t in torus if t.get("name", "").startswith("(φ"))
    assert flat["customdata"].tolist() == window.tolist()
    phi1 = np.angle(np.asarray(tr.state_data[-1])[window, 0])
    np.testing.assert_allclose(np.asarray(flat["x"], dtype=float), phi1, atol=1e-5)
