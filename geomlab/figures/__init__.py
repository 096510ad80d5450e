"""Plotly figures of model traces, one function per figure (docs/views.md).

Every figure function takes a trace from :mod:`geomlab.trace` (or run histories, for training curves) and
returns a :class:`Chart` ``(figure, caption)``: a ``plotly.graph_objects.Figure`` with a title, labelled axes
with units, hover text naming token and position, and a short caption (also stored in
``figure.layout.meta["caption"]``). Per-position figures accept ``cursor`` (a position to highlight, so the
app can mark the chosen token in every figure) and draw a long trace as a full-resolution window of
consecutive positions around the cursor; :func:`text_overview` shows the whole text with the window on it.
Bad arguments raise :class:`FigureError` (a ``ValueError``). No Streamlit here.

Every per-trace figure is declared once, on its function, with :func:`geomlab.figures.catalog.figure`: its
label, when it applies, its controls, its layout on a page and its explanation. :data:`FIGURES` holds the
declarations by name. Figures by family:

* OSM (``osm-rnn``, ``osmformer``): :func:`phase_circle`, :func:`phase_timeline`, :func:`distance_profile`,
  :func:`pca_projection`, :func:`pca_trajectory`, :func:`so3_frame` (real 3 x 3), :func:`torus_angles` (group T),
  :func:`tangent_heatmap`, :func:`tangent_lines`, :func:`mixing_share`, :func:`generator_heatmap`,
  :func:`similarity_map` (OSMFormer), :func:`attention_maps`.
* CEM: :func:`energy_descent`, :func:`energy_layer`, :func:`energy_tokens`, :func:`attention_maps`.
* Grassmann: :func:`plane_distances`, :func:`plane_angles`, :func:`plane_similarity`,
  :func:`plucker_heatmap`, :func:`plane_matrix`, :func:`gate_share`, :func:`plane_sphere`, :func:`plane_interpolation`,
  :func:`decomposability_map`.
* Baselines with attention: :func:`attention_maps`, :func:`attends_to`; those that record their residual stream
  (``hf-gpt2``): :func:`residual_updates`, :func:`residual_paths`.
* Every kind with a layer lens (on every view, under "More figures"): :func:`lens_heatmap`, :func:`lens_table`.
* Every model with attention: :func:`attention_overview` (every layer and head at once).
* Any runs: :func:`training_curves` (not a per-trace figure, so not in :data:`FIGURES`).
* A text longer than the window: :func:`text_overview` (not in :data:`FIGURES`: no view lists it, a page
  draws it above its figures when :func:`needs_overview`).

Which page shows which figures, and building them with a page's control values, is the business of the view
pages (:mod:`geomlab.teach.views`: ``figures_for``, ``all_figures``, ``build_view``).
"""

from __future__ import annotations

from geomlab.figures._chart import Chart, FigureError
from geomlab.figures.attention import attention_maps, attention_row, similarity_map
from geomlab.figures.attention_overview import attention_overview
from geomlab.figures.catalog import FIGURES, Explanation, FigureSpec
from geomlab.figures.curves import training_curves
from geomlab.figures.energy import energy_descent, energy_layer, energy_tokens
from geomlab.figures.grassmann import gate_share, plane_angles, plane_distances, plane_similarity, plucker_heatmap
from geomlab.figures.bivectors import decomposability_map, plane_matrix
from geomlab.figures.plane_scenes import plane_interpolation, plane_sphere
from geomlab.figures.tokens import attends_to
from geomlab.figures.tangents import generator_heatmap, mixing_share, tangent_heatmap, tangent_lines
from geomlab.figures.phases import phase_circle, phase_timeline
from geomlab.figures.paths import distance_profile, pca_projection, pca_trajectory
from geomlab.figures.group_coords import so3_frame, torus_angles
from geomlab.figures.lens import lens_heatmap, lens_table
from geomlab.figures.residual import residual_paths, residual_updates
from geomlab.figures.overview import needs_overview, text_overview

__all__ = ["Chart", "FigureError", "FigureSpec", "Explanation", "FIGURES", "training_curves", "needs_overview",
           "text_overview", *FIGURES]
