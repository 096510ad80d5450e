"""``python -m geomlab train``: train any registered model kind on a corpus, a text file or a synthetic task.

Several processes: ``torchrun --nproc_per_node N -m geomlab train ...`` trains one model with
DistributedDataParallel (:mod:`geomlab.training.distributed`); ``--batch-size`` is then the global batch, split evenly
across the N processes, and only rank 0 writes checkpoints and logs and prints."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from geomlab.commands import (DEVICE_HELP, add_threads_argument, device_option, make_folders, number,
                              recipe_option)

HELP = ("train a model (any registered kind) and write a Hugging Face checkpoint folder OUT/NAME/ (config.json, "
        "model.safetensors, vocab.json, training_state.*, README.md, geomlab.json)")


def parse_count(text: str) -> int:
    """``"100k"`` -> 100000, ``"1.5M"`` -> 1500000, ``"50000"`` -> 50000. ``ValueError`` otherwise."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmM]?)\s*", str(text))
    if not m:
        raise ValueError(f"not a parameter count: {text!r} (use e.g. 50000, 100k or 1.5M)")
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if not math.isfinite(value):  # hundreds of digits overflow a float
        raise ValueError(f"not a parameter count: {text[:40]!r}… is too large")
    n = int(round(value))
    if n < 1:
        raise ValueError(f"parameter count must be positive, got {text!r}")
    return n


#: Largest ``--params`` budget (design choice: ten billion parameters, far beyond what this package trains; a
#: typo of more digits is refused when the option is read, before any budget search).
MAX_PARAMS = 10**10


def params_option(text: str) -> int:
    """The argparse ``type=`` of ``--params``: :func:`parse_count` of ``text``, 1 to :data:`MAX_PARAMS`;
    ``argparse.ArgumentTypeError`` (one line naming the option, exit status 2) otherwise."""
    try:
        n = parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if n > MAX_PARAMS:
        raise argparse.ArgumentTypeError(f"a parameter budget must be at most {MAX_PARAMS:,}, got {str(text)[:40]}")
    return n


def kind_option(text: str) -> str:
    """The argparse ``type=`` of ``--model`` (``train``, ``sweep``): a registered model kind
    (:func:`geomlab.models.kinds`), else ``argparse.ArgumentTypeError``, one line naming the known kinds with
    a hint for a near miss (``--model: unknown model kind 'transfomer' (did you mean transformer?); known
    kinds: ...``). Design choice: checked when the option is read, so an unknown kind is the first thing
    said, before a missing ``--data`` or any data or model work."""
    from geomlab.core.argv import near_miss
    from geomlab.models import kinds

    known = kinds()
    if text in known:
        return text
    raise argparse.ArgumentTypeError(f"unknown model kind {str(text)[:40]!r}{near_miss(text, known)}; known kinds: "
                                     f"{', '.join(known)}")


