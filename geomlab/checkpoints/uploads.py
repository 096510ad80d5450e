"""Uploaded checkpoints: the files a browser sends (a checkpoint folder's files, a ``.zip`` of the folder, or a
flat pair) checked with the loader itself (:func:`geomlab.checkpoints.io.load`) in a temporary folder, then
stored under ``<runs>/uploads/`` without ever replacing a file, owned by the session that uploaded them
(:mod:`geomlab.checkpoints.ownership`). Source: design choice."""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints.catalog import CatalogError, CheckpointEntry, read_folder, read_pair, runs_dir, safe_name
from geomlab.checkpoints.files import short
from geomlab.checkpoints.ownership import record_owner
from geomlab.core import zipread
from geomlab.core.jsonread import MAX_JSON_BYTES, JSONInputError, parse_json

#: Largest accepted upload, in bytes, per file (design choice; the bundled models are well under 10 MB).
MAX_UPLOAD_BYTES = 200 * 1024 * 1024
#: Largest model card (``README.md``) accepted, in bytes (design choice: a card is a page of text; the
#: loader never reads it).
MAX_CARD_BYTES = 1024 * 1024
#: Bytes any uploaded zip may unpack to, however small (design choice: 10x the largest bundled checkpoint,
#: 0.45 MB, and the JSON files of a folder).
MIN_INFLATE = 4 * 1024 * 1024
#: Most bytes unpacked per byte of an uploaded zip beyond :data:`MIN_INFLATE` (:data:`geomlab.core.zipread.MAX_RATIO`).
MAX_RATIO = zipread.MAX_RATIO
#: Longest error message of an upload (characters; one line under the upload widget).
MAX_MESSAGE = 300
#: Sub-folder of the runs folder where validated uploads are stored.
UPLOAD_SUBDIR = "uploads"


#: Files a checkpoint folder upload may hold (the weights, the JSON files, the vocabulary, the training state,
#: the model card).
FOLDER_FILES = ckpt_files.FOLDER_FILES
#: Most files an uploaded zip may hold (a checkpoint folder's files).
MAX_ZIP_FILES = len(FOLDER_FILES)


def _unzip(name: str, data: bytes) -> dict[str, bytes]:
    """The files of an uploaded ``.zip`` (``NAME.zip`` holding a checkpoint folder ``NAME/...`` or its files,
    or a flat pair) as ``{path: bytes}``: folder entries, ``__MACOSX/`` and dot files skipped; nothing is
    extracted to disk. Every check that needs only the zip's directory runs before any member is inflated:
    at most :data:`MAX_ZIP_FILES` files, none nested deeper than one folder, each within its
    :func:`file_limit`, all together within :func:`inflate_budget` of the zip's size; each member is
    then inflated with a running count, never past what it declares. :class:`CatalogError` (one line) for a
    file that is not a zip or breaks one of these limits."""
    import io

    try:
        zf = zipread.open_zip(io.BytesIO(data))
        infos = [i for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, ValueError, OSError) as exc:  # ValueError: BoundedReadError, too many entries
        raise CatalogError(f"{short(name)} is not a readable zip file ({short(str(exc), 120)})") from None
    kept = []
    for info in infos:
        parts = [p for p in info.filename.replace("\\", "/").split("/") if p]
        if not parts or parts[0] == "__MACOSX" or parts[-1].startswith("."):
            continue
        if len(parts) > 2:
            raise CatalogError(f"{short(name)} holds {short(info.filename, 60)}: zip the checkpoint folder "
                               "itself (its files at most one folder deep)")
        kept.append(("/".join(parts), info))
    if len(kept) > MAX_ZIP_FILES:
        raise CatalogError(f"{short(name)} holds {len(kept):,} files ({listed([k for k, _ in kept])}); a "
                           f"checkpoint is at most {MAX_ZIP_FILES} ({', '.join(FOLDER_FILES)})")
    for path, info in kept:
        if info.file_size > file_limit(path):
            raise CatalogError(f"{short(name)}: {short(path, 60)} unpacks to {info.file_size / 2**20:,.1f} MiB; "
                               f"the limit for it is {file_limit(path) / 2**20:,.0f} MiB")
    budget = inflate_budget(len(data))
    total = sum(info.file_size for _, info in kept)
    if total > budget:
        raise CatalogError(f"{short(name)} unpacks to {total / 2**20:,.1f} MiB; a {len(data) / 2**20:,.1f} MiB "
                           f"zip may unpack to at most {budget / 2**20:,.1f} MiB")
    out = {path: _read_member(name, zf, info, info.file_size) for path, info in kept}
    if not out:
        raise CatalogError(f"{short(name)} holds no files")
    return out


