"""Hyper-parameter sweeps through Optuna: ``python -m geomlab sweep`` and the report's lr choice.

A sweep searches training keys (``lr``, ``warmup``, ...) and model config keys (``config.tau``, ...) of one
model kind, parameter budget and task. Each Optuna trial trains the model once per seed with the shared
run spec (:func:`geomlab.training.runs.build`, the model sized by :func:`geomlab.models.budget.resolve_config`, i.e.
:func:`geomlab.models.config_for_budget`) and scores the mean over seeds of the task's validation metric
(BPC for character corpora, perplexity for word corpora: minimised; accuracy for the word problem:
maximised). The test split is never looked at.

* **Search space**: :mod:`geomlab.training.sweep_space` (``KEY=log:LOW:HIGH``, ..., and the optima at an
  edge of their range).
* **Study**: :mod:`geomlab.training.sweep_study` (storage, resuming, diverged and invalid trials, the
  summary).
* **Pruning** (optional): the first seed's periodic validations are reported as intermediate values and
  Optuna's ``MedianPruner`` stops a trial whose value is worse than the median of earlier trials at the
  same step, only in the second half of its first seed (lr sweeps: slow starters are not cut early).

This module holds what one sweep trains (:class:`SweepSetup`), a trial over seeds (:func:`train_trial`) and
the sweep itself (:func:`run_sweep`); the names of the two modules above are importable from here too.

Sources: Optuna (Akiba et al., KDD 2019: define-by-run studies, TPE sampler, median pruning); everything
else here is a design choice.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from geomlab.core.extras import require
from geomlab.training.sweep_space import (  # noqa: F401 (the sweep's public names)
    DEFAULT_SEARCH, EDGE_FRACTION, TRAIN_KEYS, Dimension, SweepError, _show, check_space, edge_lines, edges,
    parse_search, split_params,
)
from geomlab.training.sweep_study import (  # noqa: F401 (the sweep's public names)
    open_storage, open_study, optimize, summary, trial_record, write_json,
)
from geomlab.training.sweep_workers import Worker, recover_stale, register, unregister
from geomlab.training.trainer import TrainingError


# ------------------------------------------------------------------------------------------- model sweeps
@dataclass
class SweepSetup:
    """What one sweep trains (stored on the study; a loaded study must have the same).

    kind: registered model kind. data: the task string of ``train --data``. budget: effective parameter
    budget (``config_for_budget``), or ``None`` to use ``config`` with the kind's defaults. config: fixed
    model config keys. train: fixed :class:`geomlab.training.trainer.TrainConfig` keys (not searched; ``seed``,
    ``final_eval`` and ``device`` are the sweep's). seeds: each trial trains once per seed; the objective is
    the mean. search: the search space as text (:meth:`Dimension.spec`). metric / direction: the task's
    validation metric and ``"minimize"`` / ``"maximize"`` (set by :func:`for_task`).
    """

    kind: str
    data: str
    budget: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    train: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0,)
    search: tuple[str, ...] = DEFAULT_SEARCH
    metric: str = ""
    direction: str = "minimize"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["seeds"], d["search"] = list(self.seeds), list(self.search)
        return d

    def for_task(self, task) -> "SweepSetup":
        """This setup with ``metric`` / ``direction`` from ``task`` (``task.metric``,
        ``task.higher_is_better``)."""
        self.metric = str(task.metric)
        self.direction = "maximize" if getattr(task, "higher_is_better", False) else "minimize"
        return self


def default_study_name(kind: str, data: str, budget: int | None = None, group: str | None = None) -> str:
    """``KIND[-GROUP]-DATA[-SIZE]``, e.g. ``lstm-tinyshakespeare-50k`` (file-name safe)."""
    stem = Path(data).stem if Path(data).suffix else data
    parts = [kind, group or "", stem, (f"{budget / 1000:.0f}k" if budget >= 1000 else str(budget)) if budget else ""]
    return "-".join(p for p in (re.sub(r"[^A-Za-z0-9._-]+", "-", x).strip("-") for x in parts) if p)


def trial_spec(setup: SweepSetup, params: dict[str, Any], seed: int, device: str = "auto"):
    """The :class:`geomlab.training.runs.RunSpec` of one seed of a trial: the ``strict`` preset (the budget met
    within 5%), ``setup``'s kind, task, budget and fixed model keys with the trial's model keys over them; the
    recipe is the one set of defaults (:class:`geomlab.training.config.Recipe`), then ``setup.train``, the trial's
    training keys, ``seed``, ``device`` and ``final_eval=False``."""
    from geomlab.training.runs import RunSpec

    train_keys, model_keys = split_params(params)
    train = {**setup.train, **train_keys, "seed": int(seed), "device": device, "final_eval": False}
    return RunSpec.preset("strict", kind=setup.kind, data=setup.data, params=setup.budget,
                          model_overrides={**setup.config, **model_keys}, **train)


def train_trial(setup: SweepSetup, task, params: dict[str, Any], trial=None, *, device: str = "auto",
                prune_after: int | None = None, log: Callable[[str], None] | None = None,
                run_dir: str | Path | None = None, tensorboard: bool = True) -> float:
    """Train ``setup`` with one trial's ``params`` once per seed and return the mean validation metric.

    Each seed is the run :func:`trial_spec` describes, built by :func:`geomlab.training.runs.build` on ``task`` (the
    model config from :func:`geomlab.models.budget.resolve_config`, the weights seeded with the seed; no
    checkpoint files; ``final_eval=False``: the last evaluation scores the first ``eval_tokens`` targets of
    the valid split only). The per-seed values go to the trial's user attribute ``seed_values``. With
    ``trial`` and ``prune_after`` (a step), the first seed's periodic validations are reported to Optuna at
    their step and from ``prune_after`` on a trial the pruner rejects is stopped (``optuna.TrialPruned``,
    user attributes ``outcome="pruned"``, ``pruned_at``). With ``run_dir`` each seed's run logs there
    (``run_dir/seed-S`` with several seeds; ``metrics.csv``, TensorBoard unless ``tensorboard`` is off:
    :mod:`geomlab.training.run_logs`).

    Raises :class:`geomlab.training.trainer.TrainingError` naming the seed when a run diverges, ``ValueError`` for a
    config the kind refuses."""
    from geomlab.training import runs

    values = []
    for i, seed in enumerate(setup.seeds):
        holder: dict[str, Any] = {}

        def _on_progress(p, i=i):
            if p.event != "eval" or trial is None or i > 0 or prune_after is None:
                return
            value = p.valid.get(setup.metric)
            if value is None or not math.isfinite(value):
                return
            trial.report(float(value), int(p.step))
            if p.step >= prune_after and trial.should_prune():
                holder["pruned_at"] = int(p.step)
                holder["trainer"].stop()

        logs = None if run_dir is None else Path(run_dir) / (f"seed-{seed}" if len(setup.seeds) > 1 else "")
        trainer = runs.build(trial_spec(setup, params, seed, device), task=task, callback=_on_progress,
                             run_dir=logs, tensorboard=tensorboard).trainer
        holder["trainer"] = trainer
        try:
            result = trainer.run()
        except TrainingError as exc:
            raise TrainingError(f"seed {seed}: {exc}", exc.step, exc.quantity) from exc
        if "pruned_at" in holder:
            optuna = require("optuna", "a sweep")

            trial.set_user_attr("outcome", "pruned")
            trial.set_user_attr("pruned_at", holder["pruned_at"])
            raise optuna.TrialPruned(f"pruned at step {holder['pruned_at']} of seed {seed}")
        value = float(result.metrics[f"valid_{setup.metric}"])
        values.append(value)
        if trial is not None:
            trial.set_user_attr("seed_values", list(values))
        if log and len(setup.seeds) > 1:
            log(f"  seed {seed}: valid {setup.metric} {value:.4f}")
    return sum(values) / len(values)


def _fmt(params: dict[str, Any]) -> str:
    return " ".join(f"{k}={_show(v)}" for k, v in params.items())


def _sampler(name: str, space, seed: int | None):
    """The Optuna sampler ``name`` (``tpe``, ``random``, ``grid``) seeded with ``seed``; :class:`SweepError` for
    another name, or ``grid`` over a range."""
    import optuna

    if name == "grid":
        ranges = [d.key for d in space if d.kind != "choice"]
        if ranges:
            raise SweepError(f"--sampler grid needs choice keys only (e.g. lr=choice:1e-3,3e-3,1e-2); {', '.join(ranges)} "
                             "are ranges")
        return optuna.samplers.GridSampler({d.key: list(d.choices) for d in space}, seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    raise SweepError(f"unknown sampler {name!r}; use tpe, random or grid")


def run_sweep(setup: SweepSetup, *, n_trials: int | None = 20, timeout: float | None = None,
              storage: str | Path | None = None, study_name: str | None = None, summary_path: str | Path | None = None,
              pruning: bool = True, sampler: str = "tpe", sampler_seed: int | None = None, device: str = "auto",
              log: Callable[[str], None] = print, runs_dir: str | Path | None = None,
              tensorboard: bool = True) -> dict[str, Any]:
    """Run (or continue) a sweep of ``setup`` and return its :func:`summary`.

    ``storage``: see :func:`open_storage` (``None`` = in memory). ``study_name``: default
    :func:`default_study_name`. ``summary_path``: the JSON summary, rewritten after every trial (``None`` =
    not written). ``pruning``: the median pruner on the first seed's periodic validations (needs
    ``train["eval_every"] > 0``). ``sampler``: ``"tpe"`` (default), ``"random"`` or ``"grid"`` (every
    combination of ``choice`` keys once; refused for ranges). ``sampler_seed`` seeds the sampler of the
    study's only worker; other workers derive their own from it, and a worker first fails and retries the
    trials of dead workers (:mod:`geomlab.training.sweep_workers`). ``runs_dir``: each trial's runs log to
    ``runs_dir/trial-N`` (:func:`train_trial`; ``None``: no logs).

    Raises :class:`SweepError` / ``ValueError`` (one line) for a bad request, before any training."""
    optuna = require("optuna", "a sweep")

    from geomlab.data.registry import make_task

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = parse_search(setup.search)
    task = make_task(setup.data)
    if getattr(task, "kind", "") == "regression":
        raise SweepError("the Gaussian-process regression task trains a CEM regressor, not a token model: run "
                         "`geomlab bench gp` (see docs/cem.md)")
    check_space(space, setup.kind, setup.config, setup.train)
    setup.for_task(task)
    setup.search = tuple(d.spec() for d in space)
    from geomlab.training.trainer import TrainConfig

    base = TrainConfig.from_dict(setup.train)  # the fixed keys are checked before any trial
    smp = _sampler(sampler, space, sampler_seed)
    prune_after = None
    if pruning and base.eval_every > 0:
        prune_after = max(1, base.steps // 2)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=5) if prune_after else optuna.pruners.NopPruner()
    name = study_name or default_study_name(setup.kind, setup.data, setup.budget, setup.config.get("group"))
    study = open_study(open_storage(storage), name, setup.direction, setup.to_dict(), sampler=smp, pruner=pruner)
    me = Worker()
    recovered = recover_stale(study)
    seed, note = register(study, me, sampler_seed)
    if seed != sampler_seed:
        study.sampler = _sampler(sampler, space, seed)
    before = len(study.trials)
    goal = "maximise" if setup.direction == "maximize" else "minimise"
    budget = f" at {setup.budget:,} parameters" if setup.budget else ""
    log(f"sweep {name}: {setup.kind}{budget} on {task.name}; {goal} the mean valid {setup.metric} over seed(s) "
        f"{', '.join(map(str, setup.seeds))}")
    log(f"  search {' '.join(setup.search)}; storage {storage or 'in memory'}"
        + (f" ({before} earlier trial(s))" if before else ""))
    if recovered:
        log(f"  trial(s) {', '.join(map(str, recovered))} of a dead worker: failed, and enqueued again")
    if note:
        log(note)

    def objective(params, trial):
        trial.set_user_attr("worker", me.record())
        log(f"trial {trial.number}: {_fmt(params)} ...")
        run_dir = Path(runs_dir) / f"trial-{trial.number}" if runs_dir is not None else None
        return train_trial(setup, task, params, trial, device=device, prune_after=prune_after, log=log,
                           run_dir=run_dir, tensorboard=tensorboard)

    def on_trial(t):
        rec = trial_record(t)
        if rec["state"] == "complete":
            line = f"trial {t.number}: valid {setup.metric} {rec['value']:.4f}"
        elif rec["state"] == "pruned":
            line = f"trial {t.number}: pruned at step {rec.get('pruned_at')} (worse than the median)"
        else:
            line = f"trial {t.number}: {rec['state']}: {rec.get('error', '')}"
        try:
            b = study.best_trial
            line += f" (best: trial {b.number}, {b.value:.4f})"
        except ValueError:
            pass
        log(line)
        if summary_path:
            write_json({**summary(study, space), "storage": str(storage) if storage else None}, summary_path)

    try:
        optimize(study, objective, space, n_trials=n_trials, timeout=timeout, on_trial=on_trial)
    finally:
        unregister(study, me)
        result = {**summary(study, space), "storage": str(storage) if storage else None}
        if summary_path:
            write_json(result, summary_path)
    return result


__all__ = [
    "TRAIN_KEYS", "DEFAULT_SEARCH", "EDGE_FRACTION", "SweepError", "Dimension", "parse_search", "check_space",
    "split_params", "edges", "edge_lines", "open_storage", "open_study", "optimize", "trial_record", "summary",
    "write_json", "SweepSetup", "default_study_name", "train_trial", "run_sweep",
]
