"""geomlab as an installable package (pyproject.toml): metadata, the `geomlab` script, the app's files as
package data, and (slow) a real wheel installed into a fresh virtual environment and started from elsewhere."""

from __future__ import annotations

import importlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from geomlab.core import locate
from geomlab.commands.cli import main
from helpers.wheel import build_wheel

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
APP_PACKAGE = "geomlab._app"


def _app_data_files() -> set[str]:
    """Repository files (relative to the root) matched by the package-data patterns of geomlab._app."""
    patterns = SETUPTOOLS["package-data"][APP_PACKAGE]
    return {p.relative_to(ROOT).as_posix() for pat in patterns for p in ROOT.glob(pat) if p.is_file()}


def test_pyproject_declares_the_console_script_and_it_resolves_to_main():
    target = PYPROJECT["project"]["scripts"]["geomlab"]
    module, _, attr = target.partition(":")
    func = getattr(importlib.import_module(module), attr)
    assert func is main and callable(func)


def test_version_is_the_package_version(capsys):
    from geomlab import __version__

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"geomlab {__version__}"
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "geomlab.__version__"}


def test_every_geomlab_subpackage_is_listed():
    """pyproject.toml lists the packages by hand (geomlab._app needs a mapping); a new subpackage must be added."""
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "geomlab").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    listed = set(SETUPTOOLS["packages"])
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == {APP_PACKAGE}
    assert SETUPTOOLS["package-dir"] == {APP_PACKAGE: "."}


def test_package_data_covers_every_app_page_checkpoint_and_setting():
    data = _app_data_files()
    pages = {p.relative_to(ROOT).as_posix() for p in [*(ROOT / "app_pages").glob("*.py"),
                                                      *(ROOT / "app_pages").rglob("*.js")]}
    bundled = {p.relative_to(ROOT).as_posix() for p in (ROOT / "assets" / "checkpoints").rglob("*") if p.is_file()}
    assert pages and bundled
    assert pages - data == set(), "app pages missing from the package data"
    assert bundled - data == set(), "bundled checkpoint files missing from the package data"
    assert ".streamlit/config.toml" in data
    # geomlab._app's modules are every *.py at the repository root: exactly the app's two entry points
    assert {p.name for p in ROOT.glob("*.py")} == {"app.py", "serve.py"}


def _constraints() -> dict[str, Requirement]:
    lines = [ln.strip() for ln in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()]
    reqs = [Requirement(ln) for ln in lines if ln and not ln.startswith("#")]
    return {canonicalize_name(r.name): r for r in reqs}


def _declared() -> list[Requirement]:
    """Every requirement of pyproject.toml: the dependencies and each extra's (self-references left out)."""
    project = PYPROJECT["project"]
    specs = [*project["dependencies"], *(x for extra in project["optional-dependencies"].values() for x in extra)]
    return [r for r in map(Requirement, specs) if canonicalize_name(r.name) != "geomlab"]


def test_dependencies_are_ranges_and_constraints_pin_each_inside_its_range():
    """pyproject.toml: a lower and an upper bound per package (installs beside a user's stack);
    constraints.txt: exactly one `==` pin per package, inside every range that names it."""
    pins = _constraints()
    for r in pins.values():
        assert len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==", f"{r} is not pinned with =="
    declared = _declared()
    assert declared
    for r in declared:
        ops = {s.operator for s in r.specifier}
        assert ops == {">=", "<"}, f"{r}: give a range >=LOW,<NEXT_MAJOR, not {r.specifier}"
        name = canonicalize_name(r.name)
        assert name in pins, f"{r.name} has no pin in constraints.txt"
        version = next(iter(pins[name].specifier)).version
        assert r.specifier.contains(version), f"constraints.txt pins {r.name}=={version}, outside {r.specifier}"
    assert set(pins) == {canonicalize_name(r.name) for r in declared}, "constraints.txt pins a package no one asks for"


