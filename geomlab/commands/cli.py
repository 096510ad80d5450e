"""The ``geomlab`` command line (installed as the ``geomlab`` script; ``python -m geomlab`` is the same).

Each subcommand lives in its own module under :mod:`geomlab.commands`; a module exposes ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int`` (the exit status). A module that sets ``PASS_THROUGH = True``
gets the options it does not know in ``args.extra`` (``app`` hands them to ``streamlit run``); any other
subcommand rejects them. This file only wires them together, so adding a subcommand never touches another one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from geomlab.core.argv import OptionValueError, Parser, did_you_mean

# subcommand name -> module under geomlab.commands
COMMANDS = {
    "train": "train",
    "eval": "eval",
    "sample": "sample",
    "trace": "trace",
    "whatif": "whatif",
    "zoo": "zoo",
    "report": "report",
    "bench": "bench",
    "sweep": "sweep",
    "app": "app",
    "handout": "handout",
}


def attach_dash_values(argv: list[str]) -> list[str]:
    """``argv`` with each value that starts with a dash and a digit or point (``-3k``, ``-.5``, ``-1e-3``) joined
    to the long option before it (``--params -3k`` -> ``--params=-3k``), up to a bare ``--``. argparse takes
    only plain negative numbers as values and reads ``-3k`` as an unknown option ("expected one argument"); so
    joined, the option's own check says what is wrong with the value (design choice)."""
    out: list[str] = []
    for i, tok in enumerate(argv):
        if tok == "--":
            return out + argv[i:]
        prev = out[-1] if out else ""
        if tok[:2] in {f"-{c}" for c in "0123456789."} and prev.startswith("--") and "=" not in prev:
            out[-1] = f"{prev}={tok}"
        else:
            out.append(tok)
    return out


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with one sub-parser per available subcommand."""
    parser = Parser(
        prog="geomlab",
        description="geomlab: train, evaluate, sample and trace geometric sequence models.",
    )
    from geomlab import __version__

    parser.add_argument("--version", action="version", version=f"geomlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(f"geomlab.commands.{module_name}")
        except ModuleNotFoundError as exc:  # a subcommand whose module is not written yet
            if exc.name != f"geomlab.commands.{module_name}":
                raise
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _pass_through=getattr(module, "PASS_THROUGH", False), _parser=p)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the process exit status. When the reader of standard output goes away
    before the output is written (``geomlab zoo | head -2``), the rest of the output is dropped without a
    message and the status is 141 (128 + SIGPIPE, what a shell reports for a command that a closed pipe
    stopped)."""
    try:
        try:
            return _main(argv)
        finally:  # output still buffered meets a closed pipe here at the latest (also after --help's exit)
            if sys.stdout is not None and not sys.stdout.closed:
                sys.stdout.flush()
    except BrokenPipeError:
        # what is left in the buffer goes to devnull, so the flush at exit raises nothing either
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):  # standard output without a file descriptor (captured)
            pass
        return 141


def _main(argv: list[str] | None) -> int:
    """:func:`main` without its handling of a closed standard output."""
    argv = attach_dash_values(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
    except OptionValueError as exc:  # e.g. "--threads: must be an integer from 1 to 8 ..., got 100000"
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if extra and not getattr(args, "_pass_through", False):  # the subcommand's own usage, not the top level's
        sub = getattr(args, "_parser", None) or parser
        sub.error(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(extra, sub)}")
    args.extra = extra
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        # Bad input is reported as one readable line, never a traceback (nor "[Errno 2] ...").
        print(f"error: {_one_line(exc) if isinstance(exc, OSError) else exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of the output went away: main's concern, not an error message
        raise
    except OSError as exc:
        # the machine refused (read-only folder, disk full, permissions): one line, exit status 1
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except (RuntimeError, MemoryError) as exc:
        from geomlab.training.runs import out_of_memory

        if not out_of_memory(exc):
            raise
        # a request too large for the machine (a huge batch, window or model): one line, exit status 2
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"error: out of memory ({first}); ask for a smaller model, batch or sequence length",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def _one_line(exc: OSError) -> str:
    """``[Errno 28] No space left on device: 'runs/x.json'`` -> ``runs/x.json: No space left on device``."""
    if exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc) or type(exc).__name__
