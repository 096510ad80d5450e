"""Running a report: train and evaluate every arm of each comparison under one :class:`Protocol` (through
:func:`geomlab.training.zoo.train_and_evaluate`), tune each language model's learning rate with the sweep tool
(:func:`tune_lr`, an Optuna grid study that a storage shares between processes), train the group word
problem, time the trace (:func:`trace_latency_ms`), and collect everything in the results dict that
``results.json`` stores (:func:`run_report`). A failing arm is recorded with its error; the others still run."""

from __future__ import annotations

import datetime as _dt
import platform
import statistics
import time
import traceback
from typing import Any, Callable

import torch

from geomlab.core.extras import require
from geomlab.report.aggregation import compare_to_baseline, mean_accuracy, summarize_row
from geomlab.report.protocol import COMPARISONS, WORD_PROBLEM_ARMS, Comparison, Protocol
from geomlab.training.trainer import TrainingError
from geomlab.training.zoo import accuracy_by_length, make_task, train_and_evaluate


def trace_latency_ms(model, vocab_size: int, length: int, repeats: int = 3) -> float:
    """Median wall time in milliseconds of one ``geomlab.trace.trace`` call (``model.record`` plus the
    conversion to a typed trace) on a fixed pseudo-random sequence of ``length`` tokens. Falls back to
    ``model.record`` when the trace module cannot wrap the record. Source: design choice."""
    g = torch.Generator().manual_seed(0)
    max_len = (getattr(model, "config", None) or {}).get("max_len")
    if max_len and (getattr(model, "config", None) or {}).get("positions", "learned") == "learned":
        length = min(int(length), int(max_len))  # learned positions: cannot trace beyond max_len
    tokens = torch.randint(0, int(vocab_size), (1, int(length)), generator=g)
    param = next(model.parameters(), None)
    if param is not None:
        tokens = tokens.to(param.device)
    model.eval()
    try:
        from geomlab.trace import trace as _trace

        def call():
            _trace(model, tokens)
        call()
    except Exception:  # trace module missing or not ready for this kind: time the record itself
        def call():
            with torch.no_grad():
                model.record(tokens)
        call()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)


def _task_for(corpus: str, proto: Protocol):
    return make_task(proto.corpus_override or f"corpus:{corpus}")


