"""The numbers of a report's tables, from the per-seed measurements of its runs: means and sample standard
deviations over seeds with 95% intervals (:func:`summarize_row`, :func:`ci95`), each row against its
comparison's baseline (speed ratios, test-BPC gap with a paired 95% interval, :func:`compare_to_baseline`), accuracy by length over seeds (:func:`mean_accuracy`), whether a
tuned learning rate sits at the edge of its grid (:func:`lr_edge`), and the merge of reports run as parallel
parts (:func:`merge_results`). Pure functions of result dicts: no training, no files."""

from __future__ import annotations

import math
import statistics
from typing import Any

from geomlab.core.extras import require
from geomlab.report.protocol import COMPARISONS, Protocol, ReportError, command_line


def mean(xs: list[float | None]) -> float | None:
    """Mean of the finite values of ``xs`` (``None`` and NaN skipped); ``None`` when none is left."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(xs) / len(xs) if xs else None


def std(xs: list[float | None]) -> float | None:
    """Sample standard deviation of the finite values of ``xs``; ``None`` with fewer than two."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.stdev(xs) if len(xs) > 1 else None


def ci95(xs: list[float | None]) -> float | None:
    """Half-width of the 95% confidence interval of the mean of the finite values of ``xs`` (Student's t with
    n - 1 degrees of freedom: ``t_0.975 * s / sqrt(n)``, same units as ``xs``); ``None`` with fewer than two.
    Source: design choice (seeds as independent draws; scipy's t quantile)."""
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    if len(xs) < 2:
        return None
    t = require("scipy.stats", "the report's confidence intervals", extra="sweep").t

    return float(t.ppf(0.975, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs)))


NEAR_UNIGRAM = 0.15
"""Bits per character: a run whose validation BPC ends within this of the unigram's learned nothing beyond
letter frequencies (it collapsed; design choice: healthy runs of every bundled model end more than 1.5 bits
below)."""


def near_unigram(valid: float | None, unigram: float | None) -> bool:
    """Whether a validation BPC ``valid`` is within :data:`NEAR_UNIGRAM` of the corpus's unigram BPC (False
    when either is unknown)."""
    return valid is not None and unigram is not None and valid > unigram - NEAR_UNIGRAM


def seeds_to_come(row: dict[str, Any]) -> bool:
    """Whether seeds are still to come for a row: seeds the plan gives it so far (``planned_seeds``, which the
    seed rule extends until the gaps settle) neither finished (``seeds``) nor diverged (``failed_seeds``). Its
    gaps are provisional (:func:`geomlab.report.render_parts.provisional`)."""
    done = set(row.get("seeds", [])) | {f["seed"] if isinstance(f, dict) else f for f in row.get("failed_seeds") or []}
    return bool(set(row.get("planned_seeds", row.get("seeds", []))) - done)


def summarize_row(row: dict[str, Any], proto: Protocol) -> None:
    """Add a language-model row's seed statistics in place: ``valid_mean/std/ci95``, ``test_mean/std/ci95``
    (:func:`ci95`), ``tokens_per_s_mean`` and ``tokens_per_cpu_s`` (training tokens of one run per mean
    process CPU second; ``None`` without CPU times)."""
    row["valid_mean"], row["valid_std"] = mean(row["valid"]), std(row["valid"])
    row["test_mean"], row["test_std"] = mean(row["test"]), std(row["test"])
    row["valid_ci95"], row["test_ci95"] = ci95(row["valid"]), ci95(row["test"])
    row["tokens_per_s_mean"] = mean(row["tokens_per_s"])
    cpu = [c for c in row.get("cpu_s", []) if c and c > 0]
    row["tokens_per_cpu_s"] = (proto.steps * proto.batch_size * proto.seq_len / mean(cpu)) if cpu else None


def compare_to_baseline(rows: list[dict[str, Any]]) -> None:
    """Add, in place, each row's ``speed_ratio`` / ``cpu_speed_ratio`` (tokens/s over the baseline row's,
    measured in the same run) and, when both have a test BPC, ``test_gap`` (ours minus the baseline's, bits),
    ``char_ppl_ratio`` (2 ** gap) and, with two or more seeds shared by both rows, ``test_gap_ci95`` (the
    95% interval of the seed-paired differences, :func:`paired_gap`: both models see the same seeds' batches).
    When the two rows finished different seeds, the gaps are :func:`paired_gap`'s over the seeds both have:
    ``test_gap``, ``test_gap_ci95``, ``valid_gap`` and ``gap_seeds`` (their number). The baseline is the row
    with ``baseline`` set (none: no ratios)."""
    base = next((r for r in rows if r["baseline"]), None)
    for r in rows:
        b = base.get("tokens_per_s_mean") if base else None
        r["speed_ratio"] = (r["tokens_per_s_mean"] / b) if (b and r.get("tokens_per_s_mean")) else None
        bc = base.get("tokens_per_cpu_s") if base else None
        r["cpu_speed_ratio"] = (r["tokens_per_cpu_s"] / bc) if (bc and r.get("tokens_per_cpu_s")) else None
        if base and r.get("test_mean") is not None and base.get("test_mean") is not None:
            r["test_gap"] = r["test_mean"] - base["test_mean"]
            g = paired_gap(r, base, "test") if r is not base else None
            if g is not None and _same_seeds(r, base):
                r["test_gap_ci95"] = g["ci95"]
            elif g is not None:
                r["test_gap"], r["test_gap_ci95"], r["gap_seeds"] = g["gap"], g["ci95"], g["seeds"]
                r["valid_gap"] = (paired_gap(r, base, "valid") or {}).get("gap")
            r["char_ppl_ratio"] = 2.0 ** r["test_gap"]


