"""``geomlab bench browser`` runs end to end (a smoke run: one session per page and server, one
cursor move, one click of each kind on one view); its figures are a benchmark's, not asserted."""

from __future__ import annotations

import os
import shutil

import pytest

from geomlab.commands.cli import main


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_browser_smoke(capsys):
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("Debian's chromium is not installed and CI=true")
        pytest.skip("needs Debian's chromium")
    pytest.importorskip("playwright.sync_api")
    assert main(["bench", "browser", "--rounds", "1", "--moves", "1", "--chars", "300", "--pages", "",
                 "--click-views", "attention", "--clicks", "1"]) == 0
    out = capsys.readouterr().out
    assert "/home" in out and "ratio shipped/baseline" in out and "click to update" in out
    rows = [line for line in out.splitlines() if "median" in line and "min" in line]
    # home: shipped + baseline; cursor move: shipped + baseline; on /attention a token click, a click on a cell of
    # the attention map and one on the whole-text strip (300 characters: longer than the window), shipped +
    # baseline each
    assert len(rows) == 10, out
    assert sum(" cell " in line for line in rows) == 2, out
