"""``geomlab zoo``: list the bundled checkpoints' cards, or retrain the zoo from its recipes."""

from __future__ import annotations

import argparse
from pathlib import Path

from geomlab.commands import add_threads_argument, number

HELP = "list the bundled model zoo (--list) or regenerate it from its recipes (--rebuild)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    action = p.add_mutually_exclusive_group()  # one action a call: --rebuild beside --list started a rebuild
    action.add_argument("--list", action="store_true",
                   help="print the card of every checkpoint in the zoo folder and the name to give eval, sample and "
                   "trace (the default action)")
    action.add_argument("--recipes", action="store_true", help="print the recipe of every zoo entry (no training)")
    action.add_argument("--convert", action="store_true",
                   help="rewrite every checkpoint of an older layout in the zoo folder (flat NAME.json + "
                   "NAME.safetensors pairs, older folders, folders without the weights' sha256) as a Hugging Face "
                   "folder NAME/, checking that the logits are equal, then remove the old files; a checkpoint that "
                   "does not load is skipped and named (exit 1)")
    action.add_argument("--accept-weights", metavar="CHECKPOINT",
                   help="record the sha256 of this checkpoint's present weights, which you vouch for (changed on "
                   "purpose, or saved before geomlab recorded it): it is saved anew in place, with every other "
                   "check made; a load refuses weights whose sum is not the recorded one")
    action.add_argument("--rebuild", action="store_true",
                   help="train every zoo entry (or those in --only) from scratch and overwrite its checkpoint; "
                   "needs the corpora (GEOMLAB_DATA_DIR or the download cache)")
    p.add_argument("--only", metavar="NAME[,NAME]",
                   help="only these entries, with --list, --recipes or --rebuild (see --recipes for the names)")
    p.add_argument("--steps-scale", type=number(float, 0.0, 1000.0, above=True), default=1.0, metavar="X",
                   help="multiply every entry's steps by X (e.g. 0.05 for a quick smoke rebuild; the cards "
                   "record the steps actually used)")
    p.add_argument("--dir", default=None, metavar="DIR",
                   help="zoo folder (default: assets/checkpoints in the repository)")
    add_threads_argument(p, " for training")
    p.add_argument("--progress", action="store_true", help="show a tqdm bar per entry")
    p.add_argument("--from-run", metavar="CHECKPOINT",
                   help="with --rebuild and one --only NAME: write NAME from this finished run instead of training "
                   "it again (e.g. seed 0 of the converged campaign, runs/converged/.../ckpt); refused unless the "
                   "run is the entry's recipe")


def run(args: argparse.Namespace) -> int:
    from geomlab.training import zoo
    from geomlab.commands import set_threads

    out_dir = Path(args.dir) if args.dir else zoo.ZOO_DIR
    set_threads(args.threads)
    if args.recipes:
        for e in zoo.entries(args.only):
            r = e.run
            budget = f"~{r.params:,} params" if r.params else "explicit config"
            curriculum = r.length_curriculum
            cur = ("; the first steps a length curriculum: " + ", ".join(
                f"{k} at length {n}" for n, k in curriculum)) if curriculum else ""
            print(f"{e.name}: {r.kind} on {r.data}, {budget}, config {r.model_overrides}, {r.steps} steps x "
                  f"{r.batch_size} x {r.seq_len}, lr {r.lr}, seed {r.seed}{cur}")
        return 0
    if args.from_run is not None:
        names = [n for n in (args.only or "").split(",") if n.strip()]
        if not args.rebuild or len(names) != 1:
            raise ValueError("--from-run needs --rebuild and exactly one entry in --only")
        entry = zoo.entries(names)[0]
        if args.steps_scale != 1.0:
            raise ValueError("--from-run adopts the run as trained: drop --steps-scale")
        if out_dir.exists() and not out_dir.is_dir():
            raise ValueError(f"--dir {out_dir} is a file, not a folder")
        print(f"wrote {zoo.adopt_entry(entry, args.from_run, out_dir)}")
        return 0
    if args.accept_weights is not None:
        from geomlab.checkpoints.hub import accept_weights

        saved = accept_weights(args.accept_weights)
        print(f"{args.accept_weights}: its weights already have the recorded sha256; nothing changed" if saved is None
              else f"recorded the sha256 of {saved}'s weights (saved anew in place)")
        return 0
    if args.convert:
        import sys

        from geomlab.checkpoints.hub import convert_folder

        done, skipped = convert_folder(out_dir)
        print(f"converted {len(done)} checkpoint(s) in {out_dir}")
        if skipped:
            print(f"skipped {len(skipped)} checkpoint(s), left as they were (the reasons above): "
                  + ", ".join(skipped), file=sys.stderr)
            return 1
        return 0
    if args.rebuild:
        paths = zoo.rebuild(args.only, steps_scale=args.steps_scale, out_dir=out_dir, progress_bar=args.progress)
        print(f"wrote {len(paths)} checkpoint(s) to {out_dir}")
        return 0
    if not out_dir.is_dir():
        print(f"no folder {out_dir}" if not out_dir.exists() else f"{out_dir} is a file, not a folder")
        return 1
    cards = zoo.read_cards(out_dir)
    if args.only is not None:  # the listing of only these entries (an unknown name is refused, as for --recipes)
        keep = {e.name for e in zoo.entries(args.only)}
        cards = [c for c in cards if zoo.card_name(c) in keep]
    if not cards:
        print(f"no checkpoints in {out_dir}; run `geomlab zoo --rebuild`")
        return 1
    bundled = out_dir.resolve() == zoo.ZOO_DIR.resolve()
    for card in cards:
        print(zoo.format_card(card))
        if "error" not in card and not card.get("changed"):  # a changed one names --accept-weights instead
            name = zoo.card_name(card)
            ref = name if bundled else str(out_dir / card["file"])
            print(f"  refer to it as {ref}" + (f" (or bundled/{name}, as in the app) from any folder" if bundled
                                               else "") + f", e.g. `geomlab eval {ref}`")
        print()
    return 0
