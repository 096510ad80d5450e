"""``geomlab report``: the reproduction report (``docs/results.md``), see :mod:`geomlab.report`.

Until the next release ``geomlab bench`` followed by these options (no benchmark name) still runs it, with a
deprecation note (:func:`geomlab.commands.cli.main`)."""

from __future__ import annotations

import argparse
import contextlib

from geomlab.commands import (DEVICE_HELP, add_threads_argument, check_outputs, device_option, make_folders, number,
                              recipe_option)

HELP = "train and evaluate every model under one protocol and write the reproduction report (docs/results.md)"

#: ``--hours``: a run's expected CPU seconds (:func:`geomlab.report.plan.seconds_left`) times this is the wall
#: time it is given (one thread per run beside other work on the machine).
HOURS_MARGIN = 2.0

#: The word problem's key for --only (the language-model comparisons use geomlab.report.COMPARISONS keys).
WORD_PROBLEM = "word-problem"


def _eval_chars(text: str):
    """The argparse ``type=`` of ``--eval-chars``: ``"all"``, or a count of 1 to 2**50."""
    return "all" if str(text).strip().lower() == "all" else number(int, 1, 2**50, note=" or 'all'")(text)


def _lr_grid(text: str) -> str:
    """The argparse ``type=`` of ``--lr-grid``: ``text`` when it is comma-separated learning rates, each in the
    range of ``--lr`` (:func:`lr_grid` reads them)."""
    if not lr_grid(text):
        raise argparse.ArgumentTypeError("needs at least one learning rate")
    return text


def lr_grid(text: str) -> tuple[float, ...]:
    """The learning rates of an ``--lr-grid`` value; ``argparse.ArgumentTypeError`` for one out of range."""
    return tuple(recipe_option("lr")(x.strip()) for x in str(text).split(",") if x.strip())


