"""The Markdown pieces both reports share (:mod:`geomlab.report.render` and
:mod:`geomlab.report.render_converged`): number cells, one language-model comparison's table with its verdict
against the baseline and its lr sweep (:func:`comparison_section`, :func:`verdict`), and the figure links
(:func:`figures_section`). Each renderer returns its lines (ending with a blank line); none reads files or trains
anything."""

from __future__ import annotations

import math
from typing import Any

from geomlab.report.aggregation import NEAR_UNIGRAM, lr_edge, near_unigram, seeds_to_come


def _f(x: float | None, nd: int = 3) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def bpc_cell(valid: float | None, unigram: float | None) -> str:
    """A tuning run's validation BPC to 3 decimals, "(≈ unigram)" after it when the run collapsed
    (:func:`geomlab.report.aggregation.near_unigram`), "—" when it has none."""
    return _f(valid) + (" (≈ unigram)" if near_unigram(valid, unigram) else "")


def unigram_legend(unigram: float | None) -> str:
    """The words for "≈ unigram" (empty without the unigram's BPC)."""
    return ("" if unigram is None else f"; ≈ unigram: within {NEAR_UNIGRAM} bits of the unigram's {unigram:.3f}, "
            "the run learned nothing beyond letter frequencies")


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.3f} ± {std:.3f}" if std is not None else f"{mean:.3f}"


def _params(n: int | None) -> str:
    return "—" if not n else (f"{n / 1000:.1f}K" if n < 1_000_000 else f"{n / 1e6:.2f}M")



_LM_HEADER = ("| model | kind | params | seeds | lr the seeds train at | valid BPC (mean ± sd) | test BPC (mean ± sd) | "
              "paper valid | paper test | Δ test vs baseline | tokens/s | speed vs baseline | speed vs baseline (CPU) "
              "| trace ms |")


def comparison_section(c: dict[str, Any], p: dict[str, Any]) -> list[str]:
    """``### <comparison>``: its table (one row per model, ours next to the paper's), the verdict against the
    baseline and the learning-rate sweep. ``p``: the protocol dict (the lr of rows without a tuned one)."""
    lines = [f"### {c['title']}", ""]
    split = f" ({c['split']})" if c.get("split") else " (not found on this machine, so its split is not shown)"
    lines.append(" ".join(x for x in (f"Corpus `{c['corpus']}`{split}.", c["claim"], c["note"]) if x))
    lines += ["", _LM_HEADER, "|" + "---|" * 14]
    for r in c["rows"]:
        name = r["label"] + (" (baseline)" if r["baseline"] else "")
        if r.get("error"):
            lines.append(f"| {name} | {r['kind']} | — | {len(r['seeds'])} | — | failed: {r['error'][:120]} "
                         "| | | | | | | | |")
            continue
        paper = r.get("paper") or {}
        gap = r.get("test_gap")
        gap_s = "—" if r["baseline"] or gap is None else f"{gap:+.3f}"
        if gap_s != "—" and r.get("test_gap_ci95") is not None:  # seed-paired, two or more seeds
            gap_s += (f" (95% CI ±{r['test_gap_ci95']:.3f}" + (f", {r['gap_seeds']} paired seeds" if "gap_seeds" in r
                                                               else "") + ")")
        lines.append(
            f"| {name} | `{r['kind']}` | {_params(r.get('params'))} | {len(r['seeds'])} | "
            f"{r.get('lr', p['lr'])} | {_pm(r['valid_mean'], r['valid_std'])} | {_pm(r['test_mean'], r['test_std'])} | "
            f"{_f(paper.get('valid'))} | {_f(paper.get('test'))} | {gap_s} | "
            f"{_f(r.get('tokens_per_s_mean'), 0)} | {_f(r.get('speed_ratio'), 2)} | "
            f"{_f(r.get('cpu_speed_ratio'), 2)} | {_f(r.get('trace_ms'), 1)} |")
    lines += ["", verdict(c), ""]
    swept = [r for r in c["rows"] if r.get("lr_sweep")]
    if swept:
        def _sweep(r):
            vals = ", ".join(f"{lr} → {bpc_cell(v, c.get('unigram_bpc'))}" for lr, v in r["lr_sweep"].items())
            edge = (f" (its seeds train at {r['lr']}, stepped down after divergences)" if r.get("full_notes")
                    else " (best at the edge of the grid)" if lr_edge(r) else "")
            return f"{r['label']}: {vals}{edge}"

        uni = c.get("unigram_bpc")
        marked = any(near_unigram(v, uni) for r in swept for v in r["lr_sweep"].values())
        lines += [f"Learning-rate sweep (validation BPC of the first seed; — = diverged"
                  f"{unigram_legend(uni) if marked else ''}): "
                  + "; ".join(_sweep(r) for r in swept) + ".", ""]
    return lines


