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
            if "data" in item.keywords:
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
