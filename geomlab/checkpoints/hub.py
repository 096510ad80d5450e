"""Models in and out of the Hugging Face Hub: :func:`save_pretrained`, :func:`from_pretrained` (a local
checkpoint, a bundled one, or a Hub model id), :func:`push_to_hub`, and :func:`convert` (an older layout to the
Hugging Face folder of :mod:`geomlab.checkpoints.io`, format 3), and :func:`accept_weights` (a checkpoint saved
anew in place, recording the sum of weights its user vouches for).

The folder is what :func:`geomlab.checkpoints.io.save` writes with ``layout="folder"``; this module only moves
it. Hub access goes through ``huggingface_hub`` (``snapshot_download``, ``HfApi.create_repo`` and
``HfApi.upload_folder``). Design choice: geomlab's models do not inherit ``PyTorchModelHubMixin``, since one
``config.json`` names its class by ``kind`` (:func:`geomlab.models.build_model`) and the loader validates the
files before building anything; the folder is still one that the mixin loads strictly (``config.json`` is the
model class's constructor argument, ``model.safetensors`` its ``state_dict`` without prefix).
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import torch

from geomlab.checkpoints import files as ckpt_files
from geomlab.checkpoints.layout import FORMAT_VERSION, CheckpointError, exists
from geomlab.checkpoints.reading import Checkpoint, load
from geomlab.checkpoints.writing import save
from geomlab.core.locate import bundled_checkpoint
from geomlab.data.vocab import Vocab

#: A Hub model id: ``owner/name`` (letters, digits, ``-``, ``_``, ``.``; Hugging Face's rule, simplified).
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def save_pretrained(model, folder: str | os.PathLike, vocab: Vocab | None = None,
                    card: dict[str, Any] | None = None, **kw: Any) -> Path:
    """Write ``model`` (a registered :class:`geomlab.models.SequenceModel`) as a Hugging Face folder
    ``folder/`` (``config.json``, ``model.safetensors``, ``vocab.json``, ``README.md``, ``geomlab.json``, and
    ``training_state.*`` with ``train_state``), as one unit. ``card``: summary fields (``corpus``,
    ``valid_bpc``, ``test_bpc``, ... : the model card's eval results); ``kw``: ``train_config``, ``metrics``,
    ``train_state``, ``exclusive`` of :func:`geomlab.checkpoints.io.save`, which raises what it raises.
    Returns the folder."""
    return save(Path(folder), model, vocab, card, layout="folder", **kw)


def from_pretrained(name: str | os.PathLike, device: str | torch.device = "cpu", *, revision: str | None = None,
                    token: str | bool | None = None, cache_dir: str | os.PathLike | None = None,
                    local_files_only: bool = False) -> Checkpoint:
    """Load a checkpoint: a local folder or flat pair (any layout; a ``Path`` is always local), a bundled one
    (``bundled/NAME``), else a Hub model id ``owner/name`` (a string naming no local file) downloaded with
    ``huggingface_hub.snapshot_download`` (only the checkpoint's files; ``revision``, ``token``, ``cache_dir``,
    ``local_files_only`` as there) and loaded from its local copy, validated as any local folder (no code runs). Returns a :class:`~geomlab.checkpoints.io.Checkpoint`.

    Raises :class:`CheckpointError` (one line) for a broken checkpoint, or a name that is neither a local
    checkpoint nor a Hub id the Hub (or its cache) has."""
    text = str(name)
    if not isinstance(name, str) or exists(Path(name)) or bundled_checkpoint(name) is not None \
            or not HUB_ID.match(text) or Path(text).parent == Path("bundled"):
        return load(name, device)  # a Path is always local
    from huggingface_hub import snapshot_download

    import geomlab

    try:
        local = snapshot_download(text, revision=revision, token=token, cache_dir=cache_dir,
                                  local_files_only=local_files_only, allow_patterns=list(ckpt_files.FOLDER_FILES),
                                  library_name="geomlab", library_version=geomlab.__version__)
    except Exception as exc:  # huggingface_hub's HTTP, offline and not-found errors
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise CheckpointError(f"no local checkpoint {text} and the Hugging Face Hub gave none under that id "
                              f"({type(exc).__name__}: {reason})") from None
    return load(Path(local), device)


def push_to_hub(checkpoint: str | os.PathLike, repo_id: str, *, token: str | None = None,
                private: bool | None = None, revision: str | None = None, commit_message: str | None = None,
                create_pr: bool = False, training_state: bool = False) -> str:
    """Upload a checkpoint to the Hub model repository ``repo_id`` (created when missing), with
    ``huggingface_hub.HfApi.create_repo`` and ``upload_folder``: the checkpoint is loaded first (a broken one
    is never pushed); a folder in the current layout is uploaded as it is (its files only, no journals), an
    older layout, or a folder whose ``geomlab.json`` records no sha256 of its weights (saved before it did), is
    converted (:func:`convert`) into a temporary folder first, so the repository's folder has every sum. Returns the commit's URL.
    ``training_state``: also upload ``training_state.*`` (the optimiser's moments and RNG states, about twice
    the weights' size, that only ``train --resume`` needs); by default the repository gets the weights-only
    folder, which loads everywhere a model is read. Design choice.

    Raises :class:`CheckpointError` for a broken checkpoint or a bad ``repo_id``; ``huggingface_hub``'s errors
    (authentication, network) pass through."""
    if not HUB_ID.match(repo_id):
        raise CheckpointError(f"repo_id {repo_id!r} is not a Hub model id (owner/name)")
    from huggingface_hub import HfApi

    ckpt = load(checkpoint)
    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    message = commit_message or f"Upload {ckpt.path.name} (geomlab)"
    with tempfile.TemporaryDirectory(prefix="geomlab-push-") as tmp:
        folder = ckpt.path
        if ckpt.layout != "folder" or ckpt.meta.get("format_version", 0) < FORMAT_VERSION \
                or ckpt_files.WEIGHTS not in ckpt_files.checked_files(ckpt.meta):
            folder = convert(ckpt, Path(tmp) / _stem(ckpt.path))
        info = api.upload_folder(repo_id=repo_id, folder_path=folder, repo_type="model", revision=revision,
                                 commit_message=message, allow_patterns=[
                                     f for f in ckpt_files.FOLDER_FILES
                                     if training_state or f not in ckpt_files.STATE_FILES],
                                 create_pr=create_pr)
    return str(getattr(info, "commit_url", info))


def _stem(path: Path) -> str:
    return path.stem if path.suffix == ".json" else path.name


def convert(src: str | os.PathLike | Checkpoint, dest: str | os.PathLike) -> Path:
    """Write the checkpoint ``src`` (a path in any layout, or a loaded :class:`Checkpoint`) as a folder of the
    current layout at ``dest``: the same tensors, config, vocabulary, card, training config, metrics and
    training state. Never replaces an existing checkpoint (``CheckpointExistsError``). Returns the folder.
    :class:`CheckpointError` for a broken ``src``."""
    ckpt = src if isinstance(src, Checkpoint) else load(src)
    return save(Path(dest), ckpt.model, ckpt.vocab, ckpt.card, train_config=ckpt.train_config,
                metrics=ckpt.metrics, train_state=ckpt.train_state, exclusive=True, layout="folder")


def accept_weights(path: str | os.PathLike) -> Path | None:
    """Record the sha256 of checkpoint ``path``'s present weights, which its user vouches for (weights changed
    on purpose, or a checkpoint saved before geomlab recorded the sum): the checkpoint is loaded with every
    check but that sum (:func:`geomlab.checkpoints.io.load` with ``check_sum=False``: names, shapes, finite
    values, the other files' sums) and saved anew in place, in its layout, with its name, card, training config,
    metrics and training state (a new save id; a format-2 folder becomes format 3); the card gains
    ``weights_accepted``, today's UTC date (``YYYY-MM-DD``), since its metrics were measured on the weights
    before. Returns the checkpoint's path (the folder or the flat pair's JSON), or None when its weights already
    have the recorded sum (nothing is written). :class:`CheckpointError` for no checkpoint at ``path``
    (:func:`geomlab.checkpoints.find.find`, local only), a checkpoint that does not load, or a folder whose
    ``config.json`` changed (it decides how the weights are read, so only the weights are vouched for here);
    ``OSError`` when the write is refused (the checkpoint is left as it was). Design choice: the one way to
    replace a recorded sum."""
    import datetime
    import hashlib

    from geomlab.checkpoints.find import find
    from geomlab.checkpoints.reading import check_weights

    path = find(path, bundled=False)
    config, want = path / ckpt_files.CONFIG, None
    if config.is_file() and (path / ckpt_files.META).is_file():
        try:
            want = ckpt_files.recorded_sha(ckpt_files.read_json(path / ckpt_files.META), ckpt_files.CONFIG)
        except (ValueError, AttributeError):  # unreadable, or not an object: load says so below
            want = None
    if want is not None and hashlib.sha256(config.read_bytes()).hexdigest() != want:
        raise CheckpointError(f"{path.name}/{ckpt_files.CONFIG} changed since saved: --accept-weights vouches for "
                              f"the weights only, and {ckpt_files.CONFIG} decides how they are read; restore the "
                              f"saved {ckpt_files.CONFIG}")
    ckpt = load(path, check_sum=False)
    if ckpt_files.recorded_sha(ckpt.meta, ckpt_files.WEIGHTS) is not None:
        try:
            check_weights(path, ckpt.meta)
            return None
        except CheckpointError:
            pass
    if ckpt.meta.get("foreign"):  # a transformers folder: geomlab records nothing in it
        raise CheckpointError(f"{ckpt.path.name} is a {ckpt.meta['foreign']} folder, not a geomlab checkpoint: "
                              "it records no sum")
    card = {**ckpt.card, "weights_accepted": datetime.datetime.now(datetime.timezone.utc).date().isoformat()}
    return save(ckpt.path, ckpt.model, ckpt.vocab, card, train_config=ckpt.train_config, metrics=ckpt.metrics,
                train_state=ckpt.train_state, layout=ckpt.layout, name=ckpt.meta.get("name"))


def same_logits(a: Checkpoint, b: Checkpoint, seed: int = 0, length: int = 32) -> bool:
    """Whether the two checkpoints' models give ``torch.equal`` outputs on one seeded batch of token ids
    (2 x ``length``, below both vocabulary sizes). Design choice: the check of :func:`convert_folder`."""
    vocab_size = int(a.model_config.get("vocab_size", 2))
    x = torch.randint(0, vocab_size, (2, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return bool(torch.equal(a.model(x), b.model(x)))


def convert_folder(folder: str | os.PathLike, log=print) -> tuple[list[Path], list[str]]:
    """Convert every checkpoint directly in ``folder`` that is of an older layout (flat pairs ``NAME.json`` +
    ``NAME.safetensors``, format-2 folders) or records no sha256 of its weights (saved before geomlab did) to a
    folder ``NAME/`` of the current layout, check that it gives ``torch.equal`` logits (:func:`same_logits`),
    then remove the old files (a folder is replaced in place). Returns ``(new folders, skipped)``: ``skipped``
    the names of the checkpoints left as they were (one that does not load, weights changed since the save
    among them, or logits that differ), each with its reason given to ``log`` (``skipped NAME: reason``); the
    others are converted all the same. Design choice: one damaged checkpoint does not stop the folder's conversion."""
    import shutil

    done, skipped = [], []
    for path in sorted(Path(folder).iterdir()):
        if path.name.startswith(".") or not (path.suffix == ".json" or (path / ckpt_files.META).is_file()):
            continue
        name = _stem(path)
        try:
            old = load(path)
        except CheckpointError as exc:
            skipped.append(name)
            log(f"skipped {name}: {exc}")
            continue
        if old.layout == "folder" and old.meta.get("format_version", 0) >= FORMAT_VERSION \
                and ckpt_files.WEIGHTS in ckpt_files.checked_files(old.meta):
            continue
        work = path.with_name(f".{name}.converting")  # a folder is written beside itself first
        new_path = convert(old, path.with_name(name) if old.layout == "flat" else work / name)
        if not same_logits(old, load(new_path)):
            shutil.rmtree(work if old.layout == "folder" else new_path)
            skipped.append(name)
            log(f"skipped {name}: the converted weights give other logits; the old files are kept")
            continue
        if old.layout == "flat":
            for p in (path, path.with_suffix(".safetensors")):
                p.unlink()
        else:
            shutil.rmtree(path)
            os.replace(new_path, path)
            work.rmdir()
            new_path = path
        log(f"converted {name} -> {new_path}")
        done.append(new_path)
    return done, skipped
