"""HTML pages from the packaged jinja2 templates (geomlab.core.pages): text escaped, HTML fragments kept, and
the trace index page equal to the page built by hand with html.escape (the reference below)."""

from __future__ import annotations

import html
from pathlib import Path

import jinja2
import pytest

from geomlab.core import pages

TEMPLATES = Path(pages.__file__).resolve().parents[1] / "templates"


def _reference_index(title: str, sections: list[dict]) -> str:
    """The index page assembled from strings with html.escape, item by item (an independent construction)."""
    body = "".join(
        f"<h2>{html.escape(s['title'])}</h2><p>{s['blurb']}</p><ul>"
        + "".join(f'<li><a href="{html.escape(i["href"])}">{html.escape(i["label"])}</a>: {i["caption"]}</li>'
                  for i in s["items"]) + "</ul>" for s in sections)
    t = html.escape(title)
    return f"<!doctype html><meta charset='utf-8'><title>{t}</title><h1>{t}</h1>" + body


def _same_html(a: str, b: str) -> bool:
    """Equal up to the spelling of the quote entities (markupsafe writes &#34;/&#39;, html.escape &quot;/&#x27;)."""
    return a.replace("&#34;", "&quot;").replace("&#39;", "&#x27;") == b.replace("&#34;", "&quot;").replace(
        "&#39;", "&#x27;")


def test_trace_index_matches_the_page_built_by_hand_and_escapes_text():
    hostile = 'osm on “<script>alert("x")</script> & co”'
    sections = [{"title": "Tangent <updates>", "blurb": "the <i>Φ</i> of each step",
                 "items": [{"href": "a.html", "label": "a & b", "caption": "H<sub>t</sub> in <i>G</i>"},
                           {"href": "c.html", "label": "c", "caption": "plain"}]},
                {"title": "Empty", "blurb": "", "items": []}]
    marked = [{**s, "blurb": pages.safe(s["blurb"]),
               "items": [{**i, "caption": pages.safe(i["caption"])} for i in s["items"]]} for s in sections]
    page = pages.render("trace_index.html", title=hostile, sections=marked)
    assert _same_html(page, _reference_index(hostile, sections)), page
    assert "<script>" not in page and "&lt;script&gt;" in page and "Tangent &lt;updates&gt;" in page
    assert "H<sub>t</sub> in <i>G</i>" in page  # the fragments marked safe pass through
    # unmarked HTML is escaped: autoescape is on
    raw = pages.render("trace_index.html", title="t", sections=sections)
    assert "the &lt;i&gt;Φ&lt;/i&gt; of each step" in raw


def test_a_missing_value_or_template_is_an_error_not_an_empty_page():
    with pytest.raises(jinja2.UndefinedError):
        pages.render("trace_index.html", sections=[])
    with pytest.raises(jinja2.TemplateNotFound):
        pages.render("no_such_page.html")


def test_every_template_is_package_data():
    import tomllib

    pyproject = tomllib.loads((TEMPLATES.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["geomlab"]
    shipped = {p for pat in patterns for p in (TEMPLATES.parent).glob(pat)}
    assert set(TEMPLATES.glob("*")) <= shipped and shipped
