"""Checkpoints, never pickles, in Hugging Face's folder layout (older layouts still load):

* **folder** ``NAME/``, ``format_version`` 3 (what training writes, and the bundled zoo):

  - ``config.json``: the model config (``build_model(config)`` rebuilds the architecture);
  - ``model.safetensors``: the model's ``state_dict`` itself, names without a prefix, so it loads strictly
    (``model.load_state_dict(load_file(...), strict=True)``, or ``huggingface_hub``'s ``PyTorchModelHubMixin``);
  - ``vocab.json``: :meth:`geomlab.data.Vocab.to_json` (absent for a task without one);
  - ``training_state.safetensors`` + ``training_state.json``: the resumable training state (optimiser moments,
    RNG states; step and optimiser hyper-parameters), only when saved with one. Only resuming training needs
    it: a folder copied without both files loads weights-only (``Checkpoint.train_state`` is ``None``), while
    one of the two without the other, or either broken or from another save, is refused;
  - ``README.md``: a model card (YAML front matter: license, tags, pipeline tag, library name, the model kind,
    parameters, dataset and ``model-index`` eval results, then text for people; :func:`model_card`);
  - ``geomlab.json``: geomlab's record (below), with the sha256 of every other file but the card (the weights
    too).

  :mod:`geomlab.checkpoints.hub` moves such folders to and from the Hugging Face Hub (``save_pretrained``,
  ``from_pretrained``, ``push_to_hub``) and converts older layouts (``convert``; ``geomlab zoo --convert``).
* **older folder** (``format_version`` 2, read only): ``config.json``, ``model.safetensors`` holding
  ``model.<key>`` weights and ``train.<name>`` training state, ``README.md``, and ``geomlab.json`` holding the
  vocabulary and the JSON part of the training state too.
* **flat pair** ``NAME.safetensors`` + ``NAME.json`` (``format_version`` 1; written with ``layout="flat"``,
  and by a resumed flat run, which stays flat). Its JSON holds ``model_config``, ``vocab`` and ``train_state``
  itself and its tensors are named as in format 2. A pair's path whose files are gone names the folder
  ``NAME/`` it was converted to.

``geomlab.json`` (or ``NAME.json``) holds:

* ``card``: corpus / task, split, steps, seed, ``params_effective``, ``params_stored``, ``valid_bpc``,
  ``test_bpc``, training time (s), device, geomlab version, ``weights_accepted`` (the UTC date
  :func:`geomlab.checkpoints.hub.accept_weights` recorded weights changed after the metrics), ... (free-form
  keys allowed);
* ``train_config``: the training config used (or ``null``); ``metrics``: the metrics history (list of dicts);
* ``tensors`` (and ``train_tensors`` in a format-3 folder): a manifest ``name -> {"shape", "dtype"}`` of every
  tensor in the ``.safetensors`` files;
* ``files``: ``name -> {"sha256"}`` of the weights (``model.safetensors``, in a flat pair too, for its
  ``NAME.safetensors``) and, in a folder, of the companion files, so a file from another save (or edited by
  hand, or damaged) is refused; a ``config.json`` edited on purpose loads once its entry is deleted here. A
  checkpoint saved before the weights' sum was recorded loads with its weights unchecked
  (:func:`geomlab.checkpoints.files.checksums_line` says which files are checked).

Tensors are written with ``safetensors`` and read with ``safetensors.safe_open`` (or from bytes), so loading
an untrusted checkpoint never executes code; the model card is written with ``huggingface_hub`` (no network)
and never read by the loader.

**One unit on disk.** :func:`save` writes the files so that a kill at any instant leaves the old checkpoint
or the new one: the weights and the JSON carry one random ``save_id`` (JSON key ``save_id``, safetensors
header metadata ``geomlab_save_id``), the other files wait in journal files until the weights are in place,
and :func:`load` takes the files that match the weights (finishing an interrupted save) or refuses a
mismatched set. Files without ids (older files, files written by other tools) load without that match.
``save(..., exclusive=True)`` never replaces an existing checkpoint. See :mod:`geomlab.checkpoints.files`.

:func:`load` validates everything and raises :class:`CheckpointError` (a ``ValueError``) with one readable
line for: missing or truncated files (a folder's training state may be missing as a pair), a JSON that is not
valid JSON, a JSON that does not match the tensors (names, shapes, dtypes), files
from two different saves (a ``config.json`` too), weights whose sha256 is not the one recorded (changed since
the save; verified once per file state within a process; ``geomlab zoo --accept-weights`` records the sum of
weights changed on purpose: :func:`geomlab.checkpoints.hub.accept_weights`), an unknown model kind, non-finite weights, a newer
format version.

This module is the public face of the format; the code is in :mod:`~geomlab.checkpoints.layout` (file names,
versions, where the files are), :mod:`~geomlab.checkpoints.find` (the checkpoint a command-line argument
names), :mod:`~geomlab.checkpoints.writing` (:func:`save`), :mod:`~geomlab.checkpoints.card` (the model card)
and :mod:`~geomlab.checkpoints.reading` (:func:`read_meta`, :func:`load`, :func:`check_weights`).
"""

from geomlab.checkpoints.card import model_card
from geomlab.checkpoints.find import EXPECTED, find
from geomlab.checkpoints.layout import (CARD_FILE, CONFIG_FILE, FLAT_FORMAT_VERSION, FORMAT_VERSION, META_FILE,
                                        STATE_FILE, STATE_JSON_FILE, VOCAB_FILE, WEIGHTS_FILE, CheckpointError,
                                        Location, layout_of, locate, paths)
from geomlab.checkpoints.reading import Checkpoint, check_weights, load, read_meta
from geomlab.checkpoints.writing import CheckpointExistsError, save

__all__ = ["FORMAT_VERSION", "FLAT_FORMAT_VERSION", "CONFIG_FILE", "WEIGHTS_FILE", "META_FILE", "CARD_FILE",
           "VOCAB_FILE", "STATE_FILE", "STATE_JSON_FILE",
           "CheckpointError", "CheckpointExistsError", "Checkpoint", "Location", "EXPECTED", "paths", "locate",
           "layout_of", "find", "save", "model_card", "read_meta", "load", "check_weights"]
