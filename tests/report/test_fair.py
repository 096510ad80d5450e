"""The fair campaign and the results page: FLOPs per step (counter against the analytic Transformer count), the
declared plan (equal-compute steps from the measured costs, the third-decade ladder, the regularisation stage,
seeds added until the gaps settle), the run records (provenance, the committed records against the converged
report), docs/results.md regenerated from them, and runs through submitit's local executor."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geomlab.commands.cli import main
from geomlab.report import campaign as cp
from geomlab.report import store as rs
from geomlab.report.flops import FlopsError, step_flops, transformer_step_flops
from geomlab.report.protocol import COMPARISONS
from helpers.executors import Inline

REPO = Path(__file__).resolve().parents[2]
CONVERGED_JSON = REPO / "docs/results/runs/converged/results/results.json"


# ------------------------------------------------------------------------------------------ FLOPs
@pytest.mark.parametrize("cfg, batch, seq", [
    ({"d_model": 48, "n_layers": 2}, 4, 16),
    ({"d_model": 32, "n_layers": 3, "n_heads": 2, "mlp_ratio": 2}, 3, 24),
    ({"d_model": 52, "n_layers": 4, "n_heads": 4}, 2, 128)])
def test_counted_transformer_flops_equal_the_analytic_count(cfg, batch, seq):
    from geomlab.models import build_model

    full = build_model({"kind": "transformer", "vocab_size": 65, **cfg}).config
    assert step_flops(full, batch, seq) == transformer_step_flops(full, batch, seq)


def test_attention_flops_are_counted_on_the_cpu():
    """The attention twin runs scaled_dot_product_attention: its T x T products are counted (doubling T more than
    doubles the count), and a bad config is one line."""
    from geomlab.models import build_model

    cfg = build_model({"kind": "grassmann-attn", "vocab_size": 40, "d_model": 16, "n_layers": 1, "n_heads": 2,
                       "d_ff": 32, "max_len": 64}).config
    f1, f2 = step_flops(cfg, 2, 16), step_flops(cfg, 2, 32)
    assert f2 > 2 * f1
    with pytest.raises(FlopsError, match="cannot build"):
        step_flops({"kind": "transformer", "vocab_size": 65, "d_model": -1}, 2, 8)


# ------------------------------------------------------------------------------------------ the plan
def test_third_decade_ladder():
    assert cp.ladder(1e-2, -1, 3) == 4.6e-3 and cp.ladder(4.6e-3, -1, 3) == 2.2e-3
    assert cp.ladder(2.2e-2, 1, 3) == 4.6e-2 and cp.ladder(4.6e-3, 1, 3) == 1e-2
    assert cp.ladder(1e-3, -1, 2) == cp.half_decade(1e-3, -1) == 3e-4


@given(st.integers(-12, -1))
def test_third_decade_steps_are_inverse(k):
    x = float(f"{10 ** (k / 3):.1e}")
    up = cp.ladder(x, 1, 3)
    assert up > x and cp.ladder(up, -1, 3) == x
    assert math.log10(up / x) == pytest.approx(1 / 3, abs=0.02)


def test_equal_compute_steps_follow_the_measured_costs():
    """The fair plan's CPU costs are the converged campaign's measured seconds per step, and every equal-compute
    arm's steps spend its baseline's budget (recomputed here from the committed results.json)."""
    from geomlab.report.plan import FAIR, SIZING, equal_steps

    rows = {f"{c['key']} / {r['label']}": r for c in json.loads(CONVERGED_JSON.read_text())["comparisons"]
            for r in c["rows"]}
    for key, (cpu, _) in SIZING.items():
        assert cpu == pytest.approx(rows[key]["cpu_s_per_step"], abs=5e-5)
    steps = dict(FAIR.arm_steps)
    osm = "OSMFormer O(d), linear mixing at the baseline's CPU budget (3,690 steps)"
    assert steps[("ts-100k", osm)] == 10_000 * 0.16 // 0.4334 // 10 * 10 == 3690
    assert FAIR.full_steps("ts-100k", osm) == 3690 and FAIR.full_steps("ts-100k", "Transformer (ALiBi)") == 10_000
    assert equal_steps(10_000, 1.0, 3.0) == 3330 and equal_steps(100, 1.0, 1e6) == 10
    twin = next(a for a in FAIR.known()["grassmann-200k"].arms if "FLOPs budget of Grassmann (Gr" in a.label)
    assert twin.kind == "grassmann-attn" and not twin.baseline  # the attention twin is the costlier in FLOPs


def test_sizing_flops_are_the_counter_on_the_converged_config():
    from geomlab.report.plan import SIZING

    row = next(r for c in json.loads(CONVERGED_JSON.read_text())["comparisons"] if c["key"] == "ts-100k"
               for r in c["rows"] if r["kind"] == "transformer")
    f = step_flops(row["config"], 32, 128)
    assert f == transformer_step_flops(row["config"], 32, 128)
    assert SIZING["ts-100k / Transformer (ALiBi)"][1] == pytest.approx(f / 1e9, abs=5e-4)


def test_fair_plan_is_declared_and_priced(tmp_path, capsys):
    from geomlab.report.plan import FAIR, estimate

    assert FAIR.full_steps("cem-200k") == 10_000 and FAIR.seed_rule == (0.02, 8)
    g = FAIR.known()["grassmann-200k"]
    assert {a.config.get("layout") for a in g.arms if a.kind == "grassmann-attn"} >= {None, "pre_norm"}
    assert any(a.config.get("n_layers") == 6 and a.kind == "grassmann-attn" for a in g.arms)
    assert all(a.config.get("n_layers") == 3 for a in FAIR.known()["ts-scaling"].arms if a.kind == "osmformer")
    assert FAIR.warmups_for("ts-50k", "LSTM") == (0.02, 0.1)
    rows = estimate()
    assert [r["block"] for r in rows] == [k for k, _ in FAIR.steps]
    assert all(0 < r["cpu_hours"] < r["cpu_hours_max"] for r in rows)
    assert main(["report", "--campaign", "fair", "--dry-run", "--store", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    assert f"| {sum(r['cpu_hours'] for r in rows):.1f} |" in out and "ready to start now" in out


# ------------------------------------------------------------------------------------------ the rule
def _done(store, job, valid, test=None):
    store.folder(job).mkdir(parents=True, exist_ok=True)
    store.write(job, "outcome.json", {"key": job.key, "status": "done", "steps": job.steps, "cpu_s": 1.0,
                                      "metrics": {"valid_bpc": valid, **({"test_bpc": test} if test else {})}})


def _tuned(tmp_path, text_file):
    """A ts-50k rule plan and a store where both arms' one tuning run finished: ``(plan, store, comp, osm,
    lstm)``."""
    plan = _rule_plan(text_file)
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    for arm in comp.arms:
        _done(store, rs.Job(comp, arm, "tune", 1e-2, 0.02, 0, 2), 2.5)
    return (plan, store, comp, *comp.arms)


def _rule_plan(text_file, **kw):
    return cp.Campaign(**{"steps": (("ts-50k", 10),), "seeds": (0, 1, 2), "lr_grid": (1e-2,), "max_widen": 0,
                          "seed_rule": (0.02, 5), "corpus_override": str(text_file), **kw})


def test_regularisation_is_tuned_after_the_lr_with_dropout_only_where_the_model_has_it(tmp_path, text_file):
    plan = _rule_plan(text_file, regs=((0.0, 0.0), (0.1, 0.0), (0.0, 0.1)))
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    osm, lstm = comp.arms
    for arm in comp.arms:
        _done(store, rs.Job(comp, arm, "tune", 1e-2, 0.02, 0, 2), 2.5)
    pend = {a.label: cp.reg_state(plan, store, comp, a, (1e-2, 0.02))[0] for a in comp.arms}
    assert {j.reg for j in pend[osm.label]} == {(0.1, 0.0)}  # the OSM-RNN has no dropout
    assert {j.reg for j in pend[lstm.label]} == {(0.1, 0.0), (0.0, 0.1)}
    assert all("-wd" in j.key for j in pend[lstm.label]) and "-wd" not in rs.Job(comp, osm, "tune", 1e-2, 0.02, 0, 2).key
    assert cp.decided(plan, store, comp, lstm)[1] is None  # waits for its regularisation runs
    _done(store, pend[lstm.label][0], 2.6)
    _done(store, pend[lstm.label][1], 2.4)
    assert cp.decided(plan, store, comp, lstm)[1] == (1e-2, 0.02, (0.0, 0.1))
    full = [j for j in cp.jobs(plan, store) if j.phase == "full"]
    assert {j.reg for j in full} == {(0.0, 0.1)} and {j.seed for j in full} == {0, 1, 2}


def _fair_models():
    """One small model per distinct (kind, fixed config) of the fair plan's arms; an OSM kind once per prototype
    kind (the budget search may pick any of them)."""
    from geomlab.models import build_model
    from geomlab.models.osm.config import PROTOTYPES
    from geomlab.report.plan import FAIR

    seen = {}
    for comp in FAIR.extra:
        for arm in comp.arms:
            for protos in PROTOTYPES if arm.kind.startswith("osm") else (None,):
                cfg = {**arm.config, **({"prototypes": protos} if protos else {})}
                seen.setdefault((arm.kind, json.dumps(cfg, sort_keys=True)), (arm.kind, cfg))
    return [(kind, cfg, build_model({"kind": kind, "vocab_size": 65, **cfg})) for kind, cfg in seen.values()]


def test_every_regularisation_setting_of_the_fair_plan_acts_on_its_model():
    """Weight decay has parameters to act on in every model of the plan, and dropout, where the config has it,
    changes a training-mode forward pass (a single-layer LSTM's included): no regularisation run can equal the
    unregularised one by construction."""
    import torch

    from geomlab.models import build_model
    from geomlab.training.trainer import decayed

    for kind, cfg, model in _fair_models():
        assert decayed(model), (kind, cfg)
        if cp.takes_dropout(kind):
            m = build_model({"kind": kind, "vocab_size": 65, **cfg, "dropout": 0.1}).train()
            x = torch.randint(0, 65, (2, 16))
            with torch.no_grad():
                assert not torch.equal(m(x), m.eval()(x)), (kind, cfg)


def test_a_regularisation_setting_equal_to_none_to_the_bit_is_flagged(tmp_path, text_file):
    """The campaign's row names a regularisation setting whose run ended bit for bit as the unregularised one."""
    from geomlab.report.results import arm_row

    plan = _rule_plan(text_file, regs=((0.0, 0.0), (0.1, 0.0), (0.0, 0.1)))
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    lstm = comp.arms[1]
    _done(store, rs.Job(comp, lstm, "tune", 1e-2, 0.02, 0, 2), 2.5)
    wd, do = cp.reg_state(plan, store, comp, lstm, (1e-2, 0.02))[0]
    _done(store, wd, 2.6)
    _done(store, do, 2.5)
    assert arm_row(plan, store, comp, lstm)["reg_note"].endswith(": wd 0, dropout 0.1")
    _done(store, do, 2.4)
    assert "reg_note" not in arm_row(plan, store, comp, lstm)


@pytest.mark.parametrize("gaps, seeds", [((0.10, 0.11, 0.12), 3), ((0.10, -0.10, 0.05), 4)])
def test_seeds_are_added_until_the_gaps_settle(tmp_path, text_file, gaps, seeds):
    """A gap whose paired interval excludes zero needs no more seeds; one spanning zero gets the next seed, and
    seeds stop at the rule's most."""
    plan, store, comp, osm, lstm = _tuned(tmp_path, text_file)
    for s, g in enumerate(gaps):
        for arm, v in ((lstm, 2.4), (osm, 2.4 + g)):
            _done(store, rs.Job(comp, arm, "full", 1e-2, 0.02, s, 10), v, v)
    assert cp.seeds_planned(plan, store, comp) == tuple(range(seeds))
    if seeds == 4:
        assert {j.seed for j in cp.jobs(plan, store)} == {3}
        for s in (3, 4):
            for arm, v in ((lstm, 2.4), (osm, 2.4 + (0.2 if s == 3 else -0.2))):
                _done(store, rs.Job(comp, arm, "full", 1e-2, 0.02, s, 10), v, v)
        assert cp.seeds_planned(plan, store, comp) == (0, 1, 2, 3, 4)  # 5: the rule's most
        assert list(cp.jobs(plan, store)) == []


def test_a_seed_the_rule_added_that_diverges_steps_the_whole_row_down(tmp_path, text_file):
    """Seed 3, added by the seed rule, diverges: every seed of that model retrains one rung lower (the row
    keeps one lr), the note names seed 3, and the seeds of the other model stay."""
    plan = _rule_plan(text_file, max_widen=1, lr_per_decade=3)
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    osm, lstm = comp.arms
    for arm in comp.arms:  # the tuning, widened once each side: 0.01 wins inside
        for lr, v in ((1e-2, 2.5), (cp.ladder(1e-2, -1, 3), 2.6), (cp.ladder(1e-2, 1, 3), 2.7)):
            _done(store, rs.Job(comp, arm, "tune", lr, 0.02, 0, 2), v)
    assert all(cp.decided(plan, store, comp, a)[1] == (1e-2, 0.02, (0.0, 0.0)) for a in comp.arms)
    for s, g in enumerate((0.1, -0.1, 0.1)):  # spans zero: a fourth seed is added
        for arm, v in ((lstm, 2.4), (osm, 2.4 + g)):
            _done(store, rs.Job(comp, arm, "full", 1e-2, 0.02, s, 10), v, v)
    assert cp.seeds_planned(plan, store, comp) == (0, 1, 2, 3)
    _done(store, rs.Job(comp, osm, "full", 1e-2, 0.02, 3, 10), 2.5, 2.5)
    failed = rs.Job(comp, lstm, "full", 1e-2, 0.02, 3, 10)
    store.folder(failed).mkdir(parents=True)
    store.write(failed, "outcome.json", {"key": failed.key, "status": "failed",
                                         "error": "step 6372: the gradient norm overflowed"})
    (lr, _), notes = cp.full_choice(plan, store, comp, lstm, (1e-2, 0.02))
    assert lr == cp.ladder(1e-2, -1, 3) and notes == [
        f"lr 0.01 diverged at the full budget (seed 3, step 6,372): the seeds train at {lr:g}"]
    todo = {(j.arm.label, j.lr, j.seed) for j in cp.jobs(plan, store)}
    assert todo == {(lstm.label, lr, s) for s in (0, 1, 2)}  # seed 3 follows once the first three are in
    assert cp.full_choice(plan, store, comp, osm, (1e-2, 0.02))[0] == (1e-2, 0.02)


def test_a_seed_that_diverges_after_the_step_downs_are_spent_does_not_stop_the_seed_rule(tmp_path, text_file):
    """With no step-down left, a diverged seed has no value: the gaps pair the seeds both rows finished, and
    an unsettled gap still gets the next seed."""
    plan = _rule_plan(text_file)  # max_widen 0: no step-down
    store = rs.RunStore(tmp_path)
    comp = COMPARISONS["ts-50k"]
    osm, lstm = comp.arms
    for arm in comp.arms:
        _done(store, rs.Job(comp, arm, "tune", 1e-2, 0.02, 0, 2), 2.5)
    for s, g in enumerate((0.1, 0.0, -0.1)):
        _done(store, rs.Job(comp, lstm, "full", 1e-2, 0.02, s, 10), 2.4, 2.4)
        if s == 1:
            bad = rs.Job(comp, osm, "full", 1e-2, 0.02, s, 10)
            store.folder(bad).mkdir(parents=True)
            store.write(bad, "outcome.json", {"key": bad.key, "status": "failed",
                                              "error": "step 9: the gradient norm exploded"})
        else:
            _done(store, rs.Job(comp, osm, "full", 1e-2, 0.02, s, 10), 2.4 + g, 2.4 + g)
    assert cp.full_choice(plan, store, comp, osm, (1e-2, 0.02)) == ((1e-2, 0.02), [
        "lr 0.01 diverged at the full budget (seed 1, step 9): no step-down left, the row is read on the seeds "
        "that finished"])
    assert cp.seeds_planned(plan, store, comp) == (0, 1, 2, 3)  # 0 and 2 pair: +0.1 and -0.1 span zero
    assert {(j.arm.label, j.seed) for j in cp.jobs(plan, store)} == {(osm.label, 3), (lstm.label, 3)}


def test_a_seed_finished_before_the_seed_rule_settled_on_fewer_still_counts(tmp_path, text_file):
    """The rule settles on seeds 0-2 (the gaps exclude zero); a seed 3 both rows finished at their settings
    earlier is counted in the rows and the paired gap, said as such, and is not a missing seed; a planned seed
    that is missing is not hidden by it."""
    from geomlab.report.aggregation import seeds_to_come
    from geomlab.report.results import arm_row

    plan, store, comp, osm, lstm = _tuned(tmp_path, text_file)
    for s in range(4):
        for arm, v in ((lstm, 2.5), (osm, 2.3)):
            job = rs.Job(comp, arm, "full", 1e-2, 0.02, s, 10)
            _done(store, job, v, v + 0.001 * s)
            store.write(job, "outcome.json", {**store.outcome(job), "train_time_s": 1.0, "params_stored": 100,
                                              "params": 100, "config": {}, "history": []})
    assert cp.seeds_planned(plan, store, comp) == (0, 1, 2)
    row = arm_row(plan, store, comp, osm)
    assert row["planned_seeds"] == [0, 1, 2] and row["seeds"] == [0, 1, 2, 3] and len(row["test"]) == 4
    assert row["status"] == "3 of 3 seeds finished (seeds 0–2), and seed 3 from before the seed rule settled on 3"
    assert not seeds_to_come(row)
    assert seeds_to_come({"seeds": [0, 1, 3], "planned_seeds": [0, 1, 2], "failed_seeds": []})


def test_a_row_whose_missing_seeds_diverged_is_not_provisional():
    from geomlab.report.aggregation import seeds_to_come

    row = {"seeds": [0, 1], "planned_seeds": [0, 1, 2], "failed_seeds": []}
    assert seeds_to_come(row)  # seed 2 still to run
    row["failed_seeds"] = [{"seed": 2, "error": "step 9: the gradient norm exploded"}]
    assert not seeds_to_come(row)  # it diverged once the step-downs were spent: every seed is accounted for
    assert not seeds_to_come({"seeds": [0]})  # a row without a plan (the converged campaign's)


# ------------------------------------------------------------------------------------------ the page
def test_verdict_rules():
    from geomlab.report.page import verdict

    g = lambda m, h: {"gap": m, "ci95": h, "seeds": 3}  # noqa: E731
    assert verdict(g(-0.05, 0.01), "lower") == "supported" and verdict(g(0.05, 0.01), "lower") == "contradicted"
    assert verdict(g(-0.05, 0.08), "lower") == "open" and verdict(g(-0.05, None), "lower") == "open"
    assert verdict(g(0.005, 0.01), "match") == "supported" and verdict(g(0.05, 0.04), "match") == "contradicted"
    assert verdict(g(0.01, 0.03), "match") == "open"
    assert verdict(g(-0.04, 0.02), "not worse") == "supported" and verdict(g(0.3, 0.2), "not worse") == "contradicted"


def test_the_committed_records_hold_the_converged_report_numbers():
    """Every seed's valid and test BPC of every row of the converged report's results.json is a full run in the
    committed records (read here line by line, not through the campaign code)."""
    lines = (REPO / "docs/results/runs/converged/records.jsonl").read_text().splitlines()
    head, runs = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    assert head["kind"] == "geomlab-campaign-records" and head["campaign"] == "converged"
    full = {(o["comparison"], o["arm"], o["seed"]): o for o in runs if o["phase"] == "full" and o["status"] == "done"}
    n = 0
    for c in json.loads(CONVERGED_JSON.read_text())["comparisons"]:
        for r in c["rows"]:
            for i, s in enumerate(r["seeds"]):
                o = full[(c["key"], r["label"], s)]
                assert o["metrics"]["test_bpc"] == pytest.approx(r["test"][i], rel=1e-8)
                assert o["metrics"]["valid_bpc"] == pytest.approx(r["valid"][i], rel=1e-8)
                assert o["lr"] == r["lr"] and o["steps"] == c["steps"]
                n += 1
    assert n == len(full) == 66  # 6 + 9 + 9 + 12 (the zoo, one seed) + 12 + 6 + 12


def test_results_page_regenerates_from_the_committed_records():
    """docs/results.md is exactly what `geomlab report --page` writes from the committed records."""
    from geomlab.report.page import PAGE, results_page

    page = results_page(REPO)
    assert page == (REPO / PAGE).read_text(encoding="utf-8"), "docs/results.md is stale: python -m geomlab report --page"
    assert "| OSM | OSMFormer beats the Transformer on PTB characters" in page
    assert "-0.043 [-0.056, -0.029]" in page and "## Appendix: smoke run" in page
    assert page.index("## Verdict per paper claim") < page.index("## Appendix: smoke run")


def test_a_collapsed_tuning_run_is_marked_near_the_unigram_in_sweeps_and_tables():
    """A tuning run whose validation BPC ends within 0.15 bits of the unigram's reads "(≈ unigram)" in the lr
    sweep, the tuning table and the regularisation cell, with the legend once; one further below does not."""
    from geomlab.report.aggregation import NEAR_UNIGRAM, near_unigram
    from geomlab.report.page import _regs_tried
    from geomlab.report.render_converged import converged_comparison

    uni = 4.61
    assert near_unigram(uni - NEAR_UNIGRAM / 2, uni) and near_unigram(uni + 1, uni)
    assert not near_unigram(uni - 2 * NEAR_UNIGRAM, uni) and not near_unigram(None, uni) and not near_unigram(3.0, None)
    row = {"label": "Twin", "kind": "grassmann-attn", "baseline": True, "seeds": [0], "planned_seeds": [0],
           "status": "1 of 1 seeds finished", "lr": 0.0022, "warmup": 0.1, "valid_mean": 2.5, "valid_std": None,
           "test_mean": 2.6, "test_std": None, "lr_sweep": {0.0022: 2.49, 0.01: 4.6},
           "tuning": [{"lr": 0.0022, "warmup": 0.1, "valid": 2.49}, {"lr": 0.01, "warmup": 0.1, "valid": 4.6}],
           "tuning_steps": 1000}
    c = {"key": "k", "title": "T", "corpus": "c", "claim": "", "note": "", "split": "", "unigram_bpc": uni,
         "steps": 5000, "rows": [row]}
    text = "\n".join(converged_comparison(c))
    assert "0.01 → 4.600 (≈ unigram)" in text and "2.490 (≈ unigram)" not in text
    assert text.count("within 0.15 bits of the unigram's 4.610") == 2  # the sweep's legend and the table's note
    regs = _regs_tried({"reg_tuning": [{"weight_decay": 0.0, "dropout": 0.0, "valid": 2.4},
                                       {"weight_decay": 0.0, "dropout": 0.1, "valid": 4.55}]}, uni)
    assert regs == "none 2.400; dropout 0.1 4.550 (≈ unigram)"
    row["lr_sweep"], row["tuning"] = {0.0022: 2.49}, row["tuning"][:1]
    assert "≈ unigram" not in "\n".join(converged_comparison(c))  # no mark, no legend


def test_a_reading_says_when_a_rows_lr_was_stepped_down_after_divergences():
    """A verdict read on a row whose seeds train below its tuned lr says so beside the verdict; a row at its
    tuned lr says nothing."""
    from geomlab.report.page import CLAIMS, readings

    cl = next(c for c in CLAIMS if c.comparison == "ts-50k")

    def row(label, baseline, lr, tuned, test):
        return {"label": label, "baseline": baseline, "seeds": [0, 1], "planned_seeds": [0, 1], "lr": lr,
                "tuned_lr": tuned, "test": test, "valid": test, "failed_seeds": [],
                "full_notes": [f"lr {tuned:g} diverged at the full budget (seed 1, step 9): the seeds train at {lr:g}"]
                if lr != tuned else []}

    results = {"comparisons": [{"key": "ts-50k", "rows": [row(cl.arm, False, 0.01, 0.01, [2.0, 2.1]),
                                                          row("LSTM", True, 0.022, 0.046, [2.2, 2.25])]}]}
    r = readings(results, cl)[0]
    assert r["reading"] == "equal steps" and r["test"]["seeds"] == 2
    assert r["stepped"] == ["LSTM's seeds train at lr 0.022, stepped down from its tuned 0.046 after a seed "
                            "diverged at 0.046"]
    lstm = results["comparisons"][0]["rows"][1]
    lstm["tuned_lr"], lstm["lr"], lstm["failed_seeds"] = 0.1, 0.022, [{"seed": 1, "error": "step 9"}]
    lstm["full_notes"] = ["lr 0.1 diverged at the full budget (seed 0, step 5): the seeds train at 0.046",
                          "lr 0.046 diverged at the full budget (seed 1, step 9): the seeds train at 0.022",
                          "lr 0.022 diverged at the full budget (seed 1, step 9): no step-down left, the row is read "
                          "on the seeds that finished"]
    assert readings(results, cl)[0]["stepped"] == [
        "LSTM's seeds train at lr 0.022, stepped down from its tuned 0.1 after seeds diverged at 0.1 and 0.046; "
        "1 of its seeds diverged at 0.022 too"]
    results["comparisons"][0]["rows"][1] = row("LSTM", True, 0.046, 0.046, [2.2, 2.25])
    assert readings(results, cl)[0]["stepped"] == []


def test_records_file_errors_name_the_file_and_line(tmp_path):
    from geomlab.report.records import RecordsError, read_records

    bad = tmp_path / "r.jsonl"
    bad.write_text('{"kind": "geomlab-campaign-records"}\n{"key": "a"}\nnot json\n')
    with pytest.raises(RecordsError, match=r"r.jsonl, line 3: not JSON"):
        read_records(bad)
    bad.write_text('{"kind": "other"}\n')
    with pytest.raises(RecordsError, match="not a campaign records file"):
        read_records(bad)
    with pytest.raises(RecordsError, match="cannot read the records file"):
        read_records(tmp_path / "missing.jsonl")


# ------------------------------------------------------------------------------------------ submitit
@pytest.mark.slow
def test_runs_through_submitit_local_executor_with_provenance(tmp_path, text_file):
    """Four tiny runs (two models' tuning then full run) as local submitit jobs, two at a time at nice 19; each
    record carries commit, date, host, torch, the data's sha256 (recomputed here from the token streams) and
    FLOPs per step; a second dispatch finds nothing left; the records file round-trips into a store."""
    pytest.importorskip("submitit")
    from geomlab.report import dispatch, records
    from geomlab.training.zoo import make_task

    plan = cp.Campaign(steps=(("ts-50k", 8),), seeds=(0,), seed_counts=(), lr_grid=(1e-2,), max_widen=0,
                       eval_every=4, batch_size=4, seq_len=16, corpus_override=str(text_file))
    store = rs.RunStore(tmp_path / "store")
    ex = dispatch.executor("local", tmp_path / "submitit")
    logs = []
    n = dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.5, log=logs.append)
    assert n == 4 and list(cp.jobs(plan, store)) == [], logs
    assert dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.5, log=logs.append) == 0
    task = make_task(str(text_file))
    h = hashlib.sha256(json.dumps(list(task.vocab.tokens), ensure_ascii=False).encode())
    for split in ("train", "valid", "test"):
        h.update(task.tokens(split).long().numpy().tobytes())
    outs = records.outcomes(store)
    assert len(outs) == 4
    for o in outs:
        p = o["provenance"]
        assert p["data_sha256"] == h.hexdigest() and p["torch"] and p["host"] and p["date"][:2] == "20"
        assert p["commit"] is None or len(p["commit"]) == 40
        assert o["flops_per_step"] == step_flops(o["config"], 4, 16) > 0
        assert any("loss" in x for x in o["history"]) and any("valid_bpc" in x for x in o["history"])
    path = tmp_path / "records.jsonl"
    assert records.write_records(store, path, plan.name) == 4
    again = rs.RunStore(tmp_path / "again")
    assert records.load_records(records.read_records(path)[1], again) == 4
    for a, b in zip(records.outcomes(again), outs):  # the records keep 9 significant digits
        assert a["key"] == b["key"] and a["metrics"] == pytest.approx(b["metrics"], rel=1e-8)


