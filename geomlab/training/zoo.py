"""The bundled model zoo: one recipe per checkpoint in ``assets/checkpoints``.

Every bundled checkpoint is reproducible from its :class:`ZooEntry`: a name and words for the app, and the
one run spec that trains it (:class:`geomlab.training.runs.RunSpec`, built by :func:`recipe`: the model kind with
either an explicit config or a parameter budget resolved with :func:`geomlab.models.config_for_budget`, the
task ``corpus:NAME`` or ``word-problem:GROUP:LENGTH``, steps, batch, sequence length, learning rate, seed and
length curriculum). ``python -m geomlab zoo --rebuild`` retrains them all from scratch with
:func:`geomlab.training.runs.run` and :func:`geomlab.checkpoints.io.save`, so every number on a card comes from the same
code path as ``python -m geomlab train``.

Each checkpoint's JSON ``card`` holds: ``name``, ``title``, ``description``, ``corpus``, ``split`` (the
split rule), ``task``, ``steps``, ``batch_size``, ``seq_len``, ``lr``, ``seed``, ``params_effective`` /
``params_stored``, ``valid_bpc`` / ``test_bpc`` (language models, full splits, non-overlapping windows of
``seq_len``) or ``valid_accuracy`` / ``test_accuracy`` and ``accuracy_by_length`` (word problem),
``train_time_s``, ``tokens_per_s``, ``device``, ``torch_threads``, ``recipe`` (the entry as one flat dict,
:meth:`ZooEntry.to_dict`), ``notes`` (e.g. "short budget") and ``trained_on`` (date). The optimizer state is
not stored (smaller files); a rebuild reproduces the weights up to floating-point non-determinism of the device.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from geomlab.training import runs
from geomlab.core.locate import BUNDLED_DIR
from geomlab.training.runs import N_EVAL, RunOutcome, RunSpec

#: Where the bundled checkpoints live (in the repository or, installed, in the package: geomlab.core.locate).
ZOO_DIR = BUNDLED_DIR


class ZooError(ValueError):
    """Bad zoo request: an unknown entry name, an invalid scale, a missing checkpoint."""


@dataclass(frozen=True)
class ZooEntry:
    """One bundled checkpoint's recipe: a name and words for the app, and the run that trains it.

    Attributes:
        name: file stem in ``assets/checkpoints`` (``NAME.json`` + ``NAME.safetensors``).
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

#: Grassmann zoo model (design choices): one offset per layer, the paper's six-entry list (1, 2, 4, 8,
#: 12, 16) read as one entry per layer (``offset_schedule="per_layer"``, 6 layers; grassmann.md §2.3 reading A),
#: since with every offset in every layer (the public re-runs' reading) the model converged at 2.385 / 2.667
#: valid / test BPC at ~100K and the same at ~200K: the mean over six offsets of one layer is a single plane,
#: and it does not say which offset each partner came from. ``positions="sinusoidal"`` with ``position_shift``
#: 4,096, so the app can trace any text up to its 2,048-character limit: the paper's learned table
#: (``max_len`` 128) cannot read past 128, and ``positions="none"`` stalled at the converged recipe (2.917 /
#: 3.118, gradient norms in the thousands: equal characters span no plane; docs/grassmann.md).
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


# ----------------------------------------------------------------------------------------------- training
def make_task(spec: str):
    """A :class:`geomlab.data.Task` from a zoo/report task string (:func:`geomlab.data.make_task`; synthetic
    tasks get :data:`geomlab.training.runs.N_EVAL` evaluation sequences)."""
    from geomlab.data.registry import make_task as _make_task

    return _make_task(spec, n_eval=N_EVAL)


def train_and_evaluate(kind: str, task, *, budget: int | None = None, config: dict[str, Any] | None = None,
                       final_eval_tokens: int | None = None, callback: Callable | None = None,
                       progress_bar: bool = False, length_curriculum: Iterable[tuple[int, int]] = (),
                       **values: Any) -> RunOutcome:
    """Build a model of ``kind`` for ``task``, train it and evaluate: :func:`geomlab.training.runs.run` of the
    :func:`recipe` these arguments describe (``values``: ``steps``, ``batch_size``, ``seq_len``, ``lr``,
    ``seed``, ``warmup``, ... over the zoo preset; the budget met within 5%, the model built under
    :func:`geomlab.core.rng.seeded` with ``seed``; ``log_every`` ``min(50, steps)``; no periodic evaluation
    unless ``eval_every`` is given, so ``train_time_s`` counts only training steps).

    ``final_eval_tokens=None`` evaluates the whole valid and test splits; an integer caps both (used by quick
    reports on large corpora; the cap is reported). ``length_curriculum``: ``(seq_len, steps)`` pairs trained
    before the rest at ``seq_len``. Raises ``ValueError`` for a bad config and
    :class:`geomlab.training.trainer.TrainingError` for a diverged run.
    """
    from geomlab.data.registry import task_string

    spec = recipe(kind, budget=budget, config=config, length_curriculum=length_curriculum,
                  **{"data": task_string(task), "eval_every": 0, "final_eval": final_eval_tokens is None, **values})
    return runs.run(spec, task=task, final_eval_tokens=final_eval_tokens, callback=callback,
                    progress_bar=progress_bar)


