"""``python -m geomlab sweep``: search training and model config keys with Optuna (see :mod:`geomlab.training.sweep`)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from pathlib import Path

from geomlab.commands import (DEVICE_HELP, add_threads_argument, check_outputs, device_option, make_folders, number,
                              recipe_option)
from geomlab.commands.train import kind_option, params_option

HELP = ("search the learning rate (or any training / model config key) of a model kind with Optuna: mean "
        "validation metric over seeds, resumable study, JSON summary")

#: Recipe keys that ``python -m geomlab train`` takes as flags (for the printed retrain command).
_TRAIN_FLAGS = {"lr": "--lr", "weight_decay": "--weight-decay", "warmup": "--warmup", "grad_clip": "--grad-clip",
                "batch_size": "--batch-size", "steps": "--steps", "seq_len": "--seq-len"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``sweep`` options; the fixed training values' defaults are the recipe's
    (:class:`geomlab.training.config.Recipe`), shown in the help text."""
    from geomlab.training.config import Recipe

    D = Recipe()
    p.add_argument("--model", metavar="KIND", type=kind_option, required=True, help="model kind from the registry "
                   "(`python -m geomlab train --list-models`)")
    p.add_argument("--group", metavar="G", help="matrix Lie group for geometric kinds (config key 'group')")
    p.add_argument("--params", type=params_option, metavar="N", help="parameter budget, e.g. 50k: config_for_budget sizes every trial's "
                   "model to it (also when a config key is searched)")
    p.add_argument("--config", nargs="*", metavar="KEY=VALUE", default=[], help="fixed model config values (JSON)")
    p.add_argument("--data", metavar="CORPUS|FILE|word-problem:G[:LEN]", required=True,
                   help="the task, as for `train --data`")
    p.add_argument("--search", nargs="+", metavar="KEY=SPEC", default=None,
                   help="the searched keys (default lr=log:1e-4:1e-1): KEY=log:LOW:HIGH (log-uniform), "
                   "KEY=float:LOW:HIGH, KEY=int:LOW:HIGH or KEY=choice:A,B,...; KEY is a training key (lr, "
                   "weight_decay, warmup, min_lr_ratio, grad_clip, batch_size, steps, seq_len) or config.NAME "
                   "for a model config key, e.g. --search lr=log:1e-4:1e-1 warmup=int:0:500 config.tau=float:1:10")
    p.add_argument("--seeds", type=number(int, 1, 1000), default=1, metavar="N", help="train each trial with seeds 0..N-1; the "
                   "objective is the mean (default 1)")
    p.add_argument("--n-trials", type=number(int, 1, 10**6), default=20, metavar="N",
                   help="trials this process runs (added to those already in the study; default 20)")
    p.add_argument("--timeout", type=number(float, 0.0, 1e9, above=True), default=None, metavar="SECONDS",
                   help="start no trial after this many seconds (the running one finishes)")
    p.add_argument("--study-name", metavar="NAME", help="default KIND[-GROUP]-DATA[-PARAMS]")
    p.add_argument("--storage", metavar="FILE|URL",
                   help="Optuna storage shared by every worker of the study: a journal file (default "
                   "OUT/NAME.journal; several processes, or machines sharing the folder, may use one) or a "
                   "database URL (sqlite:///x.db, postgresql://user@host/db)")
    p.add_argument("--out", default="runs/sweeps", help="folder of the default storage and summary "
                   "(default runs/sweeps)")
    p.add_argument("--summary", metavar="FILE", help="JSON summary to write (default OUT/NAME.json)")
    p.add_argument("--sampler", choices=("tpe", "random", "grid"), default="tpe",
                   help="Optuna sampler (default tpe; grid runs every combination of choice keys once)")
    p.add_argument("--sampler-seed", type=number(int, 0, 2**32 - 1), default=None, help="seed of the sampler (reproducible proposals); a worker that finds other live workers on the study "
                   "derives its own seed from it, so workers never repeat each other's proposals")
    p.add_argument("--no-pruning", action="store_true",
                   help="no median pruning (by default a trial whose first-seed validation is worse than the "
                   "median of earlier trials at the same step, in the second half of training, is stopped)")
    p.add_argument("--steps", type=recipe_option("steps"), default=None, help=f"optimizer steps per run (default {D.steps})")
    p.add_argument("--batch-size", type=recipe_option("batch_size"), default=None, help=f"windows per batch (default {D.batch_size})")
    p.add_argument("--seq-len", type=recipe_option("seq_len"), default=None, help=f"window length; also the evaluation window (default {D.seq_len}; "
                   "for word-problem:G:LEN, LEN, as for `train`)")
    p.add_argument("--lr", type=recipe_option("lr"), default=None, help="a fixed peak learning rate (only when lr is not searched)")
    p.add_argument("--weight-decay", type=recipe_option("weight_decay"), default=None, help=f"fixed AdamW weight decay (default {D.weight_decay:g})")
    p.add_argument("--warmup", type=recipe_option("warmup"), default=None, help="fixed warm-up: fraction of steps if < 1, else steps")
    p.add_argument("--grad-clip", type=recipe_option("grad_clip"), default=None, help=f"fixed max gradient norm (default {D.grad_clip!r})")
    p.add_argument("--length-curriculum", metavar="LEN:STEPS[,LEN:STEPS]", default=None,
                   help="as for `train` (e.g. 2:1500,4:1500 for the S5 word problem)")
    p.add_argument("--eval-every", type=recipe_option("eval_every"), default=None,
                   help=f"validate every N steps (the pruner's intermediate values; 0 = only at the end; default {D.eval_every})")
    p.add_argument("--eval-tokens", type=recipe_option("eval_tokens"), default=None,
                   help=f"valid-split targets scored by every validation, the final one too (default {D.eval_tokens}; 0 = all)")
    p.add_argument("--no-tensorboard", dest="tensorboard", action="store_false",
                   help="no TensorBoard event files in the trials' log folders OUT/NAME-trials/trial-N "
                   "(their metrics.csv is always written)")
    p.add_argument("--device", type=device_option, default="auto",
                   help=f"{DEVICE_HELP} (default auto)")
    add_threads_argument(p)


