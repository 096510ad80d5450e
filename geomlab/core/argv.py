"""Reading the command line, for every layer that reads it: the argparse parser of ``geomlab``, its subcommands
and its benchmarks (:class:`Parser`: a usage error is a short usage line and the error, an unknown option
with a hint, :func:`did_you_mean`), how the user started geomlab (:func:`program`), the range-checked
``type=`` of a numeric option (:func:`number`, :func:`number_list`, :func:`threads`), of a comma list of names
(:func:`name_list`) and of a ``--device`` (:func:`device_option`), and a finite number read from an option's
text (:func:`finite_float`).

It sits at the foundation so that ``geomlab bench NAME`` (whose modules the commands import) and the training
layer's ``--search`` reader use the same pieces as the commands. Source: design choice.
"""

from __future__ import annotations

import argparse
import math
import os
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
    e.g. :func:`number`) raises :class:`OptionValueError` for :func:`geomlab.commands.cli.main` to print as one
    line with exit status 2; other usage errors (unknown options, with :func:`did_you_mean`'s hint; a missing
    argument; a value argparse's own ``type=int`` refuses) print two lines, a short usage that points to
    ``--help`` (:meth:`short_usage`) and argparse's error, and exit 2. ``--help`` is argparse's, unchanged.
    ``prog`` starts with ``geomlab`` (``geomlab bench views``). An option is only read under its whole name
    (``allow_abbrev=False``, also for the sub-parsers: ``--dim`` is not taken for ``--dims``, it is an unknown
    option with the hint; design choice: an abbreviation that a later option makes ambiguous would break a
    script that used it)."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def parse_args(self, args=None, namespace=None):
        """argparse's ``parse_args``, with :func:`did_you_mean`'s hint after ``unrecognized arguments: ...``."""
        args, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(extra, self)}")
        return args

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
        import re

        wrong = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if wrong:  # a misspelt command or choice: argparse lists the choices; name the nearest
            message += near_miss(wrong[1], re.findall(r"'?([^',\s]+)'?", wrong[2]))
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


#: Options people reach for under another name (the field's or another tool's word) -> geomlab's.
SYNONYMS = {"--kind": "--model", "--model-kind": "--model", "--corpus": "--data", "--dataset": "--data",
            "--iters": "--steps", "--max-steps": "--steps", "--learning-rate": "--lr", "--wd": "--weight-decay",
            "--pos": "--cursor"}


def did_you_mean(extra: list[str], parser: argparse.ArgumentParser) -> str:
    """`` (did you mean --model?)`` for the first unknown option in ``extra`` that is a known synonym
    (:data:`SYNONYMS`) or close to one of ``parser``'s options (:func:`near_miss`), empty otherwise."""
    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for tok in extra:
        name = tok.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        if SYNONYMS.get(name) in known:
            return f" (did you mean {SYNONYMS[name]}?)"
        hint = near_miss(name, known, cutoff=0.75)
        if hint:
            return hint
    return ""


def near_miss(text: str, names, cutoff: float = 0.6) -> str:
    """`` (did you mean cuda?)`` when one of ``names`` is close to ``text`` (``difflib.get_close_matches`` at
    ``cutoff``, the closest), empty otherwise: the hint of an unknown option, device, model kind or name."""
    import difflib

    near = difflib.get_close_matches(str(text), list(names), n=1, cutoff=cutoff)
    return f" (did you mean {near[0]}?)" if near else ""


def _shown(v: float) -> str:
    """A bound for a message: ``1,000``, ``0.5``, ``1e+06``; powers of two from ``2**31`` as ``2**63 - 1``."""
    if isinstance(v, int):
        for k in range(31, 128):
            if v in (2**k, 2**k - 1):
                return f"2**{k}" + (" - 1" if v == 2**k - 1 else "")
        return f"{v:,}"
    return f"{v:,g}"


def _range(kind: type, low: float, high: float | None, above: bool, note: str) -> str:
    """``an integer from 1 to 64``, ``a finite number above 0 and at most 1,000``, ``an integer >= 0``, then
    ``note``: what :func:`number` and :func:`number_list` say a value must be."""
    what = "an integer" if kind is int else "a finite number"
    lo = _shown(low)
    if high is None:
        return f"{what} {'>' if above else '>='} {lo}" + note
    return (f"{what} above {lo} and at most {_shown(high)}" if above else f"{what} from {lo} to {_shown(high)}") \
        + note


def _within(kind: type, value: float, low: float, high: float | None, above: bool) -> bool:
    """Whether ``value`` (a ``kind``) is in the range: finite for a float, ``>= low`` (``> low`` with ``above``),
    ``<= high`` unless ``high`` is None."""
    return not ((kind is float and not math.isfinite(value)) or value < low or (above and value == low)
                or (high is not None and value > high))


