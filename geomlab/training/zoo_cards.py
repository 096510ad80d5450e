"""The bundled checkpoints' cards as ``python -m geomlab zoo --list`` shows them: reading every card of a
folder (:func:`read_cards`), a card's entry name (:func:`card_name`) and its few human lines
(:func:`format_card`). What a card holds is described in :mod:`geomlab.training.zoo`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from geomlab.training.zoo_recipes import ZOO_DIR


def read_cards(directory: str | Path = ZOO_DIR) -> list[dict[str, Any]]:
    """The cards of every checkpoint in ``directory``, flat pairs (``NAME.json``) and folders (``NAME/``
    holding ``geomlab.json``), sorted by name, each with ``file`` (the JSON's or the folder's name) and
    ``model_config`` and ``train_config`` (the recipe a run recorded, None for none) added, ``checksums``: which
    files are checked against their sha256 on load (:func:`geomlab.checkpoints.files.checksums_line`), and
    ``changed``: the loader's one-line refusal when the weights' sha256 is not the recorded one (checked here,
    :func:`geomlab.checkpoints.reading.check_weights`). Unreadable ones are reported as a card with an
    ``error`` key."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.checkpoints.files import checksums_line
    from geomlab.checkpoints.reading import check_weights

    cards = []
    found = list(Path(directory).glob("*.json")) + [p.parent for p in Path(directory).glob(f"*/{ckpt.META_FILE}")]
    for p in sorted(found, key=lambda q: q.name.removesuffix(".json")):
        try:
            meta = ckpt.read_meta(p)
        except ValueError as exc:
            cards.append({"file": p.name, "error": str(exc)})
            continue
        card = dict(meta.get("card") or {})
        card["file"] = p.name
        card["model_config"] = meta.get("model_config")
        tc = meta.get("train_config")
        card["train_config"] = tc if isinstance(tc, dict) else None
        card["checksums"] = checksums_line(meta)
        try:
            check_weights(p, meta)
        except ValueError as exc:
            card["changed"] = str(exc)
        cards.append(card)
    return cards


def card_name(card: dict[str, Any]) -> str:
    """A card's entry name (from :func:`read_cards`): its ``name``, else its file's or folder's name without
    ``.json``."""
    return card.get("name") or Path(card["file"]).name.removesuffix(".json")


def format_card(card: dict[str, Any]) -> str:
    """A few human lines for one card (used by ``python -m geomlab zoo --list``)."""
    if "error" in card:
        return f"{card['file']}: unreadable ({card['error']})"
    name = card_name(card)
    cfg = card.get("model_config") or {}
    lines = [f"{name}: {card.get('title', cfg.get('kind', '?'))}"]
    params = card.get("params_effective")
    lines.append(f"  kind {cfg.get('kind', '?')}, params {params} effective / {card.get('params_stored')} stored; "
                 f"corpus {card.get('corpus')}, split: {card.get('split', '?')}")
    cur = (card.get("recipe") or {}).get("length_curriculum") or []
    cur_s = (f" (the first {sum(k for _, k in cur)} steps a length curriculum: "
             + ", ".join(f"{k} at length {n}" for n, k in cur) + ")" if cur else "")
    tc = card.get("train_config") or {}

    def recorded(key: str):  # the card's value (a zoo card), else the run's recipe (a run of `geomlab train`)
        return card[key] if card.get(key) is not None else tc.get(key)

    threads = card.get("torch_threads")  # a run that recorded none says nothing of them
    lines.append(f"  {recorded('steps')} steps x batch {recorded('batch_size')} x seq {recorded('seq_len')}{cur_s}, "
                 f"lr {recorded('lr')}, seed {recorded('seed')}; {card.get('train_time_s')} s on "
                 f"{card.get('device')}" + (f" ({threads} thread{'' if threads == 1 else 's'})"
                                            if isinstance(threads, int) else ""))
    if card.get("valid_bpc") is not None:
        lines.append(f"  valid {card['valid_bpc']:.3f} / test {card.get('test_bpc', float('nan')):.3f} BPC")
    if card.get("valid_accuracy") is not None:
        lines.append(f"  valid {card['valid_accuracy']:.3f} / test {card.get('test_accuracy', float('nan')):.3f} "
                     "accuracy (all positions, training length)")
    if card.get("accuracy_by_length"):
        acc = ", ".join(f"L={k}: {v:.2f}" for k, v in card["accuracy_by_length"].items())
        lines.append(f"  final-position accuracy by length: {acc}")
    if card.get("weights_accepted"):  # `geomlab zoo --accept-weights` vouched for weights changed after the metrics
        lines.append(f"  metrics from before the weights were changed on {card['weights_accepted']}")
    keys = {k: v for k, v in cfg.items() if k not in ("kind", "vocab_size")}
    lines.append(f"  config {json.dumps(keys, sort_keys=True)}")
    if card.get("changed"):
        lines.append(f"  changed since saved, so it will not load: {card['changed']}")
    elif card.get("checksums"):
        lines.append(f"  {card['checksums']}")
    if card.get("notes"):
        lines.append(f"  note: {card['notes']}")
    return "\n".join(lines)
