"""Plotly figures of model traces, one function per view (issue 7; docs/views.md).

Every view function takes a trace from :mod:`geomlab.trace` (or run histories, for training curves) and
returns a :class:`View` ``(figure, caption)``: a ``plotly.graph_objects.Figure`` with a title, labelled axes
with units, hover text naming token and position, and a short caption (also stored in
``figure.layout.meta["caption"]``). Per-position views accept ``cursor`` (a position to highlight, so the
app can mark the chosen token in every figure) and subsample long traces instead of freezing.
Bad arguments raise :class:`FigureError` (a ``ValueError``). No Streamlit here.

Views by family:

* OSM (``osm-rnn``, ``osmformer``): :func:`phase_circle`, :func:`phase_timeline`, :func:`distance_profile`,
  :func:`pca_projection`, :func:`pca_trajectory`, :func:`so3_frame` (real 3 x 3), :func:`torus_angles` (group T),
  :func:`tangent_heatmap`, :func:`tangent_lines`, :func:`mixing_share`, :func:`generator_heatmap`,
  :func:`similarity_map` (OSMFormer), :func:`attention_maps`.
* CEM: :func:`energy_descent`, :func:`energy_tokens`, :func:`attention_maps`.
* Grassmann: :func:`plane_distances`, :func:`plane_angles`, :func:`plane_similarity`,
  :func:`plucker_heatmap`, :func:`plane_matrix`, :func:`gate_share`, :func:`plane_sphere`, :func:`plane_interpolation`,
  :func:`decomposability_map`.
* Baselines with attention: :func:`attention_maps`, :func:`attends_to`.
* Any runs: :func:`training_curves`.

Which figures apply to a trace, which page shows which figure and with which controls is the view
registry's business (:mod:`geomlab.teach.views`: ``figures_for``, ``all_figures``, ``build_view``).
"""

from __future__ import annotations

from typing import Callable

from geomlab.figures._common import FigureError, View
from geomlab.figures.attention import attention_maps, attention_row, attention_window, similarity_map
from geomlab.figures.curves import training_curves
from geomlab.figures.energy import energy_descent, energy_tokens
from geomlab.figures.grassmann import (
    decomposability_map, gate_share, plane_angles, plane_distances, plane_interpolation, plane_similarity,
    plane_matrix, plane_sphere, plucker_heatmap,
)
from geomlab.figures.tokens import attends_to
from geomlab.figures.tangents import generator_heatmap, mixing_share, tangent_heatmap, tangent_lines
from geomlab.figures.trajectory import (
    distance_profile, pca_projection, pca_trajectory, phase_circle, phase_timeline, so3_frame, torus_angles,
)

VIEWS: dict[str, Callable[..., View]] = {
    "phase_circle": phase_circle, "phase_timeline": phase_timeline, "distance_profile": distance_profile,
    "pca_projection": pca_projection, "pca_trajectory": pca_trajectory, "so3_frame": so3_frame,
    "torus_angles": torus_angles,
    "tangent_heatmap": tangent_heatmap, "tangent_lines": tangent_lines, "mixing_share": mixing_share,
    "generator_heatmap": generator_heatmap,
    "similarity_map": similarity_map, "attention_maps": attention_maps, "attention_row": attention_row,
    "attention_window": attention_window,
    "attends_to": attends_to,
    "energy_descent": energy_descent,
    "energy_tokens": energy_tokens,
    "plane_distances": plane_distances, "plane_angles": plane_angles, "plane_similarity": plane_similarity,
    "plucker_heatmap": plucker_heatmap, "gate_share": gate_share, "plane_sphere": plane_sphere,
    "plane_interpolation": plane_interpolation, "decomposability_map": decomposability_map,
    "plane_matrix": plane_matrix,
}
"""Every per-trace view by name (``training_curves`` takes run histories instead)."""


__all__ = ["FigureError", "View", "VIEWS", "training_curves", *VIEWS]
