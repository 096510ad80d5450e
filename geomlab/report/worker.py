"""The converged campaign's worker: one run of the campaign (:func:`job_spec`, :func:`train_job`) and the loop
that trains the next run no other worker holds (:func:`work`)."""

from __future__ import annotations

import time
from typing import Any, Callable

from geomlab.report.campaign import Campaign, blocked, jobs
from geomlab.report.store import Job, RunStore


def job_spec(campaign: Campaign, job: Job, device: str = "auto"):
    """The :class:`geomlab.training.runs.RunSpec` of ``job`` (the report's recipe, :func:`geomlab.training.zoo.recipe`: the
    budget met within 5%; validation of the whole valid split every ``eval_every`` steps; at the end the whole
    valid and test splits, or for a tuning run only the valid split, which is all the tuning reads)."""
    from geomlab.training.zoo import recipe

    return recipe(job.arm.kind, budget=job.arm.budget or None, config=job.arm.config,
                  data=campaign.task_string(job.comp),
                  steps=job.steps, batch_size=campaign.batch_size, seq_len=campaign.seq_len, lr=job.lr,
                  seed=job.seed, warmup=job.warmup, eval_every=min(campaign.eval_every, job.steps),
                  eval_tokens=None, final_eval=job.phase == "full", device=device)


def train_job(campaign: Campaign, store: RunStore, job: Job, task, log: Callable[[str], None] = print,
              device: str = "auto") -> dict[str, Any]:
    """Train ``job`` (resuming its checkpoint when there is one), write and return its outcome: ``status``
    (``done``/``failed``), ``metrics`` (full valid and test splits), ``history`` (validations and the loss
    every ``log_every`` steps, with training seconds), ``train_time_s``, ``cpu_s`` (process CPU seconds over
    every resumption), ``tokens_per_s``, ``params``, ``params_stored``, ``config``, ``threads`` (torch CPU
    threads of this worker), ``error``."""
    import torch

    from geomlab.training import runs
    from geomlab.models import count_params
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
                           "lr": job.lr, "warmup": job.warmup, "seed": job.seed, "steps": job.steps}
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
               threads=torch.get_num_threads())
    store.write(job, "outcome.json", out)
    v = out["metrics"].get("valid_bpc")
    t = out["metrics"].get("test_bpc")
    log(f"[converged] {job.key}: {out['status']}" + (f", valid {v:.4f}" + (f" / test {t:.4f}" if t else "")
                                                    + f" BPC, {trainer.elapsed_s / 60:.1f} min" if v else ""))
    return out


def work(campaign: Campaign, store: RunStore, only: tuple[str, ...] | None = None,
         log: Callable[[str], None] = print, max_jobs: int | None = None, wait_s: float = 60.0,
         device: str = "auto") -> int:
    """A worker: train the next job no live worker holds, until none is left (waiting ``wait_s`` between looks
    while other workers' tuning runs gate the rest), or ``max_jobs`` finished. A job that raises (other than
    a diverged run, which is an outcome) is logged and skipped by this worker. Returns the jobs it finished.
    Several workers (processes, machines sharing ``store``) split the campaign between them."""
    from geomlab.training.zoo import make_task

    tasks: dict[str, Any] = {}
    finished = 0
    broken: set[str] = set()  # jobs that raised here: skipped for the rest of this worker's life
    while max_jobs is None or finished < max_jobs:
        job = next((j for j in jobs(campaign, store, only)
                    if j.key not in broken and store.acquire(j)), None)  # acquire refuses a held job
        if job is None:
            if blocked(campaign, store, only) and not broken:
                log(f"[converged] waiting {wait_s:.0f} s for other workers' tuning runs")
                time.sleep(wait_s)
                continue
            break
        try:
            name = campaign.task_string(job.comp)
            if name not in tasks:
                tasks[name] = make_task(name)
            train_job(campaign, store, job, tasks[name], log, device)
            finished += 1
        except Exception as exc:  # a bad checkpoint, a missing corpus...: say so, leave the run, go on
            broken.add(job.key)
            log(f"[converged] {job.key}: not trained ({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); "
                "this worker skips it")
        finally:
            store.release(job)
    return finished
