"""Where geomlab's files that are not the backend live: the app (``app.py``, ``serve.py``, ``app_pages/``,
``.streamlit/config.toml``) and the bundled checkpoints (``assets/checkpoints/``).

In a clone of the repository (and in an editable install, ``pip install -e .``) they sit at the repository
root, beside the ``geomlab`` package. A wheel (``pip install .``) ships them as package data under
``geomlab/_app/`` (the mapping is in ``pyproject.toml``; that folder never exists in the repository), so an
installed geomlab finds them from any working folder. Design choice: one place decides, so the app, the
catalog and the zoo always agree.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def app_dir() -> Path:
    """Folder holding ``app.py``, ``serve.py``, ``app_pages/`` and ``assets/``: ``geomlab/_app`` when installed
    from a wheel, else the repository root (the folder above the package)."""
    installed = _PACKAGE / "_app"
    return installed if (installed / "app.py").is_file() else _PACKAGE.parent


#: The app's folder (see :func:`app_dir`).
APP_DIR = app_dir()
#: The bundled checkpoints (``NAME.json`` + ``NAME.safetensors``; docs/zoo.md).
BUNDLED_DIR = APP_DIR / "assets" / "checkpoints"
