"""The files of a checkpoint on disk: written as one unit, read only when regular, created exclusively.

No torch, no streamlit: :mod:`geomlab.checkpoints.io` (writing, loading) and :mod:`geomlab.checkpoints.catalog` (listing)
share these rules, so what the catalog lists is exactly what the loader accepts.

**One unit.** A pair ``NAME.safetensors`` + ``NAME.json`` written by :func:`install` carries one random
*save id*: in the JSON (``"save_id"``) and in the safetensors header metadata (``"geomlab_save_id"``). The
steps are: weights to a temporary file; the JSON to a journal file ``.NAME.json.<save id>.next``; the
weights renamed over ``NAME.safetensors``; the journal renamed over ``NAME.json``. A kill at any instant
leaves either the old pair (the weights not yet renamed: the stale journal is ignored), or the new weights
with the old JSON and the new JSON in the journal: :func:`pair_meta` sees that the JSON's save id is not
the weights' one and takes the journal named by the weights' id (and, when asked, finishes the rename).
A JSON whose save id disagrees with the weights and no matching journal is refused as a mismatched pair.

**A folder is the same unit.** A checkpoint folder ``NAME/`` (``model.safetensors``, ``geomlab.json``,
``config.json``, ``README.md``) is written by the same steps: every small file goes to its journal
(``.geomlab.json.<save id>.next``, ``.config.json.<save id>.next``, ...), the weights are renamed into place
(the commit), then the journals one by one. ``geomlab.json`` carries the save id and plays the pair's JSON;
the other files (*companions*, :func:`companion_bytes`) are read from the journal named by the weights' id
while it is there (and, when asked, renamed into place), else from their own file. ``geomlab.json`` records the
sha256 of ``config.json`` (and of the vocabulary and the training state), so a ``config.json`` from another
save is refused (:func:`folder_meta`), and of the weights, in either layout (:func:`check_weights_sha`). The training state is optional: a folder without both of its files reads
weights-only (:func:`has_state`).
Weights without a save id (older files, the bundled ones, files written by other tools) read with their
JSON as before; the loader's own checks (names, shapes, dtypes) still apply.

**Regular files only.** Files are opened without following a final symlink and without blocking
(``O_NOFOLLOW | O_NONBLOCK``) and must be regular files, so a FIFO or a device never blocks a reader.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from geomlab.core import jsonread
from geomlab.core.jsonread import JSONInputError, parse_json

#: Longest safetensors header read to find the save id (bytes; design choice, real headers are KBs).
MAX_HEADER_BYTES = 64 * 1024 * 1024
#: Key of the save id in the JSON and in the safetensors header metadata.
JSON_KEY, HEADER_KEY = "save_id", "geomlab_save_id"


class PairError(ValueError):
    """A checkpoint file that cannot be read as part of a consistent pair (one readable line)."""


class ExistsError(FileExistsError):
    """:func:`install` with ``exclusive=True`` found ``NAME.json`` or ``NAME.safetensors`` already there."""


def make_writable(folder: Path) -> None:
    """Make ``folder`` (and its parents) and check that a file can be written in it, with a temporary file
    that leaves nothing behind. Raises ``OSError`` (read-only file system, permissions, a file in the way).
    Used before a run trains, for its checkpoint and log folders. Design choice."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=folder):
        pass


def journal(json_path: Path, save_id: str) -> Path:
    """The journal file holding the JSON of save ``save_id`` until it is renamed over ``json_path``."""
    return json_path.with_name(f".{json_path.name}.{save_id}.next")


def is_regular(path: Path, follow: bool = False) -> bool:
    """Whether ``path`` is a regular file (``follow=False``: a symlink is not one). Never raises."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode)


def read_regular(path: Path, limit: int | None = None, follow: bool = False) -> bytes:
    """The bytes of a regular file (at most ``limit``), opened so that a FIFO or device never blocks and
    (``follow=False``) a symlink is refused. ``OSError`` otherwise (``errno.EINVAL`` for a non-regular file)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit) if limit is not None else f.read()
    finally:
        os.close(fd)