def parse_config(items: list[str] | None) -> dict:
    """``["hidden=64", "tied=true", "group=SO"]`` -> ``{"hidden": 64, "tied": True, "group": "SO"}``.
    Values are read as JSON when possible (numbers, true/false, null, lists), else kept as strings; a value
    past the JSON reader's depth or count limits (:mod:`geomlab.core.jsonread`) is a ``ValueError``."""
    from geomlab.core.jsonread import MAX_JSON_DEPTH, MAX_JSON_VALUES, json_shape

    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--config expects key=value, got {item!r}")
        depth, values = json_shape(value.encode("utf-8", "surrogateescape"))
        if depth > MAX_JSON_DEPTH or values > MAX_JSON_VALUES:
            raise ValueError(f"--config {key.strip()[:40]}: the value nests {depth:,} levels and holds {values:,} "
                             f"values; the limits are {MAX_JSON_DEPTH} and {MAX_JSON_VALUES:,}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            low = value.strip().lower()
            out[key.strip()] = {"true": True, "false": False}.get(low, value)
    return out


def parse_curriculum(text: str) -> tuple[tuple[int, int], ...]:
    """``"2:1500,4:1500"`` -> ``((2, 1500), (4, 1500))`` (``(seq_len, steps)`` pairs); ``""`` -> ``()``.
    Raises ``ValueError`` with the expected form for anything else."""
    pairs = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            n, k = (int(v) for v in part.split(":"))
        except ValueError:
            raise ValueError(f"--length-curriculum takes LEN:STEPS pairs separated by commas, e.g. "
                             f"2:1500,4:1500; got {text!r}") from None
        pairs.append((n, k))
    return tuple(pairs)


def task_seq_len(ref, seq_len: int | None) -> tuple[int | None, str]:
    """``(training window length, note)`` for the parsed task ``ref`` (:class:`geomlab.data.registry.TaskRef`)
    and the ``--seq-len`` given (``None`` when not given).

    A word problem trains on its own length: the ``LENGTH`` of ``word-problem:GROUP:LENGTH``, else
    :data:`geomlab.data.registry.DEFAULT_LENGTH` (the length it is evaluated on), unless ``--seq-len`` is
    given. When both are given and differ, ``--seq-len`` is the training length and ``note`` is a one-line
    note saying so (design choice: training on short words and evaluating on longer ones is the usual
    length-generalisation experiment, so it is allowed, not refused). Other tasks: ``(seq_len, "")``."""
    from geomlab.data.registry import DEFAULT_LENGTH

    if ref.form != "word-problem":
        return seq_len, ""
    length = ref.length if ref.length is not None else DEFAULT_LENGTH
    if seq_len is None:
        return length, ""
    note = ""
    if ref.length is not None and seq_len != ref.length:
        note = (f"note: training on sequences of length {seq_len} (--seq-len) and evaluating on length "
                f"{ref.length} (--data {ref}); leave out --seq-len to train at {ref.length}")
    return seq_len, note


def _short(x: float) -> str:
    """A number in short scientific form for the help text: ``3e-3`` for 0.003."""
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{x:.0e}").replace("e+", "e")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``train`` options; the training values' defaults are the recipe's
    (:class:`geomlab.training.config.Recipe`), shown in the help text."""
    from geomlab.data.corpora import CORPORA
    from geomlab.training.config import Recipe

    D = Recipe()

    p.add_argument("--model", metavar="KIND", type=kind_option,
                   help="model kind from the registry (see `--list-models`); not needed with --resume")
    p.add_argument("--list-models", action="store_true",
                   help="print the registered model kinds and exit; with --model KIND, that kind's config keys "
                        "(for --config, e.g. dropout=0.1 where the kind has it) and their defaults")
    p.add_argument("--group", metavar="G", help="matrix Lie group for geometric kinds (sets config key 'group', "
                   "e.g. O, SO, U, SU, T)")
    p.add_argument("--params", type=params_option, metavar="N", help="parameter budget, e.g. 50k or 100k: the kind picks its width "
                   "with config_for_budget (within 5%%)")
    p.add_argument("--config", nargs="*", metavar="KEY=VALUE", default=[],
                   help="model config values (JSON values, e.g. hidden=64 layers=2)")
    p.add_argument("--data", metavar="corpus:NAME|FILE|word-problem:G[:LEN]",
                   help=f"the task: a registered corpus corpus:NAME ({', '.join(CORPORA)}), a UTF-8 text file "
                   "(split 90/5/5), or the group word problem, e.g. word-problem:S5 or word-problem:Z5:64 (groups "
                   "S3, S5, A5, Zn, parity; trained and evaluated at length 32 unless given; --seq-len sets another "
                   "training length). (The Gaussian-process regression task runs through "
                   "`geomlab bench gp`.) With --resume the checkpoint's corpus is used when omitted")
    p.add_argument("--steps", type=recipe_option("steps"), default=None, help=f"optimizer steps in total (default {D.steps})")
    p.add_argument("--out", default="runs", help="output folder (default runs/)")
    p.add_argument("--name", help="checkpoint folder name inside --out (default KIND[-GROUP]-DATA-PARAMS, with -2, -3, "
                   "... when taken; an existing --name is refused unless you --resume it)")
    p.add_argument("--batch-size", type=recipe_option("batch_size"), default=None,
                   help=f"random windows per batch (default {D.batch_size}); under torchrun the global batch, split evenly "
                   "across the processes (a multiple of --nproc_per_node)")
    p.add_argument("--seq-len", type=recipe_option("seq_len"), default=None, help="window length in tokens; also the evaluation "
                   f"window (default {D.seq_len}; for word-problem:G:LEN, LEN, which stays the evaluation length)")
    p.add_argument("--lr", type=recipe_option("lr"), default=None, help=f"peak learning rate of AdamW (default {_short(D.lr)})")
    p.add_argument("--weight-decay", type=recipe_option("weight_decay"), default=None, help=f"AdamW weight decay on matrices (default {D.weight_decay:g})")
    p.add_argument("--warmup", type=recipe_option("warmup"), default=None,
                   help=f"warm-up: a fraction of --steps if < 1, else a step count (default {D.warmup:g})")
    p.add_argument("--grad-clip", type=recipe_option("grad_clip"), default=None, help=f"max gradient norm, 0 = off (default {D.grad_clip!r})")
    p.add_argument("--length-curriculum", metavar="LEN:STEPS[,LEN:STEPS]", default=None,
                   help="train STEPS steps on windows of LEN first, in order, then the rest at --seq-len "
                   "(e.g. 2:1500,4:1500,8:1500,16:1500 for the S5 word problem; see docs/zoo.md)")
    p.add_argument("--seed", type=recipe_option("seed"), default=None, help=f"seed of the model init and the batches (default {D.seed})")
    p.add_argument("--device", type=device_option, default=None,
                   help=DEVICE_HELP)
    p.add_argument("--eval-every", type=recipe_option("eval_every"), default=None,
                   help=f"validate and save a checkpoint every N steps, 0 = only at the end (default {D.eval_every})")
    p.add_argument("--eval-tokens", type=recipe_option("eval_tokens"), default=None,
                   help=f"targets of the valid split used by the periodic validations, 0 = all (default {D.eval_tokens});"
                   " the final evaluation always uses the full valid and test splits")
    p.add_argument("--eval-stride", type=recipe_option("eval_stride"), default=None,
                   help="evaluation stride (default: --seq-len, i.e. non-overlapping windows)")
    add_threads_argument(p)
    p.add_argument("--resume", nargs="?", const="", metavar="CHECKPOINT", default=None,
                   help="resume a stopped run: from CHECKPOINT (a local folder or flat pair; not a bundled checkpoint, "
                   "which has no training state and lives in the installed package), or from OUT/NAME when given "
                   "without a value")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--log-every", type=recipe_option("log_every"), default=None,
                   help=f"record the training loss, lr, gradient norm and tokens/s every N steps (default {D.log_every})")
    p.add_argument("--log-dir", metavar="DIR", default=None,
                   help="also write TensorBoard event files of the metrics history to DIR (train/loss, train/lr, "
                   "train/grad_norm, train/tokens_per_s, valid/..., test/...; view with tensorboard --logdir DIR) "
                   "instead of the run folder OUT/NAME")
    p.add_argument("--no-tensorboard", dest="tensorboard", action="store_false",
                   help="no TensorBoard event files in the run folder (metrics.csv is always written)")
    p.add_argument("--wandb", nargs="?", const="", metavar="MODE", default=None,
                   help="also log to Weights & Biases (needs the wandb extra: pip install 'geomlab[wandb]'); MODE online, offline or disabled "
                   "(default: WANDB_MODE, else online); project WANDB_PROJECT, else geomlab")


def _default_name(kind: str, data: str, params: int, group: str | None = None) -> str:
    """``KIND[-GROUP]-DATA-SIZE``, e.g. ``osmformer-O-tinyshakespeare-100k`` (group only when given)."""
    stem = Path(data).stem if Path(data).suffix else data
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-") or "data"
    size = f"{params / 1000:.0f}k" if params >= 1000 else str(params)
    g = re.sub(r"[^A-Za-z0-9._-]+", "-", group).strip("-") if group else ""
    return f"{kind}-{g + '-' if g else ''}{stem}-{size}"


def _free_name(out: Path, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``, ... when ``out/name`` (a folder) or a flat pair ``out/name.json``
    already exists (a new run never overwrites an earlier checkpoint under the default name)."""
    candidate, i = name, 1
    while _taken(out, candidate):
        i += 1
        candidate = f"{name}-{i}"
    return candidate


def _check_name(name: str) -> str:
    """``name`` if it is a plain, non-empty file name for ``--name``; else ``ValueError`` (one line; an empty
    ``--name ""`` is refused, not replaced by the default name)."""
    if not name.strip() or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"--name must be a plain file name (not empty, no folders), got {name!r}; use --out for "
                         "the folder, or leave --name out for the default name")
    return name


