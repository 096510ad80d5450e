"""Tangents view page (see app_pages/_views.py for the renderer and ui.VIEWS for its blurb)."""

from app_pages import _ui as ui
from app_pages._views import render_view

with ui.guard("This view"):
    render_view("tangents")
