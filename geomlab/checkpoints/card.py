"""The model card of a checkpoint folder (``README.md``): Hugging Face's YAML front matter, then text for a
person. Written by :func:`geomlab.checkpoints.io.save`, never read by the loader."""

from __future__ import annotations

import math
from typing import Any

from geomlab.checkpoints.layout import (CARD_FILE, CONFIG_FILE, META_FILE, STATE_FILE, STATE_JSON_FILE, VOCAB_FILE,
                                        WEIGHTS_FILE)

#: The license of the models geomlab writes (the repository's license).
LICENSE = "mit"


#: Hugging Face task type of each geomlab task kind, for the card's ``model-index`` (design choice).
_HF_TASK = {"lm": "text-generation", "word-problem": "token-classification"}


def model_card(name: str, meta: dict[str, Any]) -> str:
    """The ``README.md`` of a checkpoint folder: a Hugging Face model card whose YAML front matter holds
    ``license``, ``library_name: geomlab``, ``pipeline_tag`` (the task: ``text-generation`` for a language model,
    ``token-classification`` for a group word problem), ``tags`` (geomlab, the family, the kind, the group),
    ``model_kind``, ``parameters`` (``effective``, ``stored``), ``dataset``,
    ``datasets``, ``metrics`` (their names) and ``model-index`` (their values per split, Hugging Face's
    evaluation results), then a few paragraphs for a person (saying when the metrics predate weights changed
    on purpose: the card's ``weights_accepted``). ``meta``: the checkpoint description (the
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
    tags = ["geomlab", *_family(kind), kind] + ([f"group-{config['group']}"] if config.get("group") else [])
    data = ModelCardData(license=LICENSE, library_name="geomlab", pipeline_tag=hf_task, tags=tags,
                         datasets=[dataset], metrics=names or None,
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
              *(f"* {k.replace('_', ' ')}: {v:.4f}" for k, v in sorted(values.items())),
              *([f"* metrics from before the weights were changed on {card['weights_accepted']}"]
                if card.get("weights_accepted") and values else []), ""]
    lines += ["## Files", "",
              f"* `{CONFIG_FILE}`: the model config (`geomlab.models.build_model(config)` rebuilds the model);",
              f"* `{WEIGHTS_FILE}`: the weights, the model's `state_dict` (loads strictly);",
              f"* `{VOCAB_FILE}`: the vocabulary (when the task has one);",
              f"* `{STATE_FILE}`, `{STATE_JSON_FILE}`: the resumable training state (optimiser, RNG, step), "
              "when saved; only resuming training needs them (the model loads without both);",
              f"* `{META_FILE}`: geomlab's record: card, training config, metrics history, file checksums;",
              f"* `{CARD_FILE}`: this card (not read when loading).", "",
              "Load it with `geomlab.checkpoints.hub.from_pretrained(\"PATH/OR/HUB-ID\")` or `python -m geomlab "
              "eval PATH/TO/" + name + "`; loading runs no code (no pickles).", ""]
    return f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)


def _family(kind: str) -> list[str]:
    """``[family name]`` of a registered kind (:mod:`geomlab.models.family`), ``[]`` for an unknown one."""
    from geomlab.models import model_class

    try:
        return [model_class(kind).family.name]
    except ValueError:
        return []
