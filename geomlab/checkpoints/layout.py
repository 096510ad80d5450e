"""Where a checkpoint's files are, in either layout (:mod:`geomlab.checkpoints.io`): the format versions and
file names, :class:`CheckpointError`, the flat pair's two paths, :func:`locate` (folder or flat pair) and the
layout a new save takes. Nothing here opens a file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from geomlab.checkpoints import files as ckpt_files

if TYPE_CHECKING:
    import torch

#: Newest ``format_version`` this geomlab reads and writes in a folder: 3 = Hugging Face folder (weights
#: without a prefix, vocabulary and training state in their own files); 2 = older folder (``model.``/``train.``
#: tensors in one file, the vocabulary in ``geomlab.json``; read only); 1 = flat pair.
FORMAT_VERSION = 3
FLAT_FORMAT_VERSION = 1
CONFIG_FILE, WEIGHTS_FILE, META_FILE, CARD_FILE = (ckpt_files.CONFIG, ckpt_files.WEIGHTS, ckpt_files.META,
                                                   ckpt_files.CARD)
VOCAB_FILE, STATE_FILE, STATE_JSON_FILE = ckpt_files.VOCAB, ckpt_files.STATE, ckpt_files.STATE_JSON


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded safely; the message says which file and what is wrong."""


def paths(stem: str | os.PathLike) -> tuple[Path, Path]:
    """``(NAME.json, NAME.safetensors)`` of a flat pair, for a stem or either file's path."""
    p = Path(stem)
    if p.suffix in (".json", ".safetensors"):
        p = p.with_suffix("")
    return p.with_name(p.name + ".json"), p.with_name(p.name + ".safetensors")


_FOLDER_FILES = ckpt_files.FOLDER_FILES


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
    ``NAME.json`` or ``NAME.safetensors`` (the folder ``NAME/`` when neither file of the pair is there: the
    path of a checkpoint converted to a folder). A bare ``NAME`` that is a folder is the folder, unless the folder
    holds none of the checkpoint files and ``NAME.json`` exists. Never raises; nothing is opened."""
    p = Path(path)
    if p.name in _FOLDER_FILES and ((p.parent / META_FILE).exists() or
                                    ((p.parent / WEIGHTS_FILE).exists() and (p.parent / CONFIG_FILE).exists())):
        p = p.parent  # a file of a folder (a flat pair named "model" or "config" has no geomlab.json)
    elif p.suffix in (".json", ".safetensors"):
        json_path, st_path = paths(p)
        folder = json_path.with_suffix("")
        if not (os.path.lexists(json_path) or os.path.lexists(st_path)) and (folder / WEIGHTS_FILE).exists():
            return Location(folder, folder / META_FILE, folder / WEIGHTS_FILE, folder=True)  # converted to a folder
        return Location(json_path, json_path, st_path, folder=False)
    if p.is_dir() and ((p / META_FILE).exists() or (p / WEIGHTS_FILE).exists() or not paths(p)[0].exists()):
        return Location(p, p / META_FILE, p / WEIGHTS_FILE, folder=True)
    json_path, st_path = paths(p)
    return Location(json_path, json_path, st_path, folder=False)


def exists(path: Path) -> bool:
    """Whether any file of the checkpoint ``path`` names (:func:`locate`) is there (a broken symlink too)."""
    loc = locate(path)
    return any(os.path.lexists(f) for f in (loc.root, loc.meta, loc.weights))


def layout_of(stem: str | os.PathLike) -> str:
    """``"flat"`` when a flat pair ``stem.json``/``stem.safetensors`` is already there, else ``"folder"``: what
    ``save(..., layout="auto")`` writes (a resumed flat run stays flat; a new checkpoint is a folder)."""
    json_path, st_path = paths(stem)
    return "flat" if os.path.lexists(json_path) or os.path.lexists(st_path) else "folder"


def dtype_name(t: torch.Tensor) -> str:
    """The manifest's name of a tensor's dtype: ``"float32"``, ``"complex64"``, ``"int64"``, ..."""
    return str(t.dtype).removeprefix("torch.")