def _taken(out: Path, name: str) -> bool:
    """Whether ``out/name`` is taken: a folder or file of that name, or a flat pair ``name.json`` /
    ``name.safetensors``."""
    return any(os.path.lexists(out / n) for n in (name, f"{name}.json", f"{name}.safetensors"))


def check_out_dir(folder: Path, model=None) -> None:
    """Refuse, before any training, an output folder that cannot take the checkpoint: one that cannot be
    made or written (read-only file system, permissions; tested by creating and removing a file in it), or
    that has less free space than about twice the checkpoint (weights + AdamW moments; the atomic write
    needs the old and the new copy side by side). Raises ``ValueError`` with one line."""
    import shutil

    from geomlab.checkpoints.files import make_writable

    try:
        make_writable(folder)
    except OSError as exc:
        raise ValueError(f"cannot write checkpoints to {folder}: {exc.strerror or exc} (choose another --out; "
                         "nothing was trained)") from None
    if model is not None:
        need = 2 * (3 * sum(p.numel() * p.element_size() for p in model.parameters()) + (1 << 16))
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            return
        if free < need:
            raise ValueError(f"{folder} has {free:,} bytes free but a checkpoint of this model needs about "
                             f"{need:,} (choose another --out or free some space; nothing was trained)")


def run(args: argparse.Namespace) -> int:
    """Train (see :func:`add_arguments`). Under ``torchrun`` every rank joins the process group
    (:func:`geomlab.training.distributed.init_from_env`, left when training ends) and only rank 0 prints."""
    from geomlab.training import distributed

    if args.list_models:
        return _train(args, distributed.Replicas())
    replicas = distributed.init_from_env(args.device)
    try:
        if replicas.is_main:
            return _train(args, replicas)
        # only rank 0 prints; an error other than bad input still reaches this rank's stderr through the CLI
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            try:
                return _train(args, replicas)
            except ValueError:  # bad input: every rank has the same, and rank 0 reports it
                return 2
    finally:
        distributed.shutdown()


