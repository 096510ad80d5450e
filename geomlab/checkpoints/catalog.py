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
loaded by :func:`geomlab.checkpoints.io.load` when a view needs them. A user checkpoint is deleted here
(:func:`delete_user_checkpoint`) by the session that may change it (:mod:`geomlab.checkpoints.ownership`);
uploads are :mod:`geomlab.checkpoints.uploads`.

Nothing here imports streamlit (design choice: the app is a thin layer over this module).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints import foreign
from geomlab.checkpoints.files import short
# who may change what is ownership's; its names are also reached as catalog.NAME (live runs, the Train page)
from geomlab.checkpoints.ownership import (SHARED_ENV, forget_owner, may_change, owner_of,  # noqa: F401
                                           record_owner, shared_mode)
from geomlab.core.locate import bundled_dir  # the bundled checkpoints' folder (GEOMLAB_BUNDLED_DIR or the package's)

#: How many folders below ``runs/`` are searched for checkpoints (design choice).
MAX_DEPTH = 3

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


@dataclass(frozen=True)
class BrokenEntry:
    """A checkpoint the listing found but cannot read: its ``ref`` and ``path`` as
    :class:`CheckpointEntry` would have them, ``source`` (``"bundled"`` or ``"user"``) and ``reason``, one
    line saying what is wrong (a file nested too deeply, truncated, unreadable, a folder where a file
    should be...)."""

    ref: str
    source: str
    path: Path
    reason: str
    folder: bool = False


def unreadable_reason(exc: BaseException, what: str) -> str:
    """One line (at most about 300 characters) for why checkpoint ``what`` (a ref or path) cannot be read,
    from the error ``exc`` that reading it raised: the error's own line when it is one of the readers'
    one-line errors (``ValueError``, ``OSError``), a fixed sentence for errors whose text is not for people
    (``RecursionError``, ``MemoryError``), else "unexpected content" with the error's type and first line
    (a JSON of the wrong shape that a reader did not expect)."""
    what = short(what, 80, count=False)
    if isinstance(exc, RecursionError):
        return f"{what}: a JSON file in it (or the weights' header) is nested too deeply to read"
    if isinstance(exc, MemoryError):
        return f"{what}: a file in it is too large to read"
    if isinstance(exc, OSError) and exc.strerror:
        name = Path(exc.filename).name if exc.filename else "a file"
        return f"{what}: {short(name, 80, count=False)} cannot be read: {exc.strerror}"
    first = (str(exc).strip().splitlines() or [""])[0]
    if not isinstance(exc, ValueError) or not first:
        first = f"unexpected content ({type(exc).__name__}: {short(first, 160, count=False)})".replace(": )", ")")
    return f"{what}: {short(first, 200, count=False)}"


def _ref(path: Path, root: Path, source: str) -> str:
    prefix = "bundled" if source == "bundled" else "runs"
    return f"{prefix}/{path.relative_to(root).as_posix()}"


def _pair_entry(json_path: Path, root: Path, source: str) -> CheckpointEntry | None:
    """:func:`read_pair`, raising what reading the pair raised (None: not a checkpoint pair)."""
    weights = json_path.with_suffix(".safetensors")
    if not (ckpt_files.is_regular(json_path) and ckpt_files.is_regular(weights)):
        return None
    meta = ckpt_files.pair_meta(json_path, weights, ckpt_files.header_save_id(weights, follow=False),
                                ckpt_files.read_json, repair=False, follow=False)
    st_json, st_weights = os.lstat(json_path), os.lstat(weights)
    if not isinstance(meta, dict) or "model_config" not in meta:
        return None  # some other JSON file (a trace, a config) lying around
    mtime = max(st_json.st_mtime, st_weights.st_mtime)
    return CheckpointEntry(ref=_ref(json_path.with_suffix(""), root, source), source=source, path=json_path,
                           mtime=mtime, meta=meta)


