"""``geomlab bench NAME [args]``: run the micro-benchmark ``geomlab.bench.NAME`` (its ``main(argv)``, which
prints its figures; speed as ratios to a baseline measured in the same run). ``geomlab bench`` alone lists
them. The reproduction report is ``geomlab report``."""

from __future__ import annotations

import argparse
import importlib

HELP = "run a micro-benchmark: geomlab bench NAME [ARGS] (NAME --help for its options; no NAME lists them)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from geomlab.bench import available

    p.add_argument("name", nargs="?", metavar="NAME", help="the benchmark: " + ", ".join(available()))
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the benchmark's own options (geomlab bench NAME --help)")


def run(args: argparse.Namespace) -> int:
    """Run the benchmark ``args.name`` with ``args.args``; its exit status. No name: list the benchmarks and
    return 2. Raises ``ValueError`` (one line) for an unknown name."""
    from geomlab.bench import available

    names = available()
    if args.name is None:
        print("usage: geomlab bench NAME [ARGS]   (NAME --help for its options)")
        print("benchmarks: " + (", ".join(names) if names else "(none)"))
        print("the reproduction report (docs/results.md) is `geomlab report` (geomlab report --help)")
        return 2
    if args.name not in names:
        raise ValueError(f"unknown benchmark {args.name!r}; available: {', '.join(names) or '(none)'}")
    module = importlib.import_module(f"geomlab.bench.{args.name}")
    return int(module.main(list(args.args)) or 0)