def accuracy_by_length(model, task, lengths: Iterable[int], split: str = "test",
                       device: str | torch.device = "cpu") -> dict[int, float]:
    """Word problem: accuracy of the running-product label at the *last* position of sequences of each
    length (``{length: accuracy in [0, 1]}``), on the task's fixed evaluation sets. A model that cannot
    track the state falls to about ``1 / |G|`` at long lengths. Source: design choice."""
    out: dict[int, float] = {}
    param = next(model.parameters(), None) if isinstance(model, torch.nn.Module) else None
    if device == "cpu" and param is not None:  # evaluate where the model lives (CUDA after GPU training)
        device = param.device
    for n in lengths:
        acc = task.per_length_accuracy(model, split, length=int(n), device=device)
        out[int(n)] = float(acc[-1])
    return out


# ----------------------------------------------------------------------------------------------- rebuild
def build_entry(entry: ZooEntry, out_dir: str | Path = ZOO_DIR, *, progress_bar: bool = False,
                log: Callable[[str], None] | None = print) -> Path:
    """Train ``entry`` from scratch and write the checkpoint folder ``out_dir/NAME/`` with its card
    (:mod:`geomlab.checkpoints.io`; an existing flat pair ``NAME.json`` + ``NAME.safetensors``, such as a bundled
    checkpoint, is rebuilt flat in place, never converted).

    Returns the folder (or the flat pair's JSON path). Raises ``ValueError`` for a bad recipe, :class:`geomlab.data.DataError` when the
    corpus cannot be found (set ``GEOMLAB_DATA_DIR``), :class:`geomlab.training.trainer.TrainingError` if it diverges.
    """
    r = entry.run
    task = make_task(r.data)
    if log:
        log(f"[zoo] {entry.name}: {r.kind} on {r.data}, {r.steps} steps x {r.batch_size} x {r.seq_len}, "
            f"lr {r.lr}, seed {r.seed}")
    run = runs.run(r, task=task, progress_bar=progress_bar)
    return _write_entry(entry, out_dir, task, run.model, run.metrics, run.history, run.train_config,
                        train_time_s=run.train_time_s, cpu_time_s=run.cpu_time_s, log=log)


#: Training values that change the trained weights (a finished run is adopted only when they all match).
_WEIGHT_KEYS = ("steps", "batch_size", "seq_len", "lr", "seed", "warmup", "weight_decay", "min_lr_ratio",
                "grad_clip", "betas", "length_curriculum")


