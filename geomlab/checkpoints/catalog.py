"""Finding checkpoints for the app: bundled ones and the user's own, with their cards.

A checkpoint is a folder ``NAME/`` (``config.json``, ``model.safetensors``, ``README.md``, ``geomlab.json``)
or a flat pair ``NAME.safetensors`` + ``NAME.json`` (see :mod:`geomlab.checkpoints.io`). The catalog looks in two
places:

* **bundled**: ``assets/checkpoints/`` next to the package (override with ``GEOMLAB_BUNDLED_DIR``;
  :func:`geomlab.core.locate.bundled_dir`);
* **user**: ``runs/`` in the current working directory (override with ``GEOMLAB_RUNS_DIR``), searched
  up to :data:`MAX_DEPTH` folders deep, so ``runs/my-run/last.json`` and ``runs/sweep/a/`` are found too.

Every checkpoint has a *ref*, a short string that names it safely in a URL (the app's ``?ckpt=`` query
parameter): ``bundled/NAME`` or ``runs/SUB/NAME`` (the folder's relative path, or the pair's without suffix;
a folder and a flat pair of one name: the folder is listed). :func:`resolve` only ever maps a ref to a file
inside one of the two folders, so a link cannot point the app at an arbitrary path.

Listing reads only the JSON (and a folder's ``config.json``) and the weights' header (cheap); weights are
loaded by :func:`geomlab.checkpoints.io.load` when a view needs them. Uploads are validated with that same loader before they are stored (:func:`store_upload`).

Nothing here imports streamlit (design choice: the app is a thin layer over this module).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlab.checkpoints import files as ckpt_files
from geomlab.core.locate import bundled_dir  # the bundled checkpoints' folder (GEOMLAB_BUNDLED_DIR or the package's)

#: How many folders below ``runs/`` are searched for checkpoints (design choice).
MAX_DEPTH = 3
#: Largest accepted upload, in bytes, per file (design choice; the bundled models are well under 10 MB).
MAX_UPLOAD_BYTES = 200 * 1024 * 1024
#: Sub-folder of the runs folder where validated uploads are stored.
UPLOAD_SUBDIR = "uploads"

def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import (os.umask is only read by setting it: not thread-safe later)

_NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


class CatalogError(ValueError):
    """A checkpoint reference or upload the catalog cannot accept (message is one readable line)."""


def runs_dir() -> Path:
    """Folder of the user's checkpoints: ``$GEOMLAB_RUNS_DIR`` or ``./runs`` (relative to the working dir)."""
    env = os.environ.get("GEOMLAB_RUNS_DIR")
    return Path(env) if env else Path.cwd() / "runs"


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


