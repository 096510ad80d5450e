"""Reading a checkpoint in either layout of :mod:`geomlab.checkpoints.io`: :func:`read_meta` (the description
only) and :func:`load` (validated weights, the model built, the vocabulary, the training state), each problem
one :class:`~geomlab.checkpoints.layout.CheckpointError` line."""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints import foreign
from geomlab.checkpoints.layout import (CONFIG_FILE, FORMAT_VERSION, META_FILE, STATE_FILE, STATE_JSON_FILE,
                                        WEIGHTS_FILE, CheckpointError, Location, dtype_name, exists, locate)
from geomlab.core.locate import bundled_checkpoint
from geomlab.data.vocab import Vocab
from geomlab.models import build_model, model_class


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    ``model`` is in eval mode on the requested device; ``vocab`` may be ``None`` (real-valued tasks);
    ``train_state`` holds the ``train.*`` tensors (names without the prefix) merged with the JSON
    ``train_state`` under ``"json"`` when the checkpoint has them, else ``None`` (saved without, or a
    weights-only folder: :meth:`require_train_state`). ``path``: the folder (``layout``
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

    def require_train_state(self) -> None:
        """Check that training can resume from this checkpoint: :class:`CheckpointError` (one line) when it has
        no training state (saved without one, or a folder copied without its ``training_state.*`` files, which
        loads weights-only). Only resuming needs it; everything that reads the model works without it."""
        if self.train_state and self.train_state.get("json"):
            return
        why = (f"no {STATE_FILE} and {STATE_JSON_FILE}: a weights-only copy, or saved without them"
               if self.layout == "folder" and self.meta.get("format_version", 0) >= FORMAT_VERSION
               else "it was saved without one")
        raise CheckpointError(f"{self.path.name} has no training state ({why}), so training cannot resume from "
                              "it; start a new run instead (eval, trace, sample and the app read it as it is)")


def _missing(path: Path) -> CheckpointError:
    hint = ""
    if path.parent in (Path("."), Path("bundled")) and bundled_checkpoint(Path("bundled") / path.name):  # a name
        hint = f"; a bundled checkpoint has that name: load it as 'bundled/{path.stem}'"
    return CheckpointError(f"checkpoint file {path} is missing{hint}")


def _read_json(path: Path, label: str) -> Any:
    """:func:`geomlab.checkpoints.files.read_json` following symlinks, its errors as :class:`CheckpointError`
    (a missing file with a hint when a bundled checkpoint has its name; a path that is there but not a regular
    file says so)."""
    if not path.is_file():
        if path.exists() or path.is_symlink():  # a folder, a device, a FIFO, a link to nothing readable
            raise CheckpointError(f"checkpoint file {label} is not a regular file (a folder, a device, a FIFO or "
                                  "a link to none of these)")
        raise _missing(path)
    try:
        return ckpt_files.read_json(path, label, follow=True)
    except ckpt_files.PairError as exc:
        raise CheckpointError(str(exc)) from exc.__cause__


def _check_folder(loc: Location) -> None:
    if not loc.meta.is_file() and not ckpt_files.is_regular(loc.weights, follow=True):
        raise CheckpointError(f"{loc.root} is a folder but not a checkpoint: it has no {META_FILE} and no "
                              f"{WEIGHTS_FILE} (a checkpoint folder holds {ckpt_files.NEEDED})")


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
    if loc.folder and foreign.is_foreign(loc.root):  # a transformers GPT-2 folder
        return foreign.read_meta(loc.root)
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


def check_weights(path: str | os.PathLike, meta: dict[str, Any] | None = None) -> None:
    """The weights of checkpoint ``path`` (any spelling :func:`load` takes) have the sha256 its description
    records (``meta``: that description when the caller has read it, else :func:`read_meta`); nothing is
    checked when none is recorded. The check :func:`load` makes, with its message, without loading the model
    (the sum is cached per file state: :func:`geomlab.checkpoints.files.file_sha256`). :class:`CheckpointError`
    (one line, naming the command that records the sum of weights changed on purpose) when they changed since
    the save or cannot be read."""
    loc = locate(_resolve(path))
    _check_sum(loc, read_meta(path) if meta is None else meta, path)


def _check_sum(loc: Location, meta: dict[str, Any], path: str | os.PathLike) -> None:
    try:
        ckpt_files.check_weights_sha(loc.weights, loc.label(loc.weights), meta, loc.label(loc.meta), path)
    except ckpt_files.PairError as exc:
        raise CheckpointError(str(exc)) from None


def load(path: str | os.PathLike, device: str | torch.device = "cpu", *, check_sum: bool = True) -> Checkpoint:
    """Load and validate a checkpoint: a folder ``NAME/`` (or a file in it), or a flat pair ``NAME``,
    ``NAME.json`` or ``NAME.safetensors`` (:func:`locate`); when no such files are there, ``bundled/NAME``
    names a bundled checkpoint (:func:`geomlab.core.locate.bundled_checkpoint`, the app's and the command line's
    spelling).

    Returns a :class:`Checkpoint` whose model is in eval mode on ``device``. Raises
    :class:`CheckpointError` (the module docstring of :mod:`geomlab.checkpoints.io` lists the cases).
    ``check_sum=False`` skips only the weights' sha256 (:func:`check_weights`): for recording the sum of
    weights the user vouches for (:func:`geomlab.checkpoints.hub.accept_weights`), never for reading a model.
    """
    loc = locate(_resolve(path))
    jname, sname = loc.label(loc.meta), loc.label(loc.weights)
    try:
        return _load(loc, jname, sname, device, path if check_sum else None)
    except CheckpointError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:  # a field of the wrong type
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"{jname}: a field holds a value of the wrong kind ({type(exc).__name__}: "
                              f"{reason})") from None