def _train(args: argparse.Namespace, replicas) -> int:
    from geomlab.commands import set_threads
    from geomlab.core.argv import program
    from geomlab.models import kinds

    if args.list_models:
        if args.model:
            from geomlab.models import model_class

            defaults = model_class(args.model).default_config()
            print("\n".join(f"{k} = {v!r}" for k, v in defaults.items() if k != "kind"))
        else:
            print("\n".join(kinds()))
        return 0
    set_threads(args.threads)
    given = {
        "steps": args.steps, "batch_size": args.batch_size, "seq_len": args.seq_len, "lr": args.lr,
        "weight_decay": args.weight_decay, "warmup": args.warmup, "grad_clip": args.grad_clip, "seed": args.seed,
        "device": args.device, "eval_every": args.eval_every, "eval_stride": args.eval_stride,
        "log_every": args.log_every,
        "eval_tokens": (args.eval_tokens or None) if args.eval_tokens is not None else None,
    }
    if args.length_curriculum is not None:
        given["length_curriculum"] = parse_curriculum(args.length_curriculum)
    # only options given on the command line override the defaults (or, with --resume, the saved config)
    overrides = {k: v for k, v in given.items() if v is not None}
    if args.eval_tokens == 0:
        overrides["eval_tokens"] = None
    with contextlib.ExitStack() as notes:  # folders the run makes where it checks them, named once it has run
        if args.resume is None:
            notes.enter_context(make_folders("--out", args.out, is_folder=True, make=False))
        if args.log_dir:
            notes.enter_context(make_folders("--log-dir", args.log_dir, is_folder=True, make=False))
        if args.resume is not None:
            task, trainer = _resumed(args, overrides)
        else:
            task, trainer = _started(args, overrides, replicas)
        result = _run(trainer)
    if isinstance(result, int):
        return result
    m = result.metrics
    tps = [h["tokens_per_s"] for h in result.history if "tokens_per_s" in h]
    line = f"{result.status} at step {result.step}"
    if result.status == "stopped":
        line += f" (resume with: {program()} train --resume {result.checkpoint})"
    for key in ("valid_bpc", "test_bpc", "valid_ppl", "test_ppl", "valid_accuracy", "test_accuracy",
                "valid_rmse", "test_rmse", "valid_gp_rmse"):
        if key in m:
            line += f"; {key} {m[key]:.4f}"
    if tps:
        line += f"; {sum(tps) / len(tps):,.0f} tokens/s"
    print(line)
    if result.checkpoint:
        print(f"checkpoint: {result.checkpoint}")
    warning = did_not_train(task, m, trainer.config.lr)
    if warning:
        print(warning, file=sys.stderr)
    from geomlab.data import corpora

    corpus = getattr(task, "corpus", None)
    if corpus is not None and corpus.name not in corpora.CORPORA:  # a user's text, split 90/5/5 here
        if note := corpora.repeat_note(corpus):
            print(f"note: {note}", file=sys.stderr)
    # stopped by Ctrl-C: saved, but not finished, so `train ... && eval ...` must not carry on (128 + SIGINT)
    return 130 if result.status == "stopped" else 0


