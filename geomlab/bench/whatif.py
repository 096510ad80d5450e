"""``geomlab bench whatif``: what an intervention costs on every bundled checkpoint, against one plain forward
pass of the same text measured in the same run.

For each bundled checkpoint: ``--chars`` (default 256) tokens of text (the character checkpoints: a Shakespeare
passage repeated; the word-problem ones: seeded random symbols), one thread, eval mode. ``forward`` is the
best-of-``--repeats`` seconds of ``model(tokens)`` under ``torch.no_grad``; ``knob`` the best-of of the
checkpoint's first intervention of :mod:`geomlab.whatif.catalog` at the middle position (the app's "What if"
panel: steer, move a plane, energy steps, ablate a head; ``-`` where none applies); ``patch`` one activation
patch of the last layer's state at the middle position (:func:`geomlab.whatif.patching.patch`); ``sweep``
one full patching sweep over every layer and position up to the last (:func:`~geomlab.whatif.patching.patching_sweep`,
timed once). Only the ratios are meant to be compared across machines.

``--targets`` measures instead how often the default patching sweep is one whose swap barely changes the
prediction (:attr:`~geomlab.whatif.patching.Sweep.barely_changes`), with a fixed target 3 positions on (the
baseline) and with :func:`~geomlab.whatif.patching.choose_target`'s: for each bundled text checkpoint with
patch points, its default text (:func:`geomlab.checkpoints.catalog.demo_text`), ``--positions`` cursor
positions spread over it, the stand-in the app offers (:func:`~geomlab.whatif.patching.default_stand_in`);
also the choice's milliseconds against the sweep's at the chosen target.
"""

from __future__ import annotations

import time

import torch

from geomlab.bench import cell, run_benchmark
from geomlab.checkpoints import catalog as ckpt_catalog, io
from geomlab.core.argv import Parser, max_threads, name_list, number, threads
from geomlab.models import kinds
from geomlab.trace import MAX_TEXT_CHARS
from geomlab.whatif import catalog
from geomlab.whatif.patching import (SWEEP_SPAN, choose_target, default_stand_in, patch, patch_points,
                                     patching_sweep, token_swap_sweep)

PASSAGE = ("ROMEO: But, soft! what light through yonder window breaks? It is the east, and Juliet is the sun. "
           "Arise, fair sun, and kill the envious moon, who is already sick and pale with grief. ")
KNOB_SIZE = {"steer": 0.5, "rotate_plane": 0.5, "ablate_head": 1.0}


#: What the keys of the JSON (``--json``) mean: times are the best of ``--repeats``, one thread.
DEFINITIONS = {
    "chars": "tokens of text", "repeats": "timed runs, best of (after one warm-up)",
    "rows": "one per bundled checkpoint",
    "checkpoint": "the bundled checkpoint", "kind": "its model kind",
    "forward_ms": "one plain forward pass of the text (the baseline), ms",
    "knob": "the checkpoint's first intervention of the What if panel; null: none applies",
    "knob_ms": "that intervention at the middle position, ms; null: none applies",
    "patch_ms": "one activation patch of the last layer's state at the middle position, ms",
    "sweep_s": "one full patching sweep over every layer and position, s (timed once); null with --no-sweep",
    "knob_over_forward": "knob_ms / forward_ms (same run)", "patch_over_forward": "patch_ms / forward_ms",
    "sweep_over_forward": "sweep_s / forward pass s",
    "positions": "--targets: cursor positions per text",
    "sweeps": "--targets: sweeps run (positions whose stand-in differs from the token)",
    "barely_3_on": "--targets: sweeps that barely change the prediction with the target 3 positions on (the "
                  "baseline)",
    "barely_chosen": "--targets: the same with choose_target's target",
    "choose_ms": "--targets: median time of choosing the target, ms",
    "sweep_ms": "--targets: median time of the sweep at the chosen target, ms",
}


