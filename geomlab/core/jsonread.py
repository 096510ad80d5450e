"""The one JSON reader for input: a size limit and a nesting-depth limit checked before the text is parsed.

Every JSON that comes from outside the process (checkpoint descriptions and configs, safetensors headers,
trace metadata, report and sweep files) is parsed by :func:`parse_json` / :func:`read_json`, so a few KB of
deeply nested brackets never reach Python's recursion limit and a huge file is never read whole. The depth is
measured by a vectorised scan of the bracket characters outside strings (no recursion, linear time).
Source: design choice.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

#: Largest JSON text read (bytes; design choice: geomlab's largest JSON files, reports' results, are ~200 KB).
MAX_JSON_BYTES = 16 * 1024 * 1024
#: Bytes handled per step when reading a file or scanning its brackets (bounds the scratch memory).
_CHUNK = 1 << 20
#: Deepest nesting of arrays and objects accepted (design choice: geomlab's own files nest under 10 levels).
MAX_JSON_DEPTH = 128
#: Most arrays, objects and separated values accepted (``[``, ``{`` and ``,`` outside strings; design choice:
#: geomlab's largest JSON files hold tens of thousands; millions of empty containers cost gigabytes to parse).
MAX_JSON_VALUES = 250_000

# A string, or an unterminated one up to the end of the text: possessive and atomic, so no input makes the
# engine retry (an unterminated string of escaped quotes was quadratic with a backtracking pattern).
_STRING = re.compile(rb'"(?>[^"\\]*+(?:\\.[^"\\]*+)*+)(?:"|\\?\Z)', re.DOTALL)


class JSONInputError(ValueError):
    """A JSON input that is too large, nested too deeply, not UTF-8 or not JSON (one line naming it)."""


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{},")


def json_shape(data: bytes) -> tuple[int, int]:
    """``(depth, values)`` of the JSON text ``data``: the deepest nesting of ``[``/``{``, and how many arrays,
    objects and comma-separated values it holds (``[``, ``{`` and ``,`` counted), characters inside strings
    not counted (an unterminated string runs to the end). Linear time, no recursion; scratch memory: the text
    without its strings, and :data:`_CHUNK` brackets at a time."""
    marks = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    values = len(marks)
    brackets = marks.replace(b",", b"")
    values -= brackets.count(b"]") + brackets.count(b"}")
    return _depth(brackets), values


def json_depth(data: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in the JSON text ``data`` (see :func:`json_shape`)."""
    return json_shape(data)[0]


def _depth(brackets: bytes) -> int:
    """The deepest nesting of a text of brackets only."""
    depth = deepest = 0
    for start in range(0, len(brackets), _CHUNK):
        arr = np.frombuffer(brackets, dtype=np.uint8, count=min(_CHUNK, len(brackets) - start), offset=start)
        steps = np.where((arr == ord("[")) | (arr == ord("{")), 1, -1)
        run = np.cumsum(steps) + depth
        deepest, depth = max(deepest, int(run.max())), int(run[-1])
    return deepest


def parse_json(data: bytes | str, what: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``data`` (UTF-8 bytes or text). ``what`` names the input in messages (a file name).

    Raises :class:`JSONInputError` (one line) when ``data`` is longer than ``max_bytes``, nests arrays and
    objects deeper than ``max_depth`` or holds more than :data:`MAX_JSON_VALUES` of them (checked before
    parsing), is not UTF-8, or is not JSON (including a
    number too long for Python's int conversion). ``NaN``/``Infinity`` are accepted as :mod:`json` does."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise JSONInputError(f"{what} is larger than the limit of {max_bytes:,} bytes for a JSON file")
    depth, values = json_shape(raw)
    if depth > max_depth:
        raise JSONInputError(f"{what} nests arrays/objects {depth:,} levels deep; the limit is {max_depth}")
    if values > MAX_JSON_VALUES:
        raise JSONInputError(f"{what} holds {values:,} arrays, objects and values; the limit is {MAX_JSON_VALUES:,}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONInputError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"{what} is not valid JSON (truncated or corrupt?): {exc}") from None
    except (ValueError, RecursionError) as exc:  # an over-long integer literal; depth already bounded
        raise JSONInputError(f"{what} is not valid JSON: {exc}") from None


def read_limited(path: str | os.PathLike, limit: int, follow: bool = True) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (one more than allowed, so a caller can tell
    a file over the limit), opened without blocking (a FIFO or device never hangs) and, with
    ``follow=False``, refusing a final symlink. ``OSError`` otherwise (``errno.EINVAL``: not a regular file)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks, n = [], 0
        with os.fdopen(os.dup(fd), "rb") as f:
            while n <= limit:  # in chunks: read(limit + 1) would allocate the whole limit at once
                chunk = f.read(min(_CHUNK, limit + 1 - n, max(st.st_size + 1 - n, 4096)))
                if not chunk:
                    break
                chunks.append(chunk)
                n += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(source: str | os.PathLike | bytes, what: str | None = None, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH, follow: bool = True) -> Any:
    """The JSON value of a file (a path, read with :func:`read_limited`) or of bytes, within ``max_bytes``
    and ``max_depth`` (:func:`parse_json`). ``what``: the name in messages (default: the file's name).

    Raises :class:`JSONInputError` for a file that is too large, too deep or not JSON; ``OSError`` for one
    that cannot be read (missing, not a regular file, a symlink with ``follow=False``)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return parse_json(bytes(source), what or "JSON input", max_bytes, max_depth)
    return parse_json(read_limited(source, max_bytes, follow=follow), what or Path(source).name, max_bytes,
                      max_depth)
