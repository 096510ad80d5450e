"""Writing a checkpoint (:func:`save`) as one unit, in either layout of :mod:`geomlab.checkpoints.io`: the
tensors checked and copied, the JSON description, a folder's small files, the atomic install
(:mod:`geomlab.checkpoints.files`)."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable

import torch

import geomlab
from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints.card import model_card
from geomlab.checkpoints.layout import (CARD_FILE, CONFIG_FILE, FLAT_FORMAT_VERSION, FORMAT_VERSION, META_FILE,
                                        STATE_FILE, STATE_JSON_FILE, VOCAB_FILE, WEIGHTS_FILE, CheckpointError,
                                        dtype_name, layout_of, paths)
from geomlab.core.writes import write_error
from geomlab.data.vocab import Vocab
from geomlab.models import count_params


class CheckpointExistsError(CheckpointError):
    """:func:`save` with ``exclusive=True``: a checkpoint (either file) of that name is already there."""


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


def save(stem: str | os.PathLike, model, vocab: Vocab | None, card: dict[str, Any] | None = None, *,
         train_config: dict[str, Any] | None = None, metrics: list[dict[str, Any]] | None = None,
         train_state: dict[str, Any] | None = None, exclusive: bool = False, layout: str = "flat",
         name: str | None = None) -> Path:
    """Write a checkpoint as one unit: a kill at any instant leaves the old checkpoint or the new one, never
    a mix (the files carry one random ``save_id``; see :mod:`geomlab.checkpoints.files`).

    Args:
        stem: path without suffix (a ``.json``/``.safetensors`` suffix is stripped); parent folders are made.
        model: a registered :class:`geomlab.models.SequenceModel` (uses ``model.config``).
        vocab: its vocabulary, or ``None``.
        card: summary fields (module docstring of :mod:`geomlab.checkpoints.io`); ``params_effective``,
            ``params_stored`` and ``geomlab_version`` are filled in.
        train_state: optional resumable state: ``{"tensors": {name: Tensor}, "json": {...}}``.
        exclusive: never replace an existing checkpoint: :class:`CheckpointExistsError` when one of its
            files exists (checked atomically with the creation).
        layout: ``"flat"`` (``stem.safetensors`` + ``stem.json``), ``"folder"`` (``stem/``, the Hugging Face
            folder of :mod:`geomlab.checkpoints.io`: ``config.json``, ``model.safetensors``, ``vocab.json``,
            ``training_state.*``, ``README.md``, ``geomlab.json``) or ``"auto"``
            (:func:`layout_of`: flat when a flat pair of that stem exists, else folder).
        name: a folder's recorded name (``geomlab.json``'s ``name``, the model card's title); ``None``: the
            folder's own name.

    Returns the JSON path (flat) or the folder. Raises :class:`CheckpointError` if a weight is not finite (a
    broken model is never saved) or the name is too long for the file system, ``ValueError`` for a model
    without ``config`` or an unknown layout, and ``OSError`` naming the file (:func:`write_error`) when the
    system refuses the write (disk full, read-only): the previous checkpoint, if any, is left as it was.
    """
    layout, json_path, st_path, where = _target(stem, layout)
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "kind" not in config:
        raise ValueError("save needs a registered model with a config dict holding 'kind'")
    tensors = _tensors(model, train_state, where)
    meta = _meta(model, config, vocab, card, train_config, metrics, train_state, tensors)
    save_id = uuid.uuid4().hex
    meta[ckpt_files.JSON_KEY] = save_id
    if layout == "folder":
        weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}

        def files(weights_sha: str) -> dict[Path, str | bytes]:
            return _folder_files(meta, config, tensors, json_path, weights_sha, name)
    else:
        weights = tensors

        def files(weights_sha: str) -> dict[Path, str | bytes]:
            meta["files"] = {WEIGHTS_FILE: {"sha256": weights_sha}}
            return {json_path: json.dumps(_jsonable(meta), indent=1, allow_nan=False)}
    _write(weights, files, save_id, json_path, st_path, where, layout, exclusive)
    return where


def _target(stem: str | os.PathLike, layout: str) -> tuple[str, Path, Path, Path]:
    """``(layout, json_path, st_path, where)`` of a save: the layout (``"auto"`` resolved by :func:`layout_of`),
    the JSON that carries the save id, the weights, and what :func:`save` returns (the flat pair's JSON or the
    folder). ``ValueError`` for an unknown layout."""
    if layout == "auto":
        layout = layout_of(stem)
    if layout not in ("flat", "folder"):
        raise ValueError(f"unknown checkpoint layout {layout!r} (expected 'flat', 'folder' or 'auto')")
    json_path, st_path = paths(stem)
    if layout == "flat":
        return layout, json_path, st_path, json_path
    folder = json_path.with_suffix("")
    return layout, folder / META_FILE, folder / WEIGHTS_FILE, folder


def _tensors(model, train_state: dict[str, Any] | None, where: Path) -> dict[str, torch.Tensor]:
    """The tensors to write, contiguous CPU copies: ``model.<state_dict key>`` and ``train.<name>`` of the
    resumable state. :class:`CheckpointError` if a floating or complex weight is not finite."""
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
    return tensors


def _meta(model, config: dict[str, Any], vocab: Vocab | None, card: dict[str, Any] | None,
          train_config: dict[str, Any] | None, metrics: list[dict[str, Any]] | None,
          train_state: dict[str, Any] | None, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The flat pair's JSON description (module docstring of :mod:`geomlab.checkpoints.io`), the card completed
    with the parameter counts and the geomlab version, and the manifest of ``tensors``."""
    card = dict(card or {})
    card.setdefault("params_effective", count_params(model, "effective"))
    card.setdefault("params_stored", count_params(model, "stored"))
    card["geomlab_version"] = geomlab.__version__
    return {
        "format_version": FLAT_FORMAT_VERSION,
        "model_config": config,
        "vocab": vocab.to_json() if vocab is not None else None,
        "card": card,
        "train_config": train_config,
        "metrics": metrics or [],
        "train_state": (train_state or {}).get("json") if train_state else None,
        "tensors": {k: {"shape": list(v.shape), "dtype": dtype_name(v)} for k, v in tensors.items()},
    }


