"""``python -m geomlab whatif``: the app's "What if" panel and its patching sweep on the command line.

One intervention of :mod:`geomlab.whatif.catalog` at a position (steer an OSM state, move a Grassmann plane,
change a CEM layer's energy steps, ablate a head), printed as the panel's summary line
(:meth:`geomlab.whatif.outcome.Outcome.summary`, scored on the checkpoint card's ``task`` as the app scores
it) and the top-k guesses before and after; or, with ``--patch TOKEN``, the activation-patching sweep of the
app's heatmap (:func:`geomlab.whatif.patching.token_swap_sweep`: the token at ``--pos`` replaced by ``TOKEN``,
every layer and position patched back from the real text, the share of the prediction at ``--target`` each
patch restores; without ``--target``, at :func:`~geomlab.whatif.patching.choose_target`'s position).
``--json FILE`` (``-``: standard output) saves the arrays.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from geomlab.commands import (add_checkpoint_argument, add_text_arguments, add_threads_argument, check_outputs,
                              load_checkpoint, make_folders, number, position, set_threads, text_tokens)
from geomlab.core.argv import finite_float

HELP = "intervene at a position (steer, move a plane, energy steps, ablate a head) or run a patching sweep"
EPILOG = ("Interventions (--intervention, default the checkpoint's first, as the app's switch): steer (osm-rnn, "
          "osmformer; --size ε in rad, -5..5), rotate_plane (grassmann; angle in rad, -1.57..1.57, --slot), "
          "energy_steps (cem; steps T of --layer, 0..16, default the trained T + 2), ablate_head (transformer, "
          "llama, grassmann-attn, cem; --head, size 1 ablated, 0 not). --patch TOKEN runs the app's patching "
          "sweep instead (docs/whatif.md).")

#: --layer, --head, --slot: an index from 0; its upper end is the checkpoint's (:func:`_check_controls`)
_INDEX = number(int, 0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``geomlab whatif`` (checkpoint and text as ``geomlab trace`` takes them); numbers are
    range-checked when read (:func:`geomlab.core.argv.number`)."""
    p.epilog = EPILOG
    add_checkpoint_argument(p)
    add_text_arguments(p)
    p.add_argument("--pos", "--cursor", dest="pos", type=position, required=True,
                   help="the position (token index from 0, the app's cursor) where the intervention acts, or "
                        "whose token --patch replaces")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--intervention", default=None, metavar="NAME",
                      help="steer, rotate_plane, energy_steps or ablate_head (default: the first that applies)")
    mode.add_argument("--patch", default=None, metavar="TOKEN",
                      help="patching sweep: put this one token in --pos's place (the corrupted text) and patch "
                           "every (layer, position) from the real text")
    p.add_argument("--size", default=None,  # read by _size, once the intervention (and so its range) is known
                   help="the knob's size (default the app's: 0.5 for steer and rotate_plane, 1 for ablate_head, "
                        "the trained steps + 2 for energy_steps)")
    p.add_argument("--layer", type=_INDEX, default=None, help="layer the intervention acts on (default 0)")
    p.add_argument("--head", type=_INDEX, default=None, help="ablate_head: the head (default 0)")
    p.add_argument("--slot", type=_INDEX, default=None, help="rotate_plane: the offset slot (default 0)")
    p.add_argument("--top-k", type=number(int, 1, 100), default=5,
                   help="guesses shown before and after (default 5, as the app)")
    p.add_argument("--target", type=position, default=None,
                   help="--patch: position whose prediction is read (after --pos, within the sweep's window of "
                        "128 positions; default: where the swap moves the prediction most among the next 8, "
                        "preferring 2 on: geomlab.whatif.patching.choose_target)")
    p.add_argument("--json", default=None, metavar="FILE",
                   help="also write the arrays as strict JSON to FILE (missing folders are made, with a note); '-': "
                        "standard output, and nothing else is printed there")
    add_threads_argument(p)