def _tokens(vocab, n: int, seed: int = 0) -> torch.Tensor:
    if vocab.level == "char":
        text = (PASSAGE * (n // len(PASSAGE) + 1))[:n]
        return torch.as_tensor(vocab.encode(text), dtype=torch.long)
    return torch.randint(0, len(vocab), (n,), generator=torch.Generator().manual_seed(seed))


def _best(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    """Print one row per bundled checkpoint: kind, forward ms, the knob and its ms, patch ms, sweep s."""
    ap = Parser(prog="geomlab bench whatif", description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=number(int, 2, MAX_TEXT_CHARS), default=256,
                    help=f"tokens of text, 2 to {MAX_TEXT_CHARS:,} (a patch needs two positions; the app's limit; "
                    "default 256)")
    ap.add_argument("--repeats", type=number(int, 1, 10**4), default=3,
                    help="timed repeats, best of (1 to 10,000; default 3)")
    ap.add_argument("--threads", type=threads, default=1, help=f"torch threads, 1 to {max_threads()} (default 1)")
    ap.add_argument("--kinds", type=name_list(kinds(), "kind"), default=None,
                    help="only these kinds, comma-separated (default: every kind)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the full patching sweeps (the slow part)")
    ap.add_argument("--targets", action="store_true",
                    help="instead: how often the default patching sweep barely changes the prediction, target 3 on "
                         "against choose_target's, on each checkpoint's default text (--chars and --repeats unused)")
    ap.add_argument("--positions", type=number(int, 1, 1000), default=10,
                    help="--targets: cursor positions per text, spread over it (1 to 1,000; default 10)")
    return run_benchmark(ap, argv, lambda args: _targets(args) if args.targets else _measure(args), DEFINITIONS)


def _checkpoints(args):
    """``(entry, checkpoint, model in eval mode)`` of every bundled checkpoint with a vocabulary whose kind
    ``args.kinds`` names (every kind when None), by ref; torch's threads set to ``args.threads`` first."""
    torch.set_num_threads(args.threads)
    only = set(args.kinds or ())
    for entry in sorted(ckpt_catalog.list_checkpoints(user=False), key=lambda e: e.ref):
        if only and entry.kind not in only:
            continue
        ck = io.load(entry.ref)
        if ck.vocab is not None:
            yield entry, ck, ck.model.eval()


def _targets(args) -> dict:
    """``--targets``: per checkpoint, the sweeps run, how many barely change the prediction with the target 3
    positions on and with :func:`~geomlab.whatif.patching.choose_target`'s, and the choice's and the sweep's
    milliseconds (medians); the totals."""
    from geomlab.trace import encode_text

    rows = []
    print(f"{'checkpoint':42s} {'kind':14s} {'sweeps':>6s} {'barely 3 on':>11s} {'barely chosen':>13s} "
          f"{'choose ms':>9s} {'sweep ms':>8s}")
    for entry, ck, model in _checkpoints(args):
        try:
            patch_points(model)
        except ValueError:  # a kind without patch points has no sweep
            continue
        tokens = encode_text(ck.vocab, ckpt_catalog.demo_text(entry)).reshape(-1)
        T = len(tokens)
        if T < 2:
            continue
        positions = sorted({int(round(x)) for x in torch.linspace(0, T - 2, args.positions).tolist()})
        old = new = 0
        choose_ms, sweep_ms = [], []
        for pos in positions:
            other = ck.vocab.tokens.index(default_stand_in(ck.vocab.tokens, ck.vocab.tokens[int(tokens[pos])]))
            if other == int(tokens[pos]):
                continue
            hi = min(T - 1, pos + SWEEP_SPAN - 1)  # the last position the sweep may read
            old += token_swap_sweep(model, tokens, pos, other, min(pos + 3, hi)).barely_changes
            chosen = choose_target(model, tokens, pos, other)
            sweep = token_swap_sweep(model, tokens, pos, other, chosen.position)
            new += sweep.barely_changes
            choose_ms.append(1e3 * chosen.seconds)
            sweep_ms.append(1e3 * sweep.seconds)
        n = len(choose_ms)
        if not n:
            continue
        c, w = float(torch.tensor(choose_ms).median()), float(torch.tensor(sweep_ms).median())
        print(f"{entry.ref:42s} {entry.kind:14s} {n:>6d} {old:>11d} {new:>13d} {c:>9.1f} {w:>8.1f}", flush=True)
        rows.append({"checkpoint": entry.ref, "kind": entry.kind, "sweeps": n, "barely_3_on": old,
                     "barely_chosen": new, "choose_ms": c, "sweep_ms": w})
    n = sum(r["sweeps"] for r in rows)
    old, new = sum(r["barely_3_on"] for r in rows), sum(r["barely_chosen"] for r in rows)
    if n:
        print(f"{'all':57s} {n:>6d} {old:>11d} {new:>13d}   barely: {old / n:.0%} with 3 on, {new / n:.0%} chosen")
    return {"positions": args.positions, "rows": rows, "sweeps": n, "barely_3_on": old, "barely_chosen": new}


def _measure(args) -> dict:
    """Time every bundled checkpoint chosen by ``args``; print the table; its rows (milliseconds, seconds and
    the ratios to the forward pass; ``None`` where nothing was measured)."""
    rows = []
    print(f"{'checkpoint':42s} {'kind':14s} {'forward ms':>10s} {'knob':>13s} {'knob ms':>8s} {'patch ms':>8s} "
          f"{'sweep s':>8s}")
    for entry, ck, model in _checkpoints(args):
        tokens = _tokens(ck.vocab, args.chars)
        mid, other = len(tokens) // 2, torch.roll(tokens, 1)

        def forward():
            with torch.no_grad():
                model(tokens[None])

        knobs = catalog.available(model)
        knob = knobs[0].name if knobs else None
        size = KNOB_SIZE.get(knob, catalog.neutral_size(knob, model) + 2 if knob else 0)
        f = _best(forward, args.repeats)
        k = _best(lambda: catalog.apply(knob, model, tokens, mid, size), args.repeats) if knobs else float("nan")
        last = patch_points(model)[-1]
        p = _best(lambda: patch(model, tokens, other, last, mid), args.repeats)
        if args.no_sweep:
            s = float("nan")
        else:
            t0 = time.perf_counter()
            patching_sweep(model, tokens, other)
            s = time.perf_counter() - t0
        print(f"{entry.ref:42s} {entry.kind:14s} {1e3 * f:>10.1f} {cell(knob, '', 13)} {cell(1e3 * k, '.1f', 8)} "
              f"{1e3 * p:>8.1f} {cell(s, '.2f', 8)}", flush=True)
        rows.append({"checkpoint": entry.ref, "kind": entry.kind, "forward_ms": 1e3 * f, "knob": knob,
                     "knob_ms": 1e3 * k, "patch_ms": 1e3 * p, "sweep_s": s, "knob_over_forward": k / f,
                     "patch_over_forward": p / f, "sweep_over_forward": s / f})
    return {"chars": args.chars, "repeats": args.repeats, "rows": rows}
