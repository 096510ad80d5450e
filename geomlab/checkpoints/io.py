"""Checkpoints, never pickles, in two layouts:

* **folder** ``NAME/`` (what training writes; Hugging Face's layout): ``config.json`` (the model config:
  ``build_model(config)`` rebuilds the architecture), ``model.safetensors`` (the tensors), ``README.md`` (a
  model card: YAML front matter with the model kind, parameters, dataset and metrics, then text for people;
  :func:`model_card`) and ``geomlab.json`` (everything else, below, with ``format_version`` 2 and the sha256
  of ``config.json``);
* **flat pair** ``NAME.safetensors`` + ``NAME.json`` (``format_version`` 1: the bundled checkpoints and every
  earlier one; still written with ``layout="flat"``, and kept when a flat run is resumed). Its JSON holds
  ``model_config`` itself.

The JSON (``geomlab.json`` or ``NAME.json``) holds:

* ``vocab``: :meth:`geomlab.data.Vocab.to_json` (or ``null``);
* ``card``: corpus / task, split, steps, seed, ``params_effective``, ``params_stored``, ``valid_bpc``,
  ``test_bpc``, training time (s), device, geomlab version, ... (free-form keys allowed);
* ``train_config``: the training config used (or ``null``); ``metrics``: the metrics history (list of dicts);
* ``train_state``: JSON part of the resumable training state (step, optimizer hyper-parameters) or ``null``;
* ``tensors``: a manifest ``name -> {"shape", "dtype"}`` of every tensor in the ``.safetensors`` file.

Tensor names: model weights are ``model.<state_dict key>``; optional resumable training state (optimizer
moments, RNG states) is ``train.<name>``. Tensors are written with ``safetensors.torch.save_file`` and read
with ``safetensors.safe_open``, so loading an untrusted checkpoint never executes code; the model card is
written with ``huggingface_hub`` (no network) and never read by the loader.

**One unit on disk.** :func:`save` writes the files so that a kill at any instant leaves the old checkpoint
or the new one: the weights and the JSON carry one random ``save_id`` (JSON key ``save_id``, safetensors
header metadata ``geomlab_save_id``), the other files wait in journal files until the weights are in place,
and :func:`load` takes the files that match the weights (finishing an interrupted save) or refuses a
mismatched set. Files without ids (older checkpoints, the bundled ones) load as before.
``save(..., exclusive=True)`` never replaces an existing checkpoint. See :mod:`geomlab.checkpoints.files`.

:func:`load` validates everything and raises :class:`CheckpointError` (a ``ValueError``) with one readable
line for: missing or truncated files, a JSON that does not match the tensors (names, shapes, dtypes), files
from two different saves (a ``config.json`` too), an unknown model kind, non-finite weights, a newer format
version.
"""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import geomlab
from geomlab.checkpoints import files as ckpt_files
from geomlab.data.vocab import Vocab
from geomlab.core.locate import bundled_checkpoint
from geomlab.models import build_model, count_params, model_class

#: Newest ``format_version`` this geomlab reads: 2 = folder (``geomlab.json`` without ``model_config``);
#: 1 = flat pair. Flat pairs are still written as 1 (their layout has not changed).
FORMAT_VERSION = 2
FLAT_FORMAT_VERSION = 1
CONFIG_FILE, WEIGHTS_FILE, META_FILE, CARD_FILE = (ckpt_files.CONFIG, ckpt_files.WEIGHTS, ckpt_files.META,
                                                   ckpt_files.CARD)


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded safely; the message says which file and what is wrong."""


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    ``model`` is in eval mode on the requested device; ``vocab`` may be ``None`` (real-valued tasks);
    ``train_state`` holds the ``train.*`` tensors (names without the prefix) merged with the JSON
    ``train_state`` under ``"json"`` when the file has them, else ``None``. ``path``: the folder (``layout``
    ``"folder"``) or the ``NAME.json`` file (``"flat"``).
    """

    model: Any
    vocab: Vocab | None
    card: dict[str, Any]
    path: Path
    model_config: dict[str, Any] = field(default_factory=dict)
    train_config: dict[str, Any] | None = None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    train_state: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    layout: str = "flat"


