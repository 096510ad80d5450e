"""Typed traces: one model run on one text, recorded for the views (issue 7; design choice).

A *trace* holds everything :mod:`geomlab.figures` needs to draw a model run, as numpy arrays with named
axes, so figures are pure functions of a trace and a saved trace reproduces a view exactly.

Entry points
------------
* :func:`encode_text` ``(vocab, text) -> LongTensor (1, T)``; texts longer than :data:`MAX_TEXT_CHARS`
  (2,048 characters) or empty raise :class:`TraceError` (a ``ValueError``).
* :func:`trace` ``(model, tokens, vocab=None, text=None) -> Trace``: runs ``model.record(tokens)`` under
  ``torch.no_grad`` in eval mode and wraps the record dict (``docs/architecture.md``) in the dataclass of
  the model's family: :class:`OSMTrace`, :class:`CEMTrace`, :class:`GrassmannTrace` or
  :class:`BaselineTrace`. Record keys the dataclass does not know are kept in ``extras``.
* :func:`trace_text` ``(model, vocab, text)``: both of the above in one call.
* :func:`trace_cem_steps` ``(model, tokens, steps)``: re-run a CEM model with another inference-time number
  of recursion steps T (test-time recursion; the app's T slider).
* :func:`save_trace` / :func:`load_trace`: one ``.npz`` file of plain arrays plus a JSON metadata string
  (key ``__meta__``); loading uses ``np.load(allow_pickle=False)``, so a trace file cannot run code.

Axis names used in the field docs: ``layer``, ``position`` (token index t = 0..T-1), ``substep`` (OSM:
0 = attention, 1 = grounding), ``block`` (CEM: 0 = attention, 1 = MLP), ``step`` (CEM recursion step
t = 0..T), ``head``, ``offset`` (Grassmann offset slot), ``vocab``, ``d``/``rank``/``d_model`` (features).
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import numpy as np
import torch

FORMAT_VERSION = 1
MAX_TEXT_CHARS = 2048
"""Longest text :func:`encode_text` accepts (characters). Design choice: keeps a trace (and the
position x position attention maps) small enough for an interactive page."""


# Serialises model runs in this module: trace() switches the model to eval mode and trace_cem_steps()
# changes its config for one run; the app may trace one cached model from several threads.
_MODEL_LOCK = threading.RLock()


class TraceError(ValueError):
    """Bad input to the trace layer (empty/too long text, wrong token shape, unreadable trace file)."""


# --------------------------------------------------------------------------------------------------
# dataclasses


@dataclass
class Trace:
    """Fields common to every trace.

    Attributes:
        kind: the registered model kind (e.g. ``"osmformer"``).
        tokens: ``[position]`` int64 token ids.
        labels: ``[position]`` printable token strings for hover text (space shown as ``␣``, newline as
            ``↵``, tab as ``⇥``; ``"#t"`` when no vocabulary was given).
        logits: ``[position, vocab]`` float, ``logits[t]`` predicts token ``t + 1`` (nats, unnormalised).
        config: the model's full config dict (JSON-serialisable).
        text: the traced text ("" if unknown).
        extras: record keys the family dataclass does not name, as arrays (kept on save/load).
    """

    kind: str
    tokens: np.ndarray
    labels: list[str]
    logits: np.ndarray
    config: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    extras: dict[str, np.ndarray] = field(default_factory=dict)

    family: ClassVar[str] = "baseline"
    # record keys that are required / optional for this family (besides "logits")
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    @property
    def n_positions(self) -> int:
        """Number of positions T."""
        return int(self.tokens.shape[0])

    def array_fields(self) -> dict[str, np.ndarray]:
        """The family's named arrays that are present (``None`` ones left out)."""
        out = {}
        for name in ("logits", *self.REQUIRED, *self.OPTIONAL):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def log_probs(self) -> np.ndarray:
        """``[position, vocab]`` log-softmax of the logits (nats)."""
        z = self.logits.astype(np.float64)
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    def attention_weights(self, layer: int, head: int | None = None) -> np.ndarray | None:
        """``[position, position]`` attention weights of ``layer`` (row i = query, column j = key), averaged
        over heads when ``head`` is None; ``None`` if this model has no attention.
        Raises ``TraceError`` for a layer/head out of range."""
        att = getattr(self, "attention", None)
        if att is None:
            return None
        _check_index("layer", layer, att.shape[0])
        if att.ndim == 3:  # OSM: [layer, pos, pos], heads averaged; per-head in attention_heads
            heads = getattr(self, "attention_heads", None)
            if head is None or heads is None:
                return att[layer]
            _check_index("head", head, heads.shape[1])
            return heads[layer, head]
        if head is None:
            return att[layer].mean(axis=0)
        _check_index("head", head, att.shape[1])
        return att[layer, head]

    def n_heads(self) -> int:
        """Number of attention heads recorded (0 without attention, 1 for OSM without per-head maps)."""
        att = getattr(self, "attention", None)
        if att is None:
            return 0
        if att.ndim == 3:
            heads = getattr(self, "attention_heads", None)
            return 1 if heads is None else int(heads.shape[1])
        return int(att.shape[1])