def _load(loc, jname: str, sname: str, device: str | torch.device, path: str | os.PathLike | None) -> Checkpoint:
    """The body of :func:`load` once the files are located (``path``: as the user named the checkpoint, for
    the weights' sum check; None skips that check)."""
    if loc.folder and foreign.is_foreign(loc.root):  # a transformers GPT-2 folder
        meta = foreign.read_meta(loc.root)
        model = foreign.load_model(loc.root).to(device).eval()
        return Checkpoint(model=model, vocab=_vocab(meta, meta["model_config"], jname), card=meta["card"],
                          path=loc.root, model_config=model.config, meta=meta, layout="folder")
    tensors, weights_id = _read_weights(loc)
    meta = _meta_for(loc, weights_id, repair=True)
    manifest = meta["tensors"]
    if loc.folder and meta["format_version"] >= 3:  # a Hugging Face folder: the training state apart
        tensors, manifest = _prefixed(loc, meta, tensors, weights_id)
    _check_manifest(manifest, tensors, jname, sname)
    config = meta["model_config"]
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    # a folder's model config is its config.json; a flat pair's is in NAME.json
    model = _build(config, state, loc.label(loc.root / CONFIG_FILE) if loc.folder else jname, sname)
    # weights that fit the manifest and the config but changed since the save are refused here, after the
    # checks that say more (names, shapes, non-finite values); none recorded (an older checkpoint): unchecked
    if path is not None:
        _check_sum(loc, meta, path)
    model.to(device).eval()
    vocab = _vocab(meta, config, jname)
    train_tensors = {k[len("train."):]: v for k, v in tensors.items() if k.startswith("train.")}
    train_state = None
    if train_tensors or meta.get("train_state") is not None:
        train_state = {"tensors": train_tensors, "json": meta.get("train_state")}
    return Checkpoint(model=model, vocab=vocab, card=dict(meta.get("card") or {}), path=loc.root,
                      model_config=config, train_config=meta.get("train_config"),
                      metrics=list(meta.get("metrics") or []), train_state=train_state, meta=meta,
                      layout="folder" if loc.folder else "flat")


