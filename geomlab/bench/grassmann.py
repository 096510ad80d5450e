"""``geomlab bench grassmann``: time and peak memory of the Causal Grassmann mixer against causal
multi-head attention as the sequence length grows (the paper's linear-scaling claim, measured).

Source of the claim: Zhang Chong, arXiv 2512.19428 (abstract: mixing cost linear in L for a fixed rank r;
Zhang, arXiv 2512.19428). Both mixers are the modules used by the ``grassmann`` and
``grassmann-attn`` models (:class:`geomlab.models.grassmann.GrassmannMixer`,
:class:`geomlab.models.grassmann.CausalSelfAttention`); attention is measured twice: with PyTorch's fused
``scaled_dot_product_attention`` (what the model uses; on CPU a flash-style kernel that never holds the
``L x L`` scores) and with the scores materialised (the textbook / recording path). Every number is
measured in the same run and reported as a ratio to the mixer, plus the log-log slope of time over L
(1 = linear, 2 = quadratic). A last table times one whole training step of the matched model pairs.

Peak memory is the largest total of tensor allocations made inside the measured call (inputs and weights
excluded), from the PyTorch profiler's memory timeline (a private API: if it is unavailable the column
shows the bytes saved for backward instead, labelled). Times are the best of several repeats,
single-threaded by default, in CPU time of the process (so time descheduled on a shared machine is not
counted); compare the ratios and slopes.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch
import torch.nn.functional as F

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, max_threads, number, number_list, threads
from geomlab.models.grassmann import CausalSelfAttention, GrassmannMixer


#: What the keys of the JSON (``--json``) mean: times are CPU time of the process, memory the peak of the
#: tensor allocations made inside the call (module docstring).
DEFINITIONS = {
    "mixers": "one table per --mode: forward (no grad) and/or forward + backward",
    "mode": "forward or train (forward + backward)",
    "rows": "one per sequence length L", "L": "sequence length, tokens",
    "mixer_ms": "the Grassmann mixer's call, ms (best of --reps)",
    "sdpa_ms": "causal attention with fused scaled_dot_product_attention (what the model uses), ms",
    "explicit_ms": "causal attention with the L x L scores materialised, ms",
    "sdpa_over_mixer_time": "sdpa_ms / mixer_ms (above 1: the mixer is faster)",
    "explicit_over_mixer_time": "explicit_ms / mixer_ms",
    "mixer_mb": "the mixer's peak memory, MiB", "sdpa_mb": "fused attention's peak memory, MiB",
    "explicit_mb": "materialised attention's peak memory, MiB",
    "sdpa_over_mixer_memory": "sdpa_mb / mixer_mb", "explicit_over_mixer_memory": "explicit_mb / mixer_mb",
    "memory_method": "how memory was measured: profiler (allocation timeline) or saved-for-backward (bytes "
                     "autograd keeps, where the profiler is unavailable)",
    "slopes": "per mixer, the least-squares slope of log(time) and log(memory) over log(L): 1 = linear, "
              "2 = quadratic",
    "models": "one training step of the matched model pairs, batch 32 x 128, V = 96, 4 layers",
    "size": "the pair's size (XS, S)", "grassmann_ms": "the grassmann model's step, ms",
    "grassmann_attn_ms": "its attention twin's step, ms", "grassmann_params": "the grassmann model's parameters",
    "grassmann_attn_params": "the twin's parameters",
    "ratio": "grassmann_ms / grassmann_attn_ms (below 1: grassmann is faster)",
    "decode_state": "what incremental decoding keeps per sequence after L tokens, 4 layers, float32",
    "grassmann_kib": "the Grassmann mixer's state (constant in L once L passes the largest offset), KiB",
    "kv_cache_kib": "an attention KV cache, KiB",
}


class _ExplicitAttention(CausalSelfAttention):
    """Causal attention with the ``(B, H, L, L)`` scores materialised (same weights as the fused one)."""

    def forward(self, x):
        B, T, D = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(D // H)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        y = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(B, T, D))


def _peak_bytes(fn: Callable[[], object]) -> tuple[int, str]:
    """Peak of live tensor allocations made while ``fn`` runs (bytes) and how it was measured."""
    try:
        from torch.profiler import ProfilerActivity, profile
        from torch.profiler._memory_profiler import Action

        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as prof:
            fn()
        cur = peak = 0
        for _, action, _, size in prof._memory_profile().timeline:
            if action == Action.CREATE:
                cur += size
            elif action == Action.DESTROY:
                cur -= size
            peak = max(peak, cur)
        return peak, "profiler"
    except Exception:  # pragma: no cover - depends on the torch version
        saved = []

        def pack(t):
            saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn()
        return sum(saved), "saved-for-backward"


def _best_time(fn: Callable[[], object], reps: int) -> float:
    """Best of ``reps`` calls of ``fn`` in CPU seconds of this process (``time.process_time``: with one
    torch thread, time spent descheduled by other processes on a shared machine is not counted)."""
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def model_step_times(vocab_size: int = 96, batch: int = 32, seq_len: int = 128, reps: int = 3,
                     sizes: tuple[str, ...] = ("XS", "S")) -> dict[str, dict[str, float]]:
    """CPU seconds of one training step (forward, backward, AdamW) of the matched model pairs of
    Zhang, arXiv 2512.19428 (XS: d = 64, r = 16, d_ff = 256; S: d = 128, r = 22, d_ff = 512; 4 layers, L = 128),
    measured alternately. Returns ``{size: {"grassmann": s, "grassmann-attn": s, "params_g": n,
    "params_a": n}}``."""
    from geomlab.models import build_model, count_params

    dims = {"XS": {"d_model": 64, "d_ff": 256, "rank": 16}, "S": {"d_model": 128, "d_ff": 512, "rank": 22}}
    out = {}
    for size in sizes:
        row: dict[str, float] = {}
        x = torch.randint(0, vocab_size, (batch, seq_len + 1), generator=torch.Generator().manual_seed(0))
        fns = {}
        for kind in ("grassmann", "grassmann-attn"):
            cfg = {"kind": kind, "vocab_size": vocab_size, "max_len": seq_len, **dims[size]}
            if kind != "grassmann":
                cfg.pop("rank")
            torch.manual_seed(0)
            model = build_model(cfg)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            row["params_g" if kind == "grassmann" else "params_a"] = count_params(model)

            def step(model=model, opt=opt):
                logits = model(x[:, :-1])
                loss = F.cross_entropy(logits.reshape(-1, vocab_size), x[:, 1:].reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            fns[kind] = step
        for kind in fns:
            fns[kind]()  # warm-up
        best = {k: float("inf") for k in fns}
        for _ in range(reps):
            for kind, fn in fns.items():
                t0 = time.process_time()
                fn()
                best[kind] = min(best[kind], time.process_time() - t0)
        row.update(best)
        out[size] = row
    return out


def _slope(lengths: list[int], values: list[float]) -> float:
    """Least-squares slope of log(value) over log(L)."""
    xs = [math.log(L) for L in lengths]
    ys = [math.log(max(v, 1e-12)) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


def run(lengths: list[int], d_model: int, rank: int, n_heads: int, offsets: list[int], batch: int,
        reps: int, train: bool, seed: int = 0) -> dict[str, dict[int, dict[str, float]]]:
    """Measure every mixer at every length. Returns ``{mixer: {L: {"time_s", "peak_bytes"}}}``; time in
    seconds per call (forward, or forward + backward when ``train``), memory in bytes."""
    torch.manual_seed(seed)
    mixers = {
        "grassmann": GrassmannMixer(d_model, rank, offsets, 1e-6, "clamp", "concat"),
        "attn-sdpa": CausalSelfAttention(d_model, n_heads),
        "attn-explicit": _ExplicitAttention(d_model, n_heads),
    }
    mixers["attn-explicit"].load_state_dict(mixers["attn-sdpa"].state_dict())
    out: dict[str, dict[int, dict[str, float]]] = {k: {} for k in mixers}
    for L in lengths:
        x = torch.randn(batch, L, d_model, requires_grad=train)
        for name, mod in mixers.items():  # interleaved, so drifts in machine load hit all alike
            if train:
                def fn(mod=mod):
                    mod(x).square().mean().backward()
                    mod.zero_grad(set_to_none=True)
                    x.grad = None
            else:
                def fn(mod=mod):
                    with torch.no_grad():
                        mod(x)
            t = _best_time(fn, reps)
            peak, how = _peak_bytes(fn)
            out[name][L] = {"time_s": t, "peak_bytes": peak, "memory_method": how}
    return out


def _print(results, lengths, train: bool, d_model: int, rank: int, n_heads: int, offsets, batch: int) -> dict:
    """Print the table of :func:`run`'s ``results``; its figures: ``rows`` (ms, MB and ratios to the mixer per
    L), ``slopes`` (log-log, per mixer) and ``memory_method``."""
    what = "forward + backward" if train else "forward (no grad)"
    print(f"Grassmann mixer vs causal attention, {what}: d_model={d_model}, rank={rank} "
          f"(P={rank * (rank - 1) // 2}), offsets={offsets}, heads={n_heads}, batch={batch}, "
          f"torch threads={torch.get_num_threads()}")
    g = results["grassmann"]
    head = (f"{'L':>5} | {'mixer ms':>9} {'sdpa ms':>9} {'expl ms':>9} | {'sdpa/mix':>8} {'expl/mix':>8} | "
            f"{'mixer MB':>9} {'sdpa MB':>9} {'expl MB':>9} | {'sdpa/mix':>8} {'expl/mix':>8}")
    print(head)
    print("-" * len(head))
    rows = []
    for L in lengths:
        s, e = results["attn-sdpa"][L], results["attn-explicit"][L]
        gm, sm, em = (r["peak_bytes"] / 2**20 for r in (g[L], s, e))
        rows.append({"L": L, "mixer_ms": g[L]["time_s"] * 1e3, "sdpa_ms": s["time_s"] * 1e3,
                     "explicit_ms": e["time_s"] * 1e3, "sdpa_over_mixer_time": s["time_s"] / g[L]["time_s"],
                     "explicit_over_mixer_time": e["time_s"] / g[L]["time_s"], "mixer_mb": gm, "sdpa_mb": sm,
                     "explicit_mb": em, "sdpa_over_mixer_memory": sm / max(gm, 1e-9),
                     "explicit_over_mixer_memory": em / max(gm, 1e-9)})
        print(f"{L:>5} | {g[L]['time_s'] * 1e3:>9.2f} {s['time_s'] * 1e3:>9.2f} {e['time_s'] * 1e3:>9.2f} | "
              f"{s['time_s'] / g[L]['time_s']:>8.2f} {e['time_s'] / g[L]['time_s']:>8.2f} | "
              f"{gm:>9.2f} {sm:>9.2f} {em:>9.2f} | {sm / max(gm, 1e-9):>8.2f} {em / max(gm, 1e-9):>8.2f}")
    slopes = {}
    if len(lengths) >= 2:
        slopes = {k: (_slope(lengths, [v[L]["time_s"] for L in lengths]),
                      _slope(lengths, [v[L]["peak_bytes"] for L in lengths])) for k, v in results.items()}
        print("log-log slope over L (1 = linear, 2 = quadratic): " + "; ".join(
            f"{k}: time {a:.2f}, memory {b:.2f}" for k, (a, b) in slopes.items()))
    method = g[lengths[0]]["memory_method"]
    print(f"memory: peak of tensor allocations inside the call ({method}); ratios measured in this run")
    return {"mode": "train" if train else "forward", "rows": rows, "memory_method": method,
            "slopes": {k: {"time": a, "memory": b} for k, (a, b) in slopes.items()}}


def decode_state_bytes(L: int, n_layers: int, d_model: int, rank: int, offsets: list[int],
                       bytes_per: int = 4) -> tuple[int, int]:
    """Incremental-decoding state after ``L`` tokens (Zhang, arXiv 2512.19428): Grassmann keeps
    ``n_layers * max(offsets) * rank`` values, an attention KV cache ``n_layers * 2 * L * d_model``."""
    return n_layers * min(L, max(offsets)) * rank * bytes_per, n_layers * 2 * L * d_model * bytes_per


def main(argv: list[str] | None = None) -> int:
    """Command line; prints the tables. Returns the exit status. Raises ``ValueError`` (one line, before any
    work) when ``--d-model`` is not a multiple of ``--heads``."""
    p = Parser(prog="geomlab bench grassmann", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="lengths 128, 512, 1024 and 5 repeats (seconds)")
    p.add_argument("--lengths", type=number_list(int, 2, 2**20), default=[128, 256, 512, 1024, 2048, 4096],
                   help="comma-separated L, each 2 to 2**20 (default 128,256,512,1024,2048,4096)")
    p.add_argument("--d-model", type=number(int, 1, 2**16), default=128, help="width, 1 to 2**16 (default 128)")
    p.add_argument("--rank", type=number(int, 2, 2**16), default=22,
                   help="reduced rank, 2 to 2**16 (a 2-plane needs 2; default 22)")
    p.add_argument("--heads", type=number(int, 1, 1024), default=4, help="attention heads of the twin, 1 to 1,024 "
                   "(default 4)")
    p.add_argument("--offsets", type=number_list(int, 1, 2**20), default=[1, 2, 4, 8, 12, 16],
                   help="comma-separated offsets, each 1 to 2**20 (default 1,2,4,8,12,16)")
    p.add_argument("--batch", type=number(int, 1, 2**20), default=1, help="sequences, 1 to 2**20 (default 1)")
    p.add_argument("--reps", type=number(int, 1, 10**4), default=5, help="timed repeats, 1 to 10,000 (default 5)")
    p.add_argument("--threads", type=threads, default=1,
                   help=f"torch threads, 1 to {max_threads()} (default 1: the CPU is shared)")
    p.add_argument("--mode", choices=("forward", "train", "both"), default="both",
                   help="forward only (no grad), forward + backward, or both tables")
    p.add_argument("--no-models", action="store_true", help="skip the whole-model training-step table")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict:
    """The tables of ``args``; print them; their figures: ``mixers`` (one per mode, :func:`_print`), ``models``
    (ms per training step, ratio grassmann / attention), ``decode_state`` (KiB per sequence)."""
    lengths, offsets = args.lengths, args.offsets
    if args.quick:
        lengths, args.reps = [128, 512, 1024], 5
    if args.d_model % args.heads:
        raise ValueError(f"--d-model: must be a multiple of --heads ({args.heads}: each attention head takes "
                         f"d-model / heads dimensions), got {args.d_model}")
    torch.set_num_threads(args.threads)
    modes = {"forward": [False], "train": [True], "both": [False, True]}[args.mode]
    figures: dict = {"mixers": [], "models": []}
    for train in modes:
        res = run(lengths, args.d_model, args.rank, args.heads, offsets, args.batch, args.reps, train)
        figures["mixers"].append(_print(res, lengths, train, args.d_model, args.rank, args.heads, offsets,
                                        args.batch))
        print()
    if not args.no_models:
        sizes = ("XS",) if args.quick else ("XS", "S")
        steps = model_step_times(reps=2 if args.quick else 3, sizes=sizes)
        print("one training step, batch 32 x 128, V = 96, 4 layers (CPU seconds, best of repeats):")
        for size, row in steps.items():
            print(f"  {size}: grassmann {row['grassmann'] * 1e3:.0f} ms ({row['params_g']:,} params) vs "
                  f"grassmann-attn {row['grassmann-attn'] * 1e3:.0f} ms ({row['params_a']:,} params): "
                  f"ratio grassmann/attn {row['grassmann'] / row['grassmann-attn']:.2f}")
            figures["models"].append({"size": size, "grassmann_ms": row["grassmann"] * 1e3,
                                      "grassmann_attn_ms": row["grassmann-attn"] * 1e3,
                                      "grassmann_params": row["params_g"], "grassmann_attn_params": row["params_a"],
                                      "ratio": row["grassmann"] / row["grassmann-attn"]})
        print()
    states = {L: decode_state_bytes(L, 4, args.d_model, args.rank, offsets) for L in lengths}
    print("decoding state per sequence (4 layers, float32): "
          + ", ".join(f"L={L}: Grassmann {g / 1024:.1f} KiB vs KV cache {a / 1024:.0f} KiB"
                      for L, (g, a) in states.items()))
    figures["decode_state"] = [{"L": L, "grassmann_kib": g / 1024, "kv_cache_kib": a / 1024}
                               for L, (g, a) in states.items()]
    return figures


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