@dataclass
class BaselineTrace(Trace):
    """Trace of a baseline (``lstm``, ``transformer``, ``llama``, ``grassmann-attn``, or any other kind).

    Attributes:
        attention: ``[layer, head, position, position]`` attention weights or ``None`` (no attention).
    """

    attention: np.ndarray | None = None
    family: ClassVar[str] = "baseline"
    OPTIONAL: ClassVar[tuple[str, ...]] = ("attention",)


@dataclass
class OSMTrace(Trace):
    """Trace of an orthogonal state model (``osm-rnn``, ``osmformer``); source: osm.md §2.

    Attributes:
        states: ``[layer, position, d, d]`` state H after each layer (OSM-RNN: one "layer", H after
            consuming token t); real for O/SO/O-block, complex for U/SU/T.
        inputs: ``[position, d, d]`` layer-0 states (token matrices) or ``None``.
        tangents_raw: ``[layer, substep, position, d, d]`` Lie-algebra update before tangent mixing
            (substep 0 = attention, 1 = grounding; OSM-RNN: substep 0 only).
        tangents: same shape, after mixing and step size: exactly what was exponentiated.
        attention: ``[layer, position, position]`` attention weights (heads averaged) or ``None``.
        attention_heads: ``[layer, head, position, position]`` or ``None``.
        similarity: ``[layer, position, position]`` ``Re tr(H_i^* H_j)`` of the layer's input states, or
            ``None``; bounded by ``[-d, d]``.
        group: ``{"name": str, "d": int, "options": dict}`` to rebuild the group with
            ``geomlab.groups.get_group(name, d, **options)``.
    """

    states: np.ndarray = None  # type: ignore[assignment]
    tangents_raw: np.ndarray | None = None
    tangents: np.ndarray | None = None
    inputs: np.ndarray | None = None
    attention: np.ndarray | None = None
    attention_heads: np.ndarray | None = None
    similarity: np.ndarray | None = None
    group: dict[str, Any] = field(default_factory=dict)

    family: ClassVar[str] = "osm"
    REQUIRED: ClassVar[tuple[str, ...]] = ("states",)
    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "tangents_raw", "tangents", "inputs", "attention", "attention_heads", "similarity",
    )

    @property
    def n_layers(self) -> int:
        """Number of recorded state layers."""
        return int(self.states.shape[0])

    @property
    def d(self) -> int:
        """Matrix size d of the group elements."""
        return int(self.states.shape[-1])

    def get_group(self):
        """The :class:`geomlab.groups.MatrixGroup` the states live on (needs ``geomlab.groups``)."""
        from geomlab import groups

        name = self.group.get("name")
        if not name:
            raise TraceError("this OSM trace does not name its group")
        return groups.get_group(name, int(self.group.get("d", self.d)), **dict(self.group.get("options", {})))