def inflate_budget(zip_bytes: int) -> int:
    """Most bytes an uploaded zip of ``zip_bytes`` bytes may unpack to: :data:`MIN_INFLATE` plus
    :data:`MAX_RATIO` times its size, at most :data:`MAX_UPLOAD_BYTES`. Design choice: trained weights barely
    compress (the bundled checkpoints zip at 1.15 to 2.4 to 1), so a real checkpoint is far inside it, while a
    few KB of zeros declaring hundreds of MB is refused before anything is inflated."""
    return zipread.inflate_budget(zip_bytes, MIN_INFLATE, MAX_UPLOAD_BYTES)


def listed(names: list[str], n: int = 3) -> str:
    """The first ``n`` of ``names`` (each cut to 40 characters), then "and N more": a list quoted in a
    one-line message."""
    head = ", ".join(short(x, 40) for x in names[:n])
    return head + (f" and {len(names) - n:,} more" if len(names) > n else "")


def _read_member(name: str, zf, info, cap: int) -> bytes:
    """The bytes of zip member ``info`` of upload ``name``, inflated with a running count
    (:func:`geomlab.core.zipread.read_member`): never more than it declares nor than ``cap`` (the budget
    left). :class:`CatalogError` for a compression other than stored/deflated, an over-budget member, or a
    zip error (a bad CRC: e.g. a member holding other data than it declares)."""
    try:
        return zipread.read_member(zf, info, cap)
    except zipread.BoundedReadError as exc:
        raise CatalogError(f"{short(name)}: {exc}") from None
    except (zipfile.BadZipFile, ValueError, OSError, RuntimeError, EOFError, NotImplementedError) as exc:
        raise CatalogError(f"{short(name)}: {short(info.filename, 60)} cannot be read ({exc})") from None


