"""Files written whole or not at all, and a refused write as one ``OSError`` naming the file:
:func:`write_atomic` (a temporary file beside the target, renamed over it when complete) and
:func:`write_error` (whatever a library raised when the system refused a write, as an ``OSError`` with the
file name, so the command line and the app say ``path: reason`` in one line)."""

from __future__ import annotations

import errno
import os
import re
import secrets
from pathlib import Path


def write_error(exc: BaseException, path: str | os.PathLike) -> OSError:
    """The ``OSError`` to raise for ``exc``, raised while writing ``path``: ``exc`` itself when it is an
    ``OSError`` naming a file; else an ``OSError`` for ``path`` with the system's error number when the error
    has one (``.errno``, or the text: safetensors says ``"... No space left on device (os error 28)"``), or
    ``EIO`` and the error's first line. Design choice: a write the system refuses is an ``OSError`` whatever
    library did the writing (the ``OSError`` constructor picks the subclass, e.g. ``FileNotFoundError``)."""
    if isinstance(exc, OSError) and exc.filename:
        return exc
    num = getattr(exc, "errno", None)
    if not isinstance(num, int):
        m = re.search(r"os error (\d+)", str(exc))
        num = int(m.group(1)) if m else None
    if num is not None:
        return OSError(num, os.strerror(num), str(path))
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
    return OSError(errno.EIO, f"the write failed ({first})", str(path))


def write_atomic(path: str | os.PathLike, data: bytes | str, what: str = "file") -> Path:
    """Write ``data`` (``str``: UTF-8) to ``path`` through a temporary file in its folder, renamed over it when
    complete: readers see the old file or the new one, never half of one, and a failed write leaves the old
    file. The folder must exist. Returns ``path``.

    Raises ``OSError`` (:func:`write_error`: ``.filename`` is ``path``; the text says the ``what`` was not
    written and the old file is kept) when the system refuses (disk full, read-only folder...)."""
    path, tmp = Path(path), None
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        tmp = path.with_name(f".{path.name[:200]}.{secrets.token_hex(6)}.part")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)  # umask applies
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        err = write_error(exc, path)
        raise OSError(err.errno, f"{err.strerror or err}; the {what} was not written (a file already there is "
                                 "kept)", str(path)) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path
