"""Shared test set-up: small thread count, hypothesis profile, the `data` marker's skip rule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)
settings.register_profile(
    "geomlab", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("geomlab")


def data_dir() -> Path | None:
    """The real corpora folder from GEOMLAB_DATA_DIR, or None when unset/missing."""
    value = os.environ.get("GEOMLAB_DATA_DIR")
    if value and Path(value).is_dir():
        return Path(value)
    return None


def pytest_collection_modifyitems(config, items):
    if data_dir() is None:
        skip = pytest.mark.skip(reason="needs the real corpora: set GEOMLAB_DATA_DIR (e.g. ../shared/data)")
        for item in items:
            if item.get_closest_marker("data"):  # (not item.keywords: it also holds the folder tests/data)
                item.add_marker(skip)


@pytest.fixture
def tiny_text() -> str:
    """A small made-up corpus (no download): a few hundred characters of varied text."""
    lines = [
        "The quick brown fox jumps over the lazy dog.",
        "Pack my box with five dozen liquor jugs!",
        "How vexingly quick daft zebras jump; sphinx of black quartz, judge my vow.",
        "ROMEO: But soft, what light through yonder window breaks?",
        "JULIET: O Romeo, Romeo, wherefore art thou Romeo?",
    ]
    return "\n".join(lines * 8) + "\n"


@pytest.fixture
def text_file(tmp_path, tiny_text) -> Path:
    """:func:`tiny_text` three times as a UTF-8 file ``small.txt`` in the test's folder (a user corpus file)."""
    p = tmp_path / "small.txt"
    p.write_text(tiny_text * 3, encoding="utf-8")
    return p


@pytest.fixture(autouse=True, scope="session")
def _charts_send_their_traces_every_run():
    """AppTests read each run's figures from its elements (``tests/helpers/charts.py``), so every run sends
    a chart's traces, also to a session that was sent them before (a browser keeps them)."""
    from app_pages import _live_chart

    _live_chart.ALWAYS_SEND_TRACES = True


ASSETS = Path(__file__).resolve().parent.parent / "assets" / "checkpoints"
APP = str(Path(__file__).resolve().parent.parent / "app.py")
APP_TIMEOUT = 120


@pytest.fixture
def zoo(tmp_path, monkeypatch) -> Path:
    """The app's catalog on the real bundled checkpoints (assets/checkpoints) with an empty runs folder and
    no pre-warming; skips when the bundled files are absent. Returns the bundled folder."""
    if not (ASSETS / "osm-rnn-o-s5").is_dir() or not (ASSETS / "cem-t2-tinyshakespeare").is_dir():
        pytest.skip("bundled checkpoints not present")
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(ASSETS))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("GEOMLAB_APP_PREWARM", "0")
    return ASSETS


def run_page(slug: str, **query):
    """``AppTest`` of the app opened on page ``slug`` ("" = Home) with URL ``query``, run once; asserts that
    no exception element is shown."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=APP_TIMEOUT)
    at.query_params.update(query)
    if slug:
        at.switch_page(f"app_pages/{slug}.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Empty bundled and runs folders for the catalog (``(bundled, runs)``), named by the environment."""
    bundled, runs = tmp_path / "bundled", tmp_path / "runs"
    bundled.mkdir()
    runs.mkdir()
    monkeypatch.setenv("GEOMLAB_BUNDLED_DIR", str(bundled))
    monkeypatch.setenv("GEOMLAB_RUNS_DIR", str(runs))
    return bundled, runs
