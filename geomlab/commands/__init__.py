"""The subcommands of ``geomlab`` (one module each; :mod:`geomlab.commands.cli` wires them), and what several of them
share: the checkpoint argument (:func:`add_checkpoint_argument`, :func:`load_checkpoint`), the ``--threads``
option (:func:`set_threads`) and the check of output locations before anything is written
(:func:`check_outputs`)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

#: --help of a checkpoint argument (eval, sample, trace).
CHECKPOINT_HELP = ("checkpoint: a folder NAME/ (or a file in it), a flat pair NAME, NAME.json or NAME.safetensors, "
                   "or a bundled checkpoint's name (NAME or bundled/NAME, as in the app; `geomlab zoo --list`); a "
                   "local file or folder of that name wins over a bundled one")


def program() -> str:
    """How the user started geomlab, for hints to run it again: ``geomlab`` when ``sys.argv[0]`` is the
    installed script (``geomlab``, ``geomlab.exe``), else ``python -m geomlab`` (``-m`` runs ``__main__.py``)."""
    import sys
    from pathlib import Path

    return "geomlab" if Path(sys.argv[0]).name in ("geomlab", "geomlab.exe") else "python -m geomlab"


def add_threads_argument(p: argparse.ArgumentParser, what: str = "") -> None:
    """The ``--threads N`` option every computing command shares (apply it with :func:`set_threads`)."""
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help=f"torch CPU threads{what} (default: torch's choice, one per core, lowered to the cores "
                   "the machine's load leaves free, at least 1)")


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
    choice lowered by :func:`free_cores`. Raises ``ValueError`` (one line) for ``n < 1``, before torch
    refuses it."""
    if n is None:
        import torch

        torch.set_num_threads(free_cores(torch.get_num_threads()))
        return
    if n < 1:
        raise ValueError(f"--threads must be a positive number of threads, got {n} (leave it out for torch's "
                         "choice)")
    import torch

    torch.set_num_threads(int(n))


def add_checkpoint_argument(p: argparse.ArgumentParser) -> None:
    """The positional ``checkpoint`` argument of eval, sample and trace."""
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)


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
    triples (``path`` a file, or a folder when ``is_folder``). Missing parent folders are fine (the commands
    create them); a file where a folder is needed (or the reverse), or a place the machine refuses (read-only,
    ``/proc``, permissions; probed with a temporary file that is removed at once), raises ``ValueError``
    naming the option and the path. Design choice: bad input loses nothing and writes nothing."""
    for option, path, is_folder in outputs:
        path = Path(path)
        if path.exists() and path.is_dir() != is_folder:
            raise ValueError(f"{option} {path}: " + ("a file is there, not a folder" if is_folder else
                                                     "that is a folder; give a file name"))
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
