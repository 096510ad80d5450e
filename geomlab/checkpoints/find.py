"""The checkpoint a command-line argument names (:func:`find`): a local folder or flat pair, else a bundled
checkpoint by name, with one readable line saying what was expected when neither is there."""

from __future__ import annotations

import os
from pathlib import Path

from geomlab.checkpoints.layout import CheckpointError, exists, paths
from geomlab.core.locate import bundled_checkpoint

#: What a command-line checkpoint argument may be (for --help and error messages).
EXPECTED = ("a checkpoint folder NAME/ (config.json, model.safetensors, geomlab.json, ...), a pair NAME.json + "
            "NAME.safetensors, or a bundled checkpoint's name (NAME or bundled/NAME; `geomlab zoo --list`)")


def find(arg: str | os.PathLike, bundled: bool = True) -> Path:
    """The checkpoint a command-line argument names, for :func:`load`.

    A local path wins: a folder ``NAME/`` (or a file in it), a flat pair ``NAME``, ``NAME.json`` or
    ``NAME.safetensors`` any of whose files exists is returned as given (:func:`load` then reports what is
    wrong with it). Otherwise ``NAME`` or ``bundled/NAME`` (the app's spelling; a ``.json`` suffix is allowed)
    names a bundled checkpoint (:func:`geomlab.core.locate.bundled_checkpoint`) when ``bundled`` is true (else it
    is refused by name: ``train --resume`` takes local checkpoints only).

    Raises :class:`CheckpointError` (one line, saying what was expected) for a path that exists but is no
    checkpoint (a text file; a ``.zip``: the command line wants the unpacked folder, the app's upload takes
    zips), names nothing, or is empty. Design choice: the command line and the app spell bundled checkpoints alike.
    """
    if not str(arg).strip():
        raise CheckpointError(f"no checkpoint named (an empty argument): expected {EXPECTED}")
    p = Path(arg)
    if exists(p):
        return p
    if p.suffix.lower() == ".zip":
        what = f"{p} is a zip file" if os.path.lexists(p) else f"no file {p}; and a zip would not do"
        raise CheckpointError(f"{what}: the command line takes the unpacked checkpoint (unzip it and pass the "
                              "folder or the NAME.json file); the app's upload takes zips")
    if os.path.lexists(p):
        raise CheckpointError(f"{p} is not a checkpoint: expected {EXPECTED}")
    by_name = p.parent in (Path("."), Path("bundled")) and bool(p.name)
    if by_name:
        name = p.name[: -len(p.suffix)] if p.suffix in (".json", ".safetensors") else p.name
        found = bundled_checkpoint(p, bare=True)
        if found is not None and bundled:
            return found
        if found is not None:
            raise CheckpointError(f"{name} is a bundled checkpoint, which is not accepted here (give a local "
                                  "checkpoint folder NAME/ or pair NAME.json + NAME.safetensors)")
    where = "this folder" if str(p.parent) == "." else f"{p.parent}/"
    near = _near_bundled(p.name) if by_name and bundled else ""
    raise CheckpointError(f"no checkpoint {p}: no folder {p.name}/ and no {paths(p)[0].name} in {where}"
                          f"{', and no bundled checkpoint of that name' if by_name and bundled else ''}{near}; "
                          "expected "
                          + (EXPECTED if bundled else "a checkpoint folder NAME/ or a pair NAME.json + "
                             "NAME.safetensors"))


def _near_bundled(name: str) -> str:
    """`` (did you mean A or B?)`` naming the bundled checkpoints that start with ``name`` or are spelled
    close to it (:func:`difflib.get_close_matches`), at most three; ``""`` when none. Design choice."""
    import difflib

    from geomlab.core.locate import bundled_names

    names = bundled_names()
    near = [n for n in names if n.startswith(name)][:3] or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(near)}?)" if near else ""
