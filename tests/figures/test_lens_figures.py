"""Tests of the layer-lens figures (geomlab.figures.lens) against the trace's own arrays and logits."""

from __future__ import annotations

import numpy as np
import pytest

from geomlab.figures import FigureError, lens_heatmap, lens_table
from geomlab.trace import from_record
from helpers.models import get_trace


def test_heatmap_is_the_next_token_probability():
    tr = get_trace("transformer")
    fig = lens_heatmap(tr, cursor=4).figure
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (3, tr.n_positions) and np.isnan(z[:, -1]).all()
    p_model = np.exp(tr.log_probs())[np.arange(tr.n_positions - 1), tr.tokens[1:]]  # independent: the logits
    np.testing.assert_allclose(z[-1, :-1], p_model, rtol=1e-5)
    ranks = np.asarray(fig.data[0].customdata)[..., 1]
    assert ranks[-1, -1] == "-" and ranks[0, 0] == str(int(tr.lens.next_rank[0, 0]))
    assert list(fig.layout.yaxis.ticktext) == ["embedding", "block 0", "block 1"]


def test_table_is_the_top_k_at_the_cursor():
    tr = get_trace("cem")
    c = 5
    fig = lens_table(tr, cursor=c).figure
    probs = np.asarray(fig.data[0].z, dtype=float)
    order = np.argsort(-tr.logits[c], kind="stable")[:5]  # the model's own top 5 from its logits
    p = np.exp(tr.log_probs()[c])
    np.testing.assert_allclose(probs[-1], p[order], rtol=1e-5)
    names = np.asarray(fig.data[0].customdata)
    assert names[-1, 0] == tr.lens.name(order[0])
    nxt_rank = 1 + int((p > p[tr.tokens[c + 1]]).sum())
    assert fig.layout.yaxis.ticktext[-1].endswith(f"#{nxt_rank})")


def test_no_lens_is_a_figure_error():
    tr = from_record({"logits": np.zeros((3, 2))}, "newkind", np.arange(3))
    for draw in (lens_heatmap, lens_table):
        with pytest.raises(FigureError):
            draw(tr)
