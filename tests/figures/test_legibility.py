"""What keeps a figure's marks apart: no series is drawn in the cursor's colour, the cursor line ends where
its panel's values end, and no legend sits in the top right corner where the toolbar a hover shows covers it."""

import numpy as np
import pytest

from geomlab import figures
from geomlab.figures import _style
from geomlab.figures.whatif import whatif_guesses
from geomlab.teach import views
from geomlab.trace import encode_text, trace
from geomlab.whatif.outcome import Outcome
from helpers.models import SUB, VOCAB, get_trace, small_model


def test_no_series_colour_is_the_cursors():
    assert _style.HIGHLIGHT not in _style.PALETTE
    assert all(_style.colour(i) != _style.HIGHLIGHT for i in range(20))
    for n in (1, 6, 7, 8, 26):
        assert _style.HIGHLIGHT.lower() not in [c.lower() for c in _style.index_colours(n)], n


@pytest.fixture(scope="module")
def eight_layers():
    """A Grassmann trace with eight layers: more layers than the palette has colours."""
    model = small_model("grassmann", n_layers=8)
    return trace(model, encode_text(VOCAB, SUB), vocab=VOCAB, text=SUB)


def test_every_gate_share_line_has_a_colour_of_its_own_and_none_is_the_cursors(eight_layers):
    fig = figures.gate_share(eight_layers, cursor=3).figure
    lines = [t for t in fig.data if t.type == "scatter"]
    assert [t.name for t in lines] == [f"layer {i}" for i in range(8)]
    cols = [t.line.color for t in lines]
    assert len(set(cols)) == 8
    cursor = {s.line.color for s in fig.layout.shapes if s.name == "cursor"}
    assert cursor == {_style.HIGHLIGHT} and not cursor & set(cols)


def _extent(fig, shape):
    """The vertical extent of a line shape in its y axis's data units (a "domain" reference: the axis range)."""
    if shape.yref.endswith(" domain"):
        rng = fig.layout[f"yaxis{shape.yref.split()[0][1:]}"].range
        return tuple(rng[0] + (rng[1] - rng[0]) * np.array([shape.y0, shape.y1]))
    return shape.y0, shape.y1


def test_the_gate_shares_cursor_line_ends_at_the_shares_bounds_not_past_its_panel():
    tr = get_trace("grassmann-r3")
    fig = figures.gate_share(tr, cursor=4).figure
    lower = [s for s in fig.layout.shapes if s.name == "cursor" and s.yref.split()[0] == "y2"]
    assert len(lower) == 1 and lower[0].x0 == lower[0].x1 == 4
    lo, hi = fig.layout.yaxis2.range  # padded, so that lines at 0 or 1 are not cut
    assert lo < 0 and hi > 1
    assert _extent(fig, lower[0]) == pytest.approx((0, 1))  # the shares' bounds, inside the padded range


def _above_at_right(legend) -> bool:
    """Whether a legend stands in the top margin (above the plot, or at the top of the figure) and reaches
    its right-hand side, where the toolbar a hover shows sits."""
    top = legend.y is not None and ((legend.yref == "container" and legend.y >= 0.9)
                                    or (legend.y >= 1 and legend.yanchor == "bottom"))
    x = legend.x if legend.x is not None else 1.02
    return top and (legend.xanchor == "right" or x > 0.3)


def _outcome(T=40, V=6, at=20):
    rng = np.random.default_rng(0)
    before = rng.normal(size=(T, V)).astype(np.float32)
    return Outcome(rng.integers(0, V, size=T), before, before + rng.normal(size=(T, V)).astype(np.float32), at,
                   "a test nudge")


def test_the_guesses_legend_is_clear_of_the_toolbar_corner():
    fig = whatif_guesses(_outcome(), 30, list("abcdef"), k=3).figure
    assert fig.layout.showlegend is not False
    assert not _above_at_right(fig.layout.legend), fig.layout.legend
    # one row at the left under the title: the top margin holds both
    assert fig.layout.legend.orientation == "h" and fig.layout.margin.t >= 60


@pytest.mark.parametrize("name", ["osm-rnn-SO3", "osmformer-U3", "cem", "grassmann-r3", "transformer"])
def test_no_figure_puts_its_legend_above_the_plot_at_the_right(name):
    tr = get_trace(name)
    for fname, chart in views.all_figures(tr, cursor=5).items():
        assert not _above_at_right(chart.figure.layout.legend), fname