def _size(text: str, spec) -> float:
    """``--size TEXT`` as a number for intervention ``spec`` (a :class:`geomlab.whatif.catalog.Intervention`);
    ``ValueError`` naming the option and the intervention's range when it is not a finite number, is outside
    that range, or is not whole for a knob that moves in whole steps."""
    whole = float(spec.step).is_integer()
    span = f"{spec.name} takes {'whole numbers ' if whole else ''}{spec.lo:g}..{spec.hi:g} ({spec.size_label})"
    size = finite_float(text, "--size", span)
    if not spec.lo <= size <= spec.hi:
        raise ValueError(f"--size {size:g} is outside {spec.lo:g}..{spec.hi:g} for {spec.name} ({spec.size_label})")
    if whole and not size.is_integer():
        raise ValueError(f"--size {size:g} is not a whole number; {span}")
    return size


def _control_counts(name: str, model, layer: int) -> dict[str, tuple[int, str]]:
    """For intervention ``name`` on ``model``: ``{knob: (count, what it counts)}`` for the ``--layer``,
    ``--head`` and ``--slot`` it reads (the slots of ``layer``, when that layer exists). A knob whose count
    cannot be read here is left out (the intervention itself then refuses a bad value)."""
    from geomlab.whatif.catalog import model_kind

    plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"  # noqa: E731
    counts: dict[str, tuple[int, str]] = {}
    try:
        if name == "ablate_head":
            from geomlab.whatif.heads import attention_heads

            n_layers, n_heads = attention_heads(model)
            counts["head"] = (n_heads, f"{plural(n_heads, 'head')} in each layer")
        elif name == "energy_steps":
            n_layers = len(model.stack.layers)
        elif name == "steer":
            n_layers = 1 if model_kind(model) == "osm-rnn" else int(model.n_layers)
        elif name == "rotate_plane":
            n_layers = len(model.blocks)
            if 0 <= layer < n_layers:
                offsets = list(model.blocks[layer].mixer.offsets)
                counts["slot"] = (len(offsets), f"layer {layer}'s offsets: {offsets}")
        else:
            return counts
    except (AttributeError, TypeError, ValueError):
        return counts
    counts["layer"] = (n_layers, plural(n_layers, "layer"))
    return counts


def _check_controls(name: str, model, controls: dict[str, int]) -> None:
    """``ValueError`` naming the option for a ``--layer``, ``--head`` or ``--slot`` in ``controls`` outside what
    this checkpoint has (``--head 9 is outside 0..3 for this checkpoint (4 heads in each layer)``)."""
    counts = _control_counts(name, model, controls.get("layer", 0))
    for knob in ("layer", "head", "slot"):  # the layer first: the slots are the chosen layer's
        if knob in controls and knob in counts:
            n, what = counts[knob]
            if n >= 1 and not 0 <= controls[knob] < n:
                raise ValueError(f"--{knob} {controls[knob]} is outside 0..{n - 1} for this checkpoint ({what})")


def _finite(values) -> list:
    """Floats as a list for strict JSON: NaN and infinities as ``None`` (nested lists kept)."""
    return [_finite(v) if hasattr(v, "__len__") else (float(v) if math.isfinite(float(v)) else None)
            for v in values]


def _tokens(vocab, text: str, what: str):
    """``(T,)`` ids of a stand-in token (``--patch``) as the app encodes it; ``ValueError`` naming ``what`` when
    the vocabulary lacks some of its symbols (as the app's sweep: it would run as the unknown token under its
    own name)."""
    from geomlab.data.vocab import unknown_symbols_error, unknown_tokens
    from geomlab.trace import encode_text

    bad = unknown_tokens(vocab, text)
    if bad:
        raise ValueError(f"{what}: {unknown_symbols_error(vocab, bad)}")
    return encode_text(vocab, text).reshape(-1)


