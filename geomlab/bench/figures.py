"""``geomlab bench figures``: time to trace a text and build every figure, per model kind.

For each kind: the bundled model size (the zoo recipe's config, or a ~100K-parameter budget for kinds the
zoo does not bundle), random weights (timing does not depend on training), a 256-character text. Prints
the median over ``--repeats`` runs (after one warm-up) of: the trace (``geomlab.trace.trace``), all
figures of :func:`geomlab.teach.views.all_figures` with a cursor, the CPU time of the figures alone and of sending
them the way ``st.plotly_chart`` does (``fig.to_dict()`` then ``plotly.io.to_json``), their JSON size, the
CPU time of trace + figures (``time.process_time``: on a shared machine closer to what an idle one would take
than the wall time),
and as a ratio the trace + figures wall time over one plain forward pass measured in the same run. Target:
trace + figures under 0.5 s on CPU.
"""

from __future__ import annotations

import statistics
import time

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, max_threads, name_list, number, threads

TEXT = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.\n"
        "JULIET: O Romeo, Romeo, wherefore art thou Romeo? Deny thy father and refuse thy name.\n")


#: What trace + figures aim to stay under, s (design choice: the module docstring's target).
TARGET_S = 0.5


#: What the keys of the JSON (``--json``) mean: times are medians over ``--repeats``.
DEFINITIONS = {
    "chars": "text length, characters", "repeats": "timed runs per kind (after one warm-up)",
    "target_total_s": "what total_s aims to stay under, s (design choice)",
    "rows": "one per model kind (random weights)",
    "kind": "the model kind", "params": "its parameters",
    "forward_s": "one plain forward pass of the text (the baseline), wall s", "trace_s": "the trace, wall s",
    "figures_s": "every figure with a cursor, wall s", "total_s": "trace_s + figures_s",
    "cpu_total_s": "trace + figures in CPU seconds of the process",
    "total_over_forward": "total_s / forward_s (same run)", "n_figures": "figures built",
    "figures_cpu_s": "the figures alone, CPU s",
    "send_cpu_s": "sending them as st.plotly_chart does (to_dict, then JSON), CPU s",
    "json_mb": "the figures' JSON, MB (10**6 bytes)",
    "note": "a change made to run this text (e.g. max_len raised for learned positions); empty: none",
}