def test_the_page_gives_the_fair_campaigns_verdicts_once_it_has_records(tmp_path):
    """A fair-campaign records file (one comparison finished: the tuning grid, the regularisation runs, three
    paired seeds of every arm) fills the page's "after" columns: the verdict at equal steps and the test gaps
    at equal CPU time and equal FLOPs, each the seed-paired mean with its interval."""
    import shutil

    from geomlab.report import page, records
    from geomlab.report.plan import FAIR

    for rel in (page.RECORDS, page.BENCH, page.SMOKE):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    store = rs.RunStore(tmp_path / "store")
    comp = FAIR.known()["ts-50k"]
    offset = {"LSTM": 0.0, "OSM-RNN O(d)": -0.05}
    for arm in comp.arms:
        steps = FAIR.tune_steps(comp.key, arm.label)
        for lr in FAIR.lr_grid:
            for wu in FAIR.warmups_for(comp.key, arm.label):
                _done(store, rs.Job(comp, arm, "tune", lr, wu, 0, steps), 2.5 if (lr, wu) == (1e-2, 0.02) else 2.6)
        for j in cp.reg_state(FAIR, store, comp, arm, (1e-2, 0.02))[0]:
            _done(store, j, 2.7)
        gap = offset.get(arm.label, 0.1 if "CPU" in arm.label else 0.3)
        for s in range(3):
            job = rs.Job(comp, arm, "full", 1e-2, 0.02, s, FAIR.full_steps(comp.key, arm.label))
            v = 2.5 + gap + (0.001 * s if gap < 0.3 else 0.0) * (1 if gap > 0 else -1 if gap < 0 else 0)
            store.folder(job).mkdir(parents=True)
            store.write(job, "outcome.json", {"key": job.key, "status": "done", "steps": job.steps, "cpu_s": 1.0,
                                              # the OSM-RNN behind on the validation split, ahead on test
                                              "metrics": {"valid_bpc": v + (0.1 if arm.label == "OSM-RNN O(d)"
                                                                            else 0.0), "test_bpc": v},
                                              "train_time_s": 1.0, "params": 50_000, "params_stored": 50_000,
                                              "config": {}, "finished": 1796608230.0 + s})
    assert cp.seeds_planned(FAIR, store, comp) == (0, 1, 2)  # every gap settled at three seeds
    (tmp_path / page.FAIR_RECORDS).parent.mkdir(parents=True)
    records.write_records(store, tmp_path / page.FAIR_RECORDS, "fair", {"corpora": {}})
    md = page.results_page(tmp_path)
    row = next(ln for ln in md.splitlines() if ln.startswith("| OSM | OSM-RNN beats the LSTM"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    # the test split alone would support the claim, the validation split, as significant, contradicts it
    assert cells[7] == ("**open** (test and validation disagree) -0.051 [-0.053, -0.049]; valid +0.049 "
                        "[+0.047, +0.051], the other way")
    assert cells[8] == "**contradicted** +0.101 [+0.099, +0.103]"
    assert cells[9] == "**contradicted** +0.300 [+0.300, +0.300]"
    assert cells[6].startswith("**open**") and "## The fair campaign's runs" in md
    every = [[c.strip() for c in ln.split("|")[1:-1]] for ln in md.splitlines()
             if ln.startswith("| OSM | OSM-RNN beats the LSTM") and "| equal " in ln]
    assert [r[2] for r in every] == ["equal steps", "equal CPU", "equal FLOPs"]
    assert every[0][5:9] == ["3", "-0.051 [-0.053, -0.049]", "+0.049 [+0.047, +0.051]",
                             "open (test and validation disagree)"]
    assert every[1][3:5] == ["OSM-RNN O(d) at the baseline's CPU budget (1,730 steps)", "LSTM"]
    assert every[1][6:9] == ["+0.101 [+0.099, +0.103]", "+0.101 [+0.099, +0.103]", "contradicted"]
    settings = next(ln for ln in md.splitlines() if ln.startswith("| ts-50k | LSTM |"))
    cells = [c.strip() for c in settings.split("|")[3:-1]]
    assert cells[:5] == ["0.01", "2%", "0", "0", "3 of 3"]
    assert cells[5] == ("none 2.500; dropout 0.1 2.700; wd 0.01 2.700; wd 0.01 + dropout 0.1 2.700; wd 0.1 2.700; "
                        "wd 0.1 + dropout 0.1 2.700")
    assert "| OSM | OSMFormer beats the Transformer at ~100K" in md and "pending" in md
    assert "As of 2026-12-07 01:50 UTC (the last run's end), " in md
    # each model's own tuning budget where they differ (the equal-compute arms tune shorter)
    table = md[md.index("#### Tiny Shakespeare, ~50K"):]
    assert "| tuning (seed 0; its steps first) |" in table
    assert "| LSTM | 3 of 3 seeds finished | 0.01 | 2%; wd 0, dropout 0 | 2,000 steps: 0.0022/2% → 2.600" in table
    assert "| 346 steps: 0.0022/2% → 2.600" in table

    # the LSTM's seed 2 is missing: the verdicts are provisional, and every gap is over the seeds both have
    lstm = next(a for a in comp.arms if a.label == "LSTM")
    (store.folder(rs.Job(comp, lstm, "full", 1e-2, 0.02, 2, FAIR.full_steps(comp.key))) / "outcome.json").unlink()
    records.write_records(store, tmp_path / page.FAIR_RECORDS, "fair", {"corpora": {}})
    md = page.results_page(tmp_path)
    row = next(ln for ln in md.splitlines() if ln.startswith("| OSM | OSM-RNN beats the LSTM"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[7].startswith("**open** (provisional; test and validation disagree) -0.050 [-0.057, -0.044]; "
                               "valid "), cells[7]
    assert ("OSM-RNN O(d): -0.050 test BPC at equal steps (95% CI -0.057 to -0.044 over 2 seeds both finished; claim "
            "open (provisional; test and validation disagree): the test split alone would have it supported, the "
            "validation split contradicted)") in md
    every = [[c.strip() for c in ln.split("|")[1:-1]] for ln in md.splitlines()
             if ln.startswith("| OSM | OSM-RNN beats the LSTM") and "| equal " in ln]
    assert [r[5] for r in every] == ["2", "2", "2"]
    assert every[0][8] == "open (provisional; test and validation disagree)"
    assert "at the baseline's CPU budget (1,730 steps): +0.101 test BPC at equal CPU (" in md
    assert "at the baseline's FLOPs budget (610 steps): +0.300 test BPC at equal FLOPs (" in md


# ------------------------------------------------------------------------------------------ a session of hours
def test_a_deadline_submits_only_the_runs_that_fit_then_stops(tmp_path, text_file):
    """With a deadline the dispatcher skips a run expected to end after it, takes the next ready one that fits
    and stops once none fits (the skipped runs stay for the next session); without one it trains them all."""
    import time

    from geomlab.report import dispatch

    plan = cp.Campaign(steps=(("ts-50k", 8),), seeds=(0,), seed_counts=(), lr_grid=(1e-2,), max_widen=0,
                       eval_every=4, batch_size=4, seq_len=16, corpus_override=str(text_file))
    store = rs.RunStore(tmp_path / "store")
    ex, logs = Inline(), []
    cost = lambda j: 1e9 if j.arm.kind == "osm-rnn" else 1.0  # noqa: E731
    n = dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.01, log=logs.append, deadline=time.time() + 3600,
                          cost=cost)
    assert n == 2 and all("/lstm/" in k for k in ex.keys), ex.keys  # the LSTM's tuning run, then its full run
    assert "no run left is expected to finish before the deadline" in logs[-1]
    left = [j.key for j in cp.jobs(plan, store)]
    assert left and all("/osm-rnn-o-d/tune-" in k for k in left), left  # skipped, not lost
    assert dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.01, log=logs.append, deadline=time.time() - 1,
                             cost=lambda j: 0.0) == 0  # the deadline has passed: nothing more is submitted
    assert dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.01, log=logs.append) == 2
    assert list(cp.jobs(plan, store)) == []


class _Endless:
    """An executor whose jobs never finish (a run longer than the session); it records what was cancelled."""

    class Job:
        def __init__(self, key, cancelled):
            self.job_id, self.key, self.cancelled = key, key, cancelled

        def done(self):
            return False

        def cancel(self):
            self.cancelled.append(self.key)

    def __init__(self):
        self.keys, self.cancelled = [], []

    def submit(self, fn, *args):
        self.keys.append(args[2].key)
        return _Endless.Job(args[2].key, self.cancelled)


def test_a_run_longer_than_the_session_trains_until_the_deadline_then_stops(tmp_path, text_file):
    """When no ready run can finish before the deadline, one whose next checkpoint comes before it is started
    anyway, and at the deadline the runs in flight are cancelled (they resume from their checkpoints); a run
    that cannot even reach its next checkpoint is not started."""
    import time

    from geomlab.report import dispatch

    plan = cp.Campaign(steps=(("ts-50k", 8),), seeds=(0,), seed_counts=(), lr_grid=(1e-2,), max_widen=0,
                       eval_every=4, batch_size=4, seq_len=16, corpus_override=str(text_file))
    store = rs.RunStore(tmp_path / "store")
    ex, logs = _Endless(), []
    t0 = time.time()
    n = dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.01, log=logs.append, deadline=t0 + 0.5,
                          cost=lambda j: 1e9, progress=lambda j: 0.1)
    assert n == 0 and len(ex.keys) == 2 and sorted(ex.cancelled) == sorted(ex.keys)
    assert time.time() - t0 >= 0.5 and all("will not finish before the deadline" in ln for ln in logs[:2])
    assert "the deadline: stopping 2 run(s) in flight" in logs[-1]
    ex, logs = _Endless(), []
    assert dispatch.dispatch(plan, store, ex, parallel=2, poll_s=0.01, log=logs.append, deadline=time.time() + 60,
                             cost=lambda j: 1e9, progress=lambda j: 1e9) == 0
    assert ex.keys == [] and "no run left is expected to finish before the deadline" in logs[-1]


