"""Trajectories view page (see pages/_views.py for the renderer and ui.VIEWS for its blurb)."""

from pages import _ui as ui
from pages._views import render_view

with ui.guard("This view"):
    render_view("trajectories")
