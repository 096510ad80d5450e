"""The task syntax: one way to name a task, parsed here and nowhere else.

A task is named by one string, the same on the command line (``--data``), in a run spec
(:class:`geomlab.training.runs.RunSpec`), in zoo recipes and in the report:

* ``corpus:NAME``: a registered corpus (:data:`geomlab.data.corpora.CORPORA`), next-token language modelling;
* ``word-problem:GROUP[:LENGTH]``: the group word problem (S3, S5, A5, Zn, parity), evaluated on sequences
  of ``LENGTH`` (default: the caller's, e.g. the run's ``seq_len``; else 32);
* ``gp``: Gaussian-process regression (:mod:`geomlab.data.gp`);
* ``text``: a text handed over with the request (the app's pasted or uploaded text), split 90/5/5;
* any other string: the path of a UTF-8 text file, split 90/5/5.

A checkpoint card's ``task`` dict (:meth:`geomlab.data.Task.spec`) is the other input :func:`make_task` takes.

This module imports the task modules (``tasks``, ``word_problem``, ``gp``); they import only
:mod:`geomlab.data.tasks`, so the data layer has no import cycle. Source: design choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from geomlab.data.corpora import CORPORA, corpus_from_text, load_corpus, resolve_corpus, text_sha256
from geomlab.data.errors import DataError
from geomlab.data.gp import GPRegressionTask
from geomlab.data.tasks import LMTask, Task
from geomlab.data.vocab import Vocab
from geomlab.data.word_problem import WordProblemTask

#: The forms of a task string, for messages and help texts.
TASK_FORMS = "corpus:NAME, word-problem:GROUP[:LENGTH], gp, text or the path of a text file"
#: Word-problem evaluation length when neither the string nor the caller gives one.
DEFAULT_LENGTH = 32


@dataclass(frozen=True)
class TaskRef:
    """A parsed task string.

    form: ``"corpus"``, ``"word-problem"``, ``"gp"``, ``"text"`` or ``"file"``. arg: the corpus name, the
    group, or the file path (``""`` for ``gp`` and ``text``). length: a word problem's evaluation length when
    the string gives one. ``str(ref)`` is the canonical spelling."""

    form: str
    arg: str = ""
    length: int | None = None

    def __str__(self) -> str:
        if self.form == "corpus":
            return f"corpus:{self.arg}"
        if self.form == "word-problem":
            return f"word-problem:{self.arg}" + (f":{self.length}" if self.length is not None else "")
        if self.form == "file":
            return self.arg
        return self.form

    def with_length(self, length: int) -> "TaskRef":
        """This reference with a word problem's ``length`` filled in when the string gave none."""
        return self if self.form != "word-problem" or self.length is not None else replace(self, length=int(length))


def parse_task(text: str, *, paths: bool = True) -> TaskRef:
    """Parse a task string (module docstring) without loading anything.

    ``paths=False`` refuses the file-path form (a request that must not read the machine's files, e.g. the
    app's). Raises :class:`DataError` naming the accepted forms for anything else, an unknown corpus after
    ``corpus:``, or a word-problem length that is not a positive integer."""
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"data must be {TASK_FORMS}, got {text!r}")
    head, sep, rest = text.partition(":")
    if head == "word-problem" and not rest.partition(":")[0]:
        raise DataError(f"{text!r} names no group: word-problem:GROUP[:LENGTH], e.g. word-problem:S5 or "
                        "word-problem:Z5:64")
    if sep and head == "word-problem" and rest:
        group, _, length = rest.partition(":")
        try:
            n = int(length) if length else None
        except ValueError:
            raise DataError(f"word-problem length must be an integer, got {length!r}") from None
        if n is not None and n < 1:
            raise DataError(f"word-problem length must be >= 1, got {n}")
        return TaskRef("word-problem", group, n)
    if sep and head == "corpus":
        if rest not in CORPORA:
            raise DataError(f"unknown corpus {rest!r}; registered: {', '.join(CORPORA)}")
        return TaskRef("corpus", rest)
    if text in ("gp", "text"):
        return TaskRef(text)
    if not paths:
        raise DataError(f"data must be corpus:NAME, word-problem:GROUP[:LENGTH], gp or text, got {text!r}")
    return TaskRef("file", text)


