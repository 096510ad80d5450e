"""Rebuilding the bundled model zoo: training each recipe of :mod:`geomlab.training.zoo_recipes` and writing
its checkpoint with a card.

``python -m geomlab zoo --rebuild`` retrains the entries from scratch with :func:`geomlab.training.runs.run`
and :func:`geomlab.checkpoints.io.save` (:func:`rebuild`, :func:`build_entry`), so every number on a card comes
from the same code path as ``python -m geomlab train``; ``--from-run`` writes an entry from a finished run of its
recipe (:func:`adopt_entry`). The recipes' names (:data:`ZOO`, :class:`ZooEntry`, :func:`recipe`, ...) and the
card listing (:func:`read_cards`, :func:`format_card`, :mod:`geomlab.training.zoo_cards`) are importable from
here too.

Each checkpoint's JSON ``card`` holds: ``name``, ``title``, ``description``, ``corpus``, ``split`` (the
split rule), ``task``, ``steps``, ``batch_size``, ``seq_len``, ``lr``, ``seed``, ``params_effective`` /
``params_stored``, ``valid_bpc`` / ``test_bpc`` (language models, full splits, non-overlapping windows of
``seq_len``) or ``valid_accuracy`` / ``test_accuracy`` and ``accuracy_by_length`` (word problem),
``train_time_s``, ``tokens_per_s``, ``device``, ``torch_threads``, ``recipe`` (the entry as one flat dict,
:meth:`ZooEntry.to_dict`), ``notes`` (e.g. "short budget") and ``trained_on`` (date). The optimizer state is
not stored (smaller files); a rebuild reproduces the weights up to floating-point non-determinism of the device.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from geomlab.training import runs
from geomlab.training.runs import N_EVAL, RunOutcome
from geomlab.training.zoo_cards import card_name, format_card, read_cards  # noqa: F401 (the zoo's public names)
from geomlab.training.zoo_recipes import (  # noqa: F401 (the zoo's public names)
    ZOO, ZOO_DIR, ZooEntry, ZooError, entries, recipe, scaled,
)


# ----------------------------------------------------------------------------------------------- training
def make_task(spec: str, download: bool = True):
    """A :class:`geomlab.data.Task` from a zoo/report task string (:func:`geomlab.data.make_task`; synthetic
    tasks get :data:`geomlab.training.runs.N_EVAL` evaluation sequences). ``download``: fetch a registered
    corpus missing from this machine (else :class:`geomlab.data.DataError`, a ``ValueError``)."""
    from geomlab.data.registry import make_task as _make_task

    return _make_task(spec, download=download, n_eval=N_EVAL)


def train_and_evaluate(kind: str, task, *, budget: int | None = None, config: dict[str, Any] | None = None,
                       final_eval_tokens: int | None = None, callback: Callable | None = None,
                       progress_bar: bool = False, length_curriculum: Iterable[tuple[int, int]] = (),
                       **values: Any) -> RunOutcome:
    """Build a model of ``kind`` for ``task``, train it and evaluate: :func:`geomlab.training.runs.run` of the
    :func:`recipe` these arguments describe (``values``: ``steps``, ``batch_size``, ``seq_len``, ``lr``,
    ``seed``, ``warmup``, ... over the zoo preset; the budget met within 5%, the model built under
    :func:`geomlab.core.rng.seeded` with ``seed``; ``log_every`` ``min(50, steps)``; no periodic evaluation
    unless ``eval_every`` is given, so ``train_time_s`` counts only training steps).

    ``final_eval_tokens=None`` evaluates the whole valid and test splits; an integer caps both (used by quick
    reports on large corpora; the cap is reported). ``length_curriculum``: ``(seq_len, steps)`` pairs trained
    before the rest at ``seq_len``. Raises ``ValueError`` for a bad config and
    :class:`geomlab.training.trainer.TrainingError` for a diverged run.
    """
    from geomlab.data.registry import task_string

    spec = recipe(kind, budget=budget, config=config, length_curriculum=length_curriculum,
                  **{"data": task_string(task), "eval_every": 0, "final_eval": final_eval_tokens is None, **values})
    return runs.run(spec, task=task, final_eval_tokens=final_eval_tokens, callback=callback,
                    progress_bar=progress_bar)


def accuracy_by_length(model, task, lengths: Iterable[int], split: str = "test",
                       device: str | torch.device = "cpu") -> dict[int, float]:
    """Word problem: accuracy of the running-product label at the *last* position of sequences of each
    length (``{length: accuracy in [0, 1]}``), on the task's fixed evaluation sets. A model that cannot
    track the state falls to about ``1 / |G|`` at long lengths. Source: design choice."""
    out: dict[int, float] = {}
    param = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    if device == "cpu" and param is not None:  # evaluate where the model lives (CUDA after GPU training)
        device = param.device
    for n in lengths:
        acc = task.per_length_accuracy(model, split, length=int(n), device=device)
        out[int(n)] = float(acc[-1])
    return out


# ----------------------------------------------------------------------------------------------- rebuild
def build_entry(entry: ZooEntry, out_dir: str | Path = ZOO_DIR, *, progress_bar: bool = False,
                log: Callable[[str], None] | None = print) -> Path:
    """Train ``entry`` from scratch and write the checkpoint folder ``out_dir/NAME/`` with its card
    (:mod:`geomlab.checkpoints.io`; an existing flat pair ``NAME.json`` + ``NAME.safetensors`` is rebuilt flat in
    place: ``zoo --convert`` converts it).

    Returns the folder (or the flat pair's JSON path). Raises ``ValueError`` for a bad recipe, :class:`geomlab.data.DataError` when the
    corpus cannot be found (set ``GEOMLAB_DATA_DIR``), :class:`geomlab.training.trainer.TrainingError` if it diverges.
    """
    r = entry.run
    task = make_task(r.data)
    if log:
        log(f"[zoo] {entry.name}: {r.kind} on {r.data}, {r.steps} steps x {r.batch_size} x {r.seq_len}, "
            f"lr {r.lr}, seed {r.seed}")
    run = runs.run(r, task=task, progress_bar=progress_bar)
    return _write_entry(entry, out_dir, task, run.model, run.metrics, run.history, run.train_config,
                        train_time_s=run.train_time_s, cpu_time_s=run.cpu_time_s, log=log)


#: Training values that change the trained weights (a finished run is adopted only when they all match).
_WEIGHT_KEYS = ("steps", "batch_size", "seq_len", "lr", "seed", "warmup", "weight_decay", "min_lr_ratio",
                "grad_clip", "betas", "length_curriculum")


def adopt_entry(entry: ZooEntry, run_dir: str | Path, out_dir: str | Path = ZOO_DIR, *,
                log: Callable[[str], None] | None = print) -> Path:
    """Write ``entry``'s bundled checkpoint from a finished run instead of training it again (e.g. seed 0 of
    the converged campaign, :mod:`geomlab.report.campaign`, whose recipe the entry states): ``run_dir`` is the
    run's checkpoint folder. The run must be the entry's recipe: the same kind and model config (the budget's
    config, or the fixed keys), task and every training value that changes the weights (:data:`_WEIGHT_KEYS`),
    trained to its last step with the full final evaluation; the card is the one :func:`build_entry` writes
    (training time from the run; no optimizer state). Raises :class:`ZooError` naming the first difference, and
    :class:`geomlab.checkpoints.io.CheckpointError` for an unreadable checkpoint."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.models.budget import resolve_config

    r = entry.run
    if not Path(run_dir).is_dir():
        raise ZooError(f"{run_dir} is not a run's checkpoint folder (e.g. runs/converged/ts-50k/lstm/"
                       "full-10000/lr0.03-wu0.02-seed0/ckpt)")
    c = ckpt.load(run_dir)
    task = make_task(r.data)
    want_cfg = resolve_config(r.kind, task.vocab_size, r.params, r.fixed_config())
    have_cfg = dict(c.model.config)
    diffs = [f"model config {k}: {have_cfg.get(k)!r} (the recipe: {v!r})" for k, v in want_cfg.items()
             if have_cfg.get(k) != v]
    tc, want = dict(c.train_config or {}), r.train_config().to_dict()
    diffs += [f"{k}: {tc.get(k)!r} (the recipe: {want[k]!r})" for k in _WEIGHT_KEYS
              if _plain(tc.get(k)) != _plain(want.get(k))]
    card = c.card or {}
    if (card.get("task") or {}) != task.spec():
        diffs.append(f"task {card.get('corpus')!r} (the recipe: {r.data!r})")
    if card.get("steps") != r.steps or "test_bpc" not in card and "test_accuracy" not in card:
        diffs.append(f"the run stopped at step {card.get('steps')} of {r.steps}, or has no final evaluation")
    changed = [f"{k} at step {ch['step']}" for ch in card.get("resumed_with") or [] for k in ch
               if k in _WEIGHT_KEYS]
    if changed:
        diffs.append(f"it was resumed with other training values ({', '.join(changed)})")
    proto = card.get("eval_protocol") or {}
    if "test_bpc" in card and (proto.get("splits") != "full" or proto.get("stride") not in (None, r.seq_len)):
        diffs.append(f"its final evaluation was not the full splits in windows of {r.seq_len} ({proto})")
    if diffs:
        raise ZooError(f"{Path(run_dir).name} is not {entry.name}'s recipe: " + "; ".join(diffs[:3]))
    metrics = {k: v for k, v in card.items() if k.startswith(("valid_", "test_"))}
    cpu = threads = None
    outcome = Path(run_dir).parent / "outcome.json"  # a campaign run: its CPU seconds over every resumption
    if outcome.is_file():
        from geomlab.core.jsonread import read_json

        try:
            done = read_json(outcome)
        except (OSError, ValueError):  # unreadable: the CPU seconds stay unknown
            done = {}
        if isinstance(done, dict):
            cpu, threads = done.get("cpu_s"), done.get("threads")
    from geomlab.training.trainer import TrainConfig

    if log:
        log(f"[zoo] {entry.name}: adopting the finished run {Path(run_dir).as_posix()}")
    return _write_entry(entry, out_dir, task, c.model, metrics, list(c.metrics), TrainConfig.from_dict(tc),
                        train_time_s=float(card.get("train_time_s") or 0.0), cpu_time_s=cpu, log=log,
                        device=card.get("device"), threads=threads)