@dataclass(frozen=True)
class CheckpointEntry:
    """One checkpoint found on disk, described by its JSON (no weights loaded).

    ``path`` is the folder (``folder`` true) or the flat pair's ``.json`` file (what
    :func:`geomlab.checkpoints.io.load` takes); ``stem`` the folder or the pair's common path without suffix;
    ``source`` is ``"bundled"`` or ``"user"``; ``meta`` the checkpoint description (``model_config``,
    ``card``, ...); ``mtime`` the newest of the weights' and the JSON's modification times (seconds), used as
    a cache key so a re-saved checkpoint is reloaded.
    """

    ref: str
    source: str
    path: Path
    mtime: float
    meta: dict = field(repr=False, hash=False, compare=False)
    folder: bool = False

    @property
    def stem(self) -> Path:
        return self.path if self.folder else self.path.with_suffix("")

    @property
    def weights(self) -> Path:
        return self.path / ckpt_files.WEIGHTS if self.folder else self.path.with_suffix(".safetensors")

    @property
    def name(self) -> str:
        return self.path.name if self.folder else self.path.stem

    @property
    def model_config(self) -> dict:
        cfg = self.meta.get("model_config")
        return cfg if isinstance(cfg, dict) else {}

    @property
    def card(self) -> dict:
        card = self.meta.get("card")
        return card if isinstance(card, dict) else {}

    @property
    def kind(self) -> str:
        return str(self.model_config.get("kind") or self.card.get("kind") or "?")

    @property
    def group(self) -> str | None:
        g = self.model_config.get("group") or self.card.get("group")
        return str(g) if g else None

    def _card_get(self, *names: str) -> Any:
        card = self.card
        for n in names:
            if n in card and card[n] is not None:
                return card[n]
            if "." in n:  # nested key such as "params.effective"
                head, tail = n.split(".", 1)
                sub = card.get(head)
                if isinstance(sub, dict) and sub.get(tail) is not None:
                    return sub[tail]
        return None

    @property
    def params(self) -> int | None:
        v = _num(self._card_get("params_effective", "params.effective", "params", "n_params"))
        return int(v) if v is not None else None

    @property
    def corpus(self) -> str:
        c = self._card_get("corpus", "data", "task")
        if isinstance(c, dict):
            c = c.get("name") or json.dumps(c, sort_keys=True)
        return str(c) if c is not None else "?"

    @property
    def valid_bpc(self) -> float | None:
        return _num(self._card_get("valid_bpc", "bpc.valid", "bpc_valid"))

    @property
    def test_bpc(self) -> float | None:
        return _num(self._card_get("test_bpc", "bpc.test", "bpc_test"))

    @property
    def task(self) -> dict | None:
        """The card's ``task`` entry when it is a dict (e.g. ``{"task": "word-problem", "group": "S5"}``)."""
        t = self.card.get("task")
        return t if isinstance(t, dict) else None

    @property
    def is_word_problem(self) -> bool:
        """Whether the checkpoint was trained on a group word problem (its outputs are running products)."""
        t = self.task
        return bool(t and t.get("task") == "word-problem")

    @property
    def valid_accuracy(self) -> float | None:
        """Word problem: accuracy of the running-product label over all positions, valid split ([0, 1])."""
        return _num(self._card_get("valid_accuracy", "accuracy.valid"))

    @property
    def test_accuracy(self) -> float | None:
        """Word problem: accuracy of the running-product label over all positions, test split ([0, 1])."""
        return _num(self._card_get("test_accuracy", "accuracy.test"))

    @property
    def accuracy_by_length(self) -> dict[int, float]:
        """Word problem: final-position accuracy by sequence length ``{length: accuracy}``, sorted by length
        (empty when the card has none)."""
        raw = self.card.get("accuracy_by_length")
        out: dict[int, float] = {}
        if isinstance(raw, dict):
            for k, v in raw.items():
                n, a = _num(k), _num(v)
                if n is not None and a is not None:
                    out[int(n)] = a
        return dict(sorted(out.items()))

    @property
    def n_outputs(self) -> int | None:
        """Size of the output vocabulary (the group order for a word problem), from the JSON."""
        v = _num(self.model_config.get("vocab_size"))
        if v is None:
            tokens = (self.meta.get("vocab") or {}).get("tokens")
            v = float(len(tokens)) if isinstance(tokens, list) and tokens else None
        return int(v) if v else None

    @property
    def metric(self) -> tuple[str, float | None, float | None]:
        """``(name, valid, test)`` of the checkpoint's headline metric: ``("accuracy", ...)`` for a word
        problem (higher is better), ``("BPC", ...)`` otherwise (bits per character, lower is better); the
        values are None where the card has none."""
        if self.is_word_problem:
            return "accuracy", self.valid_accuracy, self.test_accuracy
        return "BPC", self.valid_bpc, self.test_bpc

    @property
    def steps(self) -> int | None:
        v = _num(self._card_get("steps", "step"))
        return int(v) if v is not None else None

    @property
    def title(self) -> str:
        """A human label such as ``osmformer · O · 98k params · tinyshakespeare``."""
        parts = [self.kind]
        if self.group:
            parts.append(self.group)
        if self.params:
            parts.append(_fmt_params(self.params) + " params")
        if self.corpus != "?":
            parts.append(self.corpus)
        return f"{self.name} ({' · '.join(parts)})"

    def summary(self) -> dict[str, Any]:
        """A flat dict for a table row: name, source, kind, group, params, corpus, steps, ``metric``
        (``"BPC"`` or ``"accuracy"``, see :attr:`metric`), ``valid`` and ``test`` (that metric, None where
        the card has none), ref."""
        metric, valid, test = self.metric
        return {
            "name": self.name, "source": self.source, "kind": self.kind, "group": self.group or "",
            "params": self.params, "corpus": self.corpus, "steps": self.steps,
            "metric": metric, "valid": valid, "test": test, "ref": self.ref,
        }