def make_task(spec: str | TaskRef | dict[str, Any], vocab: Vocab | None = None, download: bool = True, *,
              length: int | None = None, n_eval: int | None = None, text: str | None = None,
              text_name: str | None = None) -> Task:
    """Build a task from a task string (:func:`parse_task`), a :class:`TaskRef` or a checkpoint card's
    ``task`` dict (:meth:`geomlab.data.Task.spec`; a user text file is not stored in the card, so such runs
    need the file again).

    ``vocab`` (e.g. a checkpoint's) is used instead of building one from the training split. ``download``:
    fetch a missing registered corpus. ``length``: a word problem's evaluation length when the string gives
    none (else :data:`DEFAULT_LENGTH`). ``n_eval``: evaluation sequences per split of a synthetic task (word
    problem, GP; default the task's, 512). ``text``: the text of the ``text`` form; its corpus is named
    ``"<text_name> · <first 8 hex digits of its sha256>"`` (``text_name``: an uploaded file's name, its last
    path part, printable characters, at most 60; default ``"pasted text"``), so a checkpoint card says which text a run trained on (design choice). Raises
    :class:`DataError` for anything that cannot be built (unknown corpus, missing file, empty text...)."""
    if isinstance(spec, dict):
        return _from_card(spec, vocab, download)
    ref = spec if isinstance(spec, TaskRef) else parse_task(spec) if isinstance(spec, str) else None
    if ref is None:
        raise DataError(f"a task is a string or a dict, got {type(spec).__name__}")
    extra = {} if n_eval is None else {"n_eval": int(n_eval)}
    if ref.form == "word-problem":
        n = ref.length if ref.length is not None else int(length) if length is not None else DEFAULT_LENGTH
        return WordProblemTask(ref.arg, length=n, **extra)
    if ref.form == "gp":
        return GPRegressionTask(**extra)
    if ref.form == "corpus":
        return LMTask(load_corpus(ref.arg, download=download), vocab)
    if ref.form == "text":
        if text is None:  # the form for a text given beside the string (the app's box), not a file
            raise DataError("'text' is a text given with the request (the app's text box); for a file give its "
                            "path, for a corpus corpus:NAME")
        label = "".join(c for c in str(text_name or "").replace("\\", "/").rsplit("/", 1)[-1] if c.isprintable())
        name = f"{label.strip()[:60] or 'pasted text'} · {text_sha256(text)[:8]}"
        return LMTask(corpus_from_text(text, name=name), vocab)
    return LMTask(resolve_corpus(ref.arg, download=download), vocab)


def task_string(task: Task) -> str:
    """The task string of a built task (the inverse of :func:`make_task` for the string forms): ``corpus:NAME``,
    ``word-problem:GROUP:LENGTH``, ``gp``, else the task's name (a user text)."""
    spec = task.spec()
    if spec.get("task") == "word-problem":
        return f"word-problem:{spec.get('group')}:{spec.get('length')}"
    if spec.get("task") == "gp-regression":
        return "gp"
    name = spec.get("corpus", getattr(task, "name", ""))
    return f"corpus:{name}" if name in CORPORA else str(name)


def _from_card(spec: dict[str, Any], vocab: Vocab | None, download: bool) -> Task:
    """The task of a checkpoint card's ``task`` dict."""
    kind = spec.get("task")
    if kind == "word-problem":
        return WordProblemTask(spec.get("group", "S5"), length=int(spec.get("length", 32)),
                               n_eval=int(spec.get("n_eval", 512)), seed=int(spec.get("seed", 1234)))
    if kind == "gp-regression":
        keys = ("noise", "lengthscale_range", "n_eval", "seed")
        return GPRegressionTask(**{k: spec[k] for k in keys if k in spec})
    if kind == "lm":
        name = spec.get("corpus")
        if name in CORPORA:
            return LMTask(load_corpus(name, download=download), vocab)
        raise DataError(f"this run was trained on {name!r}, which is not a registered corpus; "
                        "pass the text file with --data")
    raise DataError(f"cannot rebuild a task of kind {kind!r} from its description; pass --data")


__all__ = ["DEFAULT_LENGTH", "TASK_FORMS", "TaskRef", "make_task", "parse_task", "task_string"]
