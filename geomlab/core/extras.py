"""Optional packages, imported when a feature needs them: a missing one is one line naming the extra that
installs it (``pip install 'geomlab[sweep]'``), never a bare ``ModuleNotFoundError``. The core install
(torch, numpy, safetensors, plotly, ...) is what ``import geomlab``, training and ``geomlab eval`` need;
pyproject.toml lists each extra's packages. Design choice."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

#: The extra that installs each optional top-level package (pyproject.toml's optional-dependencies).
EXTRA_OF = {
    "streamlit": "app",
    "pandas": "app",
    "sklearn": "app",
    "scipy": "app",
    "markdown": "app",
    "segno": "app",
    "redis": "app",
    "optuna": "sweep",
    "submitit": "sweep",
    "tensorboard": "logging",
    "kaleido": "export",
    "wandb": "wandb",
}


#: Distribution names that differ from the import name, for the message.
_DISTRIBUTION = {"sklearn": "scikit-learn"}


class MissingExtraError(ImportError, ValueError):
    """An optional package is not installed. One line: what needs it and the ``pip install`` that brings it.
    A ``ValueError`` too, so the command line reports it as one line (exit status 2)."""


def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except ValueError:  # a module without a spec: there, just not found the usual way
        return True


def require(module: str, purpose: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` (dotted, e.g. ``"sklearn.decomposition"``) and return it.

    ``purpose`` names the feature for the message (``"a sweep"``); ``extra`` overrides the extra named
    (a package in several extras). Raises :class:`MissingExtraError` when the module's top-level
    package is missing: ``"a sweep needs optuna: pip install 'geomlab[sweep]'"``
    (the extra from :data:`EXTRA_OF`; ``geomlab[all]`` for a package not listed there)."""
    top = module.split(".")[0]
    try:
        importlib.import_module(top)  # first: a submodule imported earlier would not tell a hidden package
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != top and _installed(top):
            raise  # the package is there but a module in or under it is missing: its own error says which
        extra = extra or EXTRA_OF.get(top, "all")
        raise MissingExtraError(f"{purpose} needs {_DISTRIBUTION.get(top, top)}: pip install 'geomlab[{extra}]'",
                                name=top) from None
