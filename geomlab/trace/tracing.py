"""Tracing a text: text to tokens (:func:`encode_text`) and the name of each position
(:func:`position_labels`), one model run in eval mode under a lock (:func:`trace`, :func:`trace_text`), and
CEM test-time recursion (:func:`trace_cem_steps`)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch

from geomlab.data.vocab import from_visible, visible  # noqa: F401 (the trace's names for tokens)
from geomlab.trace.base import Trace, TraceError
from geomlab.trace.cem import CEMTrace
from geomlab.trace.lens import DEFAULT_K, layer_lens, lens_from_cache, lens_hooks
from geomlab.trace.record import family_of_kind, from_record

MAX_TEXT_CHARS = 2048
"""Longest text :func:`encode_text` accepts (characters). Design choice: keeps a trace (at most 16 MB at
this length, ``geomlab bench figures --sizes``) small enough for an interactive page."""


# Serialises model runs in this module: the app may trace one cached model from several threads, and a run
# changes the model for its duration: trace() switches it to eval mode, trace_cem_steps() changes its
# recursion steps, and record() attaches functions to its hook points (shared by every thread using the
# model, so two unserialised runs would collect each other's values).
MODEL_LOCK = threading.RLock()


def encode_text(vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> torch.Tensor:
    """Encode ``text`` with the checkpoint's vocabulary.

    Args:
        vocab: a ``geomlab.data.Vocab`` (anything with ``encode(str) -> Sequence[int] | Tensor``).
        text: the text to trace (characters outside the vocabulary map to its unknown token); normalised
            first with ``geomlab.data.vocab.normalize_text`` (byte-order mark dropped, ``\r\n``/``\r`` as
            ``\n``), as every text entering geomlab is.
        max_chars: longest accepted text, default :data:`MAX_TEXT_CHARS` (2,048).

    Returns:
        ``LongTensor`` of shape ``(1, T)`` with ``T = len(text)`` for a character vocabulary.

    Raises:
        TraceError: ``text`` is not a string, is empty, or is longer than ``max_chars``.
    """
    if not isinstance(text, str):
        raise TraceError(f"text must be a string, got {type(text).__name__}")
    from geomlab.data.vocab import normalize_text

    text = normalize_text(text)  # the one normalisation of every text (BOM dropped, \r\n and \r as \n)
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


READ_AS = "→"
"""Between a typed token and the unknown token the model read in its place (``é→�``)."""


def token_text(vocab, i: int) -> str:
    """The printable string of token id ``i`` of ``vocab``: ``visible(vocab.decode([i]))`` (GPT-2's
    ``"Ġthe"`` as ``"␣the"``, a word vocabulary's ``<eos>`` as ``"↵"``), ``"#i"`` for an id the vocabulary
    cannot decode or that decodes to nothing. Design choice."""
    try:
        s = vocab.decode([int(i)])
    except Exception:  # an id the vocabulary cannot decode: show the id
        return f"#{i}"
    return visible(s) if s else f"#{i}"


def position_labels(vocab, text: str | None, tokens) -> list[str]:
    """One label per position of a text that ``vocab`` encoded into ``tokens`` (ids, ``(T,)``): the name
    every view, chart, hover, export and What-if gives the position.

    Each position is its token as :func:`token_text` writes it (for a character vocabulary the character as
    typed, whitespace made visible: ``␣``, ``↵``); where the id is the vocabulary's unknown token but the
    typed token (``vocab.split`` of the normalised ``text``) is not that token, the typed token,
    :data:`READ_AS` and the unknown token (``é→�``, ``🙂→�``): what was typed and what the model read, both
    in view. Without a vocabulary: the characters of ``text`` when it has one per token, else ``"#id"``.
    Design choice: the typed character alone hides that the model saw something else; the unknown token
    alone hides which character it stood for, and two different characters would read alike."""
    from geomlab.data.vocab import normalize_text

    ids = [int(i) for i in np.asarray(tokens).reshape(-1).tolist()]
    if vocab is None:
        if text is not None and len(text) == len(ids):
            return [visible(c) for c in text]
        return [f"#{i}" for i in ids]
    names = {i: token_text(vocab, i) for i in set(ids)}
    labels = [names[i] for i in ids]
    unk, unk_id = getattr(vocab, "unk", None), getattr(vocab, "unk_id", None)
    if text and unk is not None and unk_id in names:
        typed = list(vocab.split(normalize_text(text)))
        if len(typed) == len(ids):
            labels = [f"{visible(t)}{READ_AS}{visible(unk)}" if i == unk_id and t != unk else label
                      for t, i, label in zip(typed, ids, labels)]
    return labels


def _group_info(model) -> dict[str, Any]:
    group = getattr(model, "group", None)
    if group is None:
        return {}
    spec = dict(getattr(group, "spec", None) or {})
    name = str(spec.pop("name", getattr(group, "name", "")))
    d = int(spec.pop("d", getattr(group, "d", 0)))
    options = {k: v for k, v in spec.items() if isinstance(v, (int, float, str, bool))}
    return {"name": name, "d": d, "options": options}


def trace(model, tokens, vocab=None, text: str | None = None, max_positions: int = MAX_TEXT_CHARS,
          lens: bool = True) -> Trace:
    """Run ``model`` on one sequence and return its typed trace.

    Args:
        model: a registered :class:`geomlab.models.SequenceModel` (any kind).
        tokens: ``LongTensor`` of shape ``(1, T)`` (a ``[T]`` vector is accepted too).
        vocab: optional vocabulary the labels are read from (``decode``, ``split``, ``unk``).
        text: optional text the tokens came from; ``trace.labels`` is :func:`position_labels` of the
            vocabulary, the text and the tokens (``é→�`` where the model read the unknown token).
        max_positions: longest accepted T (default :data:`MAX_TEXT_CHARS`).
        lens: also compute the layer lens (:func:`geomlab.trace.lens.layer_lens`, top-:data:`DEFAULT_K`, read
            from the same run as the record unless the class says its hooks change its arithmetic) into
            ``trace.lens`` when the model's class declares lens stages.

    Returns:
        the dataclass of the family the model's class records (``trace_family()``: :class:`OSMTrace`,
        :class:`CEMTrace`, :class:`GrassmannTrace` or :class:`BaselineTrace`), arrays on CPU as numpy;
        ``trace.lens`` the compact :class:`~geomlab.trace.lens.Lens` or ``None``.

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
    with MODEL_LOCK:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                record, found = _record_and_lens(model, tokens.to(device), lens)
        finally:
            model.train(was_training)
    tok = tokens[0].cpu().numpy()
    kind = str(config.get("kind", getattr(model, "kind", "")))
    family = type(model).trace_family() if hasattr(type(model), "trace_family") else family_of_kind(kind)
    tr = from_record(record, kind, tok, labels=position_labels(vocab, text, tok), config=config,
                     text=text or "", group=_group_info(model), family=family)
    if found is not None:
        found.names = _lens_names(vocab, found.top_ids, tok, tr.labels)
    tr.lens = found
    return tr