def _prefixed(loc: Location, meta: dict[str, Any], weights: dict[str, torch.Tensor], weights_id: str | None
              ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """A format-3 folder's tensors and manifest under the names of the older layouts: ``model.<key>`` for
    ``model.safetensors``, ``train.<name>`` for ``training_state.safetensors`` (read, checked against its
    sha256 in ``geomlab.json``, when listed there). :class:`CheckpointError` for an unreadable one."""
    from safetensors.torch import load as load_bytes

    tensors = {f"model.{k}": v for k, v in weights.items()}
    manifest = {f"model.{k}": v for k, v in meta["tensors"].items()}
    train = meta.get("train_tensors") or {}
    if not isinstance(train, dict):
        raise CheckpointError(f"{loc.label(loc.meta)} has a 'train_tensors' that is not an object")
    manifest.update({f"train.{k}": v for k, v in train.items()})
    if STATE_FILE in (meta.get("files") or {}):
        try:
            raw = ckpt_files.companion(loc.root, STATE_FILE, meta, weights_id)
            tensors.update({f"train.{k}": v for k, v in load_bytes(raw).items()})
        except ckpt_files.PairError as exc:
            raise CheckpointError(str(exc)) from None
        except Exception as exc:  # safetensors' own error type for a corrupt file
            raise CheckpointError(f"{loc.root.name}/{STATE_FILE} is truncated or not a safetensors file") from exc
    return tensors, manifest


def _resolve(path: str | os.PathLike) -> str | os.PathLike:
    """``path`` itself when any file of it is there, else the bundled checkpoint it names (the path unchanged
    when none does). :class:`CheckpointError` for a ``bundled/NAME`` that is not bundled."""
    if exists(Path(path)):
        return path
    found = bundled_checkpoint(path)
    if found is None and Path(path).parent == Path("bundled"):
        from geomlab.core.locate import bundled_names

        raise CheckpointError(f"no bundled checkpoint {Path(path).name!r}; the bundled ones: "
                              f"{', '.join(bundled_names()) or 'none'}")
    return found or path


def _read_weights(loc: Location) -> tuple[dict[str, torch.Tensor], str | None]:
    """Every tensor of the weights file by name and the save id in its header (``None`` without one), read
    from one open file. :class:`CheckpointError` for a folder that is no checkpoint, a missing (the JSON named
    first when it is missing too), truncated or unreadable weights file."""
    json_path, st_path = loc.meta, loc.weights
    if loc.folder:
        _check_folder(loc)
    if not ckpt_files.is_regular(st_path, follow=True):
        if not loc.folder:
            read_meta(json_path)  # a missing JSON is named first
        raise CheckpointError(f"checkpoint file {st_path} is missing (the JSON {loc.label(json_path)} is there)")
    try:  # the header alone, bounded, before safetensors parses it
        ckpt_files.read_header(st_path)
    except ckpt_files.PairError as exc:
        raise CheckpointError(f"{loc.root.name}: {exc}" if loc.folder else str(exc)) from None
    from safetensors import safe_open

    try:  # one open file for the header and the tensors: the save id read is the one of these tensors
        with safe_open(str(st_path), framework="pt") as f:
            header = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # safetensors raises its own error types for truncated/corrupt files
        raise CheckpointError(f"{loc.label(st_path)} is truncated or not a safetensors file (it could not be "
                              "read); save the checkpoint again, or copy "
                              + ("its files" if loc.folder else "both of its files") + " anew") from exc
    return tensors, header.get(ckpt_files.HEADER_KEY) or None


def _check_manifest(manifest: dict[str, Any], tensors: dict[str, torch.Tensor], jname: str, sname: str) -> None:
    """The JSON's manifest names exactly the file's tensors, with their shapes and dtypes; else
    :class:`CheckpointError`."""
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
        if dtype_name(t) != info.get("dtype"):
            raise CheckpointError(f"tensor {name!r}: JSON says dtype {info.get('dtype')}, file has "
                                  f"{dtype_name(t)}")


#: Most parameters a checkpoint's config may describe (design choice: far above geomlab's models, which
#: have well under a million; it bounds what one checkpoint folder can make the process allocate).
MAX_PARAMS = 50_000_000


#: Most modules a checkpoint's model may have (design choice: geomlab's models have a few hundred; a config
#: of a million layers stops here, after about a second, instead of building them all).
MAX_MODULES = 10_000
_GUARD = threading.local()
_HOOKED = threading.Lock()


@contextlib.contextmanager
def _size_cap(jname: str, kind: Any):
    """While a model is built in this thread, count the parameter elements and the sub-modules it registers
    (global torch hooks, which other threads pass through untouched) and stop the build with
    :class:`CheckpointError` once they pass :data:`MAX_PARAMS` or :data:`MAX_MODULES`, even on ``meta``."""
    with _HOOKED:
        if not getattr(_size_cap, "hooked", False):
            torch.nn.modules.module.register_module_parameter_registration_hook(_count_param)
            torch.nn.modules.module.register_module_module_registration_hook(_count_module)
            _size_cap.hooked = True
    _GUARD.state = [0, 0, jname, kind]
    try:
        yield
    finally:
        _GUARD.state = None


def _count(i: int, n: int) -> None:
    state = getattr(_GUARD, "state", None)
    if state is None:
        return
    state[i] += n
    if state[0] > MAX_PARAMS or state[1] > MAX_MODULES:
        what = f"{MAX_PARAMS:,} parameters" if state[0] > MAX_PARAMS else f"{MAX_MODULES:,} modules"
        raise CheckpointError(f"{state[2]}: the {state[3]!r} config describes a model of more than {what}, "
                              "the limit")


def _count_param(module, name, param) -> None:
    if param is not None:
        _count(0, param.numel())


def _count_module(module, name, submodule) -> None:
    if submodule is not None:
        _count(1, 1)


def _build(config: dict[str, Any], state: dict[str, torch.Tensor], jname: str, sname: str):
    """The model of ``config`` with the weights ``state`` (``state_dict`` keys) loaded strictly; ``jname``
    names the file the config was read from (``NAME/config.json`` or ``NAME.json``).
    The model is first built on the ``meta`` device (no memory) within :data:`MAX_PARAMS` parameters and
    :data:`MAX_MODULES` modules (:func:`_size_cap`), and its weight names and shapes are checked against
    ``state`` before anything is allocated.
    :class:`CheckpointError` for an unknown kind, a config the model rejects or that describes too many
    parameters, missing, unexpected or mis-shaped weights, another dtype, or non-finite values."""
    kind = config.get("kind")
    try:
        model_class(kind)
    except ValueError as exc:
        raise CheckpointError(f"{jname}: {exc}") from exc
    try:
        with torch.device("meta"), _size_cap(jname, kind):
            probe = build_model(config)
    except (ValueError, TypeError, KeyError, OverflowError, RuntimeError) as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{jname}: cannot build the {kind!r} model from its config: {exc}") from exc
    _check_weights(probe.state_dict(), state, kind, sname, jname)
    del probe
    try:
        model = build_model(config)
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(f"{jname}: cannot build the {kind!r} model from its config: {exc}") from exc
    model.load_state_dict(state, strict=True)
    return model


def _check_weights(expected: dict[str, torch.Tensor], state: dict[str, torch.Tensor], kind: Any,
                   sname: str, cname: str) -> None:
    """``state`` has exactly the names, shapes and dtypes of ``expected`` (a built model's ``state_dict``, on
    any device, ``meta`` included) and finite values; else :class:`CheckpointError` naming the weights file
    ``sname`` and the config file ``cname``."""
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{sname} does not fit a {kind!r} model with this config: missing "
                              f"weights {missing[:5]}, unexpected {extra[:5]}")
    for name, t in state.items():
        e = expected[name]
        if t.shape != e.shape:
            raise CheckpointError(f"{cname}: weight {name!r} has shape {list(t.shape)} in {sname} but the "
                                  f"{kind!r} config needs {list(e.shape)}")
        if t.dtype != e.dtype:
            raise CheckpointError(f"weight {name!r} has dtype {dtype_name(t)} but the model uses "
                                  f"{dtype_name(e)}")
        if (t.is_floating_point() or t.is_complex()) and not torch.isfinite(t).all():
            raise CheckpointError(f"weight {name!r} in {sname} has non-finite values (NaN or Inf)")


def _vocab(meta: dict[str, Any], config: dict[str, Any], jname: str) -> Vocab | None:
    """The checkpoint's vocabulary (``None`` when it has none). :class:`CheckpointError` for a malformed one or
    one whose size is not the config's ``vocab_size``."""
    if meta.get("vocab") is None:
        return None
    try:
        vocab = Vocab.from_json(meta["vocab"])
    except ValueError as exc:
        raise CheckpointError(f"{jname}: bad vocabulary: {exc}") from exc
    if vocab.size != int(config.get("vocab_size", vocab.size)):
        raise CheckpointError(f"{jname}: vocabulary has {vocab.size} tokens but the model "
                              f"config says vocab_size={config.get('vocab_size')}")
    return vocab
