"""The built wheel installs into a plain virtual environment beside a torch one minor away from the pin in
constraints.txt, keeps that torch, and `geomlab eval` scores a bundled model there as it does here.

Needs the network (PyPI, or the index named by GEOMLAB_INSTALL_INDEX) and a few minutes, so it is marked
`install` and runs only with GEOMLAB_INSTALL_TEST=1 (docs/install.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from geomlab.commands.cli import main
from helpers.wheel import ROOT, build_wheel

BUNDLED = "osm-rnn-o-s3"  # a word-problem model: its evaluation data is generated, no corpus to download


def _pinned_torch() -> Version:
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("torch=="):
            return Version(next(iter(Requirement(line).specifier)).version)
    raise AssertionError("constraints.txt pins no torch")


def other_torch_minor(pin: Version) -> str:
    """A requirement for the torch release one minor below ``pin`` (``2.13.0`` -> ``torch==2.12.*``); one minor
    above where the pin is ``x.0``."""
    minor = pin.minor - 1 if pin.minor > 0 else pin.minor + 1
    return f"torch=={pin.major}.{minor}.*"


def test_other_torch_minor_is_one_minor_away():
    assert other_torch_minor(Version("2.13.0")) == "torch==2.12.*"
    assert other_torch_minor(Version("3.0.1")) == "torch==3.1.*"
    assert _pinned_torch().major == 2


@pytest.mark.install
@pytest.mark.timeout(1800)
def test_wheel_installs_beside_another_torch_minor_and_evaluates(tmp_path, capsys):
    if os.environ.get("GEOMLAB_INSTALL_TEST") != "1":
        pytest.skip("downloads torch (set GEOMLAB_INSTALL_TEST=1 to run it)")
    torch_req = os.environ.get("GEOMLAB_INSTALL_TORCH") or other_torch_minor(_pinned_torch())
    index = os.environ.get("GEOMLAB_INSTALL_INDEX")  # e.g. a CPU-only torch index
    assert main(["eval", BUNDLED]) == 0
    here = capsys.readouterr().out

    wheel = build_wheel(tmp_path)
    # the venv's processes see nothing of this checkout (a PYTHONPATH to it would show pip an installed geomlab)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GEOMLAB_BUNDLED_DIR")}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)  # plain: nothing from this Python
    py = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run([*pip, torch_req, *(["--extra-index-url", index] if index else [])], check=True, env=env,
                   cwd=elsewhere)
    before = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                            check=True, env=env, cwd=elsewhere).stdout.strip()
    subprocess.run([*pip, str(wheel)], check=True, env=env, cwd=elsewhere)  # geomlab's ranges beside that torch
    after = subprocess.run([py, "-c", "import torch, geomlab; print(torch.__version__, geomlab.__file__)"],
                           capture_output=True, text=True, check=True, env=env, cwd=elsewhere).stdout.split()
    assert Path(after[1]).is_relative_to(venv), f"geomlab imported from {after[1]}, not the venv"
    after = after[0]
    assert after == before and Requirement(torch_req).specifier.contains(Version(before).base_version), \
        f"installing geomlab replaced torch {before} by {after}"
    check = subprocess.run([py, "-m", "pip", "check"], capture_output=True, text=True, env=env, cwd=elsewhere)
    assert check.returncode == 0, check.stdout + check.stderr

    out = subprocess.run([py, "-m", "geomlab", "eval", BUNDLED], cwd=elsewhere, env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    # same accuracy and parameter count; the loss's last digit may differ between torch releases
    assert out.stdout.splitlines()[-1] == here.splitlines()[-1]
    assert out.stdout.split("loss:")[0] == here.split("loss:")[0], (out.stdout, here)
    print(f"torch {before}; {out.stdout.strip()}", file=sys.stderr)
