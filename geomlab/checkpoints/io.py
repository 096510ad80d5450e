"""Checkpoints, never pickles, in two layouts:

* **folder** ``NAME/`` (what training writes; Hugging Face's layout): ``config.json`` (the model config:
  ``build_model(config)`` rebuilds the architecture), ``model.safetensors`` (the tensors), ``README.md`` (a
  model card: YAML front matter with the model kind, parameters, dataset and metrics, then text for people;
  :func:`model_card`) and ``geomlab.json`` (everything else, below, with ``format_version`` 2 and the sha256
  of ``config.json``);
* **flat pair** ``NAME.safetensors`` + ``NAME.json`` (``format_version`` 1: the bundled checkpoints; written
  with ``layout="flat"``, and by a resumed flat run, which stays flat). Its JSON holds ``model_config`` itself.

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
mismatched set. Files without ids (the bundled ones, files written by other tools) load without that match.
``save(..., exclusive=True)`` never replaces an existing checkpoint. See :mod:`geomlab.checkpoints.files`.

:func:`load` validates everything and raises :class:`CheckpointError` (a ``ValueError``) with one readable
line for: missing or truncated files, a JSON that does not match the tensors (names, shapes, dtypes), files
from two different saves (a ``config.json`` too), an unknown model kind, non-finite weights, a newer format
version.

This module is the public face of the format; the code is in :mod:`~geomlab.checkpoints.layout` (file names,
versions, where the files are), :mod:`~geomlab.checkpoints.find` (the checkpoint a command-line argument
names), :mod:`~geomlab.checkpoints.writing` (:func:`save`), :mod:`~geomlab.checkpoints.card` (the model card)
and :mod:`~geomlab.checkpoints.reading` (:func:`read_meta`, :func:`load`).
"""

from geomlab.checkpoints.card import model_card
from geomlab.checkpoints.find import EXPECTED, find
from geomlab.checkpoints.layout import (CARD_FILE, CONFIG_FILE, FLAT_FORMAT_VERSION, FORMAT_VERSION, META_FILE,
                                        WEIGHTS_FILE, CheckpointError, Location, layout_of, locate, paths)
from geomlab.checkpoints.reading import Checkpoint, load, read_meta
from geomlab.checkpoints.writing import CheckpointExistsError, save

__all__ = ["FORMAT_VERSION", "FLAT_FORMAT_VERSION", "CONFIG_FILE", "WEIGHTS_FILE", "META_FILE", "CARD_FILE",
           "CheckpointError", "CheckpointExistsError", "Checkpoint", "Location", "EXPECTED", "paths", "locate",
           "layout_of", "find", "save", "model_card", "read_meta", "load"]
