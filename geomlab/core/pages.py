"""HTML pages geomlab writes, from jinja2 templates shipped in ``geomlab/templates/`` (package data).

Every template is rendered with autoescape on: text values are escaped, and a value that already is HTML
(a caption converted by :func:`geomlab.core.markup.to_html`) is passed through :func:`safe`. Design choice:
templates instead of HTML assembled from strings, so no value reaches a page unescaped by omission."""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from markupsafe import Markup


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("geomlab", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined)


def safe(fragment: str) -> Markup:
    """Mark an HTML fragment that geomlab built and escaped itself as safe to insert unescaped."""
    return Markup(fragment)


def render(template: str, **context: Any) -> str:
    """The page ``template`` (a file name in ``geomlab/templates/``) rendered with ``context``.

    Raises ``jinja2.TemplateNotFound`` for an unknown name and ``jinja2.UndefinedError`` when the template
    uses a value ``context`` lacks (both programming errors, not input errors)."""
    return _environment().get_template(template).render(**context)
