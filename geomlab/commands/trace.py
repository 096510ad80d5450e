"""``python -m geomlab trace``: run a checkpoint on one text and write its trace (npz + JSON, no pickles).

The file is read back with :func:`geomlab.trace.load_trace`; the app loads traces the same way, so a saved
trace reproduces a view exactly. Optionally also writes every applicable figure as standalone HTML.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from geomlab.commands import (add_checkpoint_argument, add_text_arguments, add_threads_argument, check_outputs,
                              load_checkpoint, make_folders, number, position, set_threads, text_tokens)

HELP = "trace a checkpoint on a text: record states/energies/planes and write them to an .npz file"
EPILOG = ("Outputs: every location (--out, --html, --png, --json) is checked before anything is written; "
          "missing folders are made, and a note on standard error names a folder made above a name. --html/--png "
          "draw the views of the geometric kinds (cem, grassmann, osm-rnn, osmformer, transformer, ...); for a kind without views (lstm) they are refused (exit status 2) "
          "and nothing is written. --json - writes the JSON to standard output alone (the other lines go to "
          "standard error), for a pipe.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = EPILOG
    add_checkpoint_argument(p)
    add_text_arguments(p)
    p.add_argument("--out", default=None,
                   help="output trace file (.npz; the suffix is added if missing; missing folders are made, with "
                        "a note; a folder or a .json name is refused: JSON is --json's); needed unless --html, "
                        "--png or --json is given")
    p.add_argument("--steps", type=number(int, 1, 64), default=None,
                   help="CEM only: recursion steps T at inference (default: the checkpoint's own)")
    p.add_argument("--html", default=None,
                   help="also write every figure of this trace's views (the app's pages) as NAME.html into this "
                        "folder (created if missing), with an index.html listing them by view; only for kinds with views")
    p.add_argument("--png", default=None, metavar="DIR",
                   help="also write the same figures as NAME.png into this folder (created if missing; kaleido and this machine's "
                        "Chrome/Chromium, offline; docs/views.md)")
    p.add_argument("--cursor", type=position, default=None,
                   help="position highlighted in the --html/--png figures (default: the position the app "
                        "opens on, the most surprising next token in the second half of the text)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write strict JSON of at most 256 positions (around --cursor, else from the start; "
                        "the app's JSON download) to FILE (missing folders are made, with a note); '-': standard "
                        "output, and nothing else is printed there (the other lines go to standard error)")
    add_threads_argument(p)


def run(args: argparse.Namespace) -> int:
    from geomlab.teach import views
    from geomlab.trace import trace, trace_cem_steps, save_trace

    from geomlab.data.vocab import decode_text, normalize_text

    set_threads(args.threads)
    # first: a mistyped name or a folder that is no checkpoint is the first thing to hear about (loading
    # writes nothing, and the bundled models load in well under a second)
    c = load_checkpoint(args.checkpoint, device="cpu")
    # then the text (an empty one is named before a missing output option), then the outputs
    text = normalize_text(args.text) if args.text is not None else None
    if args.text_file:
        text = decode_text(read_text_file(args.text_file), source=args.text_file)
    if c.vocab is None:
        raise ValueError("this checkpoint has no vocabulary (not a text model); it cannot trace a text")
    tokens = text_tokens(c.vocab, text, "--text" if args.text is not None else "--text-file").reshape(1, -1)
    html_dir, png_dir = (Path(d) if d else None for d in (args.html, args.png))
    to_stdout = args.json == "-"  # standard output holds the JSON alone (for pipes); the other lines go to stderr
    json_path = Path(args.json) if args.json and not to_stdout else None
    out = Path(args.out) if args.out else None
    if out is None and not (html_dir or png_dir or json_path or to_stdout):
        raise ValueError("nothing to write: give --out FILE.npz (the trace) and/or --html DIR, --png DIR or "
                         "--json FILE (- for standard output)")
    if args.out == "-":
        raise ValueError("--out -: the .npz trace is a binary file; give a file name, or --json - for the trace "
                         "as JSON on standard output (nothing was written)")
    if out is not None and (out.is_dir() or args.out.endswith(("/", os.sep))):  # before the suffix: "runs/" is
        raise ValueError(f"--out {args.out}: names a folder; give a file name (e.g. "  # no "runs.npz" beside it
                         f"{(out / 'trace.npz').as_posix()})")
    if out is not None and out.suffix.lower() == ".json":
        raise ValueError(f"--out {args.out}: --out writes the .npz trace; for strict JSON give --json "
                         f"{args.out} (nothing was written)")
    if out is not None and out.suffix != ".npz":
        out = out.with_name(out.name + ".npz")
    check_outputs([(opt, path, folder) for opt, path, folder in (
        ("--out", out, False), ("--html", html_dir, True), ("--png", png_dir, True), ("--json", json_path, False))
        if path is not None])
    if args.steps is not None:
        tr = trace_cem_steps(c.model, tokens, args.steps, vocab=c.vocab, text=text)
    else:
        tr = trace(c.model, tokens, vocab=c.vocab, text=text)
    if args.cursor is not None and not 0 <= args.cursor < tr.n_positions:
        raise ValueError(f"--cursor {args.cursor} is outside the traced text (positions 0 to {tr.n_positions - 1})")
    pages = views.views_of_trace(tr)
    if (html_dir or png_dir) and not pages:
        with_views = sorted({k for v in views.VIEWS.values() for k in v.kinds})
        raise ValueError(f"{tr.kind} has no geometric views, so --html/--png have nothing to draw (the kinds "
                         f"with views: {', '.join(with_views)}); nothing was written: drop --html/--png to write "
                         "the trace alone")
    if out is not None:
        with make_folders("--out", out):
            save_trace(tr, out)
    report = sys.stderr if to_stdout else sys.stdout
    noun = "position" if tr.n_positions == 1 else "positions"
    print(f"traced {tr.n_positions} {noun} of {tr.kind!r} ({tr.family} trace)" + (f" -> {out}" if out else ""),
          file=report)
    if json_path or to_stdout:
        from geomlab.trace import trace_json

        T = tr.n_positions
        start = 0 if args.cursor is None else max(0, min(args.cursor - 128, T - 256))
        doc = trace_json(tr, start, min(T, start + 256))
        if to_stdout:
            print(doc)
        else:
            with make_folders("--json", json_path):
                json_path.write_text(doc, encoding="utf-8")
            print(f"wrote positions {start}-{min(T, start + 256) - 1} as JSON -> {json_path}")
    # one cursor for every figure, the app's opening one when none is given (each figure's own default differs)
    cursor = args.cursor
    if cursor is None and (html_dir or png_dir):
        from geomlab.trace.predictions import default_cursor

        cursor = default_cursor(tr)
    if html_dir:
        with make_folders("--html", html_dir, is_folder=True):
            written = write_html(tr, html_dir, cursor=cursor)
        print(f"wrote {len(written)} figures and index.html to {html_dir}{os.sep} ({', '.join(written)})",
              file=report)
    if png_dir:
        from geomlab.figures.images import write_pngs

        figs = {name: f.figure for view in pages
                for name, f in views.build_view(tr, view.slug, cursor=cursor).items()}
        with make_folders("--png", png_dir, is_folder=True):
            written = write_pngs(figs, png_dir)
        print(f"wrote {len(written)} images to {png_dir}{os.sep} ({', '.join(written)})", file=report)
    return 0


def read_text_file(name: str, max_chars: int | None = None) -> bytes:
    """The bytes of ``--text-file NAME``, read no further than a text of ``max_chars`` characters (default the
    trace limit, :data:`geomlab.trace.MAX_TEXT_CHARS`) can take in UTF-8 (4 bytes a character, plus a
    byte-order mark), so an endless source (``/dev/zero``, a pipe that never closes) cannot fill the memory.

    Raises:
        FileNotFoundError: no such file.
        ValueError: ``name`` is a folder, or the file holds more than ``max_chars`` characters could (design
            choice: the trace limit is checked here, before anything is decoded).
    """
    from geomlab.trace import MAX_TEXT_CHARS

    max_chars = MAX_TEXT_CHARS if max_chars is None else max_chars
    path = Path(name)
    if path.is_dir():
        raise ValueError(f"--text-file {name} is a folder; give a text file")
    limit = 4 * max_chars + 3
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"--text-file {name} is longer than a trace can be ({max_chars:,} characters; over "
                         f"{limit:,} bytes read): cut it to the part to trace")
    return data


def write_html(tr, folder: Path, cursor: int | None = None) -> list[str]:
    """Write every figure of every view that applies to ``tr`` (the view pages, :mod:`geomlab.teach.views`,
    with each view's default controls, as the app opens it) as ``folder/NAME.html`` (``plotly.min.js`` next
    to them, so they work offline) and ``folder/index.html`` linking them under their view titles, a figure
    several views show under the first. Returns the figure names written, each once, in the views' order."""
    from geomlab.teach import views
    from geomlab.figures._animation import without_cursor
    from geomlab.core.markup import to_html
    from geomlab.core.pages import render, safe

    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    sections = []
    for view in views.views_of_trace(tr):
        built = views.build_view(tr, view.slug, cursor=cursor)
        items = []
        for name, fig in built.items():
            if name in written:  # a figure several views show (the layer lens) is listed under the first
                continue
            fig.figure.write_html(folder / f"{name}.html", include_plotlyjs="directory", auto_play=False)
            written.append(name)
            items.append({"href": f"{name}.html", "label": name.replace("_", " "),
                          "caption": safe(to_html(without_cursor(fig.caption)))})  # a page with no cursor to move
        if items:
            sections.append({"title": view.title, "blurb": safe(to_html(view.blurb)), "items": items})
    from geomlab.trace import visible

    excerpt = visible(tr.text[:60]) + ("…" if len(tr.text) > 60 else "")  # newlines as ↵, not a literal \n
    page = render("trace_index.html", title=f"{tr.kind} on “{excerpt}”", sections=sections)
    (folder / "index.html").write_text(page, encoding="utf-8")
    return written
