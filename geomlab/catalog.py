"""Finding checkpoints for the app: bundled ones and the user's own, with their cards.

A checkpoint is a pair ``NAME.safetensors`` + ``NAME.json`` (see :mod:`geomlab.checkpoint`). The catalog
looks in two places:

* **bundled**: ``assets/checkpoints/`` next to the package (override with ``GEOMLAB_BUNDLED_DIR``);
* **user**: ``runs/`` in the current working directory (override with ``GEOMLAB_RUNS_DIR``), searched
  up to :data:`MAX_DEPTH` folders deep, so ``runs/my-run/last.json`` is found too.

Every checkpoint has a *ref*, a short string that names it safely in a URL (the app's ``?ckpt=`` query
parameter): ``bundled/NAME`` or ``runs/SUB/NAME`` (relative path without suffix). :func:`resolve` only ever
maps a ref to a file inside one of the two folders, so a link cannot point the app at an arbitrary path.

Listing reads only the JSON half (cheap); weights are loaded by :func:`geomlab.checkpoint.load` when a view
needs them. Uploads are validated with that same loader before they are stored (:func:`store_upload`).

Nothing here imports streamlit (design choice: the app is a thin layer over this module).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: How many folders below ``runs/`` are searched for checkpoints (design choice).
MAX_DEPTH = 3
#: Largest accepted upload, in bytes, per file (design choice; the bundled models are well under 10 MB).
MAX_UPLOAD_BYTES = 200 * 1024 * 1024
#: Sub-folder of the runs folder where validated uploads are stored.
UPLOAD_SUBDIR = "uploads"

_NAME_RE = re.compile(r"[^A-Za-z0-9._-]+")


class CatalogError(ValueError):
    """A checkpoint reference or upload the catalog cannot accept (message is one readable line)."""


def bundled_dir() -> Path:
    """Folder of the bundled checkpoints: ``$GEOMLAB_BUNDLED_DIR`` or ``<repo>/assets/checkpoints``."""
    env = os.environ.get("GEOMLAB_BUNDLED_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "assets" / "checkpoints"


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

    ``path`` is the ``.json`` file; ``stem`` the common path without suffix; ``source`` is ``"bundled"`` or
    ``"user"``; ``meta`` the parsed JSON (``model_config``, ``card``, ...); ``mtime`` the newer of the two
    files' modification times (seconds), used as a cache key so a re-saved checkpoint is reloaded.
    """

    ref: str
    source: str
    path: Path
    mtime: float
    meta: dict = field(repr=False, hash=False, compare=False)

    @property
    def stem(self) -> Path:
        return self.path.with_suffix("")

    @property
    def weights(self) -> Path:
        return self.path.with_suffix(".safetensors")

    @property
    def name(self) -> str:
        return self.path.stem

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


def _read_entry(json_path: Path, root: Path, source: str) -> CheckpointEntry | None:
    weights = json_path.with_suffix(".safetensors")
    if not weights.is_file():
        return None
    try:
        meta = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(meta, dict) or "model_config" not in meta:
        return None  # some other JSON file (a trace, a config) lying around
    rel = json_path.relative_to(root).with_suffix("").as_posix()
    prefix = "bundled" if source == "bundled" else "runs"
    mtime = max(json_path.stat().st_mtime, weights.stat().st_mtime)
    return CheckpointEntry(ref=f"{prefix}/{rel}", source=source, path=json_path, mtime=mtime, meta=meta)