def _fmt_params(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.1f}M"
    if n >= 1_000:
        return f"{n / 1e3:.0f}k"
    return str(n)


def _visible(part: str) -> bool:
    """Whether a folder or file name is one the catalog looks at (dot names are working/temporary files)."""
    return bool(part) and not part.startswith(".")


def _read_entry(json_path: Path, root: Path, source: str) -> CheckpointEntry | None:
    """The entry of ``json_path`` when it is a listed checkpoint: both halves regular files (no symlink,
    FIFO or device: they are never opened), a JSON that belongs with the weights (same save id, see
    :mod:`geomlab.checkpoints.files`) and describes a model; else None. Reads only the JSON and the weights' header."""
    weights = json_path.with_suffix(".safetensors")
    if not (ckpt_files.is_regular(json_path) and ckpt_files.is_regular(weights)):
        return None
    try:
        meta = ckpt_files.pair_meta(json_path, weights, ckpt_files.header_save_id(weights, follow=False),
                                    _read_json, repair=False, follow=False)
        st_json, st_weights = os.lstat(json_path), os.lstat(weights)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or "model_config" not in meta:
        return None  # some other JSON file (a trace, a config) lying around
    rel = json_path.relative_to(root).with_suffix("").as_posix()
    prefix = "bundled" if source == "bundled" else "runs"
    mtime = max(st_json.st_mtime, st_weights.st_mtime)
    return CheckpointEntry(ref=f"{prefix}/{rel}", source=source, path=json_path, mtime=mtime, meta=meta)


def _read_folder(folder: Path, root: Path, source: str) -> CheckpointEntry | None:
    """The entry of checkpoint folder ``folder`` (not a symlink) when it is a listed checkpoint: its
    ``geomlab.json`` and ``model.safetensors`` regular files, the description (with ``config.json``) the one
    that belongs with the weights (:func:`geomlab.checkpoints.files.folder_meta`); else None. Never repairs."""
    meta_path, weights = folder / ckpt_files.META, folder / ckpt_files.WEIGHTS
    if os.path.islink(folder) or not ckpt_files.is_regular(weights):
        return None
    try:
        wid = ckpt_files.header_save_id(weights, follow=False)
        meta = ckpt_files.folder_meta(folder, wid, _read_json, repair=False, follow=False)
        times = [os.lstat(weights).st_mtime]
        if ckpt_files.is_regular(meta_path):
            times.append(os.lstat(meta_path).st_mtime)
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("model_config"), dict):
        return None
    rel = folder.relative_to(root).as_posix()
    prefix = "bundled" if source == "bundled" else "runs"
    return CheckpointEntry(ref=f"{prefix}/{rel}", source=source, path=folder, mtime=max(times), meta=meta,
                           folder=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(ckpt_files.read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"{path.name} cannot be read") from exc


def _scan(root: Path, source: str, depth: int) -> list[CheckpointEntry]:
    if not root.is_dir():
        return []
    found: list[CheckpointEntry] = []
    for dirpath, dirnames, filenames in os.walk(root):  # never into symlinked folders (followlinks=False)
        rel_depth = len(Path(dirpath).relative_to(root).parts)
        if rel_depth >= depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if _visible(d) and not os.path.islink(os.path.join(dirpath, d)))
        if rel_depth >= 1 and ckpt_files.WEIGHTS in filenames:
            entry = _read_folder(Path(dirpath), root, source)
            if entry is not None:
                found.append(entry)
        for fn in sorted(filenames):
            if fn.endswith(".json") and _visible(fn):
                entry = _read_entry(Path(dirpath) / fn, root, source)
                if entry is not None:
                    found.append(entry)
    folders = {e.ref for e in found if e.folder}
    return [e for e in found if e.folder or e.ref not in folders]  # a folder hides a flat pair of its name


def list_checkpoints(bundled: bool = True, user: bool = True) -> list[CheckpointEntry]:
    """Every checkpoint found: bundled ones first (by name), then user ones (newest first).

    Unreadable or half-written pairs are skipped silently (a run may be writing one right now).
    """
    out: list[CheckpointEntry] = []
    if bundled:
        out += _scan(bundled_dir(), "bundled", depth=1)
    if user:
        out += sorted(_scan(runs_dir(), "user", depth=MAX_DEPTH), key=lambda e: -e.mtime)
    return out