def adopt_entry(entry: ZooEntry, run_dir: str | Path, out_dir: str | Path = ZOO_DIR, *,
                log: Callable[[str], None] | None = print) -> Path:
    """Write ``entry``'s bundled checkpoint from a finished run instead of training it again (e.g. seed 0 of
    the converged campaign, :mod:`geomlab.report.campaign`, whose recipe the entry states): ``run_dir`` is the
    run's checkpoint folder. The run must be the entry's recipe: the same kind and model config (the budget's
    config, or the fixed keys), task and every training value that changes the weights (:data:`_WEIGHT_KEYS`),
    trained to its last step with the full final evaluation; the card is the one :func:`build_entry` writes
    (training time from the run; no optimizer state). Raises :class:`ZooError` naming the first difference, and
    :class:`geomlab.checkpoints.io.CheckpointError` for an unreadable checkpoint."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.models.budget import resolve_config

    r = entry.run
    if not Path(run_dir).is_dir():
        raise ZooError(f"{run_dir} is not a run's checkpoint folder (e.g. runs/converged/ts-50k/lstm/"
                       "full-10000/lr0.03-wu0.02-seed0/ckpt)")
    c = ckpt.load(run_dir)
    task = make_task(r.data)
    want_cfg = resolve_config(r.kind, task.vocab_size, r.params, r.fixed_config())
    have_cfg = dict(c.model.config)
    diffs = [f"model config {k}: {have_cfg.get(k)!r} (the recipe: {v!r})" for k, v in want_cfg.items()
             if have_cfg.get(k) != v]
    tc, want = dict(c.train_config or {}), r.train_config().to_dict()
    diffs += [f"{k}: {tc.get(k)!r} (the recipe: {want[k]!r})" for k in _WEIGHT_KEYS
              if _plain(tc.get(k)) != _plain(want.get(k))]
    card = c.card or {}
    if (card.get("task") or {}) != task.spec():
        diffs.append(f"task {card.get('corpus')!r} (the recipe: {r.data!r})")
    if card.get("steps") != r.steps or "test_bpc" not in card and "test_accuracy" not in card:
        diffs.append(f"the run stopped at step {card.get('steps')} of {r.steps}, or has no final evaluation")
    changed = [f"{k} at step {ch['step']}" for ch in card.get("resumed_with") or [] for k in ch
               if k in _WEIGHT_KEYS]
    if changed:
        diffs.append(f"it was resumed with other training values ({', '.join(changed)})")
    proto = card.get("eval_protocol") or {}
    if "test_bpc" in card and (proto.get("splits") != "full" or proto.get("stride") not in (None, r.seq_len)):
        diffs.append(f"its final evaluation was not the full splits in windows of {r.seq_len} ({proto})")
    if diffs:
        raise ZooError(f"{Path(run_dir).name} is not {entry.name}'s recipe: " + "; ".join(diffs[:3]))
    metrics = {k: v for k, v in card.items() if k.startswith(("valid_", "test_"))}
    cpu = threads = None
    outcome = Path(run_dir).parent / "outcome.json"  # a campaign run: its CPU seconds over every resumption
    if outcome.is_file():
        done = json.loads(outcome.read_text(encoding="utf-8"))
        cpu, threads = done.get("cpu_s"), done.get("threads")
    from geomlab.training.trainer import TrainConfig

    if log:
        log(f"[zoo] {entry.name}: adopting the finished run {Path(run_dir).as_posix()}")
    return _write_entry(entry, out_dir, task, c.model, metrics, list(c.metrics), TrainConfig.from_dict(tc),
                        train_time_s=float(card.get("train_time_s") or 0.0), cpu_time_s=cpu, log=log,
                        device=card.get("device"), threads=threads)


def _plain(x: Any) -> Any:
    """Tuples as lists (a JSON round trip), for comparing stored and recipe values."""
    return [_plain(v) for v in x] if isinstance(x, (list, tuple)) else x


def _write_entry(entry: ZooEntry, out_dir: str | Path, task, model, metrics: dict[str, Any], history: list,
                 train_config, *, train_time_s: float, cpu_time_s: float | None,
                 log: Callable[[str], None] | None, device: str | None = None,
                 threads: int | None = -1) -> Path:
    """The card and checkpoint of a trained zoo entry (see :func:`build_entry`). ``threads``: torch CPU threads
    of the training (-1: this process's; ``None``: not known, an adopted run that did not record them)."""
    from geomlab.checkpoints import io as ckpt
    from geomlab.models import count_params

    r = entry.run
    is_lm = getattr(task, "kind", "lm") == "lm"
    spec = task.spec()
    tokens = train_config.tokens_through(int(train_config.steps))
    if device is None:
        device = str(train_config.device if train_config.device != "auto"
                     else ("cuda" if torch.cuda.is_available() else "cpu"))
    card: dict[str, Any] = {
        "name": entry.name, "title": entry.title, "description": entry.description, "kind": r.kind,
        "corpus": spec.get("corpus", spec.get("name")), "split": spec.get("split_rule", "generated (seeded)"),
        "task": spec, "steps": r.steps, "batch_size": r.batch_size, "seq_len": r.seq_len,
        "lr": r.lr, "seed": r.seed, "train_time_s": round(train_time_s, 1),
        "tokens_per_s": round(tokens / max(train_time_s, 1e-9), 1),
        "cpu_time_s": None if cpu_time_s is None else round(cpu_time_s, 1), "device": device,
        "torch_threads": torch.get_num_threads() if threads == -1 else threads, "recipe": entry.to_dict(), "notes": entry.notes,
        "trained_on": _dt.date.today().isoformat(), "zoo": True,
    }
    if "group" in model.config:
        card["group"] = model.config["group"]
    for k, v in metrics.items():
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            card[k] = round(float(v), 4) if k != "valid_tokens" and k != "test_tokens" else int(v)
    if is_lm:
        card["eval_protocol"] = {"windows": "non-overlapping", "seq_len": r.seq_len, "splits": "full",
                                 "state": "fresh per window"}
    else:
        card["accuracy_by_length"] = {str(k): round(v, 4) for k, v in
                                      accuracy_by_length(model, task, entry.eval_lengths).items()}
        card["eval_protocol"] = {"metric": "accuracy of the running product", "n_eval": task.n_eval,
                                 "length": task.length}
    card["params_effective"] = count_params(model, "effective")
    card["params_stored"] = count_params(model, "stored")
    stem = Path(out_dir) / entry.name
    path = ckpt.save(stem, model, task.vocab, card, train_config=train_config.to_dict(), metrics=history,
                     layout="auto")
    if log:
        main = (f"valid {card.get('valid_bpc')} / test {card.get('test_bpc')} BPC" if is_lm else
                f"test accuracy {card.get('test_accuracy')}, by length {card.get('accuracy_by_length')}")
        log(f"[zoo] {entry.name}: {card.get('params_effective', '?')} params, {main}, "
            f"{train_time_s:.0f} s, {card['tokens_per_s']:.0f} tok/s -> {path}")
    return path


def rebuild(only: str | Iterable[str] | None = None, steps_scale: float = 1.0, out_dir: str | Path = ZOO_DIR,
            *, progress_bar: bool = False, log: Callable[[str], None] | None = print) -> list[Path]:
    """Retrain the zoo (or the entries in ``only``) from scratch into ``out_dir``; returns the checkpoint paths.

    ``steps_scale`` multiplies every entry's steps (e.g. 0.01 for a smoke run; the card records the steps
    actually used). Raises :class:`ZooError` for unknown names or a bad scale."""
    chosen = [scaled(e, steps_scale) for e in entries(only)]
    return [build_entry(e, out_dir, progress_bar=progress_bar, log=log) for e in chosen]


# ----------------------------------------------------------------------------------------------- listing
def read_cards(directory: str | Path = ZOO_DIR) -> list[dict[str, Any]]:
    """The cards of every checkpoint in ``directory``, flat pairs (``NAME.json``) and folders (``NAME/``
    holding ``geomlab.json``), sorted by name, each with ``file`` (the JSON's or the folder's name) and
    ``model_config`` added. Unreadable ones are reported as a card with an ``error`` key."""
    from geomlab.checkpoints import io as ckpt

    cards = []
    found = list(Path(directory).glob("*.json")) + [p.parent for p in Path(directory).glob(f"*/{ckpt.META_FILE}")]
    for p in sorted(found, key=lambda q: q.name.removesuffix(".json")):
        try:
            meta = ckpt.read_meta(p)
        except ValueError as exc:
            cards.append({"file": p.name, "error": str(exc)})
            continue
        card = dict(meta.get("card") or {})
        card["file"] = p.name
        card["model_config"] = meta.get("model_config")
        cards.append(card)
    return cards


def card_name(card: dict[str, Any]) -> str:
    """A card's entry name (from :func:`read_cards`): its ``name``, else its file's or folder's name without
    ``.json``."""
    return card.get("name") or Path(card["file"]).name.removesuffix(".json")


def format_card(card: dict[str, Any]) -> str:
    """A few human lines for one card (used by ``python -m geomlab zoo --list``)."""
    if "error" in card:
        return f"{card['file']}: unreadable ({card['error']})"
    name = card_name(card)
    cfg = card.get("model_config") or {}
    lines = [f"{name}: {card.get('title', cfg.get('kind', '?'))}"]
    params = card.get("params_effective")
    lines.append(f"  kind {cfg.get('kind', '?')}, params {params} effective / {card.get('params_stored')} stored; "
                 f"corpus {card.get('corpus')}, split: {card.get('split', '?')}")
    cur = (card.get("recipe") or {}).get("length_curriculum") or []
    cur_s = (f" (the first {sum(k for _, k in cur)} steps a length curriculum: "
             + ", ".join(f"{k} at length {n}" for n, k in cur) + ")" if cur else "")
    lines.append(f"  {card.get('steps')} steps x batch {card.get('batch_size')} x seq {card.get('seq_len')}{cur_s}, "
                 f"lr {card.get('lr')}, seed {card.get('seed')}; {card.get('train_time_s')} s on "
                 f"{card.get('device')} ({card.get('torch_threads', '?')} thread"
                 f"{'' if card.get('torch_threads') == 1 else 's'})")
    if card.get("valid_bpc") is not None:
        lines.append(f"  valid {card['valid_bpc']:.3f} / test {card.get('test_bpc', float('nan')):.3f} BPC")
    if card.get("valid_accuracy") is not None:
        lines.append(f"  valid {card['valid_accuracy']:.3f} / test {card.get('test_accuracy', float('nan')):.3f} "
                     "accuracy (all positions, training length)")
    if card.get("accuracy_by_length"):
        acc = ", ".join(f"L={k}: {v:.2f}" for k, v in card["accuracy_by_length"].items())
        lines.append(f"  final-position accuracy by length: {acc}")
    keys = {k: v for k, v in cfg.items() if k not in ("kind", "vocab_size")}
    lines.append(f"  config {json.dumps(keys, sort_keys=True)}")
    if card.get("notes"):
        lines.append(f"  note: {card['notes']}")
    return "\n".join(lines)


__all__ = [
    "ZOO", "ZOO_DIR", "ZooEntry", "ZooError", "RunOutcome", "entries", "scaled", "recipe",
    "make_task",
    "train_and_evaluate", "accuracy_by_length", "build_entry", "adopt_entry", "rebuild", "read_cards", "format_card",
]