def add_arguments(p: argparse.ArgumentParser) -> None:
    from geomlab.report import COMPARISONS

    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="CI-sized run (under 10 minutes on 2 CPU cores): few steps, short windows, capped "
                      "evaluation, 1 seed; checks the protocol, does not reproduce the papers")
    mode.add_argument("--smoke", action="store_true", help="tiny run for tests (seconds per model)")
    mode.add_argument("--converged", action="store_true",
                      help="the converged campaign (days of CPU, minutes on a GPU): lr (and warm-up "
                      "where it matters) tuned per model on 20%% of the budget, the grid widened when the best lr "
                      "sits on its edge, then 3 seeds of 10,000 (~100K and ~50K) or 5,000 steps x 32 x 128. A "
                      "worker: trains what no other worker holds in --store (start one per core, stop and "
                      "restart at will: runs resume from their checkpoints), then writes the report of what "
                      "finished (docs/results/runs/converged/results.md is the committed one)")
    mode.add_argument("--page", action="store_true",
                      help="train nothing: write the results page (default docs/results.md) from the committed run "
                      "records (docs/results/runs/converged/records.jsonl), the speed benchmark and the smoke run")
    mode.add_argument("--full", action="store_true", help="the full protocol (many hours on a CPU; uses the "
                      "GPU when present): 3000 steps x 32 x 128, lr tuned per model on 1e-3/3e-3/1e-2/3e-2, 3 seeds, "
                      "full splits, scaling to 500K, word problem S5 / Z60 with a length curriculum")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="Markdown report to write (default runs/report/results.md, with --converged "
                   "runs/converged-report/results.md; the committed reports are docs/results.md and "
                   "docs/results/runs/converged/results.md, written only when named explicitly); figures and "
                   "results.json go to FILE's folder/results/")
    p.add_argument("--wp-curriculum", metavar="LEN:STEPS[,LEN:STEPS]",
                   help="override the word-problem length curriculum ('' = none), e.g. 2:300,4:300")
    p.add_argument("--only", metavar="KEY[,KEY]",
                   help=f"run only these sections: {', '.join(COMPARISONS)}, {WORD_PROBLEM}; with --campaign "
                        "converged also zoo-ts (the zoo's other models)")
    p.add_argument("--steps", type=recipe_option("steps"), metavar="N", help="override the language-model steps of the profile")
    p.add_argument("--wp-steps", type=number(int, 0, 10**9), metavar="N", help="override the word-problem steps (0 skips it)")
    p.add_argument("--eval-chars", metavar="N|all", type=_eval_chars,
                   help="characters of each valid/test split scored (default: the profile's; 'all' = whole split)")
    p.add_argument("--lr", type=recipe_option("lr"), metavar="LR", help="override the language models' peak learning rate "
                   "(still one value for every model)")
    p.add_argument("--lr-grid", metavar="LR[,LR]", type=_lr_grid, help="tune each language model's learning rate on this grid "
                   "(best validation BPC of the first seed; the same rule for every model; replaces --lr)")
    p.add_argument("--lr-storage", metavar="URL|FILE",
                   help="keep each model's learning-rate study (--lr-grid / the profile's grid) in this Optuna "
                        "storage (a journal file, or a database URL such as postgresql://... or sqlite:///x.db) "
                        "instead of in memory: several processes or machines running the same command share "
                        "the grid, each training only the learning rates no one has taken yet "
                        "(docs/pipeline.md, Sweeps)")
    p.add_argument("--batch-size", type=recipe_option("batch_size"), metavar="N", help="override the language models' batch size")
    p.add_argument("--seq-len", type=recipe_option("seq_len"), metavar="N", help="override the language models' window length")
    p.add_argument("--seeds", type=number(int, 1, 1000), metavar="N", help="average over seeds 0..N-1")
    p.add_argument("--corpus-file", metavar="FILE",
                   help="use this UTF-8 text file instead of every registered corpus (offline checks)")
    add_threads_argument(p)
    p.add_argument("--no-png", action="store_true", help="do not render PNG images of the figures (chromium)")
    p.add_argument("--store", default=None, metavar="DIR",
                   help="--converged: the folder of the campaign's runs (checkpoints and outcomes; default "
                   "runs/CAMPAIGN: runs/converged, runs/fair)")
    p.add_argument("--collect", action="store_true",
                   help="--converged: train nothing, write the report of the runs finished in --store")
    p.add_argument("--speed", metavar="BENCH_JSON",
                   help="--converged: show this `geomlab bench train --json` file as the report's table of "
                   "training speed measured alone")
    p.add_argument("--restore", metavar="RESULTS_JSON|RECORDS",
                   help="--converged: first write into --store the outcome of every run this converged report's "
                   "results.json records as finished (e.g. docs/results/runs/converged/results/results.json), "
                   "or every run of this campaign's records file (e.g. docs/results/runs/fair/records.jsonl), "
                   "so that a new machine resumes the campaign where it stopped; runs already in the store are "
                   "left alone")
    p.add_argument("--hours", type=number(float, 0.01, 10**6), metavar="H",
                   help="--converged: train for at most H hours: first the runs expected to finish by then (each "
                   f"run's steps at the CPU seconds per step the campaign measured, x{HOURS_MARGIN:g} for a shared "
                   "machine, less what its checkpoint already holds), then, in a free slot, a run expected to reach "
                   "its next checkpoint by then; at H hours the runs in flight stop (each resumes from its last "
                   "checkpoint next time)")
    p.add_argument("--max-jobs", type=number(int, 1, 10**9), metavar="N", help="--converged: submit at most N runs")
    p.add_argument("--campaign", choices=("converged", "fair"),
                   help="the campaign to run or collect (implies --converged; default converged): fair is the plan "
                   "declared in docs/results.md (equal compute, controls, seeds until the gaps settle)")
    p.add_argument("--dry-run", action="store_true",
                   help="--converged: print the campaign's blocks with their CPU-hour estimate and the runs ready "
                   "now in --store; train nothing")
    p.add_argument("--executor", choices=("local", "slurm"), default="local",
                   help="--converged: where the runs go (submitit): local processes on this machine, or SLURM jobs "
                   "from a cluster's login node (default local)")
    p.add_argument("--workers", type=number(int, 1, 10**4), default=1, metavar="N",
                   help="--converged: runs in flight at a time (default 1)")
    p.add_argument("--nice", type=number(int, 0, 19), default=19, metavar="N",
                   help="--converged: the priority each run lowers itself by (default 19, the lowest); started with "
                   "setsid, the dispatcher also gives its session's scheduling group that priority (Linux autogroup "
                   "scheduling, where nice alone only ranks processes within one session)")
    p.add_argument("--slurm-partition", metavar="NAME", help="--executor slurm: the partition of the runs")
    p.add_argument("--records", metavar="JSONL",
                   help="--converged: also write every finished run's record (outcome, curves, provenance) to "
                   "this JSON-lines file, from which the report is regenerated (checked before anything runs; "
                   "a missing folder is made, with a note)")
    p.add_argument("--device", type=device_option, metavar="DEVICE",
                   help=f"--converged: the worker's device: {DEVICE_HELP} (several workers may share one GPU)")
    p.add_argument("--from-json", nargs="+", metavar="RESULTS_JSON",
                   help="train nothing: write the report from saved results.json files (several are merged, "
                   "e.g. sections run in parallel with --only)")