@dataclass
class CEMTrace(Trace):
    """Trace of a causal-energy-minimisation Transformer (``cem``); source: cem.md §2.3-§2.4.

    Attributes:
        energies: ``[layer, block, step, position]`` per-token energy of the iterate x^t (block 0 =
            attention, 1 = MLP; step t = 0..T). Arbitrary units; compare steps within one layer/block.
        displacement: ``[layer, block, step, position]`` ``||x^t - h|| / rho`` (dimensionless).
        attention: ``[layer, head, position, position]`` attention weights of the last recursion step.
        recursion_steps: the T this trace ran with (``energies.shape[2] - 1``).
    """

    energies: np.ndarray = None  # type: ignore[assignment]
    displacement: np.ndarray | None = None
    attention: np.ndarray | None = None

    family: ClassVar[str] = "cem"
    REQUIRED: ClassVar[tuple[str, ...]] = ("energies",)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("displacement", "attention")

    @property
    def recursion_steps(self) -> int:
        """Number of recursion steps T (the step axis has T + 1 entries)."""
        return int(self.energies.shape[2]) - 1

    def energy_mean(self) -> np.ndarray:
        """``[layer, block, step]`` token-mean energy (cem.md §2.4)."""
        return self.energies.mean(axis=-1)

    def energy_change(self) -> np.ndarray:
        """``[layer, block, step, position]`` per-token change ``eps(x^t) - eps(x^0)`` (cem.md §2.4)."""
        return self.energies - self.energies[:, :, :1, :]


@dataclass
class GrassmannTrace(Trace):
    """Trace of a Causal Grassmann model (``grassmann``); source: grassmann.md §5.

    Attributes:
        inputs: ``[layer, position, d_model]`` layer inputs h_t.
        reduced: ``[layer, position, rank]`` reduced vectors z_t.
        plucker: ``[layer, offset, position, P]`` normalised Plücker vectors, ``P = r(r-1)/2``; zero where
            masked.
        plucker_mask: ``[layer, offset, position]`` bool, True where the pair (t, t - offset) exists and the
            offset is used by the layer.
        offsets: ``[layer, offset]`` int64, the offset of each slot (0 = slot unused by this layer).
        gates: ``[layer, position, d_model]`` alpha in ``alpha * h + (1 - alpha) * g``.
    """

    reduced: np.ndarray = None  # type: ignore[assignment]
    plucker: np.ndarray = None  # type: ignore[assignment]
    plucker_mask: np.ndarray | None = None
    offsets: np.ndarray | None = None
    gates: np.ndarray | None = None
    inputs: np.ndarray | None = None

    family: ClassVar[str] = "grassmann"
    REQUIRED: ClassVar[tuple[str, ...]] = ("reduced", "plucker")
    OPTIONAL: ClassVar[tuple[str, ...]] = ("plucker_mask", "offsets", "gates", "inputs")

    @property
    def n_layers(self) -> int:
        """Number of Grassmann layers."""
        return int(self.reduced.shape[0])

    @property
    def rank(self) -> int:
        """Reduced dimension r."""
        return int(self.reduced.shape[-1])


FAMILIES: dict[str, type[Trace]] = {
    "osm": OSMTrace, "cem": CEMTrace, "grassmann": GrassmannTrace, "baseline": BaselineTrace,
}


def family_of(record_keys) -> str:
    """The trace family for a record dict with these keys: ``osm`` (has ``states``), ``cem`` (has
    ``energies``), ``grassmann`` (has ``plucker``), else ``baseline``. Design choice: keyed on content, so a
    new kind that records the family's keys gets its views."""
    keys = set(record_keys)
    if "states" in keys:
        return "osm"
    if "energies" in keys:
        return "cem"
    if "plucker" in keys and "reduced" in keys:
        return "grassmann"
    return "baseline"


# --------------------------------------------------------------------------------------------------
# text and tokens

_VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


def visible(ch: str) -> str:
    """A printable version of one token string for hover text and tick labels (whitespace made visible)."""
    return "".join(_VISIBLE.get(c, c if c.isprintable() else f"\\x{ord(c):02x}") for c in ch)