def run(args: argparse.Namespace) -> int:
    """Run one intervention or, with ``--patch``, a patching sweep, print it and write ``--json``; returns 0.
    Raises ``ValueError`` (one line, exit status 2 from :func:`geomlab.commands.cli.main`) for bad input: an
    intervention that does not apply or is unknown, a position, size, layer or target out of range, a text
    the app refuses (:func:`geomlab.commands.text_tokens`: a word problem's symbols outside the vocabulary), a
    ``--patch`` token outside the vocabulary; nothing is written then. Characters outside a vocabulary with an
    unknown token read as that token, with a ``note:`` line on standard error, as the app reads them. Design
    choice: standard output with ``--json -`` holds the JSON alone, so it pipes."""
    from geomlab.commands.trace import read_text_file
    from geomlab.data.vocab import decode_text, normalize_text
    from geomlab.trace import position_labels, visible

    set_threads(args.threads)
    c = load_checkpoint(args.checkpoint, device="cpu")
    if c.vocab is None:
        raise ValueError("this checkpoint has no vocabulary (not a text model); it cannot read a text")
    json_path = None if args.json in (None, "-") else Path(args.json)
    if json_path is not None:
        check_outputs([("--json", json_path, False)])
    text = normalize_text(args.text) if args.text is not None else decode_text(read_text_file(args.text_file),
                                                                               source=args.text_file)
    tokens = text_tokens(c.vocab, text, "--text" if args.text is not None else "--text-file")
    T = len(tokens)
    if not args.pos < T:
        raise ValueError(f"--pos {args.pos} is outside the text (positions 0 to {T - 1})")
    names = [visible(t) for t in c.vocab.tokens]
    labels = position_labels(c.vocab, text, tokens)  # as a trace names them: 'é→�' where read as unknown
    doc = {"checkpoint": args.checkpoint, "kind": c.model_config.get("kind"), "text": text,
           "tokens": tokens.tolist(), "position": args.pos}
    if args.patch is not None:
        lines, more = _patch(c, tokens, args, names, labels)
    else:
        lines, more = _intervene(c, tokens, args, names, labels)
    doc.update(more)
    # with --json -, standard output holds the JSON alone (for pipes)
    print(json.dumps(doc, allow_nan=False) if args.json == "-" else "\n".join(lines))
    if json_path is not None:
        with make_folders("--json", json_path):
            json_path.write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")
        print(f"wrote {'the sweep' if args.patch is not None else 'KL and surprisal change'} as JSON -> "
              f"{json_path}")
    return 0


def _intervene(c, tokens, args, names, labels) -> tuple[list[str], dict]:
    """The intervention's printed lines and JSON fields (module docstring)."""
    from geomlab.whatif import catalog

    offered = [i.name for i in catalog.available(c.model)]
    if not offered:
        raise ValueError(f"no intervention applies to a {catalog.model_kind(c.model)} (What if offers: "
                         f"{', '.join(catalog.INTERVENTIONS)}); --patch TOKEN runs a patching sweep")
    name = args.intervention or offered[0]
    if name not in catalog.INTERVENTIONS:
        raise ValueError(f"--intervention {name!r} is unknown; this checkpoint offers {', '.join(offered)}")
    if name not in offered:
        spec = catalog.INTERVENTIONS[name]
        kind = catalog.model_kind(c.model)
        raise ValueError(f"--intervention {name} does not apply to {'an' if kind[:1] in 'aeiou' else 'a'} {kind} (it applies to "
                         f"{', '.join(spec.kinds)}); this checkpoint offers {', '.join(offered)}")
    spec = catalog.INTERVENTIONS[name]
    if args.target is not None:
        raise ValueError("--target applies to --patch only (the position a patching sweep reads)")
    for knob in ("layer", "head", "slot"):
        if getattr(args, knob) is not None and knob not in spec.takes:
            raise ValueError(f"--{knob} does not apply to {name} (it reads {', '.join('--' + k for k in spec.takes)})")
    if args.size is None:  # the panel's opening size
        size = float(spec.default if name != "energy_steps" else catalog.neutral_size(name, c.model) + 2)
    else:
        size = _size(args.size, spec)
    controls = {k: getattr(args, k) or 0 for k in spec.takes}
    _check_controls(name, c.model, controls)
    out = catalog.apply(name, c.model, tokens, args.pos, size, **controls).scored_on(c.card.get("task"))
    before, after = out.top_k(args.pos, args.top_k)
    w = max(len(repr(names[i])) for i, _ in before + after)
    lines = [out.summary(args.pos),
             f"top {args.top_k} {out.predicts} at position {args.pos} ({labels[args.pos]!r}), before and "
             f"after:"]
    for rank, ((i, p), (j, q)) in enumerate(zip(before, after), 1):
        lines.append(f"{rank:>4d}  {names[i]!r:<{w}} {p:6.1%}    {names[j]!r:<{w}} {q:6.1%}")
    guess = lambda pairs: [{"id": i, "token": names[i], "p": p} for i, p in pairs]  # noqa: E731
    return lines, {"intervention": name, "size": size, "controls": controls, "what": out.what,
                   "predicts": out.predicts, "summary": lines[0], "kl_bits": _finite(out.kl_bits()),
                   "surprisal_change_bits": _finite(out.surprisal_change_bits()),
                   "top_k": {"before": guess(before), "after": guess(after)}}


