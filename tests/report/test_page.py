"""docs/results.md read as a reviewer reads it: every number once (the reading gives each claim's gap as the
verdict tables do, in the claim's terms), the baseline cut to another model's budget labelled a budget check,
the verdict rule when test and validation disagree, and the run counts of the cost table and the status line
adding up. The committed page is the one the command writes (test_fair.py), so the
page-wide checks read it directly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs/results.md").read_text(encoding="utf-8")


def _section(md: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    start = md.index(heading) + len(heading)
    nxt = re.search(r"^#+ ", md[start:], flags=re.M)
    return md[start:start + nxt.start()] if nxt else md[start:]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.split("|")[1:-1]]


def _row(label, seeds, test, valid=None, baseline=False, **kw):
    return {"label": label, "baseline": baseline, "seeds": seeds, "planned_seeds": seeds, "test": test,
            "valid": valid if valid is not None else test, "test_mean": sum(test) / len(test),
            "valid_mean": sum(valid if valid is not None else test) / len(test), "tokens_per_s_mean": None,
            "tokens_per_cpu_s": None, "failed_seeds": [], **kw}


# ------------------------------------------------------------------------------------------ one number each
def test_a_gap_against_another_arm_pairs_the_seeds_both_finished():
    """A model read against another arm (``versus``) that finished fewer seeds: the gap and its interval over
    the seeds both finished, the same numbers as the verdict's :func:`~geomlab.report.page.paired`, not the
    difference of the means over different seeds with "no interval yet"."""
    from geomlab.report.aggregation import compare_to_baseline, compare_to_versus
    from geomlab.report.page import paired
    from geomlab.report.render_parts import versus_phrase

    arm = _row("Grassmann", [0, 1, 2], [1.836, 1.839, 1.835], versus="Twin, 6 layers")
    twin = _row("Twin, 6 layers", [0, 1], [1.904, 1.914])
    base = _row("Twin", [0, 1, 2], [1.850, 1.853, 1.852], baseline=True)
    rows = [arm, base, twin]
    compare_to_baseline(rows)
    compare_to_versus(rows)
    g = paired({r["label"]: r for r in rows}, "Grassmann", "Twin, 6 layers", "test")
    assert g["seeds"] == 2 and g["ci95"] is not None
    assert arm["versus_gap"] == pytest.approx(g["gap"]) and arm["versus_gap_ci95"] == pytest.approx(g["ci95"])
    lo, hi = g["gap"] - g["ci95"], g["gap"] + g["ci95"]
    assert versus_phrase(arm) == (f"{g['gap']:+.3f} test BPC against Twin, 6 layers (95% CI {lo:+.3f} to "
                                  f"{hi:+.3f} over 2 seeds both finished)")


def test_one_phrase_states_a_gaps_interval():
    """:func:`~geomlab.report.render_parts.interval`: the interval with its seeds, "both finished" for rows that
    finished different seeds, the claim's words or "not distinguishable", and the seed count alone below two
    seeds; the verdict's sentence ends with it."""
    from geomlab.report.render_parts import interval, verdict

    g = {"gap": -0.09, "ci95": 0.05, "seeds": 3}
    assert interval(g, {}, "B", False) == " (95% CI -0.140 to -0.040 over 3 seeds)"
    assert interval(g, {"claims": {"B": "claim supported: why"}}, "B", True) == (
        " (95% CI -0.140 to -0.040 over 3 seeds both finished; claim supported: why)")
    assert interval({**g, "ci95": 0.1}, {}, "B", False) == (
        " (95% CI -0.190 to +0.010 over 3 seeds: not distinguishable)")
    assert interval({**g, "ci95": None, "seeds": 1}, {}, "B", False) == " (1 seed, no interval yet)"
    arm = _row("A", [0, 1, 2], [2.41, 2.40, 2.42], test_gap=-0.09, test_gap_ci95=0.05, gap_seeds=3)
    base = _row("B", [0, 1, 2], [2.5, 2.5, 2.5], baseline=True)
    assert verdict({"rows": [arm, base]}).startswith(
        "A: test BPC -0.090 vs the baseline (95% CI -0.140 to -0.040 over 3 seeds both finished)")


