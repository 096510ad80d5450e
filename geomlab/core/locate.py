"""Where geomlab's files that are not the backend live: the app (``app.py``, ``serve.py``, ``app_pages/``,
``.streamlit/config.toml``) and the bundled checkpoints (``assets/checkpoints/``).

In a clone of the repository (and in an editable install, ``pip install -e .``) they sit at the repository
root, beside the ``geomlab`` package. A wheel (``pip install .``) ships them as package data under
``geomlab/_app/`` (the mapping is in ``pyproject.toml``; that folder never exists in the repository), so an
installed geomlab finds them from any working folder. Design choice: one place decides, so the app, the
catalog, the zoo and :func:`geomlab.checkpoints.io.load` always agree.

Bundled checkpoints are named ``bundled/NAME`` (the app's reference, also accepted by
:func:`geomlab.checkpoints.io.load` and the command line) or, on the command line, a bare ``NAME``:
:func:`bundled_checkpoint` is the one place that maps a name to its files.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


def app_dir() -> Path:
    """Folder holding ``app.py``, ``serve.py``, ``app_pages/`` and ``assets/``: ``geomlab/_app`` when installed
    from a wheel, else the repository root (the folder above the package)."""
    installed = _PACKAGE / "_app"
    return installed if (installed / "app.py").is_file() else _PACKAGE.parent


#: The app's folder (see :func:`app_dir`).
APP_DIR = app_dir()
#: The bundled checkpoints (Hugging Face folders ``NAME/``; docs/zoo.md).
BUNDLED_DIR = APP_DIR / "assets" / "checkpoints"


#: The prefix of a bundled checkpoint's reference (``bundled/NAME``).
BUNDLED_PREFIX = "bundled/"


def bundled_dir() -> Path:
    """Folder of the bundled checkpoints now: ``$GEOMLAB_BUNDLED_DIR`` (the tests and the load benchmark
    point it elsewhere) or :data:`BUNDLED_DIR`."""
    env = os.environ.get("GEOMLAB_BUNDLED_DIR")
    return Path(env) if env else BUNDLED_DIR


def bundled_checkpoint(name: str | os.PathLike, *, bare: bool = False) -> Path | None:
    """The files of the bundled checkpoint ``name`` names, for :func:`geomlab.checkpoints.io.load`: the folder
    ``<bundled_dir()>/NAME/`` or the flat pair's ``NAME.json``; ``None`` when ``name`` is not a bundled
    checkpoint's name or no such checkpoint is there.

    ``name`` is ``bundled/NAME`` (a ``.json`` or ``.safetensors`` suffix allowed), or with ``bare`` also a
    plain ``NAME`` (the command line's spelling). NAME is one file name: no folder in it, not starting with a
    dot (the catalog lists no such file). Whether the files make a valid checkpoint is the loader's
    business. Design choice: the command line, the library and the app spell bundled checkpoints alike."""
    p = Path(name)
    if not (p.parent == Path("bundled") or (bare and p.parent == Path("."))):
        return None
    stem = p.name[: -len(p.suffix)] if p.suffix in (".json", ".safetensors") else p.name
    if not stem or stem.startswith("."):
        return None
    folder = bundled_dir() / stem
    if folder.is_dir():
        return folder
    json_path = folder.with_name(stem + ".json")
    if os.path.lexists(json_path) or os.path.lexists(folder.with_name(stem + ".safetensors")):
        return json_path
    return None


def bundled_names() -> list[str]:
    """Names of the bundled checkpoints (folders and flat pairs in :func:`bundled_dir`), sorted; for messages."""
    root = bundled_dir()
    if not root.is_dir():
        return []
    return sorted({p.name if p.is_dir() else p.stem for p in root.iterdir()
                   if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".json")})
