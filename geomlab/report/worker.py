"""One run of a campaign: its recipe (:func:`job_spec`), its training with the record it leaves
(:func:`train_job`) and the call a job scheduler runs (:func:`run_job`; :mod:`geomlab.report.dispatch` submits
it)."""

from __future__ import annotations

import time
from typing import Any, Callable

from geomlab.report.campaign import Campaign
from geomlab.report.store import Job, RunStore


def job_spec(campaign: Campaign, job: Job, device: str = "auto"):
    """The :class:`geomlab.training.runs.RunSpec` of ``job`` (the report's recipe, :func:`geomlab.training.zoo.recipe`: the
    budget met within 5%; validation of the whole valid split every ``eval_every`` steps; at the end the whole
    valid and test splits, or for a tuning run only the valid split, which is all the tuning reads)."""
    from geomlab.training.zoo import recipe

    config = {**job.arm.config, **({"dropout": job.reg[1]} if job.reg[1] else {})}
    return recipe(job.arm.kind, budget=job.arm.budget or None, config=config,
                  data=campaign.task_string(job.comp),
                  steps=job.steps, batch_size=campaign.batch_size, seq_len=campaign.seq_len, lr=job.lr,
                  seed=job.seed, warmup=job.warmup, weight_decay=job.reg[0], eval_every=min(campaign.eval_every, job.steps),
                  eval_tokens=None, final_eval=job.phase == "full", device=device)


def train_job(campaign: Campaign, store: RunStore, job: Job, task, log: Callable[[str], None] = print,
              device: str = "auto") -> dict[str, Any]:
    """Train ``job`` (resuming its checkpoint when there is one), write and return its outcome: ``status``
    (``done``/``failed``), ``metrics`` (full valid and test splits), ``history`` (validations and the loss
    every ``log_every`` steps, with training seconds), ``train_time_s``, ``cpu_s`` (process CPU seconds over
    every resumption), ``tokens_per_s``, ``params``, ``params_stored``, ``config``, ``threads`` (torch CPU
    threads of this worker), ``flops_per_step`` (:func:`geomlab.report.flops.step_flops` of the model at the
    campaign's batch), ``provenance`` (:func:`geomlab.report.records.provenance`: commit, date, host, torch,
    data sha256), ``weight_decay``, ``dropout``, ``error``."""
    import torch

    from geomlab.models import count_params
    from geomlab.report.flops import FlopsError, step_flops
    from geomlab.report.records import provenance
    from geomlab.training import runs
    from geomlab.training.trainer import Trainer, TrainingError

    ckpt_dir = store.folder(job) / "ckpt"
    spec = job_spec(campaign, job, device)
    cpu0 = store.cpu_so_far(job)
    c0 = time.process_time()

    def on_progress(p) -> None:
        if p.event == "eval":
            store.write(job, "cpu.json", {"cpu_s": cpu0 + time.process_time() - c0})

    if (ckpt_dir / "config.json").is_file():
        log(f"[converged] {job.key}: resuming")
        trainer = Trainer.from_checkpoint(ckpt_dir, task, out=ckpt_dir, callback=on_progress,
                                          overrides={"device": device})  # a GPU run goes on on the CPU
    else:
        log(f"[converged] {job.key}: starting")
        trainer = runs.build(spec, task=task, out=ckpt_dir, callback=on_progress).trainer
    out: dict[str, Any] = {"key": job.key, "comparison": job.comp.key, "arm": job.arm.label, "phase": job.phase,
                           "lr": job.lr, "warmup": job.warmup, "seed": job.seed, "steps": job.steps,
                           "weight_decay": job.reg[0], "dropout": job.reg[1]}
    try:
        result = trainer.run()
        out.update(status="done", metrics=dict(result.metrics))
    except TrainingError as exc:
        out.update(status="failed", metrics={}, error=str(exc).splitlines()[0][:300])
    cpu = cpu0 + time.process_time() - c0
    tcfg = trainer.config
    keep = [h for h in trainer.history if "valid_bpc" in h or "final" in h
            or ("loss" in h and h["step"] % max(tcfg.log_every, job.steps // 200) == 0)]
    out.update(history=keep, train_time_s=trainer.elapsed_s, cpu_s=cpu,
               tokens_per_s=tcfg.tokens_through(trainer.step) / max(trainer.elapsed_s, 1e-9),
               params=count_params(trainer.model, "effective"), params_stored=count_params(trainer.model, "stored"),
               config=dict(getattr(trainer.model, "config", {}) or {}), finished=time.time(),
               threads=torch.get_num_threads(), provenance=provenance(task, device=str(next(trainer.model.parameters()).device)))
    try:
        out["flops_per_step"] = step_flops(out["config"], campaign.batch_size, campaign.seq_len)
    except FlopsError:
        out["flops_per_step"] = None
    store.write(job, "outcome.json", out)
    v = out["metrics"].get("valid_bpc")
    t = out["metrics"].get("test_bpc")
    log(f"[converged] {job.key}: {out['status']}" + (f", valid {v:.4f}" + (f" / test {t:.4f}" if t else "")
                                                    + f" BPC, {trainer.elapsed_s / 60:.1f} min" if v else ""))
    return out


def run_job(campaign: Campaign, root: str, job: Job, device: str = "cpu", threads: int | None = 1,
            nice: int = 0) -> dict[str, Any] | None:
    """Train ``job`` of ``campaign`` in the store at ``root`` in this process (what a job scheduler runs,
    :mod:`geomlab.report.dispatch`): at ``nice`` priority (added to the process's own), with ``threads`` torch
    threads (``None``: torch's default), holding the run's lock (:meth:`RunStore.acquire`) so that no second
    process trains it at the same time. Returns the outcome, or ``None`` when another live process holds the run
    or it finished meanwhile. Raises what :func:`train_job` raises (a bad checkpoint, a missing corpus)."""
    import os

    import torch

    from geomlab.training.zoo import make_task

    if nice:
        os.nice(nice)
    if threads:
        torch.set_num_threads(int(threads))
    store = RunStore(root)
    if not store.acquire(job):
        return None
    try:
        return train_job(campaign, store, job, make_task(campaign.task_string(job.comp)), device=device)
    finally:
        store.release(job)