def test_the_reading_states_every_claims_gap_as_the_verdict_tables_do():
    """Each gap of the fair campaign's Every gap table (a claim's reading with an interval) appears in the
    reading with the same interval and verdict, in the claim's terms: never "not distinguishable" beside a
    claim's verdict (a "close to" claim is supported by an interval that spans 0 below +0.02)."""
    from geomlab.report.page import CLAIMS
    from geomlab.report.protocol import COMPARISONS

    text = _section(PAGE, "### Reading (what the finished runs say so far)")
    waiting = next((ln for ln in text.splitlines() if ln.startswith("No result yet: ")), "")
    bullets = [ln for ln in text.splitlines() if ln.startswith("  - ")]
    claims = {cl.text: cl for cl in CLAIMS}
    checked = 0
    for ln in _section(PAGE, "### Every gap").splitlines():
        if not ln.startswith("| ") or ln.startswith("| paper") or "[" not in ln:
            continue
        _, claim, _, model, against, _, test, _, verdict = _cells(ln)
        if COMPARISONS[claims[claim].comparison].title in waiting:
            continue
        g, lo, hi = re.fullmatch(r"([+-][\d.]+) \[([+-][\d.]+), ([+-][\d.]+)\]", test).groups()
        said = f"claim {verdict.split(';')[0]}"
        found = [b for b in bullets if model in b and against in b or b.startswith(f"  - {model}: ")]
        windows = [b[i:i + 400] for b in found for i in [m.start() for m in re.finditer(re.escape(f"{g} test BPC"), b)]]
        assert any(f"95% CI {lo} to {hi}" in w and said in w and "not distinguishable" not in w.split(said)[0]
                   for w in windows), (claim, model, against, test, verdict)
        checked += 1
    assert checked >= 1


# ------------------------------------------------------------------------------------------ budget checks
def test_a_baseline_cut_to_a_models_budget_is_a_budget_check_not_a_claims_gap():
    """The baseline trained on a schedule cut to another model's budget reads, in the reading, as that model
    against it (the equal-compute gap) and, labelled a budget check, the cut baseline against the baseline at
    its full steps; the section's sentence labels it the same way."""
    from geomlab.report.aggregation import compare_to_baseline
    from geomlab.report.render_converged import reading
    from geomlab.report.render_parts import verdict

    cut = "Twin at the CPU budget of Grassmann (4,760 steps)"
    rows = [_row("Grassmann", [0, 1], [2.10, 2.12]), _row("Twin", [0, 1], [1.85, 1.86], baseline=True),
            _row(cut, [0, 1], [1.855, 1.87])]
    compare_to_baseline(rows)
    c = {"key": "g", "title": "T", "claim": "", "steps": 5_000, "rows": rows}
    lines = reading({"comparisons": [c]})
    assert not any(ln.startswith(f"  - {cut}:") for ln in lines)
    claim = next(ln for ln in lines if ln.startswith(f"  - Grassmann against {cut}: "))
    assert claim.startswith(f"  - Grassmann against {cut}: +0.248 test BPC at equal CPU (95% CI ")
    check = next(ln for ln in lines if ln.startswith("  - Budget check, not a claim's gap: "))
    assert check.startswith(f"  - Budget check, not a claim's gap: {cut} against the baseline at its full 5,000 "
                            "steps (what the shorter budget costs the baseline): +0.008 test BPC (95% CI ")
    assert "budget check (what the shorter budget costs the baseline), not a claim's gap" in "\n".join(lines)
    assert f"Budget check, not a claim's gap: {cut}: test BPC +0.008 vs the baseline at its full steps" in verdict(c)
    # an arm on its own schedule sized to the baseline's budget is a claim's equal-compute reading, as before
    rows[2]["label"] = "Grassmann at the baseline's CPU budget (4,660 steps)"
    lines = reading({"comparisons": [c]})
    assert any(ln.startswith("  - Grassmann at the baseline's CPU budget (4,660 steps): +0.008 test BPC at equal "
                             "CPU") for ln in lines) and not any("Budget check" in ln for ln in lines)


