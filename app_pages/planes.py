"""Planes view page (see app_pages/_views.py for the renderer and geomlab/teach/views.py for its spec)."""

from app_pages import _ui as ui
from app_pages._views import render_view

with ui.guard("This view"):
    render_view("planes")