def _resumed(args: argparse.Namespace, overrides: dict):
    """``(task, trainer)`` of ``--resume``: the checkpoint's trainer with the given options over its saved
    recipe. ``ValueError`` for a missing name or an unwritable folder."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.data.registry import make_task
    from geomlab.training.trainer import Trainer

    if args.resume:
        path = ckpt.find(args.resume, bundled=False)
    elif args.name is not None:
        path = Path(args.out) / _check_name(args.name)
    else:
        raise ValueError("--resume without a value needs --name (resumes OUT/NAME)")
    c = ckpt.load(path)
    c.require_train_state()  # a weights-only folder loads, but cannot resume
    check_out_dir(c.path.parent, c.model)
    data = args.data if args.data else (c.card.get("task") or {})
    task = make_task(data, vocab=c.vocab)
    trainer = Trainer.from_checkpoint(path, task, overrides=overrides, progress_bar=not args.quiet,
                                      log_dir=args.log_dir, tensorboard=args.tensorboard, wandb=args.wandb)
    print(f"resuming {trainer.out} at step {trainer.step} of {trainer.config.steps}")
    return task, trainer


def _started(args: argparse.Namespace, overrides: dict, replicas):
    """``(task, trainer)`` of a new run: the ``cli`` preset (:data:`geomlab.training.runs.PRESETS`) with the
    given options, its task and model, and the checkpoint folder's name. ``ValueError`` for a bad request."""
    from geomlab.data.registry import DEFAULT_LENGTH, TaskRef, parse_task
    from geomlab.models import count_params, kinds, model_class
    from geomlab.training import runs
    from geomlab.training.runs import RunSpec

    if not args.model:
        raise ValueError("--model KIND is required (known kinds: " + ", ".join(kinds()) + ")")
    if not args.data:
        raise ValueError("--data is required (corpus:NAME, a text file or word-problem:GROUP)")
    ref = parse_task(args.data)
    if ref.form == "text":  # the app's pasted text has no meaning here: a file of that name
        ref = TaskRef("file", args.data)
    if ref.form == "gp":
        # token models cannot take continuous inputs; the GP task has its own CEM regressor
        raise ValueError("the Gaussian-process regression task trains a CEM regressor, not a token model: "
                         "run `geomlab bench gp` (see docs/cem.md)")
    seq_len, note = task_seq_len(ref, args.seq_len)
    if note:
        print(note, file=sys.stderr)
    if seq_len is not None:
        overrides["seq_len"] = seq_len
    fixed = parse_config(args.config)
    model_class(args.model).config_class.check_types(fixed)  # a typo named before any budget search
    if args.group:
        fixed["group"] = args.group
    spec = RunSpec.preset("cli", kind=args.model, group=args.group, model_overrides=fixed, params=None,
                          data=str(ref.with_length(DEFAULT_LENGTH)), **overrides)
    spec.train_config()  # the training values are checked first, before the budget, data and model
    if args.params:
        spec = replace(spec, params=args.params)
    task = runs.build_task(spec)
    model, _ = runs.build_model(spec, task.vocab_size)
    n_eff = count_params(model, "effective")
    if args.name is not None:
        name = _check_name(args.name)
        if _taken(Path(args.out), name):
            where = Path(args.out) / name
            if where.is_dir() and not (where / "geomlab.json").exists():  # a run that stopped before its first
                raise ValueError(f"{where} exists but holds no checkpoint (a run that stopped before its first "
                                 "one leaves only its logs): delete that folder, or choose another --name "
                                 "(nothing was overwritten)")
            raise ValueError(f"{where} already exists: continue it with --resume, or "
                             "choose another --name (nothing was overwritten)")
    else:
        stem = ref.arg if ref.form == "corpus" else args.data
        name = _free_name(Path(args.out), _default_name(args.model, stem, n_eff, args.group))
    check_out_dir(Path(args.out), model)
    trainer = runs.build(spec, task=task, model=model, out=Path(args.out) / name, progress_bar=not args.quiet,
                         log_dir=args.log_dir, tensorboard=args.tensorboard, wandb=args.wandb).trainer
    print(f"{args.model}: {n_eff:,} parameters (effective), {count_params(model, 'stored'):,} stored; "
          f"{task.name}, vocab {task.vocab_size}; device {trainer.device.type}"
          + (f" x {replicas.world_size} processes" if replicas.distributed else ""))
    return task, trainer