def test_core_is_light_and_the_extras_are_declared():
    project = PYPROJECT["project"]
    core = {canonicalize_name(Requirement(x).name) for x in project["dependencies"]}
    assert {"torch", "numpy", "safetensors", "plotly"} <= core
    assert not core & {"optuna", "tensorboard", "kaleido", "scikit-learn", "pandas", "scipy", "streamlit"}
    extras = project["optional-dependencies"]
    assert {"app", "sweep", "logging", "export", "hf", "all", "test"} <= set(extras)
    assert extras["all"] == ["geomlab[app,sweep,logging,export,hf,wandb]"]
    assert project["license"] == "MIT" and (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    assert any(c.startswith("License") or c.startswith("Programming Language") for c in project["classifiers"])


def test_the_readme_and_ci_install_with_the_constraints():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = 'pip install -q -c constraints.txt -e ".[all,test]" && python -m pytest'
    assert 'pip install -c constraints.txt -e ".[app]" && geomlab app' in readme
    assert test_command in readme and test_command in ci


def test_app_dry_run_prints_the_streamlit_command_with_options_passed_through(capsys):
    assert main(["app", "--dry-run", "--server.port", "8611", "--server.headless", "true"]) == 0
    cmd = shlex.split(capsys.readouterr().out)
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(cmd[4]) == locate.APP_DIR / "serve.py" and Path(cmd[4]).is_file()
    assert cmd[5:] == ["--server.port", "8611", "--server.headless", "true"]
    assert main(["app", "--dry-run", "--cold"]) == 0
    assert shlex.split(capsys.readouterr().out)[4:] == [str(locate.APP_DIR / "app.py")]


def test_other_commands_still_reject_unknown_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["eval", "some-checkpoint", "--server.port", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # the subcommand's usage and name, not the top level's (`geomlab [-h] [--version] COMMAND ...`)
    assert "geomlab eval: error: unrecognized arguments: --server.port 1" in err and "usage: geomlab eval" in err


def test_locate_prefers_the_installed_app_folder(tmp_path, monkeypatch):
    assert locate.app_dir() == ROOT  # in the repository
    pkg = tmp_path / "site-packages" / "geomlab"
    (pkg / "_app").mkdir(parents=True)
    monkeypatch.setattr(locate, "_PACKAGE", pkg)
    assert locate.app_dir() == tmp_path / "site-packages"  # no _app/app.py: the folder above the package
    (pkg / "_app" / "app.py").write_text("", encoding="utf-8")
    assert locate.app_dir() == pkg / "_app"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wheel_installs_and_the_app_starts_from_another_folder(tmp_path):
    """Build the wheel (no network: --no-build-isolation), check its contents, install it into a fresh venv
    (system site-packages for torch & co.), then from an unrelated folder: `geomlab --help`, the bundled
    checkpoints found inside the installed package, and `geomlab app` answering its health check."""
    pytest.importorskip("setuptools", minversion="77")  # the build backend, used without network
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"geomlab/_app/{f}" for f in _app_data_files()} | {"geomlab/_app/app.py", "geomlab/_app/serve.py"}
    expected |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "geomlab").rglob("*.py")
                 if "__pycache__" not in p.parts}
    expected |= {f"geomlab/templates/{p.name}" for p in (ROOT / "geomlab" / "templates").iterdir()}
    assert expected - names == set()
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    entry = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "geomlab = geomlab.commands.cli:main" in entry
    requires = {str(Requirement(ln.split(": ", 1)[1])) for ln in meta.splitlines() if ln.startswith("Requires-Dist: ")}
    for spec in PYPROJECT["project"]["dependencies"]:
        assert str(Requirement(spec)) in requires
    assert "Provides-Extra: app" in meta and "Provides-Extra: test" in meta and "License-Expression: MIT" in meta

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GEOMLAB_BUNDLED_DIR")}
    geomlab = str(bindir / "geomlab")
    out = subprocess.run([geomlab, "--help"], cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
    assert "app" in out.stdout and "trace" in out.stdout
    where = subprocess.run([str(bindir / "python"), "-c", "import geomlab.core.locate as l, geomlab.checkpoints.catalog as c; "
                            "print(l.APP_DIR); print(len(c.list_checkpoints(user=False)))"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[0].endswith(os.path.join("geomlab", "_app"))
    assert int(where[1]) == len([p for p in (ROOT / "assets" / "checkpoints").iterdir() if p.is_dir()])
    # a bundled checkpoint by its name, from a folder that has no copy of it (the README's promise)
    sample = subprocess.run([geomlab, "sample", "lstm-tinyshakespeare", "--prompt", "RO", "--length", "5"],
                            cwd=elsewhere, env=env, capture_output=True, text=True)
    assert sample.returncode == 0 and sample.stdout.startswith("RO"), sample.stderr

    port = _free_port()
    log = (tmp_path / "app.log").open("w")
    proc = subprocess.Popen([geomlab, "app", "--server.headless", "true", "--server.port", str(port)],
                            cwd=elsewhere, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, healthy = time.monotonic() + 240, False
        while time.monotonic() < deadline and proc.poll() is None and not healthy:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
                    healthy = r.status == 200
            except OSError:
                time.sleep(1)
        text = (tmp_path / "app.log").read_text(encoding="utf-8", errors="replace")
        assert healthy, f"the installed app did not answer its health check:\n{text[-3000:]}"
        assert "first view ready" in text, text[-3000:]  # serve.py's warm-up ran, on the installed checkpoints
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def test_requirements_files_say_what_the_readme_commands_install():
    """requirements.txt and requirements-test.txt are the README's two installs as files: the pins of
    constraints.txt and the editable install with the same extras."""
    def lines(name: str) -> list[str]:
        text = (ROOT / name).read_text(encoding="utf-8")
        return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert lines("requirements.txt") == ["-c constraints.txt", "-e .[app]"]
    assert 'pip install -c constraints.txt -e ".[app]"' in readme
    assert lines("requirements-test.txt") == ["-c constraints.txt", "-e .[all,test]"]
    assert 'pip install -q -c constraints.txt -e ".[all,test]"' in readme
