"""The shapes and kinds a trace's stored arrays must have, checked when a trace file is read: each field's
number of axes, which axis counts positions, its number kind, and the axes two fields share (layers, heads,
the query/key width). A file whose arrays disagree is refused at load, so no view meets an array it cannot
index. Source: the field descriptions of :mod:`geomlab.trace.base`, ``osm``, ``cem``, ``grassmann``; design
choice."""

from __future__ import annotations

from geomlab.trace.base import Trace, TraceError

#: field -> (accepted numbers of axes, the position axes, accepted dtype kinds: f float, c complex, i/u
#: integer, b bool). Extras are not listed: they are kept, never drawn.
FIELDS: dict[str, tuple[tuple[int, ...], tuple[int, ...], str]] = {
    "logits": ((2,), (0,), "f"),
    "attention_q": ((4,), (2,), "f"), "attention_k": ((4,), (2,), "f"),
    "attention_q_shared": ((3,), (1,), "f"), "attention_k_shared": ((3,), (1,), "f"),
    "attention_slopes": ((2,), (), "f"), "attention_dense": ((4,), (2, 3), "f"),
    "energies": ((4,), (3,), "f"), "displacement": ((4,), (3,), "f"),
    "state_data": ((3, 4), (1,), "fc"), "input_data": ((2, 3), (0,), "fc"),
    "tangent_coords": ((5,), (3,), "f"), "tangent_matrices": ((6,), (3,), "fc"), "tangent_stats": ((4,), (3,), "f"),
    "attention_scale": ((1,), (), "f"), "similarity_dense": ((3,), (1, 2), "f"),
    "reduced": ((3,), (1,), "f"), "plucker_data": ((4,), (2,), "f"), "plucker_mask": ((3,), (2,), "b"),
    "offsets": ((2,), (), "iu"), "gates": ((3,), (1,), "f"), "inputs": ((3,), (1,), "f"),
}

#: field -> {axis: its fixed size}: the raw/mixed pair of OSM updates, their three exact statistics.
FIXED: dict[str, dict[int, int]] = {"tangent_coords": {0: 2}, "tangent_matrices": {0: 2}, "tangent_stats": {0: 3}}
#: Fields whose full-matrix form (their most axes) ends in square ``d x d`` matrices.
SQUARE = {"state_data": 4, "input_data": 3, "tangent_matrices": 6}

#: (field, axes, field, axes): the two fields' shapes must agree on those axes (layers, heads, widths).
AGREE: tuple[tuple[str, slice, str, slice], ...] = (
    ("attention_q", slice(None), "attention_k", slice(None)),
    ("attention_q_shared", slice(None), "attention_k_shared", slice(None)),
    ("attention_q", slice(0, 1), "attention_q_shared", slice(0, 1)),
    ("attention_q", slice(0, 2), "attention_slopes", slice(None)),
    ("energies", slice(None), "displacement", slice(None)),
    ("state_data", slice(2, None), "input_data", slice(1, None)),
    ("state_data", slice(0, 1), "attention_scale", slice(None)),
    ("tangent_coords", slice(0, 1), "tangent_matrices", slice(0, 1)),
    ("tangent_stats", slice(1, 4), "tangent_coords", slice(1, 4)),
    ("tangent_stats", slice(1, 4), "tangent_matrices", slice(1, 4)),
    ("reduced", slice(0, 1), "plucker_mask", slice(0, 1)),
    ("plucker_mask", slice(0, 2), "offsets", slice(None)),
    ("reduced", slice(0, 2), "gates", slice(0, 2)),
    ("gates", slice(None), "inputs", slice(None)),
)


