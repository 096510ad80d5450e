"""Who may change what: the session that created a user checkpoint (a validated upload, a Train live save)
may delete or save over it; other sessions may not, unless the server shares everything
(``GEOMLAB_SHARED_RUNS=1``). Owners are remembered by this server process only. Bundled checkpoints are never
changed. Source: design choice."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

#: Environment variable: ``1`` lets every session change (delete, stop, resume, save over) what any session
#: created. Read at every check, so a test or a server start sets it.
SHARED_ENV = "GEOMLAB_SHARED_RUNS"
_OWNERS: dict[str, str] = {}
_OWNERS_LOCK = threading.Lock()


def shared_mode() -> bool:
    """Whether the server shares everything between sessions (``GEOMLAB_SHARED_RUNS=1``; default off)."""
    return os.environ.get(SHARED_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _owner_key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(paths_json(path)))


def paths_json(path: Path) -> Path:
    """The ``.json`` path of a checkpoint given either file or its stem."""
    p = Path(path)
    return p if p.suffix == ".json" else p.with_name(p.name.removesuffix(".safetensors") + ".json")


def record_owner(path: Path, owner: str | None) -> None:
    """Remember that session ``owner`` created the checkpoint at ``path`` (this server process only)."""
    if owner:
        with _OWNERS_LOCK:
            _OWNERS[_owner_key(path)] = owner


def owner_of(path: Path) -> str | None:
    """The session that created the checkpoint at ``path`` in this server process, or None."""
    with _OWNERS_LOCK:
        return _OWNERS.get(_owner_key(path))


def may_change(entry: Any, owner: str | None) -> bool:
    """Whether session ``owner`` may delete or save over a user checkpoint: one this session created (a
    validated upload, a Train live save; remembered by this server process), or any user checkpoint when
    the server shares everything (:func:`shared_mode`). Bundled checkpoints never. (Train live's Save still
    never replaces a file no session created, shared or not: see :meth:`geomlab.live.runner.LiveRun.save`.)"""
    if isinstance(entry, (str, os.PathLike)):
        path = Path(entry)
    else:  # a catalog entry
        if entry.source != "user":
            return False
        path = entry.path
    if shared_mode():
        return True
    made_by = owner_of(path)
    return made_by is not None and owner is not None and made_by == owner


def forget_owner(path: Path) -> None:
    """Forget who created the checkpoint at ``path`` (it was deleted)."""
    with _OWNERS_LOCK:
        _OWNERS.pop(_owner_key(path), None)
