"""Micro-benchmarks: ``geomlab bench NAME [args]`` runs ``geomlab.bench.NAME.main(argv)``
(:mod:`geomlab.commands.bench`).

Each module ``geomlab/bench/NAME.py`` defines ``main(argv: list[str] | None = None) -> int``, which builds its
parser and hands it to :func:`run_benchmark` with a function that measures, prints its table and returns its figures as
data; speed is always reported as a ratio to a baseline measured in the same run (docs/architecture.md).
Its options are read by :class:`geomlab.core.argv.Parser`, the parser of every geomlab command: a bad option is
a short usage line and the error, exit status 2; every numeric option has a range
(:func:`geomlab.core.argv.number`), so a bad value is one line naming the option before anything runs. Every
benchmark takes ``--json PATH`` (declared once, in :func:`run_benchmark`): the figures it returned, with the machine
facts of :func:`document`, written as JSON. The file follows the commands' rule (:mod:`geomlab.core.outputs`):
its place is checked before the benchmark runs, and a missing folder is made and named on standard error
(:func:`write_json`); ``--json -`` writes the JSON to standard output alone, the printed table then going to
standard error, as ``geomlab trace --json -`` and ``geomlab whatif --json -`` do. Each benchmark declares once
what the keys of its figures mean, with their units (its ``DEFINITIONS``, passed to :func:`run_benchmark`),
which the JSON carries as ``definitions`` and its printed table may quote; a missing value is ``-`` in a table
(:func:`cell`) and ``null`` in the JSON. A benchmark's ``--only`` names read as one list (:func:`only_names`);
its ``--help`` shows its docstring's first paragraph as plain text (:func:`plain_text`). ``geomlab bench`` with
no name lists the available benchmarks.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import pkgutil
import re
import sys
from typing import Any, Callable

#: What ``--json`` says in every benchmark's help.
JSON_HELP = ("also write the figures of the table, the settings and the machine facts to this JSON file (its "
             "folder is made); '-': standard output, holding the JSON alone (the table then goes to standard "
             "error)")


#: What the machine facts of every benchmark's JSON mean (:func:`document`).
MACHINE_DEFINITIONS = {
    "kind": "bench-NAME: which benchmark wrote this file",
    "benchmark": "the benchmark's name (geomlab bench NAME)",
    "date": "when it ran, UTC",
    "torch": "torch version", "python": "Python version", "platform": "operating system and machine",
    "cpu_count": "logical CPUs of the machine",
    "threads": "torch's CPU threads once the benchmark ran",
    "load_avg": "1-minute load average as the benchmark ended (processes running or waiting for a CPU); null "
                "where the system has none",
    "args": "the options as run (after --quick)",
    "definitions": "what each key of this file means, with its unit",
}


def available() -> list[str]:
    """Names of the benchmark modules in this package (those that can be passed to ``geomlab bench``)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def run_benchmark(parser, argv: list[str] | None,
                  measure: Callable[[argparse.Namespace], dict[str, Any] | int],
                  definitions: dict[str, str]) -> int:
    """The command line of every benchmark: add ``--json PATH`` to ``parser`` (a
    :class:`geomlab.core.argv.Parser` whose ``prog`` ends with the benchmark's name; its description is shown
    as :func:`plain_text`), parse ``argv``, check the place of ``--json``
    (:func:`geomlab.core.outputs.check_outputs`: ``ValueError`` naming the option and the path, before anything
    runs), then call ``measure(args)``, which prints the benchmark's table and returns its figures as a dict of
    JSON values (or an ``int``: an exit status, nothing measured, nothing written). With ``--json -`` what
    ``measure`` prints goes to standard error, so that standard output holds the JSON alone. With ``--json
    FILE`` the figures are written with :func:`document`'s machine facts and ``definitions`` (key -> its
    meaning and unit; :func:`write_json`), and one line on standard error names the file. Returns the exit
    status: 0, or 1 when the figures say ``"ok": False`` (something failed during the run). Design choice: one
    option, one writer, for every benchmark."""
    parser.description = plain_text(parser.description or "")
    parser.add_argument("--json", default=None, metavar="PATH", help=JSON_HELP)
    args = parser.parse_args(argv)
    path = args.json
    if path is not None and path != "-":
        from geomlab.core.outputs import check_outputs

        check_outputs([("--json", path, False)])  # before the benchmark, not after minutes of it
    with contextlib.redirect_stdout(sys.stderr) if path == "-" else contextlib.nullcontext():
        figures = measure(args)
    if isinstance(figures, int):
        return figures
    if path is not None:
        write_json(path, document(parser.prog.split()[-1], vars(args), figures, definitions))
        if path != "-":
            print(f"wrote the figures as JSON -> {path}", file=sys.stderr)
    return 0 if figures.get("ok", True) else 1