def test_seconds_to_checkpoint_is_one_validation_period_at_the_measured_rate():
    from geomlab.report.plan import FAIR, seconds_to_checkpoint, step_seconds

    comp = FAIR.known()["ts-100k"]
    osm = next(a for a in comp.arms if a.label == "OSMFormer O(d), linear mixing")
    rate = step_seconds(FAIR, "ts-100k", osm)[0]
    assert seconds_to_checkpoint(FAIR, rs.Job(comp, osm, "full", 1e-2, 0.02, 0, 10_000)) == pytest.approx(500 * rate)
    assert seconds_to_checkpoint(FAIR, rs.Job(comp, osm, "tune", 1e-2, 0.02, 0, 300)) == pytest.approx(300 * rate)


def test_seconds_left_counts_the_steps_at_the_measured_rate_less_the_checkpointed_part(tmp_path):
    from geomlab.report.plan import FAIR, SIZING, seconds_left, step_seconds

    comp = FAIR.known()["ts-100k"]
    osm = next(a for a in comp.arms if a.label == "OSMFormer O(d), linear mixing")
    job = rs.Job(comp, osm, "full", 1e-2, 0.02, 0, 10_000)
    store = rs.RunStore(tmp_path)
    assert seconds_left(FAIR, store, job) == pytest.approx(10_000 * SIZING["ts-100k / OSMFormer O(d), linear mixing"][0])
    store.folder(job).mkdir(parents=True)
    store.write(job, "cpu.json", {"cpu_s": 1000.0})
    assert seconds_left(FAIR, store, job) == pytest.approx(10_000 * 0.4334 - 1000.0)
    store.write(job, "cpu.json", {"cpu_s": 1e9})
    assert seconds_left(FAIR, store, job) == 0.0
    sized = next(a for a in comp.arms if a.label.startswith("OSMFormer O(d), linear mixing at the baseline's CPU"))
    assert step_seconds(FAIR, "ts-100k", sized) == (0.4334, False)  # an equal-compute arm: its model's rate
    twin = next(a for a in FAIR.known()["grassmann-200k"].arms if a.label.endswith("pre-norm, 6 layers"))
    assert step_seconds(FAIR, "grassmann-200k", twin) == (SIZING["grassmann-200k / Same block with causal attention"][0],
                                                          True)
    other = type(osm)("made up", "lstm", 1_000, {})
    assert step_seconds(FAIR, "no-such-block", other) == (max(v[0] for v in SIZING.values()), True)


