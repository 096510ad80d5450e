"""``geomlab bench whatif``: the time of one steer on the group (:func:`geomlab.whatif.steer.steer_state`) on
the bundled OSM checkpoints, against one plain forward pass of the same text measured in the same run.

For each bundled ``osm-rnn`` / ``osmformer`` checkpoint: ``--chars`` (default 256) tokens of text (the
character checkpoints: a Shakespeare passage repeated; the word-problem ones: seeded random symbols), one
thread, eval mode. ``forward`` is the best-of-``--repeats`` seconds of ``model(tokens)`` under
``torch.no_grad``; ``steer`` the best-of of one ``steer_state`` at the middle position (a random direction,
``eps = 0.5``: a cached run, the step on the group and a hooked run); ``ratio`` = steer / forward (about 2:
a steer is two forward passes). Only the ratio is meant to be compared across machines.
"""

from __future__ import annotations

import argparse
import time

import torch

from geomlab.checkpoints import catalog, io
from geomlab.whatif.steer import steer_state

PASSAGE = ("ROMEO: But, soft! what light through yonder window breaks? It is the east, and Juliet is the sun. "
           "Arise, fair sun, and kill the envious moon, who is already sick and pale with grief. ")


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
    """Print one row per bundled OSM checkpoint: kind, group, d, layers, forward ms, steer ms, ratio."""
    ap = argparse.ArgumentParser(prog="geomlab bench whatif", description=__doc__.splitlines()[0])
    ap.add_argument("--chars", type=int, default=256, help="tokens of text (default 256)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats, best of (default 5)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{'checkpoint':42s} {'group':8s} {'d':>4s} {'L':>2s} {'forward ms':>11s} {'steer ms':>9s} {'ratio':>6s}")
    for ref in _osm_refs():
        ck = io.load(ref)
        model = ck.model.eval()
        tokens = _tokens(ck.vocab, args.chars)
        mid = len(tokens) // 2

        def forward():
            with torch.no_grad():
                model(tokens[None])

        def steer():
            steer_state(model, tokens, 0, mid, "random", 0.5)

        f, s = _best(forward, args.repeats), _best(steer, args.repeats)
        c = model.config
        print(f"{ref:42s} {c['group']:8s} {c['d']:>4d} {getattr(model, 'n_layers', 1):>2d} "
              f"{1e3 * f:>11.2f} {1e3 * s:>9.2f} {s / f:>6.2f}")
    return 0


def _osm_refs() -> list[str]:
    """``bundled/NAME`` of every bundled OSM checkpoint, by name."""
    return sorted(e.ref for e in catalog.list_checkpoints(user=False) if e.kind in ("osm-rnn", "osmformer"))
