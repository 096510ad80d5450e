"""``geomlab bench views``: what one view of a bundled checkpoint costs, as the app pays it.

For every bundled checkpoint that reads text and every view page that shows its kind (the view pages,
:mod:`geomlab.teach.views`), at each text length of ``--chars`` (default 256 and 2,048 characters of Tiny
Shakespeare when ``GEOMLAB_DATA_DIR`` has it, else a built-in text repeated), it measures in CPU seconds
(``time.process_time``; on a shared machine closer to an idle machine's wall time than the wall clock):

* ``trace``: one ``geomlab.trace.trace_text`` (the one forward pass the app caches per checkpoint and text);
* ``figures``: every figure of the view with its default controls at the default cursor (the middle);
* ``send``: what ``st.plotly_chart`` then pays per figure (``fig.to_dict()`` and ``plotly.io.to_json``);
* ``move``: figures + send again at another cursor with the trace cached (a cursor move or redraw);

plus the trace's stored bytes (``Trace.nbytes``), its compressed ``.npz`` download, and as the baseline
measured in the same run the CPU of one plain forward pass of the same text (``x fwd``: view total over
forward). Targets: trace + figures + send ≤ 0.5 s CPU at 256 characters and ≤ 3 s at 2,048,
a 2,048-character trace ≤ 16 MB. Prints one row per (checkpoint, view, length); the median of
``--repeats`` runs after one warm-up. Design choice: a benchmark, not a test (nothing is asserted).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from geomlab.bench import run_benchmark
from geomlab.core.argv import Parser, max_threads, name_list, number, number_list, threads

TEXT = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.\n"
        "JULIET: O Romeo, Romeo, wherefore art thou Romeo? Deny thy father and refuse thy name.\n")


#: What the keys of the JSON (``--json``) mean: CPU seconds of the process, medians over ``--repeats``.
DEFINITIONS = {
    "repeats": "timed runs per row (after one warm-up)",
    "rows": "one per checkpoint, view and text length",
    "checkpoint": "the bundled checkpoint", "view": "the view page (its URL path)",
    "chars": "text length, characters",
    "forward_cpu_s": "one plain forward pass of the text (the baseline), CPU s",
    "trace_cpu_s": "the trace the app caches per checkpoint and text, CPU s",
    "figures_cpu_s": "every figure of the view with its default controls, CPU s",
    "send_cpu_s": "what st.plotly_chart pays per figure (to_dict, JSON), CPU s",
    "total_cpu_s": "trace + figures + send, CPU s (worst: the largest over the rows of one length)",
    "total_over_forward": "total_cpu_s / forward_cpu_s (same run)",
    "move_cpu_s": "figures + send at another cursor, the trace cached (a cursor move), CPU s",
    "n_figures": "figures of the view", "trace_mb": "the trace's stored arrays, MiB",
    "npz_mb": "its compressed .npz download, MiB",
    "error": "why this checkpoint could not trace the text (no figures then)",
    "worst": "per text length, the largest total_cpu_s against its target",
    "target_cpu_s": "what total_cpu_s aims to stay under: 0.5 s up to 256 characters, else 3 s (design choice)",
    "ratio_to_target": "total_cpu_s / target_cpu_s (above 1: over the target)",
}


def bench_text(n: int) -> str:
    """``n`` characters of Tiny Shakespeare (from ``GEOMLAB_DATA_DIR``) or of :data:`TEXT` repeated."""
    root = os.environ.get("GEOMLAB_DATA_DIR")
    if root:
        path = Path(root) / "tinyshakespeare" / "input.txt"
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            return text[10_000:10_000 + n]
    return (TEXT * (n // len(TEXT) + 1))[:n]


def _send(views) -> None:
    import plotly.io as pio

    for v in views.values():
        fig = v.figure
        fig.to_dict()
        pio.to_json(fig, validate=False)


def measure(ck, slug: str, text: str, repeats: int) -> dict:
    """CPU seconds (medians) and sizes of view ``slug`` of checkpoint ``ck`` on ``text`` (see module doc)."""
    import torch

    from geomlab import trace as trace_mod
    from geomlab.teach import views

    tokens = trace_mod.encode_text(ck.vocab, text)
    fwd, tr_t, fig_t, send_t, move_t = [], [], [], [], []
    tr = None
    n_figs = 0
    for rep in range(repeats + 1):
        c0 = time.process_time()
        with torch.no_grad():
            ck.model(tokens)
        c1 = time.process_time()
        tr = trace_mod.trace_text(ck.model, ck.vocab, text)
        c2 = time.process_time()
        T = tr.n_positions
        controls = views.default_controls(slug, tr)
        built = views.build_view(tr, slug, controls, cursor=T // 2)
        c3 = time.process_time()
        _send(built)
        c4 = time.process_time()
        _send(views.build_view(tr, slug, controls, cursor=max(0, T // 2 - 7)))
        c5 = time.process_time()
        n_figs = len(built)
        if rep:  # the first run warms up imports and caches
            fwd.append(c1 - c0)
            tr_t.append(c2 - c1)
            fig_t.append(c3 - c2)
            send_t.append(c4 - c3)
            move_t.append(c5 - c4)
    med = statistics.median
    return {"forward": med(fwd), "trace": med(tr_t), "figures": med(fig_t), "send": med(send_t),
            "move": med(move_t), "n_figures": n_figs, "nbytes": tr.nbytes,
            "npz": len(trace_mod.trace_bytes(tr))}


def main(argv: list[str] | None = None) -> int:
    """Command line; prints one row per bundled checkpoint, view and text length. Returns 0."""
    from geomlab.checkpoints import catalog
    from geomlab.trace import MAX_TEXT_CHARS  # the longest text a trace takes

    measured = [e for e in catalog.list_checkpoints(user=False)  # the bundled ones that read characters
                if (e.meta.get("vocab") or {}).get("level", "char") == "char" and not e.is_word_problem]
    p = Parser(prog="geomlab bench views", description=__doc__.split("\n\n")[0])
    p.add_argument("--chars", type=number_list(int, 1, MAX_TEXT_CHARS), default=[256, 2048],
                   help=f"comma-separated text lengths, each 1 to {MAX_TEXT_CHARS:,} (default 256,2048)")
    p.add_argument("--repeats", type=number(int, 1, 10**4), default=1,
                   help="timed repeats per row (median reported; 1 to 10,000; default 1)")
    p.add_argument("--only", type=name_list([e.name for e in measured], "character-level checkpoint"), default=None,
                   help="comma-separated names of bundled character-level checkpoints (default: every one): "
                   + ", ".join(e.name for e in measured))
    p.add_argument("--threads", type=threads, default=1,
                   help=f"torch CPU threads, 1 to {max_threads()} (default 1, as the app uses)")
    return run_benchmark(p, argv, lambda args: _measure(args, measured), DEFINITIONS)


def _measure(args, measured) -> dict:
    """Measure every view of the checkpoint listings ``measured`` chosen by ``args``; print the table; its rows
    (CPU seconds, MB) and the worst total per text length against its target."""
    import torch

    from geomlab.checkpoints import io as checkpoint
    from geomlab.teach import views as views_mod

    torch.set_num_threads(args.threads)
    lengths = args.chars
    entries = [e for e in measured if args.only is None or e.name in args.only]
    print(f"trace + view figures + send, CPU seconds (median of {args.repeats}, torch threads {args.threads}); "
          "targets: total <= 0.5 s at 256 characters, <= 3 s at 2,048; trace <= 16 MB")
    print(f"{'checkpoint':34s} {'view':13s} {'chars':>5s} {'fwd':>6s} {'trace':>6s} {'figs':>6s} {'send':>6s} "
          f"{'total':>6s} {'x fwd':>6s} {'move':>6s} {'#':>2s} {'MB':>6s} {'npz MB':>6s}")
    worst: dict[int, float] = {}
    rows = []
    for e in entries:
        ck = checkpoint.load(e.path)
        ck.model.eval()
        for view in views_mod.views_for_kind(e.kind):
            for n in lengths:
                text = bench_text(n)
                try:
                    r = measure(ck, view.slug, text, args.repeats)
                except ValueError as exc:  # a checkpoint that cannot read this text: said, not fatal
                    print(f"{e.name:34s} {view.slug:13s} {n:5d}  not traced: {exc}")
                    rows.append({"checkpoint": e.name, "view": view.slug, "chars": n, "error": str(exc)})
                    continue
                total = r["trace"] + r["figures"] + r["send"]
                worst[n] = max(worst.get(n, 0.0), total)
                print(f"{e.name:34s} {view.slug:13s} {n:5d} {r['forward']:6.3f} {r['trace']:6.3f} "
                      f"{r['figures']:6.3f} {r['send']:6.3f} {total:6.3f} {total / max(r['forward'], 1e-9):6.1f} "
                      f"{r['move']:6.3f} {r['n_figures']:2d} {r['nbytes'] / 2**20:6.2f} {r['npz'] / 2**20:6.2f}")
                rows.append({"checkpoint": e.name, "view": view.slug, "chars": n, "forward_cpu_s": r["forward"],
                             "trace_cpu_s": r["trace"], "figures_cpu_s": r["figures"], "send_cpu_s": r["send"],
                             "total_cpu_s": total, "total_over_forward": total / max(r["forward"], 1e-9),
                             "move_cpu_s": r["move"], "n_figures": r["n_figures"], "trace_mb": r["nbytes"] / 2**20,
                             "npz_mb": r["npz"] / 2**20})
    worst_rows = []
    for n, w in sorted(worst.items()):
        target = 0.5 if n <= 256 else 3.0
        print(f"worst total at {n} characters: {w:.3f} s CPU (target {target} s: ratio {w / target:.2f})")
        worst_rows.append({"chars": n, "total_cpu_s": w, "target_cpu_s": target, "ratio_to_target": w / target})
    return {"repeats": args.repeats, "rows": rows, "worst": worst_rows}