def end(x: float) -> str:
    """An interval's end in bits, signed, to 3 decimals; one that rounds to 0.000 with the digits that show its
    sign (``-0.0004``, ``+0.00002``; up to 6 decimals, below that ``+0.000``), so that whether an interval
    excludes 0 can be read off it. Source: design choice."""
    s = f"{x:+.3f}"
    if float(s) != 0 or x == 0:
        return s
    for nd in range(4, 7):
        if float(f"{x:.{nd}f}") != 0:
            return f"{x:+.{nd}f}"
    return "+0.000"


def judged(row: dict[str, Any], against: str, lo: float, hi: float) -> str:
    """What closes the interval ``lo``..``hi`` (bits) of ``row`` minus the row labelled ``against``: the words
    of the paper's claim read on that pair where the row carries them (``row["claims"][against]``, set by
    :func:`geomlab.report.page.mark_claims`: "claim supported: ..."), else ": not distinguishable" when it
    spans 0, else nothing."""
    words = (row.get("claims") or {}).get(against)
    if words:
        return f"; {words}"
    return ": not distinguishable" if lo <= 0 <= hi else ""


def interval(g: dict[str, Any], row: dict[str, Any], against: str, both: bool) -> str:
    """`` (95% CI lo to hi over N seeds[ both finished]<judged>)``: the 95% interval of a seed-paired gap ``g``
    (``{"gap", "ci95", "seeds"}`` in bits, as :func:`geomlab.report.aggregation.paired_gap` gives it) of ``row``
    minus the row labelled ``against``, its ends as :func:`end` writes them, closed by :func:`judged`;
    ``both``: the two rows finished different seeds, paired over those both have. `` (N seed(s), no interval
    yet)`` while ``ci95`` is ``None`` (below two seeds). The one phrase every report states a gap's interval in.
    Source: design choice."""
    n = g["seeds"]
    if g["ci95"] is None:
        return f" ({n} seed{'s' if n != 1 else ''}, no interval yet)"
    lo, hi = g["gap"] - g["ci95"], g["gap"] + g["ci95"]
    return (f" (95% CI {end(lo)} to {end(hi)} over {n} seeds" + (" both finished" if both else "")
            + judged(row, against, lo, hi) + ")")


def baseline_gap(r: dict[str, Any]) -> dict[str, Any]:
    """A row's test gap to its baseline (:func:`geomlab.report.aggregation.compare_to_baseline`) as
    :func:`interval` reads a gap: ``{"gap", "ci95", "seeds"}``, the seeds paired (``gap_seeds``) or the row's."""
    return {"gap": r["test_gap"], "ci95": r.get("test_gap_ci95"),
            "seeds": r.get("gap_seeds", len(r.get("seeds", [])))}


def versus_phrase(r: dict[str, Any]) -> str:
    """The gap of a row with ``versus_gap`` (:func:`geomlab.report.aggregation.compare_to_versus`):
    "+0.208 test BPC against OSMFormer O(d), linear mixing (95% CI ... over 3 seeds)": the gap with its
    :func:`interval` ("both finished" when the two rows finished different seeds)."""
    g = {"gap": r["versus_gap"], "ci95": r.get("versus_gap_ci95"),
         "seeds": r.get("versus_seeds", len(r.get("seeds", [])))}
    return f"{g['gap']:+.3f} test BPC against {r['versus']}" + interval(g, r, r["versus"], "versus_seeds" in r)


def claim_pairs(r: dict[str, Any], rows: list[dict[str, Any]], cuts: bool = True) -> list[str]:
    """"-0.018 test BPC against X (95% CI ... over 2 seeds both finished; claim supported ...)" for each row X
    a paper's claim reads ``r`` against (``r["claims"]``) that no other phrase states: not the baseline, not
    ``r``'s ``versus``, and, unless ``cuts``, not the baseline cut to ``r``'s budget
    (:func:`geomlab.report.plan.sized_label`; the reading states that pair on a line of its own). The gap is
    :func:`geomlab.report.aggregation.paired_gap`'s, as the verdict's."""
    from geomlab.report.aggregation import paired_gap
    from geomlab.report.plan import sized_label

    by_label = {x["label"]: x for x in rows}
    base = next((x["label"] for x in rows if x["baseline"]), None)
    out = []
    for against in r.get("claims") or {}:
        cut = sized_label(against)
        if against in (base, r.get("versus")) or (not cuts and cut and cut[2] == r["label"]):
            continue
        g = paired_gap(r, by_label.get(against), "test")
        if g is None or g["ci95"] is None:
            continue
        out.append(f"{g['gap']:+.3f} test BPC against {against}"
                   + interval(g, r, against, r["seeds"] != by_label[against]["seeds"]))
    return out