def encode_text(vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> torch.Tensor:
    """Encode ``text`` with the checkpoint's vocabulary.

    Args:
        vocab: a ``geomlab.data.Vocab`` (anything with ``encode(str) -> Sequence[int] | Tensor``).
        text: the text to trace (characters outside the vocabulary map to its unknown token).
        max_chars: longest accepted text, default :data:`MAX_TEXT_CHARS` (2,048).

    Returns:
        ``LongTensor`` of shape ``(1, T)`` with ``T = len(text)`` for a character vocabulary.

    Raises:
        TraceError: ``text`` is not a string, is empty, or is longer than ``max_chars``.
    """
    if not isinstance(text, str):
        raise TraceError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise TraceError("text is empty: type at least one character to trace")
    if len(text) > max_chars:
        raise TraceError(
            f"text has {len(text):,} characters; traces are limited to {max_chars:,} "
            f"(shorten the text or trace it in pieces)"
        )
    ids = vocab.encode(text)
    ids = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
    if ids.shape[1] == 0:
        raise TraceError("the text encodes to no tokens")
    return ids


def _labels(vocab, tokens: np.ndarray, text: str | None) -> list[str]:
    if text is not None and len(text) == len(tokens):
        return [visible(c) for c in text]
    if vocab is not None:
        out = []
        for t in tokens.tolist():
            try:
                s = vocab.decode([t])
            except Exception:  # an id the vocabulary cannot decode: show the id
                s = f"#{t}"
            out.append(visible(s) if s else f"#{t}")
        return out
    return [f"#{t}" for t in tokens.tolist()]


# --------------------------------------------------------------------------------------------------
# running a model


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16 or value.dtype == torch.float16:
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def _group_info(model) -> dict[str, Any]:
    group = getattr(model, "group", None)
    if group is None:
        return {}
    spec = dict(getattr(group, "spec", None) or {})
    name = str(spec.pop("name", getattr(group, "name", "")))
    d = int(spec.pop("d", getattr(group, "d", 0)))
    options = {k: v for k, v in spec.items() if isinstance(v, (int, float, str, bool))}
    return {"name": name, "d": d, "options": options}


def from_record(record: dict[str, Any], kind: str, tokens, labels: list[str] | None = None,
                config: dict[str, Any] | None = None, text: str = "", group: dict | None = None) -> Trace:
    """Wrap a record dict (``model.record`` output, contract in ``docs/architecture.md``) in its dataclass.

    Args:
        record: ``dict[str, Tensor | ndarray]`` with at least ``"logits"`` ``(T, V)``.
        kind: model kind; tokens: ``[T]`` or ``(1, T)`` ids; labels: per-position strings (default ``#id``);
        config: model config; text: the traced text; group: OSM group info (see :class:`OSMTrace`).

    Raises:
        TraceError: ``logits`` missing, or a family's required key is missing, or the position axis of
        ``logits`` does not match ``tokens``.
    """
    if "logits" not in record:
        raise TraceError(f"the record of {kind!r} has no 'logits'")
    tok = _to_numpy(tokens).astype(np.int64).reshape(-1)
    arrays = {k: _to_numpy(v) for k, v in record.items()}
    if arrays["logits"].ndim != 2 or arrays["logits"].shape[0] != tok.shape[0]:
        raise TraceError(
            f"logits have shape {arrays['logits'].shape}, expected ({tok.shape[0]}, vocab)"
        )
    cls = FAMILIES[family_of(arrays)]
    missing = [k for k in cls.REQUIRED if k not in arrays]
    if missing:
        raise TraceError(f"the record of {kind!r} lacks {missing} for a {cls.family} trace")
    named = {k: arrays.pop(k) for k in ("logits", *cls.REQUIRED, *cls.OPTIONAL) if k in arrays}
    if "plucker_mask" in named:
        named["plucker_mask"] = named["plucker_mask"].astype(bool)
    if "offsets" in named:
        named["offsets"] = named["offsets"].astype(np.int64)
    kwargs: dict[str, Any] = dict(
        kind=kind, tokens=tok, labels=list(labels) if labels is not None else [f"#{t}" for t in tok.tolist()],
        config=dict(config or {}), text=text, extras=arrays, **named,
    )
    if cls is OSMTrace:
        kwargs["group"] = dict(group or {})
    tr = cls(**kwargs)
    if len(tr.labels) != tr.n_positions:
        raise TraceError(f"{len(tr.labels)} labels for {tr.n_positions} positions")
    return tr


def trace(model, tokens, vocab=None, text: str | None = None, max_positions: int = MAX_TEXT_CHARS) -> Trace:
    """Run ``model`` on one sequence and return its typed trace.

    Args:
        model: a registered :class:`geomlab.models.SequenceModel` (any kind).
        tokens: ``LongTensor`` of shape ``(1, T)`` (a ``[T]`` vector is accepted too).
        vocab: optional vocabulary used for hover labels (``decode``).
        text: optional text the tokens came from (labels taken from it when it has length T).
        max_positions: longest accepted T (default :data:`MAX_TEXT_CHARS`).

    Returns:
        the family dataclass (:class:`OSMTrace`, :class:`CEMTrace`, :class:`GrassmannTrace` or
        :class:`BaselineTrace`), arrays on CPU as numpy.

    Raises:
        TraceError: wrong token shape, ``T == 0`` or ``T > max_positions``, or a record missing keys.

    The model is put in eval mode for the run and its previous mode restored (design choice: dropout off,
    so a trace is reproducible).
    """
    tokens = torch.as_tensor(tokens)
    if tokens.dim() == 1:
        tokens = tokens.unsqueeze(0)
    if tokens.dim() != 2 or tokens.shape[0] != 1:
        raise TraceError(f"trace expects tokens of shape (1, T), got {tuple(tokens.shape)}")
    T = int(tokens.shape[1])
    if T == 0:
        raise TraceError("nothing to trace: the token sequence is empty")
    if T > max_positions:
        raise TraceError(f"{T:,} positions; traces are limited to {max_positions:,}")
    tokens = tokens.long()
    config = dict(getattr(model, "config", {}) or {})
    max_len = config.get("max_len")
    if isinstance(max_len, int) and config.get("positions", "learned") == "learned" and T > max_len:
        raise TraceError(f"this model reads at most {max_len:,} positions (learned position table); "
                         f"the text has {T:,}")
    try:
        device = next(model.parameters()).device
    except StopIteration:
        device = torch.device("cpu")
    with _MODEL_LOCK:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                record = model.record(tokens.to(device))
        finally:
            model.train(was_training)
    tok = tokens[0].cpu().numpy()
    kind = str(config.get("kind", getattr(model, "kind", "")))
    return from_record(record, kind, tok, labels=_labels(vocab, tok, text), config=config,
                       text=text or "", group=_group_info(model))


def trace_text(model, vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> Trace:
    """``trace(model, encode_text(vocab, text), vocab, text)``: trace a text in one call.
    Raises :class:`TraceError` for an empty or too long text."""
    tokens = encode_text(vocab, text, max_chars=max_chars)
    return trace(model, tokens, vocab=vocab, text=text, max_positions=max_chars)


def trace_cem_steps(model, tokens, steps: int, vocab=None, text: str | None = None) -> CEMTrace:
    """Trace a CEM model with ``steps`` recursion steps at inference (test-time recursion, cem.md §2.3).

    Temporarily sets the model's ``inference_recursion_steps`` (config key of issue 5; the model's
    ``set_inference_steps`` method is used when it has one) and restores it afterwards; parameters are
    untouched. ``steps`` may exceed the training ``recursion_steps``. Model runs in this module hold one
    lock, so a concurrent :func:`trace` of the same model never sees the temporary setting.

    Raises:
        TraceError: the model is not a CEM model, or ``steps`` is not an integer in 1..64.
    """
    config = getattr(model, "config", {}) or {}
    if "inference_recursion_steps" not in config and "recursion_steps" not in config:
        raise TraceError(f"{config.get('kind', type(model).__name__)!r} has no recursion steps to change")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= int(steps) <= 64:
        raise TraceError(f"steps must be an integer in 1..64, got {steps!r}")
    steps = int(steps)
    with _MODEL_LOCK:
        return _trace_cem_steps_locked(model, tokens, steps, config, vocab, text)


def _trace_cem_steps_locked(model, tokens, steps: int, config: dict, vocab, text) -> CEMTrace:
    setter = getattr(model, "set_inference_steps", None)
    old_cfg = config.get("inference_recursion_steps")
    had_attr = hasattr(model, "inference_recursion_steps")
    old_attr = getattr(model, "inference_recursion_steps", None)
    if callable(setter):
        previous = setter(steps)
    else:
        config["inference_recursion_steps"] = steps
        if had_attr:
            model.inference_recursion_steps = steps
    try:
        tr = trace(model, tokens, vocab=vocab, text=text)
    finally:
        if callable(setter):
            setter(previous if previous is not None else old_cfg)
        else:
            config["inference_recursion_steps"] = old_cfg
            if had_attr:
                model.inference_recursion_steps = old_attr
    if not isinstance(tr, CEMTrace):
        raise TraceError(f"{tr.kind!r} does not record energies (not a CEM model)")
    return tr


# --------------------------------------------------------------------------------------------------
# file format


def _json_default(obj):
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (tuple, set)):
        return list(obj)
    return str(obj)


def save_trace(tr: Trace, path: str | Path | BinaryIO) -> None:
    """Write ``tr`` as one ``.npz`` file (uncompressed) of plain numeric/bool arrays plus ``__meta__``, a
    JSON string with ``format_version``, ``family``, ``kind``, ``labels``, ``config``, ``text``, ``group``.
    No pickles. ``path`` may be a file path or a binary file object (e.g. ``io.BytesIO``).

    Raises:
        TraceError: an array has object dtype (cannot be stored without pickling).
    """
    arrays: dict[str, np.ndarray] = {"tokens": np.asarray(tr.tokens, dtype=np.int64)}
    for name, value in tr.array_fields().items():
        arrays[name] = np.asarray(value)
    for name, value in tr.extras.items():
        arrays[f"extra.{name}"] = np.asarray(value)
    for name, value in arrays.items():
        if value.dtype == object:
            raise TraceError(f"array {name!r} has object dtype and cannot be saved without pickles")
    meta = {
        "format_version": FORMAT_VERSION, "family": tr.family, "kind": tr.kind, "labels": list(tr.labels),
        "config": tr.config, "text": tr.text, "group": getattr(tr, "group", None),
    }
    arrays["__meta__"] = np.array(json.dumps(meta, default=_json_default))
    if isinstance(path, (str, Path)):
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    else:
        np.savez(path, **arrays)


def load_trace(path: str | Path | BinaryIO | bytes) -> Trace:
    """Read a trace written by :func:`save_trace` (``np.load(allow_pickle=False)``).

    ``path`` may be a path, a binary file object or the file's bytes.

    Raises:
        TraceError: not a trace file, a newer format version, an unknown family, missing arrays, or
        inconsistent position counts. ``FileNotFoundError`` for a missing path.
    """
    if isinstance(path, (bytes, bytearray)):
        path = io.BytesIO(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError) as exc:  # not an npz, a pickled array, truncated file
        raise TraceError(f"not a readable trace file: {exc}") from exc
    if "__meta__" not in data:
        raise TraceError("not a trace file: no '__meta__' entry")
    try:
        meta = json.loads(str(data.pop("__meta__")))
    except json.JSONDecodeError as exc:
        raise TraceError(f"trace metadata is not valid JSON: {exc}") from exc
    version = meta.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise TraceError(f"trace format version {version!r} is newer than this geomlab ({FORMAT_VERSION})")
    family = meta.get("family")
    if family not in FAMILIES:
        raise TraceError(f"unknown trace family {family!r}")
    if "tokens" not in data or "logits" not in data:
        raise TraceError("trace file lacks 'tokens' or 'logits'")
    cls = FAMILIES[family]
    extras = {k[len("extra."):]: data.pop(k) for k in list(data) if k.startswith("extra.")}
    tokens = data.pop("tokens")
    record = {k: v for k, v in data.items()}
    if family_of(record) != family:
        raise TraceError(f"trace file says family {family!r} but lacks its arrays {list(cls.REQUIRED)}")
    record.update({k: v for k, v in extras.items() if k not in record})
    labels = meta.get("labels")
    if not isinstance(labels, list) or len(labels) != len(tokens):
        raise TraceError("trace labels do not match the number of positions")
    tr = from_record(record, str(meta.get("kind", "")), tokens, labels=[str(x) for x in labels],
                     config=meta.get("config") or {}, text=str(meta.get("text", "")),
                     group=meta.get("group") or {})
    return tr


def trace_bytes(tr: Trace) -> bytes:
    """The ``.npz`` file of :func:`save_trace` as bytes (for a download button)."""
    buf = io.BytesIO()
    save_trace(tr, buf)
    return buf.getvalue()


def _check_index(name: str, index: int, size: int) -> None:
    if not isinstance(index, (int, np.integer)) or not -size <= int(index) < size:
        raise TraceError(f"{name} {index!r} out of range: this trace has {size}")


# --------------------------------------------------------------------------------------------------
# scoring a trace's predictions


def is_word_problem(task: Any) -> bool:
    """Whether a checkpoint card's ``task`` entry (``card["task"]``, a dict or None) is a group word problem
    (``{"task": "word-problem", "group": "S5", ...}``)."""
    return isinstance(task, dict) and task.get("task") == "word-problem" and bool(task.get("group"))


@dataclass(frozen=True)
class PredictionScores:
    """How well a trace's outputs predict what they are trained to predict, per position.

    Attributes:
        target: ``[position]`` int64 id scored at each position (-1 where nothing is scored).
        bits: ``[position]`` float64 surprisal ``-log2 p(target)`` in bits (NaN where nothing is scored).
        correct: ``[position]`` float64, 1.0 where the arg-max output is the target, 0.0 where not, NaN
            where nothing is scored.
        what: ``"next token"`` (language model) or ``"running product"`` (group word problem).
    """

    target: np.ndarray
    bits: np.ndarray
    correct: np.ndarray
    what: str

    @property
    def mean_bits(self) -> float:
        """Mean surprisal over the scored positions (bits; NaN when none is scored)."""
        ok = ~np.isnan(self.bits)
        return float(self.bits[ok].mean()) if ok.any() else float("nan")

    @property
    def accuracy(self) -> float:
        """Fraction of scored positions whose arg-max output is the target (NaN when none is scored)."""
        ok = ~np.isnan(self.correct)
        return float(self.correct[ok].mean()) if ok.any() else float("nan")


def score_predictions(tr: Trace, task: Any = None) -> PredictionScores:
    """Per-position surprisal (bits) and arg-max correctness of ``tr``'s outputs against their training
    targets. Source: design choice (the model contract of ``docs/architecture.md`` and
    :mod:`geomlab.data.word_problem`).

    * Language model (``task`` None or not a word problem): position ``t`` scores input token ``t`` with
      the output at ``t - 1`` (``logits[t - 1]`` predicts token ``t``); position 0 has no score (NaN, -1).
    * Group word problem (:func:`is_word_problem`): input tokens are element ids ``g_0 .. g_{T-1}`` and
      position ``t`` scores the running product ``g_0 ... g_t``
      (``get_group(task["group"]).running_product``) with the output at ``t``; every position, including
      0, has a score.

    Args:
        tr: any trace (``tokens`` ``[position]``, ``logits`` ``[position, vocab]``).
        task: the checkpoint card's ``task`` entry (dict) or None.

    Raises:
        TraceError: for a word problem whose output size is not the group's order.
        geomlab.data.errors.DataError (a ``ValueError``): an unknown group or token ids outside the group.
    """
    lp = tr.log_probs()
    n = tr.n_positions
    target = np.full(n, -1, dtype=np.int64)
    bits = np.full(n, np.nan)
    correct = np.full(n, np.nan)
    if is_word_problem(task):
        from geomlab.data.word_problem import get_group

        group = get_group(str(task["group"]))
        if lp.shape[-1] != group.order:
            raise TraceError(f"a {group.name} word-problem model must have {group.order} outputs, "
                             f"this one has {lp.shape[-1]}")
        target[:] = group.running_product(torch.as_tensor(tr.tokens, dtype=torch.long)).numpy()
        rows = np.arange(n)
        what = "running product"
    else:
        rows = np.arange(n - 1)
        if n > 1:
            target[1:] = tr.tokens[1:]
        what = "next token"
    scored = np.arange(n)[target >= 0]
    if scored.size:
        bits[scored] = -lp[rows, target[scored]] / np.log(2.0)
        correct[scored] = (lp[rows].argmax(-1) == target[scored]).astype(np.float64)
    return PredictionScores(target=target, bits=bits, correct=correct, what=what)


__all__ = [
    "MAX_TEXT_CHARS", "FORMAT_VERSION", "TraceError", "Trace", "BaselineTrace", "OSMTrace", "CEMTrace",
    "GrassmannTrace", "FAMILIES", "family_of", "visible", "encode_text", "from_record", "trace",
    "trace_text", "trace_cem_steps", "save_trace", "load_trace", "trace_bytes", "is_word_problem",
    "PredictionScores", "score_predictions",
]
