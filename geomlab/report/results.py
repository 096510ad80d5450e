"""The converged campaign's results: the report's results dict of everything finished so far (:func:`collect`:
rows, tuning tables, learning curves, the comparison at equal training time) and the store rebuilt from a
committed report (:func:`restore`)."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from geomlab.core.jsonread import read_json
from geomlab.report.campaign import Campaign, full_choice, reg_state, seeds_planned, tuning_state
from geomlab.report.protocol import Arm, Comparison
from geomlab.report.store import Job, RunStore


def _effective_params(outcome: dict[str, Any]) -> int:
    """The effective parameter count of a finished run's model config as :func:`geomlab.models.count_params`
    counts it (so the count follows the current counting rule, e.g. the torus prototypes' unread entries left
    out), else the count the run recorded. Built on the ``meta`` device: no memory, no random draws."""
    import torch

    from geomlab.models import build_model, count_params

    try:
        with torch.device("meta"):
            return count_params(build_model(outcome["config"]))
    except (KeyError, TypeError, ValueError):
        return outcome["params"]


def curve(outcome: dict[str, Any], batch_size: int, seq_len: int) -> list[tuple[int, float, float]]:
    """``[(step, training seconds, valid BPC)]`` of a run's validations (the periodic ones and the final one).
    Training seconds at a step are summed from the logged intervals (tokens / tokens-per-second of each
    interval, which the trainer measures without the evaluations), so a resumed run and one run through
    give the same clock. Source: design choice."""
    secs, last, clock = {0: 0.0}, 0, 0.0
    for h in outcome.get("history") or []:
        if "loss" in h and h.get("tokens_per_s"):
            clock += (h["step"] - last) * batch_size * seq_len / h["tokens_per_s"]
            last = h["step"]
            secs[h["step"]] = clock
    clock_at = sorted(secs.items())
    out = []
    for h in outcome.get("history") or []:
        v, t = h.get("valid_bpc"), at(clock_at, h["step"]) if "valid_bpc" in h else None
        if v is not None and t is not None and not (out and out[-1][0] == h["step"]):
            out.append((int(h["step"]), t, float(v)))
    return out


def at(points: list[tuple[float, float]], x: float) -> float | None:
    """Linear interpolation of ``[(x, y)]`` (sorted by x) at ``x``; ``None`` outside the measured range."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if points and math.isclose(points[-1][0], x):
        return points[-1][1]
    return None


TRACE_MS_FILE = "trace_ms.json"