def _read_input(path: str, what: str):
    """The JSON value of the input file ``path`` through the bounded reader
    (:func:`geomlab.core.jsonread.read_json`: size, depth and count limits); ``ValueError``, one line naming
    ``what`` and the file, when it cannot be read or is not such JSON."""
    from geomlab.core.jsonread import read_json

    try:
        return read_json(path)
    except (OSError, ValueError) as exc:  # JSONInputError is a ValueError
        raise ValueError(f"{what} {str(path)[:120]}: cannot read it ({str(exc)[:160]})") from None


def lower_autogroup(nice: int) -> bool:
    """Give this process's scheduling group the priority ``nice`` when the process leads its own session
    (started with ``setsid``), so that on Linux with autogroup scheduling (``sched_autogroup_enabled``), where
    ``nice`` only ranks processes within one session's group, the campaign's runs also yield to other sessions'
    work. Returns whether the group's priority was set (``False``: not a session leader, no
    ``/proc/self/autogroup``, nice 0, or refused). Source: design choice (sched(7), "The autogroup feature")."""
    import os

    if not nice or not hasattr(os, "getsid") or os.getsid(0) != os.getpid():
        return False
    try:
        with open("/proc/self/autogroup", "w", encoding="ascii") as f:
            f.write(str(int(nice)))
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _term_interrupts():
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` as Ctrl-C does, so that a killed dispatcher
    cancels its runs before it ends; and SIGINT, when this process inherited it ignored (a background job of a
    script: ``nohup ... &``), is handled again, so that the processes it starts do not inherit the ignoring
    and submitit's cancel (a SIGINT) stops them. In the main thread only; elsewhere nothing changes."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, _interrupt)
    was = signal.getsignal(signal.SIGINT)
    if was is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, was)


def _is_records(path: str) -> bool:
    """Whether the file ``path`` opens with a campaign records header line
    (:data:`geomlab.report.records.RECORDS_KIND`); ``False`` for anything else, unreadable files included."""
    from geomlab.report.records import RECORDS_KIND

    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline(4096)
    except (OSError, UnicodeDecodeError):
        return False
    return RECORDS_KIND in first and first.lstrip().startswith("{")


def run(args: argparse.Namespace) -> int:
    from geomlab import report
    from geomlab.commands import set_threads

    set_threads(args.threads)
    if args.campaign and (args.quick or args.smoke or args.full or args.page):
        mode = next(f for f, v in (("--quick", args.quick), ("--smoke", args.smoke), ("--full", args.full),
                                   ("--page", args.page)) if v)
        raise ValueError(f"--campaign runs or collects a campaign under its own protocol: drop {mode}")
    if args.page:
        from pathlib import Path

        from geomlab.report.page import PAGE, results_page

        out = Path(args.out or PAGE)
        check_outputs([("--out", out, False)])
        with make_folders("--out", out):
            out.write_text(results_page("."), encoding="utf-8")
        print(f"wrote {out} from the committed records")
        return 0
    if args.converged or args.campaign:
        args.out = args.out or "runs/converged-report/results.md"
        return _converged(args)
    args.out = args.out or "runs/report/results.md"
    if (args.collect or args.max_jobs is not None or args.device is not None or args.speed is not None
            or args.restore is not None or args.dry_run or args.records is not None or args.hours is not None):
        raise ValueError("--collect, --max-jobs, --device, --speed, --restore, --dry-run, --records and --hours go "
                         "with --converged")
    if args.from_json:
        parts = [_read_input(f, "results file") for f in args.from_json]
        try:
            results = report.merge_results(parts) if len(parts) > 1 else parts[0]
            with make_folders("--out", args.out):  # a results file of another shape: no note, one error line
                path = report.write_report(results, args.out, png=not args.no_png)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a JSON of another shape
            raise ValueError(f"{', '.join(args.from_json)[:120]}: not a `geomlab report` results file "
                             f"({type(exc).__name__}: {str(exc)[:80]})") from None
        print(f"wrote {path} from {len(parts)} results file(s)")
        return 0
    if not (args.quick or args.smoke or args.full):  # a bare `geomlab report` must not start hours of training
        raise ValueError("choose a profile: --quick (CI-sized, under 10 minutes on 2 CPU cores), --full (the full "
                         "protocol, many hours on a CPU) or --converged (the converged campaign, days); or "
                         "--from-json RESULTS_JSON to render a report again")
    name = "quick" if args.quick else "smoke" if args.smoke else "full"
    overrides: dict = {"steps": args.steps, "wp_steps": args.wp_steps, "corpus_override": args.corpus_file,
                       "lr": args.lr, "batch_size": args.batch_size, "seq_len": args.seq_len}
    if args.lr_grid is not None:
        overrides["lr_grid"] = lr_grid(args.lr_grid)
    elif args.lr is not None:
        overrides["lr_grid"] = ()  # an explicit single lr replaces the profile's grid
    if args.wp_curriculum is not None:
        from geomlab.commands.train import parse_curriculum

        overrides["wp_curriculum"] = parse_curriculum(args.wp_curriculum)
    if args.eval_chars is not None:
        overrides["eval_tokens"] = args.eval_chars
    if args.seeds is not None:
        overrides["seeds"] = tuple(range(args.seeds))
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        overrides["comparisons"] = tuple(k for k in keys if k != WORD_PROBLEM)
        if WORD_PROBLEM not in keys:
            overrides["wp_steps"] = 0
    proto = report.protocol(name, **overrides)
    results = report.run_report(proto, lr_storage=args.lr_storage)
    with make_folders("--out", args.out):
        path = report.write_report(results, args.out, png=not args.no_png)
    failed = [r["label"] for c in results["comparisons"] for r in c["rows"] if r.get("error")]
    if results.get("word_problem"):
        failed += [f"{r['group']} {r['label']}" for r in results["word_problem"]["rows"] if r.get("error")]
    print(f"wrote {path} ({results['wall_s'] / 60:.1f} min)" + (f"; FAILED rows: {failed}" if failed else ""))
    return 1 if failed else 0


def _converged(args: argparse.Namespace) -> int:
    """``--converged``: the campaign's runs through submitit (unless ``--collect`` or ``--dry-run``), then the
    report of what the store holds."""
    from geomlab.report import results as campaign_results, write_report
    from geomlab.report.plan import campaigns
    from geomlab.report.store import RunStore

    other = [f for f, v in (("--steps", args.steps), ("--lr", args.lr), ("--lr-grid", args.lr_grid),
                            ("--seeds", args.seeds), ("--from-json", args.from_json), ("--wp-steps", args.wp_steps),
                            ("--batch-size", args.batch_size), ("--seq-len", args.seq_len)) if v is not None]
    if other:
        raise ValueError(f"--converged has its own protocol: drop {', '.join(other)}")
    args.out = args.out if args.campaign in (None, "converged") or args.out != "runs/converged-report/results.md" \
        else f"runs/{args.campaign}-report/results.md"
    plan = campaigns()[args.campaign or "converged"]
    args.store = args.store or f"runs/{plan.name}"
    if args.collect and args.dry_run:
        raise ValueError("--collect writes the report and --dry-run prints the plan: choose one")
    if args.corpus_file:
        from dataclasses import replace

        plan = replace(plan, corpus_override=args.corpus_file)
    only = None
    if args.only is not None:
        only = tuple(k.strip() for k in args.only.split(",") if k.strip())
        if not only:
            raise ValueError("--only needs at least one comparison key")
    plan.comparisons(only)  # unknown keys: one line, before anything runs
    from pathlib import Path

    if (args.collect or args.dry_run) and (args.max_jobs is not None or args.device is not None
                                           or args.hours is not None):
        raise ValueError("--collect and --dry-run train nothing: drop --max-jobs, --device and --hours")
    if not args.collect:
        check_store(args.store)
    if args.dry_run:
        return _dry_run(plan, RunStore(args.store), only, args.workers)
    restored = records = header = None
    if args.restore is not None and _is_records(args.restore):
        from geomlab.report.records import read_records

        header, records = read_records(args.restore)  # RecordsError (a ValueError): one line naming the file
        if header.get("campaign") != plan.name:
            raise ValueError(f"--restore {args.restore}: records of the {header.get('campaign')!r} campaign, not "
                             f"of {plan.name!r} (choose it with --campaign)")
    elif args.restore is not None:
        restored = _read_input(args.restore, "--restore")
        if plan.name != "converged":
            raise ValueError(f"--restore {args.restore}: a converged report's results.json restores the converged "
                             f"campaign only; the {plan.name} campaign restores from its records file "
                             f"(docs/results/runs/{plan.name}/records.jsonl)")
    check_outputs([("--out", args.out, False)] + ([("--records", args.records, False)] if args.records else []))
    if args.collect and restored is None and records is None and not Path(args.store).exists():
        raise ValueError(f"--store {args.store} does not exist: no campaign has run there (nothing to collect; "
                         "--restore FILE collects from a records file)")
    if Path(args.store).exists() and not Path(args.store).is_dir():
        raise ValueError(f"--store {args.store} is a file, not a folder")
    speed = None
    if args.speed is not None:
        speed = _read_input(args.speed, "--speed")
        if not isinstance(speed, dict) or speed.get("kind") != "bench-train" or not isinstance(speed.get("rows"), list):
            raise ValueError(f"--speed {args.speed}: not a `geomlab bench train --json` file")
    store = RunStore(args.store)
    if records is not None:
        from geomlab.report.records import load_records

        n = load_records(records, store)
        print(f"[{plan.name}] restored {n} finished run(s) from {args.restore} into {args.store}")
    if restored is not None:
        try:
            n = campaign_results.restore(plan, store, restored)  # checks the file's kind before writing anything
        except ValueError as exc:
            raise ValueError(f"--restore {args.restore}: {exc}") from exc
        except (KeyError, TypeError, AttributeError, IndexError) as exc:  # a converged kind of another shape
            raise ValueError(f"--restore {args.restore}: not a converged report's results.json "
                             f"({type(exc).__name__}: {str(exc)[:80]})") from None
        print(f"[converged] restored {n} finished run(s) from {args.restore} into {args.store}")
    if not args.collect:
        from geomlab.report import dispatch
        from geomlab.training.runs import check_device

        ex = dispatch.executor(args.executor, Path(args.store) / "_submitit", threads=args.threads or 1,
                               slurm={"slurm_partition": args.slurm_partition} if args.slurm_partition else None)
        deadline = cost = progress = None
        if args.hours is not None:
            import time

            from geomlab.report.plan import seconds_left, seconds_to_checkpoint

            deadline = time.time() + args.hours * 3600
            cost = lambda j: HOURS_MARGIN * seconds_left(plan, store, j)  # noqa: E731
            progress = lambda j: HOURS_MARGIN * seconds_to_checkpoint(plan, j)  # noqa: E731
        lower_autogroup(args.nice)
        with _term_interrupts():  # `kill` stops the runs in flight too (they resume from their checkpoints)
            n = dispatch.dispatch(plan, store, ex, parallel=args.workers, only=only,
                                  device=check_device(args.device or "auto"), threads=args.threads or 1,
                                  nice=args.nice, max_jobs=args.max_jobs, deadline=deadline, cost=cost,
                                  progress=progress)
        print(f"[{plan.name}] {n} run(s) finished through submitit ({args.executor})")
    # a records file carries its corpora's split and unigram BPC: the report needs no corpus on this machine
    given = (header.get("meta") or {}).get("corpora") if records is not None and not args.corpus_file else None
    results = campaign_results.collect(plan, store, only, corpora=given)
    if args.records is not None:
        from geomlab.report.records import write_records

        corpora = {c["key"]: {"split": c.get("split", ""), "unigram_bpc": c.get("unigram_bpc")}
                   for c in results["comparisons"]}
        with make_folders("--records", args.records):
            n = write_records(store, args.records, plan.name, {"corpora": corpora})
        print(f"[{plan.name}] wrote {n} run record(s) to {args.records}")
    if speed is not None:
        results["speed_alone"] = speed
    with make_folders("--out", args.out):
        path = write_report(results, args.out, png=not args.no_png)
    print(f"wrote {path}: {results['progress']['done']} of {results['progress']['planned']} runs "
          + ("planned so far " if plan.name == "fair" else "") + "finished"
          + ("" if results["progress"]["done"] else f" (no finished campaign run in {args.store} yet)")
          + (f". {_growth(results, plan.seed_rule[1])}" if plan.name == "fair" else ""))
    return 0


def _growth(results: dict, most: int) -> str:
    """How the fair campaign's runs planned so far follow from ``--dry-run``'s count
    (:func:`geomlab.report.page.growth_sentence`), and what joins later (``most``: the seed rule's most seeds)."""
    from geomlab.report.page import growth_sentence, plan_growth

    return (growth_sentence(plan_growth(results), "The cost table of `--dry-run`") + " More join as runs finish: "
            f"lr runs where a grid's best lr sits on an edge, and seeds until every gap settles (at most {most} per "
            "comparison).")


def check_store(path: str) -> None:
    """``ValueError`` (one line) when the run store ``path`` cannot be a folder this process writes: its nearest
    existing part is a file, or not writable."""
    import os
    from pathlib import Path

    p = Path(path).absolute()
    for part in (p, *p.parents):
        if part.exists():
            if not part.is_dir():
                raise ValueError(f"--store {path}: {part} is a file, not a folder")
            if not os.access(part, os.W_OK | os.X_OK):
                raise ValueError(f"--store {path}: {part} is not writable here")
            return


def _dry_run(plan, store, only, workers: int) -> int:
    """``--dry-run``: the campaign's blocks with their CPU-hour estimate, and the runs ready now in ``store``."""
    from geomlab.report.campaign import jobs
    from geomlab.report.plan import estimate, estimate_table

    rows = [r for r in estimate(plan) if not only or r["block"] in only]
    print(f"# the {plan.name} campaign: {len(rows)} block(s)\n")
    print("\n".join(estimate_table(rows, workers)))
    ready = list(jobs(plan, store, only))  # reads the store only (a missing folder: nothing finished)
    print(f"\n{len(ready)} run(s) ready to start now (store {store.root}; more follow as tuning finishes); the first:")
    for j in ready[:5]:
        print(f"  {j.key}")
    return 0

