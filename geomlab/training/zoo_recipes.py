"""The bundled model zoo as data: one recipe per checkpoint in ``assets/checkpoints``.

Every bundled checkpoint is reproducible from its :class:`ZooEntry`: a name and words for the app, and the
one run spec that trains it (:class:`geomlab.training.runs.RunSpec`, built by :func:`recipe`: the model kind with
either an explicit config or a parameter budget resolved with :func:`geomlab.models.config_for_budget`, the
task ``corpus:NAME`` or ``word-problem:GROUP:LENGTH``, steps, batch, sequence length, learning rate, seed and
length curriculum). :data:`ZOO` lists the entries; :func:`entries` picks some by name and :func:`scaled`
shortens one (a smoke rebuild). Training them is :mod:`geomlab.training.zoo`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import Any, Iterable

from geomlab.training import runs
from geomlab.core.locate import BUNDLED_DIR
from geomlab.training.runs import RunSpec

#: Where the bundled checkpoints live (in the repository or, installed, in the package: geomlab.core.locate).
ZOO_DIR = BUNDLED_DIR


class ZooError(ValueError):
    """Bad zoo request: an unknown entry name, an invalid scale, a missing checkpoint."""


@dataclass(frozen=True)
class ZooEntry:
    """One bundled checkpoint's recipe: a name and words for the app, and the run that trains it.

    Attributes:
        name: folder name in ``assets/checkpoints`` (``NAME/``, a Hugging Face folder).
        title: one human line for the app's model picker.
        description: what the model is and why it is in the zoo.
        run: the :class:`geomlab.training.runs.RunSpec` that trains it (built by :func:`recipe`): model kind, budget or
            config, task string (``run.data``: ``"corpus:tinyshakespeare"`` or ``"word-problem:GROUP:LENGTH"``)
            and training values.
        eval_lengths: word problem only: sequence lengths at which accuracy is recorded on the card.
        notes: caveats printed on the card (e.g. "short budget; not converged").
    """

    name: str
    title: str
    description: str
    run: RunSpec
    eval_lengths: tuple[int, ...] = ()
    notes: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The recipe as a flat JSON-serialisable dict (stored on the card as ``recipe``): ``name``, ``title``,
        ``description``, ``kind``, ``task``, ``budget``, ``config``, ``steps``, ``batch_size``, ``seq_len``,
        ``lr``, ``seed``, ``warmup``, ``weight_decay``, ``eval_lengths``, ``length_curriculum``, ``notes``."""
        r = self.run
        return {"name": self.name, "title": self.title, "description": self.description, "kind": r.kind,
                "task": r.data, "budget": r.params, "config": copy.deepcopy(r.model_overrides), "steps": r.steps,
                "batch_size": r.batch_size, "seq_len": r.seq_len, "lr": r.lr, "seed": r.seed,
                "warmup": r.warmup, "weight_decay": r.weight_decay, "eval_lengths": list(self.eval_lengths),
                "length_curriculum": [list(pair) for pair in r.length_curriculum], "notes": self.notes}


def recipe(kind: str, *, budget: int | None = None, config: dict[str, Any] | None = None,
           length_curriculum: Iterable[tuple[int, int]] = (), **values: Any) -> RunSpec:
    """The :class:`geomlab.training.runs.RunSpec` of a zoo or report recipe: the ``zoo`` preset
    (:data:`geomlab.training.runs.PRESETS`: the budget met within 5%, Tiny Shakespeare, 1500 steps x 16 windows,
    validation every ``steps // 5`` steps on 16,384 targets, ``log_every`` ``min(50, steps)``) with ``values``
    (any :class:`geomlab.training.runs.RunSpec` field: ``data``, ``steps``, ``lr``, ``warmup``, ``eval_every``
    (0: no periodic evaluation), ...) over it.

    ``budget``: target effective parameter count (``config_for_budget``), or ``None`` when ``config`` is
    complete; ``config``: model config keys (fixed for the budget search, or the whole config);
    ``length_curriculum``: ``(seq_len, steps)`` pairs trained first. Source: design choice."""
    return RunSpec.preset("zoo", kind=kind, params=budget, model_overrides=dict(config or {}),
                          length_curriculum=tuple(tuple(pair) for pair in length_curriculum), **values)


