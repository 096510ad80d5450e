"""Building geomlab's wheel from a copy of the repository, for the tests that install it into a fresh venv."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_source(dest: Path) -> Path:
    """The files a build reads, copied so the build's own folders (build/, *.egg-info) stay out of the repo."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    dest.mkdir()
    for name in ["pyproject.toml", "README.md", "LICENSE", "app.py", "serve.py"]:
        shutil.copy2(ROOT / name, dest / name)
    for name in ["geomlab", "app_pages", "assets", ".streamlit"]:
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def build_wheel(tmp_path: Path) -> Path:
    """geomlab's wheel built from a copy of the repository under ``tmp_path`` (no network: the installed
    setuptools, ``--no-build-isolation``). Returns the wheel's path."""
    src = copy_source(tmp_path / "src")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(wheels), str(src)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("geomlab-*.whl")
    return wheel
