"""``python -m geomlab.bench NAME [args]``: the old spelling of ``geomlab bench NAME [args]`` (kept for one
release; :mod:`geomlab.commands.bench` runs it)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from geomlab.cli import main as cli_main

    return cli_main(["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
