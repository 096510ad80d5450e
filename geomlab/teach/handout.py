"""A lesson's handout: one self-contained HTML file (and a PDF of it) to read offline after a class.

Every step of the lesson (or only the steps a room went through, in that order) with its title, its text, its
figures as PNG images embedded in the page (``data:`` URLs, drawn by :func:`geomlab.figures.images.write_pngs`),
its question, and its "What to notice" (with the answers at the end where the step asks a question, since
it often gives the answer away); the questions again at the end with their answers. Formulas are set as
Unicode (:func:`geomlab.core.markup.to_html`), so the file needs no script, font or network.

The PDF is the same page printed by a headless Chrome or Chromium (``--print-to-pdf``). No streamlit here: the
Tour's download button and ``python -m geomlab handout`` both call :func:`build_html` and :func:`write_pdf`.
"""

from __future__ import annotations

import base64
import html
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from geomlab.core.markup import split_math, to_html
from geomlab.teach import tours, views


class HandoutError(ValueError):
    """A handout that cannot be made: an unknown lesson or step, a missing checkpoint, no browser for the
    images or the PDF; one line."""


_CSS = """
body {font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.45;
      color: #1f2328}
h1 {margin-bottom: 0.2rem} .summary {color: #555}
section.step {break-inside: avoid-page; border-top: 1px solid #ddd; padding-top: 0.6rem; margin-top: 1.2rem}
img {max-width: 100%; height: auto; display: block; margin: 0.5rem 0}
.notice {background: #e8f1fb; border-left: 4px solid #0072B2; padding: 0.5rem 0.8rem}
.question {background: #fff7e6; border-left: 4px solid #E69F00; padding: 0.5rem 0.8rem}
.meta {color: #666; font-size: 0.85rem} .answers li {margin-bottom: 0.4rem}
@media print {body {margin: 0 auto} section.step {break-before: page}}
"""


def md_html(text: str) -> str:
    """A lesson's markdown (bold, italics, code, with inline ``$...$`` formulas) as an HTML fragment without
    the enclosing paragraph: formulas through :func:`geomlab.core.markup.to_html` (Unicode), the rest through
    the ``markdown`` package (raw HTML in the text is escaped; :class:`~geomlab.core.extras.MissingExtraError`
    naming the ``app`` extra without it)."""
    from geomlab.core.extras import require

    markdown = require("markdown", "a handout")

    formulas, pieces = [], []
    for is_math, piece in split_math(text):
        if is_math:
            formulas.append(to_html(f"${piece}$"))
            pieces.append(f"\x00{len(formulas) - 1}\x00")
        else:
            pieces.append(html.escape(piece, quote=False))
    out = markdown.markdown("".join(pieces))
    out = out.removeprefix("<p>").removesuffix("</p>")
    for i, f in enumerate(formulas):
        out = out.replace(f"\x00{i}\x00", f)
    return out


def _trace_step(step: tours.Step, entries: dict[str, Any]) -> list[tuple[Any, Any]]:
    """``[(entry, trace)]`` of the step's checkpoint(s)."""
    from geomlab import trace as trace_mod
    from geomlab.checkpoints import io as ckpt_io

    out = []
    for ref in step.checkpoints:
        entry = entries.get(ref)
        if entry is None:
            raise HandoutError(f"step {step.title!r} needs checkpoint {ref}, which is not here "
                               "(python -m geomlab zoo --rebuild)")
        ck = ckpt_io.load(str(entry.path))
        ck.model.eval()
        opts = step.trace_options(entry.model_config)
        if opts.get("steps"):
            tr = trace_mod.trace_cem_steps(ck.model, trace_mod.encode_text(ck.vocab, step.text), opts["steps"],
                                           vocab=ck.vocab, text=step.text)
        else:
            tr = trace_mod.trace_text(ck.model, ck.vocab, step.text)
        out.append((entry, tr))
    return out


