"""The trace file: one ``.npz`` of plain arrays plus a JSON ``__meta__`` string, no pickles; its format
versions (1: dense ``T x T`` maps, compacted on load; 2: compact traces), :func:`save_trace`, :func:`load_trace`,
:func:`trace_bytes`. A file names its family (``"osm"``, ``"cem"``, ...), never a Python class."""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import BinaryIO

import numpy as np

from geomlab.core.jsonread import JSONInputError, parse_json
from geomlab.core.zipread import inflate_budget, read_npz
from geomlab.trace.base import Trace, TraceError
from geomlab.trace.lens import Lens
from geomlab.trace.record import FAMILIES, family_of_kind, from_record
from geomlab.trace.shapes import check_shapes

#: Most bytes of array data one trace file may inflate to (design choice: a trace of 4096 positions of the
#: largest bundled model is a few MB; the budget bounds what a small hostile file can make the reader allocate).
MAX_TRACE_BYTES = 256 * 1024 * 1024

#: Bytes of array data any trace file may inflate to, however small (design choice: a trace of 2,048
#: characters of the largest bundled model is 13 MiB of arrays in an 11 MB file).
MIN_TRACE_BUDGET = 16 * 1024 * 1024

#: Longest error message of :func:`load_trace` (characters: one line).
MAX_MESSAGE = 300

FORMAT_VERSION = 2
"""Version of the trace file format. 2 (this one): compact traces (attention stored as the queries and
keys that score it, OSM tangents as float16 Lie-algebra coordinates plus exact float32 norms, torus states
as their diagonals, Grassmann Plücker vectors recomputed from the reduced vectors). Version-1 files (dense
``T x T`` maps) still load."""


def _family_of_v1(keys) -> str:
    """The family a version-1 file's arrays belong to, guessed from its keys (those files name a family whose
    arrays are checked against it): ``osm`` (``states``), ``cem`` (``energies``), ``grassmann``
    (``reduced`` and Plücker data or offsets), else ``baseline``."""
    keys = set(keys)
    if "states" in keys or "state_data" in keys:
        return "osm"
    if "energies" in keys:
        return "cem"
    if "reduced" in keys and keys & {"plucker", "plucker_data", "offsets"}:
        return "grassmann"
    return "baseline"


