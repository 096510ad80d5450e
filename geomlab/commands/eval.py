"""``python -m geomlab eval``: evaluate a checkpoint on a split (bits per character, or the task's metric)."""

from __future__ import annotations

import argparse
import math
import sys

from geomlab.commands import (DEVICE_HELP, add_checkpoint_argument, add_threads_argument, device_option,
                              load_checkpoint, number, recipe_option, set_threads)

HELP = "evaluate a checkpoint: bits per character (or the task's metric) on a split, and its parameter count"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p)
    p.add_argument("--data", help="corpus name, text file or word-problem:GROUP (default: the checkpoint's own "
                   "corpus/task; for a run trained on a text file, the file of that name in this folder, if any)")
    p.add_argument("--split", default="test", choices=("train", "valid", "test"),
                   help="split to score (default test: the held-out number a paper reports; choose valid while "
                   "tuning, so that test stays unseen); the output line names it")
    p.add_argument("--seq-len", type=recipe_option("seq_len"), default=None,
                   help="evaluation window (default: the training --seq-len stored in the checkpoint)")
    p.add_argument("--stride", type=recipe_option("eval_stride"), default=None,
                   help="sliding-window stride (default: --seq-len, i.e. non-overlapping windows)")
    p.add_argument("--max-tokens", type=number(int, 1, 2**50), default=None, help="score only the first N targets of the split "
                   "(N >= 1; default all)")
    p.add_argument("--device", type=device_option, default="auto",
                   help=f"{DEVICE_HELP} (default auto)")
    add_threads_argument(p)


def _same_task_or_error(own: dict, task, name: str):
    """``task`` if it is the kind of task the checkpoint was trained on, else ``ValueError``: a word-problem
    model scored on another group (or on text), or a language model on a word problem, gives a number that
    means nothing (token ids are reused as they are). A word problem of the checkpoint's own group keeps the
    card's evaluation sequences (count and seed) at the requested length."""
    from geomlab.data.word_problem import WordProblemTask

    own_wp = isinstance(own, dict) and own.get("task") == "word-problem"
    if own_wp and isinstance(task, WordProblemTask):
        if task.group.name != own.get("group"):
            raise ValueError(f"{name} was trained on the {own.get('group')} word problem; scoring it on "
                             f"{task.group.name} is meaningless (use --data word-problem:{own.get('group')})")
        return WordProblemTask(task.group, length=task.length, n_eval=int(own.get("n_eval", task.n_eval)),
                               seed=int(own.get("seed", task.seed)))
    if own_wp or isinstance(task, WordProblemTask):
        trained = f"the {own.get('group')} word problem" if own_wp else "text (a language model)"
        raise ValueError(f"{name} was trained on {trained}; --data names a different kind of task, so the "
                         "score would be meaningless")
    return task


def _own_text_file(own) -> str | None:
    """The card's corpus when it is a text file (not a registered corpus) that exists at that path from the
    working folder, printed so the user sees which file is scored; else ``None`` (``make_task`` then says to
    pass ``--data``). Design choice: a run trained on ``my_text.txt`` evaluates beside it without --data."""
    from pathlib import Path

    from geomlab.data.corpora import CORPORA

    if not isinstance(own, dict) or own.get("task") != "lm":
        return None
    name = own.get("corpus")
    if not isinstance(name, str) or not name or name in CORPORA or not Path(name).is_file():
        return None
    print(f"evaluating on {Path(name)} (the run's text file {name!r}, found in this folder)")
    return name


