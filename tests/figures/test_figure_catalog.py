"""The figure declarations (geomlab.figures.catalog): one @figure per function, registered under its name."""

from __future__ import annotations

import pytest

from geomlab import figures
from geomlab.figures import catalog


def test_a_declaration_registers_the_function_under_its_name():
    ex = catalog.Explanation("x", "read", "look")

    def scratch_figure(tr, layer: int = 0, cursor=None):
        return "drawn", layer

    try:
        out = catalog.figure(label="scratch", applies=catalog.is_cem, controls=["layer"], explain=ex,
                             wide=False)(scratch_figure)
        assert out is scratch_figure
        spec = catalog.FIGURES["scratch_figure"]
        assert spec.draw is scratch_figure and spec.controls == ("layer",) and spec.label == "scratch"
        assert not spec.wide and spec.default and spec.cursor_arg == "cursor" and spec.explanation is ex
        with pytest.raises(ValueError, match="declared twice"):
            catalog.figure(label="again", applies=catalog.is_cem, explain=ex)(scratch_figure)
    finally:
        catalog.FIGURES.pop("scratch_figure", None)


def test_every_public_figure_function_is_its_declaration():
    assert figures.FIGURES is catalog.FIGURES and len(figures.FIGURES) == 32  # 26 + the lens's two + the attention overview + one layer's energy + the residual stream's two
    for name, spec in figures.FIGURES.items():
        assert spec.name == name and getattr(figures, name) is spec.draw and name in figures.__all__
    assert figures.FIGURES["torus_angles"].replaces == ("phase_timeline", "phase_circle")
    assert figures.FIGURES["plane_interpolation"].cursor_arg == "position"


def test_a_click_reads_as_the_position_or_the_panel_it_stands_for():
    """click_target: a position x position cell's [row, column] gives the row (the query); a number in
    customdata gives itself; otherwise the x coordinate, or the position a category label starts with; a
    layer x head grid gives the clicked panel's layer and head; nothing readable gives {}."""
    from geomlab.figures.catalog import click_target

    assert click_target("position", {"x": "3 'a'", "y": "7 'b'", "customdata": [7, 3]}) == {"position": 7}
    assert click_target("position", {"x": 1.2, "customdata": 42}) == {"position": 42}
    assert click_target("position", {"x": 12.0, "customdata": None}) == {"position": 12}
    assert click_target("position", {"x": "12 'a'"}) == {"position": 12}
    assert click_target("position", {"x": "rank"}) == {}
    assert click_target("position", {"x": None, "customdata": "a token"}) == {}
    assert click_target(None, {"x": 3}) == {} and click_target("position", None) == {}
    assert click_target("row", {"x": "3 'a'", "y": "7 'b'", "point": [7, 3]}) == {"position": 7}
    assert click_target("row", {"x": 3, "y": 9.0}) == {"position": 9}
    assert click_target("row", {"x": 3, "y": "p01"}) == {} and click_target("row", {"x": 3}) == {}
    assert click_target("layer_head", {"curve": 7}, n_heads=4) == {"layer": 1, "head": 3}
    assert click_target("layer_head", {"curve": None}, n_heads=4) == {}


def test_every_click_rule_is_a_known_one_and_linked_figures_carry_positions():
    """Every declared click rule is one of CLICKS; the figures of every view with per-position axes are
    linked (a figure whose x axis is the text's positions reads its clicks as positions)."""
    from geomlab.figures.catalog import CLICKS

    assert all(spec.click in (None, *CLICKS) for spec in figures.FIGURES.values())
    for name in ("distance_profile", "tangent_heatmap", "plane_distances", "lens_heatmap", "energy_tokens"):
        assert figures.FIGURES[name].click == "position", name
    for name in ("attention_maps", "similarity_map", "plane_similarity", "plucker_heatmap"):  # rows = positions
        assert figures.FIGURES[name].click == "row", name
    assert figures.FIGURES["attention_overview"].click == "layer_head"


def test_every_figure_drawn_against_position_moves_the_cursor_on_a_click():
    """Each figure of every view whose x axis is the text's positions declares a click rule."""
    from geomlab.teach import views
    from tests.helpers.models import MODELS, get_trace

    for model in MODELS:
        for name, chart in views.all_figures(get_trace(model), cursor=5).items():
            layout = chart.figure.to_plotly_json()["layout"]
            titles = [(v.get("title") or {}).get("text") or "" for k, v in layout.items() if k.startswith("xaxis")]
            if any(t.startswith("position") for t in titles):
                assert figures.FIGURES[name].click is not None, f"{name} ({model}): no click rule"


def test_a_click_on_the_attention_overview_opens_the_panel_clicked():
    """The overview's k-th trace is the panel of layer k // H, head k % H: what click_target reads."""
    from geomlab.figures.catalog import click_target
    from tests.helpers.models import get_trace

    tr = get_trace("cem")  # two layers, two heads
    fig = figures.attention_overview(tr, cursor=2).figure
    H = int(tr.n_heads)
    for k, t in enumerate(fig.data[: int(tr.n_layers) * H]):
        target = click_target("layer_head", {"curve": k}, n_heads=H)
        assert t.name == f"layer {target['layer']} head {target['head']}"
