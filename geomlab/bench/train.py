"""``geomlab bench train``: training-step time of each geometric model as a ratio to its baseline.

The pairs at the papers' budgets (V = 65): OSMFormer (linear mixing, ~100K: d = 17, 2 layers) and
OSMFormer (~91K: d = 15, 3 layers) against the ALiBi Transformer (~100K); OSM-RNN (~50K: d = 19) against the
LSTM (~50K); the torus OSMFormer of the zoo (T^128, 2 layers, 90.6K; no target) against the same
Transformer; CEM with T = 1 and T = 2 recursion steps (~200K) against Llama (~200K); Grassmann (~200K) against
its attention twin ``grassmann-attn`` (~200K). One step is forward, cross-entropy, backward and an AdamW step
on random tokens ``B x T`` (default 16 x 128). After ``--warmup`` steps of every model, each round times one
step of the model and one of its baseline back to back (order alternating between rounds, so load and order
effects hit both) and records their ratio; the table gives the median and the minimum ratio over the rounds.
Times are CPU time of the process on CPU (time descheduled on a shared machine is not counted) and wall time
with ``torch.cuda.synchronize`` on CUDA. Targets and protocol: design choice.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F

from geomlab.bench import only_names, run_benchmark
from geomlab.core.argv import Parser, device_option, max_threads, name_list, number, threads
from geomlab.models import build_model, config_for_budget, count_params
from geomlab.training.trainer import resolve_device

VOCAB = 65

#: (name, kind, budget, fixed config keys, baseline name, target ratio).
MODELS: tuple[tuple[str, str, int, dict, str | None, float | None], ...] = (
    ("transformer", "transformer", 100_000, {}, None, None),
    ("osmformer-d17", "osmformer", 100_000, {"mixing": "linear"}, "transformer", 2.0),
    ("osmformer-d15x3", "osmformer", 91_000, {"mixing": "linear"}, "transformer", 2.0),
    ("osmformer-torus", "osmformer", 91_000, {"mixing": "linear", "group": "T", "d": 128, "n_layers": 2,
                                              "prototypes": "support"}, "transformer", None),
    ("lstm", "lstm", 50_000, {}, None, None),
    ("osm-rnn", "osm-rnn", 50_000, {}, "lstm", 5.0),
    ("llama", "llama", 200_000, {}, None, None),
    ("cem-T1", "cem", 200_000, {"recursion_steps": 1}, "llama", 1.3),
    ("cem-T2", "cem", 200_000, {"recursion_steps": 2}, "llama", 2.3),
    ("grassmann-attn", "grassmann-attn", 200_000, {}, None, None),
    ("grassmann", "grassmann", 200_000, {}, "grassmann-attn", 1.2),
)


#: Sequences per step and tokens per sequence of the timed batch, unless ``--batch`` and ``--seq`` say otherwise
#: (``bench device`` times its training table at these).
BATCH, SEQ = 16, 128


def clock_name(device: torch.device) -> str:
    """What :func:`_clock` counts on ``device``: ``"wall"`` (CUDA, synchronised) or ``"process CPU"``."""
    return "wall" if device.type == "cuda" else "process CPU"


def _clock(device: torch.device) -> Callable[[], float]:
    if device.type == "cuda":
        def wall() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return wall
    return time.process_time


class _Stepper:
    """One model, its AdamW and a fixed random batch; ``step()`` runs one training step."""

    def __init__(self, cfg: dict, batch: int, seq: int, device: torch.device, seed: int):
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.model = build_model(cfg).to(device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        V = int(cfg["vocab_size"])
        self.x = torch.randint(0, V, (batch, seq), generator=gen).to(device)
        self.y = torch.randint(0, V, (batch, seq), generator=gen).to(device)
        self.V = V

    def step(self) -> None:
        logits = self.model(self.x)
        loss = F.cross_entropy(logits.reshape(-1, self.V), self.y.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


#: What the keys of the JSON (``--json``) mean (``geomlab report --converged --speed FILE`` reads ``batch``,
#: ``seq``, ``threads``, ``device``, ``clock``, ``rounds``, ``date``, ``load_avg`` and the rows); shared with
#: ``bench device``, whose training table is this one.
DEFINITIONS = {
    "device": "where it ran (cpu, cuda:0, ...)",
    "batch": "sequences per training step", "seq": "tokens per sequence",
    "warmup": "untimed steps per model before the rounds",
    "rounds": "timed rounds; each steps the model and its baseline back to back, order alternating",
    "clock": "what a time counts: process CPU time on CPU (time descheduled on a shared machine not counted), "
             "wall time with CUDA synchronisation on a GPU",
    "rows": "one per geometric model and its baseline",
    "name": "the model (bench train --only names)", "base": "its baseline model, at a matched parameter count",
    "params": "the model's parameters", "base_params": "the baseline's parameters",
    "ms": "the model's median time of one training step (forward, cross-entropy, backward, AdamW), ms",
    "base_ms": "the baseline's median step time, ms",
    "ratio_median": "median over the rounds of model step time / baseline step time in the same round "
                    "(1 = as fast as the baseline)",
    "ratio_min": "the smallest per-round ratio (the round least disturbed by other load)",
    "target": "the ratio the model aims to stay at or below (design choice); null: none",
}


#: The models' names, in the table's order (what ``--only`` takes).
NAMES = tuple(m[0] for m in MODELS)


def build(names: list[str] | None = None, vocab: int = VOCAB) -> dict[str, tuple[dict, str | None, float | None]]:
    """name -> (full config, baseline name or None, target ratio or None) for the chosen pairs (baselines
    added). Raises ``KeyError`` for an unknown name."""
    table = {m[0]: m for m in MODELS}
    if names:
        for n in names:
            if n not in table:
                raise KeyError(f"unknown model {n!r}; known: {', '.join(table)}")
        keep = set(names) | {table[n][4] for n in names if table[n][4]}
        rows = [m for m in MODELS if m[0] in keep]
    else:
        rows = list(MODELS)
    return {name: (config_for_budget(kind, budget, vocab, **fixed), base, target)
            for name, kind, budget, fixed, base, target in rows}


def measure(configs: dict[str, tuple[dict, str | None, float | None]], rounds: int = 7, warmup: int = 2,
            batch: int = BATCH, seq: int = SEQ, device: str | torch.device = "cpu") -> list[dict]:
    """Interleaved per-step ratios. Returns one dict per non-baseline model: ``name``, ``base``, ``params``,
    ``ms`` / ``base_ms`` (median step time), ``ratio_median``, ``ratio_min``, ``target``."""
    device = torch.device(device)
    clock = _clock(device)
    steppers = {n: _Stepper(cfg, batch, seq, device, seed=i) for i, (n, (cfg, _, _)) in enumerate(configs.items())}
    for _ in range(warmup):
        for s in steppers.values():
            s.step()
    pairs = [(n, b) for n, (_, b, _) in configs.items() if b]
    times: dict[str, list[float]] = {n: [] for n in steppers}
    ratios: dict[str, list[float]] = {n: [] for n, _ in pairs}
    for r in range(rounds):
        for n, b in pairs:
            order = (n, b) if r % 2 == 0 else (b, n)
            t = {}
            for k in order:
                t0 = clock()
                steppers[k].step()
                t[k] = clock() - t0
                times[k].append(t[k])
            ratios[n].append(t[n] / max(t[b], 1e-9))
    out = []
    for n, b in pairs:
        out.append({"name": n, "base": b, "params": count_params(steppers[n].model),
                    "base_params": count_params(steppers[b].model),
                    "ms": 1e3 * statistics.median(times[n]), "base_ms": 1e3 * statistics.median(times[b]),
                    "ratio_median": statistics.median(ratios[n]), "ratio_min": min(ratios[n]),
                    "target": configs[n][2]})
    return out


def format_table(rows: list[dict]) -> str:
    lines = [f"{'model':<16} {'params':>8} {'ms/step':>8}   {'baseline':<15} {'params':>8} {'ms/step':>8}"
             f" {'ratio med':>9} {'min':>6} {'target':>7}"]
    for r in rows:
        tgt = f"<= {r['target']:.1f}" if r["target"] else ""
        lines.append(f"{r['name']:<16} {r['params']:>8,d} {r['ms']:>8.1f}   {r['base']:<15} {r['base_params']:>8,d}"
                     f" {r['base_ms']:>8.1f} {r['ratio_median']:>9.2f} {r['ratio_min']:>6.2f} {tgt:>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the table. Returns 0."""
    p = Parser(prog="geomlab bench train", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="*", type=name_list(NAMES, "model"), default=None, metavar="NAME",
                   help=f"model names, separated by spaces or commas (their baselines are added): {', '.join(NAMES)}")
    p.add_argument("--rounds", type=number(int, 1, 10**4), default=7,
                   help="interleaved timed rounds, 1 to 10,000 (default 7)")
    p.add_argument("--warmup", type=number(int, 0, 10**4), default=2,
                   help="untimed steps per model first, 0 to 10,000 (default 2)")
    p.add_argument("--batch", type=number(int, 1, 2**20), default=BATCH, help="sequences per step, 1 to 2**20 "
                   f"(default {BATCH})")
    p.add_argument("--seq", type=number(int, 1, 2**20), default=SEQ, help="tokens per sequence, 1 to 2**20 "
                   f"(default {SEQ})")
    p.add_argument("--threads", type=threads, default=1,
                   help=f"torch CPU threads, 1 to {max_threads()} (default 1: the CPU is shared)")
    p.add_argument("--device", type=device_option, default="cpu", help="cpu (default), cuda, cuda:N, mps or auto")
    p.add_argument("--quick", action="store_true", help="smoke run: 2 rounds, 1 warm-up, batch 4 x 32 (overrides "
                   "those options)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(a) -> dict:
    """The ratios of the pairs of ``a``; print the table; the rows and the settings (what `geomlab report
    --converged --speed FILE` reads)."""
    device = resolve_device(a.device)  # one line when this machine lacks it, before any work
    if a.quick:
        a.rounds, a.warmup, a.batch, a.seq = 2, 1, 4, 32
    torch.set_num_threads(a.threads)
    rows = measure(build(only_names(a.only)), a.rounds, a.warmup, a.batch, a.seq, device)
    clock = clock_name(device)
    print(f"# geomlab.bench train: torch {torch.__version__}, device {device}, threads "
          f"{torch.get_num_threads()}, batch {a.batch} x {a.seq}, AdamW, {a.warmup} warm-up steps, {a.rounds} "
          f"interleaved rounds ({clock} time)\n# ratio: {DEFINITIONS['ratio_median']}")
    print(format_table(rows))
    return {"device": str(device), "batch": a.batch, "seq": a.seq, "warmup": a.warmup, "rounds": a.rounds,
            "clock": clock, "rows": rows}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