def _trace_ms(store: RunStore, job: Job, length: int = 128) -> float | None:
    """Milliseconds to trace ``length`` characters with the finished run ``job``'s model, measured once and
    kept in its folder (:data:`TRACE_MS_FILE`): re-measured at every collect, on a machine busy with the
    campaign's workers, the same model's number swung 10x between snapshots. ``None`` without a readable
    checkpoint. Design choice."""
    from geomlab.checkpoints import io as checkpoint
    from geomlab.report.running import trace_latency_ms

    folder = store.folder(job)
    if not (folder / "ckpt").is_dir():  # a run restored from a report (:func:`restore`) keeps its number
        return (store.outcome(job) or {}).get("trace_ms")
    kept = folder / TRACE_MS_FILE
    try:
        return float(read_json(kept)["trace_ms"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        c = checkpoint.load(folder / "ckpt")
        ms = trace_latency_ms(c.model, c.model.config["vocab_size"], length)
    except Exception:  # a missing or unreadable checkpoint: no latency column, the rest stands
        return None
    try:
        kept.write_text(json.dumps({"trace_ms": ms, "length": length}), encoding="utf-8")
    except OSError:
        pass  # a read-only store: measured again next time
    return ms


def _tuning_jobs(campaign: Campaign, comp: Comparison, arm: Arm, tuning) -> list[Job]:
    return [Job(comp, arm, "tune", lr, wu, campaign.seeds[0], campaign.tune_steps(comp.key, arm.label))
            for lr, wu, _ in tuning]


def arm_row(campaign: Campaign, store: RunStore, comp: Comparison, arm: Arm) -> dict[str, Any]:
    """One table row of the campaign: the tuning so far (``tuning``, ``lr``/``warmup`` once decided,
    ``lr_sweep`` at the winning warm-up, ``tuning_note``), each finished seed's full-budget numbers, the
    learning curves (``curves``: per seed ``[(step, seconds, valid BPC)]``), ``late_gain`` (mean valid-BPC drop
    over the last 20% of the steps: > 0 means still improving) and ``status``."""
    from geomlab.report.aggregation import ci95, mean, std

    pending, tuning, best, note = tuning_state(campaign, store, comp, arm)
    steps = campaign.full_steps(comp.key, arm.label)
    planned = seeds_planned(campaign, store, comp)
    row: dict[str, Any] = {
        "label": arm.label, "kind": arm.kind, "baseline": arm.baseline, "paper": dict(arm.paper),
        "goal": arm.goal, "versus": arm.versus,
        "budget": arm.budget, "planned_seeds": list(planned), "seeds": [], "valid": [], "test": [],
        "tokens_per_s": [], "train_time_s": [], "cpu_s": [], "curves": [], "failed_seeds": [],
        "tuning": [{"lr": lr, "warmup": wu, "valid": v} for lr, wu, v in sorted(tuning)],
        "tuning_steps": campaign.tune_steps(comp.key, arm.label), "tuning_note": note, "steps": steps}
    reg = None
    if best is not None:
        row["lr_sweep"] = {str(lr): v for lr, wu, v in sorted(tuning) if wu == best[1]}
        row["tuned_lr"], row["tuned_warmup"] = best
        reg_pending, reg_tried, reg = reg_state(campaign, store, comp, arm, best)
        pending = pending + reg_pending
        if any(r != (0.0, 0.0) for r, _ in reg_tried) or reg_pending:
            row["reg_tuning"] = [{"weight_decay": r[0], "dropout": r[1], "valid": v} for r, v in reg_tried]
            plain = dict(reg_tried).get((0.0, 0.0))
            inert = [f"wd {r[0]:g}, dropout {r[1]:g}" for r, v in reg_tried
                     if r != (0.0, 0.0) and v is not None and v == plain]
            if inert:  # a setting that left the run bit for bit as it was did not act on the model
                row["reg_note"] = "no effect (valid BPC equal to the unregularised run's to the last bit): " + \
                    "; ".join(inert)
    if reg is not None:
        best, row["full_notes"] = full_choice(campaign, store, comp, arm, best, reg)
        row["lr"], row["warmup"] = best
        row["weight_decay"], row["dropout"] = reg
    else:
        best = None
    first = None
    # every seed finished at the row's final settings counts, also one the seed rule no longer asks for (run
    # before the rule settled on fewer): none is left out after the fact
    most = campaign.seed_rule[1] if campaign.seed_rule is not None and planned else len(planned)
    later = tuple(range(max(planned) + 1, max(planned) + 1 + most - len(planned))) if planned else ()
    for seed in (*planned, *later) if best is not None else ():
        job = Job(comp, arm, "full", best[0], best[1], seed, steps, reg)
        o = store.outcome(job)
        if o is None:
            if seed not in planned:
                continue
            step = store.step(job)
            if step:
                row.setdefault("in_progress", []).append({"seed": seed, "step": step})
            continue
        if o["status"] != "done":
            row["failed_seeds"].append({"seed": seed, "error": o.get("error", "")})
            continue
        first = first or job
        row["seeds"].append(seed)
        row["valid"].append(o["metrics"].get("valid_bpc"))
        row["test"].append(o["metrics"].get("test_bpc"))
        row["curves"].append(curve(o, campaign.batch_size, campaign.seq_len))
        secs = row["curves"][-1][-1][1] if row["curves"][-1] else o["train_time_s"]
        row["train_time_s"].append(secs)
        row["tokens_per_s"].append(steps * campaign.batch_size * campaign.seq_len / max(secs, 1e-9))
        row["cpu_s"].append(o.get("cpu_s"))
        row.setdefault("flops_per_step", o.get("flops_per_step"))
        row.update(params=_effective_params(o), params_stored=o["params_stored"], config=o["config"])
    row["valid_mean"], row["valid_std"], row["valid_ci95"] = mean(row["valid"]), std(row["valid"]), ci95(row["valid"])
    row["test_mean"], row["test_std"], row["test_ci95"] = mean(row["test"]), std(row["test"]), ci95(row["test"])
    row["tokens_per_s_mean"] = mean(row["tokens_per_s"])
    cpu = [c for c in row["cpu_s"] if c]
    row["tokens_per_cpu_s"] = steps * campaign.batch_size * campaign.seq_len / mean(cpu) if cpu else None
    gains = []
    for cv in row["curves"]:
        pts = [(s, v) for s, _, v in cv]
        early = at(pts, 0.8 * steps)
        if early is not None and pts:
            gains.append(early - pts[-1][1])
    row["late_gain"] = mean(gains)
    row["trace_ms"] = _trace_ms(store, first) if first else None
    reg_done = sum(1 for t in row.get("reg_tuning", []) if (t["weight_decay"], t["dropout"]) != (0.0, 0.0))
    n_tune = row["tuning_planned"] = len(tuning) + len(pending) + reg_done
    row["tuning_done"] = len(tuning) + reg_done
    if not pending and best is None and campaign.borrowed(comp, arm) is None:  # every lr diverged: no seed
        row["planned_seeds"] = []
    # CPU seconds per step of this arm, from any finished run (tuning runs give it early): the time left
    rates = [o["cpu_s"] / o["steps"] for j in _tuning_jobs(campaign, comp, arm, tuning) + ([
        Job(comp, arm, "full", best[0], best[1], s, steps, reg) for s in row["planned_seeds"]] if best else [])
        if (o := store.outcome(j)) and o.get("cpu_s") and o.get("status") == "done"]
    left = len(pending) * campaign.tune_steps(comp.key, arm.label) + (len(row["planned_seeds"]) - len(row["seeds"])
                                                           - len(row["failed_seeds"])) * steps
    row["cpu_s_per_step"] = sum(rates) / len(rates) if rates else None
    row["cpu_hours_left"] = row["cpu_s_per_step"] * left / 3600 if rates else (0.0 if left == 0 else None)
    if pending:
        row["status"] = f"tuning: {row['tuning_done']} of {n_tune} short runs"
    elif best is None and campaign.borrowed(comp, arm) is not None:
        row["status"] = note
    elif best is None:
        row["status"] = "tuning failed: " + note
    else:
        # the seeds named when a note names one (seeds count from 0: "seed 4" is a fifth seed)
        extra = [x for x in row["seeds"] if x not in row["planned_seeds"]]
        named = (row.get("full_notes") or extra) and row["seeds"]
        row["status"] = (f"{len(row['seeds']) - len(extra)} of {len(row['planned_seeds'])} seeds finished"
                         + (f" ({_seed_list([x for x in row['seeds'] if x not in extra])})" if named else "")
                         + (f", and {_seed_list(extra)} from before the seed rule settled on "
                            f"{len(row['planned_seeds'])}" if extra else "")
                         + (f", {len(row['failed_seeds'])} diverged" if row["failed_seeds"] else "")
                         + "".join(f"; seed {p['seed']} at step {p['step']:,}" for p in row.get("in_progress", [])))
    return row


def _seed_list(seeds: list[int]) -> str:
    """``seeds 0-3`` for a run of consecutive seeds, else ``seeds 0, 2, 5``."""
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"seeds {s[0]}–{s[-1]}"
    return ("seed " if len(s) == 1 else "seeds ") + ", ".join(map(str, s))


def equal_time(row: dict[str, Any], base: dict[str, Any]) -> dict[str, Any] | None:
    """The comparison at equal training time: for each seed both rows finished, at ``T_s`` = the shorter of
    the two runs' training times, each run's validation BPC reached by then (interpolated on its curve); the
    means over those seeds and the difference (row minus baseline, bits), with ``seconds`` the mean ``T_s``.
    ``None`` until both have a finished seed, or when the slower model had not validated yet by ``T_s`` on
    any seed (its first validation is ``eval_every`` steps in)."""
    from geomlab.report.aggregation import mean

    if row is base:
        return None
    mine, theirs, times = [], [], []
    for s in (s for s in row["seeds"] if s in base["seeds"]):
        ca, cb = row["curves"][row["seeds"].index(s)], base["curves"][base["seeds"].index(s)]
        if not ca or not cb:
            continue
        t = min(ca[-1][1], cb[-1][1])
        a, b = at([(sec, v) for _, sec, v in ca], t), at([(sec, v) for _, sec, v in cb], t)
        if a is not None and b is not None:
            mine.append(a)
            theirs.append(b)
            times.append(t)
    if not mine:
        return None
    return {"seconds": mean(times), "valid": mean(mine), "baseline_valid": mean(theirs),
            "gap": mean(mine) - mean(theirs), "seeds": len(mine)}


def collect(campaign: Campaign, store: RunStore, only: tuple[str, ...] | None = None,
            corpora: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The results dict of everything the store holds (train nothing): ``kind`` ``"converged"``, the campaign
    (``protocol``), ``progress`` (runs finished / planned so far, CPU hours spent), and one comparison per key
    with its rows (:func:`arm_row`), each against the baseline (speed, paired test gap, :func:`equal_time`).
    ``corpora``: each comparison's ``split`` rule and ``unigram_bpc`` (valid) by key, as a records file keeps
    them (default: read from the corpus when it is on this machine; a missing one is not downloaded)."""
    import datetime as _dt
    import platform

    import torch

    from geomlab.report.aggregation import compare_to_baseline, compare_to_versus, near_unigram

    comps = []
    done = planned = 0
    cpu = 0.0
    for comp in campaign.comparisons(only):
        rows = [arm_row(campaign, store, comp, arm) for arm in comp.arms]
        compare_to_baseline(rows)
        compare_to_versus(rows)
        base = next((r for r in rows if r["baseline"]), None)
        for r in rows:
            r["equal_time"] = equal_time(r, base) if base else None
            planned += r["tuning_planned"] + len(r["planned_seeds"])
            done += r["tuning_done"] + len(r["seeds"]) + len(r["failed_seeds"])
        try:
            if corpora is not None:
                raise LookupError("given")
            from geomlab.data.tasks import unigram_bpc
            from geomlab.training.zoo import make_task

            # a report reads what is here: no download (an empty store, or records read on a new machine)
            task = make_task(campaign.task_string(comp), download=False)
            split, uni = task.spec().get("split_rule", ""), unigram_bpc(task)
        except (ValueError, LookupError):  # the corpus is not on this machine (or given): the table still renders
            given = (corpora or {}).get(comp.key) or {}
            split, uni = given.get("split", ""), given.get("unigram_bpc")
        for r in rows:  # "every baseline trains": a model that ends near the unigram learned nothing else
            r["near_unigram"] = near_unigram(r.get("valid_mean"), uni)
        comps.append({"key": comp.key, "title": comp.title, "corpus": comp.corpus, "claim": comp.claim,
                      "note": comp.note, "split": split, "unigram_bpc": uni, "steps": campaign.full_steps(comp.key), "rows": rows})
    outcomes = list(store.root.glob("**/outcome.json"))
    latest = 0.0  # when the last run finished (s since the epoch)
    for f in outcomes:
        try:
            o = read_json(f)
            cpu += float(o.get("cpu_s") or 0.0)
            latest = max(latest, float(o.get("finished") or 0.0))
        except (OSError, ValueError, AttributeError, TypeError):  # unreadable, not JSON, not an object
            pass
    rows = [r for c in comps for r in c["rows"]]
    left = [r["cpu_hours_left"] for r in rows if r["cpu_hours_left"] is not None]
    return {"kind": "converged", "protocol": campaign.to_dict(),
            "started": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "progress": {"done": done, "planned": planned, "stored": len(outcomes), "cpu_hours": round(cpu / 3600, 2),
                         "latest": (_dt.datetime.fromtimestamp(latest, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
                                    if latest else None),
                         "cpu_hours_left_timed": round(sum(left), 1),
                         "untimed_arms": sum(r["cpu_hours_left"] is None for r in rows)},
            "machine": {"device": "cuda" if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
                        "python": platform.python_version(), "cpu": platform.processor() or platform.machine()},
            "comparisons": comps, "word_problem": None}


# ------------------------------------------------------------------------------------------ a new machine
_DIVERGED_NOTE = re.compile(r"lr ([0-9.e+-]+) diverged at the full budget \(seed (\d+)(?:, step ([\d,]+))?\)")


def restore(campaign: Campaign, store: RunStore, results: dict[str, Any]) -> int:
    """Write into ``store`` the outcome of every run that ``results`` (a converged report's ``results.json``,
    :func:`collect`) records as finished, so that workers on a machine without the old store resume the
    campaign where the report stopped instead of training it again. Restored per run: its status, validation
    (and, for a full run, test) BPC; for a full run also its learning curve (as a log that :func:`curve` reads
    back to the same points), training and CPU seconds, parameter counts, model config and trace latency; a
    seed that diverged at the full budget (from the row's notes) as a failed run. A tuning run's CPU seconds are
    estimated from its row's CPU seconds per step (``cpu_s_estimated``). Every restored outcome has
    ``restored: true`` and no checkpoint. A run whose folder already holds an outcome is left alone; rows of
    comparisons or arms ``campaign`` does not have are skipped. Returns the number of outcomes written. Raises
    ``ValueError`` when ``results`` is not a converged report. Source: design choice (a campaign
    outlives the machine it started on)."""
    if not isinstance(results, dict) or results.get("kind") != "converged":
        raise ValueError("not a converged report's results.json (its 'kind' is not 'converged')")
    batch, seq = campaign.batch_size, campaign.seq_len
    comps = {c.key: c for c in campaign.comparisons()}
    written = 0

    def put(job: Job, data: dict[str, Any]) -> None:
        nonlocal written
        if store.outcome(job) is not None:
            return
        store.folder(job).mkdir(parents=True, exist_ok=True)
        store.write(job, "outcome.json", {"key": job.key, "comparison": job.comp.key, "arm": job.arm.label,
                                          "phase": job.phase, "lr": job.lr, "warmup": job.warmup, "seed": job.seed,
                                          "steps": job.steps, "restored": True, **data})
        written += 1

    for c in results.get("comparisons") or []:
        comp = comps.get(c.get("key"))
        for r in (c.get("rows") or []) if comp else []:
            arm = next((a for a in comp.arms if a.label == r.get("label")), None)
            if arm is None:
                continue
            rate = r.get("cpu_s_per_step")
            tune = campaign.tune_steps(comp.key, arm.label)
            for t in r.get("tuning") or []:
                v = t.get("valid")
                put(Job(comp, arm, "tune", float(t["lr"]), float(t["warmup"]), campaign.seeds[0], tune),
                    {"status": "done" if v is not None else "failed", "metrics": {"valid_bpc": v} if v is not None
                     else {}, "error": "" if v is not None else "diverged (restored: the message was not kept)",
                     "history": [], "cpu_s": rate * tune if rate else None, "cpu_s_estimated": True})
            if r.get("lr") is None:
                continue
            steps = int(r.get("steps") or campaign.full_steps(comp.key, arm.label))
            for note in r.get("full_notes") or []:
                m = _DIVERGED_NOTE.match(note)
                if m:
                    step = f"step {m.group(3).replace(',', '')}: " if m.group(3) else ""
                    put(Job(comp, arm, "full", float(m.group(1)), float(r["warmup"]), int(m.group(2)), steps),
                        {"status": "failed", "metrics": {}, "history": [],
                         "error": f"{step}diverged (restored: the rest of the message was not kept)"})
            for f in r.get("failed_seeds") or []:
                put(Job(comp, arm, "full", float(r["lr"]), float(r["warmup"]), int(f["seed"]), steps),
                    {"status": "failed", "metrics": {}, "history": [], "error": f.get("error", "")})
            for i, seed in enumerate(r.get("seeds") or []):
                hist, last_step, last_s = [], 0, 0.0
                for step, secs, v in r["curves"][i] if i < len(r.get("curves") or []) else []:
                    if step > last_step and secs > last_s:
                        hist.append({"step": step, "loss": None,
                                     "tokens_per_s": (step - last_step) * batch * seq / (secs - last_s)})
                        last_step, last_s = step, secs
                    hist.append({"step": step, "valid_bpc": v})
                put(Job(comp, arm, "full", float(r["lr"]), float(r["warmup"]), int(seed), steps),
                    {"status": "done", "metrics": {"valid_bpc": r["valid"][i], "test_bpc": r["test"][i]},
                     "history": hist, "train_time_s": r["train_time_s"][i], "cpu_s": r["cpu_s"][i],
                     "params": r.get("params"), "params_stored": r.get("params_stored"),
                     "config": r.get("config") or {}, "trace_ms": r.get("trace_ms") if i == 0 else None})
    return written
