"""Bounded reading of zip files and the ``.npy`` arrays in an ``.npz``: a memory budget enforced while
inflating.

A zip member is inflated a chunk at a time with a running count, so it never yields more than the size it
declares, and a declared size over the budget is refused before anything is read; only stored and deflated
members are read (bzip2 and lzma inflate a few bytes into gigabytes per call). An ``.npy`` member's header
(shape and dtype) must describe exactly the bytes the member declares before its array is allocated, so a
header declaring 2^40 elements is refused here, not by numpy's ``MemoryError``. Used for uploaded checkpoint
zips and trace files. Source: design choice.
"""

from __future__ import annotations

import errno
import io
import math
import os
import stat
import zipfile
from typing import Any

import numpy as np

#: Bytes inflated per read (design choice).
CHUNK = 1 << 16
#: Longest ``.npy`` header read (bytes; numpy's own default limit).
MAX_NPY_HEADER = 10_000
#: Most entries a zip may list (design choice: a checkpoint folder has 4 files, a trace a few dozen arrays;
#: zipfile spends ~500 bytes per listed entry, ~10x the entry's size in the file).
MAX_ENTRIES = 1000
_READABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: Most bytes inflated per byte of a zip beyond a floor (design choice: the bundled checkpoints zip at 1.15 to
#: 2.4 to 1 and their traces of 2,048 characters at 1.17 to 1.54 to 1; deflate's own limit is about 1032 to 1).
MAX_RATIO = 10


def inflate_budget(compressed: int, floor: int, cap: int) -> int:
    """Most bytes a zip of ``compressed`` bytes may inflate to: ``floor`` plus :data:`MAX_RATIO` times its
    size, at most ``cap``. A few KB of zeros declaring hundreds of MB is refused before anything is
    inflated, while real files (weights and traces barely compress) are far inside. Design choice."""
    return min(int(cap), int(floor) + MAX_RATIO * max(int(compressed), 0))


def _n(name: str) -> str:
    """A member's name as a one-line message quotes it: at most 80 characters."""
    return name if len(name) <= 80 else name[:80] + f"… ({len(name):,} characters)"


class BoundedReadError(ValueError):
    """A zip member or ``.npy`` array over its budget, or one whose header does not match its size."""


class _OwnedZip(zipfile.ZipFile):
    """A ``ZipFile`` over a file object it opened itself, closed with it."""

    def __init__(self, fp, owned):
        self._owned = owned
        super().__init__(fp)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._owned.close()


def open_zip(source: Any, max_entries: int = MAX_ENTRIES) -> zipfile.ZipFile:
    """``zipfile.ZipFile(source)`` (a path or a binary file object), after checking from the end-of-archive
    record that it lists at most ``max_entries`` entries, so a zip of a million empty entries is refused
    before zipfile builds a record of each (also when the record understates the count: the central
    directory's size is bounded too, at 1 KB per entry). A path is opened without blocking and must be a
    regular file (a FIFO never hangs). :class:`BoundedReadError` for too many entries; zipfile's errors
    (``BadZipFile``) and ``OSError`` (``errno.EINVAL``: not a regular file) propagate."""
    is_path = isinstance(source, (str, bytes)) or hasattr(source, "__fspath__")
    if is_path:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file", os.fsdecode(source))
        fp = os.fdopen(fd, "rb")
    else:
        fp = source
    try:
        end = zipfile._EndRecData(fp)  # the record zipfile itself reads first (zip64 aware)
        if end is not None and (end[zipfile._ECD_ENTRIES_TOTAL] > max_entries
                                or end[zipfile._ECD_SIZE] > max_entries * 1024):
            raise BoundedReadError(f"the zip lists {end[zipfile._ECD_ENTRIES_TOTAL]:,} entries in "
                                   f"{end[zipfile._ECD_SIZE]:,} bytes; the limit is {max_entries:,} entries "
                                   f"in {max_entries * 1024:,} bytes")
        fp.seek(0)
        return _OwnedZip(fp, owned=fp) if is_path else zipfile.ZipFile(source)
    except BaseException:
        if is_path:
            fp.close()
        raise


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    """The bytes of member ``info`` of ``zf``: at most its declared size (``info.file_size``), which must be
    within ``budget`` bytes; inflated :data:`CHUNK` bytes at a time (peak memory: the declared size plus a
    chunk). :class:`BoundedReadError` for a declared size over the budget or a compression other than stored
    or deflated; zipfile's errors (``BadZipFile`` for a bad CRC, i.e. a member holding other data than it
    declares) propagate."""
    if info.compress_type not in _READABLE:
        raise BoundedReadError(f"{info.filename} uses a compression this reader refuses (only stored and "
                               "deflated members are read)")
    if info.file_size > budget:
        raise BoundedReadError(f"{info.filename} declares {info.file_size:,} bytes, over the budget of "
                               f"{budget:,} bytes")
    buf = bytearray()
    with zf.open(info) as f:  # zipfile stops at the declared size; the CRC check then catches a lie
        while len(buf) < info.file_size:
            chunk = f.read(min(CHUNK, info.file_size - len(buf)))
            if not chunk:
                break
            buf += chunk
        if len(buf) == info.file_size:
            f.read(1)  # reach the end of the stream, where zipfile checks the CRC
    return bytes(buf)


def _npy_header(f, member: str) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, header_bytes)`` of the ``.npy`` stream ``f``, read without numpy's
    loader (which allocates the declared array first). :class:`BoundedReadError` for a malformed header."""
    prefix = f.read(8)
    if len(prefix) < 8 or prefix[:6] != b"\x93NUMPY":
        raise BoundedReadError(f"{member} is not a .npy array")
    major = prefix[6]
    if major not in (1, 2, 3):
        raise BoundedReadError(f"{member} has .npy format version {major}, which this reader does not know")
    width = 2 if major == 1 else 4
    length_bytes = f.read(width)
    hlen = int.from_bytes(length_bytes, "little") if len(length_bytes) == width else -1
    if not 0 <= hlen <= MAX_NPY_HEADER:
        raise BoundedReadError(f"{member} has a malformed .npy header length")
    header = f.read(hlen)
    read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    try:
        shape, fortran, dtype = read(io.BytesIO(length_bytes + header))
    except (ValueError, TypeError, SyntaxError) as exc:
        raise BoundedReadError(f"{member} has a malformed .npy header ({exc})") from None
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise BoundedReadError(f"{member} has a malformed .npy shape {shape!r}")
    if dtype.hasobject:
        raise BoundedReadError(f"{member} holds Python objects (pickles are not read)")
    return tuple(int(n) for n in shape), bool(fortran), dtype, 8 + width + hlen


def read_npz(source: Any, budget: int) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``source`` (a path or a binary file object) by name (without
    ``.npy``), holding at most ``budget`` bytes of array data in all. Each member's ``.npy`` header is read
    first: its shape times its item size must be exactly the member's declared size less the header, and
    within what is left of the budget, before the array is allocated; the data is then inflated a chunk at
    a time. Peak memory: the arrays plus one chunk.

    Raises :class:`BoundedReadError` (over budget, a header that does not match its member, object arrays,
    a member that is not ``.npy``, a refused compression); zipfile's and ``OSError``'s errors propagate
    (``BadZipFile``: not a zip, a bad CRC; ``FileNotFoundError``)."""
    out: dict[str, np.ndarray] = {}
    left = budget
    with open_zip(source) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        declared = sum(i.file_size for i in infos)
        if declared > budget + (MAX_NPY_HEADER + 12) * len(infos):  # refused before anything is inflated
            raise BoundedReadError(f"the file's members declare {declared:,} bytes, over the budget of "
                                   f"{budget:,} bytes for the whole file")
        for info in infos:
            name = _n(info.filename)
            if not name.endswith(".npy"):
                raise BoundedReadError(f"{name} is not a .npy array")
            if info.compress_type not in _READABLE:
                raise BoundedReadError(f"{name} uses a compression this reader refuses (only stored and "
                                       "deflated members are read)")
            with zf.open(info) as f:
                shape, fortran, dtype, hbytes = _npy_header(f, name)
                count = math.prod(shape)
                nbytes = count * dtype.itemsize
                if nbytes != info.file_size - hbytes:
                    raise BoundedReadError(f"{name} declares shape {list(shape)} of {dtype.str} "
                                           f"({nbytes:,} bytes) but its member holds "
                                           f"{max(info.file_size - hbytes, 0):,} bytes of data")
                if nbytes > left:
                    raise BoundedReadError(f"{name} holds {nbytes:,} bytes of array data, over the budget of "
                                           f"{budget:,} bytes for the whole file")
                buf = bytearray(nbytes)
                view, got = memoryview(buf), 0
                while got < nbytes:
                    chunk = f.read(min(CHUNK, nbytes - got))
                    if not chunk:
                        raise BoundedReadError(f"{name} is truncated ({got:,} of {nbytes:,} bytes)")
                    view[got:got + len(chunk)] = chunk
                    got += len(chunk)
                f.read(1)  # reach the end of the stream, where zipfile checks the CRC
                left -= nbytes
            arr = np.frombuffer(buf, dtype=dtype, count=count)
            out[name[:-len(".npy")]] = arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)
    return out
