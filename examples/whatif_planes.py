"""Move a plane on the bundled Grassmann model: the time of one rotate_plane at 256 characters (one thread),
and how the next-token KL divergence grows with the angle, per layer (each layer has one offset slot).

Run from the repository root: ``GEOMLAB_DATA_DIR=/work/shared/data python examples/whatif_planes.py``
(``--time-only`` skips the corpus part). Not a test: prints numbers.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
import torch

from geomlab.checkpoints.io import load
from geomlab.data.corpora import load_corpus
from geomlab.whatif.planes import rotate_plane

ANGLES = (0.0, 0.25, 0.5, 1.0, math.pi / 2)


def timing(ck, text: str) -> None:
    x = ck.vocab.encode(text[:256])
    for layer in (0, len(ck.model.blocks) - 1):
        rotate_plane(ck.model, x, layer, 200, 0, 0.5)  # warm-up
        times = []
        for i in range(10):
            t0 = time.perf_counter()
            rotate_plane(ck.model, x, layer, 200, 0, 0.5, seed=i)
            times.append(time.perf_counter() - t0)
        print(f"rotate_plane, 256 characters, layer {layer}: median {1e3 * np.median(times):.1f} ms "
              f"(min {1e3 * min(times):.1f} ms, 10 runs, 1 thread)")


def finding(ck, text: str, n: int = 20, T: int = 128, t: int = 100) -> None:
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(text) - T, size=n)
    offsets = [b.mixer.offsets[0] for b in ck.model.blocks]
    print(f"KL(before || after) in bits, mean over {n} windows of {T} characters (Tiny Shakespeare test split), "
          f"plane of (t, t - D) moved at t = {t}, random direction (seed = window)")
    print("layer  D   " + "  ".join(f"a={a:.2f}: next / rest" for a in ANGLES))
    for layer, D in enumerate(offsets):
        cells = []
        for a in ANGLES:
            nxt, rest = [], []
            for i, s in enumerate(starts):
                kl = rotate_plane(ck.model, ck.vocab.encode(text[s:s + T]), layer, t, 0, a, seed=i).kl_bits()
                nxt.append(kl[t])
                rest.append(kl[t + 1:].sum())
            cells.append(f"{np.mean(nxt):.4f} / {np.mean(rest):.4f}")
        print(f"{layer:5d} {D:2d}   " + "   ".join(cells))


def main() -> None:
    torch.set_num_threads(1)
    ck = load("assets/checkpoints/grassmann-tinyshakespeare")
    corpus = load_corpus("tinyshakespeare", download=False) if "--time-only" not in sys.argv else None
    text = corpus.test if corpus is not None else ("First Citizen:\nBefore we proceed any further, hear me "
                                                     "speak.\n\nAll:\nSpeak, speak.\n\n" * 6)
    timing(ck, text)
    if corpus is not None:
        finding(ck, text)


if __name__ == "__main__":
    main()