def retrain_command(setup, params: dict) -> str | None:
    """The ``python -m geomlab train`` command that trains ``setup`` with ``params`` (seed 0), or ``None`` when
    a searched key has no ``train`` flag (e.g. ``min_lr_ratio``). Floats are written in full (``repr``): a
    rounded learning rate would train another run than the trial's."""
    from geomlab.training.sweep import split_params

    train, model = split_params(params)
    if any(k not in _TRAIN_FLAGS for k in {**setup.train, **train} if k not in ("eval_every", "eval_tokens",
                                                                                  "length_curriculum")):
        return None
    import json

    parts = ["python -m geomlab train", "--model", setup.kind]
    if setup.budget:
        parts += ["--params", str(setup.budget)]
    config = {**setup.config, **model}
    if config:
        parts += ["--config"] + [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in config.items()]
    parts += ["--data", setup.data]
    for k, v in {**setup.train, **train}.items():
        if k in _TRAIN_FLAGS:
            parts += [_TRAIN_FLAGS[k], repr(v) if isinstance(v, float) else str(v)]  # every digit: the same run
        elif k == "length_curriculum" and v:
            parts += ["--length-curriculum", ",".join(f"{n}:{s}" for n, s in v)]
    return " ".join(shlex.quote(x) if i else x for i, x in enumerate(parts))


