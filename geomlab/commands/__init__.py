"""The subcommands of ``geomlab`` (one module each; :mod:`geomlab.commands.cli` wires them), and what several of them
share: the checkpoint argument (:func:`add_checkpoint_argument`, :func:`load_checkpoint`), the ``--threads``
option (:func:`set_threads`), the check of output locations before anything is written
(:func:`check_outputs`), the folders made for them (:func:`make_folders`) and the reading of a text as the app
reads it (:func:`text_tokens`)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import tempfile
from pathlib import Path

#: --help of a checkpoint argument (eval, sample, trace).
CHECKPOINT_HELP = ("checkpoint: a folder NAME/ (or a file in it), a flat pair NAME, NAME.json or NAME.safetensors, "
                   "or a bundled checkpoint's name (NAME or bundled/NAME, as in the app; `geomlab zoo --list`); a "
                   "local file or folder of that name wins over a bundled one")


def _shown(v: float) -> str:
    """A bound for a message: ``1,000``, ``0.5``, ``1e+06``; powers of two from ``2**31`` as ``2**63 - 1``."""
    if isinstance(v, int):
        for k in range(31, 128):
            if v in (2**k, 2**k - 1):
                return f"2**{k}" + (" - 1" if v == 2**k - 1 else "")
        return f"{v:,}"
    return f"{v:,g}"


def number(kind: type, low: float, high: float | None = None, *, above: bool = False, note: str = ""):
    """An argparse ``type=`` for a number of ``kind`` (``int`` or ``float``) in ``[low, high]`` (``(low, high]``
    with ``above``; no upper bound when ``high`` is None); a float must also be finite. Anything else raises
    ``argparse.ArgumentTypeError``, which :func:`geomlab.commands.cli.main` prints as one line naming the option
    (``error: --seed: must be an integer from 0 to 2**63 - 1, got ...``) with exit status 2, before the command
    runs. ``note`` follows the range in the message (what the bound is). Design choice: the range is checked
    where the option is read, so a typo costs nothing (no model built, no file read) and no value reaches torch
    or the OS out of range."""
    what = "an integer" if kind is int else "a finite number"
    lo = _shown(low)
    if high is None:
        shown = f"{what} {'>' if above else '>='} {lo}" + note
    else:
        shown = (f"{what} above {lo} and at most {_shown(high)}" if above else f"{what} from {lo} to {_shown(high)}") \
            + note

    def parse(text: str):
        try:
            value = kind(text)
        except (TypeError, ValueError):  # also int() of more than 4,300 digits
            raise argparse.ArgumentTypeError(f"must be {shown}, got {str(text)[:40]!r}") from None
        if ((kind is float and not math.isfinite(value)) or value < low or (above and value == low)
                or (high is not None and value > high)):
            raise argparse.ArgumentTypeError(f"must be {shown}, got {str(text)[:40]}")
        return value

    parse.__name__ = kind.__name__
    return parse


def position(text: str) -> int:
    """The argparse ``type=`` of a token position (trace's ``--cursor``, whatif's ``--pos`` and ``--target``):
    an integer from 0, the first token. A negative number or anything else raises
    ``argparse.ArgumentTypeError`` (``must be a token position, counted from 0 ...``), which
    :func:`geomlab.commands.cli.main` prints as one line naming the option. There is no upper bound here: the
    last position depends on the text, so the command checks it once the text is read and gives the real range
    (``positions 0 to T - 1``)."""
    try:
        value = int(text)
    except (TypeError, ValueError):  # also int() of more than 4,300 digits
        value, got = None, repr(str(text)[:40])
    else:
        got = str(text)[:40]
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be a token position, counted from 0 (the first token), got {got}")
    return value


def recipe_option(name: str):
    """The argparse ``type=`` of the option of recipe field ``name``: its range in
    :data:`geomlab.training.config.RANGES` (the one declaration), through :func:`number`."""
    from geomlab.training.config import RANGES

    low, high, above = RANGES[name]
    return number(float if isinstance(low, float) else int, low, high, above=above)


def max_threads() -> int:
    """Most torch CPU threads ``--threads`` accepts: 4 per core of this machine (design choice: torch
    crashed with a segmentation fault at 100,000; more threads than cores only adds waiting)."""
    return 4 * (os.cpu_count() or 1)


def add_threads_argument(p: argparse.ArgumentParser, what: str = "") -> None:
    """The ``--threads N`` option every computing command shares (apply it with :func:`set_threads`); 1 to
    :func:`max_threads`, checked at parse time."""
    p.add_argument("--threads", type=number(int, 1, max_threads(), note=" (4 per core of this machine)"),
                   default=None, metavar="N",
                   help=f"torch CPU threads{what}, 1 to {max_threads()} (default: torch's choice, one per core, "
                   "lowered to the cores the machine's load leaves free, at least 1)")


def free_cores(threads: int) -> int:
    """``threads`` lowered to the cores other processes leave free: the CPU count minus the 1-minute load
    average (rounded), at least 1; ``threads`` unchanged where the load cannot be read. Design choice: on a
    2-core machine with two other busy processes, torch's two threads made ``geomlab eval`` of the bundled
    LSTM take 3-14 s against 2.3-2.9 s with one (each thread waits at every operation for the other, which
    the scheduler has put aside)."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # not every platform has a load average
        return threads
    return max(1, min(threads, (os.cpu_count() or threads) - int(round(load))))


