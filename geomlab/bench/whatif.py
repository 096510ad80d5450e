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
"""

from __future__ import annotations

import time

import torch

from geomlab.bench import run_benchmark
from geomlab.checkpoints import catalog as ckpt_catalog, io
from geomlab.core.argv import Parser, max_threads, name_list, number, threads
from geomlab.models import kinds
from geomlab.trace import MAX_TEXT_CHARS
from geomlab.whatif import catalog
from geomlab.whatif.patching import patch, patch_points, patching_sweep

PASSAGE = ("ROMEO: But, soft! what light through yonder window breaks? It is the east, and Juliet is the sun. "
           "Arise, fair sun, and kill the envious moon, who is already sick and pale with grief. ")
KNOB_SIZE = {"steer": 0.5, "rotate_plane": 0.5, "ablate_head": 1.0}


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
    ap = Parser(prog="geomlab bench whatif", description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=number(int, 2, MAX_TEXT_CHARS), default=256,
                    help=f"tokens of text, 2 to {MAX_TEXT_CHARS:,} (a patch needs two positions; the app's limit; "
                    "default 256)")
    ap.add_argument("--repeats", type=number(int, 1, 10**4), default=3,
                    help="timed repeats, best of (1 to 10,000; default 3)")
    ap.add_argument("--threads", type=threads, default=1, help=f"torch threads, 1 to {max_threads()} (default 1)")
    ap.add_argument("--kinds", type=name_list(kinds(), "kind"), default=None,
                    help="only these kinds, comma-separated (default: every kind)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the full patching sweeps (the slow part)")
    return run_benchmark(ap, argv, _measure)


def _measure(args) -> dict:
    """Time every bundled checkpoint chosen by ``args``; print the table; its rows (milliseconds, seconds and
    the ratios to the forward pass; ``None`` where nothing was measured)."""
    torch.set_num_threads(args.threads)
    only = set(args.kinds or ())
    rows = []
    print(f"{'checkpoint':42s} {'kind':14s} {'forward ms':>10s} {'knob':>13s} {'knob ms':>8s} {'patch ms':>8s} "
          f"{'sweep s':>8s}")
    for entry in sorted(ckpt_catalog.list_checkpoints(user=False), key=lambda e: e.ref):
        if only and entry.kind not in only:
            continue
        ck = io.load(entry.ref)
        if ck.vocab is None:
            continue
        model = ck.model.eval()
        tokens = _tokens(ck.vocab, args.chars)
        mid, other = len(tokens) // 2, torch.roll(tokens, 1)

        def forward():
            with torch.no_grad():
                model(tokens[None])

        knobs = catalog.available(model)
        knob = knobs[0].name if knobs else "-"
        size = KNOB_SIZE.get(knob, catalog.neutral_size(knob, model) + 2 if knob != "-" else 0)
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
        print(f"{entry.ref:42s} {entry.kind:14s} {1e3 * f:>10.1f} {knob:>13s} {1e3 * k:>8.1f} {1e3 * p:>8.1f} "
              f"{s:>8.2f}", flush=True)
        rows.append({"checkpoint": entry.ref, "kind": entry.kind, "forward_ms": 1e3 * f, "knob": knob,
                     "knob_ms": 1e3 * k, "patch_ms": 1e3 * p, "sweep_s": s, "knob_over_forward": k / f,
                     "patch_over_forward": p / f, "sweep_over_forward": s / f})
    return {"chars": args.chars, "repeats": args.repeats, "rows": rows}