def test_cli_restores_a_campaigns_records_into_a_new_store(tmp_path, text_file, capsys):
    """``--restore RECORDS`` loads a records file of the same campaign into the store (a new machine resumes
    where the committed records stop); a records file of another campaign is refused in one line, and
    ``--hours`` goes only with a campaign that trains."""
    from geomlab.report import records

    comp = _fair_comp()
    store = rs.RunStore(tmp_path / "old")
    arm = comp.arms[0]
    for lr in (2.2e-3, 4.6e-3):
        _done(store, rs.Job(comp, arm, "tune", lr, 0.02, 0, 2000), 2.5)
    path = tmp_path / "records.jsonl"
    assert records.write_records(store, path, "fair") == 2
    rc = main(["report", "--campaign", "fair", "--collect", "--restore", str(path), "--store", str(tmp_path / "new"),
               "--only", "ts-50k", "--corpus-file", str(text_file), "--out", str(tmp_path / "rep" / "results.md"),
               "--no-png"])
    assert rc == 0 and "[fair] restored 2 finished run(s)" in capsys.readouterr().out
    assert len(list((tmp_path / "new").glob("**/outcome.json"))) == 2
    assert main(["report", "--campaign", "converged", "--collect", "--restore", str(path), "--store",
                 str(tmp_path / "other"), "--no-png"]) == 2
    assert "records of the 'fair' campaign, not of 'converged'" in capsys.readouterr().err
    assert main(["report", "--campaign", "fair", "--collect", "--hours", "2", "--store", str(tmp_path / "new")]) == 2
    assert "drop --max-jobs, --device and --hours" in capsys.readouterr().err


