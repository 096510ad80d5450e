"""The HTML pages geomlab writes work offline: `trace --html`'s pages and the report's figure pages load
plotly.js from a file beside them, and chromium with every non-file request aborted draws their charts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.browser import browser_exe  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser
ROOT = Path(__file__).resolve().parents[2]


def _render_offline(exe: str, pages: list[Path]) -> dict[str, tuple[int, list[str]]]:
    """Open each page in chromium with networking cut (every request that is not ``file:`` aborted) and
    return ``{page name: (number of drawn plotly charts, the non-file URLs the page asked for)}``."""
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(offline=True)
            asked: list[str] = []

            def route(r):
                if r.request.url.startswith("file:"):
                    r.continue_()
                else:
                    asked.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            page = context.new_page()
            for path in pages:
                asked.clear()
                page.goto(path.resolve().as_uri())
                try:
                    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15000)
                except Exception:  # not drawn: counted as 0 below
                    pass
                out[path.name] = (page.locator(".js-plotly-plot .main-svg").count(), list(asked))
        finally:
            browser.close()
    return out


def test_trace_html_pages_render_offline(tmp_path, monkeypatch, browser_exe):  # noqa: F811
    from geomlab.commands.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["trace", "osm-rnn-o-s5", "--text", "01234 10234", "--html", "views/"]) == 0
    views = tmp_path / "views"
    assert (views / "plotly.min.js").is_file()
    pages = sorted(p for p in views.glob("*.html") if p.name != "index.html")[:3]
    assert pages, "trace --html wrote no figure pages"
    index = (views / "index.html").read_text()
    assert "http://" not in index and "https://" not in index  # the index page needs nothing from outside
    for name, (charts, asked) in _render_offline(browser_exe, pages).items():
        assert charts >= 1, f"{name}: no plotly chart drawn offline"
        assert asked == [], f"{name} asked the network for {asked}"


def test_report_figure_pages_render_offline(tmp_path, browser_exe):  # noqa: F811
    from geomlab.report.output import PLOTLY_JS, write_report

    results = json.loads((ROOT / "docs" / "results" / "results.json").read_text())
    write_report(results, tmp_path / "results.md", png=False)
    fig_dir = tmp_path / "results"
    pages = sorted(fig_dir.glob("*.html"))
    assert pages and (fig_dir / PLOTLY_JS).is_file()
    for page in pages:  # each page loads the one shipped copy, never a CDN
        text = page.read_text()
        assert f'src="{PLOTLY_JS}"' in text and "cdn.plot.ly" not in text
    for name, (charts, asked) in _render_offline(browser_exe, pages).items():
        assert charts >= 1, f"{name}: no plotly chart drawn offline"
        assert asked == [], f"{name} asked the network for {asked}"