# ------------------------------------------------------------------------------------------ the verdict rule
def test_a_claim_whose_test_and_validation_splits_disagree_is_open():
    """The test split's verdict, except open where the validation split, read by the same rule, says the
    opposite: the verdict cell says why and keeps the validation gap and the row's stepped-down lr beside it;
    the page states the rule."""
    from geomlab.report.page import CLAIMS, claim_verdict, verdict_table

    g = lambda m, h: {"gap": m, "ci95": h, "seeds": 5}  # noqa: E731
    assert claim_verdict(g(-0.041, 0.022), g(0.054, 0.017), "lower") == ("open", True)
    assert claim_verdict(g(0.087, 0.04), g(0.26, 0.01), "lower") == ("contradicted", False)
    assert claim_verdict(g(-0.041, 0.022), g(0.01, 0.02), "lower") == ("supported", False)  # valid open: kept
    assert claim_verdict(g(-0.041, 0.08), g(0.054, 0.017), "lower") == ("open", False)
    assert claim_verdict(g(-0.015, 0.015), g(0.05, 0.02), "not worse") == ("open", True)
    assert claim_verdict(g(-0.015, 0.015), g(0.01, 0.005), "not worse") == ("supported", False)

    cl = next(c for c in CLAIMS if c.comparison == "ts-50k")
    notes = ["lr 0.046 diverged at the full budget (seed 4, step 6,372): the seeds train at 0.022"]
    seeds = [0, 1, 2]
    after = {"comparisons": [{"key": "ts-50k", "rows": [
        _row(cl.arm, seeds, [2.50, 2.51, 2.52], [2.33, 2.32, 2.325]),
        _row("LSTM", seeds, [2.54, 2.555, 2.55], [2.27, 2.265, 2.27], baseline=True, lr=0.022, tuned_lr=0.046,
             full_notes=notes)]}]}
    row = next(ln for ln in verdict_table({"comparisons": []}, after) if ln.startswith("| OSM | OSM-RNN beats"))
    cell = _cells(row)[7]
    assert cell.startswith("**open** (test and validation disagree) -0.038 [")
    assert "; valid +0.057 [" in cell and cell.endswith(
        "the other way; LSTM's seeds train at lr 0.022, stepped down from its tuned 0.046 after a seed diverged at "
        "0.046")
    intro = _section(PAGE, "## Verdict per paper claim")
    assert ("The validation split, read by the same rule, can only withhold a verdict, for every claim: where it "
            "says the opposite of the test split (one supports the claim, the other contradicts it) the verdict is "
            "*open* (test and validation disagree)") in intro


# ------------------------------------------------------------------------------------------ run counts
def test_the_cost_tables_runs_and_the_runs_planned_so_far_add_up():
    """The status line's runs planned so far are the cost table's runs less the regularisation runs still to
    join, plus the lr runs of widened grids and the seeds the rule added, as one sentence says."""
    total = int(re.search(r"^\| \*\*all\*\* \| \d+ \| (\d+) \|", PAGE, flags=re.M)[1])
    planned = int(re.search(r"(\d+) of the (\d+) runs planned so far are done", PAGE)[2])
    m = re.search(r"the (\d+) planned so far are (\d+)((?: [+−] \d+ [^+−.]+)*)\.", PAGE)
    assert m and int(m[1]) == planned and int(m[2]) == total
    terms = [(sign, int(n)) for sign, n in re.findall(r" ([+−]) (\d+) ", m[3])]
    assert total + sum(n if s == "+" else -n for s, n in terms) == planned
    assert f"cost table above counts every arm's lr x warm-up grid, its regularisation runs and 3 seeds, {total} " \
           "runs" in PAGE


