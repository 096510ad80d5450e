"""The chromium fixture of the real-browser tests (imported by the test modules that drive a browser)."""

from __future__ import annotations

import os
import shutil

import pytest


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser_exe():
    """Debian's chromium for playwright (never ``playwright install``): skipped without it, failed under
    ``CI=true``."""
    exe = chromium_path()
    if exe is None:
        msg = "Debian's chromium is not installed (apt-get install chromium); the browser test needs it"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg + " and CI=true")
        pytest.skip(msg)
    pytest.importorskip("playwright.sync_api")
    return exe