def _folder_entry(folder: Path, root: Path, source: str) -> CheckpointEntry | None:
    """:func:`read_folder`, raising what reading the folder raised (None: not a checkpoint folder)."""
    meta_path, weights = folder / ckpt_files.META, folder / ckpt_files.WEIGHTS
    if os.path.islink(folder) or not ckpt_files.is_regular(weights):
        return None
    if foreign.is_foreign(folder):  # a transformers GPT-2 folder: its config.json and tokenizer
        meta = foreign.read_meta(folder)
    else:
        wid = ckpt_files.header_save_id(weights, follow=False)
        meta = ckpt_files.folder_meta(folder, wid, ckpt_files.read_json, repair=False, follow=False)
    times = [os.lstat(weights).st_mtime]
    if ckpt_files.is_regular(meta_path):
        times.append(os.lstat(meta_path).st_mtime)
    if not isinstance(meta, dict) or not isinstance(meta.get("model_config"), dict):
        return None
    return CheckpointEntry(ref=_ref(folder, root, source), source=source, path=folder, mtime=max(times), meta=meta,
                           folder=True)


def _entry(read, path: Path, root: Path, source: str) -> CheckpointEntry | BrokenEntry | None:
    """``read(path, root, source)``, or a :class:`BrokenEntry` with the reason when reading fails.

    Design choice: every error is caught here, one entry at a time (``Exception``: a file may break a
    reader in ways nobody listed), so one broken checkpoint never hides the others."""
    try:
        return read(path, root, source)
    except Exception as exc:  # noqa: BLE001 - isolation: the reason is shown, the listing goes on
        stem = path if read is _folder_entry else path.with_suffix("")
        ref = _ref(stem, root, source)
        return BrokenEntry(ref=ref, source=source, path=path, reason=unreadable_reason(exc, ref),
                           folder=read is _folder_entry)


def read_pair(json_path: Path, root: Path, source: str) -> CheckpointEntry | None:
    """The entry of ``json_path`` when it is a listed checkpoint: both halves regular files (no symlink,
    FIFO or device: they are never opened), a JSON that belongs with the weights (same save id, see
    :mod:`geomlab.checkpoints.files`) and describes a model; else None (a broken pair too: see
    :func:`broken_checkpoints`). Reads only the JSON and the weights' header."""
    entry = _entry(_pair_entry, json_path, root, source)
    return entry if isinstance(entry, CheckpointEntry) else None


def read_folder(folder: Path, root: Path, source: str) -> CheckpointEntry | None:
    """The entry of checkpoint folder ``folder`` (not a symlink) when it is a listed checkpoint: its
    ``geomlab.json`` and ``model.safetensors`` regular files, the description (with ``config.json``) the one
    that belongs with the weights (:func:`geomlab.checkpoints.files.folder_meta`); else None (a broken
    folder too: see :func:`broken_checkpoints`). Never repairs."""
    entry = _entry(_folder_entry, folder, root, source)
    return entry if isinstance(entry, CheckpointEntry) else None


def _scan(root: Path, source: str, depth: int) -> tuple[list[CheckpointEntry], list[BrokenEntry]]:
    if not root.is_dir():
        return [], []
    found: list[CheckpointEntry | BrokenEntry] = []
    for dirpath, dirnames, filenames in os.walk(root):  # never into symlinked folders (followlinks=False)
        rel_depth = len(Path(dirpath).relative_to(root).parts)
        if rel_depth >= depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if _visible(d) and not os.path.islink(os.path.join(dirpath, d)))
        if rel_depth >= 1 and ckpt_files.WEIGHTS in filenames:
            found.append(_entry(_folder_entry, Path(dirpath), root, source))
        for fn in sorted(filenames):
            if fn.endswith(".json") and _visible(fn):
                found.append(_entry(_pair_entry, Path(dirpath) / fn, root, source))
    folders = {e.ref for e in found if e is not None and e.folder}
    kept = [e for e in found if e is not None and (e.folder or e.ref not in folders)]  # a folder hides a pair
    return [e for e in kept if isinstance(e, CheckpointEntry)], [e for e in kept if isinstance(e, BrokenEntry)]


def scan(bundled: bool = True, user: bool = True) -> tuple[list[CheckpointEntry], list[BrokenEntry]]:
    """``(good, broken)``: every checkpoint found, bundled ones first (by name), then user ones (newest
    first), and every one that cannot be read, with its reason (bundled then user, by ref).

    Each checkpoint is read on its own: one that raises anything (a JSON nested too deeply, a truncated or
    unreadable file, a folder where a file should be) goes to ``broken`` and the others are still listed.
    Files that are not checkpoints (a JSON without weights beside it, a JSON that describes no model) are in
    neither list."""
    good: list[CheckpointEntry] = []
    broken: list[BrokenEntry] = []
    for on, root, source, depth in ((bundled, bundled_dir(), "bundled", 1), (user, runs_dir(), "user", MAX_DEPTH)):
        if on:
            g, b = _scan(root, source, depth)
            good += g if source == "bundled" else sorted(g, key=lambda e: -e.mtime)
            broken += sorted(b, key=lambda e: e.ref)
    return good, broken


