"""The converged report as a campaign of resumable runs: the protocol (:class:`Campaign`: steps per comparison,
the tuning budget and grids, seeds) and the plan (:func:`jobs`: what is left to train, in order, given what the
store holds).

The campaign's other parts: :mod:`geomlab.report.store` (:class:`~geomlab.report.store.RunStore`, one resumable
checkpoint folder per run and its outcome), :mod:`geomlab.report.worker` (:func:`~geomlab.report.worker.run_job`:
one run, holding its lock), :mod:`geomlab.report.dispatch` (the runs through submitit, a few in flight at a time)
and :mod:`geomlab.report.results` (:func:`~geomlab.report.results.collect`: the results dict of everything
finished so far, in the shape :func:`geomlab.report.render.render_markdown` reads, plus the tuning tables, the
learning curves, the comparison at equal training time and whether each curve still improved;
:func:`~geomlab.report.results.restore`). :mod:`geomlab.report.plan` declares the fair campaign with the same
mechanism.

Hours of CPU per model on a laptop: the campaign runs in the background (``geomlab report --converged --store
DIR --workers 2 --threads 1``), stopped and started again at will (a run resumes from its last checkpoint,
``eval_every`` steps back at most), across sessions and machines sharing the folder; ``--collect`` writes the
report of what finished, with every unfinished row marked; on a machine without the old store, ``--restore``
rebuilds it from the committed report's results.

Tuning rule (one for every model): each arm trains its comparison's short budget (:attr:`Campaign.tune_steps`)
at every (lr, warm-up) of the grid with seed 0; the best validation BPC wins; when the best lr is the smallest
or largest tried, the next rung of the lr ladder beyond it (:attr:`Campaign.lr_per_decade`) is added (at the
winning warm-up), up to :attr:`Campaign.max_widen` times per side, so the optimum ends inside the searched range
or the report says it could not; then the regularisation settings at the winner (:func:`reg_state`). Then every
seed trains the full budget at the winner (:func:`seeds_planned`: more seeds under a seed rule). Source: design
choice."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Iterator

from geomlab.report.protocol import COMPARISONS, Arm, Comparison, ReportError
from geomlab.report.store import Job, RunStore

#: The bundled language models no comparison trains as they are, one seed each: the zoo's recipes at the
#: converged budget (the zoo's OSMFormer O(d) and Transformer are the seed-0 runs of ``ts-100k``). The recurrent
#: pair trains at ~100K like the rest of the zoo (at ~50K, ``ts-50k``, no seed's test BPC reached the zoo's 2.5).
#: Three Grassmann readings train beside each other: no position table (stalls near 3.05 valid BPC: equal
#: characters span no plane in layer 0; docs/grassmann.md), shifted sinusoidal positions (reads any length the
#: app allows; also at ~200K and with offsets up to 64, both at the ~100K model's lr) and one offset per layer
#: (the paper's six-entry list for six layers). U(d) at 91K has one layer (d = 13: its linear mixing maps hold
#: d^4 values); a 2-layer U(d) (d = 12, 111.5K) trains at its lr. The torus OSMFormer at d = 26 with 2 layers
#: has 7.9K effective parameters (the readout of a diagonal state never reads the prototypes' off-diagonal
#: entries); its size-matched control is d = 128 with 2 layers, 91.0K effective, trained on the states' diagonals
#: with prototypes stored only on the diagonal (``prototypes="support"``: free prototypes would store 2.2M
#: values). :attr:`Campaign.lr_from` lists the borrowed learning rates.
ZOO_TS = Comparison(
    "zoo-ts", "Tiny Shakespeare, the zoo's other models (one seed each; not a comparison)", "tinyshakespeare",
    (Arm("OSM-RNN O(d), ~100K", "osm-rnn", 100_000, {"group": "O", "mixing": "linear"}),
     Arm("LSTM, ~100K", "lstm", 100_000, {}),
     Arm("OSMFormer torus T^d, linear mixing", "osmformer", 0, {"group": "T", "mixing": "linear", "d": 26,
                                                                "n_layers": 2}),
     Arm("CEM T=2, shared diagonal, ~100K", "cem", 100_000, {"recursion_steps": 2, "diagonal": "shared"}),
     Arm("Grassmann, no position table, ~100K", "grassmann", 100_000, {"positions": "none"}),
     Arm("Grassmann, shifted sinusoidal positions, ~100K", "grassmann", 100_000,
         {"positions": "sinusoidal", "position_shift": 4096}),
     Arm("Grassmann, shifted sinusoidal positions, ~200K", "grassmann", 200_000,
         {"positions": "sinusoidal", "position_shift": 4096}),
     Arm("Grassmann, shifted sinusoidal positions, offsets to 64, ~100K", "grassmann", 100_000,
         {"positions": "sinusoidal", "position_shift": 4096, "offsets": [1, 2, 4, 8, 16, 32, 64]}),
     Arm("Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers, ~100K", "grassmann", 100_000,
         {"positions": "sinusoidal", "position_shift": 4096, "offset_schedule": "per_layer", "n_layers": 6}),
     Arm("OSMFormer U(d), linear mixing", "osmformer", 91_000, {"group": "U", "mixing": "linear"}),
     Arm("OSMFormer U(d), linear mixing, 2 layers, ~110K", "osmformer", 0,
         {"group": "U", "mixing": "linear", "d": 12, "n_layers": 2}),
     Arm("OSMFormer torus T^128, linear mixing, ~91K", "osmformer", 0,
         {"group": "T", "mixing": "linear", "d": 128, "n_layers": 2, "prototypes": "support"})),
    note="The bundled checkpoints' recipes: each model at its zoo budget (the first torus OSMFormer at d = 26, "
         "7.9K effective parameters: the size bundled before its count was corrected; then d = 128, 91.0K); the "
         "recurrent pair takes "
         "the lr tuned for the same model at ~50K (ts-50k), the ~200K Grassmann model and the one with "
         "offsets to 64 the ~100K one's, the 2-layer U(d) the 91K one's, the others are tuned by the campaign's "
         "rule.")
_ALL = {**COMPARISONS, ZOO_TS.key: ZOO_TS}


@dataclass(frozen=True)
class Campaign:
    """The converged protocol.

    steps: full training steps per comparison key (``(key, steps)`` pairs; the order is the campaign's
    order: the cheap ~50K and Grassmann rows, then the headline ~100K comparison, then the rest). tune_fraction: the tuning budget as a fraction of the full steps.
    batch_size, seq_len: as the report's protocol. seeds: the seeds of every row. lr_grid: the first lrs
    tried. warmups: warm-up fractions tried per comparison or per arm (``(key, fractions)`` or
    ``("key / arm label", fractions)``; default :attr:`warmup`): "where it matters" (the post-norm Grassmann
    blocks, docs/grassmann.md: on WikiText-2 a 10% warm-up gave the best lr a lower validation BPC).
    max_widen: half-decades added per side at most. eval_every: validation and checkpoint period of every run
    (the learning curves). lr_bounds: no lr is tried outside these. corpus_override: a text file read instead
    of every corpus (tests). seed_counts: comparisons
    trained on fewer seeds (``(key, n)``: the first n of :attr:`seeds`; the zoo's extra models). late:
    ``(comparison key, arm label)`` of arms whose runs wait until every other run of the campaign is taken,
    in this order (arm label ``"*"``: every arm of the comparison): the identity-mixing ablation (d = 31 at
    91K, about 12.6 CPU hours), then the scaling points, which the issue asks for "as far as time allows"
    (about 8.7 CPU hours; design choice). lr_from:
    ``((comparison key, arm label), (comparison key, arm label))``: arms that are not tuned but train at the
    (lr, warm-up) the second arm's seeds train at (the same model, or the nearest one, tuned elsewhere in the
    campaign; the arm waits until that is decided). lr_per_decade: the lr ladder the grid widens on (2:
    half-decades, 3: thirds of a decade, :func:`ladder`). warmup_grid: the warm-ups of every arm without an
    entry in :attr:`warmups` (empty: :attr:`warmup` alone). regs: the regularisation settings, ``(weight decay,
    dropout)`` pairs, tried at each arm's winning (lr, warm-up) (:func:`reg_state`; a dropout above 0 only for a
    model whose config has a ``dropout`` key). arm_steps: ``((comparison key, arm label), steps)``: arms that
    train another number of steps than their comparison (the equal-compute arms). seed_rule: ``(half-width,
    most seeds)``: seeds are added to a comparison, one at a time, until every arm's seed-paired test and
    valid gap to the baseline has a 95% interval that excludes zero or a half-width under that BPC, up
    to most seeds (:func:`seeds_planned`). extra: comparisons of this campaign that are not the report's
    (:data:`geomlab.report.protocol.COMPARISONS`) or the zoo's."""

    name: str = "converged"
    steps: tuple[tuple[str, int], ...] = (("ts-50k", 10_000), ("grassmann-200k", 5_000), ("ts-100k", 10_000),
                                          ("zoo-ts", 10_000), ("cem-200k", 5_000), ("ptb-100k", 10_000),
                                          ("ts-scaling", 5_000))
    tune_fraction: float = 0.2
    batch_size: int = 32
    seq_len: int = 128
    seeds: tuple[int, ...] = (0, 1, 2)
    lr_grid: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2)
    warmup: float = 0.02
    warmups: tuple[tuple[str, tuple[float, ...]], ...] = (
        ("grassmann-200k", (0.02, 0.1)), ("zoo-ts / Grassmann, no position table, ~100K", (0.02, 0.1)),
        ("zoo-ts / Grassmann, shifted sinusoidal positions, ~100K", (0.02, 0.1)),
        ("zoo-ts / Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers, ~100K", (0.02, 0.1)))
    max_widen: int = 2
    eval_every: int = 500
    lr_bounds: tuple[float, float] = (1e-5, 0.5)
    corpus_override: str | None = None
    seed_counts: tuple[tuple[str, int], ...] = (("zoo-ts", 1),)
    late: tuple[tuple[str, str], ...] = (("ts-100k", "OSMFormer O(d), identity mixing"), ("ts-scaling", "*"))
    lr_per_decade: int = 2
    warmup_grid: tuple[float, ...] = ()
    regs: tuple[tuple[float, float], ...] = ((0.0, 0.0),)
    arm_steps: tuple[tuple[tuple[str, str], int], ...] = ()
    seed_rule: tuple[float, int] | None = None
    extra: tuple[Comparison, ...] = ()
    lr_from: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
        (("zoo-ts", "OSM-RNN O(d), ~100K"), ("ts-50k", "OSM-RNN O(d)")),
        (("zoo-ts", "LSTM, ~100K"), ("ts-50k", "LSTM")),
        (("zoo-ts", "Grassmann, shifted sinusoidal positions, ~200K"),
         ("zoo-ts", "Grassmann, shifted sinusoidal positions, ~100K")),
        (("zoo-ts", "Grassmann, shifted sinusoidal positions, offsets to 64, ~100K"),
         ("zoo-ts", "Grassmann, shifted sinusoidal positions, ~100K")),
        (("zoo-ts", "OSMFormer U(d), linear mixing, 2 layers, ~110K"), ("zoo-ts", "OSMFormer U(d), linear mixing")))

    def comparisons(self, only: tuple[str, ...] | None = None) -> list[Comparison]:
        """The comparisons in campaign order (``only``: keys kept). :class:`ReportError` for an unknown key."""
        keys = [k for k, _ in self.steps]
        bad = [k for k in (only or ()) if k not in keys]
        if bad:
            raise ReportError(f"unknown comparisons {bad}; the {self.name} campaign has {', '.join(keys)}")
        known = self.known()
        return [known[k] for k in keys if not only or k in only]

    def known(self) -> dict[str, Comparison]:
        """Every comparison this campaign can name, by key (the report's, the zoo's and :attr:`extra`)."""
        return {**_ALL, **{c.key: c for c in self.extra}}

    def seeds_for(self, key: str) -> tuple[int, ...]:
        return self.seeds[:dict(self.seed_counts).get(key, len(self.seeds))]

    def full_steps(self, key: str, label: str | None = None) -> int:
        """The full training steps of arm ``label`` of comparison ``key`` (:attr:`arm_steps`, else the
        comparison's)."""
        return dict(self.arm_steps).get((key, label), dict(self.steps)[key])

    def borrowed(self, comp: Comparison, arm: Arm) -> tuple[Comparison, Arm] | None:
        """The (comparison, arm) whose chosen lr ``arm`` trains at (:attr:`lr_from`), or ``None`` when it is
        tuned itself. :class:`ReportError` when the source is not in the campaign."""
        src = dict(self.lr_from).get((comp.key, arm.label))
        if src is None:
            return None
        sc = self.known().get(src[0]) if src[0] in dict(self.steps) else None
        sa = next((a for a in (sc.arms if sc else ()) if a.label == src[1]), None)
        if sa is None:
            raise ReportError(f"{comp.key} / {arm.label}: its lr comes from {src}, which is not an arm of the campaign")
        return sc, sa

    def tune_steps(self, key: str, label: str | None = None) -> int:
        return max(1, int(round(self.full_steps(key, label) * self.tune_fraction)))

    def warmups_for(self, key: str, label: str | None = None) -> tuple[float, ...]:
        """The warm-up fractions the tuning of arm ``label`` of comparison ``key`` tries: its own entry
        (``"key / label"``), else its comparison's, else :attr:`warmup` alone."""
        given = dict(self.warmups)
        return given.get(f"{key} / {label}", given.get(key, self.warmup_grid or (self.warmup,)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "steps": dict(self.steps), "tune_fraction": self.tune_fraction,
                "batch_size": self.batch_size, "seq_len": self.seq_len, "seeds": list(self.seeds),
                "lr_grid": list(self.lr_grid), "warmup": self.warmup,
                "warmups": {k: list(v) for k, v in self.warmups}, "max_widen": self.max_widen,
                "eval_every": self.eval_every, "lr_bounds": list(self.lr_bounds),
                "seed_counts": dict(self.seed_counts),
                "lr_from": {f"{c} / {a}": f"{sc} / {sa}" for (c, a), (sc, sa) in self.lr_from},
                "corpus_override": self.corpus_override, "lr_per_decade": self.lr_per_decade,
                "warmup_grid": list(self.warmup_grid), "regs": [list(r) for r in self.regs],
                "arm_steps": {f"{c} / {a}": n for (c, a), n in self.arm_steps},
                "seed_rule": list(self.seed_rule) if self.seed_rule else None}

    def task_string(self, comp: Comparison) -> str:
        return self.corpus_override or f"corpus:{comp.corpus}"


CONVERGED = Campaign()


def ladder(lr: float, direction: int, per_decade: int = 2) -> float:
    """The next lr of the ladder of ``per_decade`` steps per decade (10^(k / per_decade)) below (``direction``
    -1) or above (+1) ``lr``, rounded to one significant figure for half-decades (1, 3, 10, 30, ...) and to two
    otherwise (thirds: 1, 2.2, 4.6, 10, ...). Source: design choice (the report's grids are on these ladders)."""
    k = round(per_decade * math.log10(lr)) + (1 if direction > 0 else -1)
    x = 10 ** (k / per_decade)
    return float(f"{x:.0e}" if per_decade == 2 else f"{x:.1e}")


def half_decade(lr: float, direction: int) -> float:
    """The next lr of the half-decade ladder (1, 3, 10, 30, ... x 10^k) below (``direction`` -1) or above (+1)
    ``lr``: ``half_decade(1e-3, -1) == 3e-4``, ``half_decade(3e-2, 1) == 0.1`` (:func:`ladder`)."""
    return ladder(lr, direction, 2)


# ------------------------------------------------------------------------------------------ the plan
def _best(rows: list[tuple[float, float, float | None]]) -> tuple[float, float] | None:
    done = [(v, lr, wu) for lr, wu, v in rows if v is not None and math.isfinite(v)]
    return (min(done)[1], min(done)[2]) if done else None


def tuning_state(campaign: Campaign, store: RunStore, comp: Comparison, arm: Arm
                 ) -> tuple[list[Job], list[tuple[float, float, float | None]], tuple[float, float] | None, str]:
    """The tuning of one arm as far as the store holds it: ``(pending jobs, [(lr, warm-up, valid BPC or None
    when diverged)], winner (lr, warm-up) or None, note)``. The winner is set only when the grid (widened where
    the best lr sat on an edge) is finished; ``note`` says when the optimum stayed on an edge."""
    from geomlab.training.sweep import Dimension

    src = campaign.borrowed(comp, arm)
    if src is not None:  # not tuned: the source arm's choice, once its tuning (and full choice) is decided
        _, _, best, _ = tuning_state(campaign, store, *src)
        if best is None:
            return [], [], None, f"waits for the lr of {src[0].key} / {src[1].label}"
        return [], [], full_choice(campaign, store, *src, best)[0], f"lr of {src[0].key} / {src[1].label}"
    steps = campaign.tune_steps(comp.key, arm.label)
    seed = campaign.seeds[0]
    lrs = list(campaign.lr_grid)
    wus = campaign.warmups_for(comp.key, arm.label)
    extra: list[tuple[float, float]] = []
    widened = {-1: 0, 1: 0}
    while True:
        grid = [(lr, wu) for lr in lrs for wu in wus] + extra
        jobs = [Job(comp, arm, "tune", lr, wu, seed, steps) for lr, wu in grid]
        results = []
        pending = []
        for j in jobs:
            o = store.outcome(j)
            if o is None:
                pending.append(j)
            else:
                results.append((j.lr, j.warmup, (o.get("metrics") or {}).get("valid_bpc")
                                if o.get("status") == "done" else None))
        if pending:
            return pending, results, None, ""
        best = _best(results)
        if best is None:
            return [], results, None, "every learning rate diverged"
        tried = sorted({lr for lr, _, _ in results})
        edge = Dimension("lr", "choice", choices=tuple(tried)).edge(best[0])  # the sweep tool's edge rule
        side = {"low": -1, "high": 1}.get(edge, 0)
        if len(tried) == 1:  # one lr has no edge of its own: look below it first
            side = -1 if widened[-1] < campaign.max_widen else 1
        if side == 0:
            return [], results, best, ""
        new = ladder(best[0], side, campaign.lr_per_decade)
        lo, hi = campaign.lr_bounds
        if widened[side] >= campaign.max_widen or not lo <= new <= hi:
            return [], results, best, (f"the best lr {best[0]:g} is the {'smallest' if side < 0 else 'largest'} "
                                       f"tried (the grid was widened {widened[side]} time(s) on that side)")
        widened[side] += 1
        extra.append((new, best[1]))


def full_choice(campaign: Campaign, store: RunStore, comp: Comparison, arm: Arm,
                best: tuple[float, float], reg: tuple[float, float] = (0.0, 0.0)
                ) -> tuple[tuple[float, float], list[str]]:
    """The (lr, warm-up) the full-budget seeds train at: the tuning's winner, stepped down one rung of the
    campaign's lr ladder when a seed diverged there (a tuning budget can hide a divergence that the longer peak
    of the full budget meets), at most :attr:`Campaign.max_widen` times; every seed of a row trains at the same
    lr. A seed the seed rule added (:func:`seeds_planned`) counts like the first ones. Returns it and one note
    per step down."""
    lr, wu = best
    notes = []
    seeds = campaign.seeds_for(comp.key)
    if campaign.seed_rule is not None:  # every seed the rule may add (one not trained yet has no outcome)
        seeds = (*seeds, *range(max(seeds) + 1, max(seeds) + 1 + campaign.seed_rule[1] - len(seeds)))
    def failed_at(lr: float) -> list[tuple[int, str]]:
        steps = campaign.full_steps(comp.key, arm.label)
        outs = [(seed, store.outcome(Job(comp, arm, "full", lr, wu, seed, steps, reg))) for seed in seeds]
        return [(seed, o.get("error", "")) for seed, o in outs if o is not None and o.get("status") == "failed"]

    def where(seed: int, error: str) -> str:
        step = re.search(r"step (\d+)", error)
        return f"(seed {seed}" + (f", step {int(step.group(1)):,}" if step else "") + ")"

    for _ in range(campaign.max_widen):
        failed = failed_at(lr)
        if not failed:
            break
        new = ladder(lr, -1, campaign.lr_per_decade)
        notes.append(f"lr {lr:g} diverged at the full budget {where(*failed[0])}: the seeds train at {new:g}")
        lr = new
    else:  # the step-downs are spent: a seed still diverging there is said, and has no value
        notes += [f"lr {lr:g} diverged at the full budget {where(seed, error)}: no step-down left, the row is "
                  "read on the seeds that finished" for seed, error in failed_at(lr)]
    return (lr, wu), notes


def takes_dropout(kind: str) -> bool:
    """Whether models of ``kind`` have a ``dropout`` config key (the regularisation grid's dropout applies)."""
    from geomlab.models import model_class

    return "dropout" in model_class(kind).default_config()


def reg_state(campaign: Campaign, store: RunStore, comp: Comparison, arm: Arm, best: tuple[float, float]
              ) -> tuple[list[Job], list[tuple[tuple[float, float], float | None]], tuple[float, float] | None]:
    """The regularisation of one arm, tuned after its (lr, warm-up) ``best`` (one rule for every model): each
    setting of :attr:`Campaign.regs` that applies to the model (dropout only where the config has it) trains
    the tuning budget at ``best`` with seed 0; the lowest validation BPC wins (the unregularised run is the
    lr tuning's own). Returns ``(pending jobs, [(setting, valid BPC or None)], winner or None while pending)``;
    an arm that borrows its lr borrows its regularisation too. Source: design choice."""
    src = campaign.borrowed(comp, arm)
    if src is not None:
        return [], [], reg_state(campaign, store, *src, best)[2]
    steps = campaign.tune_steps(comp.key, arm.label)
    regs = [r for r in campaign.regs if r[1] == 0 or takes_dropout(arm.kind)]
    if (0.0, 0.0) not in regs:
        regs.insert(0, (0.0, 0.0))
    pending, results = [], []
    for r in regs:
        o = store.outcome(Job(comp, arm, "tune", best[0], best[1], campaign.seeds[0], steps, r))
        if o is None:
            pending.append(Job(comp, arm, "tune", best[0], best[1], campaign.seeds[0], steps, r))
        else:
            results.append((r, (o.get("metrics") or {}).get("valid_bpc") if o.get("status") == "done" else None))
    if pending:
        return pending, results, None
    done = [(v, r) for r, v in results if v is not None and math.isfinite(v)]
    return [], results, (min(done)[1] if done else (0.0, 0.0))


def decided(campaign: Campaign, store: RunStore, comp: Comparison, arm: Arm
            ) -> tuple[list[Job], tuple[float, float, tuple[float, float]] | None]:
    """The tuning jobs still pending for ``arm`` and, once tuned, the (lr, warm-up, regularisation) its seeds
    train at (:func:`tuning_state`, :func:`reg_state`, :func:`full_choice`)."""
    pending, _, best, _ = tuning_state(campaign, store, comp, arm)
    if best is None:
        return pending, None
    pending, _, reg = reg_state(campaign, store, comp, arm, best)
    if reg is None:
        return pending, None
    (lr, wu), _ = full_choice(campaign, store, comp, arm, best, reg)
    return [], (lr, wu, reg)


def _gaps_settled(campaign: Campaign, store: RunStore, comp: Comparison, seeds: tuple[int, ...]) -> bool | None:
    """Whether every arm's seed-paired test and valid gap to the baseline over ``seeds`` is settled under
    :attr:`Campaign.seed_rule` (``None`` while a run of those seeds is missing or an arm is not tuned). A seed
    that diverged at the row's final lr (its step-downs spent) has no value and pairs with nothing."""
    from geomlab.report.aggregation import ci95, mean

    base = next((a for a in comp.arms if a.baseline), None)
    values: dict[str, dict[str, dict[int, float]]] = {}
    for arm in comp.arms:
        _, choice = decided(campaign, store, comp, arm)
        if choice is None:
            return None
        lr, wu, reg = choice
        got: dict[str, dict[int, float]] = {"valid_bpc": {}, "test_bpc": {}}
        for seed in seeds:
            o = store.outcome(Job(comp, arm, "full", lr, wu, seed, campaign.full_steps(comp.key, arm.label), reg))
            if o is None:
                return None
            if o.get("status") != "done":
                continue
            for k in got:
                got[k][seed] = float(o["metrics"][k])
        values[arm.label] = got
    half = campaign.seed_rule[0]
    for arm in comp.arms:
        if arm is base:
            continue
        for k in ("valid_bpc", "test_bpc"):
            mine, theirs = values[arm.label][k], values[base.label][k]
            d = [mine[s] - theirs[s] for s in seeds if s in mine and s in theirs]
            m, h = mean(d), ci95(d)
            if h is None or not (abs(m) > h or h < half):
                return False
    return True


def seeds_planned(campaign: Campaign, store: RunStore, comp: Comparison) -> tuple[int, ...]:
    """The seeds comparison ``comp`` trains: :meth:`Campaign.seeds_for`, and under :attr:`Campaign.seed_rule`
    one more (the next integer) each time every arm finished the seeds so far and some gap is not yet settled
    (:func:`_gaps_settled`), up to the rule's most seeds. Source: the plan of docs/results.md (design choice)."""
    seeds = campaign.seeds_for(comp.key)
    if campaign.seed_rule is None or not any(a.baseline for a in comp.arms):
        return seeds
    while len(seeds) < campaign.seed_rule[1] and _gaps_settled(campaign, store, comp, seeds) is False:
        seeds = (*seeds, max(seeds) + 1)
    return seeds


def jobs(campaign: Campaign, store: RunStore, only: tuple[str, ...] | None = None) -> Iterator[Job]:
    """The jobs not finished yet whose inputs are ready, in campaign order (the :attr:`Campaign.late` arms
    last, in their order): per comparison, every arm's tuning runs (lr and warm-up, then regularisation), then
    the full-budget runs seed by seed (seed 0 of every arm whose tuning is decided, then seed 1, ...), so each
    comparison has a first paired seed early. A comparison of one seed (the zoo's models, each on its own:
    nothing to pair) puts the full run of every arm whose lr is already decided (e.g. borrowed,
    :attr:`Campaign.lr_from`) before the other arms' tuning runs, so its first models finish early (design
    choice)."""
    def is_late(c: Comparison, a: Arm, entry: tuple[str, str]) -> bool:
        return c.key == entry[0] and entry[1] in ("*", a.label)

    comps = campaign.comparisons(only)
    groups = ([(c, [a for a in c.arms if not any(is_late(c, a, e) for e in campaign.late)]) for c in comps]
              + [(c, [a for a in c.arms if is_late(c, a, e)]) for e in campaign.late for c in comps if c.key == e[0]])
    for comp, arms in groups:
        chosen, tuning = [], []
        for arm in arms:
            pending, choice = decided(campaign, store, comp, arm)
            tuning += pending
            if choice is not None:
                chosen.append((arm, choice))
        seeds = seeds_planned(campaign, store, comp)
        full = []
        for seed in seeds:
            for arm, (lr, wu, reg) in chosen:
                j = Job(comp, arm, "full", lr, wu, seed, campaign.full_steps(comp.key, arm.label), reg)
                if store.outcome(j) is None:
                    full.append(j)
        yield from (full + tuning if len(seeds) == 1 else tuning + full)


def blocked(campaign: Campaign, store: RunStore, only: tuple[str, ...] | None = None) -> bool:
    """Whether arms wait on tuning runs still to finish (so a worker with nothing to take may wait for them)."""
    return any(decided(campaign, store, c, a)[0] for c in campaign.comparisons(only) for a in c.arms)
