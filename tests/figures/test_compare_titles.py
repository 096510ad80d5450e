"""Compare's chart titles: wrapped to the width their chart has (the narrowest chart column, Compare's main
column at a 1,000 px window, or a square map's own width), not cut, and set under the band where a hover
shows the toolbar, so no line runs under it."""

import plotly.graph_objects as go
import pytest

from app_pages._relayout import visible_len

LONG = "Over the text: what position 37 'o' attends to, layer 2 of 3 · matched by depth to A's layer 3 of 4"


@pytest.fixture
def compare(monkeypatch):
    """The Compare page's module: importing a page runs it (bare, no browser), here without the app's
    pre-warming, whose thread would outlive the test run."""
    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")
    from app_pages import compare

    return compare


def _fig(title: str, square: bool = False) -> go.Figure:
    lay = {"title": {"text": title}, "margin": {"t": 60, "b": 50}, "height": 400}
    if square:
        lay["yaxis"] = {"scaleanchor": "x"}
    return go.Figure(go.Bar(y=[1, 2]), layout=lay)


def test_a_column_title_runs_the_columns_width_under_the_toolbar(compare):
    fig = _fig(LONG)
    out = compare.column_copy(fig)
    lines = out.layout.title.text.split("<br>")
    assert " ".join(lines) == LONG
    # as long as the narrowest column (380 px) takes at 7.5 px a character, more than a line beside the toolbar
    assert max(map(visible_len, lines)) <= compare.COLUMN_TITLE <= (380 - 30) / 7.5
    assert visible_len(lines[0]) > 35 and len(lines) == 3
    t = out.layout.title
    assert (t.yref, t.yanchor, t.pad.t) == ("container", "top", compare.TOOLBAR_BAND) and t.pad.t >= 20
    grow = compare.TOOLBAR_BAND + 21 * (len(lines) - 1) + 4
    assert out.layout.margin.t == 60 + grow and out.layout.height == 400 + grow  # the plot keeps its size
    assert fig.layout.title.text == LONG and fig.layout.margin.t == 60 and fig.layout.height == 400  # a copy


def test_a_short_title_keeps_one_line_and_still_clears_the_toolbar(compare):
    title = "What position 37 'o' attends to, layer 3 of 4"  # 45 characters: three lines at 28
    upd = compare.under_toolbar(_fig(title))
    assert upd["title"]["text"] == title and upd["title"]["pad"]["t"] == compare.TOOLBAR_BAND
    assert upd["margin"]["t"] == 60 + compare.TOOLBAR_BAND + 4


def test_a_chart_alone_wraps_to_the_page_and_a_square_map_keeps_its_height(compare):
    upd = compare.under_toolbar(_fig(LONG), compare.PAGE_TITLE)
    lines = upd["title"]["text"].split("<br>")
    assert len(lines) == 2 and max(map(visible_len, lines)) <= compare.PAGE_TITLE <= (620 - 30) / 7.5
    square = compare.under_toolbar(_fig(LONG, square=True))
    assert square["height"] == 400 and square["margin"]["t"] > 60  # its column's width limits it, not height


def test_no_title_or_a_phone_leaves_the_figure_as_it_is(compare, monkeypatch):
    assert compare.under_toolbar(_fig("")) == {} and compare.under_toolbar(None) == {}
    monkeypatch.setattr(compare.ui, "is_phone", lambda: True)  # its copy wraps to the phone's width
    assert compare.under_toolbar(_fig(LONG)) == {}
