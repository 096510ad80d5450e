"""``python -m geomlab.bench NAME [args]``: run the benchmark ``geomlab.bench.NAME`` (its ``main(argv)``)."""

from __future__ import annotations

import importlib
import sys

from geomlab.bench import available


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m geomlab.bench NAME [args]   (NAME --help for its options)")
        print("benchmarks: " + (", ".join(names) if names else "(none)"))
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"unknown benchmark {name!r}; available: {', '.join(names) or '(none)'}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"geomlab.bench.{name}")
    result = module.main(rest)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