def paths(stem: str | os.PathLike) -> tuple[Path, Path]:
    """``(NAME.json, NAME.safetensors)`` of a flat pair, for a stem or either file's path."""
    p = Path(stem)
    if p.suffix in (".json", ".safetensors"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".json"), p.with_name(p.name + ".safetensors")


_FOLDER_FILES = (CONFIG_FILE, WEIGHTS_FILE, META_FILE, CARD_FILE)


@dataclass(frozen=True)
class Location:
    """Where one checkpoint's files are. ``root``: the folder, or the flat pair's ``NAME.json``; ``meta``: the
    JSON with the save id (``NAME/geomlab.json`` or ``NAME.json``); ``weights``; ``label``: how messages name
    a file of it (``NAME/`` for a folder, nothing for a flat pair)."""

    root: Path
    meta: Path
    weights: Path
    folder: bool

    def label(self, path: Path) -> str:
        return f"{self.root.name}/{path.name}" if self.folder else path.name


def locate(path: str | os.PathLike) -> Location:
    """The checkpoint a path names: a folder ``NAME/`` (or one of its files), else the flat pair ``NAME``,
    ``NAME.json`` or ``NAME.safetensors``. A bare ``NAME`` that is a folder is the folder, unless the folder
    holds none of the checkpoint files and ``NAME.json`` exists. Never raises; nothing is opened."""
    p = Path(path)
    if p.name in _FOLDER_FILES and ((p.parent / META_FILE).exists() or
                                    ((p.parent / WEIGHTS_FILE).exists() and (p.parent / CONFIG_FILE).exists())):
        p = p.parent  # a file of a folder (a flat pair named "model" or "config" has no geomlab.json)
    elif p.suffix in (".json", ".safetensors"):
        json_path, st_path = paths(p)
        return Location(json_path, json_path, st_path, folder=False)
    if p.is_dir() and ((p / META_FILE).exists() or (p / WEIGHTS_FILE).exists() or not paths(p)[0].exists()):
        return Location(p, p / META_FILE, p / WEIGHTS_FILE, folder=True)
    json_path, st_path = paths(p)
    return Location(json_path, json_path, st_path, folder=False)


#: What a command-line checkpoint argument may be (for --help and error messages).
EXPECTED = ("a checkpoint folder NAME/ (config.json, model.safetensors, geomlab.json), a pair NAME.json + "
            "NAME.safetensors, or a bundled checkpoint's name (NAME or bundled/NAME; `geomlab zoo --list`)")


def _exists(path: Path) -> bool:
    """Whether any file of the checkpoint ``path`` names (:func:`locate`) is there (a broken symlink too)."""
    loc = locate(path)
    return any(os.path.lexists(f) for f in (loc.root, loc.meta, loc.weights))