def test_collect_reads_no_corpus_it_would_have_to_download(tmp_path, text_file, monkeypatch, capsys):
    """``--collect`` of an empty store, or of a records file on a machine without the corpora, downloads
    nothing: the records' split and unigram BPC stand in for the corpus."""
    from geomlab.data import corpora
    from geomlab.report import records

    fetched = []

    def offline(url, timeout=60.0):
        fetched.append(url)
        raise OSError("no network in this test")

    monkeypatch.setattr(corpora, "_fetch", offline)
    monkeypatch.setattr("pooch.core.time.sleep", lambda s: None)
    monkeypatch.delenv("GEOMLAB_DATA_DIR", raising=False)
    monkeypatch.delenv("GEOMLAB_OFFLINE", raising=False)
    monkeypatch.setenv("GEOMLAB_CACHE_DIR", str(tmp_path / "cache"))  # empty
    (tmp_path / "empty").mkdir()
    assert main(["report", "--campaign", "fair", "--collect", "--store", str(tmp_path / "empty"), "--records",
                 str(tmp_path / "x.jsonl"), "--out", str(tmp_path / "y" / "results.md"), "--no-png"]) == 0
    assert fetched == [] and "Downloading" not in capsys.readouterr().err
    store = rs.RunStore(tmp_path / "old")
    _done(store, rs.Job(_fair_comp(), _fair_comp().arms[0], "tune", 2.2e-3, 0.02, 0, 2000), 2.5)
    path = tmp_path / "records.jsonl"
    records.write_records(store, path, "fair", {"corpora": {"ts-50k": {"split": "a made-up split",
                                                                       "unigram_bpc": 4.5}}})
    out = tmp_path / "rep" / "results.md"
    assert main(["report", "--campaign", "fair", "--collect", "--restore", str(path), "--store", str(tmp_path / "new"),
                 "--only", "ts-50k", "--out", str(out), "--no-png"]) == 0
    assert fetched == [] and "Corpus `tinyshakespeare` (a made-up split)." in out.read_text(encoding="utf-8")