def check_shapes(tr: Trace) -> Trace:
    """``tr`` after checking every stored field against :data:`FIELDS` (axes, positions = ``len(tokens)``,
    number kind), :data:`FIXED` and :data:`SQUARE`, and every pair in :data:`AGREE`; OSM traces also need ``config["heads"]`` (when their
    attention is computed from the states) to be a whole number from 1 to the matrix size, a named group that
    can be built, and tangent coordinates as wide as its algebra; Grassmann traces a config ``eps`` ≥ 0 and
    ``normalize`` ``"clamp"`` or ``"smooth"`` (what :meth:`~geomlab.trace.grassmann.GrassmannTrace.plucker_block`
    reads). Raises :class:`TraceError` naming the field (its file
    member is ``FIELD.npy``) and what is wrong. Non-finite values are allowed: a diverged model's trace is
    worth a look, and the views leave such entries blank."""
    T = tr.n_positions
    arrays = tr.array_fields()
    for name, arr in arrays.items():
        ndims, positions, kinds = FIELDS.get(name, ((arr.ndim,), (), arr.dtype.kind))
        if arr.ndim not in ndims or any(arr.shape[a] != T for a in positions):
            want = " or ".join(str(n) for n in ndims)
            raise TraceError(f"{name}.npy has shape {arr.shape}; expected {want} axes with {T} positions on "
                             f"axis {', '.join(map(str, positions)) or '-'}")
        if arr.dtype.kind not in kinds:
            raise TraceError(f"{name}.npy holds {arr.dtype}; expected {_KINDS.get(kinds, kinds)} numbers")
        for axis, size in FIXED.get(name, {}).items():
            if arr.shape[axis] != size:
                raise TraceError(f"{name}.npy has shape {arr.shape}; its axis {axis} must have {size} entries")
        if arr.ndim == SQUARE.get(name) and arr.shape[-1] != arr.shape[-2]:
            raise TraceError(f"{name}.npy has shape {arr.shape}; its last two axes must be a square matrix")
    for a, sa, b, sb in AGREE:
        if a in arrays and b in arrays and arrays[a].shape[sa] != arrays[b].shape[sb]:
            raise TraceError(f"{a}.npy (shape {arrays[a].shape}) and {b}.npy (shape {arrays[b].shape}) disagree")
    if tr.family == "osm":
        _check_osm(tr)
    if tr.family == "grassmann":
        eps, normalize = tr.config.get("eps", 1e-6), tr.config.get("normalize", "clamp")
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
            raise TraceError(f"the config's eps {str(eps)[:40]!r} is not a number ≥ 0")
        if normalize not in ("clamp", "smooth"):
            raise TraceError(f"the config's normalize {str(normalize)[:40]!r} is not 'clamp' or 'smooth'")
    return tr


_KINDS = {"f": "real", "fc": "real or complex", "iu": "integer", "b": "true/false"}


def _check_osm(tr) -> None:
    """The OSM fields read with the config and the group: head count and tangent coordinate width."""
    if tr.attention_scale is not None:
        heads = tr.config.get("heads", 1)
        if isinstance(heads, bool) or not isinstance(heads, (int, type(None))) or not 1 <= (heads or 1) <= tr.d:
            raise TraceError(f"the config's heads {str(heads)[:40]!r} is not a whole number from 1 to {tr.d} "
                             "(the matrix size)")
        slopes = tr.attention_slopes
        if slopes is not None and slopes.shape != (tr.n_layers, tr.n_heads):
            raise TraceError(f"attention_slopes.npy has shape {slopes.shape}; expected ({tr.n_layers}, "
                             f"{tr.n_heads}) (layers, heads)")
    if tr.tangent_coords is None and not (isinstance(tr.group, dict) and tr.group.get("name")):
        return
    if not isinstance(tr.group, dict):
        raise TraceError("the metadata's group is not a JSON object")
    if tr.group.get("d", tr.d) != tr.d:
        raise TraceError(f"the metadata's group has d = {str(tr.group.get('d'))[:40]}; the states are {tr.d} wide")
    try:
        dim = tr.get_group().dim
    except (TypeError, ValueError) as exc:  # GroupError is a ValueError
        raise TraceError(f"the metadata's group cannot be built: {str(exc)[:200]}") from None
    if tr.tangent_coords is not None and tr.tangent_coords.shape[-1] != dim:
        raise TraceError(f"tangent_coords.npy holds {tr.tangent_coords.shape[-1]} coordinates per update; "
                         f"its group has {dim}")