def run(args: argparse.Namespace) -> int:
    from geomlab.data.registry import make_task
    from geomlab.models import count_params
    from geomlab.training.trainer import resolve_device

    set_threads(args.threads)
    device = resolve_device(args.device)
    c = load_checkpoint(args.checkpoint, device=device)
    own = c.card.get("task") or {}
    data = args.data if args.data else (_own_text_file(own) or own)
    task = make_task(data, vocab=c.vocab)
    task = _same_task_or_error(own, task, c.path.name)
    given = [o for o, v in (("--seq-len", args.seq_len), ("--stride", args.stride), ("--max-tokens", args.max_tokens))
             if v is not None]
    if given and task.kind == "classification":
        raise ValueError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to language models; a word "
                         "problem scores whole sequences, whose length --data sets (word-problem:GROUP:LENGTH)")
    trained = int((c.train_config or {}).get("seq_len", 128))
    seq_len = args.seq_len if args.seq_len is not None else trained
    if seq_len > trained:  # 100,000 read 4.82 BPC against 1.93 at 128 with no word why (an LSTM: lower)
        print(f"note: windows of {seq_len:,} tokens are longer than the {trained:,} this model was trained on: "
              "the BPC measures how it carries over to a longer context (better for a recurrent state, often "
              "worse for attention's positions), not the trained protocol", file=sys.stderr)
    if task.vocab is not None and task.kind == "lm":
        text = task.corpus.split(args.split)
        cut = args.max_tokens is not None and task.spec().get("level") == "char" and args.max_tokens < len(text)
        scored = text[:args.max_tokens + 1] if cut else text
        n_unk = task.vocab.count_unknown(scored)
        if n_unk:  # trace's note, and how many of the scored tokens it is
            from geomlab.data.vocab import unknown_note, unknown_tokens

            where = f"of the first {args.max_tokens:,} tokens" if cut else "tokens"
            note = unknown_note(unknown_tokens(task.vocab, scored), task.vocab.unk, fate="scored as")
            print(f"note: {note} ({n_unk:,} {where} of the {args.split} split)", file=sys.stderr)
    m = task.evaluate(c.model, args.split, seq_len=seq_len, device=device, max_tokens=args.max_tokens,
                      stride=args.stride)
    eff, stored = count_params(c.model, "effective"), count_params(c.model, "stored")
    print(score_line(args.split, m, task, f"window {seq_len}, stride {args.stride or seq_len}"))
    print(f"parameters: {eff:,} effective, {stored:,} stored ({c.model_config.get('kind')})")
    bad = [k for k, v in m.items() if k != "tokens" and isinstance(v, float) and not math.isfinite(v)]
    if bad:  # a score is no score: the weights are damaged or the run diverged
        print(f"error: {' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not finite: this checkpoint's model gives NaN or infinite outputs on "
              f"the {args.split} split (weights damaged after saving, or saved from a run that diverged)",
              file=sys.stderr)
        return 1
    return 0


def score_line(split: str, m: dict, task, protocol: str = "") -> str:
    """The line ``eval`` prints for the metrics ``m`` of ``task.evaluate`` on ``split``, one form for every
    task: the split, each score as ``name: value unit`` in words, then in brackets what was scored (how many
    targets of which split, and ``protocol``, a language model's window and stride):

    * characters: ``test bpc: 2.4497 bits per character  (55,769 characters of the test split; window 128,
      stride 128)``;
    * words or a tokenizer's tokens: ``test perplexity: 123.45, bits/word: 6.9478  (12,345 words of ...)``;
    * a word problem: ``test accuracy: 0.9791 of positions, final accuracy: 0.9375 of whole words, loss:
      0.1774 nats per position  (256 sequences of length 32 from the test split)``; accuracy is a share (1 =
      every prediction right), the loss the mean cross-entropy in nats (natural log);
    * any other metric by its name in words (``gp_rmse`` -> ``gp rmse``).

    Design choice."""
    n = int(m.get("tokens", 0))
    if "bpc" in m:
        scores, scored = [("bpc", f"{m['bpc']:.4f} bits per character")], f"{n:,} characters of the {split} split"
    elif "ppl" in m:
        unit = "word" if getattr(task.vocab, "level", "word") == "word" else "token"  # a tokenizer's sub-words
        scores = [("perplexity", f"{m['ppl']:.2f}"), (f"bits/{unit}", f"{m['bpw']:.4f}")]
        scored = f"{n:,} {unit}s of the {split} split"
    elif {"accuracy", "final_accuracy", "nll"} <= set(m):
        scores = [("accuracy", f"{m['accuracy']:.4f} of positions"),
                  ("final accuracy", f"{m['final_accuracy']:.4f} of whole words"),
                  ("loss", f"{m['nll']:.4f} nats per position")]
        length = int(getattr(task, "length", 0) or 0)
        scored = (f"{n // length:,} sequences of length {length} from the {split} split" if length
                  else f"{n:,} positions of the {split} split")
        protocol = ""  # whole sequences: no window or stride
    else:
        scores = [(k.replace("_", " "), f"{v:.4f}") for k, v in m.items() if k != "tokens"]
        scored = f"the {split} split"
    return (f"{split} " + ", ".join(f"{name}: {value}" for name, value in scores)
            + f"  ({scored}{'; ' + protocol if protocol else ''})")