#: The converged recipe (docs/results.md): the campaign's full budget for the ~50K and ~100K rows (10,000 steps x 32 x
#: 128 characters, about 41M characters, ~40 epochs; validation every 500 steps; lr tuned per model by the
#: campaign's rule, geomlab.report.campaign). Such an entry is seed 0 of the campaign's row, adopted with
#: ``zoo --rebuild --only NAME --from-run`` (or retrained from scratch by ``--rebuild`` alone).
_CONVERGED = dict(data="corpus:tinyshakespeare", batch_size=32, seq_len=128, seed=0, steps=10_000, eval_every=500,
                  eval_tokens=None)


#: The converged report's section that holds each comparison key's rows (its title in results.md).
_REPORT_SECTIONS = {"ts-100k": "section \"Tiny Shakespeare, ~100K parameters: OSMFormer vs ALiBi Transformer\"",
                    "zoo-ts": "section \"Tiny Shakespeare, the zoo's other models\""}


def _converged_note(row: str, lr: float, seed: int = 0, tuned: bool = True, lr_of: str | None = None) -> str:
    """The card note of an entry adopted from the converged campaign: ``seed`` is the row's seed it holds (the
    seed with the best validation BPC once the row has its three seeds; design choice); ``tuned``: the lr is
    the row's own tuning's choice (else the entry's notes say where it came from; ``lr_of``: the model whose
    tuned lr it borrowed)."""
    which = "seed 0" if seed == 0 else f"seed {seed} (the best validation BPC of the row's three seeds)"
    return (f"Converged recipe: 10,000 steps x 32 x 128 characters (~40 epochs), lr {lr:g}"
            + (" chosen by the campaign's tuning" if tuned else "")
            + f"; {which} of the converged report's {_REPORT_SECTIONS[row]} ({row};"
            + " docs/results/runs/converged/results.md)."
            + (f" The lr is the one tuned for {lr_of}." if lr_of else ""))

#: Grassmann zoo model (design choices): one offset per layer, the paper's six-entry list (1, 2, 4, 8, 12, 16)
#: read as one entry per layer (``offset_schedule="per_layer"``, 6 layers; Zhang, arXiv 2512.19428, the offset
#: lists; docs/grassmann.md), since with every offset in every layer (the public re-runs' reading) the model
#: converged at 2.385 / 2.667 valid / test BPC at ~100K and the same at ~200K: the mean over six offsets of one
#: layer is a single plane, and it does not say which offset each partner came from. ``positions="sinusoidal"``
#: with ``position_shift`` 4,096, so the app can trace any text up to its 2,048-character limit: the paper's
#: learned table (``max_len`` 128) cannot read past 128, and ``positions="none"`` stalled at the converged
#: recipe (2.917 / 3.118, gradient norms in the thousands: equal characters span no plane; docs/grassmann.md).
_GRASSMANN_ZOO = {"positions": "sinusoidal", "position_shift": 4096, "offset_schedule": "per_layer", "n_layers": 6}
_GRASSMANN_NOTES = ("One offset per layer (offset_schedule='per_layer'): layer l pairs each position with the one "
                    "offsets[l] = 1, 2, 4, 8, 12, 16 back, the paper's list read as one entry per layer. With every "
                    "offset in every layer (the public re-runs' reading) the same recipe converged at 2.385 / 2.667 "
                    "valid / test BPC, and at 2.380 / 2.667 with twice the parameters. Sinusoidal positions "
                    "(positions='sinusoidal'), each training window starting at a random position in [0, 4,096] "
                    "(position_shift), so the model reads any length: test BPC 2.489 / 2.469 / 2.464 in windows "
                    "of 128 / 512 / 2,048 characters. Without positions the model stalled at 2.917 / 3.118 valid "
                    "/ test BPC (docs/grassmann.md).")