def _upload_parts(files: dict[str, bytes]) -> tuple[str, bool, dict[str, bytes]]:
    """``(name, folder, parts)`` of an upload: a flat pair (``parts`` keyed ``.json``/``.safetensors``) or a
    checkpoint folder's files (keyed by :data:`FOLDER_FILES` names); a single ``.zip`` is unpacked first.
    :class:`CatalogError` (one line) for anything else."""
    if not files:
        raise CatalogError(f"no files: upload a checkpoint folder's files ({ckpt_files.NEEDED}) or a .zip of "
                           "the folder, or a NAME.safetensors with its NAME.json")
    zip_name = None
    if len(files) == 1 and next(iter(files)).lower().endswith(".zip"):
        zip_name, data = next(iter(files.items()))
        if len(data) > MAX_UPLOAD_BYTES:
            raise CatalogError(f"{short(zip_name)} is {len(data) / 2**20:.0f} MiB; the limit is "
                               f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB")
        files = _unzip(zip_name, data)
    base = {f: Path(f.replace("\\", "/")).name for f in files}
    folders = {Path(f.replace("\\", "/")).parent.name for f in files} - {""}
    weights = [f for f, b in base.items() if b.lower().endswith(".safetensors")]
    is_folder = bool({ckpt_files.META, ckpt_files.CONFIG} & set(base.values())) and \
        all(base[f] in (ckpt_files.WEIGHTS, ckpt_files.STATE) for f in weights)
    if not is_folder:
        name, pair = _flat_parts(files)
        return name, False, pair
    other = sorted(b for b in base.values() if b not in FOLDER_FILES)
    if other:
        raise CatalogError(f"unexpected file {listed(other)} in a checkpoint folder (it holds "
                           f"{', '.join(FOLDER_FILES)}; pickled .pt/.pth files are not accepted)")
    parts: dict[str, bytes] = {}
    for f, b in base.items():
        if b in parts:
            raise CatalogError(f"{b} uploaded twice; upload one checkpoint folder")
        parts[b] = files[f]
    for need in (ckpt_files.WEIGHTS, ckpt_files.CONFIG, ckpt_files.META):
        if need not in parts:
            raise CatalogError(_missing(need))
    for fname, data in parts.items():
        _check_size(fname, data)
    try:
        meta = parse_json(parts[ckpt_files.META], ckpt_files.META)
    except JSONInputError as exc:
        raise CatalogError(str(exc)) from None
    if not isinstance(meta, dict) or "tensors" not in meta:
        raise CatalogError(f"{ckpt_files.META} is not a geomlab checkpoint description (no 'tensors')")
    if ckpt_files.VOCAB not in parts and ckpt_files.VOCAB in (meta.get("files") or {}):
        raise CatalogError(_missing(ckpt_files.VOCAB))
    named = (folders.pop() if len(folders) == 1 else None) or (Path(zip_name).stem if zip_name else None) or \
        meta.get("name")
    return safe_name(str(named or "checkpoint")), True, parts


def _missing(name: str) -> str:
    """The message for a checkpoint folder upload without its file ``name``."""
    return f"the folder's {name} is missing: upload the folder's files together ({ckpt_files.NEEDED})"


def file_limit(fname: str) -> int:
    """Most bytes an uploaded file named ``fname`` may hold: a JSON file what the JSON reader reads
    (:data:`geomlab.core.jsonread.MAX_JSON_BYTES`), the model card :data:`MAX_CARD_BYTES`, the weights
    :data:`MAX_UPLOAD_BYTES`. Design choice: each file is judged by what it is for."""
    base = fname.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if base.endswith(".json"):
        return min(MAX_JSON_BYTES, MAX_UPLOAD_BYTES)
    if base == ckpt_files.CARD.lower():
        return MAX_CARD_BYTES
    return MAX_UPLOAD_BYTES


def _check_size(fname: str, data: bytes) -> None:
    if len(data) == 0:
        raise CatalogError(f"{short(fname)} is empty")
    if len(data) > file_limit(fname):
        raise CatalogError(f"{short(fname)} is {len(data) / 2**20:,.1f} MiB; the limit for it is "
                           f"{file_limit(fname) / 2**20:,.0f} MiB")


def _flat_parts(files: dict[str, bytes]) -> tuple[str, dict[str, bytes]]:
    by_suffix: dict[str, list[str]] = {}
    for fname in files:
        by_suffix.setdefault(Path(fname).suffix.lower(), []).append(fname)
    other = sorted(f for f in files if Path(f).suffix.lower() not in (".safetensors", ".json"))
    if other:
        raise CatalogError(f"unexpected file {listed(other)}: a checkpoint is a folder's files "
                           "(or a .zip of the folder), or a .safetensors file plus its .json (pickled .pt/.pth "
                           "files are not accepted)")
    for suffix in (".safetensors", ".json"):
        if len(by_suffix.get(suffix, [])) > 1:
            raise CatalogError(f"{len(by_suffix[suffix])} {suffix} files uploaded; upload exactly one pair")
    if by_suffix.get(".json"):  # a lone JSON is judged first: "not a checkpoint" says more than "half missing"
        json_name = by_suffix[".json"][0]
        _check_size(json_name, files[json_name])
        try:
            meta = parse_json(files[json_name], short(json_name))
        except JSONInputError as exc:
            raise CatalogError(str(exc)) from None
        if not isinstance(meta, dict) or "model_config" not in meta:
            raise CatalogError(f"{short(json_name)} is not a geomlab checkpoint description (no "
                               "'model_config')")
    weights = by_suffix.get(".safetensors", [])
    if weights and not by_suffix.get(".json") and Path(weights[0].replace("\\", "/")).name == ckpt_files.WEIGHTS:
        raise CatalogError(f"{ckpt_files.WEIGHTS} is a checkpoint folder's weights: upload the folder's files "
                           f"together ({ckpt_files.NEEDED}), or a .zip of the folder")
    for suffix in (".safetensors", ".json"):
        if not by_suffix.get(suffix):
            missing = "weights (.safetensors)" if suffix == ".safetensors" else "description (.json)"
            raise CatalogError(f"the {missing} file is missing: upload both halves of the checkpoint "
                               "(NAME.safetensors with NAME.json), or a checkpoint folder's files")
    json_name, st_name = by_suffix[".json"][0], by_suffix[".safetensors"][0]
    stems = [Path(f.replace("\\", "/")).stem for f in (json_name, st_name)]
    if stems[0] != stems[1]:  # two checkpoints' halves of one shape would load, silently mismatched
        raise CatalogError(f"{short(json_name)} and {short(st_name)} are not one pair: a flat pair is NAME.json "
                           "with NAME.safetensors (rename one if they belong together)")
    _check_size(st_name, files[st_name])
    return safe_name(Path(json_name).stem), {".json": files[json_name], ".safetensors": files[st_name]}


def _validate(files: dict[str, bytes]) -> tuple[str, bool, dict[str, bytes], Any]:
    """:func:`_check` with its message made one line of at most :data:`MAX_MESSAGE` characters."""
    try:
        return _check(files)
    except CatalogError as exc:
        msg = " ".join(str(exc).split())
        raise CatalogError(msg if len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE - 1] + "…") from None


