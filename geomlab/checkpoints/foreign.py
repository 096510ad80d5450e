"""Standard checkpoints that geomlab did not write: a GPT-2-family Hugging Face folder (``config.json`` with
``model_type`` ``gpt2``, ``model.safetensors``, and the tokenizer's ``tokenizer.json`` when it has one), opened
as kind ``hf-gpt2`` (:mod:`geomlab.models.hf_gpt2`, the ``hf`` extra). The catalog lists such a folder under
``runs/`` from its ``config.json`` alone; :func:`geomlab.checkpoints.io.load` builds the model offline.

Tokens: the folder's ``tokenizer.json`` when present (its token strings label the positions), else UTF-8
bytes (id = byte value; design choice). Weights are read from ``model.safetensors`` only (never a pickled
``pytorch_model.bin``). Every problem is one :class:`~geomlab.checkpoints.layout.CheckpointError` line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geomlab.checkpoints.layout import CONFIG_FILE, META_FILE, WEIGHTS_FILE, CheckpointError
from geomlab.core.jsonread import JSONInputError, read_json, read_limited

#: The ``model_type`` values of ``config.json`` opened as ``hf-gpt2``.
GPT2_TYPES = ("gpt2",)
#: The tokenizer file read when present, and the most bytes read of it (GPT-2's is 1.4 MB).
TOKENIZER_FILE = "tokenizer.json"
MAX_TOKENIZER_BYTES = 64 << 20
#: ``config.json`` keys of ``transformers``' ``GPT2Config`` -> the ``hf-gpt2`` config's keys.
_KEYS = {"vocab_size": "vocab_size", "n_embd": "d_model", "n_layer": "n_layers", "n_head": "n_heads",
         "n_positions": "n_positions", "n_inner": "n_inner", "activation_function": "activation_function",
         "layer_norm_epsilon": "layer_norm_epsilon", "scale_attn_weights": "scale_attn_weights",
         "scale_attn_by_inverse_layer_idx": "scale_attn_by_inverse_layer_idx",
         "tie_word_embeddings": "tie_word_embeddings"}


def _config(folder: Path) -> Any:
    try:
        return read_json(folder / CONFIG_FILE, f"{folder.name}/{CONFIG_FILE}")
    except (OSError, JSONInputError):
        return None


def is_foreign(folder: str | Path) -> bool:
    """Whether ``folder`` is a GPT-2 Hugging Face folder geomlab did not write: no ``geomlab.json``, a
    ``config.json`` whose ``model_type`` is in :data:`GPT2_TYPES`. Reads only ``config.json``; never raises."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / META_FILE).exists():
        return False
    cfg = _config(folder)
    return isinstance(cfg, dict) and cfg.get("model_type") in GPT2_TYPES


def model_config(folder: Path) -> dict[str, Any]:
    """The ``hf-gpt2`` config of the folder's ``config.json`` (its keys renamed, ``n_inner`` null as 0).
    :class:`CheckpointError` when ``config.json`` cannot be read or lacks the vocabulary size."""
    cfg = _config(folder)
    label = f"{folder.name}/{CONFIG_FILE}"
    if not isinstance(cfg, dict):
        raise CheckpointError(f"{label} cannot be read as a JSON object")
    if not isinstance(cfg.get("vocab_size"), int):
        raise CheckpointError(f"{label} has no integer vocab_size")
    out = {"kind": "hf-gpt2"}
    for key, name in _KEYS.items():
        if cfg.get(key) is not None:
            out[name] = cfg[key]
    out.setdefault("n_inner", 0)
    return out


def vocab_json(folder: Path, vocab_size: int) -> dict[str, Any]:
    """The vocabulary's JSON (:meth:`geomlab.data.vocab.Vocab.from_json` reads it): the folder's tokenizer
    (``{"level": "subword", "tokenizer": ...}``) when it has ``tokenizer.json``, else UTF-8 bytes
    (``{"level": "byte"}``). :class:`CheckpointError` for a tokenizer file that cannot be read or is over
    :data:`MAX_TOKENIZER_BYTES`."""
    path = folder / TOKENIZER_FILE
    if not path.is_file():
        return {"level": "byte", "size": int(vocab_size)}
    try:
        raw = read_limited(path, MAX_TOKENIZER_BYTES)
        if len(raw) > MAX_TOKENIZER_BYTES:
            raise ValueError(f"over {MAX_TOKENIZER_BYTES >> 20} MB")
        text = raw.decode("utf-8")
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{folder.name}/{TOKENIZER_FILE} cannot be read: {exc}") from None
    return {"level": "subword", "size": int(vocab_size), "tokenizer": text}


def read_meta(folder: str | Path) -> dict[str, Any]:
    """The description a geomlab checkpoint has (``model_config``, ``vocab``, ``card``, an empty ``tensors``)
    of a foreign folder, from its ``config.json`` and tokenizer file (no weights read, no torch).
    :class:`CheckpointError` as :func:`model_config` and :func:`vocab_json`."""
    folder = Path(folder)
    config = model_config(folder)
    card = {"kind": "hf-gpt2", "source": "transformers", "title": f"GPT-2 {folder.name}",
            "description": "A GPT-2-family checkpoint of the transformers library, opened as kind hf-gpt2."}
    return {"format_version": 3, "model_config": config, "tensors": {}, "card": card, "foreign": "transformers",
            "vocab": vocab_json(folder, config["vocab_size"])}


def load_model(folder: str | Path):
    """The folder's model (:class:`geomlab.models.hf_gpt2.HFGPT2`, eval mode, on the CPU), read offline from
    ``model.safetensors``. :class:`CheckpointError` when ``transformers`` is not installed, the weights
    file is missing, or ``transformers`` cannot read the folder."""
    folder = Path(folder)
    try:
        from geomlab.models.hf_gpt2 import HFGPT2
    except ImportError:
        raise CheckpointError(f"{folder.name} is a transformers GPT-2 folder: opening it needs the transformers "
                              "library (pip install 'geomlab[hf]')") from None
    if not (folder / WEIGHTS_FILE).is_file():
        raise CheckpointError(f"{folder.name}/{WEIGHTS_FILE} is missing (a pickled pytorch_model.bin is "
                              "never read)")
    try:
        return HFGPT2.from_pretrained(folder)
    except Exception as exc:  # noqa: BLE001 - transformers and safetensors raise their own exception types
        reason = (str(exc).strip().splitlines() or [""])[0][:200]
        raise CheckpointError(f"{folder.name}: transformers cannot open it as GPT-2: {reason}") from None