#: Word-problem recipe: ``rnn_input="pull+token"`` with the pull step initialised at 0, so each update starts
#: as the group product H exp(A_x); readout temperature 5; token generators of std 1 (design choice: with
#: the default pull-only input OSM-RNN learned neither S3 nor S5 here).
_WP_OSM = {"mixing": "linear", "rnn_input": "pull+token", "step": 0.0, "tau": 5.0, "token_init_std": 1.0}
_WP_LENGTHS = (2, 4, 8, 16, 32, 64, 128)
_WP3 = dict(data="word-problem:S3:16", steps=1000, batch_size=32, seq_len=16, lr=1e-2)
#: S5 needs a sequence-length curriculum: trained at full length from random initialisation, neither O(5)
#: nor O(8) got past chance (the loss stayed at ln 120 while the readout temperature shrank toward 0: the
#: prefix products of random token matrices carry no signal to start from). Starting with pairs (length 2)
#: makes the token matrices learn a representation ``M_a M_b ~ M_{ab}`` first (measured: O(5) 0.94 at
#: length 32, O(8) 0.99; design choice).
_WP5 = dict(data="word-problem:S5:32", steps=8000, batch_size=64, seq_len=32, lr=1e-2,
            length_curriculum=((2, 1500), (4, 1500), (8, 1500), (16, 1500)))
_WP5_NOTES = ("Trained with a sequence-length curriculum: 1500 steps each at lengths 2, 4, 8 and 16, then 2000 at "
              "length 32 (without it neither O(d) nor the torus leaves chance on S5).")