def _plain(x: Any) -> Any:
    """Tuples as lists (a JSON round trip), for comparing stored and recipe values."""
    return [_plain(v) for v in x] if isinstance(x, (list, tuple)) else x


def _write_entry(entry: ZooEntry, out_dir: str | Path, task, model, metrics: dict[str, Any], history: list,
                 train_config, *, train_time_s: float, cpu_time_s: float | None,
                 log: Callable[[str], None] | None, device: str | None = None,
                 threads: int | None = -1) -> Path:
    """The card and checkpoint of a trained zoo entry (see :func:`build_entry`). ``threads``: torch CPU threads
    of the training (-1: this process's; ``None``: not known, an adopted run that did not record them)."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.models import count_params

    r = entry.run
    is_lm = getattr(task, "kind", "lm") == "lm"
    spec = task.spec()
    tokens = train_config.tokens_through(int(train_config.steps))
    if device is None:
        device = str(train_config.device if train_config.device != "auto"
                     else ("cuda" if torch.cuda.is_available() else "cpu"))
    card: dict[str, Any] = {
        "name": entry.name, "title": entry.title, "description": entry.description, "kind": r.kind,
        "corpus": spec.get("corpus", spec.get("name")), "split": spec.get("split_rule", "generated (seeded)"),
        "task": spec, "steps": r.steps, "batch_size": r.batch_size, "seq_len": r.seq_len,
        "lr": r.lr, "seed": r.seed, "train_time_s": round(train_time_s, 1),
        "tokens_per_s": round(tokens / max(train_time_s, 1e-9), 1),
        "cpu_time_s": None if cpu_time_s is None else round(cpu_time_s, 1), "device": device,
        "torch_threads": torch.get_num_threads() if threads == -1 else threads, "recipe": entry.to_dict(), "notes": entry.notes,
        "trained_on": _dt.date.today().isoformat(), "zoo": True,
    }
    if "group" in model.config:
        card["group"] = model.config["group"]
    for k, v in metrics.items():
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            card[k] = round(float(v), 4) if k != "valid_tokens" and k != "test_tokens" else int(v)
    if is_lm:
        card["eval_protocol"] = {"windows": "non-overlapping", "seq_len": r.seq_len, "splits": "full",
                                 "state": "fresh per window"}
    else:
        card["accuracy_by_length"] = {str(k): round(v, 4) for k, v in
                                      accuracy_by_length(model, task, entry.eval_lengths).items()}
        card["eval_protocol"] = {"metric": "accuracy of the running product", "n_eval": task.n_eval,
                                 "length": task.length}
    card["params_effective"] = count_params(model, "effective")
    card["params_stored"] = count_params(model, "stored")
    stem = Path(out_dir) / entry.name
    path = ckpt.save(stem, model, task.vocab, card, train_config=train_config.to_dict(), metrics=history,
                     layout="auto")
    if log:
        main = (f"valid {card.get('valid_bpc')} / test {card.get('test_bpc')} BPC" if is_lm else
                f"test accuracy {card.get('test_accuracy')}, by length {card.get('accuracy_by_length')}")
        log(f"[zoo] {entry.name}: {card.get('params_effective', '?')} params, {main}, "
            f"{train_time_s:.0f} s, {card['tokens_per_s']:.0f} tok/s -> {path}")
    return path


def rebuild(only: str | Iterable[str] | None = None, steps_scale: float = 1.0, out_dir: str | Path = ZOO_DIR,
            *, progress_bar: bool = False, log: Callable[[str], None] | None = print) -> list[Path]:
    """Retrain the zoo (or the entries in ``only``) from scratch into ``out_dir``; returns the checkpoint paths.

    ``steps_scale`` multiplies every entry's steps (e.g. 0.01 for a smoke run; the card records the steps
    actually used). Raises :class:`ZooError` for unknown names or a bad scale."""
    chosen = [scaled(e, steps_scale) for e in entries(only)]
    return [build_entry(e, out_dir, progress_bar=progress_bar, log=log) for e in chosen]


__all__ = [
    "ZOO", "ZOO_DIR", "ZooEntry", "ZooError", "RunOutcome", "entries", "scaled", "recipe",
    "make_task",
    "train_and_evaluate", "accuracy_by_length", "build_entry", "adopt_entry", "rebuild", "read_cards", "format_card",
]
