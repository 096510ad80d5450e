"""``python -m geomlab handout LESSON --out DIR``: a lesson's handout as one self-contained HTML file and a PDF
(:mod:`geomlab.teach.handout`)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write a Tour lesson's handout (HTML with embedded figures, and a PDF) for offline reading"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from geomlab.teach.lessons import LESSONS

    p.add_argument("lesson", help=f"the lesson's slug (as in /tour?lesson=SLUG): {', '.join(LESSONS)}")
    p.add_argument("--out", type=Path, required=True,
                   help="folder for LESSON.html and LESSON.pdf (made if missing)")
    p.add_argument("--steps", default=None,
                   help="comma-separated step numbers from 1, in the order shown (a room's path; default: all)")
    p.add_argument("--no-pdf", action="store_true", help="write only the HTML file")


def run(args: argparse.Namespace) -> int:
    from geomlab.commands import check_outputs, make_folders
    from geomlab.teach import handout, lessons

    lesson = lessons.LESSONS.get(args.lesson)
    if lesson is None:
        raise ValueError(f"handout: no lesson {args.lesson!r} (one of {', '.join(lessons.LESSONS)})")
    steps = None
    if args.steps:
        try:
            steps = [int(s) - 1 for s in args.steps.split(",") if s.strip()]
        except ValueError:
            raise ValueError(f"--steps: comma-separated step numbers, got {args.steps!r}") from None
    check_outputs([("--out", args.out, True)])
    page = args.out / f"{lesson.slug}.html"
    with make_folders("--out", args.out, is_folder=True):
        page.write_text(handout.build_html(lesson, steps), encoding="utf-8")
    print(f"wrote {page} ({page.stat().st_size / 1e6:.1f} MB)")
    if not args.no_pdf:
        pdf = handout.write_pdf(page, args.out / f"{lesson.slug}.pdf")
        print(f"wrote {pdf} ({pdf.stat().st_size / 1e6:.1f} MB)")
    return 0