def number(kind: type, low: float, high: float | None = None, *, above: bool = False, note: str = ""):
    """An argparse ``type=`` for a number of ``kind`` (``int`` or ``float``) in ``[low, high]`` (``(low, high]``
    with ``above``; no upper bound when ``high`` is None); a float must also be finite. Anything else raises
    ``argparse.ArgumentTypeError``, which :class:`Parser` turns into one line naming the option
    (``error: --seed: must be an integer from 0 to 2**63 - 1, got ...``) with exit status 2, before the command
    runs. ``note`` follows the range in the message (what the bound is). Design choice: the range is checked
    where the option is read, so a typo costs nothing (no model built, no file read) and no value reaches torch
    or the OS out of range."""
    shown = _range(kind, low, high, above, note)

    def parse(text: str):
        try:
            value = kind(text)
        except (TypeError, ValueError):  # also int() of more than 4,300 digits
            raise argparse.ArgumentTypeError(f"must be {shown}, got {str(text)[:40]!r}") from None
        if not _within(kind, value, low, high, above):
            raise argparse.ArgumentTypeError(f"must be {shown}, got {str(text)[:40]}")
        return value

    parse.__name__ = kind.__name__
    return parse


def number_list(kind: type, low: float, high: float | None = None, *, above: bool = False, note: str = ""):
    """An argparse ``type=`` for a comma-separated list of numbers (``--dims 4,8,16``), each read and checked as
    :func:`number` reads one; spaces and empty items are skipped. Returns a ``list``. No item, or a bad one,
    raises ``argparse.ArgumentTypeError`` naming the item (``--dims: each item must be an integer from 1 to
    1,024; got 'x' in '4,x'``), one line through :class:`Parser`. Design choice."""
    shown = _range(kind, low, high, above, note)

    def parse(text: str):
        items = [s.strip() for s in str(text).split(",") if s.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list, each item {shown}; got "
                                             f"{str(text)[:40]!r}")
        values = []
        for item in items:
            try:
                value = kind(item)
            except (TypeError, ValueError):
                value = None
            if value is None or not _within(kind, value, low, high, above):
                where = f" in {str(text)[:60]!r}" if len(items) > 1 else ""
                raise argparse.ArgumentTypeError(f"each item must be {shown}; got {item[:40]!r}{where}")
            values.append(value)
        return values

    parse.__name__ = f"{kind.__name__} list"
    return parse


def name_list(names, what: str = "name"):
    """An argparse ``type=`` for a comma-separated list of ``names`` (``--groups O,U``); spaces and empty items
    are skipped. Returns a ``list`` of ``str``. An empty list or an item not in ``names`` raises
    ``argparse.ArgumentTypeError`` naming the item and the choices, with :func:`near_miss`'s hint (``--groups:
    unknown group 'Q' in 'O,Q'; choose from O, SO, U, SU, T, O-block``). Design choice."""
    names = tuple(names)
    choices = ", ".join(names)

    def parse(text: str):
        items = [s.strip() for s in str(text).split(",") if s.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {what}s from {choices}, got "
                                             f"{str(text)[:40]!r}")
        for item in items:
            if item not in names:
                where = f" in {str(text)[:60]!r}" if len(items) > 1 else ""
                raise argparse.ArgumentTypeError(f"unknown {what} {item[:40]!r}{where}{near_miss(item, names)}; "
                                                 f"choose from {choices}")
        return items

    parse.__name__ = f"{what} list"
    return parse


#: The devices every ``--device`` names (:func:`device_option`): ``cuda`` also as ``cuda:N``.
DEVICES = ("auto", "cpu", "cuda", "mps")
#: What every ``--device`` takes, in words (its ``--help``).
DEVICE_HELP = "auto (CUDA, then MPS, then CPU), cpu, cuda[:N], mps"


def device_option(text: str) -> str:
    """The argparse ``type=`` of every ``--device`` (the commands' and the benchmarks'): ``auto`` (CUDA, then
    MPS, then CPU), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``, returned as given. Anything else raises
    ``argparse.ArgumentTypeError``, one line through :class:`Parser` naming the choices, with a hint for a
    near miss (``--device: unknown device 'cdua' (did you mean cuda?); choose from auto, cpu, cuda, cuda:N,
    mps``), before any work. Whether this machine has the device is checked where it is used
    (:func:`geomlab.training.trainer.resolve_device`: one line, ``device 'cuda' requested but CUDA is not
    available``). Design choice: a typo is named when the option is read, not after the data and model are
    built."""
    import re

    if text in DEVICES or re.fullmatch(r"cuda:[0-9]{1,4}", text):
        return text
    raise argparse.ArgumentTypeError(f"unknown device {str(text)[:40]!r}{near_miss(str(text).lower(), DEVICES)}; "
                                     "choose from auto, cpu, cuda, cuda:N, mps")


def max_threads() -> int:
    """Most torch CPU threads ``--threads`` accepts: 4 per core of this machine (design choice: torch
    crashed with a segmentation fault at 100,000; more threads than cores only adds waiting)."""
    return 4 * (os.cpu_count() or 1)


def threads(text: str) -> int:
    """The argparse ``type=`` of every ``--threads``: an integer from 1 to :func:`max_threads`, as
    :func:`number` checks it (``--threads: must be an integer from 1 to 8 (4 per core of this machine), got
    0``)."""
    return number(int, 1, max_threads(), note=" (4 per core of this machine)")(text)