def read_header(st_path: Path, follow: bool = True) -> dict:
    """The JSON header of a safetensors file (tensor names to ``dtype``/``shape``/``data_offsets``, and
    ``__metadata__``), read alone: its declared length is checked against :data:`MAX_HEADER_BYTES` and the
    file's size, and its text parsed by :func:`geomlab.core.jsonread.parse_json` (size and depth limits), so
    a hostile header is refused here before the file reaches safetensors. :class:`PairError` for a missing,
    non-regular, truncated or malformed file."""
    try:
        head = read_regular(st_path, 8, follow=follow)
        if len(head) < 8:
            raise PairError(f"{st_path.name} is truncated or not a safetensors file (no header)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES:
            raise PairError(f"{st_path.name} is not a safetensors file (header of {n} bytes)")
        raw = read_regular(st_path, 8 + n, follow=follow)[8:]
    except OSError as exc:
        raise PairError(f"checkpoint file {st_path.name} cannot be read: {exc.strerror or exc}") from None
    if len(raw) < n:
        raise PairError(f"{st_path.name} is truncated (header cut short)")
    try:
        header = parse_json(raw, "its header", max_bytes=MAX_HEADER_BYTES)
    except JSONInputError as exc:
        raise PairError(f"{st_path.name} is truncated or not a safetensors file: {exc}") from None
    if not isinstance(header, dict):
        raise PairError(f"{st_path.name} is not a safetensors file (its header is not a JSON object)")
    return header


def header_save_id(st_path: Path, follow: bool = True) -> str | None:
    """The save id in a safetensors file's header metadata, or None when it has none. Reads only the
    header (:func:`read_header`). :class:`PairError` for a missing, non-regular, truncated or malformed file."""
    meta = read_header(st_path, follow=follow).get("__metadata__")
    sid = meta.get(HEADER_KEY) if isinstance(meta, dict) else None
    return sid if isinstance(sid, str) and sid else None


def read_json(path: Path, label: str | None = None, follow: bool = False) -> Any:
    """The JSON value of the regular file ``path`` (``follow=False``: a symlink is refused), within the size
    and depth limits of :func:`geomlab.core.jsonread.read_json`. :class:`PairError`, one line naming the
    file as ``label`` (default: its name), when it cannot be read, is too large or too deep, or is not UTF-8
    JSON."""
    label = label or path.name
    try:
        return jsonread.read_json(path, label, follow=follow)
    except OSError as exc:
        raise PairError(f"checkpoint file {label} cannot be read: {exc.strerror or exc}") from None
    except JSONInputError as exc:
        raise PairError(str(exc)) from None


def short(text: str, n: int = 80, count: bool = True) -> str:
    """``text`` cut to its first ``n`` characters and ``…`` when longer, followed (``count``) by its length,
    e.g. ``"abc… (1,000 characters)"``: a name or reference quoted in a one-line message. Design choice."""
    if len(text) <= n:
        return text
    return text[:n] + "…" + (f" ({len(text):,} characters)" if count else "")


def _read_umask() -> int:
    """The process umask, read once at import (os.umask can only be read by setting it, which is not
    thread-safe later on, when live runs save checkpoints from threads)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The process umask: a checkpoint file is written with mode ``0o666 & ~UMASK`` (a folder ``0o777 & ~UMASK``),
#: as an ordinary file would be (``mkstemp`` makes 0600).
UMASK = _read_umask()


def pair_meta(json_path: Path, st_path: Path, weights_id: str | None, read_json: Callable[[Path], dict],
              repair: bool = True, follow: bool = True) -> dict:
    """The JSON that belongs with weights whose save id is ``weights_id``.

    ``read_json(json_path)`` reads and checks ``NAME.json`` (raising the caller's error). When its save id
    is the weights' one (or the weights have none) it is the answer. Otherwise the journal of ``weights_id`` is
    the new half of an interrupted save: its JSON is returned and, with ``repair``, renamed over
    ``NAME.json`` (finishing that save). Otherwise :class:`PairError` (a mismatched pair).
    """
    err: Exception | None = None
    meta = None
    try:
        meta = read_json(json_path)
    except ValueError as exc:  # missing or unreadable JSON: the journal may still complete the pair
        err = exc
    if meta is None and err is None:  # the JSON value null
        err = PairError(f"{json_path.name} must hold a JSON object")
    if meta is not None and (weights_id is None or isinstance(meta, dict) and meta.get(JSON_KEY) == weights_id):
        return meta  # weights without an id (older files, hand-made ones): the loader's checks decide
    if weights_id is not None:
        j = journal(json_path, weights_id)
        try:
            new = read_json(j)
        except (OSError, ValueError):
            new = None
        if isinstance(new, dict) and new.get(JSON_KEY) == weights_id:
            if repair:
                _finish_journal(j, json_path)
            return new
    if meta is None:
        raise err  # type: ignore[misc]
    if not isinstance(meta, dict):
        raise PairError(f"{json_path.name} must hold a JSON object")
    raise PairError(f"{json_path.name} and {st_path.name} come from two different saves (an interrupted or "
                    "mixed copy): refusing a mismatched pair; save the checkpoint again")


def _finish_journal(j: Path, path: Path) -> None:
    """Rename an interrupted save's journal ``j`` into place at ``path``; a read-only folder, or the save
    finishing it meanwhile (the content is the same), leaves things as they are."""
    try:
        os.replace(j, path)
    except OSError:
        pass


def companion_bytes(path: Path, weights_id: str | None, repair: bool = True, follow: bool = True) -> bytes:
    """The bytes of a folder checkpoint's companion file (``config.json``, ``README.md``) that belong with
    weights whose save id is ``weights_id``: its journal while an interrupted save left one (renamed into
    place with ``repair``), else the file itself. ``OSError`` when neither can be read."""
    if weights_id is not None:
        j = journal(path, weights_id)
        try:
            data = read_regular(j)
        except OSError:
            pass
        else:
            if repair:
                _finish_journal(j, path)
            return data
    return read_regular(path, follow=follow)


#: The files of a checkpoint folder (design choice: Hugging Face's names for the config, weights and card).
CONFIG, WEIGHTS, META, CARD = "config.json", "model.safetensors", "geomlab.json", "README.md"
#: The vocabulary and the resumable training state (tensors; the JSON part) of a format-3 folder.
VOCAB, STATE, STATE_JSON = "vocab.json", "training_state.safetensors", "training_state.json"
#: Every file a checkpoint folder may hold, ``geomlab.json`` (the one with the save id) first.
FOLDER_FILES = (META, WEIGHTS, CONFIG, CARD, VOCAB, STATE, STATE_JSON)
#: The training state's two files: both there, or neither (a weights-only folder, which reads but cannot resume).
STATE_FILES = (STATE, STATE_JSON)
#: The files a checkpoint folder needs, in words (messages). Design choice: what reads a model needs no
#: training state, only resuming a run does.
NEEDED = (f"{CONFIG}, {WEIGHTS}, {VOCAB} (if the model has one) and {META}; optional: training_state.* (only to "
          f"resume training) and {CARD}")


def folder_meta(folder: Path, weights_id: str | None, read_json: Callable[[Path], dict], repair: bool = True,
                follow: bool = True) -> dict:
    """The checkpoint description of folder ``folder`` for weights whose save id is ``weights_id``:
    ``geomlab.json`` (chosen by :func:`pair_meta`) with ``model_config`` read from ``config.json`` and, in a
    format-3 folder, ``vocab`` from ``vocab.json`` and ``train_state`` from ``training_state.json`` when
    ``geomlab.json`` lists them (:func:`companion_bytes`); with ``repair``, an interrupted save's ``README.md``
    is put in place too. A folder without the training state files ``geomlab.json`` lists is weights-only
    (:func:`has_state`): its description lists no training state (no ``train_state``, empty
    ``train_tensors``, ``files`` without them). :class:`PairError` when a listed companion other than the
    training state is missing, when a present one is not JSON of the right kind or is not the one
    ``geomlab.json`` records (:func:`check_sha`), or when only one training state file is there;
    ``read_json``'s error for an unreadable ``geomlab.json``."""
    meta = pair_meta(folder / META, folder / WEIGHTS, weights_id, read_json, repair=repair, follow=follow)
    if not isinstance(meta, dict):
        return meta
    out = {**meta}
    listed = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    if any(n in listed for n in STATE_FILES) and not has_state(folder, meta, weights_id):  # weights-only
        out["files"] = {k: v for k, v in listed.items() if k not in STATE_FILES}
        out["train_tensors"] = {}
        listed = out["files"]
    for name, key in ((CONFIG, "model_config"), (VOCAB, "vocab"), (STATE_JSON, "train_state")):
        if name != CONFIG and name not in listed:
            continue
        where = f"{folder.name}/{name}"
        raw = _companion_raw(folder, name, weights_id, repair, follow)
        try:
            value = parse_json(raw, where)  # a file that is not JSON is named so, before any checksum
        except JSONInputError as exc:
            raise PairError(str(exc)) from None
        if name == CONFIG and not isinstance(value, dict):
            raise PairError(f"{where} must hold a JSON object (the model config)")
        check_sha(folder, name, meta, raw)
        out[key] = value
    if repair and weights_id is not None:  # the model card is never read here, only put in place
        try:
            os.replace(journal(folder / CARD, weights_id), folder / CARD)
        except OSError:
            pass  # no journal (the usual case), or a read-only folder
    return out


def has_state(folder: Path, meta: dict, weights_id: str | None) -> bool:
    """Whether checkpoint folder ``folder`` holds the training state its ``geomlab.json`` (``meta``) lists:
    true when both listed files are there (each as a file or as the journal of save ``weights_id``, a broken
    link too: reading it then says what is wrong); false when ``meta`` lists none (saved without one) or
    neither file is there (a weights-only copy, which reads but cannot resume training). :class:`PairError`
    when only one of the two is there. Design choice: only resuming a run needs the training state."""
    listed = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    names = [n for n in STATE_FILES if n in listed]
    there = [n for n in names if os.path.lexists(folder / n)
             or (weights_id is not None and os.path.lexists(journal(folder / n, weights_id)))]
    if there and len(there) < len(names):
        gone = next(n for n in names if n not in there)
        raise PairError(f"{folder.name}/{there[0]} is there but {folder.name}/{gone} is missing: copy both "
                        "training state files, or neither (the model reads without them; only resuming "
                        "training needs them)")
    return bool(there)


def _companion_raw(folder: Path, name: str, weights_id: str | None, repair: bool = True,
                   follow: bool = True) -> bytes:
    """:func:`companion_bytes` of ``folder/name``, :class:`PairError` naming the file when it cannot be read."""
    try:
        return companion_bytes(folder / name, weights_id, repair=repair, follow=follow)
    except OSError as exc:
        raise PairError(f"checkpoint file {folder.name}/{name} cannot be read: {exc.strerror or exc}") from None


def check_sha(folder: Path, name: str, meta: dict, raw: bytes) -> None:
    """``raw``, the bytes of companion ``name`` of folder ``folder``, has the sha256 that ``meta["files"]``
    records for it (none recorded: not checked); else :class:`PairError` saying so and how to go on. Design
    choice: the checksum is what tells a file of another save (same shapes, other values: it would load
    silently wrong, and the card's results would not be the model's) from this save's, so an edited file is
    refused too; an edited ``config.json`` is kept by deleting its entry from ``files`` in ``geomlab.json``
    (the loader still checks that the weights fit it)."""
    want = recorded_sha(meta, name)
    if want is None or hashlib.sha256(raw).hexdigest() == want:
        return
    where = f"{folder.name}/{name}"
    fix = (f"restore the saved {name}, or to use this one delete the \"{name}\" entry under \"files\" in {META}"
           if name == CONFIG else f"copy {name} from the same save, or save the checkpoint again")
    raise PairError(f"{where} does not belong with {folder.name}/{META}: its sha256 is not the one recorded "
                    f"there (edited by hand, or from another save); {fix}")


def recorded_sha(meta: dict, name: str) -> str | None:
    """The sha256 (hex) that ``meta["files"]`` records for file ``name``, or None when it records none."""
    listed = meta.get("files") if isinstance(meta.get("files"), dict) else {}
    entry = listed.get(name)
    want = entry.get("sha256") if isinstance(entry, dict) else None
    return want if isinstance(want, str) else None


def checked_files(meta: dict) -> list[str]:
    """The files of a checkpoint whose sha256 its description ``meta`` records (checked on every load), in
    the order of :data:`FOLDER_FILES`; the weights (:data:`WEIGHTS`) are among them only in a checkpoint saved
    with their sha256 (an older one loads with its weights unchecked)."""
    return [n for n in FOLDER_FILES if recorded_sha(meta, n) is not None]


def checksums_line(meta: dict) -> str:
    """One line saying which files of a checkpoint (description ``meta``) are checked against a sha256 on load,
    and, when the weights are not (a checkpoint saved before their sum was recorded), that they are not. What
    the Checkpoints page and ``geomlab zoo --list`` show. Design choice."""
    checked = checked_files(meta)
    names = ", ".join(checked) or "none"
    if WEIGHTS in checked:
        return f"sha256 checked on load: {names}"
    return (f"sha256 checked on load: {names}; the weights are not checked (saved before geomlab recorded "
            f"their sha256; `{accept_command('CHECKPOINT')}` records it)")


#: How many file states :func:`file_sha256` remembers (design choice: a process opens a few dozen checkpoints).
SHA_CACHE_SIZE = 256
_SHA_CACHE: dict[tuple, str] = {}
_SHA_GUARD = threading.Lock()


def forget_sums() -> None:
    """Empty :func:`file_sha256`'s per-process cache, so that the next call hashes each file again (what a
    fresh process pays: ``geomlab bench checkpoints`` times it). Design choice."""
    with _SHA_GUARD:
        _SHA_CACHE.clear()


def file_sha256(path: Path) -> str:
    """sha256 (hex) of the regular file ``path`` (symlinks followed; opened so that a FIFO never blocks), read in
    1 MiB blocks. Cached within the process per file state ``(path, device, inode, size, mtime, ctime)``, the
    last :data:`SHA_CACHE_SIZE` of them: a file is hashed again once it is written, replaced or renamed over,
    while loading an unchanged file again costs one ``fstat``. ``OSError`` when it cannot be read
    (``errno.EINVAL`` for a file that is not regular). Design choice: hashing costs about as much as reading
    the file once more, too much to repeat for large weights on every load of an app view."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        key = (os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        with _SHA_GUARD:
            known = _SHA_CACHE.get(key)
        if known is not None:
            return known
        digest = hashlib.sha256()
        with os.fdopen(os.dup(fd), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    finally:
        os.close(fd)
    found = digest.hexdigest()
    with _SHA_GUARD:
        while len(_SHA_CACHE) >= SHA_CACHE_SIZE:
            _SHA_CACHE.pop(next(iter(_SHA_CACHE)))
        _SHA_CACHE[key] = found
    return found


#: The command that records the sum of a checkpoint's present weights (``{path}``: the checkpoint, quoted for a
#: shell): what the refusal of changed weights names. Design choice: the user vouches for weights changed on
#: purpose; nothing else may replace a recorded sum.
ACCEPT_COMMAND = "geomlab zoo --accept-weights {path}"


def accept_command(path: str | os.PathLike) -> str:
    """:data:`ACCEPT_COMMAND` for checkpoint ``path`` (quoted for a POSIX shell when it needs it)."""
    import shlex

    return ACCEPT_COMMAND.format(path=shlex.quote(str(path)))


def check_weights_sha(weights: Path, label: str, meta: dict, meta_label: str, path: str | os.PathLike) -> None:
    """The weights file ``weights`` (named ``label`` in messages) has the sha256 that ``meta["files"]`` records
    for :data:`WEIGHTS` (in either layout; ``meta`` read from the file named ``meta_label``; ``path``, the
    checkpoint as the user named it, goes into the refusal's :func:`accept_command`). Nothing is checked when
    none is recorded (checkpoints saved before the weights had one, format-2 folders, files from other
    tools). :class:`PairError` (one line) when the sum differs or the file cannot be read.
    Verified once per file state within a process (:func:`file_sha256`: a file changed in place without any
    change to its size, times or inode, as a bit flip on the medium, is seen by the next process). Design
    choice: weights that still parse but were changed (bit flips, a file replaced) would otherwise load
    silently."""
    want = recorded_sha(meta, WEIGHTS)
    if want is None:
        return
    try:
        got = file_sha256(weights)
    except OSError as exc:
        raise PairError(f"checkpoint file {label} cannot be read: {exc.strerror or exc}") from None
    if got != want:
        raise PairError(f"{label} changed since it was written: its sha256 is not the one {meta_label} recorded at "
                        "the save (a damaged copy or a replaced file); copy the checkpoint again, or, if the "
                        f"weights were changed on purpose, record their sum with `{accept_command(path)}`")


def companion(folder: Path, name: str, meta: dict, weights_id: str | None, repair: bool = True,
              follow: bool = True) -> bytes:
    """The bytes of companion ``name`` of checkpoint folder ``folder`` (:func:`companion_bytes`), checked
    against the sha256 that ``meta["files"]`` records for it (:func:`check_sha`). :class:`PairError` when it
    cannot be read or does not match."""
    raw = _companion_raw(folder, name, weights_id, repair, follow)
    check_sha(folder, name, meta, raw)
    return raw


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _stem_lock(json_path: Path) -> threading.Lock:
    key = os.path.abspath(json_path)
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def install(weights: Path, weights_tmp: Path, files: dict[Path, str | bytes], save_id: str, mode: int,
            exclusive: bool = False) -> None:
    """Put a written checkpoint in place as one unit (see the module docstring).

    ``weights``: ``NAME.safetensors`` or ``NAME/model.safetensors``; ``weights_tmp``: the new weights, written
    in the same folder with ``save_id`` in their header; ``files``: the other files' paths and new texts, the
    JSON holding ``save_id`` first (``NAME.json``, or ``geomlab.json`` then its companions; text or bytes). Each goes to
    its journal, the weights are renamed into place, then the journals in order. ``exclusive``: never
    replace an existing file: :class:`ExistsError` when the weights or any of ``files`` exists (checked
    atomically by ``os.link``, which fails on an existing name). On any error the new files are removed and
    whatever was there before is left as it was.
    """
    targets = list(files)
    folder = weights.parent
    journals = {t: journal(t, save_id) for t in targets}
    made: list[Path] = []  # names this call linked into place in exclusive mode (undone on failure)
    with _stem_lock(targets[0]):
        try:
            for t, text in files.items():
                j = journals[t]
                fd = os.open(j, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
                with os.fdopen(fd, "wb") as f:
                    f.write(text.encode("utf-8") if isinstance(text, str) else text)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(j, mode)
            if exclusive:
                for t in targets:
                    if os.path.lexists(t):
                        raise ExistsError(errno.EEXIST, "checkpoint exists", str(t))
                for src, dst in [(weights_tmp, weights)] + [(journals[t], t) for t in targets]:
                    try:
                        os.link(src, dst)
                    except FileExistsError:
                        raise ExistsError(errno.EEXIST, "checkpoint exists", str(dst)) from None
                    made.append(dst)
                made = []
                for p in [weights_tmp, *journals.values()]:
                    os.unlink(p)
            else:
                for t in targets:
                    _drop_stale_journals(t, keep=journals[t])
                os.replace(weights_tmp, weights)
                for t in targets:
                    try:
                        os.replace(journals[t], t)
                    except FileNotFoundError:  # a reader finished this save first (a repair)
                        pass
            _fsync_dir(folder)
        except BaseException:
            for p in reversed(made):
                try:
                    os.unlink(p)  # only the links this call made; the old checkpoint is untouched
                except OSError:
                    pass
            for p in [weights_tmp, *journals.values()]:
                try:
                    os.unlink(p)
                except OSError:
                    pass
            raise


#: A journal older than this (seconds) belongs to a save that was killed: the next save of the stem removes it.
STALE_JOURNAL_S = 120.0


def _drop_stale_journals(json_path: Path, keep: Path) -> None:
    import time

    prefix = f".{json_path.name}."
    try:
        names = os.listdir(json_path.parent)
    except OSError:
        return
    now = time.time()
    for n in names:
        p = json_path.parent / n
        if n.startswith(prefix) and n.endswith(".next") and p != keep:
            try:
                if now - os.lstat(p).st_mtime > STALE_JOURNAL_S:
                    os.unlink(p)
            except OSError:
                pass


def create_exclusive(folder: Path, name: str, files: dict[str, bytes], mode: int = 0o644,
                     max_tries: int = 1000) -> str:
    """Store bytes as ``folder/NAME<suffix>`` for each suffix in ``files`` (e.g. ``.safetensors`` then
    ``.json``), never replacing a file: the first free name of ``NAME``, ``NAME-2``, ``NAME-3``... is
    claimed with ``os.link`` (atomic; two concurrent callers never get the same name). The last suffix is
    linked last, so a listing sees the set complete or not at all. Returns the name used."""
    import tempfile

    tmps: dict[str, str] = {}
    try:
        for suffix, data in files.items():
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
            tmps[suffix] = tmp
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
        for i in range(1, max_tries + 1):
            final = name if i == 1 else f"{name}-{i}"
            made: list[Path] = []
            try:
                for suffix, tmp in tmps.items():
                    target = folder / f"{final}{suffix}"
                    if os.path.lexists(target):
                        raise FileExistsError(target)
                    os.link(tmp, target)
                    made.append(target)
            except FileExistsError:
                for p in made:
                    os.unlink(p)
                continue
            _fsync_dir(folder)
            return final
        raise ExistsError(errno.EEXIST, f"no free name for {name} after {max_tries} tries", str(folder))
    finally:
        for tmp in tmps.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass


def create_exclusive_folder(parent: Path, name: str, files: dict[str, bytes], mode: int = 0o644,
                            dir_mode: int = 0o755, max_tries: int = 1000) -> str:
    """Store a checkpoint folder ``parent/NAME/`` holding ``files`` (file name -> bytes), never replacing
    anything: the first free name of ``NAME``, ``NAME-2``, ``NAME-3``... is claimed with ``os.mkdir``
    (atomic; two concurrent callers never get the same name). The files are written under dot names and
    renamed into place in the order given (put the weights first and ``geomlab.json`` last), so a listing
    sees the folder complete or not at all. Returns the name used; on an error the new folder is removed."""
    for i in range(1, max_tries + 1):
        final = name if i == 1 else f"{name}-{i}"
        folder = parent / final
        try:
            os.mkdir(folder, dir_mode)
        except FileExistsError:
            continue
        try:
            for fname, data in files.items():
                tmp = folder / f".{fname}.part"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, mode)
            for fname in files:
                os.replace(folder / f".{fname}.part", folder / fname)
            _fsync_dir(folder)
            _fsync_dir(parent)
        except BaseException:
            for n in os.listdir(folder):
                try:
                    os.unlink(folder / n)
                except OSError:
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass
            raise
        return final
    raise ExistsError(errno.EEXIST, f"no free name for {name} after {max_tries} tries", str(parent))