def _same_seeds(r: dict[str, Any], other: dict[str, Any]) -> bool:
    return list(r.get("seeds", [])) == list(other.get("seeds", []))


def paired_gap(r: dict[str, Any] | None, other: dict[str, Any] | None, split: str) -> dict[str, Any] | None:
    """The seed-paired gap ``r - other`` of two rows' per-seed ``split`` BPC (``"test"`` / ``"valid"``, bits)
    over the seeds both finished: ``{"gap": mean difference, "ci95": its :func:`ci95` half-width (``None``
    below two seeds), "seeds": how many, "per_seed": the differences in seed order}``; ``None`` without a row
    or a common seed. Every seed-paired gap of
    the reports is this one (the tables, the reading, the verdicts). Source: design choice (seeds as paired
    draws: both models see the same seed's batches)."""
    if not r or not other:
        return None
    mine = dict(zip(r.get("seeds", []), r.get(split, [])))
    theirs = dict(zip(other.get("seeds", []), other.get(split, [])))
    d = [mine[s] - theirs[s] for s in sorted(mine) if s in theirs and mine[s] is not None and theirs[s] is not None]
    return {"gap": mean(d), "ci95": ci95(d), "seeds": len(d), "per_seed": d} if d else None


def compare_to_versus(rows: list[dict[str, Any]]) -> None:
    """Add, in place, to each row whose ``versus`` names another row (an ablation and what it ablates, e.g.
    identity against linear mixing; a size-matched pair, the ~500K OSMFormer against the ~500K Transformer)
    that has a test BPC: ``versus_gap`` (this row's test BPC minus that row's, bits: :func:`paired_gap` over
    the seeds both finished, the difference of the means without a common seed) and ``versus_gap_ci95``
    (:func:`paired_gap`'s interval, ``None`` below two common seeds); ``versus_seeds`` (their number) when
    the two rows finished different seeds. Raises ``ValueError`` when ``versus`` names no row (a typo in the
    protocol). Design choice: such a claim is stated directly, not read off two gaps to the baseline."""
    by_label = {r["label"]: r for r in rows}
    for r in rows:
        name = r.get("versus")
        if not name:
            continue
        other = by_label.get(name)
        if other is None or other is r:
            raise ValueError(f"{r['label']!r} is compared with {name!r}, which is not another row of its table")
        if r.get("test_mean") is None or other.get("test_mean") is None:
            continue
        g = paired_gap(r, other, "test")
        if g is None:
            r["versus_gap"] = r["test_mean"] - other["test_mean"]
            continue
        r["versus_gap"], r["versus_gap_ci95"] = g["gap"], g["ci95"]  # ci95 None for one seed: "no interval yet"
        if not _same_seeds(r, other):
            r["versus_seeds"] = g["seeds"]


def mean_accuracy(per_seed: list[dict[int, float]], lengths: tuple[int, ...]) -> dict[str, float | None]:
    """Word problem: ``{str(length): mean accuracy over the seeds that measured it}`` for each of ``lengths``."""
    return {str(n): mean([d[n] for d in per_seed if n in d]) for n in lengths}


def lr_edge(row: dict[str, Any]) -> str | None:
    """``"low"`` / ``"high"`` when a row's tuned lr is the smallest / largest of its sweep (old report JSON
    too), else ``None`` (:meth:`geomlab.training.sweep.Dimension.edge`)."""
    from geomlab.training.sweep import Dimension

    grid = tuple(float(x) for x in (row.get("lr_sweep") or {}))
    if row.get("lr") is None or not grid:
        return None
    return Dimension("lr", "choice", choices=grid).edge(float(row["lr"]))


def merge_results(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Merge result dicts of runs with the same protocol profile (e.g. the sections of one report run as
    parallel processes with ``--only``) into one: comparisons in :data:`COMPARISONS` order, word-problem rows
    concatenated, wall time = the longest part, CPU time = the sum. Raises :class:`ReportError` when the
    parts used different protocols (other than their ``comparisons``/``wp_steps``)."""
    if not parts:
        raise ReportError("nothing to merge")
    ignore = {"comparisons", "wp_steps"}

    def key(p):
        return {k: v for k, v in p["protocol"].items() if k not in ignore}

    for part in parts[1:]:
        if key(part) != key(parts[0]):
            raise ReportError("cannot merge results produced with different protocols")
    comps = {c["key"]: c for part in parts for c in part["comparisons"]}
    order = [k for k in COMPARISONS if k in comps] + [k for k in comps if k not in COMPARISONS]
    wps = [part["word_problem"] for part in parts if part.get("word_problem")]
    wp = None
    if wps:
        wp = dict(wps[0])
        wp["rows"] = [r for w in wps for r in w["rows"]]
        wp["groups"] = list(dict.fromkeys(g for w in wps for g in w["groups"]))
    proto = dict(parts[0]["protocol"])
    proto["comparisons"] = order
    proto["wp_steps"] = max(int(part["protocol"]["wp_steps"]) for part in parts)
    return {"protocol": proto, "started": min(part["started"] for part in parts),
            "wall_s": max(part["wall_s"] for part in parts),
            "cpu_s": round(sum(part.get("cpu_s", 0.0) for part in parts), 1),
            "machine": parts[0]["machine"], "comparisons": [comps[k] for k in order], "word_problem": wp,
            "parts": len(parts), "part_commands": [command_line(part["protocol"]) for part in parts],
            "part_outs": [part.get("out") for part in parts]}