def step_figures(step: tours.Step, entries: dict[str, Any]) -> dict[str, Any]:
    """The step's figures as ``{name: plotly Figure}`` (a comparison step: each view figure once per
    checkpoint, named ``NAME-A`` / ``NAME-B``); figures that do not apply are left out."""
    from geomlab.figures import FigureError

    sides = _trace_step(step, entries)
    out: dict[str, Any] = {}
    tr0 = sides[0][1]
    pos = min(step.cursor, tr0.n_positions - 1)
    for name in step.figure_names(tr0):
        try:
            if name == "accuracy_by_length":
                first = sides[0][0]
                fig, _ = tours.accuracy_by_length_figure(
                    [(e.name, e.accuracy_by_length, c) for (e, _), c in zip(sides, tours.COLOURS)],
                    chance=1 / first.n_outputs if first.n_outputs else None,
                    train_length=(first.task or {}).get("length"))
                out[name] = fig
            elif name == "surprisal":
                from geomlab.figures.surprisal import SurprisalSide, surprisal_figure

                fig, _ = surprisal_figure([SurprisalSide(tr, e.name, c, e.task, e.n_outputs)
                                           for (e, tr), c in zip(sides, tours.COLOURS)], pos)
                out[name] = fig
            else:
                for (e, tr), side in zip(sides, "AB"):
                    if not views.applies(tr, name):
                        continue
                    fig = views.build_figure(tr, name, tours.step_controls(step, tr), min(pos, tr.n_positions - 1))[0]
                    if len(sides) > 1:  # two checkpoints' figures of one name: each titled by its checkpoint
                        fig.update_layout(title_text=f"{e.name}: {fig.layout.title.text or name}")
                    out[name if len(sides) == 1 else f"{name}-{side}"] = fig
        except FigureError:
            continue
    if step.whatif:
        out.update(_whatif_figures(step, sides[0], pos))
    return out


def _whatif_figures(step: tours.Step, side: tuple[Any, Any], pos: int) -> dict[str, Any]:
    """The step's intervention as the Tour draws it: the guesses before and after at the cursor and the effect
    along the text (:mod:`geomlab.figures.whatif`)."""
    from geomlab.checkpoints import io as ckpt_io
    from geomlab.figures.whatif import whatif_effect, whatif_guesses
    from geomlab.trace import encode_text
    from geomlab.whatif import catalog

    entry, tr = side
    ck = ckpt_io.load(str(entry.path))
    ck.model.eval()
    name, size = step.whatif
    controls = {k: step.controls.get(k) or 0 for k in ("layer", "head", "slot")}
    out = catalog.apply(name, ck.model, encode_text(ck.vocab, step.text).reshape(-1), pos, float(size),
                        **controls).scored_on(entry.task)
    names = list(getattr(ck.vocab, "tokens", [])) or [str(i) for i in range(out.before.shape[1])]
    return {"whatif_guesses": whatif_guesses(out, pos, names, label=tr.labels[pos]).figure,
            "whatif_effect": whatif_effect(out, list(tr.labels), cursor=pos, line_on_top=True).figure}


def _question_html(q: tours.Question) -> str:
    if isinstance(q, tours.Choice):
        items = "".join(f"<li>{md_html(o)}</li>" for o in q.options)
        return f"<div class='question'><b>Question.</b> {md_html(q.prompt)}<ol type='A'>{items}</ol></div>"
    return (f"<div class='question'><b>Question.</b> {md_html(q.prompt)} <i>(a token position; answer at the "
            "end)</i></div>")


def _answer_html(q: tours.Question, labels: Sequence[str] | None) -> str:
    if isinstance(q, tours.Choice):
        right = f"{'ABCDEF'[q.answer]}. {md_html(q.options[q.answer])}"
    else:
        right = html.escape(q.answer_text(labels))
    why = f" {md_html(q.explanation)}" if q.explanation else ""
    return f"{md_html(q.prompt)} <b>Answer:</b> {right}.{why}"


