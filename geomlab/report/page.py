"""The results page, ``docs/results.md``: the converged campaign regenerated from its committed run records
(:mod:`geomlab.report.records`), a verdict per paper claim (:data:`CLAIMS`, :func:`verdicts`), the budget
differences, the fair campaign's declared plan (:mod:`geomlab.report.plan`) and, as an appendix labelled a smoke
run, the quick 300-step report (:func:`results_page`; ``geomlab report --page`` writes it)."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The committed inputs of the page, relative to the repository root.
RECORDS = "docs/results/runs/converged/records.jsonl"
FAIR_RECORDS = "docs/results/runs/fair/records.jsonl"
BENCH = "docs/results/runs/converged/bench_train.json"
SMOKE = "docs/results/results.json"
PAGE = "docs/results.md"

#: Half-width (BPC) below which a difference counts as settled, and within which two models "match".
MARGIN = 0.02


@dataclass(frozen=True)
class Claim:
    """A paper's claim as a test on the campaign's rows: model ``arm`` minus ``against`` (default: the
    comparison's baseline) in test BPC, seed-paired (a claim against a control only the fair campaign
    trains is "not run" before it). ``rule``: ``"lower"`` (the model is ahead: supported when
    the 95% interval lies below 0, contradicted when above), ``"match"`` (supported when the interval lies
    within +-:data:`MARGIN`, contradicted when it excludes 0) or ``"not worse"`` (supported when its upper end
    is below +:data:`MARGIN`, contradicted when its lower end is above it); otherwise open."""

    paper: str
    text: str
    comparison: str
    arm: str
    against: str | None = None
    rule: str = "lower"
    caveat: str = ""


CLAIMS: tuple[Claim, ...] = (
    Claim("OSM", "OSMFormer beats the Transformer at ~100K on Tiny Shakespeare (2.464 vs 2.583 test BPC)",
          "ts-100k", "OSMFormer O(d), linear mixing"),
    Claim("OSM", "Linear mixing beats identity mixing (the ablation)", "ts-100k", "OSMFormer O(d), linear mixing",
          "OSMFormer O(d), identity mixing"),
    Claim("OSM", "OSM-RNN beats the LSTM at ~50K (2.539 vs 2.594 test BPC)", "ts-50k", "OSM-RNN O(d)"),
    Claim("OSM", "OSMFormer beats the Transformer on PTB characters (1.614 vs 1.664 test BPC)", "ptb-100k",
          "OSMFormer O(d), linear mixing"),
    Claim("CEM", "Tied CEM layers (T=1) match Llama at equal parameters", "cem-200k", "CEM T=1, shared diagonal",
          rule="match"),
    Claim("CEM", "Two recursion steps help (T=2 vs T=1)", "cem-200k", "CEM T=2, shared diagonal",
          "CEM T=1, shared diagonal"),
    Claim("CEM", "The shared diagonal is essential (T=2 with vs without)", "cem-200k", "CEM T=2, shared diagonal",
          "CEM T=2, no diagonal"),
    Claim("Grassmann", "Grassmann flows come close to attention (all offsets in every layer, 4 layers)",
          "grassmann-200k", "Grassmann (Gr(2, r), offsets 1..16)", rule="not worse"),
    Claim("Grassmann", "Grassmann flows come close to attention (one offset per layer, 6 layers)",
          "grassmann-200k", "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers", rule="not worse",
          caveat="confounded: 6 layers against the twin's 4, and the post-norm twin is unstable at lr >= 0.003 "
                 "with 2% warm-up; the fair campaign adds depth-matched and pre-norm twins"),
    Claim("Grassmann", "... against the depth-matched twin (6 layers, post-norm)", "grassmann-200k",
          "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers",
          "Same block with causal attention, 6 layers", rule="not worse"),
    Claim("Grassmann", "... against the depth-matched pre-norm twin (6 layers)", "grassmann-200k",
          "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers",
          "Same block with causal attention, pre-norm, 6 layers", rule="not worse"),
)


def paired(rows: dict[str, dict[str, Any]], arm: str, against: str, split: str) -> dict[str, Any] | None:
    """Seed-paired difference ``arm - against`` of the rows' per-seed ``split`` (``"test"``/``"valid"``) BPC:
    :func:`geomlab.report.aggregation.paired_gap` of the two rows named (``{"gap", "ci95", "seeds"}``, ``ci95``
    ``None`` below two seeds), ``None`` without both rows or a common seed."""
    from geomlab.report.aggregation import paired_gap

    return paired_gap(rows.get(arm), rows.get(against), split)


def verdict(gap: dict[str, Any] | None, rule: str) -> str:
    """``supported`` / ``contradicted`` / ``open`` of a :func:`paired` test gap under ``rule`` (:class:`Claim`)."""
    if gap is None or gap["ci95"] is None:
        return "open"
    lo, hi = gap["gap"] - gap["ci95"], gap["gap"] + gap["ci95"]
    if rule == "lower":
        return "supported" if hi < 0 else "contradicted" if lo > 0 else "open"
    if rule == "match":
        return "supported" if -MARGIN < lo and hi < MARGIN else "contradicted" if lo > 0 or hi < 0 else "open"
    return "supported" if hi < MARGIN else "contradicted" if lo > MARGIN else "open"


def claim_verdict(test: dict[str, Any] | None, valid: dict[str, Any] | None, rule: str) -> tuple[str, bool]:
    """The verdict of a claim from its :func:`paired` gaps: the test split's :func:`verdict` under ``rule``,
    except ``open`` where the validation split, read by the same rule, says the opposite (one split supports
    the claim, the other contradicts it). Returns ``(verdict, disagree)``, ``disagree`` True in that case.
    Source: design choice (a claim two held-out splits read in opposite ways is not settled by either)."""
    t = verdict(test, rule)
    if {t, verdict(valid, rule)} == {"supported", "contradicted"}:
        return "open", True
    return t, False


#: Why an interval gets its verdict, per rule and verdict (said beside a claim's gap in the reading).
REASONS: dict[str, dict[str, str]] = {
    "lower": {"supported": "the interval lies below 0", "contradicted": "the interval lies above 0",
              "open": "the interval spans 0"},
    "match": {"supported": f"the interval lies within ±{MARGIN}", "contradicted": "the interval excludes 0",
              "open": f"the interval spans 0 but reaches past ±{MARGIN}"},
    "not worse": {"supported": f"the upper end is below +{MARGIN}, all a \"close to\" claim asks",
                  "contradicted": f"the lower end is above +{MARGIN}", "open": f"the interval spans +{MARGIN}"},
}


def qualifiers(r: dict[str, Any]) -> str:
    """`` (provisional; test and validation disagree)``: what qualifies a verdict of :func:`readings` or
    :func:`verdicts` (empty when nothing does)."""
    q = ["provisional"] * bool(r.get("provisional")) + ["test and validation disagree"] * bool(r.get("disagree"))
    return f" ({'; '.join(q)})" if q else ""


def claim_words(r: dict[str, Any], rule: str) -> str:
    """"claim supported: the upper end is below +0.02, all a "close to" claim asks": the verdict of a reading
    ``r`` (:func:`readings`) in the claim's terms, with why (:data:`REASONS`), or which split says what where
    test and validation disagree."""
    if r.get("disagree"):
        t = verdict(r["test"], rule)
        return (f"claim {r['verdict']}{qualifiers(r)}: the test split alone would have it {t}, the validation "
                f"split {'contradicted' if t == 'supported' else 'supported'}")
    return f"claim {r['verdict']}{qualifiers(r)}: {REASONS[rule][r['verdict']]}"


def mark_claims(results: dict[str, Any]) -> None:
    """Give, in place, each row of ``results`` that a claim reads (:func:`readings`) ``claims``: ``{label of the
    row it is read against: claim_words}``, so the reading and the comparison sections state every claim's
    gap (:func:`geomlab.report.render_parts.claim_pairs`) in the claim's terms
    (:func:`geomlab.report.render_parts.judged`)."""
    for cl in CLAIMS:
        c = next((c for c in results["comparisons"] if c["key"] == cl.comparison), None)
        rows = {r["label"]: r for r in (c or {}).get("rows", [])}
        for r in readings(results, cl):
            if r["test"] is not None and r["test"]["ci95"] is not None:
                rows[r["arm"]].setdefault("claims", {})[r["against"]] = claim_words(r, cl.rule)


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per :data:`CLAIMS` item found in ``results`` (a collected campaign): the claim, the test and
    valid gaps with intervals, the equal-time gap the campaign measured, and the verdict
    (:func:`claim_verdict`: the test split's, open where the validation split says the opposite; ``disagree``
    then)."""
    out = []
    comps = {c["key"]: c for c in results["comparisons"]}
    for cl in CLAIMS:
        c = comps.get(cl.comparison)
        if c is None:
            continue
        rows = {r["label"]: r for r in c["rows"]}
        against = cl.against or next(r["label"] for r in c["rows"] if r["baseline"])
        test, valid = paired(rows, cl.arm, against, "test"), paired(rows, cl.arm, against, "valid")
        et = (rows.get(cl.arm) or {}).get("equal_time") if cl.against is None else None
        v, disagree = claim_verdict(test, valid, cl.rule)
        out.append({"claim": cl, "against": against, "test": test, "valid": valid,
                    "equal_time": et, "verdict": v, "disagree": disagree})
    return out


