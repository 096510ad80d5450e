"""Micro-benchmarks: ``geomlab bench NAME [args]`` runs ``geomlab.bench.NAME.main(argv)``
(:mod:`geomlab.commands.bench`).

Each module ``geomlab/bench/NAME.py`` defines ``main(argv: list[str] | None = None) -> int`` and prints its
figures; speed is always reported as a ratio to a baseline measured in the same run (docs/architecture.md).
Its options are read by :class:`geomlab.core.argv.Parser`, the parser of every geomlab command: a bad option is
a short usage line and the error, exit status 2.
``geomlab bench`` with no name lists the available benchmarks.
"""

from __future__ import annotations

import pkgutil


def available() -> list[str]:
    """Names of the benchmark modules in this package (those that can be passed to ``geomlab bench``)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