#: The zoo. Language models share the converged recipe on Tiny Shakespeare (90/5/5; :data:`_CONVERGED`), each
#: at its own tuned (or stated borrowed) lr, seed 0 unless its notes say otherwise.
ZOO: tuple[ZooEntry, ...] = (
    ZooEntry("osm-rnn-o-tinyshakespeare", "OSM-RNN on O(d), ~100K", "The paper's recurrent orthogonal-state "
             "model: state H_t in O(d), updated by H exp(Gamma(pull(H, M_x))), prototype readout.",
             recipe("osm-rnn", budget=100_000, config={"group": "O", "mixing": "linear"}, lr=3e-3, **_CONVERGED),
             notes=_converged_note("zoo-ts", 3e-3, tuned=False) + " At ~50K (the paper's size, ts-50k) no seed "
             "reached 2.5 test BPC, so the zoo's model is ~100K. It took the lr tuned at ~50K, 0.01, which "
             "overflowed at step 585 of the full budget at this size; the campaign stepped the row down to 0.003."),
    ZooEntry("osmformer-o-linear-tinyshakespeare", "OSMFormer on O(d), linear tangent mixing, ~88K",
             "The paper's headline model: attention and grounding steps on O(d) through exp, with a learnable "
             "linear map on the Lie algebra (Tiny Shakespeare ~100K row).",
             recipe("osmformer", budget=91_000, config={"group": "O", "mixing": "linear"}, lr=1e-2, **_CONVERGED),
             notes=_converged_note("ts-100k", 1e-2)),
    ZooEntry("osmformer-u-tinyshakespeare", "OSMFormer on U(12), 2 layers, ~110K", "The same architecture with "
             "complex unitary states (non-abelian, complex), two layers.",
             recipe("osmformer", config={"group": "U", "mixing": "linear", "d": 12, "n_layers": 2}, lr=1e-2,
                    **_CONVERGED),
             notes=_converged_note("zoo-ts", 1e-2, tuned=False, lr_of="the one-layer U(d) OSMFormer at 91K")
             + " At 91K the linear mixing maps on u(d) (d^4 values each) leave room for one layer at d = 13, "
             "which converged at 2.301 / 2.539 valid / test BPC, above the zoo's 2.5, at the lr its own tuning "
             "chose (0.001 -> 2.722, 0.003 -> 2.508, 0.01 -> 2.400, 0.03 -> 2.431 valid BPC after 2,000 steps). "
             "This model has two layers at d = 12 (111.5K parameters, 27% more than the O(d) OSMFormer's 88.0K) "
             "and trained at that lr: 2.224 / 2.440 valid / test BPC."),
    ZooEntry("osmformer-torus-tinyshakespeare", "OSMFormer on the torus T^128, ~91K", "An abelian control at "
             "the O(d) model's size: diagonal unitary states, 128 angles each, so updates commute and only add "
             "angles.",
             recipe("osmformer", config={"group": "T", "mixing": "linear", "d": 128, "n_layers": 2,
                                         "prototypes": "support"}, lr=1e-2, **_CONVERGED),
             notes=_converged_note("zoo-ts", 1e-2)
             + " Tuning after 2,000 steps: 0.001 -> 2.790, 0.003 -> 2.573, 0.01 -> 2.413, 0.03 -> 2.424 valid BPC. "
             "Valid 2.285 / test 2.476 BPC, 0.067 test BPC behind the O(d) OSMFormer (2.410, 88.0K): the cost of "
             "commuting updates at about equal size (one seed each). Its validation BPC moved by 0.015 over the "
             "last 2,000 steps. The torus model bundled before was 11x smaller than its label (d = 26: 7.9K "
             "effective parameters; the count had taken in prototype entries a diagonal state never reads) and "
             "converged at 2.749 / 2.888. At d = 128 the model runs on the states' diagonals (forward, trace) and "
             "stores its prototypes' diagonals only (prototypes='support')."),
    ZooEntry("cem-t2-tinyshakespeare", "CEM Transformer, T=2 recursion, ~100K", "Causal energy minimisation: "
             "tied attention and tied SwiGLU MLP as gradient steps on energies, 2 steps per layer, shared "
             "diagonal.", recipe("cem", budget=100_000, config={"recursion_steps": 2, "diagonal": "shared"}, lr=1e-2,
                                 **_CONVERGED),
             notes=_converged_note("zoo-ts", 1e-2)),
    ZooEntry("grassmann-tinyshakespeare", "Grassmann flow model, ~100K", "Attention-free layers: pairs of "
             "reduced vectors as 2-planes in Gr(2, r) by Plücker coordinates, gated fusion; six layers, each "
             "pairing a position with the one 1, 2, 4, 8, 12 or 16 back. Sinusoidal positions, trained from "
             "random start positions, so it reads texts of any length.",
             recipe("grassmann", budget=100_000, config=_GRASSMANN_ZOO, lr=1e-2, warmup=0.1, **_CONVERGED),
             notes=_converged_note("zoo-ts", 1e-2) + " " + _GRASSMANN_NOTES),
    ZooEntry("lstm-tinyshakespeare", "LSTM baseline, ~100K", "Character LSTM with one-hot input (the OSM "
             "paper's recurrent baseline).", recipe("lstm", budget=100_000, config={}, lr=3e-2, **_CONVERGED),
             notes=_converged_note("zoo-ts", 3e-2, tuned=False) + " At ~50K (the paper's size, ts-50k) no seed "
             "reached 2.5 test BPC, so the zoo's model is ~100K, at the lr of the ~50K row: its tuning chose 0.1, "
             "which overflowed at step 2,675 of the full budget, and the row stepped down to 0.03."),
    ZooEntry("transformer-alibi-tinyshakespeare", "ALiBi Transformer baseline, ~104K", "Pre-norm decoder with "
             "ALiBi (the OSM paper's Transformer baseline).",
             recipe("transformer", budget=104_000, config={}, lr=1e-2, **{**_CONVERGED, "seed": 1}),
             notes=_converged_note("ts-100k", 1e-2, seed=1)),
    ZooEntry("osm-rnn-o-s3", "OSM-RNN on O(4), S3 word problem", "Tracks the running product of permutations "
             "of 3 points (the smallest non-abelian group): O(4) contains S3's permutation representation and "
             "the update H exp(A_x) is a group product, so the state can follow non-commuting updates.",
             recipe("osm-rnn", config={"group": "O", "d": 4, **_WP_OSM}, **_WP3), eval_lengths=_WP_LENGTHS),
    ZooEntry("osm-rnn-torus-s3", "OSM-RNN on the torus T^4, S3 word problem", "The abelian control: commuting "
             "(diagonal unitary) states cannot represent a non-abelian running product.",
             recipe("osm-rnn", config={"group": "T", "d": 4, **_WP_OSM}, **_WP3), eval_lengths=_WP_LENGTHS),
    ZooEntry("osm-rnn-o-s5", "OSM-RNN on O(5), S5 word problem", "S5 (120 elements, non-solvable) embeds in "
             "SO(5) as sign(p) P_p, so a 5 x 5 orthogonal state can track the running product of "
             "permutations of 5 points.", recipe("osm-rnn", config={"group": "O", "d": 5, **_WP_OSM}, **_WP5),
             eval_lengths=_WP_LENGTHS, notes=_WP5_NOTES),
    ZooEntry("osm-rnn-torus-s5", "OSM-RNN on the torus T^5, S5 word problem", "The abelian control for S5: "
             "commuting states can only follow S5's abelian quotient (the sign), not the running product.",
             recipe("osm-rnn", config={"group": "T", "d": 5, **_WP_OSM}, **_WP5), eval_lengths=_WP_LENGTHS,
             notes=_WP5_NOTES),
)