def _run(trainer):
    """Run ``trainer`` with Ctrl-C handling (first: stop cleanly and save; second: abort). Returns the
    :class:`geomlab.training.trainer.TrainResult`, or the exit code when it did not finish (1: a diverged run or
    a failed checkpoint write; 130: aborted), with one line on stderr."""
    import signal
    import threading

    from geomlab.training.trainer import CheckpointWriteError, TrainingError

    previous = None
    if threading.current_thread() is threading.main_thread():
        def _abort(signum, frame):  # second Ctrl-C: the trainer's flag too, in case Python drops the exception
            trainer.abort()
            raise KeyboardInterrupt

        def _interrupt(signum, frame):  # first Ctrl-C: stop cleanly and save; second: abort
            signal.signal(signal.SIGINT, _abort)
            print("\nstopping after this step (Ctrl-C again to abort)...", file=sys.stderr)
            trainer.stop()

        previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        return trainer.run()
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if trainer.last_checkpoint:
            print(f"last good checkpoint: {trainer.last_checkpoint}", file=sys.stderr)
        return 1
    except CheckpointWriteError as exc:  # disk full, folder gone read-only...: one line, names what is kept
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the second Ctrl-C: abort without writing anything more
        kept = (f"the last checkpoint {trainer.last_checkpoint} is kept" if trainer.last_checkpoint
                else "nothing was saved")
        print(f"\naborted at step {trainer.step}; {kept}", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def did_not_train(task, metrics: dict, lr: float) -> str:
    """A one-line warning when a finished run's final validation says it did not train, else ``""``: a
    non-finite valid metric, or valid bits per token (``valid_bpc``, or ``valid_bpw`` of a word-level corpus)
    more than 1 bit above both the unigram (:func:`geomlab.data.tasks.unigram_bpc`: what a model that
    learned only the token frequencies scores) and uniform guessing (log2 of the vocabulary size), which a
    freshly initialised model is near. Design choice: a warning, not an error, since a large ``lr`` is the
    user's to try; the usual cause is a learning rate far too high."""
    import math

    from geomlab.data.tasks import unigram_bpc

    for key, name in (("valid_bpc", "BPC"), ("valid_bpw", "bits per word")):
        if key not in metrics:
            continue
        value = float(metrics[key])
        if not math.isfinite(value):
            return (f"warning: the final valid {name} is {value} (non-finite): this run did not train; try a "
                    f"lower learning rate than {lr:g}")
        unigram = unigram_bpc(task)
        if unigram is None:
            return ""
        if value > max(unigram, math.log2(max(2, task.vocab_size))) + 1.0:
            return (f"warning: the final valid {name} {value:,.4g} is far above the unigram's {unigram:.3f} (a "
                    f"model that learned only the token frequencies): this run did not train; the learning rate "
                    f"{lr:g} is probably too high")
        return ""
    return ""