def find(arg: str | os.PathLike, bundled: bool = True) -> Path:
    """The checkpoint a command-line argument names, for :func:`load`.

    A local path wins: a folder ``NAME/`` (or a file in it), a flat pair ``NAME``, ``NAME.json`` or
    ``NAME.safetensors`` any of whose files exists is returned as given (:func:`load` then reports what is
    wrong with it). Otherwise ``NAME`` or ``bundled/NAME`` (the app's spelling; a ``.json`` suffix is allowed)
    names a bundled checkpoint (:func:`geomlab.core.locate.bundled_checkpoint`) when ``bundled`` is true (else it
    is refused by name: ``train --resume`` takes local checkpoints only).

    Raises :class:`CheckpointError` (one line, saying what was expected) for a path that exists but is no
    checkpoint (a text file; a ``.zip``: the command line wants the unpacked folder, the app's upload takes
    zips), names nothing, or is empty. Design choice: the command line and the app spell bundled checkpoints alike.
    """
    if not str(arg).strip():
        raise CheckpointError(f"no checkpoint named (an empty argument): expected {EXPECTED}")
    p = Path(arg)
    if _exists(p):
        return p
    if p.suffix.lower() == ".zip":
        what = f"{p} is a zip file" if os.path.lexists(p) else f"no file {p}; and a zip would not do"
        raise CheckpointError(f"{what}: the command line takes the unpacked checkpoint (unzip it and pass the "
                              "folder or the NAME.json file); the app's upload takes zips")
    if os.path.lexists(p):
        raise CheckpointError(f"{p} is not a checkpoint: expected {EXPECTED}")
    by_name = p.parent in (Path("."), Path("bundled")) and bool(p.name)
    if by_name:
        name = p.name[: -len(p.suffix)] if p.suffix in (".json", ".safetensors") else p.name
        found = bundled_checkpoint(p, bare=True)
        if found is not None and bundled:
            return found
        if found is not None:
            raise CheckpointError(f"{name} is a bundled checkpoint, which is not accepted here (give a local "
                                  "checkpoint folder NAME/ or pair NAME.json + NAME.safetensors)")
    where = "this folder" if str(p.parent) == "." else f"{p.parent}/"
    near = _near_bundled(p.name) if by_name and bundled else ""
    raise CheckpointError(f"no checkpoint {p}: no folder {p.name}/ and no {paths(p)[0].name} in {where}"
                          f"{', and no bundled checkpoint of that name' if by_name and bundled else ''}{near}; "
                          "expected "
                          + (EXPECTED if bundled else "a checkpoint folder NAME/ or a pair NAME.json + "
                             "NAME.safetensors"))