def entries(only: str | Iterable[str] | None = None) -> list[ZooEntry]:
    """The zoo entries, all or those named in ``only`` (a name, a comma-separated string or a list).

    Raises :class:`ZooError` naming the known entries for an unknown name."""
    if only is None:
        return list(ZOO)
    names = [n.strip().removeprefix("bundled/") for n in (only.split(",") if isinstance(only, str) else only)
             if n.strip()]  # bundled/NAME as in the app and `zoo --list`
    by_name = {e.name: e for e in ZOO}
    if not names:
        raise ZooError(f"no zoo entry named (an empty list); known: {', '.join(by_name)}")
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ZooError(f"unknown zoo {'entry' if len(unknown) == 1 else 'entries'} {', '.join(unknown)}; known: "
                       f"{', '.join(by_name)}")
    return [by_name[n] for n in names]


def scaled(entry: ZooEntry, steps_scale: float) -> ZooEntry:
    """``entry`` with its run's ``steps`` multiplied by ``steps_scale`` (at least 1 step), its length
    curriculum's phases too (each at least 1 step; phases that no longer fit in ``steps`` are dropped), and
    the values :func:`recipe` derives from the steps (``log_every``, ``eval_every``) derived again.
    ``ZooError`` if the scale is not a positive finite number."""
    if not (isinstance(steps_scale, (int, float)) and math.isfinite(steps_scale) and steps_scale > 0):
        raise ZooError(f"steps_scale must be a positive number, got {steps_scale!r}")
    steps = max(1, int(round(entry.run.steps * steps_scale)))
    phases, used = [], 0
    for n, k in entry.run.length_curriculum:
        k = max(1, int(round(k * steps_scale)))
        if used + k > steps:
            break
        phases.append((n, k))
        used += k
    notes = entry.notes
    if steps_scale != 1:
        notes = (f"[Rebuilt with --steps-scale {steps_scale}: steps and curriculum are scaled; step counts quoted "
                 f"below are the unscaled recipe's.] {notes}").strip()
    run = replace(entry.run, steps=steps, length_curriculum=tuple(phases), **runs.step_rules("zoo", steps))
    return replace(entry, run=run, notes=notes)
