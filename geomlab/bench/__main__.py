"""``python -m geomlab.bench NAME [args]``: the old spelling of ``geomlab bench NAME [args]`` (kept for one
release; :mod:`geomlab.commands.bench` runs it)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from geomlab.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    print(f"note: `python -m geomlab.bench` is the old spelling; use `geomlab bench {args[0] if args else 'NAME'}`",
          file=sys.stderr)
    return cli_main(["bench", *args])


if __name__ == "__main__":
    sys.exit(main())