def layout_of(stem: str | os.PathLike) -> str:
    """``"flat"`` when a flat pair ``stem.json``/``stem.safetensors`` is already there, else ``"folder"``: what
    ``save(..., layout="auto")`` writes (a resumed flat run stays flat; a new checkpoint is a folder)."""
    json_path, st_path = paths(stem)
    return "flat" if os.path.lexists(json_path) or os.path.lexists(st_path) else "folder"


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _jsonable(obj: Any) -> Any:
    """Plain JSON types; non-finite floats become ``None`` (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor) and obj.numel() == 1:
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if hasattr(obj, "item"):
        return _jsonable(obj.item())
    if isinstance(obj, Path):
        return obj.name
    return str(obj)


class CheckpointExistsError(CheckpointError):
    """:func:`save` with ``exclusive=True``: a checkpoint (either file) of that name is already there."""


def save(stem: str | os.PathLike, model, vocab: Vocab | None, card: dict[str, Any] | None = None, *,
         train_config: dict[str, Any] | None = None, metrics: list[dict[str, Any]] | None = None,
         train_state: dict[str, Any] | None = None, exclusive: bool = False, layout: str = "flat") -> Path:
    """Write a checkpoint as one unit: a kill at any instant leaves the old checkpoint or the new one, never
    a mix (the files carry one random ``save_id``; see :mod:`geomlab.checkpoints.files`).

    Args:
        stem: path without suffix (a ``.json``/``.safetensors`` suffix is stripped); parent folders are made.
        model: a registered :class:`geomlab.models.SequenceModel` (uses ``model.config``).
        vocab: its vocabulary, or ``None``.
        card: summary fields (see module docstring); ``params_effective``/``params_stored``/
            ``geomlab_version`` are filled in.
        train_state: optional resumable state: ``{"tensors": {name: Tensor}, "json": {...}}``.
        exclusive: never replace an existing checkpoint: :class:`CheckpointExistsError` when one of its
            files exists (checked atomically with the creation).
        layout: ``"flat"`` (``stem.safetensors`` + ``stem.json``), ``"folder"`` (``stem/`` with
            ``config.json``, ``model.safetensors``, ``README.md``, ``geomlab.json``) or ``"auto"``
            (:func:`layout_of`: flat when a flat pair of that stem exists, else folder).

    Returns the JSON path (flat) or the folder. Raises :class:`CheckpointError` if a weight is not finite (a
    broken model is never saved) or the name is too long for the file system, and ``ValueError`` for a model
    without ``config`` or an unknown layout.
    """
    if layout == "auto":
        layout = layout_of(stem)
    if layout not in ("flat", "folder"):
        raise ValueError(f"unknown checkpoint layout {layout!r} (expected 'flat', 'folder' or 'auto')")
    json_path, st_path = paths(stem)
    where = json_path
    if layout == "folder":
        folder = json_path.with_suffix("")
        json_path, st_path = folder / META_FILE, folder / WEIGHTS_FILE
        where = folder
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "kind" not in config:
        raise ValueError("save needs a registered model with a config dict holding 'kind'")
    tensors: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        t = t.detach()
        if t.is_floating_point() or t.is_complex():
            if not torch.isfinite(t).all():
                raise CheckpointError(f"not saving {where.name}: weight {name!r} has non-finite values")
        tensors[f"model.{name}"] = t.to("cpu").contiguous().clone()
    ts = (train_state or {}).get("tensors", {}) if train_state else {}
    for name, t in ts.items():
        tensors[f"train.{name}"] = t.detach().to("cpu").contiguous().clone()
    card = dict(card or {})
    card.setdefault("params_effective", count_params(model, "effective"))
    card.setdefault("params_stored", count_params(model, "stored"))
    card["geomlab_version"] = geomlab.__version__
    meta = {
        "format_version": FLAT_FORMAT_VERSION,
        "model_config": config,
        "vocab": vocab.to_json() if vocab is not None else None,
        "card": card,
        "train_config": train_config,
        "metrics": metrics or [],
        "train_state": (train_state or {}).get("json") if train_state else None,
        "tensors": {k: {"shape": list(v.shape), "dtype": _dtype_name(v)} for k, v in tensors.items()},
    }
    from safetensors.torch import save_file

    save_id = uuid.uuid4().hex
    meta[ckpt_files.JSON_KEY] = save_id
    files: dict[Path, str] = {}
    if layout == "folder":
        import hashlib

        config_text = json.dumps(_jsonable(config), indent=1, allow_nan=False) + "\n"
        meta.pop("model_config")
        meta["format_version"] = FORMAT_VERSION
        meta["files"] = {CONFIG_FILE: {"sha256": hashlib.sha256(config_text.encode("utf-8")).hexdigest()}}
        meta["name"] = folder.name  # the name an upload of the bare files takes (geomlab.checkpoints.catalog)
        files[json_path] = json.dumps(_jsonable(meta), indent=1, allow_nan=False)
        files[json_path.with_name(CONFIG_FILE)] = config_text
        files[json_path.with_name(CARD_FILE)] = model_card(folder.name, {**meta, "model_config": config})
    else:
        files[json_path] = json.dumps(_jsonable(meta), indent=1, allow_nan=False)
    mode = 0o666 & ~ckpt_files.UMASK  # mkstemp makes 0600; a checkpoint is an ordinary file
    made_folder = layout == "folder" and not os.path.lexists(where)
    try:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=json_path.parent, prefix=".geomlab-save.", suffix=".part")
    except OSError as exc:
        raise _name_error(where, exc) from None
    os.close(fd)
    saved = False
    try:
        save_file(tensors, tmp, metadata={"format": "pt", "geomlab": "1", ckpt_files.HEADER_KEY: save_id})
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        ckpt_files.install(st_path, Path(tmp), files, save_id, mode, exclusive=exclusive)
        saved = True
    except ckpt_files.ExistsError:
        what = f"{where.name}/" if layout == "folder" else ckpt_files.short(where.stem, 60, count=False)
        raise CheckpointExistsError(f"a checkpoint named {what} already exists in "
                                    f"{where.parent.name}/; not replacing it") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _name_error(where, exc) from None
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if made_folder and not saved:
            try:
                os.rmdir(where)  # a first save that failed leaves no empty folder behind (only when empty)
            except OSError:
                pass
    return where


#: Hugging Face task type of each geomlab task kind, for the card's ``model-index`` (design choice).
_HF_TASK = {"lm": "text-generation", "word-problem": "token-classification"}


def model_card(name: str, meta: dict[str, Any]) -> str:
    """The ``README.md`` of a checkpoint folder: a Hugging Face model card whose YAML front matter holds
    ``library_name: geomlab``, ``model_kind``, ``parameters`` (``effective``, ``stored``), ``dataset``,
    ``datasets``, ``metrics`` (their names) and ``model-index`` (their values per split, Hugging Face's
    evaluation results), then a few paragraphs for a person. ``meta``: the checkpoint description (the
    ``model_config`` included). Built with ``huggingface_hub.ModelCardData`` (no network). Design choice."""
    from huggingface_hub import EvalResult, ModelCardData

    config = meta.get("model_config") or {}
    card = meta.get("card") or {}
    kind = str(config.get("kind", "?"))
    task = card.get("task") if isinstance(card.get("task"), dict) else {}
    dataset = str(card.get("corpus") or task.get("name") or "unknown")
    params = {k: card.get(f"params_{k}") for k in ("effective", "stored")}
    values = {k: float(v) for k, v in card.items()
              if k.startswith(("valid_", "test_")) and isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(float(v)) and not k.endswith("_tokens")}
    names = sorted({k.split("_", 1)[1] for k in values})
    hf_task = _HF_TASK.get("word-problem" if task.get("task") == "word-problem" else "lm")
    results = [EvalResult(task_type=hf_task, dataset_type=dataset, dataset_name=dataset,
                          dataset_split=k.split("_", 1)[0].replace("valid", "validation"),
                          metric_type=k.split("_", 1)[1], metric_value=v) for k, v in sorted(values.items())]
    tags = ["geomlab", kind] + ([f"group-{config['group']}"] if config.get("group") else [])
    data = ModelCardData(library_name="geomlab", tags=tags, datasets=[dataset], metrics=names or None,
                         model_name=name, eval_results=results or None, model_kind=kind, parameters=params,
                         dataset=dataset, group=config.get("group"), steps=card.get("steps"),
                         geomlab_format_version=meta.get("format_version"))
    lines = [f"# {name}", "",
             f"A sequence model of kind `{kind}`" + (f" on the group {config['group']}" if config.get("group") else "")
             + f", trained with geomlab on **{dataset}**"
             + (f" for {card['steps']} steps" if card.get("steps") is not None else "") + ".", ""]
    if card.get("description"):
        lines += [str(card["description"]), ""]
    lines += [f"* parameters: {params['effective']} effective, {params['stored']} stored",
              *(f"* {k.replace('_', ' ')}: {v:.4f}" for k, v in sorted(values.items())), ""]
    lines += ["## Files", "",
              f"* `{CONFIG_FILE}`: the model config (`geomlab.models.build_model(config)` rebuilds the model);",
              f"* `{WEIGHTS_FILE}`: the weights (`model.*`) and any resumable training state (`train.*`);",
              f"* `{META_FILE}`: vocabulary, card, training config, metrics history and training state;",
              f"* `{CARD_FILE}`: this card (not read when loading).", "",
              "Load it with `geomlab.checkpoints.io.load(\"PATH/TO/" + name + "\")` or `python -m geomlab eval PATH/TO/"
              + name + "`; loading runs no code (no pickles).", ""]
    return f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)


def _name_error(where: Path, exc: OSError) -> Exception:
    if exc.errno == errno.ENAMETOOLONG or len(where.name.encode()) > 255:
        return CheckpointError(f"checkpoint name {ckpt_files.short(where.stem, 60, count=False)!r} is too long for the file system "
                               f"({len(where.stem)} characters); choose a shorter one")
    return exc


def _near_bundled(name: str) -> str:
    """`` (did you mean A or B?)`` naming the bundled checkpoints that start with ``name`` or are spelled
    close to it (:func:`difflib.get_close_matches`), at most three; ``""`` when none. Design choice."""
    import difflib

    from geomlab.core.locate import bundled_names

    names = bundled_names()
    near = [n for n in names if n.startswith(name)][:3] or difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def _missing(path: Path) -> CheckpointError:
    from geomlab.core.locate import bundled_dir

    bundled = bundled_dir() / path.name
    hint = ""
    if bundled.is_file() and path.parent in (Path("."), Path("bundled")):  # a name, or the app's form
        hint = f"; a bundled checkpoint has that name: load it as 'bundled/{path.stem}'"
    return CheckpointError(f"checkpoint file {path} is missing{hint}")


def _read_json(path: Path, label: str) -> Any:
    """:func:`geomlab.checkpoints.files.read_json` following symlinks, its errors as :class:`CheckpointError`
    (a missing file with a hint when a bundled checkpoint has its name)."""
    if not path.is_file():
        raise _missing(path)
    try:
        return ckpt_files.read_json(path, label, follow=True)
    except ckpt_files.PairError as exc:
        raise CheckpointError(str(exc)) from exc.__cause__


def _check_folder(loc: Location) -> None:
    if not loc.meta.is_file() and not ckpt_files.is_regular(loc.weights, follow=True):
        raise CheckpointError(f"{loc.root} is a folder but not a checkpoint: it has no {META_FILE} and no "
                              f"{WEIGHTS_FILE} (a checkpoint folder holds {CONFIG_FILE}, {WEIGHTS_FILE}, "
                              f"{META_FILE} and {CARD_FILE})")


def _meta_for(loc: Location, weights_id: str | None, repair: bool) -> dict[str, Any]:
    """The validated description belonging with weights of save id ``weights_id`` (see ckpt_files)."""
    def read(path: Path) -> Any:
        return _read_json(path, loc.label(path))

    try:
        if loc.folder:
            meta = ckpt_files.folder_meta(loc.root, weights_id, read, repair=repair)
        else:
            meta = ckpt_files.pair_meta(loc.meta, loc.weights, weights_id, read, repair=repair)
    except ckpt_files.PairError as exc:
        raise CheckpointError(str(exc)) from None
    return _validate_meta(meta, loc.label(loc.meta))


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Only the description of a checkpoint (cheap: the JSON, and for a folder ``config.json`` and the
    weights' header; for catalogues). A folder's ``model_config`` comes from its ``config.json``. Raises
    :class:`CheckpointError`."""
    loc = locate(path)
    if not loc.folder:
        return _validate_meta(_read_json(loc.meta, loc.label(loc.meta)), loc.label(loc.meta))
    _check_folder(loc)
    weights_id = None
    if ckpt_files.is_regular(loc.weights, follow=True):
        try:
            weights_id = ckpt_files.header_save_id(loc.weights)
        except ckpt_files.PairError as exc:
            raise CheckpointError(f"{loc.root.name}: {exc}") from None
    return _meta_for(loc, weights_id, repair=False)


