"""``geomlab bench load``: many concurrent sessions against the real app server.

Starts ``streamlit run serve.py`` (or ``app.py`` with ``--entry``; headless, loopback, a free port) as a subprocess with its log captured,
then drives ``--sessions`` concurrent sessions the way a browser talks to the server: Streamlit's own
websocket protocol (``/_stcore/stream``; ``BackMsg`` with a ``rerun_script`` ``ClientState`` up,
``ForwardMsg`` down, the protobuf classes of the installed streamlit package), through the ``websockets``
client that streamlit itself depends on. Each session opens a view page (round-robin over ``--views``)
with its own ``--chars``-character text (slices of Tiny Shakespeare when ``GEOMLAB_DATA_DIR`` has it, else
a built-in text) in the page's ``text`` URL parameter and a bundled checkpoint suited to the view
(``ckpt=bundled/NAME``), waits for the first view, then moves the token cursor ``--moves`` times.

Printed: median and p95 time to the first view (connect -> the first successful ``script_finished`` whose
run drew at least one Plotly chart) and per cursor move (rerun sent -> ``script_finished``), charts and
bytes received, the server's peak RSS (process tree, sampled from ``/proc``), every error shown in a page
(``st.error`` alerts, exception elements) and every ERROR/Traceback line of the server log. ``--browser M``
also opens M real chromium pages (playwright, Debian's chromium, never ``playwright install``) on the URLs
of the first M sessions, at the same time, and reports their time to the first rendered
``.js-plotly-plot``, as a check that the protocol client sees what a browser sees. Before the load, one
session runs alone on the first view (after untimed visits to Home and that view): the baseline the
load's medians are compared with, as a ratio measured in the same run. ``--together`` moves the cursors
in rounds that all sessions start at once, after every first view (the worst case for a redraw).

The contract with the app is what a user sees: page URL paths (the view slugs), the URL keys ``ckpt`` and
``text``, and a slider or select_slider labelled ``"Token cursor"`` (:data:`CURSOR_LABEL`). Nothing of
``app_pages`` is imported. It is a benchmark, not a timed test: the exit status is non-zero only when
something failed (a page error, a log error, a session that did not finish), never for being slow.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path

from geomlab.bench import run_benchmark
from geomlab.bench.load.chromium import BrowserResult, run_browsers
from geomlab.bench.load.protocol import (CURSOR_LABEL, CursorWidget, Run, RunReader, cursor_state, element_errors,
                                         find_cursor, move_targets, rerun_backmsg)
from geomlab.bench.load.run import LoadResult, percentile, run_load
from geomlab.bench.load.server import RssMonitor, app_server, free_port, log_errors, wait_for_health
from geomlab.bench.load.session import Lockstep, SessionResult, read_view, run_session, visit_home
from geomlab.bench.load.summary import DEFINITIONS, figures, report
from geomlab.bench.load.texts import (BUILTIN_TEXT, DEFAULT_VIEWS, bundled_checkpoints, checkpoints_for,
                                      corpus_text, session_texts)
from geomlab.core.argv import Parser, number
from geomlab.core.outputs import check_outputs, make_folders


def main(argv: list[str] | None = None) -> int:
    """``geomlab bench load [options]``: run the benchmark and print its summary (:func:`report`). Exit status
    0 when nothing failed, 1 when a page or the server log showed an error or a session did not finish, 2 for
    bad options or a server that did not start."""
    from geomlab.trace import MAX_TEXT_CHARS  # the app's longest text

    p = Parser(prog="geomlab bench load", description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=number(int, 1, 1000), default=3,
                   help="concurrent protocol sessions, 1 to 1,000 (default 3)")
    p.add_argument("--views", nargs="+", default=list(DEFAULT_VIEWS),
                   help=f"view pages, round-robin (default: {' '.join(DEFAULT_VIEWS)}; commas also work)")
    p.add_argument("--moves", type=number(int, 0, 10**4), default=3,
                   help="cursor moves per session, 0 to 10,000 (default 3)")
    p.add_argument("--chars", type=number(int, 1, MAX_TEXT_CHARS), default=512,
                   help=f"characters of text per session, 1 to {MAX_TEXT_CHARS:,} (the app's limit; default 512)")
    p.add_argument("--port", type=number(int, 0, 65535), default=0, help="server port, 0 to 65,535 (default 0: a "
                   "free one)")
    p.add_argument("--browser", type=number(int, 0, 1000), default=0,
                   help="also open this many chromium pages on the first sessions' URLs, 0 to 1,000 (default 0)")
    p.add_argument("--timeout", type=number(float, 0.0, 10**6, above=True), default=900.0,
                   help="wall-clock limit of the load phase in seconds, above 0, at most 10**6 (default 900)")
    p.add_argument("--together", action="store_true",
                   help="move the cursors in rounds that all sessions start at once (after every first view)")
    p.add_argument("--ramp", type=number(float, 0.0, 3600.0), default=0.0,
                   help="seconds between session starts, 0 to 3,600 (default 0)")
    p.add_argument("--rotate", action="store_true",
                   help="cycle each view's sessions through all its bundled checkpoints (default: the first)")
    p.add_argument("--no-warmup", action="store_true",
                   help="skip the Home visit and the one-session baseline before the load")
    p.add_argument("--log", type=Path, default=None,
                   help="keep the server log at this path (its folder is made; not in room mode)")
    p.add_argument("--entry", default="serve.py", choices=("serve.py", "app.py"),
                   help="what `streamlit run` starts (default serve.py: warm at start; app.py warms up with the "
                        "first visitor)")
    p.add_argument("--room", type=number(int, 0, 1000), default=0, metavar="N",
                   help="room mode: one teacher and N students following it on the Tour, 0 to 1,000 (default 0: "
                   "off)")
    p.add_argument("--replicas", type=number(int, 1, 2), default=1,
                   help="room mode: app servers, 1 or 2; 2 share rooms through a fresh redis-server (default 1)")
    p.add_argument("--steps", type=number(int, 0, 10**4), default=2,
                   help="room mode: Tour steps the teacher takes, 0 to 10,000 (default 2)")
    return run_benchmark(p, argv, _measure, DEFINITIONS)


def _measure(args) -> dict | int:
    """Run the load (or the room) of ``args``; print its summary; its figures (:func:`figures`,
    :func:`~geomlab.bench.load.room.room_figures`), or 2 when the server did not start or a setting is
    refused."""
    if args.log is not None and not args.room:
        check_outputs([("--log", args.log, False)])  # before the server starts
    if args.room:
        from geomlab.bench.load.room import room_figures, room_report, run_room

        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            result = run_room(args.room, args.replicas, moves=args.moves, steps=args.steps, timeout=args.timeout,
                              entry=args.entry)
        except (ValueError, RuntimeError) as exc:
            print(f"load: {exc}", file=sys.stderr)
            return 2
        print(room_report(result))
        return room_figures(result)
    views = [v for item in args.views for v in item.split(",") if v]
    # a SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the server is always stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with make_folders("--log", args.log) if args.log is not None else contextlib.nullcontext():
            result = run_load(args.sessions, views, moves=args.moves, chars=args.chars, port=args.port,
                              browser=args.browser, timeout=args.timeout, warmup=not args.no_warmup,
                              rotate=args.rotate, ramp=args.ramp, together=args.together, log_path=args.log,
                              entry=args.entry)
    except (ValueError, RuntimeError) as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 2
    print(report(result))
    return figures(result)



__all__ = [
    "BUILTIN_TEXT", "BrowserResult", "CURSOR_LABEL", "CursorWidget", "DEFAULT_VIEWS", "LoadResult", "Lockstep",
    "RssMonitor", "Run", "RunReader", "SessionResult", "app_server", "bundled_checkpoints", "checkpoints_for",
    "corpus_text", "cursor_state", "element_errors", "figures", "find_cursor", "free_port", "log_errors", "main",
    "move_targets", "percentile", "read_view", "report", "rerun_backmsg", "run_browsers", "run_load",
    "run_session", "session_texts", "visit_home", "wait_for_health",
]
