"""What the figures keep on a trace (``_sampling.memo``): a cursor move that keeps the window recomputes
nothing, the kept values equal a fresh computation, window blocks stay bounded."""

from __future__ import annotations

import numpy as np
import pytest

from geomlab import figures
from geomlab.figures import _sampling, grassmann
from geomlab.trace import encode_text, trace
from helpers.models import MODELS, TEXT, VOCAB, small_model

N = 700


def _trace(name: str):
    text = (TEXT * (N // len(TEXT) + 1))[:N]
    kind, over = MODELS[name]
    over = {**over, "max_len": N} if kind == "grassmann" else over  # (a learned position table)
    return trace(small_model(kind, **over), encode_text(VOCAB, text), vocab=VOCAB, text=text)


def _z(chart) -> np.ndarray:
    return np.asarray(chart.figure.data[0].z, dtype=float)


def test_an_attention_map_keeps_its_window_block(monkeypatch):
    tr = _trace("osmformer-T4")
    calls = []
    rows = type(tr).attention_rows
    monkeypatch.setattr(type(tr), "attention_rows", lambda self, *a, **k: calls.append(a) or rows(self, *a, **k))
    first = figures.attention_maps(tr, layer=1, cursor=400)
    moved = figures.attention_maps(tr, layer=1, cursor=403)  # the same window: nothing computed again
    assert len(calls) == 1
    np.testing.assert_array_equal(_z(first), _z(moved))
    assert first.figure.layout.shapes[0].y0 != moved.figure.layout.shapes[0].y0  # the cursor's box moved
    fresh = _trace("osmformer-T4")  # the same model and text, nothing kept: the same map
    np.testing.assert_array_equal(_z(figures.attention_maps(fresh, layer=1, cursor=403)), _z(moved))
    for c in range(0, N, 64):  # a cursor travelling the whole text keeps at most 16 blocks
        figures.attention_maps(tr, layer=1, cursor=c)
    kept = [k for k in tr.__dict__["_view_cache"] if k[0] == "attention_block"]
    assert len(kept) <= 16


def test_memo_is_read_only_and_bounded():
    class T:
        pass

    tr, n = T(), []
    a = _sampling.memo(tr, ("x", 1), lambda: n.append(1) or np.arange(3))
    b = _sampling.memo(tr, ("x", 1), lambda: n.append(1) or np.arange(3))
    assert a is b and n == [1] and not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 5
    for i in range(10):
        _sampling.memo(tr, ("w", i), lambda: np.zeros(1), keep=3)
    assert sorted(k[1] for k in tr._view_cache if k[0] == "w") == [7, 8, 9]
    assert ("x", 1) in tr._view_cache  # another group is not touched


def test_plane_distances_are_computed_once_per_trace(monkeypatch):
    tr = _trace("grassmann-r3")
    calls = []
    basis = grassmann.plane_bases
    monkeypatch.setattr(grassmann, "plane_bases", lambda *a, **k: calls.append(a) or basis(*a, **k))
    first = figures.plane_distances(tr, cursor=400)
    n_first = len(calls)
    moved = figures.plane_distances(tr, cursor=403)
    assert n_first == tr.n_layers and len(calls) == n_first  # the second draw computed no plane
    np.testing.assert_array_equal(_z(first), _z(moved))
    fresh = _trace("grassmann-r3")  # nothing kept: the same distances
    want = np.stack([np.linalg.norm(grassmann._consecutive_angles(fresh, l, 0), axis=-1)
                     for l in range(fresh.n_layers)])
    np.testing.assert_array_equal(grassmann.position_distances(tr), want)
