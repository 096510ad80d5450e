"""Typed traces: one model run on one text, recorded for the views (design choice).

A *trace* holds everything :mod:`geomlab.figures` needs to draw a model run, as numpy arrays with named
axes, so figures are pure functions of a trace and a saved trace reproduces a view exactly.

Entry points
------------
* :func:`encode_text` ``(vocab, text) -> LongTensor (1, T)``; texts longer than :data:`MAX_TEXT_CHARS`
  (2,048 characters) or empty raise :class:`TraceError` (a ``ValueError``).
* :func:`trace` ``(model, tokens, vocab=None, text=None) -> Trace``: runs ``model.record(tokens)`` (read
  from the model's hook points, :mod:`geomlab.models.hooks`) under ``torch.no_grad`` in eval mode and wraps
  the record dict in the dataclass of the family the model's class records (``trace_family()``):
  :class:`OSMTrace`, :class:`CEMTrace`, :class:`GrassmannTrace` or :class:`BaselineTrace`. Record keys the
  dataclass does not know are kept in ``extras``.
* :func:`trace_text` ``(model, vocab, text)``: both of the above in one call.
* :func:`position_labels` ``(vocab, text, tokens) -> list[str]``: the name of each position, which a trace
  keeps as ``labels`` and every view, chart, export and What-if shows: the token as typed, whitespace made
  visible (:func:`visible`: ``␣``, ``↵``), ``é→�`` where the model read the vocabulary's unknown token.
* :func:`trace_cem_steps` ``(model, tokens, steps)``: re-run a CEM model with another inference-time number
  of recursion steps T (test-time recursion; the app's T slider).
* :func:`save_trace` / :func:`load_trace`: one ``.npz`` file of plain arrays plus a JSON metadata string
  (key ``__meta__``); loading uses ``np.load(allow_pickle=False)``, so a trace file cannot run code.

Axis names used in the field docs: ``layer``, ``position`` (token index t = 0..T-1), ``substep`` (OSM:
0 = attention, 1 = grounding), ``block`` (CEM: 0 = attention, 1 = MLP), ``step`` (CEM recursion step
t = 0..T), ``head``, ``offset`` (Grassmann offset slot), ``vocab``, ``d``/``rank``/``d_model`` (features).

Modules
-------
* :mod:`~geomlab.trace.base`: :class:`Trace` (the common fields, attention computed on demand),
  :class:`BaselineTrace`, :class:`LazyArray`, :class:`TraceError`.
* One module per family with its dataclass and how a record compacts into it: :mod:`~geomlab.trace.osm`,
  :mod:`~geomlab.trace.cem`, :mod:`~geomlab.trace.grassmann`.
* :mod:`~geomlab.trace.record`: record dict -> typed trace (:func:`from_record`, :data:`FAMILIES`).
* :mod:`~geomlab.trace.tracing`: text -> tokens, running a model (:func:`trace`, :func:`trace_text`,
  :func:`trace_cem_steps`).
* :mod:`~geomlab.trace.files`: the ``.npz`` file format and its versions; :mod:`~geomlab.trace.export`: the
  windowed JSON export; :mod:`~geomlab.trace.scoring`: :func:`score_predictions`, :func:`past_training_length`.
"""

from geomlab.trace.base import BaselineTrace, LazyArray, Trace, TraceError, causal_softmax_rows
from geomlab.trace.cem import CEMTrace
from geomlab.trace.export import trace_json
from geomlab.trace.files import FORMAT_VERSION, load_trace, save_trace, trace_bytes
from geomlab.trace.grassmann import GrassmannTrace
from geomlab.trace.osm import OSMTrace
from geomlab.trace.record import FAMILIES, dense_attention, family_of_kind, from_record
from geomlab.trace.tracing import (MAX_TEXT_CHARS, encode_text, position_labels, trace, trace_cem_steps, trace_text,
                                   visible)
from geomlab.trace.scoring import PredictionScores, is_word_problem, past_training_length, score_predictions

__all__ = [
    "MAX_TEXT_CHARS", "FORMAT_VERSION", "TraceError", "Trace", "BaselineTrace", "OSMTrace", "CEMTrace",
    "GrassmannTrace", "FAMILIES", "family_of_kind", "visible", "position_labels", "encode_text", "from_record",
    "trace", "trace_text", "trace_cem_steps", "save_trace", "load_trace", "trace_bytes", "trace_json",
    "is_word_problem",
    "LazyArray", "dense_attention", "causal_softmax_rows",
    "PredictionScores", "score_predictions", "past_training_length",
]
