"""The printed summary of a load benchmark run. Source: design choice."""

from __future__ import annotations

from geomlab.bench.load.run import LoadResult, percentile
from geomlab.bench.load.session import SessionResult

#: What the keys of the JSON (``geomlab bench load --json``) mean, both modes: times in seconds.
DEFINITIONS = {
    "sessions_n": "concurrent protocol sessions", "chars": "characters of text per session",
    "moves": "cursor moves per session", "together": "true: the moves ran in rounds all sessions started at once",
    "server_up_s": "server start until healthy, s", "warmup_s": "the Home visit and the one-session baseline, s",
    "load_phase_s": "the load phase's wall time, s", "client_cpu_s": "this client's CPU time in it, s",
    "first_view": "connect -> the first finished script run that drew a chart, over the sessions: n, "
                  "median_s, p95_s, max_s, alone_s, ratio_to_alone",
    "cursor_move": "rerun sent -> script_finished, over every move: first_view's keys and expected",
    "n": "how many were measured", "median_s": "median, s", "p95_s": "95th percentile, s", "max_s": "largest, s",
    "alone_s": "the same measured for one session alone before the load (the baseline), s",
    "ratio_to_alone": "median_s / alone_s (same run; 1 = the load costs nothing)",
    "expected": "moves asked for: sessions x --moves",
    "sessions": "one per session", "index": "the session's number", "view": "its view page",
    "ckpt": "its checkpoint (null: the app's default)", "first_view_s": "its first view, s (null: none)",
    "move_s": "its cursor moves, s", "first_charts": "charts of its first view",
    "positions": "token cursor positions its page offered", "errors": "errors shown in its page (room: in any)",
    "received_mb": "decompressed protobuf frames received, MB (10**6 bytes)",
    "peak_rss_mb": "the server's peak resident memory (process tree, sampled), MB",
    "hwm_mb": "the server's VmHWM (the kernel's peak), MB",
    "chromium": "--browser pages: url, first_chart_s (first .js-plotly-plot), protocol_s (its websocket's first "
                "view)",
    "page_errors": "errors shown in pages (st.error, exceptions)", "log_errors": "ERROR/Traceback server log lines",
    "ok": "false when a page or the log showed an error or a session did not finish (exit status 1)",
    "mode": "room with --room", "students": "--room: students following the teacher",
    "replicas": "--room: app servers sharing a redis-server",
    "join_s": "--room: link -> the teacher's step shown, per student, s",
    "cursor_s": "--room: teacher's cursor move -> each student's charts, s",
    "page_s": "--room: cursor move -> each student's whole page (its catch-up run), s",
    "step_s": "--room: step change -> each student's rerun, s",
    "missed": "--room: events a student never showed within 30 s",
    "rss_mb": "--room: each server's peak resident memory, MB", "load": "--room: load average over 1, 5, 15 min",
}


