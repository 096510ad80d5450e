"""From a model's record dict (``model.record``, built on its hook points) to its typed trace: the family
registry :data:`FAMILIES`, :func:`family_of_kind`, :func:`from_record`, :func:`dense_attention`."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from geomlab.trace.base import BaselineTrace, Trace, TraceError, _f32
from geomlab.trace.cem import CEMTrace
from geomlab.trace.grassmann import GrassmannTrace
from geomlab.trace.osm import OSMTrace

FAMILIES: dict[str, type[Trace]] = {
    "osm": OSMTrace, "cem": CEMTrace, "grassmann": GrassmannTrace, "baseline": BaselineTrace,
}


def family_of_kind(kind: str) -> str:
    """The trace family a model kind records: its class's ``trace_family()`` (``"osm"``, ``"cem"``,
    ``"grassmann"`` or ``"baseline"``); ``"baseline"`` for a kind that is not registered (a hand-made
    record). Source: the family records of :mod:`geomlab.models.family`."""
    from geomlab.models import model_class

    try:
        return model_class(kind).trace_family()
    except ValueError:
        return "baseline"


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16 or value.dtype == torch.float16:
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def dense_attention(record: dict[str, Any], group: dict | None = None, heads: int | None = None) -> np.ndarray:
    """``[layer, head, position, position]`` float64 attention weights of a ``model.record`` dict (any
    family: queries/keys, or OSM states and scale with ``heads`` heads), formed in full: for tests and short
    sequences only.
    Raises ``TraceError`` when the record has no attention."""
    keys = ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
            "attention_scale", "states", "inputs", "attention", "attention_heads")
    rec = {k: record[k] for k in keys if k in record}
    ref = rec.get("attention_q", rec.get("states", rec.get("attention")))
    if ref is None:
        raise TraceError("the record has no attention")
    T = int(ref.shape[-2] if "attention_q" in rec else ref.shape[1] if "states" in rec else ref.shape[-1])
    rec["logits"] = np.zeros((T, 1), dtype=np.float32)
    if heads is None:
        heads = int(rec["attention_slopes"].shape[-1]) if "attention_slopes" in rec else 1
    tr = from_record(rec, "", np.zeros(T, dtype=np.int64), config={"heads": heads}, group=group,
                     family="osm" if "states" in rec else "baseline")
    if tr.attention is None:
        raise TraceError("the record has no attention")
    return np.asarray(tr.attention)


def from_record(record: dict[str, Any], kind: str, tokens, labels: list[str] | None = None,
                config: dict[str, Any] | None = None, text: str = "", group: dict | None = None,
                family: str | None = None) -> Trace:
    """Wrap a record dict (``model.record`` output, keys in the class's ``record_from_cache``) in its compact
    dataclass; also reads the arrays of a version-1 trace file and hand-made records with dense ``T x T``
    ``attention`` / ``similarity`` maps.

    Compaction (design choice): attention stays as queries and keys (or, for OSM, the states
    and a scale), float64 arrays become float32, OSM tangents become float16 Lie-algebra coordinates plus
    exact float32 norms and inner products, torus states their diagonals, Grassmann Plücker vectors are
    recomputed from the reduced vectors on demand (kept when they cannot be), ``plucker_mean`` is dropped.
    Each family's part is its dataclass's ``_compact`` (:mod:`geomlab.trace.osm`, ``cem``, ``grassmann``).

    Args:
        record: ``dict[str, Tensor | ndarray]`` with at least ``"logits"`` ``(T, V)``.
        kind: model kind; tokens: ``[T]`` or ``(1, T)`` ids; labels: per-position strings (default ``#id``);
        config: model config; text: the traced text; group: OSM group info (see :class:`OSMTrace`).
        family: the trace family (a key of :data:`FAMILIES`); default :func:`family_of_kind` of ``kind``.

    Raises:
        TraceError: ``logits`` missing, an unknown ``family``, a family's required key is missing, or the
        position axis of ``logits`` does not match ``tokens``.
    """
    if "logits" not in record:
        raise TraceError(f"the record of {kind!r} has no 'logits'")
    tok = _to_numpy(tokens).astype(np.int64).reshape(-1)
    arrays = {k: _to_numpy(v) for k, v in record.items()}
    if arrays["logits"].ndim != 2 or arrays["logits"].shape[0] != tok.shape[0]:
        raise TraceError(
            f"logits have shape {arrays['logits'].shape}, expected ({tok.shape[0]}, vocab)"
        )
    family = family_of_kind(kind) if family is None else family
    if family not in FAMILIES:
        raise TraceError(f"unknown trace family {family!r}")
    cls = FAMILIES[family]
    config = dict(config or {})
    named: dict[str, Any] = {"logits": _f32(arrays.pop("logits"))}
    for key in ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_slopes",
                "attention_dense"):
        if key in arrays:
            named[key] = _f32(arrays.pop(key))
    if ("attention_q" in named) != ("attention_k" in named):
        raise TraceError(f"the record of {kind!r} has only one of attention_q / attention_k")
    named.update(cls._compact(arrays, kind, config, tok, group))
    missing = [k for k in cls.REQUIRED if named.get(k) is None]
    if missing:
        raise TraceError(f"the record of {kind!r} lacks {missing} for a {cls.family} trace")
    kwargs: dict[str, Any] = dict(
        kind=kind, tokens=tok, labels=list(labels) if labels is not None else [f"#{t}" for t in tok.tolist()],
        config=config, text=text, extras=arrays, **named,
    )
    tr = cls(**kwargs)
    if len(tr.labels) != tr.n_positions:
        raise TraceError(f"{len(tr.labels)} labels for {tr.n_positions} positions")
    return tr
