"""Where the output files named on the command line go, under one rule for every command and benchmark: each
place is checked before any work starts (:func:`check_outputs`: nothing runs for minutes only to fail at the
write), and a missing folder is made and named on standard error once the output is written
(:func:`make_folders`), never silently. Only the command-line layers (``geomlab.commands``, ``geomlab.bench``)
use it: the layers below make folders without a word, and the command that called them says so. Source: design
choice.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path


def check_outputs(outputs: list[tuple[str, str | os.PathLike, bool]]) -> None:
    """Check that every output location can be written, before anything is: ``(option, path, is_folder)``
    triples (``path`` a file, or a folder when ``is_folder``). Missing folders are fine (the commands and
    benchmarks make them when they write, with a note: :func:`make_folders`); a file where a folder is needed
    (or the reverse), a FIFO or device where a file is meant, or a place the machine refuses (read-only,
    ``/proc``, permissions; probed with a temporary file that is removed at once), raises ``ValueError`` naming
    the option and the path; an empty value (``--json ''``, which a path would read as ``.``) raises
    ``ValueError`` saying so. Design choice: bad input loses nothing and writes nothing."""
    for option, path, is_folder in outputs:
        if os.fspath(path) == "":
            raise ValueError(f"{option}: the value is empty; give a {'folder' if is_folder else 'file'} name")
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
def make_folders(option: str, path: str | os.PathLike, is_folder: bool = False, make: bool = True):
    """``with make_folders(option, path): write it``: make the folder output ``path`` of ``option`` is written
    in (``path`` itself when ``is_folder``, else its parent), with its missing parents, for the write in the
    body: the one rule of every output option of the commands and benchmarks (``trace``, ``whatif --json``,
    ``report``, ``handout``, ``train --out``, ``sweep``, ``geomlab bench NAME --json``). The folders are made,
    never silently: when the folder ``path``'s name sits in did not exist, one line on standard error names it
    once the body has written the output, ``note: made the folder out/sub/ for --json (it did not exist)``, so
    a mistyped folder shows at once (a write that fails says why instead, in its own one line). A folder the
    option names itself (``--html DIR``) is made without a note: the command's own line names it. Use it after
    :func:`check_outputs` has checked the place before anything ran. ``make=False``: the body makes the
    folders itself (a layer below that makes them without a word, such as a training run where it checks its
    folder, only once the request is known to be good); the note is the same. Raises ``OSError`` as ``mkdir``
    does. Design choice: a new place works (the commands' defaults under ``runs/`` need it), and the note tells
    what a refusal would have told."""
    path = Path(path)
    missing = not path.parent.exists()
    if make:
        (path if is_folder else path.parent).mkdir(parents=True, exist_ok=True)
    yield
    if missing and path.parent.is_dir():
        print(f"note: made the folder {path.parent}{os.sep} for {option} (it did not exist)", file=sys.stderr)
