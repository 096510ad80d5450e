"""The reproduction report: ``geomlab report`` -> ``docs/results.md``.

Every model in a comparison is trained and evaluated with **one protocol** (:class:`Protocol`): the same
number of optimizer steps, batch size, window length, learning-rate schedule (AdamW, 2% linear warm-up,
cosine to 10%, gradient clip 1.0, no weight decay), the same seeds, and the same evaluation (the
pipeline's BPC: mean NLL in nats / ln 2 over every target character of the split, non-overlapping windows
of the training length, fresh state per window; :func:`geomlab.data.tasks.sequence_nll`). Parameter
budgets are met with :func:`geomlab.models.config_for_budget` (effective parameters, within 5%).

Sections of the report (each :class:`Comparison` lists its arms and the paper's numbers next to ours):

* OSM: Tiny Shakespeare ~100K (OSMFormer linear / identity mixing vs ALiBi Transformer), ~50K (OSM-RNN vs
  LSTM), PTB-char ~100K, and the scaling study to 500K (full mode only);
* CEM vs Llama at ~200K: T in {1, 2}, shared diagonal on/off;
* Grassmann vs its attention baseline at ~200K on WikiText-2 characters;
* the group word problem (S5 and Z60): final-position accuracy by sequence length for OSM-RNN on O(d),
  U(d) and the torus, the LSTM and the Transformer, trained at one length and tested at longer ones;
* speed: training tokens/s of every model as a ratio to its comparison's baseline, measured in the same
  run, and trace latency (``geomlab.trace.trace`` on a fixed text, milliseconds).

Profiles: ``smoke`` (tests; seconds per model), ``quick`` (< 10 minutes on 2 CPU cores: few steps, short
windows, capped evaluation, 1 seed) and ``full`` (about a day on 2 CPU cores; lr grid, 3 seeds, full splits). The numbers of a
quick run are CI-sized checks, not reproductions; the report says which profile produced it.

The package, one concept per module: :mod:`~geomlab.report.protocol` (what is compared: protocol, profiles,
comparisons, budgets, seeds), :mod:`~geomlab.report.running` (training the runs, lr tuning through the sweep
tool), :mod:`~geomlab.report.aggregation` (the numbers of the tables), :mod:`~geomlab.report.render` (the
Markdown, one renderer per section), :mod:`~geomlab.report.figures` (plotly figures and their images) and
:mod:`~geomlab.report.output` (the files of a report). The campaigns of resumable runs:
:mod:`~geomlab.report.campaign`, :mod:`~geomlab.report.store`, :mod:`~geomlab.report.worker`,
:mod:`~geomlab.report.dispatch` (submitit), :mod:`~geomlab.report.results`, :mod:`~geomlab.report.plan` (the
fair campaign), :mod:`~geomlab.report.flops`, :mod:`~geomlab.report.records` (provenance, run records) and
:mod:`~geomlab.report.page` (``docs/results.md``). The names below are the public API.
"""

from __future__ import annotations

from geomlab.report.aggregation import merge_results
from geomlab.report.figures import figures_for
from geomlab.report.output import write_report
from geomlab.report.protocol import (
    COMPARISONS, PROFILES, WORD_PROBLEM_ARMS, Arm, Comparison, Protocol, ReportError, command_line, protocol)
from geomlab.report.render import render_markdown
from geomlab.report.running import run_comparison, run_report, run_word_problem, trace_latency_ms, tune_lr

__all__ = [
    "Protocol", "Arm", "Comparison", "COMPARISONS", "WORD_PROBLEM_ARMS", "PROFILES", "ReportError", "protocol",
    "trace_latency_ms", "tune_lr", "run_comparison", "run_word_problem", "run_report", "merge_results", "command_line",
    "render_markdown",
    "figures_for",
    "write_report",
]