def run(args: argparse.Namespace) -> int:
    from geomlab.training import sweep
    from geomlab.commands import set_threads
    from geomlab.commands.train import parse_config, parse_curriculum, task_seq_len
    from geomlab.data.registry import parse_task
    from geomlab.models import model_class

    set_threads(args.threads)
    config = parse_config(args.config)
    model_class(args.model).config_class.check_types(config)  # a typo named before any trial
    if args.group:
        config["group"] = args.group
    given = {"steps": args.steps, "batch_size": args.batch_size, "seq_len": args.seq_len, "lr": args.lr,
             "weight_decay": args.weight_decay, "warmup": args.warmup, "grad_clip": args.grad_clip,
             "eval_every": args.eval_every}
    train = {k: v for k, v in given.items() if v is not None}
    if args.eval_tokens is not None:
        train["eval_tokens"] = args.eval_tokens or None
    if args.length_curriculum is not None:
        train["length_curriculum"] = [list(p) for p in parse_curriculum(args.length_curriculum)]
    if not any(s.partition("=")[0].strip() == "seq_len" for s in args.search or []):
        # a word problem trains on its own length unless --seq-len says otherwise, as `train` does
        seq_len, note = task_seq_len(parse_task(args.data), args.seq_len)
        if note:
            print(note, file=sys.stderr)
        if seq_len is not None:
            train["seq_len"] = seq_len
    setup = sweep.SweepSetup(kind=args.model, data=args.data, budget=args.params,
                             config=config, train=train, seeds=tuple(range(args.seeds)),
                             search=tuple(args.search) if args.search else sweep.DEFAULT_SEARCH)
    if args.study_name is not None and not args.study_name.strip():
        raise ValueError("--study-name is empty: give a plain name, or leave the option out for the default "
                         f"{sweep.default_study_name(args.model, args.data, setup.budget, args.group)!r}")
    name = args.study_name or sweep.default_study_name(args.model, args.data, setup.budget, args.group)
    if Path(name).name != name or name in (".", ".."):
        raise ValueError(f"--study-name must be a plain name (no folders), got {name!r}")
    out = Path(args.out)
    storage = args.storage or str(out / f"{name}.journal")
    summary_path = Path(args.summary) if args.summary else out / f"{name}.json"
    # every file the sweep writes is checked before the first trial trains (a folder where a file is meant,
    # a folder that cannot be made or written); the storage is refused in open_storage when not a regular file
    outputs = [("--summary" if args.summary else "--out", summary_path, False)]
    if "://" not in storage:
        outputs.append(("--storage" if args.storage else "--out", Path(storage), False))
    outputs.append(("--out", out / f"{name}-trials", True))  # each trial's logs
    check_outputs(outputs)
    # the sweep makes the folders once its request is checked; a missing one is named once it has run, except
    # --out itself, which the sweep's own lines name (the files under it are defaults)
    folders = {}
    for option, path, is_folder in [(o, p, False) for o, p, _ in outputs if o != "--out"] + [("--out", out, True)]:
        folders.setdefault(Path(path).parent, (option, path, is_folder))  # one note per folder
    with contextlib.ExitStack() as notes:
        for option, path, is_folder in folders.values():
            notes.enter_context(make_folders(option, path, is_folder, make=False))
        result = sweep.run_sweep(setup, n_trials=args.n_trials, timeout=args.timeout, storage=storage,
                                 study_name=name, summary_path=summary_path, pruning=not args.no_pruning,
                                 sampler=args.sampler, sampler_seed=args.sampler_seed, device=args.device,
                                 runs_dir=out / f"{name}-trials", tensorboard=args.tensorboard)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result["states"].items()))
    print(f"study {name}: {result['n_trials']} trial(s) ({counts}); storage {storage}")
    best = result["best"]
    if best is None:
        print("error: no trial completed (see the reasons above and in the summary)", file=sys.stderr)
        print(f"summary: {summary_path}")
        return 1
    seeds = ""
    if len(best.get("seed_values") or []) > 1:
        seeds = " (seeds: " + ", ".join(f"{v:.4f}" for v in best["seed_values"]) + ")"
    print(f"best: trial {best['number']}, valid {setup.metric} {best['value']:.4f}{seeds} with "
          + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in best["params"].items()))
    for line in sweep.edge_lines(result["edges"]):
        print(line)
    cmd = retrain_command(setup, best["params"])
    if cmd:
        print(f"retrain: {cmd}")
    print(f"summary: {summary_path}")
    return 0
