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
    assert figures.FIGURES is catalog.FIGURES and len(figures.FIGURES) == 30  # 26 + the lens's two + the attention overview + one layer's energy
    for name, spec in figures.FIGURES.items():
        assert spec.name == name and getattr(figures, name) is spec.draw and name in figures.__all__
    assert figures.FIGURES["torus_angles"].replaces == ("phase_timeline", "phase_circle")
    assert figures.FIGURES["plane_interpolation"].cursor_arg == "position"