def _fmt(v: float | None, unit: str = " s") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def report(r: LoadResult) -> str:
    """The printed summary of a :class:`LoadResult`."""
    n = len(r.sessions)
    fv, mv = r.first_views, r.move_times
    lines = [f"load: {n} sessions, {r.chars} characters each, {r.moves} cursor moves"
             f"{' (in rounds, all sessions together)' if r.together else ''}; server up in "
             f"{r.server_up_s:.1f} s" + (f", warm-up {r.warmup_s:.1f} s" if r.warmup_s is not None else "")
             + f"; load phase {r.wall_s:.1f} s (client CPU {r.client_cpu_s:.1f} s)"]
    b = r.baseline
    alone_f = b.first_view_s if b else None
    alone_m = percentile(b.move_s, 50) if b else None

    def ratio(v: float | None, ref: float | None) -> str:
        return f"   = {v / ref:.1f}x alone" if v is not None and ref else ""

    if b is not None:
        lines.append(f"alone        first view {_fmt(alone_f)}, move median {_fmt(alone_m)} (one session on "
                     f"{b.view}, {b.ckpt or 'app default'}, before the load)")
    lines += [f"first view   {len(fv)}/{n}   median {_fmt(percentile(fv, 50))}   p95 {_fmt(percentile(fv, 95))}"
              f"   max {_fmt(max(fv) if fv else None)}{ratio(percentile(fv, 50), alone_f)}",
              f"cursor move  {len(mv)}/{n * r.moves}   median {_fmt(percentile(mv, 50))}   "
              f"p95 {_fmt(percentile(mv, 95))}   max {_fmt(max(mv) if mv else None)}"
              f"{ratio(percentile(mv, 50), alone_m)}"]
    by_view: dict[tuple[str, str | None], list[SessionResult]] = {}
    for s in r.sessions:
        by_view.setdefault((s.view, s.ckpt), []).append(s)
    for (view, ckpt), ss in by_view.items():
        f = [s.first_view_s for s in ss if s.first_view_s is not None]
        m = [t for s in ss for t in s.move_s]
        charts = sorted({s.first_charts for s in ss if s.first_view_s is not None})
        pos = sorted({s.positions for s in ss if s.positions})
        lines.append(f"  {view:<13} {ckpt or '(app default)':<36} first {len(f)}/{len(ss)} median "
                     f"{_fmt(percentile(f, 50))}, move median {_fmt(percentile(m, 50))}, charts "
                     f"{charts or '-'}, cursor positions {pos or '-'}")
    total = sum(s.bytes for s in r.sessions)
    per_first = [s.bytes for s in r.sessions]
    lines.append(f"received     {total / 1e6:.1f} MB in all; median per session "
                 f"{(percentile(per_first, 50) or 0) / 1e6:.2f} MB (decompressed protobuf frames)")
    lines.append(f"server RSS   peak {r.peak_rss_mb:.0f} MB (process tree, sampled), VmHWM {r.hwm_mb:.0f} MB")
    if r.browsers:
        bt = [b.first_chart_s for b in r.browsers if b.first_chart_s is not None]
        same = [s.first_view_s for s in r.sessions[:len(r.browsers)] if s.first_view_s is not None]
        bp = [b.protocol_s for b in r.browsers if b.protocol_s is not None]
        lines.append(f"chromium     {len(bt)}/{len(r.browsers)} pages: first .js-plotly-plot median "
                     f"{_fmt(percentile(bt, 50))}; its websocket's first view median {_fmt(percentile(bp, 50))}"
                     f" (protocol sessions on the same URLs: median {_fmt(percentile(same, 50))})")
        for b, s in zip(r.browsers, r.sessions):
            lines.append(f"  {s.view:<13} chromium: chart drawn {_fmt(b.first_chart_s)}, script_finished "
                         f"{_fmt(b.protocol_s)}   protocol session {_fmt(s.first_view_s)}")
    errs = r.page_errors
    lines.append(f"page errors  {len(errs)}")
    lines += [f"  {e}" for e in errs]
    lines.append(f"server log   {len(r.log_errors)} ERROR/Traceback entries")
    lines += [f"  {e}" for e in r.log_errors]
    return "\n".join(lines)


def _stats(values: list[float], alone: float | None) -> dict:
    med = percentile(values, 50)
    return {"n": len(values), "median_s": med, "p95_s": percentile(values, 95), "max_s": max(values, default=None),
            "alone_s": alone, "ratio_to_alone": med / alone if med is not None and alone else None}


def figures(r: LoadResult) -> dict:
    """What :func:`report` prints, as data: the load's settings and phase times (s), ``first_view`` and
    ``cursor_move`` (count, median, p95, max, the one-session baseline measured alone before the load and the
    ratio of the median to it; ``expected`` moves), ``sessions`` (each session's view, checkpoint and times,
    without its URL), ``received_mb``, the server's ``peak_rss_mb`` and ``hwm_mb``, ``chromium`` pages,
    ``page_errors``, ``log_errors`` and ``ok``. Design choice."""
    b = r.baseline
    alone_f = b.first_view_s if b else None
    alone_m = percentile(b.move_s, 50) if b else None
    return {"sessions_n": len(r.sessions), "chars": r.chars, "moves": r.moves, "together": r.together,
            "server_up_s": r.server_up_s, "warmup_s": r.warmup_s, "load_phase_s": r.wall_s,
            "client_cpu_s": r.client_cpu_s,
            "first_view": _stats(r.first_views, alone_f),
            "cursor_move": {**_stats(r.move_times, alone_m), "expected": len(r.sessions) * r.moves},
            "sessions": [{"index": s.index, "view": s.view, "ckpt": s.ckpt, "first_view_s": s.first_view_s,
                          "move_s": s.move_s, "first_charts": s.first_charts, "positions": s.positions,
                          "received_mb": s.bytes / 1e6, "errors": s.errors} for s in r.sessions],
            "received_mb": sum(s.bytes for s in r.sessions) / 1e6,
            "peak_rss_mb": r.peak_rss_mb, "hwm_mb": r.hwm_mb,
            "chromium": [{"url": b.url, "first_chart_s": b.first_chart_s, "protocol_s": b.protocol_s}
                         for b in r.browsers],
            "page_errors": r.page_errors, "log_errors": r.log_errors, "ok": r.ok}
