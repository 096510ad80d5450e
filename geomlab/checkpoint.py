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
with ``safetensors.torch.load_file``, so loading an untrusted checkpoint never executes code.

:func:`load` validates everything and raises :class:`CheckpointError` (a ``ValueError``) with one readable
line for: missing or truncated files, a JSON that does not match the tensors (names, shapes, dtypes), an
unknown model kind, non-finite weights, a newer format version.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import geomlab
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


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a checkpoint is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(stem: str | os.PathLike, model, vocab: Vocab | None, card: dict[str, Any] | None = None, *,
         train_config: dict[str, Any] | None = None, metrics: list[dict[str, Any]] | None = None,
         train_state: dict[str, Any] | None = None) -> Path:
    """Write ``stem.safetensors`` and ``stem.json`` (atomically: each is written then renamed).

    Args:
        stem: path without suffix (a ``.json``/``.safetensors`` suffix is stripped); parent folders are made.
        model: a registered :class:`geomlab.models.SequenceModel` (uses ``model.config``).
        vocab: its vocabulary, or ``None``.
        card: summary fields (see module docstring); ``params_effective``/``params_stored``/
            ``geomlab_version``/``format_version`` are filled in.
        train_state: optional resumable state: ``{"tensors": {name: Tensor}, "json": {...}}``.

    Returns the JSON path. Raises :class:`CheckpointError` if a weight is not finite (a broken model is
    never saved) and ``ValueError`` for a model without ``config``.
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

    _atomic_write(st_path, lambda tmp: save_file(tensors, tmp, metadata={"format": "pt", "geomlab": "1"}))
    text = json.dumps(_jsonable(meta), indent=1, allow_nan=False)
    _atomic_write(json_path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return json_path


def read_meta(path: str | os.PathLike) -> dict[str, Any]:
    """Only the JSON part of a checkpoint (cheap; for catalogues). Raises :class:`CheckpointError`."""
    json_path, _ = paths(path)
    if not json_path.is_file():
        bundled = Path(__file__).resolve().parent.parent / "assets" / "checkpoints" / json_path.name
        hint = ""
        if bundled.is_file() and json_path.parent in (Path("."), Path("bundled")):  # a name, or the app's form
            hint = f"; a bundled checkpoint of that name is {os.path.relpath(bundled)}"
        raise CheckpointError(f"checkpoint file {json_path} is missing{hint}")
    try:
        meta = json.loads(json_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{json_path.name} is not valid JSON (truncated or corrupt?): {exc}") from exc
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
    meta = read_meta(json_path)
    if not st_path.is_file():
        raise CheckpointError(f"checkpoint file {st_path} is missing (the JSON {json_path.name} is there)")
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(st_path))
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{st_path.name} is truncated or not a safetensors file: {exc}") from exc
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
