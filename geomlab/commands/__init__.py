"""The subcommands of ``geomlab`` (one module each; :mod:`geomlab.commands.cli` wires them), and what several of them
share: the checkpoint argument (:func:`add_checkpoint_argument`, :func:`load_checkpoint`), the ``--threads``
option (:func:`add_threads_argument`, :func:`set_threads`), a token position (:func:`position`) and the reading
of a text as the app reads it (:func:`text_tokens`). What the benchmarks share with them is defined below both
and imported here: the range-checked option types (:func:`geomlab.core.argv.number`, ``threads``,
:func:`geomlab.training.config.recipe_option`) and the rule for output places (:func:`check_outputs` before
anything runs, :func:`make_folders` when writing; :mod:`geomlab.core.outputs`)."""

from __future__ import annotations

import argparse
import os

# the range-checked option types and the rule for output places live below bench and commands, which share
# them; imported here for the commands
from geomlab.core.argv import DEVICE_HELP, device_option, max_threads, number, threads  # noqa: F401
from geomlab.core.outputs import check_outputs, make_folders  # noqa: F401
from geomlab.training.config import recipe_option  # noqa: F401

#: --help of a checkpoint argument (eval, sample, trace).
CHECKPOINT_HELP = ("checkpoint: a folder NAME/ (or a file in it), a flat pair NAME, NAME.json or NAME.safetensors, "
                   "or a bundled checkpoint's name (NAME or bundled/NAME, as in the app; `geomlab zoo --list`); a "
                   "local file or folder of that name wins over a bundled one")


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


def add_threads_argument(p: argparse.ArgumentParser, what: str = "") -> None:
    """The ``--threads N`` option every computing command shares (apply it with :func:`set_threads`); 1 to
    :func:`max_threads`, checked at parse time."""
    p.add_argument("--threads", type=threads, default=None, metavar="N",
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
    ``option: `` when ``option`` is given."""
    import sys

    from geomlab.data.vocab import check_text, unknown_note, unknown_tokens
    from geomlab.trace import MAX_TEXT_CHARS, encode_text

    try:
        check_text(vocab, text, MAX_TEXT_CHARS)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}" if option else str(exc)) from None
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