def build_html(lesson: tours.Lesson, steps: Iterable[int] | None = None, entries: dict[str, Any] | None = None,
               image_maker: Callable[[dict[str, Any], Path], dict[str, Path]] | None = None) -> str:
    """The handout of ``lesson`` as one HTML document (a string).

    Args:
        lesson: a :class:`geomlab.teach.tours.Lesson`.
        steps: 0-based step indices in the order shown (a room's path); None: every step.
        entries: ``{ref: CheckpointEntry}``; None: the catalog's (:func:`geomlab.checkpoints.catalog.list_checkpoints`).
        image_maker: ``(figures, folder) -> {name: png path}``; None: :func:`geomlab.figures.images.write_pngs`.

    Raises :class:`HandoutError` for a step index out of range, a missing checkpoint or a failed image export.
    Source: design choice.
    """
    from geomlab.figures.images import ImageExportError, write_pngs

    order = list(range(len(lesson.steps))) if steps is None else list(dict.fromkeys(steps))
    bad = [i for i in order if not (isinstance(i, int) and 0 <= i < len(lesson.steps))]
    if bad:
        raise HandoutError(f"lesson {lesson.slug} has steps 1..{len(lesson.steps)}; no step {bad[0] + 1 if isinstance(bad[0], int) else bad[0]}")
    if entries is None:
        from geomlab.checkpoints import catalog

        entries = {e.ref: e for e in catalog.list_checkpoints()}
    make = image_maker or write_pngs
    parts = [f"<h1>{html.escape(lesson.title)}</h1><p class='summary'>{md_html(lesson.summary)}</p>"]
    answers = []
    with tempfile.TemporaryDirectory(prefix="geomlab-handout-") as tmp:
        for n, i in enumerate(order):
            step = lesson.steps[i]
            figs = step_figures(step, entries)
            try:
                pngs = make(figs, Path(tmp) / f"step{i}") if figs else {}
            except ImageExportError as exc:
                raise HandoutError(str(exc)) from None
            imgs = "".join(f"<img alt='{html.escape(name)}' src='data:image/png;base64,"
                           f"{base64.b64encode(Path(p).read_bytes()).decode()}'>" for name, p in pngs.items())
            body = f"<p>{md_html(step.body)}</p>" if step.body else ""
            q = _question_html(step.question) if step.question else ""
            meta = (f"{' vs '.join(step.checkpoints)} · {html.escape(views.VIEWS[step.view].title)} · text: "
                    f"<code>{html.escape(step.text)}</code> · cursor at position {step.cursor} (positions count "
                    "from 0; the orange line in the figures)")
            notice = f"<div class='notice'><b>What to notice.</b> {md_html(step.notice)}</div>"
            # a step with a question keeps its "What to notice" for the answers: it often gives the answer
            parts.append(f"<section class='step'><h2>{i + 1}. {html.escape(step.title)}</h2>{body}{imgs}"
                         f"<p class='meta'>{meta}</p>{q}{'' if step.question else notice}</section>")
            if step.question:
                answers.append(f"<li>Step {i + 1}: {_answer_html(step.question, _labels(step, entries))}"
                               f"{notice}</li>")
    if answers:
        parts.append(f"<section class='step'><h2>Answers</h2><ol class='answers'>{''.join(answers)}</ol></section>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(lesson.title)} · geomlab handout</title><style>{_CSS}</style></head><body>"
            + "".join(parts) + "<p class='meta'>Made with geomlab.</p></body></html>")


def _labels(step: tours.Step, entries: dict[str, Any]) -> list[str] | None:
    try:
        return list(_trace_step(step, entries)[0][1].labels)
    except Exception:  # noqa: BLE001 - labels only decorate the answer
        return None


def browser() -> str:
    """The Chrome or Chromium executable on ``PATH``; :class:`HandoutError` when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        exe = shutil.which(name)
        if exe:
            return exe
    raise HandoutError("a PDF handout needs Chrome or Chromium (Debian: apt-get install chromium)")


def write_pdf(html_path: str | Path, pdf_path: str | Path, timeout: float = 120.0) -> Path:
    """Print the HTML file at ``html_path`` to ``pdf_path`` with headless Chromium (``--print-to-pdf``, A4,
    no header or footer). Raises :class:`HandoutError` when there is no browser or no PDF came out."""
    html_path, pdf_path = Path(html_path).resolve(), Path(pdf_path).resolve()
    pdf_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="geomlab-chromium-") as profile:
        cmd = [browser(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
               "--no-pdf-header-footer", f"--print-to-pdf={pdf_path}", html_path.as_uri()]
        try:
            subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise HandoutError(f"the browser did not print {html_path.name} within {timeout:.0f} s") from None
    if not pdf_path.is_file() or pdf_path.stat().st_size < 100:
        raise HandoutError(f"the browser wrote no PDF for {html_path.name}")
    return pdf_path