def _q(value) -> str:
    """``repr(value)`` cut to 60 characters, for a one-line message about a metadata value."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    return str(obj)


def save_trace(tr: Trace, path: str | Path | BinaryIO, compress: bool = True) -> None:
    """Write ``tr`` as one ``.npz`` file (zip-compressed unless ``compress=False``) of plain numeric/bool
    arrays (the trace's stored fields, ``extra.*`` for extras) plus ``__meta__``, a JSON string with
    ``format_version`` (:data:`FORMAT_VERSION`), ``family``, ``kind``, ``labels``, ``config``, ``text``,
    ``group``. A trace with a layer lens adds its arrays as ``lens.top_ids``, ``lens.top_probs``,
    ``lens.next_prob``, ``lens.next_rank``, its stage names as ``lens_labels`` and its token strings as
    ``lens_names`` in ``__meta__``. No pickles. ``path`` may be a file path or a binary file object (e.g. ``io.BytesIO``).

    A file path is written whole or not at all (:func:`geomlab.core.writes.write_atomic`): a failed save leaves
    what was there.

    Raises:
        TraceError: an array has object dtype (cannot be stored without pickling).
        OSError: the system refused the write (disk full, read-only folder...): one line naming ``path``
            (``.filename``) and the reason.
    """
    arrays: dict[str, np.ndarray] = {"tokens": np.asarray(tr.tokens, dtype=np.int64)}
    for name, value in tr.stored_arrays().items():
        arrays[name] = np.asarray(value)
    lens = getattr(tr, "lens", None)
    if lens is not None:
        for name in Lens.ARRAYS:
            arrays[f"lens.{name}"] = np.asarray(getattr(lens, name))
    for name, value in arrays.items():
        if value.dtype == object:
            raise TraceError(f"array {name!r} has object dtype and cannot be saved without pickles")
    meta = {
        "format_version": FORMAT_VERSION, "family": tr.family, "kind": tr.kind, "labels": list(tr.labels),
        "config": tr.config, "text": tr.text, "group": getattr(tr, "group", None),
    }
    if lens is not None:
        meta["lens_labels"] = list(lens.labels)
        meta["lens_names"] = {str(i): s for i, s in lens.names.items()}
    arrays["__meta__"] = np.array(json.dumps(meta, default=_json_default))
    writer = np.savez_compressed if compress else np.savez
    if not isinstance(path, (str, Path)):
        writer(path, **arrays)
        return
    from geomlab.core.writes import write_atomic

    buf = io.BytesIO()
    writer(buf, **arrays)
    write_atomic(path, buf.getvalue(), "trace")


def _check_arrays(tokens: np.ndarray, data: dict[str, np.ndarray]) -> None:
    """The arrays' kinds before a trace is built from them: ``tokens`` one row of non-negative integers, the
    logits real floats with a row per token, every array numbers (non-finite values are allowed: a model that
    diverged is worth a look). :class:`TraceError` otherwise. Design choice."""
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu" or (tokens.size and int(tokens.min()) < 0):
        raise TraceError(f"tokens.npy is not one row of non-negative integers ({tokens.dtype}, shape "
                         f"{tokens.shape})")
    logits = data["logits"]
    if logits.dtype.kind != "f" or logits.ndim < 1 or logits.shape[0] != len(tokens):
        raise TraceError(f"logits.npy is not real numbers with a row per token ({logits.dtype}, shape "
                         f"{logits.shape}, {len(tokens)} tokens)")
    for name, arr in data.items():
        if arr.dtype.kind not in "biufc":
            raise TraceError(f"{name[:60]}.npy holds {arr.dtype}, not numbers")


def load_trace(path: str | Path | BinaryIO | bytes) -> Trace:
    """Read a trace written by :func:`save_trace`, this version or version 1 (dense ``T x T`` maps; compacted
    on load). The arrays are read by :func:`geomlab.core.zipread.read_npz` within
    :func:`geomlab.core.zipread.inflate_budget` of the file's size (:data:`MIN_TRACE_BUDGET` plus 10 bytes per
    byte of file, at most :data:`MAX_TRACE_BYTES`)
    (each ``.npy`` header checked against its member's size before allocation; no pickles) and the metadata
    by :func:`geomlab.core.jsonread.parse_json` (size and depth limits).

    ``path`` may be a path, a binary file object or the file's bytes.

    Raises:
        TraceError: one line of at most :data:`MAX_MESSAGE` characters, starting with the file's name when
        ``path`` is a path: not a trace file, over
        the memory budget, a format version this geomlab does not know (newer or malformed), an unknown
        family, a model kind that records another family, missing arrays, arrays of the wrong kind or shape
        (:func:`geomlab.trace.shapes.check_shapes`, naming the member), or metadata of the wrong type.
        ``FileNotFoundError`` for a missing path.
    """
    if isinstance(path, (bytes, bytearray)):
        path = io.BytesIO(path)
    try:
        return _load(path)
    except TraceError as exc:
        text = f"{Path(path).name}: {exc}" if isinstance(path, (str, Path)) else str(exc)
        msg = " ".join(text.split())
        raise TraceError(msg if len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE - 1] + "…") from None


def _size(source) -> int:
    """The size in bytes of a trace file given as a path or a seekable binary file object (0 when unknown:
    the budget is then its floor)."""
    try:
        if isinstance(source, (str, Path)):
            return os.stat(source).st_size
        here = source.tell()
        end = source.seek(0, os.SEEK_END)
        source.seek(here)
        return end - here
    except (OSError, AttributeError, ValueError):
        return 0


def _load(path) -> Trace:
    """:func:`load_trace` of a path or a binary file object, its errors without the file's name."""
    try:
        data = read_npz(path, inflate_budget(_size(path), MIN_TRACE_BUDGET, MAX_TRACE_BYTES))
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:  # not an npz, ...
        raise TraceError(f"not a readable trace file: {exc}") from None
    if "__meta__" not in data:
        raise TraceError("not a trace file: no '__meta__' entry")
    raw = data.pop("__meta__")
    if raw.shape != () or raw.dtype.kind != "U":
        raise TraceError("not a trace file: its '__meta__' entry is not one string")
    try:
        meta = parse_json(str(raw), "trace metadata")
    except JSONInputError as exc:
        raise TraceError(str(exc)) from None
    if not isinstance(meta, dict):
        raise TraceError("trace metadata is not a JSON object")
    version = meta.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
        raise TraceError(f"trace format version {_q(version)} is not one this geomlab reads (1..{FORMAT_VERSION}); "
                         "a newer file needs a newer geomlab")
    family = meta.get("family")
    if not isinstance(family, str) or family not in FAMILIES:
        raise TraceError(f"unknown trace family {str(family)[:60]!r}")
    from geomlab.models import kinds

    kind = meta.get("kind", "")
    if not isinstance(kind, str) or len(kind) > 100:
        raise TraceError(f"trace metadata's model kind {_q(kind)} is not a name (a string of at most 100 "
                         "characters)")
    if kind in kinds() and family_of_kind(kind) != family:
        raise TraceError(f"trace metadata names model kind {_q(kind)}, which records {family_of_kind(kind)!r} "
                         f"traces, but the file holds a {family!r} trace")
    if "tokens" not in data or "logits" not in data:
        raise TraceError("trace file lacks 'tokens' or 'logits'")
    cls = FAMILIES[family]
    extras = {k[len("extra."):]: data.pop(k) for k in list(data) if k.startswith("extra.")}
    lens_arrays = {k[len("lens."):]: data.pop(k) for k in list(data) if k.startswith("lens.")}
    tokens = data.pop("tokens")
    _check_arrays(tokens, data)
    record = {k: v for k, v in data.items()}
    complete = _family_of_v1(record) == family if version == 1 else all(k in record for k in cls.REQUIRED)
    if not complete:
        raise TraceError(f"trace file says family {family!r} but lacks its arrays {list(cls.REQUIRED)}")
    record.update({k: v for k, v in extras.items() if k not in record})
    labels = meta.get("labels")
    if not isinstance(labels, list) or len(labels) != len(tokens):
        raise TraceError("trace metadata's labels are not a list of one string per position")
    if not all(isinstance(x, str) for x in labels):
        raise TraceError("trace labels are not all strings")
    if not isinstance(meta.get("text", ""), str):
        raise TraceError("trace metadata's text is not a string")
    config, group = meta.get("config") or {}, meta.get("group") or {}
    for key, value in (("config", config), ("group", group)):
        if not isinstance(value, dict):
            raise TraceError(f"trace metadata's {key!r} is not a JSON object")
    try:
        tr = from_record(record, kind, tokens, labels=[str(x) for x in labels], config=config,
                         text=str(meta.get("text", "")), group=group, family=family)
    except (IndexError, KeyError, TypeError, ValueError) as exc:  # arrays of inconsistent shapes
        raise TraceError(f"inconsistent trace file: {str(exc)[:200]}") from exc
    check_shapes(tr)
    tr.lens = _lens_of(lens_arrays, meta.get("lens_labels"), len(tokens))
    if tr.lens is not None and isinstance(meta.get("lens_names"), dict):
        try:
            tr.lens.names = {int(i): str(s) for i, s in meta["lens_names"].items()}
        except ValueError as exc:
            raise TraceError(f"trace file's lens names are not keyed by token ids: {str(exc)[:100]}") from exc
    return tr


def _lens_of(arrays: dict[str, np.ndarray], labels, n_positions: int) -> Lens | None:
    """The layer lens a file stores (``None`` when it has none: older files); raises :class:`TraceError`
    for a partial or inconsistent one."""
    if not arrays and labels is None:
        return None
    if set(arrays) != set(Lens.ARRAYS) or not isinstance(labels, list):
        raise TraceError(f"trace file has a partial layer lens: arrays {sorted(arrays)[:8]}, labels "
                         f"{str(labels)[:60]!r}")
    for name, arr in arrays.items():
        kinds = "iu" if name == "top_ids" else "f"
        if arr.dtype.kind not in kinds:
            raise TraceError(f"lens.{name}.npy holds {arr.dtype}, not {'integers' if kinds == 'iu' else 'reals'}")
    return Lens([str(x) for x in labels], *(arrays[name] for name in Lens.ARRAYS)).check(n_positions)


def trace_bytes(tr: Trace) -> bytes:
    """The compressed ``.npz`` file of :func:`save_trace` as bytes (for a download button)."""
    buf = io.BytesIO()
    save_trace(tr, buf)
    return buf.getvalue()