def plain_text(text: str) -> str:
    """``text`` (a docstring's paragraph) as a help screen shows it: reStructuredText markup dropped
    (````x```` -> ``x``, ``:func:`~a.b``` -> ``b``, ``:mod:`a.b``` -> ``a.b``, ``**x**`` -> ``x``), lines
    joined, ending with a full stop. Design choice."""
    text = re.sub(r":\w+:`~?([^`]*)`", lambda m: m[1].rsplit(".", 1)[-1] if "~" in m[0] else m[1], text)
    text = re.sub(r"``([^`]*)``|\*\*([^*]*)\*\*", lambda m: m[1] if m[1] is not None else m[2], text)
    text = " ".join(text.split())
    return text if not text or text.endswith((".", ":", "!", "?")) else text + "."


def cell(value: Any, spec: str = "", width: int = 0) -> str:
    """``value`` formatted with ``spec`` and right-aligned in ``width`` characters for a printed table; ``-``
    where nothing was measured (``None`` or a NaN), as every benchmark's table shows it (its JSON has
    ``null``). Design choice."""
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return f"{'-' if missing else format(value, spec):>{width}}"


def document(name: str, settings: dict[str, Any], figures: dict[str, Any],
             definitions: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON document of benchmark ``name``: ``kind`` (``"bench-NAME"``), ``benchmark``, the machine facts
    (``date`` in UTC, ``torch`` and ``python`` versions, ``platform``, ``cpu_count``, ``threads``: torch's CPU
    threads once the benchmark ran, ``load_avg``: the 1-minute load average or None), ``args`` (the options,
    ``settings``), ``definitions`` (:data:`MACHINE_DEFINITIONS` and the benchmark's ``definitions``: each key
    of the figures, in any row, -> its meaning and unit; a row's key named as a machine fact, such as a model's
    ``kind``, gets both meanings), then ``figures`` (which may replace any of these,
    e.g. ``device``). Values JSON cannot hold as numbers are made plain: a NaN or infinity is ``null`` (not
    measured), a tuple a list, a path a string. Design choice."""
    import datetime
    import platform

    import torch

    facts = {"kind": f"bench-{name}", "benchmark": name,
             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
             "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
             "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None, "args": settings,
             "definitions": {**MACHINE_DEFINITIONS, **{
                 k: f"{MACHINE_DEFINITIONS[k]}; in a row: {v}" if k in MACHINE_DEFINITIONS else v
                 for k, v in (definitions or {}).items()}}}
    return _plain({**facts, **figures})


def _plain(value: Any) -> Any:
    """``value`` with non-finite floats as None, tuples as lists and paths as strings, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k if isinstance(k, (str, int)) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def write_json(path, data: Any, option: str = "--json") -> None:
    """Write ``data`` as indented JSON to ``path``, the file of ``option``, once the benchmark has run: whole or
    not at all (:func:`geomlab.core.writes.write_atomic`), its missing folder made and named on standard error
    (:func:`geomlab.core.outputs.make_folders`; :func:`run_benchmark` checked the place before the benchmark ran); ``-``
    prints it to standard output. Raises ``ValueError`` for a value JSON cannot hold, ``OSError`` naming the
    file when the system refuses the write."""
    import json

    text = json.dumps(data, indent=1, allow_nan=False)  # fails here, before any folder is made
    if str(path) == "-":
        print(text)
        return
    from geomlab.core.outputs import make_folders
    from geomlab.core.writes import write_atomic

    with make_folders(option, path):
        write_atomic(path, text, "JSON file")


def only_names(only: list[list[str]] | None) -> list[str] | None:
    """The names of ``--only`` (``nargs="*"`` of :func:`geomlab.core.argv.name_list`: one list per word, so
    ``--only a b`` and ``--only a,b`` are alike) as one list; ``None`` when the option is not given."""
    return None if only is None else [n for word in only for n in word]