def set_threads(n: int | None) -> None:
    """Apply a ``--threads`` option: ``torch.set_num_threads(n)``; when it was not given (``None``), torch's
    choice lowered by :func:`free_cores`. Raises ``ValueError`` (one line) for ``n`` outside 1 to
    :func:`max_threads`, before torch refuses it (or crashes: 100,000 threads was a segmentation fault)."""
    if n is None:
        import torch

        torch.set_num_threads(free_cores(torch.get_num_threads()))
        return
    if not 1 <= n <= max_threads():
        raise ValueError(f"--threads must be 1 to {max_threads()} threads, got {n} (leave it out for torch's "
                         "choice)")
    import torch

    torch.set_num_threads(int(n))


def add_checkpoint_argument(p: argparse.ArgumentParser) -> None:
    """The positional ``checkpoint`` argument of eval, sample and trace."""
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)


def add_text_arguments(p: argparse.ArgumentParser) -> None:
    """The required ``--text`` / ``--text-file`` pair of trace and whatif (one of them)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the text (at most 2,048 characters); for a word-problem checkpoint, group "
                     "elements separated by spaces, e.g. '01234 10234' for S5 permutations")
    src.add_argument("--text-file", help="read the text from this UTF-8 file instead")


def text_tokens(vocab, text: str, option: str = ""):
    """``(T,)`` ids of ``text`` read by ``vocab`` under the app's rule (its view pages): the checks of
    :func:`geomlab.data.vocab.check_text` (empty, over :data:`geomlab.trace.MAX_TEXT_CHARS`, no tokens, and
    for a vocabulary without an unknown token, a word problem's, symbols it lacks: refused), then
    :func:`geomlab.trace.encode_text`, the app's encoding, so the numbers equal the app's. Characters a
    vocabulary with an unknown token lacks read as that token, as in the app, and one ``note:`` line on
    standard error names them with the app's words. A refusal is a ``ValueError`` of one line, starting with
    ``option: `` when ``option`` is given (a newline token in the symbols listed shown as ``↵``)."""
    import sys

    from geomlab.data.vocab import check_text, unknown_note, unknown_tokens
    from geomlab.trace import MAX_TEXT_CHARS, encode_text, visible

    try:
        check_text(vocab, text, MAX_TEXT_CHARS)
    except ValueError as exc:
        message = str(exc).replace("\n", visible("\n"))
        raise ValueError(f"{option}: {message}" if option else message) from None
    unknown = unknown_tokens(vocab, text)
    if unknown:
        print(f"note: {unknown_note(unknown, vocab.unk)}", file=sys.stderr)
    return encode_text(vocab, text).reshape(-1)


def load_checkpoint(arg: str, device="cpu"):
    """:func:`geomlab.checkpoints.io.load` of what :func:`geomlab.checkpoints.io.find` makes of a command-line
    argument (a local path, else a bundled name). Raises ``CheckpointError`` (one line, also for a file
    nested too deeply to read)."""
    from geomlab.checkpoints import io as ckpt

    try:
        return ckpt.load(ckpt.find(arg), device=device)
    except RecursionError as exc:  # a file nested too deeply for the JSON reader: one line naming the checkpoint
        from geomlab.checkpoints.catalog import unreadable_reason

        raise ckpt.CheckpointError(unreadable_reason(exc, str(arg))) from None


def check_outputs(outputs: list[tuple[str, str | os.PathLike, bool]]) -> None:
    """Check that every output location can be written, before anything is: ``(option, path, is_folder)``
    triples (``path`` a file, or a folder when ``is_folder``). Missing folders are fine (the commands make them
    when they write, with a note: :func:`make_folders`); a file where a folder is needed (or the reverse), a
    FIFO or device where a file is meant, or a place the machine refuses (read-only, ``/proc``, permissions;
    probed with a temporary file that is removed at once), raises ``ValueError`` naming the option and the
    path. Design choice: bad input loses nothing and writes nothing."""
    for option, path, is_folder in outputs:
        path = Path(path)
        if path.exists() and path.is_dir() != is_folder:
            raise ValueError(f"{option} {path}: " + ("a file is there, not a folder" if is_folder else
                                                     "that is a folder; give a file name"))
        if path.exists() and not is_folder and not path.is_file():  # replaced by a rename, or blocking a write
            raise ValueError(f"{option} {path}: not a regular file (a FIFO or a device); give a file name")
        folder = path if is_folder else path.parent
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise ValueError(f"{option} {path}: {existing} is a file, so no folder can be made there")
        try:
            with tempfile.TemporaryFile(dir=existing):
                pass
        except OSError as exc:
            raise ValueError(f"{option} {path}: cannot write in {existing} ({exc.strerror or exc})") from None


@contextlib.contextmanager
def make_folders(option: str, path: str | os.PathLike, is_folder: bool = False):
    """``with make_folders(option, path): write it``: make the folder output ``path`` of ``option`` is written
    in (``path`` itself when ``is_folder``, else its parent), with its missing parents, for the write in the
    body: the one rule of the commands' output options (trace, whatif, report, handout). The folders are made,
    never silently: when the folder ``path``'s name sits in did not exist, one line on standard error names it
    once the body has written the output, ``note: made the folder out/sub/ for --json (it did not exist)``, so
    a mistyped folder shows at once (a write that fails says why instead, in its own one line). A folder the
    option names itself (``--html DIR``) is made without a note: the command's own line names it. Use it after
    :func:`check_outputs` has checked the place before anything ran. Raises ``OSError`` as ``mkdir`` does.
    Design choice: a new place works (the commands' defaults under ``runs/`` need it), and the note tells what
    a refusal would have told."""
    import sys

    path = Path(path)
    missing = not path.parent.exists()
    (path if is_folder else path.parent).mkdir(parents=True, exist_ok=True)
    yield
    if missing:
        print(f"note: made the folder {path.parent}{os.sep} for {option} (it did not exist)", file=sys.stderr)