def equal_compute_pair(results: dict[str, Any], cl: Claim, measure: str) -> tuple[str, str] | None:
    """The two row labels read against each other for claim ``cl`` at equal compute in ``measure`` (``"CPU"``
    or ``"FLOPs"``) in the fair campaign's ``results``: the model's own schedule at the baseline's budget and
    the baseline, or the model and the baseline's schedule at the model's budget where the baseline is the
    costlier (:mod:`geomlab.report.plan`); ``None`` for an ablation or control claim, or a comparison without
    such arms."""
    c = next((c for c in results["comparisons"] if c["key"] == cl.comparison), None)
    if c is None or cl.against is not None:
        return None
    from geomlab.report.plan import sized_label

    base = next(r["label"] for r in c["rows"] if r["baseline"])
    sized = {sized_label(r["label"]): r["label"] for r in c["rows"]}
    mine = sized.get((cl.arm, measure, None))
    if mine:
        return mine, base
    theirs = sized.get((base, measure, cl.arm))
    return (cl.arm, theirs) if theirs else None


def readings(results: dict[str, Any], cl: Claim) -> list[dict[str, Any]]:
    """Every reading of claim ``cl`` in the fair campaign's ``results``: at equal steps, then (for a claim
    against the baseline) at equal CPU time and equal FLOPs; each ``{"reading", "arm", "against", "test",
    "valid", "verdict", "disagree", "provisional", "stepped"}`` with the :func:`paired` gaps of both splits
    (``None`` before a common seed), the verdict by the claim's rule (:func:`claim_verdict`; ``pending`` before
    a common seed), whether seeds are still to come for either row (provisional), and the rows whose lr a
    divergence stepped down. Empty when the comparison is not in ``results``."""
    from geomlab.report.aggregation import seeds_to_come

    c = next((c for c in results["comparisons"] if c["key"] == cl.comparison), None)
    if c is None:
        return []
    rows = {r["label"]: r for r in c["rows"]}
    base = next(r["label"] for r in c["rows"] if r["baseline"])
    pairs = [("equal steps", (cl.arm, cl.against or base))]
    pairs += [(f"equal {m}", equal_compute_pair(results, cl, m)) for m in ("CPU", "FLOPs")]
    out = []
    for name, pair in pairs:
        if pair is None:
            continue
        test, valid = paired(rows, *pair, "test"), paired(rows, *pair, "valid")
        short = any(seeds_to_come(rows[k]) for k in pair if k in rows)
        # a row whose seeds train below its tuned lr (a divergence stepped it down) reads at another recipe
        # than its tuning chose: said with its verdict
        stepped = [_stepped(rows[k], "the model" if k == pair[0] else k) for k in pair
                   if k in rows and rows[k].get("full_notes") and rows[k].get("lr") is not None
                   and rows[k].get("tuned_lr") not in (None, rows[k]["lr"])]
        v, disagree = claim_verdict(test, valid, cl.rule) if test else ("pending", False)
        out.append({"reading": name, "arm": pair[0], "against": pair[1], "test": test, "valid": valid,
                    "verdict": v, "disagree": disagree, "provisional": bool(test) and short, "stepped": stepped})
    return out


