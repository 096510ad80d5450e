"""Micro-benchmarks: ``geomlab bench NAME [args]`` runs ``geomlab.bench.NAME.main(argv)``
(:mod:`geomlab.commands.bench`).

Each module ``geomlab/bench/NAME.py`` defines ``main(argv: list[str] | None = None) -> int`` and prints its
figures; speed is always reported as a ratio to a baseline measured in the same run (docs/architecture.md).
Its options are read by :class:`geomlab.core.argv.Parser`, the parser of every geomlab command: a bad option is
a short usage line and the error, exit status 2; every numeric option has a range
(:func:`geomlab.core.argv.number`), so a bad value is one line naming the option before anything runs. A file a
benchmark writes (``--json``) follows the commands' rule (:mod:`geomlab.core.outputs`): its place is checked
before the benchmark runs (:func:`json_option`), and a missing folder is made and named on standard error
(:func:`write_json`); ``--json -`` writes the JSON to standard output alone, the printed table then going to
standard error, as ``geomlab trace --json -`` and ``geomlab whatif --json -`` do; a benchmark's ``--only`` names
read as one list (:func:`only_names`). ``geomlab bench`` with no name lists the available benchmarks.
"""

from __future__ import annotations

import contextlib
import pkgutil
import sys
from typing import Any

#: What ``--json`` of a benchmark says in its help about ``-``.
STDOUT_HELP = "; '-': standard output, holding the JSON alone (the table then goes to standard error)"


def available() -> list[str]:
    """Names of the benchmark modules in this package (those that can be passed to ``geomlab bench``)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@contextlib.contextmanager
def json_option(path, option: str = "--json"):
    """``with json_option(args.json): run the benchmark and print its table``, then :func:`write_json`: the
    place of ``option`` (a file, or ``-`` for standard output; nothing when ``path`` is None) is checked
    before the body runs (:func:`geomlab.core.outputs.check_outputs`, ``ValueError`` naming the option and
    the path), and with ``-`` what the body prints goes to standard error, so that standard output holds the
    JSON alone (for a pipe). Design choice: the rule of ``trace --json -`` and ``whatif --json -``."""
    from geomlab.core.outputs import check_outputs

    if path is not None and str(path) != "-":
        check_outputs([(option, path, False)])  # before the benchmark, not after minutes of it
    if str(path) != "-":
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def write_json(path, data: Any, option: str = "--json") -> None:
    """Write ``data`` as indented JSON to ``path``, the file of ``option``, once the benchmark has run: whole or
    not at all (:func:`geomlab.core.writes.write_atomic`), its missing folder made and named on standard error
    (:func:`geomlab.core.outputs.make_folders`; the caller checked the place with :func:`json_option` before
    the benchmark ran); ``-`` prints it to standard output. Raises ``OSError`` naming the file when the system
    refuses the write."""
    import json

    from geomlab.core.outputs import make_folders
    from geomlab.core.writes import write_atomic

    text = json.dumps(data, indent=1)  # a value JSON cannot take fails here, before any folder is made
    if str(path) == "-":
        print(text)
        return
    with make_folders(option, path):
        write_atomic(path, text, "JSON file")


def only_names(only: list[list[str]] | None) -> list[str] | None:
    """The names of ``--only`` (``nargs="*"`` of :func:`geomlab.core.argv.name_list`: one list per word, so
    ``--only a b`` and ``--only a,b`` are alike) as one list; ``None`` when the option is not given."""
    return None if only is None else [n for word in only for n in word]