#: Why seeds are still to come under a seed rule, in every report that says a gap is provisional (design choice).
SEED_RULE = "the seed rule adds seeds until every gap settles"


def provisional(rows: list[dict[str, Any]], most: int | None, named: bool = False) -> str:
    """"Provisional: more seeds to come (3 of the 4 seeds planned so far finished; the seed rule adds seeds until
    every gap settles, at most 8)": why the gaps of ``rows`` may still move, empty when no row has seeds to come
    (:func:`geomlab.report.aggregation.seeds_to_come`). The count is of the seeds planned so far
    (``planned_seeds``), "2 to 3 of the 4" when the rows differ; ``named``: per row ("A 3 of 4, B 2 of 4"), or
    "for every model" when all rows wait alike; ``most``: the seed rule's most seeds (``None``: a fixed plan, no
    rule). Source: design choice."""
    short = [r for r in rows if seeds_to_come(r)]
    if not short:
        return ""
    done = {r["label"]: (sum(s in r["planned_seeds"] for s in r["seeds"]), len(r["planned_seeds"])) for r in short}
    counts = sorted(set(done.values()))
    if named and (len(counts) > 1 or len(short) < sum(bool(r.get("planned_seeds")) for r in rows)):
        finished = ", ".join(f"{k} {n} of {p}" for k, (n, p) in done.items()) + " finished"
    else:
        lo, hi, planned = counts[0][0], counts[-1][0], max(p for _, p in counts)
        finished = ((f"{lo}" if lo == hi else f"{lo} to {hi}") + f" of the {planned} seeds planned"
                    + (" so far" if most else "") + " finished"
                    + (" for every model" if named and len(short) > 1 else ""))
    rule = f"; {SEED_RULE}, at most {most}" if most else ""
    return f"Provisional: more seeds to come ({finished}{rule})"


def verdict(c: dict[str, Any]) -> str:
    """One sentence per non-baseline arm: our test-BPC gap to the baseline next to the paper's gap (the baseline
    cut to another model's budget, :func:`geomlab.report.plan.sized_label`, is labelled a budget check: what
    the shorter budget costs the baseline, not a claim's gap); a caution when the baseline's tuned learning
    rate sits at the edge of the lr grid."""
    from geomlab.report.plan import sized_label

    rows = c["rows"]
    base = next((r for r in rows if r["baseline"]), None)
    if base is None and not any(r["baseline"] for r in rows) and c.get("key") == "zoo-ts":
        return "_Not a comparison: the zoo's models, each on its own._"
    if base is None or base.get("test_mean") is None:
        return "_No baseline result, so no gap can be stated._"
    out = []
    for r in rows:
        if r is base or r.get("test_mean") is None:
            continue
        sized = sized_label(r["label"])
        cut = bool(sized) and sized[0] == base["label"] and sized[2] is not None  # the baseline, cut short
        s = (("Budget check, not a claim's gap: " if cut else "") + f"{r['label']}: test BPC {r['test_gap']:+.3f} vs "
             + ("the baseline at its full steps (what the shorter budget costs the baseline)" if cut
                else "the baseline"))
        if r.get("test_gap_ci95") is not None:
            s += interval(baseline_gap(r), r, base["label"], "gap_seeds" in r)
        pt, bt = (r.get("paper") or {}).get("test"), (base.get("paper") or {}).get("test")
        if pt is not None and bt is not None:
            s += f" (paper: {pt - bt:+.3f})"
        if r.get("speed_ratio"):
            s += f", {r['speed_ratio']:.2f}x the baseline's training tokens/s"
        if r.get("versus_gap") is not None:
            s += f"; {versus_phrase(r)}"
        s += "".join(f"; {x}" for x in claim_pairs(r, rows))
        out.append(s + ".")
    if lr_edge(base):
        out.append(f"**Caution: the baseline's best learning rate ({base['lr']}) is at the edge of the grid, so it "
                   "may be under-tuned and these gaps may overstate the difference.**")
    return " ".join(out) if out else ""



def figures_section(figures: dict[str, str] | None) -> list[str]:
    """``## Figures``: links to the interactive HTML figures, then the PNG images (``figures``: title ->
    relative path; none without figures)."""
    if not figures:
        return []
    lines = ["## Figures", ""]
    lines += [f"- [{title}]({rel}) (interactive plotly)" for title, rel in figures.items()
              if not rel.endswith(".png")]
    lines.append("")
    for title, rel in figures.items():
        if rel.endswith(".png"):
            lines += [f"![{title}]({rel})", ""]
    return lines
