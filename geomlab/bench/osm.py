"""Step time of the OSM models as a ratio to their baselines: ``geomlab bench osm``.

One training step (forward, cross-entropy, backward, AdamW) on random tokens, batch ``B x T``, for each model,
alternating between the models so that machine load affects them alike; prints the median time and its ratio
to the Transformer (OSMFormer, ``expm`` variants) or the LSTM (OSM-RNN) measured in the same run.
Aim: OSMFormer / Transformer under 2; the protocol is a design choice.
"""

from __future__ import annotations

import json
import statistics
import time

import torch
import torch.nn.functional as F

from geomlab.bench import only_names, run_benchmark
from geomlab.core.argv import Parser, max_threads, name_list, number, threads
from geomlab.models import build_model, config_for_budget, count_params


#: The models, in the table's order (what ``--only`` takes; the keys of :func:`_configs`).
NAMES = ("transformer", "osmformer", "osmformer expm=group", "lstm", "osm-rnn")


#: The config keys the table shows.
SHOWN = ("d", "n_layers", "d_model", "hidden", "prototypes", "mixing", "expm")


#: What the keys of the JSON (``--json``) mean.
DEFINITIONS = {
    "batch": "sequences per training step", "seq": "tokens per sequence", "reps": "timed steps per model",
    "clock": "wall: elapsed time",
    "rows": "one per model",
    "name": "the model (bench osm --only names)", "params": "its parameters",
    "ms_per_step": "median time of one training step (forward, cross-entropy, backward, AdamW), ms",
    "base": "its baseline (itself for a baseline)", "base_ms_per_step": "the baseline's median step time, ms",
    "ratio": "ms_per_step / base_ms_per_step, both measured in the same run (1 = as fast as the baseline)",
    "config": "the config keys that tell the models apart",
}


def _configs(vocab: int) -> dict[str, tuple[dict, str]]:
    """name -> (config, baseline name): the paper's budgets; the names are :data:`NAMES`."""
    former = config_for_budget("osmformer", 91_000, vocab, mixing="linear")
    return {
        "transformer": (config_for_budget("transformer", 104_000, vocab), "transformer"),
        "osmformer": (former, "transformer"),
        "osmformer expm=group": ({**former, "expm": "group"}, "transformer"),
        "lstm": (config_for_budget("lstm", 50_000, vocab), "lstm"),
        "osm-rnn": (build_model({"kind": "osm-rnn", "vocab_size": vocab, "d": 17}).config, "lstm"),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0. Options: ``--batch``, ``--seq``, ``--reps``, ``--threads``, ``--only``."""
    p = Parser(prog="geomlab bench osm", description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=number(int, 1, 2**20), default=16, help="sequences per step, 1 to 2**20 "
                   "(default 16)")
    p.add_argument("--seq", type=number(int, 1, 2**20), default=128, help="tokens per sequence, 1 to 2**20 "
                   "(default 128)")
    p.add_argument("--reps", type=number(int, 1, 10**4), default=7,
                   help="timed steps per model (after one warm-up step), 1 to 10,000 (default 7)")
    p.add_argument("--threads", type=threads, default=1, help=f"torch CPU threads, 1 to {max_threads()} (default 1)")
    p.add_argument("--vocab", type=number(int, 1, 2**20), default=65, help="vocabulary size, 1 to 2**20 "
                   "(default 65)")
    p.add_argument("--only", nargs="*", type=name_list(NAMES, "model"), default=None, metavar="NAME",
                   help=f"subset of model names, separated by spaces or commas (their baselines are added): "
                   f"{', '.join(NAMES)}")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(a) -> dict:
    """Time every model of ``a``; print the table; its rows (ms per step, ratio to the baseline)."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfgs = _configs(a.vocab)
    only = only_names(a.only)
    if only:
        keep = set(only) | {cfgs[n][1] for n in only}
        cfgs = {k: v for k, v in cfgs.items() if k in keep}
    models = {k: build_model(c) for k, (c, _) in cfgs.items()}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}
    x = torch.randint(0, a.vocab, (a.batch, a.seq))
    y = torch.randint(0, a.vocab, (a.batch, a.seq))
    times: dict[str, list[float]] = {k: [] for k in models}
    for rep in range(a.reps + 1):
        for k, m in models.items():
            t0 = time.perf_counter()
            loss = F.cross_entropy(m(x).reshape(-1, a.vocab), y.reshape(-1))
            opts[k].zero_grad()
            loss.backward()
            opts[k].step()
            if rep:  # the first round is a warm-up
                times[k].append(time.perf_counter() - t0)
    print(f"batch {a.batch} x {a.seq}, {a.threads} thread(s), median of {a.reps} steps, alternating")
    rows = []
    for k, m in models.items():
        med = statistics.median(times[k])
        base = statistics.median(times[cfgs[k][1]])
        shown = {c: v for c, v in cfgs[k][0].items() if c in SHOWN}
        print(f"{k:22s} {count_params(m):>8,d} params  {1000 * med:8.1f} ms/step  ratio to {cfgs[k][1]}: "
              f"{med / base:5.2f}  config {json.dumps(shown)}")
        rows.append({"name": k, "params": count_params(m), "ms_per_step": 1000 * med, "base": cfgs[k][1],
                     "base_ms_per_step": 1000 * base, "ratio": med / base, "config": shown})
    return {"batch": a.batch, "seq": a.seq, "reps": a.reps, "clock": "wall", "rows": rows}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