def _validate_meta(meta: Any, label: str) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise CheckpointError(f"{label} must hold a JSON object")
    version = meta.get("format_version")
    if not isinstance(version, int):
        raise CheckpointError(f"{label} has no integer format_version")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{label} has format_version {version}, newer than this geomlab "
                              f"reads ({FORMAT_VERSION}); upgrade geomlab")
    for key in ("model_config", "tensors"):
        if not isinstance(meta.get(key), dict):
            raise CheckpointError(f"{label} has no {key!r} object")
    return meta


def load(path: str | os.PathLike, device: str | torch.device = "cpu") -> Checkpoint:
    """Load and validate a checkpoint: a folder ``NAME/`` (or a file in it), or a flat pair ``NAME``,
    ``NAME.json`` or ``NAME.safetensors`` (:func:`locate`); when no such files are there, ``bundled/NAME``
    names a bundled checkpoint (:func:`geomlab.core.locate.bundled_checkpoint`, the app's and the command line's
    spelling).

    Returns a :class:`Checkpoint` whose model is in eval mode on ``device``. Raises
    :class:`CheckpointError` (see module docstring for the cases).
    """
    if not _exists(Path(path)):
        found = bundled_checkpoint(path)
        if found is None and Path(path).parent == Path("bundled"):
            from geomlab.core.locate import bundled_names

            raise CheckpointError(f"no bundled checkpoint {Path(path).name!r}; the bundled ones: "
                                  f"{', '.join(bundled_names()) or 'none'}")
        path = found or path
    loc = locate(path)
    json_path, st_path = loc.meta, loc.weights
    jname, sname = loc.label(json_path), loc.label(st_path)
    if loc.folder:
        _check_folder(loc)
    if not ckpt_files.is_regular(st_path, follow=True):
        if not loc.folder:
            read_meta(json_path)  # a missing JSON is named first
        raise CheckpointError(f"checkpoint file {st_path} is missing (the JSON {jname} is there)")
    from safetensors import safe_open

    try:  # one open file for the header and the tensors: the save id read is the one of these tensors
        with safe_open(str(st_path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{sname} is truncated or not a safetensors file (it could not be read); "
                              "save the checkpoint again, or copy both of its files anew") from exc
    weights_id = header.get(ckpt_files.HEADER_KEY) or None
    meta = _meta_for(loc, weights_id, repair=True)
    manifest = meta["tensors"]
    missing = sorted(set(manifest) - set(tensors))
    extra = sorted(set(tensors) - set(manifest))
    if missing or extra:
        raise CheckpointError(f"{jname} and {sname} disagree: tensors listed but missing "
                              f"{missing[:5]}, present but not listed {extra[:5]}")
    for name, info in manifest.items():
        t = tensors[name]
        if list(t.shape) != list(info.get("shape", [])):
            raise CheckpointError(f"tensor {name!r}: JSON says shape {info.get('shape')}, file has "
                                  f"{list(t.shape)}")
        if _dtype_name(t) != info.get("dtype"):
            raise CheckpointError(f"tensor {name!r}: JSON says dtype {info.get('dtype')}, file has "
                                  f"{_dtype_name(t)}")
    config = meta["model_config"]
    kind = config.get("kind")
    try:
        model_class(kind)
    except ValueError as exc:
        raise CheckpointError(f"{jname}: {exc}") from exc
    try:
        model = build_model(config)
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{jname}: cannot build the {kind!r} model from its config: {exc}") from exc
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{sname} does not fit a {kind!r} model with this config: missing "
                              f"weights {missing[:5]}, unexpected {extra[:5]}")
    for name, t in state.items():
        e = expected[name]
        if t.shape != e.shape:
            raise CheckpointError(f"weight {name!r} has shape {list(t.shape)} but the {kind!r} config needs "
                                  f"{list(e.shape)}")
        if t.dtype != e.dtype:
            raise CheckpointError(f"weight {name!r} has dtype {_dtype_name(t)} but the model uses "
                                  f"{_dtype_name(e)}")
        if (t.is_floating_point() or t.is_complex()) and not torch.isfinite(t).all():
            raise CheckpointError(f"weight {name!r} in {sname} has non-finite values (NaN or Inf)")
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    vocab = None
    if meta.get("vocab") is not None:
        try:
            vocab = Vocab.from_json(meta["vocab"])
        except ValueError as exc:
            raise CheckpointError(f"{jname}: bad vocabulary: {exc}") from exc
        if vocab.size != int(config.get("vocab_size", vocab.size)):
            raise CheckpointError(f"{jname}: vocabulary has {vocab.size} tokens but the model "
                                  f"config says vocab_size={config.get('vocab_size')}")
    train_tensors = {k[len("train."):]: v for k, v in tensors.items() if k.startswith("train.")}
    train_state = None
    if train_tensors or meta.get("train_state") is not None:
        train_state = {"tensors": train_tensors, "json": meta.get("train_state")}
    return Checkpoint(model=model, vocab=vocab, card=dict(meta.get("card") or {}), path=loc.root,
                      model_config=config, train_config=meta.get("train_config"),
                      metrics=list(meta.get("metrics") or []), train_state=train_state, meta=meta,
                      layout="folder" if loc.folder else "flat")
