"""``python -m geomlab sample``: generate text from a checkpoint."""

from __future__ import annotations

import argparse
import sys

from geomlab.commands import (DEVICE_HELP, add_checkpoint_argument, add_threads_argument, device_option,
                              load_checkpoint, number, recipe_option, set_threads)

HELP = "generate text from a checkpoint, continuing a prompt"
#: Most tokens one ``sample`` call generates (one model step each: 1,000 took 458 s for the ~88K OSMFormer on
#: a busy CPU; a typo of 10,000,000 ran for hours silently).
MAX_LENGTH = 10_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_checkpoint_argument(p)
    p.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    p.add_argument("--length", type=number(int, 0, MAX_LENGTH), default=200, help=f"tokens to generate (default 200, at most {MAX_LENGTH:,})")
    p.add_argument("--temperature", type=number(float, 0.0), default=1.0, help="softmax temperature; 0 = greedy (default 1)")
    p.add_argument("--top-k", type=number(int, 1), default=None,
                   help="sample only among the k most likely tokens (at least 1; default: all)")
    p.add_argument("--seed", type=recipe_option("seed"), default=0, help="sampling seed, 0 to 2**63 - 1 (default 0)")
    p.add_argument("--context", type=recipe_option("seq_len"), default=None,
                   help="tokens of context fed to the model, at least 1 (default: the training --seq-len)")
    p.add_argument("--device", type=device_option, default="auto",
                   help=f"{DEVICE_HELP} (default auto)")
    add_threads_argument(p)


def run(args: argparse.Namespace) -> int:
    from geomlab.core.argv import program
    from geomlab.training.sampling import generate
    from geomlab.training.trainer import resolve_device

    set_threads(args.threads)
    device = resolve_device(args.device)
    c = load_checkpoint(args.checkpoint, device=device)
    if c.vocab is None:
        raise ValueError(f"{c.path.name} has no vocabulary, so it cannot generate text")
    task = (c.card or {}).get("task") or {}
    if isinstance(task, dict) and task.get("task") == "word-problem":
        raise ValueError(f"{c.path.name} is a word-problem model (group {task.get('group', '?')}): it predicts the "
                         "running product of its inputs, not the next input, so there is nothing to sample; use "
                         f"`{program()} eval` (accuracy) or `{program()} trace` instead")
    from geomlab.data.vocab import normalize_text, unknown_note, unknown_tokens

    args.prompt = normalize_text(args.prompt)  # the same normalisation as the training text
    unknown = unknown_tokens(c.vocab, args.prompt)
    if unknown:  # trace's note, on stderr: stdout holds only the sample, for pipes
        print(f"note: {unknown_note(unknown, c.vocab.unk)}", file=sys.stderr)
    ids = c.vocab.encode(args.prompt)
    if ids.numel() == 0:
        raise ValueError("the prompt is empty")
    context = args.context if args.context is not None else int((c.train_config or {}).get("seq_len", 128))
    out = generate(c.model, ids, args.length, temperature=args.temperature, top_k=args.top_k, context=context,
                   seed=args.seed, device=device,
                   exclude=[c.vocab.unk_id] if c.vocab.unk_id is not None else None)
    print(args.prompt + c.vocab.decode(out))
    return 0