def _record_and_lens(model, tokens: torch.Tensor, lens: bool):
    """``(record, lens or None)`` of one sequence: the record from the model's ``trace_run`` (a kind may store
    compact fields, e.g. the torus OSMFormer's diagonals) and, when asked for and the kind has lens stages,
    the layer lens read from the same run; a kind whose hook points change its arithmetic
    (``hooks_change_arithmetic``) reads the lens in a run of its own, so its record is that of a plain run."""
    names = lens_hooks(model) if lens else []
    if names and model.hooks_change_arithmetic:
        return model.trace_record(tokens), layer_lens(model, tokens, DEFAULT_K, keep_log_probs=False)
    record, cache = model.trace_run(tokens, names)
    return record, (lens_from_cache(model, cache, tokens, DEFAULT_K, keep_log_probs=False) if names else None)


def _lens_names(vocab, ids: np.ndarray, tokens: np.ndarray, labels: list[str]) -> dict[int, str]:
    """Printable strings of the token ids the lens names: from the vocabulary, else the label of a position
    holding that token, else ``"#id"``."""
    at = {int(t): labels[p] for p, t in reversed(list(enumerate(tokens.tolist())))}
    out = {}
    for i in np.unique(ids).tolist():
        out[i] = token_text(vocab, i) if vocab is not None else at.get(i, f"#{i}")
    return out


def trace_text(model, vocab, text: str, max_chars: int = MAX_TEXT_CHARS) -> Trace:
    """``trace(model, encode_text(vocab, text), vocab, text)``: trace a text in one call.
    Raises :class:`TraceError` for an empty or too long text."""
    from geomlab.data.vocab import normalize_text

    text = normalize_text(text) if isinstance(text, str) else text
    tokens = encode_text(vocab, text, max_chars=max_chars)
    return trace(model, tokens, vocab=vocab, text=text, max_positions=max_chars)


def trace_cem_steps(model, tokens, steps: int, vocab=None, text: str | None = None) -> CEMTrace:
    """Trace a CEM model with ``steps`` recursion steps at inference (test-time recursion, Xu et al., arXiv 2605.07588).

    Temporarily sets the model's ``inference_recursion_steps`` (a config key; the model's
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
    with MODEL_LOCK:
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
