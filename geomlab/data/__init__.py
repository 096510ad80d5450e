"""geomlab's data layer: corpora, vocabularies and tasks (no model code here).

* :mod:`geomlab.data.corpora`: registered corpora (``tinyshakespeare``, ``ptb-char``, ``ptb``, ``wikitext-2``,
  ``wikitext-2-word``) and user text, split train/valid/test;
* :mod:`geomlab.data.vocab`: :class:`Vocab` (characters, words or symbols, explicit unknown token);
* :mod:`geomlab.data.tasks`: the :class:`Task` interface the Trainer uses, :class:`LMTask`, the evaluation
  protocol (:func:`sequence_nll`);
* :mod:`geomlab.data.registry`: the one task syntax (``corpus:NAME``, ``word-problem:GROUP[:LENGTH]``, ``gp``,
  ``text``, a file path), :func:`parse_task` and :func:`make_task`;
* :mod:`geomlab.data.word_problem`: the group word problem (S3, S5, A5, Z_n, parity);
* :mod:`geomlab.data.gp`: Gaussian-process regression.
"""

from geomlab.data.corpora import (
    CORPORA, FILES, SPLITS, Corpus, corpus_from_file, corpus_from_text, corpus_names, load_corpus,
    resolve_corpus, split_text,
)
from geomlab.data.errors import DataError
from geomlab.data.registry import make_task, parse_task
from geomlab.data.tasks import LMTask, Task, eval_windows, sequence_nll
from geomlab.data.vocab import Vocab

__all__ = [
    "CORPORA", "FILES", "SPLITS", "Corpus", "DataError", "LMTask", "Task", "Vocab", "corpus_from_file",
    "corpus_from_text", "corpus_names", "eval_windows", "load_corpus", "make_task", "parse_task", "resolve_corpus",
    "sequence_nll", "split_text",
]
