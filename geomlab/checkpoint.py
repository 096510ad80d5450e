"""Checkpoints: ``NAME.safetensors`` (tensors) + ``NAME.json`` (everything else). Never pickles.

The JSON (``format_version`` :data:`FORMAT_VERSION`) holds:

* ``model_config``: the full model config (``build_model(model_config)`` rebuilds the architecture);
* ``vocab``: :meth:`geomlab.data.Vocab.to_json` (or ``null``);
* ``card``: corpus / task, split, steps, seed, ``params_effective``, ``params_stored``, ``valid_bpc``,
  ``test_bpc``, training time (s), device, geomlab version, ... (free-form keys allowed);
* ``train_config``: the training config used (or ``null``); ``metrics``: the metrics history (list of dicts);
* ``train_state``: JSON part of the resumable training state (step, optimizer hyper-parameters) or ``null``;
* ``tensors``: a manifest ``name -> {"shape", "dtype"}`` of every tensor in the ``.safetensors`` file.

Tensor names: model weights are ``model.<state_dict key>``; optional resumable training state (optimizer
moments, RNG states) is ``train.<name>``. Tensors are written with ``safetensors.torch.save_file`` and read
with ``safetensors.safe_open``, so loading an untrusted checkpoint never executes code.

**One unit on disk.** :func:`save` writes the pair so that a kill at any instant leaves the old pair or the
new pair: both files carry one random ``save_id`` (JSON key ``save_id``, safetensors header metadata
``geomlab_save_id``), the JSON waits in a journal file until the weights are in place, and :func:`load`
takes the JSON whose id matches the weights (finishing an interrupted save) or refuses a mismatched pair.
Files without ids (older checkpoints, the bundled ones) load as before. ``save(..., exclusive=True)``
never replaces an existing checkpoint. See :mod:`geomlab.ckpt_files`.

:func:`load` validates everything and raises :class:`CheckpointError` (a ``ValueError``) with one readable
line for: missing or truncated files, a JSON that does not match the tensors (names, shapes, dtypes), a
JSON and weights from two different saves, an unknown model kind, non-finite weights, a newer format
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
from geomlab import ckpt_files
from geomlab.data.vocab import Vocab
from geomlab.models import build_model, count_params, model_class

FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded safely; the message says which file and what is wrong."""


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    ``model`` is in eval mode on the requested device; ``vocab`` may be ``None`` (real-valued tasks);
    ``train_state`` holds the ``train.*`` tensors (names without the prefix) merged with the JSON
    ``train_state`` under ``"json"`` when the file has them, else ``None``.
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


def paths(stem: str | os.PathLike) -> tuple[Path, Path]:
    """``(NAME.json, NAME.safetensors)`` for a stem, or for either file's path."""
    p = Path(stem)
    if p.suffix in (".json", ".safetensors"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".json"), p.with_name(p.name + ".safetensors")


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


def _read_umask() -> int:
    """The process umask, read once at import (os.umask can only be read by setting it, which is not
    thread-safe later on, when live runs save checkpoints from threads)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


class CheckpointExistsError(CheckpointError):
    """:func:`save` with ``exclusive=True``: a checkpoint (either file) of that name is already there."""


def save(stem: str | os.PathLike, model, vocab: Vocab | None, card: dict[str, Any] | None = None, *,
         train_config: dict[str, Any] | None = None, metrics: list[dict[str, Any]] | None = None,
         train_state: dict[str, Any] | None = None, exclusive: bool = False) -> Path:
    """Write ``stem.safetensors`` and ``stem.json`` as one unit: a kill at any instant leaves the old pair
    or the new pair, never a mix (both carry one random ``save_id``; see :mod:`geomlab.ckpt_files`).

    Args:
        stem: path without suffix (a ``.json``/``.safetensors`` suffix is stripped); parent folders are made.
        model: a registered :class:`geomlab.models.SequenceModel` (uses ``model.config``).
        vocab: its vocabulary, or ``None``.
        card: summary fields (see module docstring); ``params_effective``/``params_stored``/
            ``geomlab_version``/``format_version`` are filled in.
        train_state: optional resumable state: ``{"tensors": {name: Tensor}, "json": {...}}``.

        exclusive: never replace an existing checkpoint: :class:`CheckpointExistsError` when ``stem.json``
            or ``stem.safetensors`` exists (checked atomically with the creation).

    Returns the JSON path. Raises :class:`CheckpointError` if a weight is not finite (a broken model is
    never saved) or the name is too long for the file system, and ``ValueError`` for a model without
    ``config``.
    """
    json_path, st_path = paths(stem)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "kind" not in config:
        raise ValueError("save needs a registered model with a config dict holding 'kind'")
    tensors: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        t = t.detach()
        if t.is_floating_point() or t.is_complex():
            if not torch.isfinite(t).all():
                raise CheckpointError(f"not saving {json_path.name}: weight {name!r} has non-finite values")
        tensors[f"model.{name}"] = t.to("cpu").contiguous().clone()
    ts = (train_state or {}).get("tensors", {}) if train_state else {}
    for name, t in ts.items():
        tensors[f"train.{name}"] = t.detach().to("cpu").contiguous().clone()
    card = dict(card or {})
    card.setdefault("params_effective", count_params(model, "effective"))
    card.setdefault("params_stored", count_params(model, "stored"))
    card["geomlab_version"] = geomlab.__version__
    meta = {
        "format_version": FORMAT_VERSION,
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
    text = json.dumps(_jsonable(meta), indent=1, allow_nan=False)
    mode = 0o666 & ~_UMASK  # mkstemp makes 0600; a checkpoint is an ordinary file
    try:
        fd, tmp = tempfile.mkstemp(dir=json_path.parent, prefix=".geomlab-save.", suffix=".part")
    except OSError as exc:
        raise _name_error(json_path, exc) from None
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"format": "pt", "geomlab": "1", ckpt_files.HEADER_KEY: save_id})
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        ckpt_files.install(json_path, st_path, Path(tmp), text, save_id, mode, exclusive=exclusive)
    except ckpt_files.ExistsError:
        raise CheckpointExistsError(f"a checkpoint named {_short(json_path.stem)} already exists in "
                                    f"{json_path.parent.name}/; not replacing it") from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _name_error(json_path, exc) from None
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return json_path


def _short(name: str, n: int = 60) -> str:
    return name if len(name) <= n else name[:n] + "…"


def _name_error(json_path: Path, exc: OSError) -> Exception:
    if exc.errno == errno.ENAMETOOLONG or len(json_path.name.encode()) > 255:
        return CheckpointError(f"checkpoint name {_short(json_path.stem)!r} is too long for the file system "
                               f"({len(json_path.stem)} characters); choose a shorter one")
    return exc


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Only the JSON part of a checkpoint (cheap; for catalogues). Raises :class:`CheckpointError`."""
    json_path, _ = paths(path)
    if not json_path.is_file():
        from geomlab.locate import BUNDLED_DIR

        bundled = BUNDLED_DIR / json_path.name
        hint = ""
        if bundled.is_file() and json_path.parent in (Path("."), Path("bundled")):  # a name, or the app's form
            hint = f"; a bundled checkpoint of that name is {os.path.relpath(bundled)}"
        raise CheckpointError(f"checkpoint file {json_path} is missing{hint}")
    try:
        meta = json.loads(ckpt_files.read_regular(json_path, follow=True).decode("utf-8"))
    except OSError as exc:
        raise CheckpointError(f"checkpoint file {json_path.name} cannot be read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{json_path.name} is not valid JSON (truncated or corrupt?): {exc}") from exc
    return _validate_meta(meta, json_path)