def test_collect_says_how_its_run_count_follows_from_the_dry_runs(tmp_path, capsys):
    """``--collect`` of an empty fair store: its summary line names the runs planned so far and takes the
    ``--dry-run`` table's count to them (the regularisation runs join once an lr is tuned); a store that does
    not exist is named so, after "error:" as every command's error."""
    from geomlab.report.plan import estimate

    (tmp_path / "empty").mkdir()
    argv = ["report", "--campaign", "fair", "--collect", "--out", str(tmp_path / "r" / "results.md"), "--no-png",
            "--store"]
    assert main(argv + [str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    total = sum(r["runs"] for r in estimate())
    m = re.search(r": 0 of (\d+) runs planned so far finished \(no finished campaign run in .* yet\)\. The cost "
                  r"table of `--dry-run` counts .*, (\d+) runs; the \1 planned so far are \2 − (\d+) regularisation "
                  r"runs of arms still tuning their lr", out)
    assert m and int(m[2]) == total and int(m[1]) == total - int(m[3]), out
    assert main(argv + [str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --store {tmp_path / 'missing'} does not exist")


def _fair_comp():
    from geomlab.report.plan import FAIR

    return FAIR.known()["ts-50k"]


@pytest.mark.parametrize("sigint", ["default", "ignored"])
def test_killing_the_dispatcher_stops_its_runs(tmp_path, text_file, sigint):
    """submitit's local jobs outlive the process that submitted them and ignore SIGTERM; ``kill`` of the
    dispatcher (``geomlab report --converged``) cancels its runs in flight, so no run trains on unwatched (each
    resumes from its checkpoint next time); also when the dispatcher inherited SIGINT ignored, as a background
    job of a script does (``nohup ... &``), where submitit's cancel, a SIGINT, would not reach its runs."""
    pytest.importorskip("submitit")
    import os
    import signal
    import subprocess
    import sys
    import time

    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "geomlab", "report", "--converged", "--only", "ts-50k",
                             "--corpus-file", str(text_file), "--store", str(store), "--workers", "2", "--no-png"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint == "ignored"
                            else None)
    try:
        locks = []
        for _ in range(240):  # both runs hold their locks once their processes train
            locks = list(store.glob("**/lock"))
            if len(locks) == 2 and all(_held(f) for f in locks):
                break
            time.sleep(0.25)
        assert len(locks) == 2 and all(_held(f) for f in locks), proc.stdout.read1().decode() if proc.poll() else ""
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        for _ in range(120):
            if not any(_held(f) for f in locks):
                break
            time.sleep(0.25)
        assert not any(_held(f) for f in locks), "a run still trains after its dispatcher was killed"
    finally:
        time.sleep(2)  # the job controllers exit after their runs
        try:  # the dispatcher and whatever it left (its own process group)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        out = proc.stdout.read().decode()
        proc.stdout.close()
    assert "interrupted" in out and "Traceback" not in out, out  # submitit's controllers write to its folder
    assert "KeyboardInterrupt" in (store / "_submitit" / "controllers.log").read_text()


def _held(lock: Path) -> bool:
    import fcntl
    import os

    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_dispatcher_leading_its_session_lowers_its_autogroup(tmp_path):
    """Under autogroup scheduling nice ranks only within a session: a dispatcher started with setsid gives its
    whole group the campaign's nice; one sharing a session (a terminal's) leaves the group alone."""
    import subprocess
    import sys

    if not Path("/proc/self/autogroup").exists():
        pytest.skip("no autogroup scheduling here")
    # A process in the kernel's default group (a session no one started with setsid) reads the file as empty.
    code = ("from geomlab.commands.report import lower_autogroup; ok = lower_autogroup(19); "
            "print(ok, *open('/proc/self/autogroup').read().split()[-1:])")
    alone = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                           start_new_session=True, timeout=60)
    assert alone.stdout.split() == ["True", "19"], alone.stderr
    shared = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    ours = open("/proc/self/autogroup").read().split()[-1:]
    assert shared.stdout.split() == ["False", *ours], shared.stderr


def test_the_fair_campaigns_report_states_its_own_protocol():
    """The campaign report of the fair plan names it and states its rule (third-of-a-decade widening, the
    warm-up grid, the regularisation stage, the seed rule); the converged plan's wording stays as it was."""
    from geomlab.report.campaign import CONVERGED
    from geomlab.report.plan import FAIR
    from geomlab.report.render_converged import converged_header, converged_protocol

    def results(plan):
        return {"progress": {"done": 1, "planned": 9, "cpu_hours": 0.5}, "protocol": plan.to_dict(),
                "started": "2026-12-07 00:00 UTC", "machine": {"device": "cpu", "torch": "2"}}

    fair = "\n".join(converged_header(results(FAIR)) + converged_protocol(results(FAIR)))
    assert fair.startswith("# geomlab fair campaign report") and "`geomlab report --campaign fair`" in fair
    for text in ("x warm-up 2%, 10%;", "the next third of a decade", "weight decay and dropout as tuned",
                 "0.1 / 0.1 against none", "has a half-width under 0.02 BPC (gap ± less than 0.02), at most 8"):
        assert text in fair, text
    assert "no weight decay" not in fair and "(also )" not in fair and "half-decade" not in fair
    conv = "\n".join(converged_header(results(CONVERGED)) + converged_protocol(results(CONVERGED)))
    assert conv.startswith("# geomlab converged report") and "`geomlab report --converged`" in conv
    assert "no weight decay; seeds 0, 1, 2;" in conv and "next half-decade" in conv