def _patch(c, tokens, args, names, labels) -> tuple[list[str], dict]:
    """The patching sweep's printed lines and JSON fields (module docstring): the app's window, the last
    :data:`geomlab.whatif.patching.SWEEP_SPAN` positions up to the target."""
    from geomlab.whatif.patching import SWEEP_SPAN, choose_target, token_swap_sweep

    pos, T = args.pos, len(tokens)
    for knob in ("intervention", "size", "layer", "head", "slot"):
        if getattr(args, knob) is not None:
            raise ValueError(f"--{knob} does not apply to --patch (a sweep patches every layer)")
    if pos >= T - 1:
        raise ValueError(f"--patch: --pos {pos} is the last position; nothing after it reads its token")
    hi = min(T - 1, pos + SWEEP_SPAN - 1)
    target = args.target
    if target is not None and not pos < target <= hi:
        raise ValueError(f"--target {target} is outside {pos + 1}..{hi} (after --pos, within {SWEEP_SPAN} positions)")
    ids = _tokens(c.vocab, args.patch, "--patch") if args.patch else []
    if len(ids) != 1:
        raise ValueError(f"--patch {args.patch!r} is {len(ids)} tokens for this checkpoint: give one token")
    if int(ids[0]) == int(tokens[pos]):
        raise ValueError(f"--patch {args.patch!r} is the token at --pos {pos} already: give a different one")
    chosen = None if target is not None else choose_target(c.model, tokens, pos, int(ids[0]))
    if chosen is not None:
        target = chosen.position
    sweep = token_swap_sweep(c.model, tokens, pos, int(ids[0]), target)
    start = int(sweep.positions[0])
    small = sweep.small()
    shown = sweep.values if small else sweep.recovered()
    # the summary line says when the swap barely changes the prediction (Sweep.describe)
    lines = [f"{labels[pos]!r} at position {pos} replaced by {args.patch!r}: {sweep.describe(names)}; "
             f"{sweep.runs} patched runs in {sweep.seconds:.1f} s" + (f"; {chosen.describe()}." if chosen else "."),
             ("Logit difference with each (layer, position) patched from the real text" if small else
              "Share of it restored with each (layer, position) patched from the real text (0 nothing, 1 all)")
             + f"; positions {pos}..{target} (earlier ones hold the same state in both texts):",
             f"{'':>10s}" + "".join(f"{f'{p} {labels[p]!r}':>11s}" for p in range(pos, target + 1))]
    for label, row in zip(sweep.layers, shown):
        lines.append(f"{label:>10s}" + "".join(f"{v:>11.3f}" for v in row[pos - start:target - start + 1]))
    return lines, {"patch": args.patch, "target": target, "target_chosen": chosen is not None,
                   "target_candidates": None if chosen is None else chosen.candidates.tolist(),
                   "target_changes": None if chosen is None else _finite(chosen.changes),
                   "target_token": sweep.target_token,
                   "target_token_name": names[sweep.target_token], "alt_token": sweep.alt_token,
                   "alt_token_name": names[sweep.alt_token], "metric": sweep.metric,
                   "clean": sweep.clean, "corrupt": sweep.corrupt, "layers": sweep.layers,
                   "positions": sweep.positions.tolist(), "values": _finite(sweep.values),
                   "recovered": _finite(sweep.recovered()), "shown": "values" if small else "recovered"}