def test_plan_growth_accounts_for_every_planned_run():
    """On the committed records: the planned count of the collected campaign is the estimate less the waiting
    regularisation runs plus the widened lr runs and the added seeds, the estimate being the cost table's."""
    import tempfile

    from geomlab.report.page import FAIR_RECORDS, plan_growth
    from geomlab.report.plan import FAIR, estimate
    from geomlab.report.records import load_records, read_records
    from geomlab.report.results import collect
    from geomlab.report.store import RunStore

    head, runs = read_records(REPO / FAIR_RECORDS)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        load_records(runs, store)
        after = collect(FAIR, store, corpora=(head.get("meta") or {}).get("corpora") or {})
    g = plan_growth(after)
    assert g["planned"] == after["progress"]["planned"]
    assert g["estimate"] == sum(r["runs"] for r in estimate())
    assert g["planned"] == g["estimate"] - g["waiting"] + g["widened"] + g["seeds"]
    assert g["waiting"] >= 0 and g["widened"] >= 0


def test_a_step_down_is_said_once_a_verdict_row():
    """The verdict table's row says a model's lr step-down in the first cell it applies to, not in each of its
    equal-steps, equal-CPU and equal-FLOPs cells."""
    rows = [line for line in PAGE.splitlines() if line.startswith("| ") and "stepped down from its tuned" in line
            and "**" in line]
    assert rows
    for line in rows:
        notes = re.findall(r"(\S+'s seeds train at lr [0-9.]+, stepped down)", line)
        assert len(notes) == len(set(notes)), line


# ------------------------------------------------------------------------------------------ reading an interval
def test_an_open_verdict_shows_its_per_seed_gaps():
    """An interval that spans 0 because one seed lies far from the others: the open verdict in the verdict
    table and in Every gap has the per-seed gaps beside it in seed order, and says that every seed falls on one
    side; a supported verdict has none, nor has an open one whose seeds differ in sign."""
    from geomlab.report.page import CLAIMS, fair_gaps, seed_gaps, verdict_table

    cl = next(c for c in CLAIMS if c.text.startswith("Grassmann flows come close to attention (all offsets"))
    after = {"comparisons": [{"key": "grassmann-200k", "rows": [
        _row(cl.arm, [2, 0, 1], [2.80, 2.55, 2.56], planned_seeds=[0, 1, 2]),
        _row("Same block with causal attention", [0, 1, 2], [2.30, 2.30, 2.30], baseline=True)]}]}
    row = next(ln for ln in verdict_table({"comparisons": []}, after) if ln.startswith(f"| Grassmann | {cl.text}"))
    per = "per seed +0.250, +0.260, +0.500 (behind on every seed; 3 seeds give a wide interval)"
    assert _cells(row)[7].startswith("**open** +0.337 [") and _cells(row)[7].endswith(f"; {per}")
    every = next(ln for ln in fair_gaps(after) if ln.startswith(f"| Grassmann | {cl.text} | equal steps"))
    assert _cells(every)[8] == f"open; {per}"
    assert seed_gaps({"gap": -0.003, "ci95": 0.04, "seeds": 3, "per_seed": [-0.021, 0.014, -0.004]}) == \
        "per seed -0.021, +0.014, -0.004"
    assert seed_gaps({"gap": 0.3, "ci95": None, "seeds": 1, "per_seed": [0.3]}) == ""
    supported = next(ln for ln in PAGE.splitlines() if ln.startswith("| Grassmann | ... against the depth-matched "
                                                                      "twin"))
    assert "per seed" not in supported
    grassmann = next(ln for ln in PAGE.splitlines() if ln.startswith(f"| Grassmann | {cl.text} |"))
    opens = [c for c in _cells(grassmann) if c.startswith("**open**") and "disagree" not in c]
    assert opens and all("; per seed +" in c and "(behind on every seed" in c for c in opens), grassmann