def bench_configs(vocab_size: int, kinds_: list[str] | None = None) -> dict[str, dict]:
    """Full configs per kind: the zoo's language-model recipe for the kind when there is one, else
    ``config_for_budget(kind, 100_000)``."""
    from geomlab.models import config_for_budget, kinds
    from geomlab.models.budget import resolve_config

    out: dict[str, dict] = {}
    try:
        from geomlab.training import zoo

        for e in zoo.entries():
            r = e.run
            if r.kind not in out and r.data == "corpus:tinyshakespeare" and (kinds_ is None or r.kind in kinds_):
                out[r.kind] = resolve_config(r.kind, vocab_size, r.params, dict(r.model_overrides))
    except Exception:  # the zoo module is optional here
        pass
    for kind in kinds():
        if kind not in out and (kinds_ is None or kind in kinds_):
            try:
                out[kind] = config_for_budget(kind, 100_000, vocab_size)
            except Exception:
                from geomlab.models import full_config

                out[kind] = full_config({"kind": kind, "vocab_size": vocab_size})
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line; prints one row per model kind. Returns 0."""
    from geomlab.models import kinds
    from geomlab.trace import MAX_TEXT_CHARS as MAX_CHARS  # the longest text a trace takes

    p = Parser(prog="geomlab bench figures", description=__doc__.split("\n\n")[0])
    p.add_argument("--chars", type=number(int, 1, MAX_CHARS), default=256,
                   help=f"text length in characters, 1 to {MAX_CHARS:,} (default 256)")
    p.add_argument("--repeats", type=number(int, 1, 10**4), default=3,
                   help="timed repeats per kind (median reported; 1 to 10,000; default 3)")
    p.add_argument("--kinds", type=name_list(kinds(), "kind"), default=None,
                   help="comma-separated kinds (default: all registered)")
    p.add_argument("--threads", type=threads, default=1, help=f"torch CPU threads, 1 to {max_threads()} (default 1)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict:
    """Time every kind of ``args``; print the table; its rows (seconds, MB; module docstring)."""
    import plotly.io as pio
    import torch

    from geomlab.teach import views
    from geomlab.data import Vocab
    from geomlab.models import build_model, count_params
    from geomlab.trace import trace

    torch.set_num_threads(args.threads)
    text = (TEXT * (args.chars // len(TEXT) + 1))[: args.chars]
    vocab = Vocab.from_text(TEXT)
    tokens = torch.as_tensor(vocab.encode(text)).reshape(1, -1)
    configs = bench_configs(len(vocab), args.kinds)
    rows = []
    print(f"trace + all figures for {args.chars} characters, median of {args.repeats} (torch threads "
          f"{args.threads}); target: trace + figures < {TARGET_S} s")
    print("wall = elapsed seconds; cpu = this process's CPU seconds (close to the wall time of an idle machine "
          "when the machine is shared)")
    print(f"{'kind':16s} {'params':>8s} {'forward':>8s} {'trace':>7s} {'figures':>8s} {'total':>7s} "
          f"{'cpu tot':>7s} {'x fwd':>6s} {'#figs':>5s} {'fig cpu':>7s} {'send':>6s} {'JSON MB':>7s}  notes")
    for kind, cfg in configs.items():
        note = ""
        if cfg.get("positions", "learned") == "learned" and isinstance(cfg.get("max_len"), int) \
                and cfg["max_len"] < args.chars:
            note = f"max_len {cfg['max_len']} -> {args.chars} (learned positions)"
            cfg = {**cfg, "max_len": args.chars}
        torch.manual_seed(0)
        model = build_model(cfg).eval()
        fwd, tr_t, fig_t, cpu, fcpu, send, n, size = [], [], [], [], [], [], 0, 0.0
        for rep in range(args.repeats + 1):
            t0 = time.perf_counter()
            with torch.no_grad():
                model(tokens)
            t1 = time.perf_counter()
            c1 = time.process_time()
            tr = trace(model, tokens, vocab=vocab, text=text)
            t2 = time.perf_counter()
            c_fig = time.process_time()
            charts = views.all_figures(tr, cursor=args.chars // 2)
            t3 = time.perf_counter()
            c2 = time.process_time()
            # what st.plotly_chart does with a go.Figure: to_dict() (a deep copy), then JSON without validation
            size = sum(len(pio.to_json(v.figure.to_dict(), validate=False)) for v in charts.values()) / 1e6
            c3 = time.process_time()
            if rep:  # the first run warms up imports and caches
                fwd.append(t1 - t0)
                tr_t.append(t2 - t1)
                fig_t.append(t3 - t2)
                cpu.append(c2 - c1)
                fcpu.append(c2 - c_fig)
                send.append(c3 - c2)
            n = len(charts)
        f, a, b, c, fc, sd = (statistics.median(x) for x in (fwd, tr_t, fig_t, cpu, fcpu, send))
        print(f"{kind:16s} {count_params(model):8,d} {f:8.3f} {a:7.3f} {b:8.3f} {a + b:7.3f} {c:7.3f} "
              f"{(a + b) / f:6.1f} {n:5d} {fc:7.3f} {sd:6.3f} {size:7.2f}  {note}")
        rows.append({"kind": kind, "params": count_params(model), "forward_s": f, "trace_s": a, "figures_s": b,
                     "total_s": a + b, "cpu_total_s": c, "total_over_forward": (a + b) / f, "n_figures": n,
                     "figures_cpu_s": fc, "send_cpu_s": sd, "json_mb": size, "note": note})
    return {"chars": args.chars, "repeats": args.repeats, "target_total_s": TARGET_S, "rows": rows}