def _validate_meta(meta: Any, json_path: Path) -> dict[str, Any]:
    if not isinstance(meta, dict):
        raise CheckpointError(f"{json_path.name} must hold a JSON object")
    version = meta.get("format_version")
    if not isinstance(version, int):
        raise CheckpointError(f"{json_path.name} has no integer format_version")
    if version > FORMAT_VERSION:
        raise CheckpointError(f"{json_path.name} has format_version {version}, newer than this geomlab "
                              f"reads ({FORMAT_VERSION}); upgrade geomlab")
    for key in ("model_config", "tensors"):
        if not isinstance(meta.get(key), dict):
            raise CheckpointError(f"{json_path.name} has no {key!r} object")
    return meta


def load(path: str | os.PathLike, device: str | torch.device = "cpu") -> Checkpoint:
    """Load and validate a checkpoint (``NAME``, ``NAME.json`` or ``NAME.safetensors``).

    Returns a :class:`Checkpoint` whose model is in eval mode on ``device``. Raises
    :class:`CheckpointError` (see module docstring for the cases).
    """
    json_path, st_path = paths(path)
    if not ckpt_files.is_regular(st_path, follow=True):
        read_meta(json_path)  # a missing JSON is named first
        raise CheckpointError(f"checkpoint file {st_path} is missing (the JSON {json_path.name} is there)")
    from safetensors import safe_open

    try:  # one open file for the header and the tensors: the save id read is the one of these tensors
        with safe_open(str(st_path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{st_path.name} is truncated or not a safetensors file: {exc}") from exc
    weights_id = header.get(ckpt_files.HEADER_KEY) or None
    try:
        meta = _validate_meta(ckpt_files.pair_meta(json_path, st_path, weights_id, read_meta, repair=True),
                              json_path)
    except ckpt_files.PairError as exc:
        raise CheckpointError(str(exc)) from None
    manifest = meta["tensors"]
    missing = sorted(set(manifest) - set(tensors))
    extra = sorted(set(tensors) - set(manifest))
    if missing or extra:
        raise CheckpointError(f"{json_path.name} and {st_path.name} disagree: tensors listed but missing "
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
        raise CheckpointError(f"{json_path.name}: {exc}") from exc
    try:
        model = build_model(config)
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{json_path.name}: cannot build the {kind!r} model from its config: {exc}") from exc
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{st_path.name} does not fit a {kind!r} model with this config: missing "
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
            raise CheckpointError(f"weight {name!r} in {st_path.name} has non-finite values (NaN or Inf)")
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    vocab = None
    if meta.get("vocab") is not None:
        try:
            vocab = Vocab.from_json(meta["vocab"])
        except ValueError as exc:
            raise CheckpointError(f"{json_path.name}: bad vocabulary: {exc}") from exc
        if vocab.size != int(config.get("vocab_size", vocab.size)):
            raise CheckpointError(f"{json_path.name}: vocabulary has {vocab.size} tokens but the model "
                                  f"config says vocab_size={config.get('vocab_size')}")
    train_tensors = {k[len("train."):]: v for k, v in tensors.items() if k.startswith("train.")}
    train_state = None
    if train_tensors or meta.get("train_state") is not None:
        train_state = {"tensors": train_tensors, "json": meta.get("train_state")}
    return Checkpoint(model=model, vocab=vocab, card=dict(meta.get("card") or {}), path=json_path,
                      model_config=config, train_config=meta.get("train_config"),
                      metrics=list(meta.get("metrics") or []), train_state=train_state, meta=meta)