def _scan(root: Path, source: str, depth: int) -> list[CheckpointEntry]:
    if not root.is_dir():
        return []
    found: list[CheckpointEntry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_depth = len(Path(dirpath).relative_to(root).parts)
        if rel_depth >= depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith(".json"):
                entry = _read_entry(Path(dirpath) / fn, root, source)
                if entry is not None:
                    found.append(entry)
    return found


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
    listing): the (path, mtime) of every ``.json`` and ``.safetensors`` in the two folders."""
    sig = []
    for root, depth in ((bundled_dir(), 1), (runs_dir(), MAX_DEPTH)):
        if not root.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            if len(Path(dirpath).relative_to(root).parts) >= depth:
                dirnames[:] = []
            for fn in filenames:
                if fn.endswith((".json", ".safetensors")):
                    p = Path(dirpath) / fn
                    try:
                        sig.append((str(p), p.stat().st_mtime_ns))
                    except OSError:
                        pass
    return tuple(sorted(sig))


def resolve(ref: str) -> CheckpointEntry:
    """The catalog entry named by ``ref`` (``bundled/NAME`` or ``runs/SUB/NAME``).

    Raises :class:`CatalogError` for a malformed ref, a path that would leave the two folders, or a
    checkpoint that does not exist.
    """
    if not isinstance(ref, str) or "/" not in ref:
        raise CatalogError(f"not a checkpoint reference: {ref!r} (expected 'bundled/NAME' or 'runs/NAME')")
    prefix, rel = ref.split("/", 1)
    roots = {"bundled": (bundled_dir(), "bundled"), "runs": (runs_dir(), "user")}
    if prefix not in roots or not rel or ".." in Path(rel).parts or rel.startswith("/"):
        raise CatalogError(f"not a checkpoint reference: {ref!r} (expected 'bundled/NAME' or 'runs/NAME')")
    root, source = roots[prefix]
    json_path = (root / rel).with_suffix(".json") if not rel.endswith(".json") else root / rel
    try:
        json_path.resolve().relative_to(root.resolve())
    except ValueError:
        raise CatalogError(f"checkpoint reference {ref!r} points outside the checkpoint folders") from None
    entry = _read_entry(json_path, root, source) if json_path.is_file() else None
    if entry is None:
        raise CatalogError(f"no checkpoint {ref!r} (looked for {json_path.name} and "
                           f"{json_path.with_suffix('.safetensors').name} in {prefix}/)")
    return entry


def safe_name(name: str) -> str:
    """``name`` reduced to letters, digits, ``.``, ``_`` and ``-`` (at most 64 characters); ``"checkpoint"``
    if nothing is left. Every other run of characters (spaces, ``/``, emoji) and every ``..`` becomes one
    ``-``, so no path part survives and none of the name is silently dropped:
    ``"my tiny run/../x 😀"`` -> ``"my-tiny-run-x"`` (design choice)."""
    cleaned = _NAME_RE.sub("-", name)
    cleaned = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", "-", cleaned)).strip("-.")
    return cleaned[:64].strip("-.") or "checkpoint"


def validate_upload(files: dict[str, bytes]) -> tuple[str, Any]:
    """Check an uploaded checkpoint pair without storing it.

    ``files`` maps file names to their bytes; it must hold exactly one ``.safetensors`` and one ``.json``.
    The pair is written to a temporary folder under the JSON's name and loaded with
    :func:`geomlab.checkpoint.load`, which checks the JSON against the tensors, the model kind, the
    format version and that every weight is finite. Returns ``(name, checkpoint)``.

    Raises :class:`CatalogError` (a ``ValueError``) with a one-line message for a wrong number or type of
    files, an empty or oversized file, a JSON that does not parse, or anything the loader rejects.
    """
    if not files:
        raise CatalogError("no files: upload a NAME.safetensors and its NAME.json together")
    by_suffix: dict[str, list[str]] = {}
    for fname in files:
        by_suffix.setdefault(Path(fname).suffix.lower(), []).append(fname)
    other = sorted(set(by_suffix) - {".safetensors", ".json"})
    if other:
        raise CatalogError(f"unexpected file type {', '.join(other)}: a checkpoint is a .safetensors file "
                           "plus its .json (pickled .pt/.pth files are not accepted)")
    for suffix in (".safetensors", ".json"):
        got = by_suffix.get(suffix, [])
        if len(got) == 0:
            missing = "weights (.safetensors)" if suffix == ".safetensors" else "description (.json)"
            raise CatalogError(f"the {missing} file is missing: upload both halves of the checkpoint")
        if len(got) > 1:
            raise CatalogError(f"{len(got)} {suffix} files uploaded; upload exactly one pair")
    json_name, st_name = by_suffix[".json"][0], by_suffix[".safetensors"][0]
    for fname in (json_name, st_name):
        size = len(files[fname])
        if size == 0:
            raise CatalogError(f"{fname} is empty")
        if size > MAX_UPLOAD_BYTES:
            raise CatalogError(f"{fname} is {size / 2**20:.0f} MiB; the limit is {MAX_UPLOAD_BYTES / 2**20:.0f} MiB")
    try:
        meta = json.loads(files[json_name].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"{json_name} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict) or "model_config" not in meta:
        raise CatalogError(f"{json_name} is not a geomlab checkpoint description (no 'model_config')")
    name = safe_name(Path(json_name).stem)
    from geomlab import checkpoint as ckpt_mod  # lazy: keeps listing cheap and independent

    with tempfile.TemporaryDirectory(prefix="geomlab-upload-") as tmp:
        stem = Path(tmp) / name
        stem.with_suffix(".json").write_bytes(files[json_name])
        stem.with_suffix(".safetensors").write_bytes(files[st_name])
        try:
            loaded = ckpt_mod.load(stem.with_suffix(".json"))
        except ValueError as exc:
            raise CatalogError(f"not a valid checkpoint: {exc}") from None
        except Exception as exc:  # a loader bug or a corrupt file the loader did not foresee
            raise CatalogError(f"could not load the checkpoint: {type(exc).__name__}: {exc}") from None
    return name, loaded


def store_upload(files: dict[str, bytes], dest: Path | None = None) -> CheckpointEntry:
    """Validate an uploaded pair (:func:`validate_upload`) and store it as
    ``<runs>/uploads/NAME.{json,safetensors}`` (``NAME-2``, ``NAME-3``... if taken). Returns its entry.

    Raises :class:`CatalogError` as :func:`validate_upload` does; nothing is written when it fails.
    """
    name, _ = validate_upload(files)
    dest = Path(dest) if dest is not None else runs_dir() / UPLOAD_SUBDIR
    dest.mkdir(parents=True, exist_ok=True)
    final, i = name, 1
    while (dest / f"{final}.json").exists() or (dest / f"{final}.safetensors").exists():
        i += 1
        final = f"{name}-{i}"
    json_bytes = next(b for n, b in files.items() if n.lower().endswith(".json"))
    st_bytes = next(b for n, b in files.items() if n.lower().endswith(".safetensors"))
    (dest / f"{final}.safetensors").write_bytes(st_bytes)
    (dest / f"{final}.json").write_bytes(json_bytes)  # JSON last: the pair is listed once complete
    entry = _read_entry(dest / f"{final}.json", runs_dir() if _inside(dest, runs_dir()) else dest, "user")
    if entry is None:  # pragma: no cover - validated above
        raise CatalogError("the upload could not be stored")
    return entry


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def delete_user_checkpoint(ref: str) -> None:
    """Remove a user checkpoint pair. Raises :class:`CatalogError` for a bundled or unknown ref."""
    entry = resolve(ref)
    if entry.source != "user":
        raise CatalogError("bundled checkpoints cannot be deleted from the app")
    for p in (entry.weights, entry.path):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def copy_checkpoint(src_stem: Path, dest_stem: Path) -> None:
    """Copy the pair ``src_stem.{safetensors,json}`` to ``dest_stem`` (JSON last). Design choice helper."""
    dest_stem.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src_stem.with_suffix(".safetensors"), dest_stem.with_suffix(".safetensors"))
    shutil.copyfile(src_stem.with_suffix(".json"), dest_stem.with_suffix(".json"))
