"""The core install is enough for `import geomlab` and `geomlab eval`; a feature whose extra is missing says
which extra in one line. Optional packages are hidden in a subprocess by `sys.modules[name] = None` (what
Python does for a package that is not installed: `import` raises ModuleNotFoundError, find_spec gives None)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from geomlab.core import extras

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ["optuna", "tensorboard", "sklearn", "kaleido", "pandas", "scipy", "streamlit", "transformers"]


def _run_without_extras(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    code = ("import sys, runpy\n"
            f"for n in {OPTIONAL!r}: sys.modules[n] = None\n"
            f"sys.argv = ['geomlab', *{argv!r}]\n"
            "runpy.run_module('geomlab', run_name='__main__')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


def test_eval_of_a_bundled_model_needs_only_the_core(tmp_path):
    out = _run_without_extras(["eval", "osm-rnn-o-s3"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "test accuracy: 1.0000" in out.stdout and "parameters: 211" in out.stdout


def test_a_sweep_without_optuna_is_one_line_naming_the_extra(tmp_path):
    out = _run_without_extras(["sweep", "--model", "lstm", "--data", "word-problem:S3:8", "--n-trials", "1"],
                              tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.stderr.strip() == "error: a sweep needs optuna: pip install 'geomlab[sweep]'"


def test_require_names_the_extra_and_passes_other_import_errors_on(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(extras.MissingExtraError) as err:
        extras.require("sklearn.decomposition", "the PCA view")
    assert str(err.value) == "the PCA view needs scikit-learn: pip install 'geomlab[app]'"
    assert isinstance(err.value, ImportError) and isinstance(err.value, ValueError)
    monkeypatch.setitem(sys.modules, "scipy", None)
    with pytest.raises(extras.MissingExtraError, match=r"geomlab\[sweep\]"):
        extras.require("scipy.stats", "intervals", extra="sweep")
    assert extras.require("json", "x") is __import__("json")
    with pytest.raises(ModuleNotFoundError) as err:  # a missing submodule of an installed package: not an extra
        extras.require("json.no_such_module", "x")
    assert not isinstance(err.value, extras.MissingExtraError)


def test_every_extra_named_is_declared_in_pyproject():
    import tomllib

    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
                   ["optional-dependencies"])
    assert set(extras.EXTRA_OF.values()) <= declared