def tune_lr(train: Callable[[int, float], Any], grid: tuple[float, ...], seed: int, label: str = "",
            log: Callable[[str], None] = print, storage: str | None = None,
            setup: dict[str, Any] | None = None) -> tuple[dict[str, float | None], float, Any]:
    """The report's learning-rate choice: an Optuna study (:mod:`geomlab.training.sweep`, in memory, ``GridSampler``:
    every lr of ``grid`` once, in the grid's order) whose objective is the validation BPC of ``train(seed, lr)``
    (a :class:`geomlab.training.zoo.RunOutcome`). A diverged lr (:class:`geomlab.training.trainer.TrainingError`) loses the sweep
    and is recorded as ``None``.

    Returns ``(lr_sweep, best_lr, best_run)``: ``lr_sweep`` maps ``str(lr)`` to its validation BPC in grid
    order (the report JSON's ``lr_sweep``), ``best_run`` is the outcome of the best lr (reused as the row's
    first seed). Raises :class:`geomlab.training.trainer.TrainingError` when no lr of the grid finished. Design choice:
    one tuning rule for every model.

    ``storage`` (an Optuna storage URL or journal file, :func:`geomlab.training.sweep.open_storage`) shares the study
    ``lr/LABEL/seedSEED`` between processes and machines (``geomlab report --lr-storage``): each runs only the
    grid's learning rates no trial has taken yet, the values of the others' finished trials count, and the
    best lr's run is trained here when another worker ran it (same seed, so the same run). ``setup`` is stored
    on the study; a study of another protocol under that name is refused (:class:`geomlab.training.sweep.SweepError`)."""
    optuna = require("optuna", "tuning the learning rate")

    from geomlab.training import sweep

    grid = tuple(dict.fromkeys(float(x) for x in grid))
    space = (sweep.Dimension("lr", "choice", choices=grid),)
    runs: dict[float, Any] = {}

    def objective(params, trial):
        lr = params["lr"]
        log(f"[report] {label} / lr sweep {lr} (seed {seed}) ...")
        out = train(seed, lr)
        runs[lr] = out
        v = out.metrics.get("valid_bpc")
        return float("nan") if v is None else v

    def on_trial(t):
        rec = sweep.trial_record(t)
        if rec["state"] == "complete":
            log(f"[report]   lr {rec['params']['lr']}: valid {round(rec['value'], 4)} BPC")
        else:
            log(f"[report]   lr {rec['params'].get('lr')} {rec['state']}: {rec.get('error', '')}")

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    name = f"lr/{label}/seed{seed}" if storage is not None else "lr"
    study = sweep.open_study(sweep.open_storage(storage), name, "minimize",
                             {**(setup or {}), "grid": list(grid), "seed": seed} if storage is not None else None,
                             sampler=optuna.samplers.GridSampler({"lr": list(grid)}, seed=0))
    taken = {t.params.get("lr") for t in study.get_trials(deepcopy=False)}
    todo = [lr for lr in grid if lr not in taken]
    if len(todo) < len(grid):
        log(f"[report] {label}: {len(grid) - len(todo)} of the grid's learning rates already taken in {name}")
    for lr in todo:  # in the grid's order (the GridSampler alone would shuffle it)
        study.enqueue_trial({"lr": lr})
    if todo:
        sweep.optimize(study, objective, space, n_trials=len(todo), on_trial=on_trial)
    result = sweep.summary(study, space)
    values = {t["params"]["lr"]: t["value"] for t in result["trials"]
              if "lr" in t["params"] and t["state"] == "complete"}
    if result["best"] is None:
        raise TrainingError("every learning rate of the grid failed: " + "; ".join(
            f"lr {t['params'].get('lr')}: {t.get('error', t['state'])}" for t in result["trials"]))
    best = result["best"]["params"]["lr"]
    if best not in runs:  # another worker trained it: the same seed gives the same run
        log(f"[report] {label}: lr {best} won in the shared study; training it here for the row")
        runs[best] = train(seed, best)
    return {str(lr): values.get(lr) for lr in grid}, best, runs[best]


def run_comparison(comp: Comparison, proto: Protocol, log: Callable[[str], None] = print,
                   lr_storage: str | None = None) -> dict[str, Any]:
    """Train and evaluate every arm of ``comp`` under ``proto``; a failing arm is recorded with its error
    (the report shows it) and the others still run. Returns the comparison's result dict."""
    task = _task_for(comp.corpus, proto)
    spec = task.spec()
    rows = []
    for arm in comp.arms:
        row: dict[str, Any] = {"label": arm.label, "kind": arm.kind, "baseline": arm.baseline,
                               "paper": dict(arm.paper), "budget": int(arm.budget * proto.budget_scale),
                               "seeds": list(proto.seeds), "valid": [], "test": [], "tokens_per_s": [],
                               "train_time_s": []}
        try:
            from geomlab.models import count_params

            def train(seed: int, lr: float):
                return train_and_evaluate(arm.kind, task, budget=row["budget"], config=arm.config,
                                          steps=proto.steps, batch_size=proto.batch_size, seq_len=proto.seq_len,
                                          lr=lr, seed=seed, warmup=proto.warmup,
                                          final_eval_tokens=proto.eval_tokens)

            first = None
            if proto.lr_grid:  # one tuning rule for every model: best validation BPC on the first seed
                row["lr_sweep"], row["lr"], first = tune_lr(
                    train, proto.lr_grid, proto.seeds[0], f"{comp.key} / {arm.label}", log, storage=lr_storage,
                    setup={"profile": proto.name, "steps": proto.steps, "batch_size": proto.batch_size,
                           "seq_len": proto.seq_len, "warmup": proto.warmup, "corpus": proto.corpus_override})
            else:
                row["lr"] = proto.lr
            for i, seed in enumerate(proto.seeds):
                log(f"[report] {comp.key} / {arm.label} / seed {seed} (lr {row['lr']}) ...")
                out = first if (i == 0 and first is not None) else train(seed, row["lr"])
                row["params"] = count_params(out.model, "effective")
                row["params_stored"] = count_params(out.model, "stored")
                row["config"] = out.config
                row["valid"].append(out.metrics.get("valid_bpc"))
                row["test"].append(out.metrics.get("test_bpc"))
                row["eval_tokens"] = out.metrics.get("test_tokens")
                row["tokens_per_s"].append(out.tokens_per_s)
                row["train_time_s"].append(out.train_time_s)
                row.setdefault("cpu_s", []).append(out.cpu_time_s)
                row.setdefault("history", [h for h in out.history if "loss" in h])
                log(f"[report]   {row['params']} params, valid {out.metrics.get('valid_bpc'):.4f} / test "
                    f"{out.metrics.get('test_bpc'):.4f} BPC, {out.tokens_per_s:.0f} tok/s")
            row["trace_ms"] = trace_latency_ms(out.model, task.vocab_size, proto.latency_len)
        except Exception as exc:  # keep going: the report shows the failure
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log(f"[report]   FAILED {row['error']}")
            log(traceback.format_exc(limit=3))
        summarize_row(row, proto)
        rows.append(row)
    compare_to_baseline(rows)
    return {"key": comp.key, "title": comp.title, "corpus": spec.get("corpus", spec.get("name")),
            "split": spec.get("split_rule", ""), "claim": comp.claim, "note": comp.note, "rows": rows}


