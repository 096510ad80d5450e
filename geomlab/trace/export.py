"""A window of a trace as one strict JSON document (:func:`trace_json`), for tools that do not read ``.npz``."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from geomlab.trace.base import Trace, TraceError
from geomlab.trace.files import FORMAT_VERSION, _json_default
from geomlab.trace.osm import OSMTrace

_POSITION_AXES: dict[str, tuple[int, ...]] = {
    "logits": (0,), "attention_q": (2,), "attention_k": (2,), "attention_q_shared": (1,),
    "attention_k_shared": (1,), "attention_dense": (2, 3), "state_data": (1,), "input_data": (0,),
    "tangent_coords": (3,), "tangent_matrices": (3,), "tangent_stats": (3,), "similarity_dense": (1, 2),
    "energies": (3,), "displacement": (3,), "reduced": (1,), "plucker_data": (2,), "plucker_mask": (2,),
    "gates": (1,), "inputs": (1,), "extra.plucker_norm": (2,), "extra.plucker_mean": (1,),
}
"""Which axes of each stored array are positions (for windowed exports)."""


def _json_array(a: np.ndarray) -> Any:
    """Nested lists with 6 decimals; non-finite values as ``null`` (strict JSON); complex as
    ``{"real", "imag"}``."""
    a = np.asarray(a)
    if np.iscomplexobj(a):
        return {"real": _json_array(a.real), "imag": _json_array(a.imag)}
    if a.dtype.kind == "f":
        r = np.round(a.astype(np.float64), 6)
        obj = r.astype(object)
        obj[~np.isfinite(r)] = None
        return obj.tolist()
    return a.tolist()


def trace_json(tr: Trace, start: int = 0, stop: int | None = None, max_positions: int = 256) -> str:
    """The trace's positions ``start..stop-1`` (at most ``max_positions``) as one strict JSON document
    (``json.loads`` of any parser accepts it: non-finite numbers are ``null``): metadata, ``tokens``,
    ``labels`` and every stored array cut to that window along its position axes, plus, for models with
    attention, ``attention`` ``[layer, query, key]`` (head mean) and for OSMFormer ``similarity``
    ``[layer, query, key]`` over the window (weights exact: normalised over all earlier keys, not only those
    in the window). Design choice: a bounded download for tools that do not read ``.npz``.

    Raises ``TraceError`` for an empty or out-of-range window.
    """
    T = tr.n_positions
    stop = T if stop is None else int(stop)
    start = int(start)
    if not 0 <= start < stop <= T:
        raise TraceError(f"window {start}..{stop} is not inside 0..{T}")
    stop = min(stop, start + int(max_positions))
    win = np.arange(start, stop)
    arrays: dict[str, Any] = {}
    for name, value in tr.stored_arrays().items():
        if name in ("attention_q", "attention_k", "attention_q_shared", "attention_k_shared", "attention_dense",
                    "similarity_dense"):
            continue  # exported as weights / similarity below
        v = np.asarray(value)
        for axis in _POSITION_AXES.get(name, ()):
            if axis < v.ndim and v.shape[axis] == T:
                v = np.take(v, win, axis=axis)
        arrays[name] = _json_array(v)
    if tr.has_attention:
        arrays["attention"] = _json_array(np.stack([tr.attention_rows(l, win)[:, win] for l in range(tr.n_layers)]))
    if isinstance(tr, OSMTrace) and tr.has_similarity:
        arrays["similarity"] = _json_array(np.stack([tr.similarity_rows(l, win)[:, win]
                                                     for l in range(tr.n_layers)]))
    doc = {"format_version": FORMAT_VERSION, "kind": tr.kind, "family": tr.family, "text": tr.text,
           "window": [start, stop], "n_positions": T, "labels": list(tr.labels[start:stop]),
           "config": tr.config, "group": getattr(tr, "group", None),
           "tokens": np.asarray(tr.tokens[start:stop]).tolist(), "arrays": arrays}
    return json.dumps(doc, default=_json_default, allow_nan=False)
