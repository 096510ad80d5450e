"""``geomlab bench checkpoints``: what checking the weights' sha256 costs a checkpoint's load.

For a bundled checkpoint (the one with the largest weights file) and a synthetic one of about ``--mb`` MiB of
weights (an LSTM, saved to a temporary folder), it times :func:`geomlab.checkpoints.io.load` three ways, each
the median of ``--repeats`` loads with the files in the page cache (the three interleaved):

* ``unchecked``: a copy whose ``geomlab.json`` records no sum of the weights (a checkpoint saved before it was
  recorded): the baseline;
* ``checked``: the sum recorded and verified, the process's cache of verified files emptied before each load
  (the first load of a file in a process);
* ``cached``: the sum recorded, the file verified before (every later load of an unchanged file in a process:
  :func:`geomlab.checkpoints.files.file_sha256`).

Printed: the weights' size, each median in ms, and ``checked`` and ``cached`` as ratios to ``unchecked``
measured in the same run. A measurement, not a test: nothing is asserted.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, number


#: What the keys of the JSON (``--json``) mean.
DEFINITIONS = {
    "repeats": "loads per median",
    "rows": "the largest bundled checkpoint, then the synthetic LSTM",
    "name": "the checkpoint folder's name", "weights_mib": "size of its weights file, MiB",
    "unchecked_ms": "median load without a recorded sum of the weights (the baseline), ms",
    "checked_ms": "median load with the sum recorded and verified (a file's first load in a process), ms",
    "cached_ms": "median load of a file already verified in this process, ms",
    "checked_ratio": "checked_ms / unchecked_ms (same run): what verifying the sum costs, 1 = nothing",
    "cached_ratio": "cached_ms / unchecked_ms (same run)",
}


def _lstm_hidden(mb: float, vocab_size: int) -> int:
    """The LSTM width whose float32 weights (one layer, one-hot input: ``4h(V + h) + 8h + hV + V`` parameters)
    come closest to ``mb`` MiB from below."""
    target = mb * 2**20 / 4
    h = 1
    while 4 * (h + 1) * (vocab_size + h + 1) + 8 * (h + 1) + (h + 1) * vocab_size + vocab_size <= target:
        h += 1
    return h


def _medians_ms(runs: list, repeats: int) -> list[float]:
    """The median time (ms) of each ``(load, path, before)`` of ``runs`` over ``repeats`` rounds, the runs
    interleaved within a round so that a machine getting busier slows them alike; ``before`` (or None) runs
    untimed before each load."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for i, (load, path, before) in enumerate(runs):
            if before is not None:
                before()
            t0 = time.perf_counter()
            load(path)
            times[i].append(time.perf_counter() - t0)
    return [1000 * statistics.median(t) for t in times]


def _without_sum(folder: Path, dest: Path) -> Path:
    """A copy of checkpoint folder ``folder`` at ``dest`` whose ``geomlab.json`` records no sum of the weights."""
    from geomlab.checkpoints import files as ckpt_files

    shutil.copytree(folder, dest)
    meta = json.loads((dest / ckpt_files.META).read_text())
    (meta.get("files") or {}).pop(ckpt_files.WEIGHTS, None)
    (dest / ckpt_files.META).write_text(json.dumps(meta, indent=1))
    return dest


def measure(folder: Path, work: Path, repeats: int) -> dict:
    """One row of the table for checkpoint folder ``folder`` (which records its weights' sum): its name, the
    weights' size in MiB, the ``unchecked``, ``checked`` and ``cached`` medians of ``repeats`` loads in ms (the
    unchecked copy written under ``work``) and the two ratios to ``unchecked``, rounded. Raises what
    :func:`geomlab.checkpoints.io.load` raises for a folder that does not load."""
    from geomlab.checkpoints import files as ckpt_files
    from geomlab.checkpoints import io as ckpt

    plain = _without_sum(folder, work / f"{folder.name}-unchecked")
    ckpt.load(folder)  # the files in the page cache, torch's first-call costs paid
    ckpt.load(plain)

    def remember() -> None:
        ckpt_files.file_sha256(folder / ckpt_files.WEIGHTS)

    unchecked, checked, cached = _medians_ms([(ckpt.load, plain, None), (ckpt.load, folder, ckpt_files.forget_sums),
                                              (ckpt.load, folder, remember)], repeats)
    mib = (folder / ckpt_files.WEIGHTS).stat().st_size / 2**20
    return {"name": folder.name, "weights_mib": round(mib, 2), "unchecked_ms": round(unchecked, 2),
            "checked_ms": round(checked, 2), "cached_ms": round(cached, 2),
            "checked_ratio": round(checked / unchecked, 3), "cached_ratio": round(cached / unchecked, 3)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (0)."""
    from geomlab.checkpoints.reading import MAX_PARAMS

    most = MAX_PARAMS * 4 // 2**20  # float32 weights at the loader's parameter limit, MiB
    p = Parser(prog="geomlab bench checkpoints", description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=number(float, 1.0, float(most)), default=100.0,
                   help=f"weights of the synthetic checkpoint in MiB, 1 to {most} (the loader's parameter limit; "
                   "default 100)")
    p.add_argument("--repeats", type=number(int, 1, 100), default=5, help="loads per median, 1 to 100 (default 5)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict:
    """Time the loads of the largest bundled checkpoint and a synthetic one of ``args.mb`` MiB; print the
    table; its rows (milliseconds, ratios to the unchecked load)."""
    import torch

    from geomlab.checkpoints import files as ckpt_files
    from geomlab.checkpoints import io as ckpt
    from geomlab.core.locate import bundled_dir
    from geomlab.data import Vocab
    from geomlab.models import build_model

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="geomlab-bench-ckpt-") as tmp:
        work = Path(tmp)
        rows = []
        bundled = sorted((d for d in bundled_dir().iterdir() if (d / ckpt_files.WEIGHTS).is_file()),
                         key=lambda d: (d / ckpt_files.WEIGHTS).stat().st_size)
        if bundled:
            rows.append(measure(bundled[-1], work, args.repeats))
        vocab = Vocab.from_text("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,;:!?'-\n0123456789")
        torch.manual_seed(0)
        model = build_model({"kind": "lstm", "vocab_size": vocab.size, "hidden": _lstm_hidden(args.mb, vocab.size)})
        synthetic = ckpt.save(work / f"lstm-{args.mb:g}mib", model, vocab, {"corpus": "synthetic"}, layout="folder")
        del model
        rows.append(measure(synthetic, work, args.repeats))
        print(f"{'checkpoint':<36} {'MiB':>7} {'unchecked':>10} {'checked':>9} {'cached':>8} {'checked/un':>11} "
              f"{'cached/un':>10}")
        for r in rows:
            print(f"{r['name']:<36} {r['weights_mib']:>7.2f} {r['unchecked_ms']:>8.1f}ms {r['checked_ms']:>7.1f}ms "
                  f"{r['cached_ms']:>6.1f}ms {r['checked_ratio']:>11.3f} {r['cached_ratio']:>10.3f}")
    return {"repeats": args.repeats, "rows": rows}
