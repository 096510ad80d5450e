"""``geomlab bench device``: the speed comparison of ``bench train`` and ``bench groups`` on an
accelerator (CUDA) when one is present.

Runs the training-step ratios of :mod:`geomlab.bench.train` (the same pairs and budgets, wall time with
``torch.cuda.synchronize``) and the ``exp`` forward+backward ratio of :mod:`geomlab.bench.groups` against
``torch.linalg.matrix_exp`` for O(d) at d = 2..32, on ``cuda``. It also checks that one OSMFormer training
step makes no host synchronisation (``torch.cuda.set_sync_debug_mode("error")`` around forward and backward).
Without CUDA it says so and exits 0 (``--device cpu`` runs the same script on the CPU, for a smoke test).
The protocol is a design choice. CI has no GPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from geomlab.bench import groups as groups_bench
from geomlab.bench import only_names, run_benchmark
from geomlab.bench import train as train_bench
from geomlab.core.argv import Parser, device_option, name_list, number, number_list
from geomlab.geometry.groups import get_group
from geomlab.training.trainer import resolve_device


#: What the keys of the JSON (``--json``) mean: the training table's are ``bench train``'s.
DEFINITIONS = {
    **train_bench.DEFINITIONS,
    "device": "the GPU's name (or cpu, mps); null without CUDA, the tables then empty",
    "sync_free": "ok: one OSMFormer forward+backward made no host synchronisation; else the first that did",
    "exp_batch": "algebra elements per timed exp call",
    "exp": "one per d: O(d)'s exp (Taylor) against torch.linalg.matrix_exp, forward+backward, best of 5",
    "group": "the group of the exp table (O)", "d": "matrix size d x d",
    "exp_ms": "MatrixGroup.exp forward+backward on the batch, ms",
    "matrix_exp_ms": "torch.linalg.matrix_exp forward+backward on the same batch, ms",
    "ratio": "exp_ms / matrix_exp_ms (same run); below 1: exp is faster",
}


def sync_free_step(device: torch.device) -> str:
    """One OSMFormer (d = 17, linear mixing) forward + backward under ``set_sync_debug_mode("error")`` on
    ``device`` (CUDA only); returns ``"ok"`` or the error raised by the first synchronising call."""
    if device.type != "cuda":
        return "n/a (not CUDA)"
    cfg, _, _ = train_bench.build(["osmformer-d17"])["osmformer-d17"]
    stepper = train_bench._Stepper(cfg, 4, 32, device, seed=0)
    stepper.step()  # warm-up: caches (coordinate maps, index tensors) are built outside the check
    torch.cuda.synchronize(device)
    try:
        torch.cuda.set_sync_debug_mode("error")
        logits = stepper.model(stepper.x)
        loss = F.cross_entropy(logits.reshape(-1, stepper.V), stepper.y.reshape(-1))
        loss.backward()
    except RuntimeError as exc:
        return f"synchronises: {str(exc).splitlines()[0]}"
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return "ok"


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the tables. Returns 0."""
    p = Parser(prog="geomlab bench device", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", type=device_option, default="cuda",
                   help="cuda (default), cuda:N, or cpu, mps, auto for a smoke test")
    p.add_argument("--rounds", type=number(int, 1, 10**4), default=7, help="interleaved timed rounds, 1 to 10,000 "
                   "(default 7)")
    p.add_argument("--warmup", type=number(int, 0, 10**4), default=3, help="untimed steps per model first, 0 to "
                   "10,000 (default 3)")
    p.add_argument("--batch", type=number(int, 1, 2**20), default=4096, help="exp batch, 1 to 2**20 (default 4096)")
    p.add_argument("--dims", type=number_list(int, 1, 1024), default=[2, 3, 4, 5, 8, 12, 16, 17, 24, 32],
                   help="comma list of d for the exp table, each 1 to 1,024 (default 2,3,4,5,8,12,16,17,24,32)")
    p.add_argument("--only", nargs="*", type=name_list(train_bench.NAMES, "model"), default=None, metavar="NAME",
                   help="model names for the training table, separated by spaces or commas (their baselines are "
                   f"added): {', '.join(train_bench.NAMES)}")
    p.add_argument("--quick", action="store_true", help="2 rounds, 1 warm-up, exp batch 256, 4 sizes (overrides "
                   "those options)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(a) -> dict:
    """The sync check, the ``exp`` ratios and the training-step ratios on the device of ``a``; print them;
    their figures (``exp`` in ms, the rows of :func:`geomlab.bench.train.measure`); no device: empty tables."""
    if a.quick:
        a.rounds, a.warmup, a.batch, a.dims = 2, 1, 256, [2, 5, 17, 32]
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (geomlab bench train is the CPU comparison)")
        return {"device": None, "sync_free": None, "exp": [], "rows": []}
    device = resolve_device(a.device)  # one line when this machine lacks it (mps), before any work
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # Nunley, arXiv 2602.18417: full float32
        print(f"# device {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    sync = sync_free_step(device)
    print(f"sync-free OSMFormer forward+backward: {sync}")
    exp = []
    print("\nexp forward+backward, O(d), ratio to torch.linalg.matrix_exp (best of 5, interleaved):")
    for d in a.dims:
        r = groups_bench.time_exp(get_group("O", d), a.batch, 5, device, method="taylor")
        print(f"  d={d:>2}: exp {1e3 * r['exp_s']:8.3f} ms   matrix_exp {1e3 * r['matrix_exp_s']:8.3f} ms   "
              f"ratio {r['ratio']:.2f}")
        exp.append({"group": "O", "d": d, "exp_ms": 1e3 * r["exp_s"], "matrix_exp_ms": 1e3 * r["matrix_exp_s"],
                    "ratio": r["ratio"]})
    batch, seq = train_bench.BATCH, train_bench.SEQ
    rows = train_bench.measure(train_bench.build(only_names(a.only)), a.rounds, a.warmup, batch, seq, device)
    print(f"\ntraining step, batch {batch} x {seq}, {a.rounds} interleaved rounds ({device.type}):")
    print(train_bench.format_table(rows))
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    return {"device": name, "sync_free": sync, "exp_batch": a.batch, "batch": batch, "seq": seq, "rounds": a.rounds,
            "warmup": a.warmup, "clock": train_bench.clock_name(device), "exp": exp, "rows": rows}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