def _stepped(row: dict[str, Any], who: str) -> str:
    """"LSTM's seeds train at lr 0.022, stepped down from its tuned 0.046 after a seed diverged at 0.046", and
    how many of its seeds diverged at the final lr too (its step-downs spent)."""
    import re

    at = [m.group(1) for n in row["full_notes"] if (m := re.match(r"lr ([0-9.e+-]+) diverged at the full budget", n))
          and float(m.group(1)) > row["lr"]]  # (a divergence at the final lr is counted below)
    failed = len(row.get("failed_seeds") or [])
    return (f"{who}'s seeds train at lr {row['lr']:g}, stepped down from its tuned {row['tuned_lr']:g} after "
            + ("a seed diverged at " if len(at) == 1 else "seeds diverged at ") + " and ".join(at)
            + (f"; {failed} of its seeds diverged at {row['lr']:g} too" if failed else ""))


def fair_gaps(after: dict[str, Any]) -> list[str]:
    """``### Every gap``: per claim and reading (:func:`readings`) the seeds paired, the test and validation
    gaps with their 95% intervals and the verdict; then ``### Settings``: per comparison and model the tuned
    lr, warm-up, weight decay and dropout and the seeds finished of those planned."""
    from geomlab.report.render_parts import SEED_RULE

    lines = ["### Every gap", "",
             "Per claim, each reading of the fair campaign: equal steps (the papers' setting), equal CPU time and "
             "equal FLOPs (the costlier model on its own full schedule sized to the other's budget). Seed-paired "
             "differences in BPC, 95% intervals in brackets; negative: the claimed model is ahead. The verdict "
             "reads the test gap by the claim's rule (Verdict per paper claim, above), open where the validation gap "
             "says the opposite; pending until both rows share a seed, open below two, provisional while seeds "
             f"are still to come ({SEED_RULE}).", "",
             "| paper | claim | reading | model | against | seeds | test gap [95% CI] | valid gap [95% CI] | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for cl in CLAIMS:
        for r in readings(after, cl):
            n = (r["test"] or r["valid"] or {}).get("seeds", 0)
            lines.append(f"| {cl.paper} | {cl.text} | {r['reading']} | {r['arm']} | {r['against']} | {n} | "
                         f"{_gap(r['test'])} | {_gap(r['valid'])} | {r['verdict']}{qualifiers(r)}"
                         + _open_note(r)
                         + "".join(f"; {x}" for x in r["stepped"] if r["test"] is not None) + " |")
    lines += ["", "### Settings", "",
              "What the one rule chose for each model (lr and warm-up, then weight decay and dropout at them, kept "
              "when a divergence steps the lr down; "
              "— while its tuning runs) and its seeds: finished of those planned (the plan adds seeds until "
              "every gap settles; \"+ 1 earlier\": a seed finished at the row's settings before the seed rule "
              "settled on fewer, which the row counts too); the regularisation settings it tried at the tuning budget, with their "
              "validation BPC. The lr is the one the row's seeds train at, with the tuned one beside it where "
              "a divergence at the full budget stepped it down.", "",
              "| comparison | model | lr the seeds train at | warm-up | weight decay | dropout | seeds "
              "| regularisation tried (valid BPC) |",
              "|---|---|---|---|---|---|---|---|"]
    for c in after["comparisons"]:
        for r in c["rows"]:
            def num(k, pct=False):
                v = r.get(k, r.get(f"tuned_{k}"))  # the lr tuning's choice while the regularisation runs
                return "—" if v is None else f"{v:.0%}" if pct else f"{v:g}"
            lr = num("lr") + (f" (tuned {r['tuned_lr']:g})" if r.get("lr") is not None
                              and r.get("tuned_lr") not in (None, r["lr"]) else "")
            lines.append(f"| {c['key']} | {r['label']} | {lr} | {num('warmup', True)} | "
                         f"{num('weight_decay')} | {num('dropout')} | {_seed_count(r)}"
                         + (f" ({len(r['failed_seeds'])} diverged)" if r.get("failed_seeds") else "")
                         + f" | {_regs_tried(r, c.get('unigram_bpc'))} |")
    goal = next((r for c in after["comparisons"] if c["key"] == "ts-100k" for r in c["rows"]
                 if r["label"] == "OSMFormer O(d), linear mixing"), None)
    if goal and goal.get("test_mean") is not None and goal.get("goal"):
        lines += ["", f"The ~100K OSMFormer's mean test BPC under this rule is {goal['test_mean']:.3f} over "
                  f"{len(goal['seeds'])} seed(s): " + (f"below the project's {goal['goal']:.2f} goal." if goal["test_mean"] <
                  goal["goal"] else f"{goal['test_mean'] - goal['goal']:.3f} above the project's {goal['goal']:.2f} "
                  "goal.")]
    return lines + [""]


def _open_note(r: dict[str, Any]) -> str:
    """``; per seed ...`` (:func:`seed_gaps` of the test gap) beside a verdict of :func:`verdicts` or
    :func:`readings` that is open by its interval (not where test and validation disagree), else empty."""
    note = seed_gaps(r["test"]) if r["verdict"] == "open" and not r.get("disagree") else ""
    return f"; {note}" if note else ""


def _seed_count(row: dict[str, Any]) -> str:
    """``4 of 4`` (finished of the seeds the plan gives the row), ``+ 1 earlier`` for a seed finished at the
    row's settings before the seed rule settled on fewer."""
    planned = row.get("planned_seeds") or []
    seeds = row.get("seeds") or []
    extra = sum(s not in planned for s in seeds)
    return f"{len(seeds) - extra} of {len(planned)}" + (f" + {extra} earlier" if extra else "")


def _regs_tried(row: dict[str, Any], unigram: float | None = None) -> str:
    """``none 2.319; wd 0.01 2.324; dropout 0.1 diverged`` from a row's ``reg_tuning`` (a run without a
    validation BPC diverged; one near the ``unigram`` BPC marked, :func:`~geomlab.report.render_parts.bpc_cell`),
    with the row's ``reg_note``; ``—`` before the stage."""
    from geomlab.report.render_parts import bpc_cell

    tried = []
    for t in row.get("reg_tuning") or []:
        name = " + ".join([f"wd {t['weight_decay']:g}"] * bool(t["weight_decay"])
                          + [f"dropout {t['dropout']:g}"] * bool(t["dropout"])) or "none"
        tried.append(f"{name} {'diverged' if t['valid'] is None else bpc_cell(t['valid'], unigram)}")
    return "; ".join(tried + ([row["reg_note"]] if row.get("reg_note") else [])) or "—"


def _gap(g: dict[str, Any] | None) -> str:
    """A table cell of a :func:`paired` gap: ``-0.015 [-0.030, -0.0004]``, the interval's ends as
    :func:`~geomlab.report.render_parts.end` writes them; ``—`` without a gap."""
    from geomlab.report.render_parts import end

    if g is None:
        return "—"
    if g["ci95"] is None:
        return f"{g['gap']:+.3f} ({g['seeds']} seed)"
    return f"{g['gap']:+.3f} [{end(g['gap'] - g['ci95'])}, {end(g['gap'] + g['ci95'])}]"


def seed_gaps(g: dict[str, Any] | None) -> str:
    """"per seed +0.252, +0.264, +0.507 (behind on every seed; 3 seeds give a wide interval)": the per-seed
    differences of a :func:`paired` gap in seed order, said beside an open verdict so that one outlying seed is
    visible; where every seed's difference has the same sign but the interval spans 0 (few seeds), that is said
    too; the verdict stays the interval's. Empty below two seeds. Source: design choice."""
    d = (g or {}).get("per_seed") or []
    if len(d) < 2 or g["ci95"] is None:
        return ""
    s = "per seed " + ", ".join(f"{x:+.3f}" for x in d)
    lo, hi = g["gap"] - g["ci95"], g["gap"] + g["ci95"]
    if lo <= 0 <= hi and (all(x > 0 for x in d) or all(x < 0 for x in d)):
        side = "behind" if d[0] > 0 else "ahead"
        s += f" ({side} on every seed; {len(d)} seeds give a wide interval)"
    return s


def verdict_table(results: dict[str, Any], after: dict[str, Any] | None = None) -> list[str]:
    """``## Verdict per paper claim``: the table of :func:`verdicts` of the converged ``results`` (before) and
    of the fair campaign's ``after`` (equal steps, and the test gap at equal CPU time and equal FLOPs; pending
    while it has no records), and how to read it."""
    from geomlab.report.render_parts import SEED_RULE

    lines = ["## Verdict per paper claim", "",
             "Model minus the model it is read against, in bits per character, seed-paired over the converged "
             "campaign's 3 seeds, with the 95% interval in brackets; **negative: the claimed model is ahead**. The "
             "verdict reads the test split at equal steps (the papers' setting: equal parameters, each model "
             "trained to the same number of steps): *supported* when the interval lies on the claim's side, "
             f"*contradicted* when it lies on the other, *open* when it spans both (a \"match\" claim needs the "
             f"interval within ±{MARGIN} BPC; \"close to attention\" needs its upper end below +{MARGIN}). The "
             "validation split, read by the same rule, can only withhold a verdict, for every claim: where it says "
             "the opposite of the test split (one supports the claim, the other contradicts it) the verdict is "
             "*open* (test and validation disagree); this rule was added once the fair campaign's first verdicts "
             "were in, and makes no verdict firmer. The "
             "equal-time column is the converged campaign's reading at the shorter run's training time, which "
             "catches the slower model mid-schedule (see Budget differences); the fair campaign below replaces it "
             "with equal-compute runs. \"After\" is the fair campaign's verdict by the same rule with its test gap, "
             "at equal steps, then at equal CPU time and at equal FLOPs (Every gap, below, has the validation gaps): "
             "pending until both rows share a seed, open below two, and *provisional* while seeds are still to "
             f"come ({SEED_RULE}); a validation gap whose interval excludes "
             "zero on the other side is given beside it, and so is a row whose seeds train at a lower lr than its "
             "tuning chose (a divergence at the full budget stepped it down; Settings, below; said once a row, in "
             "the first cell it applies to). "
             "A verdict open because its interval spans the claim's bound has its per-seed test gaps beside it, "
             "in seed order, so that one outlying seed shows, and says so where every seed falls on one side while "
             "the interval spans 0 (one open because test and validation disagree has the validation gap "
             "instead).", "",
             "| paper | claim | against | test gap [95% CI] | valid gap [95% CI] | equal time (valid) | verdict "
             "before | after | after, equal CPU | after, equal FLOPs |", "|---|---|---|---|---|---|---|---|---|---|"]
    before = {v["claim"]: v for v in verdicts(results)}
    for cl in CLAIMS:
        v = before.get(cl)
        if v is not None and v["test"] is not None:
            et = f"{v['equal_time']['gap']:+.3f}" if v["equal_time"] else "—"
            cells = [v["against"], _gap(v["test"]), _gap(v["valid"]), et,
                     f"**{v['verdict']}**{qualifiers(v)}" + (f" ({cl.caveat})" if cl.caveat else "")
                     + _open_note(v)]
        else:
            cells = [cl.against or "the baseline", "—", "—", "—", "not run (a control of the fair campaign)"]
        got = {r["reading"]: r for r in (readings(after, cl) if after else [])}
        seen: set[str] = set()  # a step-down is said once a row, in the first cell it applies to

        def said(reading: str) -> str:
            r = got.get(reading)
            if r is None or r["test"] is None:
                return "pending"
            v = r["valid"]  # a validation gap that excludes zero on the other side is said beside the verdict
            other = (v is not None and v["ci95"] is not None and v["gap"] * r["test"]["gap"] < 0
                     and abs(v["gap"]) > v["ci95"])
            notes = [x for x in r["stepped"] if x not in seen]
            seen.update(notes)
            return (f"**{r['verdict']}**{qualifiers(r)} {_gap(r['test'])}" + _open_note(r)
                    + (f"; valid {_gap(v)}, the other way" if other else "") + "".join(f"; {x}" for x in notes))

        steps = said("equal steps")
        # an ablation or a control: the equal-compute arms are read against the baseline
        eq = ["—", "—"] if cl.against is not None else [said("equal CPU"), said("equal FLOPs")]
        lines.append(f"| {cl.paper} | {cl.text} | " + " | ".join([*cells, steps, *eq]) + " |")
    rows = {(c["key"], r["label"]): r for c in results["comparisons"] for r in c["rows"]}
    goal = rows.get(("ts-100k", "OSMFormer O(d), linear mixing"))
    if goal and goal.get("test_mean") is not None and goal.get("goal"):
        reached = goal["test_mean"] < goal["goal"]
        lines += ["", f"The ~100K OSMFormer's mean test BPC is {goal['test_mean']:.3f}: "
                  + (f"below the project's {goal['goal']:.2f} goal (test BPC at ~100K parameters)." if reached else
                     f"{goal['test_mean'] - goal['goal']:.3f} above the project's {goal['goal']:.2f} goal (test BPC "
                     "at ~100K parameters; no regularisation; "
                     "the fair campaign tunes weight decay and, where the model has it, dropout).")]
    return lines + [""]


def cpu_sizing(after: dict[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    """Per equal-CPU arm of the fair campaign (``(comparison key, arm label)``, the arm as
    :func:`geomlab.report.plan.sized_label` reads it): ``costlier``, the model it was sized as the costlier
    (the one cut to the other's budget); ``declared``, that model's CPU seconds per step over the baseline's as
    declared before the runs (:data:`geomlab.report.plan.SIZING`); ``measured``, the same ratio from the fair
    campaign's collected ``after`` (its own, uncut row and the baseline's: the mean over their finished
    full-length seeds of ``cpu_s / steps``; ``None`` until both have one); ``runs``, those seeds' counts
    (model, baseline); ``against``: True where the two ratios order the model and the baseline differently
    (one above 1, the other below), so that the arm cut to the other's budget was the cheaper one by the fair
    runs' own measure and trained fewer steps than equal CPU would have given it. Source: design choice."""
    from geomlab.report.aggregation import mean
    from geomlab.report.plan import FAIR, SIZING, sized_label

    rows = {(c["key"], r["label"]): r for c in (after or {}).get("comparisons", []) for r in c["rows"]}
    out = {}
    for comp in FAIR.comparisons():
        base = next(a.label for a in comp.arms if a.baseline)
        for arm in comp.arms:
            sized = sized_label(arm.label)
            if not sized or sized[1] != "CPU":
                continue
            costlier, model = sized[0], sized[2] or sized[0]  # the model read against the baseline
            s, b = SIZING.get(f"{comp.key} / {model}"), SIZING.get(f"{comp.key} / {base}")
            if s is None or b is None:
                continue

            def rates(label):
                r = rows.get((comp.key, label)) or {}
                return [c / r["steps"] for c in r.get("cpu_s") or [] if c]

            mine, theirs = rates(model), rates(base)
            measured = mean(mine) / mean(theirs) if mine and theirs else None
            declared = s[0] / b[0]
            out[(comp.key, arm.label)] = {
                "costlier": costlier, "model": model, "declared": declared, "measured": measured,
                "runs": (len(mine), len(theirs)),
                "against": measured is not None and (declared > 1) != (measured > 1)}
    return out


#: How far (relative) a measured CPU ratio may lie from the declared one before the page says which way the
#: equal-CPU sizing leans (design choice: the spread of one arm's CPU seconds per step between runs on this
#: shared machine is a few percent).
SIZING_TOLERANCE = 0.05


def _sizing_note(c: dict[str, Any]) -> str:
    """What the fair runs measured beside an equal-CPU arm's declared ratio (:func:`cpu_sizing`), and, where
    the two differ by more than :data:`SIZING_TOLERANCE`, which way the sizing leans: a measured ratio (the
    model's cost over the baseline's) below the declared one means the model was short-changed (cut, it trained
    fewer steps than equal CPU by this measure gives; or the baseline, cut, trained more), so the equal-CPU
    reading is conservative against the model; above it, the reading favours the model."""
    out = f"CPU cost per step over the baseline's: {c['declared']:.2f} declared"
    if c["measured"] is None:
        return out + ", not yet measured by the fair campaign's runs"
    out += (f", {c['measured']:.2f} measured by the fair campaign's full-length runs ({c['runs'][0]} and "
            f"{c['runs'][1]} seeds)")
    if abs(c["measured"] / c["declared"] - 1) <= SIZING_TOLERANCE:
        return out
    short = c["measured"] < c["declared"]  # the model is cheaper than declared
    cut = "the model" if c["costlier"] == c["model"] else "the baseline"
    fewer = short == (cut == "the model")
    flip = (f"{cut}, sized as the costlier, is the cheaper by this measure, and " if c["against"] else "")
    return (out + f": {flip}{cut} trained {'fewer' if fewer else 'more'} steps than equal CPU by this measure "
            f"would have given it, so this equal-CPU reading {'is conservative against' if short else 'favours'} "
            "the model")


def budget_table(results: dict[str, Any] | None = None, after: dict[str, Any] | None = None) -> list[str]:
    """``## Budget differences``: per comparison, each model's cost per training step against its baseline's in
    CPU seconds and FLOPs (:data:`geomlab.report.plan.SIZING`), the rows where the converged report's ``results``
    (its full-length seeds' CPU speed) orders a model and its baseline the other way, and the steps the fair
    campaign gives it at equal compute, each equal-CPU arm with the ratio the fair campaign's ``after``
    measured next to the declared one (:func:`cpu_sizing`)."""
    from geomlab.report.plan import FAIR, SIZING

    lines = ["## Budget differences", "",
             "Every converged row trained the same steps (10,000; Grassmann, CEM and the scaling rows 5,000) at "
             "batch 32 x 128: equal steps and equal parameters, not equal compute. One training step costs:", "",
             "| comparison | model | CPU s/step | GFLOPs/step | CPU ratio | FLOPs ratio |", "|---|---|---|---|---|---|"]
    for comp in FAIR.comparisons():
        base = next(a for a in comp.arms if a.baseline)
        b = SIZING.get(f"{comp.key} / {base.label}")
        for arm in comp.arms:
            s = SIZING.get(f"{comp.key} / {arm.label}")
            if s is None or b is None:
                continue
            lines.append(f"| {comp.key} | {arm.label}{' (baseline)' if arm is base else ''} | {s[0]:.3f} | "
                         f"{s[1]:.2f} | {s[0] / b[0]:.2f} | {s[1] / b[1]:.2f} |")
    lines += ["", "CPU seconds per step as the converged campaign measured them (one thread per run, two runs on a "
              "shared 2-core machine); FLOPs per step counted by `torch.utils.flop_counter` on the row's model "
              "(forward and backward; `geomlab.report.flops`). The two measures disagree where a model's work "
              "is not matrix products (the OSM exponentials, the Grassmann Plücker coordinates) or where "
              "attention's T x T products dominate (the attention twin costs more FLOPs than the Grassmann "
              "model, but less CPU time).", ""]
    speed = {(c["key"], r["label"]): r.get("cpu_speed_ratio") for c in (results or {}).get("comparisons", [])
             for r in c["rows"]}
    flips = []
    for comp in FAIR.comparisons():
        base = next(a for a in comp.arms if a.baseline)
        for arm in comp.arms:
            s, b, v = (SIZING.get(f"{comp.key} / {arm.label}"), SIZING.get(f"{comp.key} / {base.label}"),
                       speed.get((comp.key, arm.label)))
            if s and b and v and arm is not base and (s[0] > b[0]) == (v > 1):
                flips.append(f"{arm.label} ({comp.key}): {s[0] / b[0]:.2f} here, {1 / v:.2f} there")
    if flips:
        lines += ["These CPU seconds are the mean over all of a row's converged runs, its short tuning runs included; "
                  "the converged table's \"speed vs baseline (CPU)\" reads its full-length seeds only. The two "
                  "order a model and its baseline differently where they cost nearly the same "
                  "(CPU cost over the baseline's: " + "; ".join(flips) + "); the fair campaign sizes by the "
                  "figures above, declared before its runs, and each equal-CPU arm below has the ratio its own "
                  "runs measure beside the declared one.", ""]
    lines += ["Equal compute in the fair campaign: the costlier model (by the declared figures above) also trains "
              "its own full schedule sized to the other's budget:", ""]
    checks = cpu_sizing(after)
    lines += [f"- {c} / {a}" + (f" ({_sizing_note(checks[(c, a)])})" if (c, a) in checks else "")
              for (c, a), _ in FAIR.arm_steps]
    return lines + [""]


def plan_section(workers: int = 2) -> list[str]:
    """``## The fair campaign``: the declared rule (:mod:`geomlab.report.plan`'s docstring) and the CPU-hour
    estimate per block."""
    from geomlab.report import plan

    doc = plan.__doc__.split("The rule, the same for every model and baseline:")[1].split("Source:")[0].strip()
    return ["## The fair campaign (declared before its runs)", "",
            "The converged campaign left these open: equal time that catches the slower model mid-schedule, a "
            "confounded Grassmann win, gaps not separated from zero at 3 seeds, no regularisation, a half-decade "
            "lr grid, CEM stopped at 5,000 steps. The plan, in code as `geomlab.report.plan.FAIR` (a campaign spec "
            "like the converged one), fixed before any of its runs:", "",
            "The rule, the same for every model and baseline:", "", doc, "",
            "Cost per block (`geomlab report --campaign fair --dry-run`):", "",
            *plan.estimate_table(plan.estimate(), workers), "",
            "No GPU was available to the session that declared this plan: the runs are planned for the CPU, two at "
            "a time at the lowest priority, resumable (Reproduce, below). `geomlab bench device` times "
            "the models on a GPU where there is one.", ""]


def plan_growth(after: dict[str, Any]) -> dict[str, int]:
    """How the runs planned so far in the fair campaign's collected ``after`` (``progress["planned"]``) follow
    from the cost table's count before any run (:func:`geomlab.report.plan.first_runs`, summed: ``estimate``):
    ``waiting``, the regularisation runs of arms whose lr is still being tuned (they join once it is);
    ``widened``, the lr runs beyond each arm's grid (a grid widened while its best lr sat on an edge);
    ``seeds``, the seeds beyond the first ones (the seed rule added them; negative for an arm whose every lr
    diverged, which plans none); ``first_seeds``, the seeds every comparison starts with.
    ``planned == estimate - waiting + widened + seeds`` by construction."""
    from geomlab.report.plan import FAIR, first_runs

    arms = {(c.key, a.label): a for c in FAIR.comparisons() for a in c.arms}
    out = {"estimate": 0, "waiting": 0, "widened": 0, "seeds": 0, "planned": 0, "first_seeds": len(FAIR.seeds)}
    for c in after["comparisons"]:
        for r in c["rows"]:
            n_lr, n_regs, n_seeds = first_runs(FAIR, c["key"], arms[(c["key"], r["label"])])
            tuned = r.get("tuned_lr") is not None  # its regularisation runs are planned once its lr is tuned
            out["estimate"] += n_lr + n_regs + n_seeds
            out["waiting"] += 0 if tuned else n_regs
            out["widened"] += r["tuning_planned"] - (n_regs if tuned else 0) - n_lr
            out["seeds"] += len(r["planned_seeds"]) - n_seeds
            out["planned"] += r["tuning_planned"] + len(r["planned_seeds"])
    return out


def growth_sentence(g: dict[str, int], table: str = "The cost table above") -> str:
    """The sentence that takes the cost table's run count to the count planned so far (``g``:
    :func:`plan_growth`'s counts); ``table``: how the sentence names the cost table (the results page's "above",
    ``geomlab report --collect``'s `--dry-run` table). Design choice."""
    def term(n: int, what: str) -> str:
        return f" {'+' if n > 0 else '−'} {abs(n)} {what}" if n else ""

    return (f"{table} counts every arm's lr x warm-up grid, its regularisation runs and "
            f"{g['first_seeds']} seeds, "
            f"{g['estimate']} runs; the {g['planned']} planned so far are {g['estimate']}"
            + term(-g["waiting"], "regularisation runs of arms still tuning their lr (they join once it is tuned)")
            + term(g["widened"], "lr runs where a grid widened")
            + term(g["seeds"], "seeds the seed rule added" if g["seeds"] > 0 else "seeds of arms whose every lr "
                   "diverged") + ".")


def fair_runs(after: dict[str, Any] | None) -> list[str]:
    """``## The fair campaign's runs``: its reading and one section per comparison, from its records (nothing
    before it has any)."""
    if after is None:
        return []
    from geomlab.report.render_converged import converged_comparison, most_seeds, reading

    pr = after["progress"]
    unused = pr.get("stored", pr["done"]) - pr["done"]
    lines = ["## The fair campaign's runs", "",
             (f"As of {pr['latest']} (the last run's end), " if pr.get("latest") else "")
             + f"{pr['done']} of the {pr['planned']} runs planned so far are done (trained to their end, or diverged: "
             "a divergence is an outcome the rule reads). The plan grows as it goes: an "
             "arm's regularisation runs join it once its lr is tuned, its lr grid widens while the best lr sits on "
             "an edge, and a comparison gets seeds until its gaps settle. " + growth_sentence(plan_growth(after))
             + " A row counts every seed finished at its final settings, also one the seed rule no longer asks "
             "for (finished before the rule settled on fewer seeds): no finished seed is left out after the fact."
             + (f" The records hold {unused} more {'run' if unused == 1 else 'runs'} the rule does not use now: "
                "their settings lost a "
                "later stage (a regularisation setting won, or the lr stepped down after a divergence) or wait on "
                "one still pending." if unused else ""), "",
             *fair_gaps(after), *_deeper(reading(after))]
    for c in after["comparisons"]:
        lines += _deeper(converged_comparison(c, most_seeds(after)))
    return lines


def _deeper(lines: list[str]) -> list[str]:
    """``lines`` with every Markdown heading one level deeper."""
    return ["#" + ln if ln.startswith("#") else ln for ln in lines]


def _demote(md: str, title: str) -> list[str]:
    """``md``'s lines with every heading one level deeper and its title replaced by ``title``."""
    lines = md.splitlines()
    out = [f"## {title}"] if lines and lines[0].startswith("# ") else []
    for ln in lines[1:] if out else lines:
        out.append("#" + ln if ln.startswith("#") else ln)
    return out


#: The heading of the smoke run's appendix.
SMOKE_TITLE = "Appendix: smoke run (300 steps, 1 seed; not a reproduction)"


def smoke_markdown(root: Path, smoke: dict[str, Any]) -> str:
    """The 300-step run's report as :func:`geomlab.report.output.write_report` renders it beside ``docs/results.md``
    (its figure links, the longer runs next to it, the bundled zoo's cards)."""
    from geomlab.report.figures import figures_for
    from geomlab.report.output import figure_links, with_context
    from geomlab.report.render import render_markdown

    out = root / PAGE
    figs = figures_for(smoke)
    pngs = {n: out.parent / "results" / f"{n}.png" for n in figs if (out.parent / "results" / f"{n}.png").is_file()}
    return render_markdown(with_context(smoke, out), figure_links(figs, pngs))


def results_page(root: str | Path = ".") -> str:
    """The Markdown of ``docs/results.md`` from the committed files under ``root``: :data:`RECORDS` (loaded into
    a temporary store and collected with the converged campaign), :data:`BENCH` and :data:`SMOKE`. The same
    files give the same page. Raises :class:`geomlab.report.records.RecordsError` for an unreadable records
    file and ``OSError`` for a missing input."""
    from geomlab.report.campaign import CONVERGED
    from geomlab.report.records import load_records, read_records
    from geomlab.report.render_converged import (
        converged_comparison, converged_protocol, most_seeds, reading, speed_alone,
    )
    from geomlab.report.results import collect
    from geomlab.report.store import RunStore

    from geomlab.report.plan import FAIR

    root = Path(root)

    def collected(path: Path, campaign):
        head, runs = read_records(path)
        with tempfile.TemporaryDirectory(prefix="geomlab-records-") as tmp:
            store = RunStore(tmp)
            load_records(runs, store)
            return head.get("meta") or {}, runs, collect(campaign, store, corpora=(head.get("meta") or {}).get(
                "corpora") or {})

    meta, runs, results = collected(root / RECORDS, CONVERGED)
    after = collected(root / FAIR_RECORDS, FAIR)[2] if (root / FAIR_RECORDS).is_file() else None
    for res in (results, after) if after else (results,):
        mark_claims(res)
    results["progress"] = {"done": len(runs), "planned": len(runs)}
    bench = json.loads((root / BENCH).read_text(encoding="utf-8"))
    results["speed_alone"] = bench
    smoke = json.loads((root / SMOKE).read_text(encoding="utf-8"))
    lines = ["# geomlab results", "",
             f"The converged campaign: {len(runs)} run records (tuning, full and diverged runs), {meta.get('cpu_hours', 0):.1f} CPU hours on "
             f"{meta.get('machine', 'a 2-core CPU machine')}, finished {meta.get('finished', '')}; each model's lr "
             "(and warm-up where searched) tuned by one rule, 3 seeds, full valid and test splits. This page is "
             f"regenerated from the runs' records (`{RECORDS}`, one JSON line per run) by `geomlab report --page`; a "
             "test checks that it matches. Its own report with figures: "
             "[results/runs/converged/results.md](results/runs/converged/results.md). The 300-step run at the end "
             "is a **smoke run**, not a result.", "",
             *verdict_table(results, after), *budget_table(results, after), *plan_section(), *fair_runs(after),
             "## The converged campaign", "", *_deeper(reading(results)), *_deeper(converged_protocol(results)),
             "### Language modelling", ""]
    for c in results["comparisons"]:
        lines += _deeper(converged_comparison(c, most_seeds(results)))
    lines += _deeper(speed_alone(bench))
    lines += ["## Reproduce", "", "```bash",
              "# the page from the committed records",
              "python -m geomlab report --page",
              "# the fair campaign: its plan and cost, then its runs through submitit (2 at a time, nice 19);",
              "# stop it at will and run the same command again: every run resumes from its checkpoint",
              "python -m geomlab report --campaign fair --dry-run --workers 2",
              "mkdir -p runs && GEOMLAB_DATA_DIR=../shared/data setsid nohup python -m geomlab report --campaign fair \\",
              "    --store runs/fair --workers 2 --threads 1 --records runs/fair/records.jsonl > runs/fair.log 2>&1 &",
              "# a new machine, or one lent for a few hours: go on from the committed records, and start only the",
              "# runs expected to end within the hours (the rest wait for the next time)",
              f"GEOMLAB_DATA_DIR=../shared/data python -m geomlab report --campaign fair --store runs/fair --restore "
              f"{FAIR_RECORDS} --hours 3 --workers 2 --threads 1 --records runs/fair/records.jsonl",
              "# on a SLURM cluster, from the login node: the same campaign, one job per run",
              "python -m geomlab report --campaign fair --store runs/fair --executor slurm --slurm-partition cpu "
              "--workers 64",
              "# the report of what finished so far, and this page with the fair campaign's verdicts",
              "python -m geomlab report --campaign fair --collect --store runs/fair --records runs/fair/records.jsonl",
              f"mkdir -p {Path(FAIR_RECORDS).parent} && cp runs/fair/records.jsonl {FAIR_RECORDS}",
              "python -m geomlab report --page",
              "```", ""]
    lines += _demote(smoke_markdown(root, smoke), SMOKE_TITLE)
    return "\n".join(ln.rstrip() for ln in lines).rstrip() + "\n"