def _check(files: dict[str, bytes]) -> tuple[str, bool, dict[str, bytes], Any]:
    name, folder, parts = _upload_parts(files)
    from geomlab.checkpoints import io as ckpt_mod  # lazy: keeps listing cheap and independent

    with tempfile.TemporaryDirectory(prefix="geomlab-upload-") as tmp:
        if folder:
            target = Path(tmp) / name
            target.mkdir()
            for fname, data in parts.items():
                (target / fname).write_bytes(data)
        else:
            target = Path(tmp) / f"{name}.json"
            for suffix, data in parts.items():
                target.with_suffix(suffix).write_bytes(data)
        try:
            loaded = ckpt_mod.load(target)
        except ValueError as exc:
            msg = str(exc).replace(f"{tmp}{os.sep}", "")
            raise CatalogError(f"not a valid checkpoint: {msg}") from None
        except Exception as exc:  # a loader bug or a corrupt file the loader did not foresee
            raise CatalogError(f"could not load the checkpoint: {type(exc).__name__}: {exc}") from None
    return name, folder, parts, loaded


def validate_upload(files: dict[str, bytes]) -> tuple[str, Any]:
    """Check an uploaded checkpoint without storing it.

    ``files`` maps file names (as the browser sends them: a name, or ``FOLDER/NAME`` from a folder picker)
    to their bytes. Accepted: a checkpoint folder's files selected together (``config.json``,
    ``model.safetensors``, ``vocab.json`` when the model has one, ``geomlab.json``; optionally
    ``training_state.*``, needed only to resume training, and ``README.md``), a single ``NAME.zip`` of such a folder
    (or of a flat pair), or a flat pair (exactly one ``.safetensors`` and one ``.json``). The files are
    written to a temporary folder and loaded with :func:`geomlab.checkpoints.io.load`, which checks the JSON
    against the tensors, ``config.json`` against ``geomlab.json``, the model kind, the format version and
    that every weight is finite. The name is the folder's (the one inside the zip or sent by a folder picker,
    else the zip's, else the name ``geomlab.json`` recorded at the save) or the pair's JSON's. Returns
    ``(name, checkpoint)``.

    Raises :class:`CatalogError` (a ``ValueError``) with a one-line message for a wrong number or type of
    files, an empty or oversized file, a JSON that does not parse, or anything the loader rejects.
    """
    name, _, _, loaded = _validate(files)
    return name, loaded


def store_upload(files: dict[str, bytes], dest: Path | None = None, owner: str | None = None) -> CheckpointEntry:
    """Validate an upload (:func:`validate_upload`) and store it as ``<runs>/uploads/NAME/`` (a folder) or
    ``<runs>/uploads/NAME.{json,safetensors}`` (a flat pair), ``NAME-2``, ``NAME-3``... if taken. Returns its
    entry.

    Never replaces a file: the name is claimed atomically (``os.mkdir`` of the new folder, or ``os.link`` of
    the fully written file onto the free name; the weights first, the JSON last), so two uploads of one name
    at the same moment are both kept, under two names. ``owner``: the session storing it (see
    :func:`may_change`).

    Raises :class:`CatalogError` as :func:`validate_upload` does; nothing is written when it fails.
    """
    name, folder, parts, _ = _validate(files)
    dest = Path(dest) if dest is not None else runs_dir() / UPLOAD_SUBDIR
    dest.mkdir(parents=True, exist_ok=True)
    root = runs_dir() if _inside(dest, runs_dir()) else dest
    try:
        if folder:
            order = [f for f in (ckpt_files.WEIGHTS, *ckpt_files.FOLDER_FILES[2:], ckpt_files.META)
                     if f in parts]
            final = ckpt_files.create_exclusive_folder(dest, name, {f: parts[f] for f in order},
                                                       mode=0o666 & ~ckpt_files.UMASK, dir_mode=0o777 & ~ckpt_files.UMASK)
        else:
            final = ckpt_files.create_exclusive(dest, name, {".safetensors": parts[".safetensors"],
                                                             ".json": parts[".json"]}, mode=0o666 & ~ckpt_files.UMASK)
    except OSError as exc:
        raise CatalogError(f"the upload could not be stored: {exc.strerror or exc}") from None
    entry = read_folder(dest / final, root, "user") if folder else read_pair(dest / f"{final}.json", root,
                                                                                 "user")
    if entry is None:  # pragma: no cover - validated above
        raise CatalogError("the upload could not be stored")
    record_owner(entry.path, owner)
    return entry


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False