def signature() -> tuple:
    """A cheap value that changes whenever a checkpoint is added, removed or re-saved (for caching the
    listing): the (path, mtime, size) of every ``.json`` and ``.safetensors`` the listing would look at
    (``lstat``: nothing is opened, no symlink followed)."""
    sig = []
    for root, depth in ((bundled_dir(), 1), (runs_dir(), MAX_DEPTH)):
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if len(Path(dirpath).relative_to(root).parts) >= depth:
                dirnames[:] = []
            dirnames[:] = [d for d in dirnames if _visible(d)]
            for fn in filenames:
                if fn.endswith((".json", ".safetensors")) and _visible(fn):
                    p = Path(dirpath) / fn
                    try:
                        st = os.lstat(p)
                        sig.append((str(p), st.st_mtime_ns, st.st_size, st.st_mode))
                    except OSError:
                        pass
    return tuple(sorted(sig))


#: Longest checkpoint reference accepted (characters; design choice, far above any listed one).
MAX_REF_CHARS = 512
#: Longest file or folder name in a reference (bytes of UTF-8; the usual file-system limit, less the suffix).
MAX_PART_BYTES = 240


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[:n] + f"… ({len(text):,} characters)"


def resolve(ref: str) -> CheckpointEntry:
    """The catalog entry named by ``ref`` (``bundled/NAME`` or ``runs/SUB/NAME``).

    A ref resolves exactly when :func:`list_checkpoints` lists it: no ``..``, no folder or file starting
    with a dot, no symlink anywhere below the folder, at most as deep as the listing looks, both halves
    regular files. Raises :class:`CatalogError` (one line, the ref shortened) for a malformed or too long
    ref, a path that would leave the two folders, or a checkpoint that does not exist.
    """
    usage = "(expected 'bundled/NAME' or 'runs/NAME')"
    if not isinstance(ref, str) or "/" not in ref:
        raise CatalogError(f"not a checkpoint reference: {_short(repr(ref))} {usage}")
    if len(ref) > MAX_REF_CHARS:
        raise CatalogError(f"checkpoint reference too long: {len(ref):,} characters (at most "
                           f"{MAX_REF_CHARS}): {_short(repr(ref), 40)}")
    prefix, rel = ref.split("/", 1)
    roots = {"bundled": (bundled_dir(), "bundled", 1), "runs": (runs_dir(), "user", MAX_DEPTH)}
    if rel.endswith(".json"):
        rel = rel[: -len(".json")]
    parts = rel.split("/")
    if prefix not in roots or not rel or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise CatalogError(f"not a checkpoint reference: {_short(repr(ref))} {usage}")
    if any(len(p.encode("utf-8", "surrogatepass")) > MAX_PART_BYTES for p in parts):
        raise CatalogError(f"checkpoint reference has a name longer than {MAX_PART_BYTES} bytes: "
                           f"{_short(repr(ref), 40)}")
    root, source, depth = roots[prefix]
    missing = CatalogError(f"no checkpoint {_short(repr(ref))} (looked for a folder {_short(parts[-1], 40)}/ "
                           f"and {_short(parts[-1], 40)}.json and .safetensors in {prefix}/)")
    if len(parts) - 1 > depth or not all(_visible(p) for p in parts):
        raise missing  # deeper than the listing looks, or a dot folder/file the listing skips
    symlink = CatalogError(f"checkpoint reference {_short(repr(ref))} points outside the checkpoint folders (a "
                           "symlink); only regular files inside them are opened")
    folder = root
    try:
        for p in parts[:-1]:
            folder = folder / p
            st = os.lstat(folder)
            if stat.S_ISLNK(st.st_mode):
                raise CatalogError(f"checkpoint reference {_short(repr(ref))} goes through a symlink; only "
                                   "files inside the checkpoint folders are opened")
            if not stat.S_ISDIR(st.st_mode):
                raise missing
        last = folder / parts[-1]  # a folder checkpoint (never through a symlink: the listing skips those)
        if not os.path.islink(last) and len(parts) <= depth and os.path.isdir(last) and \
                os.path.lexists(last / ckpt_files.WEIGHTS):
            for p in (last / ckpt_files.WEIGHTS, last / ckpt_files.META, last / ckpt_files.CONFIG):
                if os.path.islink(p):
                    raise symlink
            entry = _read_folder(last, root, source)
            if entry is not None:
                return entry
        json_path = folder / (parts[-1] + ".json")
        for p in (json_path, json_path.with_suffix(".safetensors")):
            if os.path.islink(p):
                raise symlink
    except FileNotFoundError:
        raise missing from None
    except (OSError, ValueError) as exc:  # ENAMETOOLONG, ELOOP, EACCES...: one line, never a raw OSError
        if isinstance(exc, CatalogError):
            raise
        raise CatalogError(f"checkpoint reference {_short(repr(ref), 40)} cannot be opened: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    entry = _read_entry(json_path, root, source)
    if entry is None:
        raise missing
    return entry


def safe_name(name: str) -> str:
    """``name`` reduced to letters, digits, ``.``, ``_`` and ``-`` (at most 64 characters); ``"checkpoint"``
    if nothing is left. Every other run of characters (spaces, ``/``, emoji) and every ``..`` becomes one
    ``-``, so no path part survives and none of the name is silently dropped:
    ``"my tiny run/../x 😀"`` -> ``"my-tiny-run-x"`` (design choice)."""
    cleaned = _NAME_RE.sub("-", name)
    cleaned = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", "-", cleaned)).strip("-.")
    return cleaned[:64].strip("-.") or "checkpoint"


#: Files a checkpoint folder upload may hold (the weights, the two JSON files, the model card).
FOLDER_FILES = (ckpt_files.WEIGHTS, ckpt_files.CONFIG, ckpt_files.META, ckpt_files.CARD)


def _unzip(name: str, data: bytes) -> dict[str, bytes]:
    """The files of an uploaded ``.zip`` (``NAME.zip`` holding a checkpoint folder ``NAME/...`` or its files,
    or a flat pair) as ``{path: bytes}``: folder entries, ``__MACOSX/`` and dot files skipped; nothing is
    extracted to disk; sizes are checked against :data:`MAX_UPLOAD_BYTES` before a member is read.
    :class:`CatalogError` for a file that is not a zip, a member nested deeper than one folder, or too large."""
    import io
    import zipfile

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = [i for i in zf.infolist() if not i.is_dir()]
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise CatalogError(f"{_short(name)} is not a readable zip file ({exc})") from None
    out: dict[str, bytes] = {}
    total = 0
    for info in infos:
        parts = [p for p in info.filename.replace("\\", "/").split("/") if p]
        if not parts or parts[0] == "__MACOSX" or parts[-1].startswith("."):
            continue
        if len(parts) > 2:
            raise CatalogError(f"{_short(name)} holds {_short(info.filename, 60)}: zip the checkpoint folder "
                               "itself (its files at most one folder deep)")
        total += info.file_size
        if info.file_size > MAX_UPLOAD_BYTES or total > 2 * MAX_UPLOAD_BYTES:
            raise CatalogError(f"{_short(name)} unpacks to more than the upload limit of "
                               f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB per file")
        try:
            out["/".join(parts)] = zf.read(info)
        except (zipfile.BadZipFile, ValueError, OSError, RuntimeError) as exc:  # CRC error, encrypted, ...
            raise CatalogError(f"{_short(name)}: {_short(info.filename, 60)} cannot be read ({exc})") from None
    if not out:
        raise CatalogError(f"{_short(name)} holds no files")
    return out


def _upload_parts(files: dict[str, bytes]) -> tuple[str, bool, dict[str, bytes]]:
    """``(name, folder, parts)`` of an upload: a flat pair (``parts`` keyed ``.json``/``.safetensors``) or a
    checkpoint folder's files (keyed by :data:`FOLDER_FILES` names); a single ``.zip`` is unpacked first.
    :class:`CatalogError` (one line) for anything else."""
    if not files:
        raise CatalogError("no files: upload a checkpoint folder's files (config.json, model.safetensors, "
                           "geomlab.json, README.md) or a .zip of the folder, or a NAME.safetensors with its "
                           "NAME.json")
    zip_name = None
    if len(files) == 1 and next(iter(files)).lower().endswith(".zip"):
        zip_name, data = next(iter(files.items()))
        if len(data) > MAX_UPLOAD_BYTES:
            raise CatalogError(f"{_short(zip_name)} is {len(data) / 2**20:.0f} MiB; the limit is "
                               f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB")
        files = _unzip(zip_name, data)
    base = {f: Path(f.replace("\\", "/")).name for f in files}
    folders = {Path(f.replace("\\", "/")).parent.name for f in files} - {""}
    weights = [f for f, b in base.items() if b.lower().endswith(".safetensors")]
    is_folder = bool({ckpt_files.META, ckpt_files.CONFIG} & set(base.values())) and \
        all(base[f] == ckpt_files.WEIGHTS for f in weights)
    if not is_folder:
        name, pair = _flat_parts(files)
        return name, False, pair
    other = sorted(b for b in base.values() if b not in FOLDER_FILES)
    if other:
        raise CatalogError(f"unexpected file {_short(', '.join(other))} in a checkpoint folder (it holds "
                           f"{', '.join(FOLDER_FILES)}; pickled .pt/.pth files are not accepted)")
    parts: dict[str, bytes] = {}
    for f, b in base.items():
        if b in parts:
            raise CatalogError(f"{b} uploaded twice; upload one checkpoint folder")
        parts[b] = files[f]
    for need in (ckpt_files.WEIGHTS, ckpt_files.CONFIG, ckpt_files.META):
        if need not in parts:
            raise CatalogError(f"the folder's {need} is missing: upload config.json, model.safetensors and "
                               "geomlab.json together (README.md is optional)")
    for fname, data in parts.items():
        _check_size(fname, data)
    try:
        meta = json.loads(parts[ckpt_files.META].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"{ckpt_files.META} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or "tensors" not in meta:
        raise CatalogError(f"{ckpt_files.META} is not a geomlab checkpoint description (no 'tensors')")
    named = (folders.pop() if len(folders) == 1 else None) or (Path(zip_name).stem if zip_name else None) or \
        meta.get("name")
    return safe_name(str(named or "checkpoint")), True, parts


def _check_size(fname: str, data: bytes) -> None:
    if len(data) == 0:
        raise CatalogError(f"{_short(fname)} is empty")
    if len(data) > MAX_UPLOAD_BYTES:
        raise CatalogError(f"{_short(fname)} is {len(data) / 2**20:.0f} MiB; the limit is "
                           f"{MAX_UPLOAD_BYTES / 2**20:.0f} MiB")


def _flat_parts(files: dict[str, bytes]) -> tuple[str, dict[str, bytes]]:
    by_suffix: dict[str, list[str]] = {}
    for fname in files:
        by_suffix.setdefault(Path(fname).suffix.lower(), []).append(fname)
    other = sorted(set(by_suffix) - {".safetensors", ".json"})
    if other:
        raise CatalogError(f"unexpected file type {_short(', '.join(other))}: a checkpoint is a folder's files "
                           "(or a .zip of the folder), or a .safetensors file plus its .json (pickled .pt/.pth "
                           "files are not accepted)")
    for suffix in (".safetensors", ".json"):
        if len(by_suffix.get(suffix, [])) > 1:
            raise CatalogError(f"{len(by_suffix[suffix])} {suffix} files uploaded; upload exactly one pair")
    if by_suffix.get(".json"):  # a lone JSON is judged first: "not a checkpoint" says more than "half missing"
        json_name = by_suffix[".json"][0]
        _check_size(json_name, files[json_name])
        try:
            meta = json.loads(files[json_name].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CatalogError(f"{_short(json_name)} is not valid JSON ({exc})") from None
        if not isinstance(meta, dict) or "model_config" not in meta:
            raise CatalogError(f"{_short(json_name)} is not a geomlab checkpoint description (no "
                               "'model_config')")
    weights = by_suffix.get(".safetensors", [])
    if weights and not by_suffix.get(".json") and Path(weights[0].replace("\\", "/")).name == ckpt_files.WEIGHTS:
        raise CatalogError(f"{ckpt_files.WEIGHTS} is a checkpoint folder's weights: upload it together with the "
                           f"folder's {ckpt_files.CONFIG} and {ckpt_files.META} ({ckpt_files.CARD} is optional), "
                           "or a .zip of the folder")
    for suffix in (".safetensors", ".json"):
        if not by_suffix.get(suffix):
            missing = "weights (.safetensors)" if suffix == ".safetensors" else "description (.json)"
            raise CatalogError(f"the {missing} file is missing: upload both halves of the checkpoint "
                               "(NAME.safetensors with NAME.json), or a checkpoint folder's files")
    json_name, st_name = by_suffix[".json"][0], by_suffix[".safetensors"][0]
    stems = [Path(f.replace("\\", "/")).stem for f in (json_name, st_name)]
    if stems[0] != stems[1]:  # two checkpoints' halves of one shape would load, silently mismatched
        raise CatalogError(f"{_short(json_name)} and {_short(st_name)} are not one pair: a flat pair is NAME.json "
                           "with NAME.safetensors (rename one if they belong together)")
    _check_size(st_name, files[st_name])
    return safe_name(Path(json_name).stem), {".json": files[json_name], ".safetensors": files[st_name]}


def _validate(files: dict[str, bytes]) -> tuple[str, bool, dict[str, bytes], Any]:
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
    ``model.safetensors``, ``geomlab.json``, optionally ``README.md``), a single ``NAME.zip`` of such a folder
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
            order = [f for f in (ckpt_files.WEIGHTS, ckpt_files.CONFIG, ckpt_files.CARD, ckpt_files.META)
                     if f in parts]
            final = ckpt_files.create_exclusive_folder(dest, name, {f: parts[f] for f in order},
                                                       mode=0o666 & ~_UMASK, dir_mode=0o777 & ~_UMASK)
        else:
            final = ckpt_files.create_exclusive(dest, name, {".safetensors": parts[".safetensors"],
                                                             ".json": parts[".json"]}, mode=0o666 & ~_UMASK)
    except OSError as exc:
        raise CatalogError(f"the upload could not be stored: {exc.strerror or exc}") from None
    entry = _read_folder(dest / final, root, "user") if folder else _read_entry(dest / f"{final}.json", root,
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


# ------------------------------------------------------------------------------------------- ownership
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


def may_change(entry: "CheckpointEntry | Path", owner: str | None) -> bool:
    """Whether session ``owner`` may delete or save over a user checkpoint: one this session created (a
    validated upload, a Train live save; remembered by this server process), or any user checkpoint when
    the server shares everything (:func:`shared_mode`). Bundled checkpoints never. (Train live's Save still
    never replaces a file no session created, shared or not: see :meth:`geomlab.live.runner.LiveRun.save`.)"""
    if isinstance(entry, CheckpointEntry):
        if entry.source != "user":
            return False
        path = entry.path
    else:
        path = Path(entry)
    if shared_mode():
        return True
    made_by = owner_of(path)
    return made_by is not None and owner is not None and made_by == owner


def forget_owner(path: Path) -> None:
    with _OWNERS_LOCK:
        _OWNERS.pop(_owner_key(path), None)


def delete_user_checkpoint(ref: str, owner: str | None = None) -> None:
    """Remove a user checkpoint: a flat pair, or a folder's checkpoint files and then the folder when nothing
    else is left in it (the JSON first, so it leaves the listing at once).

    Raises :class:`CatalogError` for a bundled or unknown ref, and for a checkpoint that session ``owner``
    may not change (:func:`may_change`: another session's, or one the app did not create)."""
    entry = resolve(ref)
    if entry.source != "user":
        raise CatalogError("bundled checkpoints cannot be deleted from the app")
    if not may_change(entry, owner):
        raise CatalogError(f"{_short(ref)} was not created by this session, so it cannot be deleted here "
                           f"(a server started with {SHARED_ENV}=1 lets every session change what any session "
                           "created)")
    if entry.folder:  # the JSON first (it leaves the listing at once), then the rest; never other files
        names = (ckpt_files.META, ckpt_files.WEIGHTS, ckpt_files.CONFIG, ckpt_files.CARD)
        journals = [n for n in os.listdir(entry.path)
                    if n.startswith(tuple(f".{m}." for m in names)) and n.endswith(".next")]
        paths = [entry.path / n for n in (*names, *journals)]
    else:
        paths = [entry.path, entry.weights]
    for p in paths:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    if entry.folder:
        try:
            entry.path.rmdir()  # only when nothing else is in it
        except OSError:
            pass
    forget_owner(entry.path)