def run_word_problem(proto: Protocol, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train every :data:`WORD_PROBLEM_ARMS` model on each group of ``proto.wp_groups`` at length
    ``wp_train_len`` and measure final-position accuracy at each of ``wp_lengths`` (test sets)."""
    rows = []
    for group in proto.wp_groups:
        task = make_task(f"word-problem:{group}:{proto.wp_train_len}")
        for arm in WORD_PROBLEM_ARMS:
            row: dict[str, Any] = {"group": group, "label": arm.label, "kind": arm.kind,
                                   "budget": int(arm.budget * proto.budget_scale), "seeds": list(proto.seeds),
                                   "acc": {}, "tokens_per_s": []}
            per_seed: list[dict[int, float]] = []
            try:
                for seed in proto.seeds:
                    log(f"[report] word problem {group} / {arm.label} / seed {seed} ...")
                    out = train_and_evaluate(arm.kind, task, budget=row["budget"], config=arm.config,
                                             steps=proto.wp_steps, batch_size=proto.wp_batch_size,
                                             seq_len=proto.wp_train_len, lr=proto.wp_lr, seed=seed,
                                             warmup=proto.warmup, final_eval_tokens=None,
                                             length_curriculum=proto.wp_curriculum)
                    from geomlab.models import count_params

                    row["params"] = count_params(out.model, "effective")
                    row["config"] = out.config
                    per_seed.append(accuracy_by_length(out.model, task, proto.wp_lengths))
                    row["tokens_per_s"].append(out.tokens_per_s)
                    log(f"[report]   {row['params']} params, accuracy by length {per_seed[-1]}")
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
                log(f"[report]   FAILED {row['error']}")
            row["acc"] = mean_accuracy(per_seed, proto.wp_lengths)
            row["chance"] = 1.0 / task.vocab_size
            rows.append(row)
    return {"train_len": proto.wp_train_len, "lengths": list(proto.wp_lengths), "groups": list(proto.wp_groups),
            "rows": rows}


def run_report(proto: Protocol, log: Callable[[str], None] = print, lr_storage: str | None = None) -> dict[str, Any]:
    """Run every comparison in ``proto.comparisons`` and then the group word problem (skipped when
    ``proto.wp_steps`` is 0). Returns the results dict that :func:`render_markdown` and :func:`write_report`
    consume (protocol, machine, start time, wall time, comparisons, word_problem). ``lr_storage``: where the
    learning-rate studies live (:func:`tune_lr`; ``None``: in memory)."""
    t0, c0 = time.time(), time.process_time()
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    comps = [run_comparison(COMPARISONS[k], proto, log, lr_storage) for k in proto.comparisons if k in COMPARISONS]
    wp = run_word_problem(proto, log) if proto.wp_steps > 0 else None
    return {
        "protocol": proto.to_dict(), "started": started, "wall_s": round(time.time() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
        "machine": {"device": "cuda" if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
                    "threads": torch.get_num_threads(), "python": platform.python_version(),
                    "cpu": platform.processor() or platform.machine()},
        "comparisons": comps, "word_problem": wp,
    }


