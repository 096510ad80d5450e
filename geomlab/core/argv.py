"""Reading the command line, for every layer that reads it: the argparse parser of ``geomlab``, its subcommands
and its benchmarks (:class:`Parser`: a usage error is a short usage line and the error), how the user
started geomlab (:func:`program`) and a finite number read from an option's text (:func:`finite_float`).

It sits at the foundation so that ``geomlab bench NAME`` (whose modules the commands import) and the training
layer's ``--search`` reader use the same pieces as the commands. Source: design choice.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path


def program() -> str:
    """How the user started geomlab, for hints to run it again: ``geomlab`` when ``sys.argv[0]`` is the
    installed script (``geomlab``, ``geomlab.exe``), else ``python -m geomlab`` (``-m`` runs ``__main__.py``)."""
    return "geomlab" if Path(sys.argv[0]).name in ("geomlab", "geomlab.exe") else "python -m geomlab"


class OptionValueError(ValueError):
    """An option value its ``type=`` function refused (out of range, not a number): ``str`` is one line,
    ``--OPTION: what is wrong, got VALUE``. A ``ValueError``, so where no caller catches it by name (a
    benchmark's parser run inside ``geomlab bench``), ``geomlab`` still prints it as one ``error:`` line with
    exit status 2."""


class Parser(argparse.ArgumentParser):
    """The parser of ``geomlab``, its subcommands (argparse makes the sub-parsers of the same class) and each
    ``geomlab bench NAME``. A value refused by an option's ``type=`` function (``argparse.ArgumentTypeError``,
    e.g. :func:`geomlab.commands.number`) raises :class:`OptionValueError` for
    :func:`geomlab.commands.cli.main` to print as one line with exit status 2; other usage errors (unknown
    options, a missing argument, a value argparse's own ``type=int`` refuses) print two lines, a short usage
    that points to ``--help`` (:meth:`short_usage`) and argparse's error, and exit 2. ``--help`` is argparse's,
    unchanged. ``prog`` starts with ``geomlab`` (``geomlab bench views``)."""

    def short_usage(self) -> str:
        """One line in place of argparse's usage block: ``usage: geomlab trace [options] checkpoint (all
        options: `geomlab trace --help`)``, the positional arguments by name (``COMMAND ...`` at the top level)."""
        words = []
        for action in self._actions:
            if action.option_strings or action.help == argparse.SUPPRESS:
                continue
            name = action.metavar if isinstance(action.metavar, str) else action.dest
            words.append({"?": f"[{name}]", "*": f"[{name} ...]", argparse.REMAINDER: f"[{name} ...]",
                          "+": f"{name} [{name} ...]", argparse.PARSER: f"{name} ..."}.get(action.nargs, name))
        command = program() + self.prog.removeprefix("geomlab")
        return f"usage: {' '.join([self.prog, '[options]', *words])} (all options: `{command} --help`)"

    def error(self, message: str):
        # argparse raises its ArgumentError while handling the type function's ArgumentTypeError
        if isinstance(getattr(sys.exc_info()[1], "__context__", None), argparse.ArgumentTypeError):
            raise OptionValueError(message.removeprefix("argument "))
        self._print_message(self.short_usage() + "\n", sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def finite_float(text: str, name: str, expected: str = "", error: type[ValueError] = ValueError) -> float:
    """``text`` read as a finite float (what ``float`` reads: ``1e-3``, ``' 2 '``, ``1_000``).

    Args:
        text: the option's text.
        name: what the text is, to start the message: ``--size``, ``--search 'lr=log:a:1':``.
        expected: what would be right (the range, the form), after ``; `` in the message; nothing when empty.
        error: the ``ValueError`` class raised.

    Raises:
        error: one line, ``--size 'abc' is not a number; steer takes -5..5 (...)`` or ``... is not a finite
            number; ...`` (infinity, NaN), the text cut to 40 characters. Design choice: the caller checks its
            own range once the value is a number.
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not math.isfinite(value):
        what = "a number" if value is None else "a finite number"
        raise error(f"{name} {str(text)[:40]!r} is not {what}" + (f"; {expected}" if expected else ""))
    return value