def test_an_interval_end_near_zero_shows_its_sign():
    """An interval end that rounds to 0.000 at three decimals is written with the digits that show its sign, the
    same in the tables' cells and in the sentences; other ends keep three decimals."""
    from geomlab.report.page import _gap
    from geomlab.report.render_parts import end, interval

    g = {"gap": -0.015, "ci95": 0.0147, "seeds": 3}
    assert _gap(g) == "-0.015 [-0.030, -0.0003]"
    assert interval(g, {}, "B", False) == " (95% CI -0.030 to -0.0003 over 3 seeds)"
    assert _gap({**g, "ci95": 0.0152}) == "-0.015 [-0.030, +0.0002]"
    assert interval({**g, "ci95": 0.0152}, {}, "B", False) == (
        " (95% CI -0.030 to +0.0002 over 3 seeds: not distinguishable)")

    assert [end(x) for x in (0.0, -0.00004, 0.1234, -1e-9)] == ["+0.000", "-0.00004", "+0.123", "+0.000"]
    assert "+0.000]" not in PAGE and "-0.000]" not in PAGE and "to +0.000 " not in PAGE and "to -0.000 " not in PAGE


# ------------------------------------------------------------------------------------------ equal CPU
def test_each_equal_cpu_arm_has_its_measured_ratio_beside_the_declared_one():
    """The CPU ratio an equal-CPU arm was sized by (declared before the runs) next to the one the fair runs
    measure (cpu_s / steps of the model's and the baseline's full-length seeds); where the two order the models
    differently, the page says the arm cut as the costlier had less CPU than the baseline: its reading is
    conservative against it."""
    from geomlab.report.page import cpu_sizing
    from geomlab.report.plan import SIZING

    model = "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers"
    base = "Same block with causal attention"
    arm = f"{model} at the baseline's CPU budget (4,660 steps)"
    after = {"comparisons": [{"key": "grassmann-200k", "rows": [
        _row(model, [0, 1], [2.0, 2.0], steps=5000, cpu_s=[1100.0, 1150.0]),
        _row(base, [0, 1], [2.0, 2.0], baseline=True, steps=5000, cpu_s=[1250.0, 1250.0])]}]}
    c = cpu_sizing(after)[("grassmann-200k", arm)]
    declared = SIZING[f"grassmann-200k / {model}"][0] / SIZING[f"grassmann-200k / {base}"][0]
    assert c["declared"] == pytest.approx(declared) and declared > 1
    assert c["measured"] == pytest.approx(1125 / 1250) and c["runs"] == (2, 2) and c["against"]
    cut = cpu_sizing(after)[("grassmann-200k", f"{base} at the CPU budget of Grassmann (Gr(2, r), offsets 1..16) "
                                               "(4,760 steps)")]
    assert cut["measured"] is None and not cut["against"]  # the all-offsets model has no seed here
    assert cpu_sizing(None)[("grassmann-200k", arm)]["measured"] is None
    line = next(ln for ln in PAGE.splitlines() if ln.startswith(f"- grassmann-200k / {arm}"))
    assert re.search(r"1\.07 declared, 0\.\d\d measured by the fair campaign's full-length runs \(\d+ and \d+ "
                     r"seeds\): the model, sized as the costlier, is the cheaper by this measure, and the model "
                     r"trained fewer steps than equal CPU by this measure would have given it, so this equal-CPU "
                     r"reading is conservative against the model\)$", line), line
    assert "within the machine's noise" not in PAGE


def test_the_sizing_note_says_which_way_a_measured_ratio_leans():
    """Measured below the declared ratio (model over baseline): the model was short-changed whichever side was
    cut (the model with fewer steps, or the baseline with more); above it the reading favours the model; within
    the tolerance nothing is said."""
    from geomlab.report.page import _sizing_note

    def note(costlier, declared, measured):
        return _sizing_note({"costlier": costlier, "model": "M", "declared": declared, "measured": measured,
                             "runs": (3, 3), "against": (declared > 1) != (measured > 1)})

    assert note("M", 5.75, 4.90).endswith("the model trained fewer steps than equal CPU by this measure would have "
                                          "given it, so this equal-CPU reading is conservative against the model")
    assert note("B", 0.95, 0.90).endswith("the baseline trained more steps than equal CPU by this measure would "
                                          "have given it, so this equal-CPU reading is conservative against the model")
    assert note("M", 2.0, 2.5).endswith("the model trained more steps than equal CPU by this measure would have "
                                        "given it, so this equal-CPU reading favours the model")
    assert note("M", 2.0, 2.05).endswith("(3 and 3 seeds)")