def _folder_files(meta: dict[str, Any], config: dict[str, Any], tensors: dict[str, torch.Tensor],
                  json_path: Path, weights_sha: str, name: str | None = None) -> dict[Path, str | bytes]:
    """The files of a format-3 folder but the weights (the model's tensors without their ``model.`` prefix in
    ``model.safetensors``, whose sha256 is ``weights_sha``), in the order they are installed: ``geomlab.json``
    (``meta`` made format 3: ``model_config``, ``vocab`` and ``train_state`` moved to their own files, the
    manifest split into ``tensors`` and ``train_tensors`` without prefixes, the sha256 of the weights and of
    each companion and ``name`` (else the folder's name) added; ``meta`` is changed in place), ``config.json``, ``vocab.json``
    (when there is a vocabulary), ``training_state.safetensors`` and ``training_state.json`` (when there is
    training state) and the model card ``README.md``."""
    from safetensors.torch import save as tensor_bytes

    folder = json_path.parent
    weights = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    state = {k[len("train."):]: v for k, v in tensors.items() if k.startswith("train.")}
    companions: dict[str, str | bytes] = {
        CONFIG_FILE: json.dumps(_jsonable(config), indent=1, allow_nan=False) + "\n"}
    vocab, train_json = meta.pop("vocab"), meta.pop("train_state")
    if vocab is not None:
        companions[VOCAB_FILE] = json.dumps(_jsonable(vocab), indent=1, allow_nan=False) + "\n"
    if state or train_json is not None:
        companions[STATE_FILE] = tensor_bytes(state, metadata={"format": "pt"})
        companions[STATE_JSON_FILE] = json.dumps(_jsonable(train_json), indent=1, allow_nan=False) + "\n"
    config = meta.pop("model_config")
    meta["format_version"] = FORMAT_VERSION
    meta["tensors"] = {k: {"shape": list(v.shape), "dtype": dtype_name(v)} for k, v in weights.items()}
    meta["train_tensors"] = {k: {"shape": list(v.shape), "dtype": dtype_name(v)} for k, v in state.items()}
    meta["files"] = {WEIGHTS_FILE: {"sha256": weights_sha}}
    meta["files"].update({f: {"sha256": hashlib.sha256(data.encode("utf-8") if isinstance(data, str)
                                                       else data).hexdigest()} for f, data in companions.items()})
    meta["name"] = name or folder.name  # the name an upload of the bare files takes (geomlab.checkpoints.catalog)
    card = model_card(meta["name"], {**meta, "model_config": config})
    files: dict[Path, str | bytes] = {json_path: json.dumps(_jsonable(meta), indent=1, allow_nan=False)}
    files.update({folder / f: data for f, data in companions.items()})
    files[folder / CARD_FILE] = card
    return files


def _write(tensors: dict[str, torch.Tensor], files: Callable[[str], dict[Path, str | bytes]], save_id: str,
           json_path: Path, st_path: Path, where: Path, layout: str, exclusive: bool) -> None:
    """Write the weights to a temporary file in the checkpoint's folder and install them as one unit
    (:func:`geomlab.checkpoints.files.install`) with ``files(sha256 of the written weights file)``, the other
    files (the JSON first), so the JSON records the sha256 of the very bytes installed.
    :class:`CheckpointExistsError` (``exclusive``), and :class:`CheckpointError` for a name too long for the
    file system; a first save that fails leaves no empty folder."""
    from safetensors.torch import save_file

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
        try:
            save_file(tensors, tmp, metadata={"format": "pt", "geomlab": "1", ckpt_files.HEADER_KEY: save_id})
        except Exception as exc:  # safetensors raises its own SafetensorError, not OSError, when the disk fills
            raise write_error(exc, st_path) from None
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        ckpt_files.install(st_path, Path(tmp), files(ckpt_files.file_sha256(Path(tmp))), save_id, mode,
                           exclusive=exclusive)
        saved = True
    except ckpt_files.ExistsError:
        what = f"{where.name}/" if layout == "folder" else ckpt_files.short(where.stem, 60, count=False)
        raise CheckpointExistsError(f"a checkpoint named {what} already exists in "
                                    f"{where.parent.name}/; not replacing it") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _name_error(where, exc) from None
        raise write_error(exc, where) from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if made_folder and not saved:
            try:
                os.rmdir(where)  # a first save that failed leaves no empty folder behind (only when empty)
            except OSError:
                pass


def _name_error(where: Path, exc: OSError) -> Exception:
    if exc.errno == errno.ENAMETOOLONG or len(where.name.encode()) > 255:
        return CheckpointError(f"checkpoint name {ckpt_files.short(where.stem, 60, count=False)!r} is too long for the file system "
                               f"({len(where.stem)} characters); choose a shorter one")
    return exc