def list_checkpoints(bundled: bool = True, user: bool = True) -> list[CheckpointEntry]:
    """Every checkpoint that can be read: bundled ones first (by name), then user ones (newest first)
    (:func:`scan`; the broken ones are :func:`broken_checkpoints`)."""
    return scan(bundled, user)[0]


def broken_checkpoints(bundled: bool = True, user: bool = True) -> list[BrokenEntry]:
    """Every checkpoint found that cannot be read, each with its one-line reason (:func:`scan`)."""
    return scan(bundled, user)[1]


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


def resolve(ref: str) -> CheckpointEntry:
    """The catalog entry named by ``ref`` (``bundled/NAME`` or ``runs/SUB/NAME``).

    A ref resolves exactly when :func:`list_checkpoints` lists it: no ``..``, no folder or file starting
    with a dot, no symlink anywhere below the folder, at most as deep as the listing looks, both halves
    regular files. Raises :class:`CatalogError` (one line, the ref shortened) for a malformed or too long
    ref, a path that would leave the two folders, or a checkpoint that does not exist.
    """
    usage = "(expected 'bundled/NAME' or 'runs/NAME')"
    if not isinstance(ref, str) or "/" not in ref:
        raise CatalogError(f"not a checkpoint reference: {short(repr(ref))} {usage}")
    if len(ref) > MAX_REF_CHARS:
        raise CatalogError(f"checkpoint reference too long: {len(ref):,} characters (at most "
                           f"{MAX_REF_CHARS}): {short(repr(ref), 40)}")
    prefix, rel = ref.split("/", 1)
    roots = {"bundled": (bundled_dir(), "bundled", 1), "runs": (runs_dir(), "user", MAX_DEPTH)}
    if rel.endswith(".json"):
        rel = rel[: -len(".json")]
    parts = rel.split("/")
    if prefix not in roots or not rel or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise CatalogError(f"not a checkpoint reference: {short(repr(ref))} {usage}")
    if any(len(p.encode("utf-8", "surrogatepass")) > MAX_PART_BYTES for p in parts):
        raise CatalogError(f"checkpoint reference has a name longer than {MAX_PART_BYTES} bytes: "
                           f"{short(repr(ref), 40)}")
    root, source, depth = roots[prefix]
    missing = CatalogError(f"no checkpoint {short(repr(ref))} (looked for a folder {short(parts[-1], 40)}/ "
                           f"and {short(parts[-1], 40)}.json and .safetensors in {prefix}/)")
    if len(parts) - 1 > depth or not all(_visible(p) for p in parts):
        raise missing  # deeper than the listing looks, or a dot folder/file the listing skips
    symlink = CatalogError(f"checkpoint reference {short(repr(ref))} points outside the checkpoint folders (a "
                           "symlink); only regular files inside them are opened")
    folder = root
    try:
        for p in parts[:-1]:
            folder = folder / p
            st = os.lstat(folder)
            if stat.S_ISLNK(st.st_mode):
                raise CatalogError(f"checkpoint reference {short(repr(ref))} goes through a symlink; only "
                                   "files inside the checkpoint folders are opened")
            if not stat.S_ISDIR(st.st_mode):
                raise missing
        last = folder / parts[-1]  # a folder checkpoint (never through a symlink: the listing skips those)
        if not os.path.islink(last) and len(parts) <= depth and os.path.isdir(last) and \
                os.path.lexists(last / ckpt_files.WEIGHTS):
            for p in (last / ckpt_files.WEIGHTS, last / ckpt_files.META, last / ckpt_files.CONFIG):
                if os.path.islink(p):
                    raise symlink
            entry = _entry(_folder_entry, last, root, source)
            if isinstance(entry, BrokenEntry):
                raise CatalogError(f"cannot open {entry.reason}")
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
        raise CatalogError(f"checkpoint reference {short(repr(ref), 40)} cannot be opened: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    entry = _entry(_pair_entry, json_path, root, source)
    if isinstance(entry, BrokenEntry):
        raise CatalogError(f"cannot open {entry.reason}")
    if entry is None:
        raise missing
    return entry


def weights_changed(entry: CheckpointEntry) -> str | None:
    """The loader's one-line refusal when listed checkpoint ``entry``'s weights do not have the sha256 its
    description records (changed since the save: a damaged copy, a replaced file, weights edited by hand),
    else None (None too when none is recorded). The loader's own check
    (:func:`geomlab.checkpoints.reading.check_weights`), computed once per file state and process: a page that
    asks on every run pays one ``fstat`` for an unchanged file. Design choice: a checkpoint that will not load
    is marked where it is listed and cannot be selected."""
    from geomlab.checkpoints.reading import check_weights

    try:
        check_weights(entry.path, entry.meta)
    except ValueError as exc:
        return str(exc)
    return None


def same_weights(a: CheckpointEntry, b: CheckpointEntry) -> bool:
    """Whether checkpoints ``a`` and ``b`` hold identical weights: their weights files have the same size and
    sha256 (:func:`geomlab.checkpoints.files.file_sha256`, computed: older checkpoints record none; the same run
    saved under two names gives two such folders). A file of another size is not read; False when either file
    cannot be read. Design choice: Compare's automatic pick of B skips a copy of A."""
    try:
        sa, sb = os.stat(a.weights), os.stat(b.weights)
        if sa.st_size != sb.st_size:
            return False
        return ckpt_files.file_sha256(a.weights) == ckpt_files.file_sha256(b.weights)
    except OSError:
        return False


def safe_name(name: str) -> str:
    """``name`` reduced to letters, digits, ``.``, ``_`` and ``-`` (at most 64 characters); ``"checkpoint"``
    if nothing is left. Every other run of characters (spaces, ``/``, emoji) and every ``..`` becomes one
    ``-``, so no path part survives and none of the name is silently dropped:
    ``"my tiny run/../x 😀"`` -> ``"my-tiny-run-x"`` (design choice)."""
    cleaned = _NAME_RE.sub("-", name)
    cleaned = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", "-", cleaned)).strip("-.")
    return cleaned[:64].strip("-.") or "checkpoint"


def delete_user_checkpoint(ref: str, owner: str | None = None) -> None:
    """Remove a user checkpoint: a flat pair, or a folder's checkpoint files and then the folder when nothing
    else is left in it (the JSON first, so it leaves the listing at once).

    Raises :class:`CatalogError` for a bundled or unknown ref, and for a checkpoint that session ``owner``
    may not change (:func:`may_change`: another session's, or one the app did not create)."""
    entry = resolve(ref)
    if entry.source != "user":
        raise CatalogError("bundled checkpoints cannot be deleted from the app")
    if not may_change(entry, owner):
        raise CatalogError(f"{short(ref)} was not created by this session, so it cannot be deleted here "
                           f"(a server started with {SHARED_ENV}=1 lets every session change what any session "
                           "created)")
    if entry.folder:  # the JSON first (it leaves the listing at once), then the rest; never other files
        names = ckpt_files.FOLDER_FILES
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


#: The demo sentence every view opens on when the checkpoint can read it (design choice: Romeo and Juliet,
#: the Tiny Shakespeare checkpoints' own kind of text).
DEMO_TEXT = "ROMEO: But soft, what light through yonder window breaks? It is the east."


def demo_text(entry: "CheckpointEntry") -> str:
    """A text checkpoint listing ``entry`` can read: its card's ``sample_text``, else :data:`DEMO_TEXT` when a
    character vocabulary knows all of it, else 48 characters (24 words) drawn from the vocabulary with seed 0.
    Reads only the listing's JSON (no model, no torch). Design choice."""
    import numpy as np

    sample = entry.card.get("sample_text")
    if isinstance(sample, str) and sample:
        return sample
    vocab = entry.meta.get("vocab") or {}
    tokens = [str(t) for t in vocab.get("tokens") or []]
    unk, level = vocab.get("unk"), vocab.get("level", "char")
    known = [t for t in tokens if t != unk]
    if not known or level in ("byte", "subword"):  # a standard model's tokenizer reads any text
        return DEMO_TEXT
    rng = np.random.default_rng(0)
    if level == "char":
        if all(c in tokens for c in DEMO_TEXT):
            return DEMO_TEXT
        return "".join(rng.choice(known, size=48))
    return " ".join(rng.choice(known, size=24))
