"""The fair campaign, declared before its runs (:data:`FAIR`): what the converged campaign left open, as a
:class:`~geomlab.report.campaign.Campaign` of blocks (one comparison each), and its cost (:func:`estimate`,
printed by ``geomlab report --campaign fair --dry-run``).

The rule, the same for every model and baseline:

* **Tuning**: lr on a third-of-a-decade ladder (2.2e-3, 4.6e-3, 1e-2, 2.2e-2, widened by a third of a decade up
  to twice per side, at the best warm-up, while the best lr sits on an edge) x warm-up 2% and 10%, at 20% of the arm's own budget,
  seed 0; then, at the winner, regularisation: AdamW weight decay 0, 0.01, 0.1 x dropout 0, 0.1 (decay on each
  model's weight matrices but its ``no_weight_decay``: the Grassmann models' embeddings, the OSM models' mixing
  maps and positions; the OSM models' token and prototype tables decay; dropout only where the model has it:
  Transformer, LSTM (on its input and output) and both Grassmann kinds); the best validation BPC wins; a
  regularisation run that diverges loses.
* **Seeds**: 0, 1, 2, then one more at a time until every gap (test and validation) to the baseline has a
  seed-paired 95% interval that excludes zero or has a half-width under 0.02 BPC, at most 8 seeds. The intervals
  are Student-t intervals over the seeds as they stand, not corrected for this sequential stopping.
* **Equal compute**: each model a paper's claim is read on against its baseline (the OSMFormer and the OSM-RNN
  against theirs, both CEM models, both Grassmann readings; not the ablations, controls and scaling rows,
  which the report reads at equal steps) also trains its own full schedule (warm-up, cosine decay, tuning)
  sized to the baseline's budget when it costs more per step, once in CPU seconds and once in FLOPs
  (``SIZING``: CPU seconds per step measured by the converged campaign on one 2-core machine, one thread
  per run; FLOPs per step counted by ``geomlab.report.flops``, batch 32 x 128); where the
  baseline is the costlier one by a measure (the attention twin in FLOPs), the baseline gets the shortened
  schedule. The equal-step rows stay: the report gives both.
* **Controls**: the Grassmann comparison gains depth-matched (6-layer) and pre-norm attention twins; the
  ~200K and ~500K OSMFormers keep the ~100K model's depth (3 layers; the budget search gave the ~200K one a
  single layer); CEM trains 10,000 steps like the other comparisons.
* **Divergence** (made precise after the first runs, and applied to every run since): a run diverges when its
  loss, a gradient or a weight goes non-finite or its gradient norm passes 1e6 (three runs had grown theirs
  past 1e9 and, clipped, ended near-uniform at 5.2-5.8 valid BPC, read as finished; they trained again); a
  seed that diverges at the full budget steps its whole row down one rung (at most twice), a seed the seed
  rule added included (the LSTM's fifth seed had been left out of its row instead; its row trained again one
  rung lower); a seed that still diverges once the
  step-downs are spent has no value, and the gaps (and the seed rule) pair the seeds both rows finished.

Source: design choice (the plan the converged report's open questions ask for; docs/results.md)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from geomlab.report.campaign import Campaign, takes_dropout
from geomlab.report.protocol import COMPARISONS, Arm, Comparison

#: Cost of one training step (batch 32 x 128) of each converged-campaign model: ``(CPU seconds, GFLOPs)``.
#: CPU seconds: the converged campaign's ``cpu_s_per_step`` (docs/results/runs/converged/results/results.json);
#: FLOPs: :func:`geomlab.report.flops.step_flops` of the row's model config (forward + backward).
SIZING: dict[str, tuple[float, float]] = {
    "ts-50k / OSM-RNN O(d)": (0.1311, 2.049),
    "ts-50k / LSTM": (0.0228, 0.125),
    "grassmann-200k / Grassmann (Gr(2, r), offsets 1..16)": (0.2195, 5.078),
    "grassmann-200k / Same block with causal attention": (0.2305, 6.175),
    "grassmann-200k / Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers": (0.2471, 5.310),
    "ts-100k / OSMFormer O(d), linear mixing": (0.4334, 8.287),
    "ts-100k / OSMFormer O(d), identity mixing": (0.9069, 23.761),
    "ts-100k / Transformer (ALiBi)": (0.1600, 3.458),
    "cem-200k / Llama (RMSNorm, RoPE, SwiGLU)": (0.1898, 6.515),
    "cem-200k / CEM T=1, shared diagonal": (0.3119, 10.569),
    "cem-200k / CEM T=2, shared diagonal": (0.5684, 18.630),
    "cem-200k / CEM T=2, no diagonal": (0.3772, 15.342),
    "ptb-100k / OSMFormer O(d), linear mixing": (0.3772, 6.986),
    "ptb-100k / Transformer (ALiBi)": (0.1324, 3.439),
    "ts-scaling / OSMFormer O(d) ~200K": (0.2940, 10.433),
    "ts-scaling / Transformer ~200K": (0.1410, 6.062),
    "ts-scaling / OSMFormer O(d) ~500K": (0.8062, 26.076),
    "ts-scaling / Transformer ~500K": (0.2471, 14.283),
}

MEASURES = ("CPU", "FLOPs")


def equal_steps(base_steps: int, base_cost: float, cost: float) -> int:
    """Steps of a model costing ``cost`` per step that spend the budget of ``base_steps`` steps at
    ``base_cost`` each, rounded down to a multiple of 10 (at least 10)."""
    return max(10, int(base_steps * base_cost / cost) // 10 * 10)


def sized_label(label: str) -> tuple[str, str, str | None] | None:
    """An equal-compute arm's label read back (:func:`_equal_compute` writes them): ``(the model it trains, the
    measure: "CPU" or "FLOPs", the model whose budget it takes: None for "the baseline's")``, e.g. ``("Same
    block with causal attention", "CPU", "Grassmann (Gr(2, r), offsets 1..16)")`` for the baseline cut to
    that model's CPU budget; ``None`` for any other label."""
    m = re.fullmatch(r"(.+) at the baseline's (CPU|FLOPs) budget \([\d,]+ steps\)", label)
    if m:
        return m[1], m[2], None
    m = re.fullmatch(r"(.+?) at the (CPU|FLOPs) budget of (.+) \([\d,]+ steps\)", label)
    return (m[1], m[2], m[3]) if m else None


def _equal_compute(key: str, arms: tuple[Arm, ...], steps: int, headline: tuple[str, ...]
                   ) -> tuple[tuple[Arm, ...], tuple[tuple[tuple[str, str], int], ...]]:
    """The equal-compute arms of comparison ``key`` (for each arm in ``headline`` and each measure, the costlier
    of it and the baseline on a schedule sized to the other's budget) and their steps."""
    base = next(a for a in arms if a.baseline)
    new, sized = [], []
    for label in headline:
        arm = next(a for a in arms if a.label == label)
        for m, measure in enumerate(MEASURES):
            mine, theirs = SIZING[f"{key} / {label}"][m], SIZING[f"{key} / {base.label}"][m]
            costly, cheap_cost, cost = (arm, theirs, mine) if mine > theirs else (base, mine, theirs)
            n = equal_steps(steps, cheap_cost, cost)
            if costly is base:
                lab = f"{base.label} at the {measure} budget of {label} ({n:,} steps)"
                new.append(replace(base, label=lab, baseline=False, paper={}, goal=None, versus=None))
            else:
                lab = f"{label} at the baseline's {measure} budget ({n:,} steps)"
                new.append(replace(arm, label=lab, paper={}, goal=None, versus=None))
            sized.append(((key, lab), n))
    return tuple(new), tuple(sized)


def _fair(comp: Comparison, steps: int, headline: tuple[str, ...], arms: tuple[Arm, ...] | None = None
          ) -> tuple[Comparison, tuple[tuple[tuple[str, str], int], ...]]:
    arms = arms if arms is not None else comp.arms
    extra, sized = _equal_compute(comp.key, arms, steps, headline) if headline else ((), ())
    return replace(comp, arms=arms + extra), sized


_G = COMPARISONS["grassmann-200k"]
_GRASS_ARMS = _G.arms[:2] + (
    replace(_G.arms[2], versus="Same block with causal attention, 6 layers"),
    Arm("Same block with causal attention, 6 layers", "grassmann-attn", 200_000, {"n_layers": 6}),
    Arm("Same block with causal attention, pre-norm", "grassmann-attn", 200_000, {"layout": "pre_norm"}),
    Arm("Same block with causal attention, pre-norm, 6 layers", "grassmann-attn", 200_000,
        {"layout": "pre_norm", "n_layers": 6}))
_S = COMPARISONS["ts-scaling"]
_SCALING_ARMS = tuple(replace(a, config={**a.config, "n_layers": 3}) if a.kind == "osmformer" else a for a in _S.arms)

_BLOCKS = (
    _fair(COMPARISONS["ts-50k"], 10_000, ("OSM-RNN O(d)",)),
    _fair(_G, 5_000, ("Grassmann (Gr(2, r), offsets 1..16)",
                      "Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers"), _GRASS_ARMS),
    _fair(COMPARISONS["ts-100k"], 10_000, ("OSMFormer O(d), linear mixing",)),
    _fair(COMPARISONS["cem-200k"], 10_000, ("CEM T=1, shared diagonal", "CEM T=2, shared diagonal")),
    _fair(COMPARISONS["ptb-100k"], 10_000, ("OSMFormer O(d), linear mixing",)),
    _fair(replace(_S, arms=_SCALING_ARMS, note="The OSMFormers keep the ~100K model's depth (3 layers)."), 5_000, ()),
)

#: The fair campaign: every block's comparison, its steps, the per-arm steps of the equal-compute arms and the
#: one rule of the module docstring.
FAIR = Campaign(
    name="fair",
    steps=tuple((c.key, n) for (c, _), n in zip(_BLOCKS, (10_000, 5_000, 10_000, 10_000, 10_000, 5_000))),
    lr_grid=(2.2e-3, 4.6e-3, 1e-2, 2.2e-2), lr_per_decade=3, warmups=(), warmup_grid=(0.02, 0.1),
    regs=tuple((wd, do) for wd in (0.0, 0.01, 0.1) for do in (0.0, 0.1)),
    arm_steps=tuple(s for _, sized in _BLOCKS for s in sized), seed_rule=(0.02, 8), seed_counts=(),
    late=(("ts-100k", "OSMFormer O(d), identity mixing"), ("ts-scaling", "*")), lr_from=(),
    extra=tuple(c for c, _ in _BLOCKS))

def campaigns() -> dict[str, Campaign]:
    """The declared campaigns by name: ``converged`` (its report: docs/results/runs/converged/results.md) and
    ``fair`` (:data:`FAIR`)."""
    from geomlab.report.campaign import CONVERGED

    return {"converged": CONVERGED, "fair": FAIR}


def step_seconds(campaign: Campaign, key: str, arm: Arm) -> tuple[float, bool]:
    """CPU seconds per training step (batch 32 x 128, one thread) of ``arm`` in comparison ``key``:
    :data:`SIZING` by label (an equal-compute arm: its source model's), else the measured arm of the same kind
    in the same comparison nearest in budget, else the costliest measured arm of the comparison, else of all
    (``True``: estimated). Source: the converged campaign's measurements; design choice for the fallbacks."""
    label = arm.label.split(" at the ")[0]
    if f"{key} / {label}" in SIZING:
        return SIZING[f"{key} / {label}"][0], False
    known = campaign.known().get(key)
    same = [(abs(a.budget - arm.budget), SIZING[f"{key} / {a.label}"][0]) for a in (known.arms if known else ())
            if a.kind == arm.kind and f"{key} / {a.label}" in SIZING]
    if same:
        return min(same)[1], True
    mine = [v[0] for k, v in SIZING.items() if k.startswith(f"{key} / ")]
    return max(mine or [v[0] for v in SIZING.values()]), True


def seconds_left(campaign: Campaign, store, job) -> float:
    """Estimated CPU seconds ``job`` still needs: its steps at :func:`step_seconds` minus the CPU seconds its
    checkpointed part already took (:meth:`geomlab.report.store.RunStore.cpu_so_far`), at least 0. Validations
    are not counted. Source: design choice (what ``geomlab report --hours`` schedules by)."""
    rate, _ = step_seconds(campaign, job.comp.key, job.arm)
    return max(0.0, job.steps * rate - store.cpu_so_far(job))


def seconds_to_checkpoint(campaign: Campaign, job) -> float:
    """Estimated CPU seconds from ``job``'s start (or resumption) to its next checkpoint: ``eval_every`` steps (at
    most its steps) at :func:`step_seconds`. Source: design choice (what ``geomlab report --hours`` starts a run
    that cannot finish in time by)."""
    rate, _ = step_seconds(campaign, job.comp.key, job.arm)
    return min(campaign.eval_every, job.steps) * rate


def first_runs(campaign: Campaign, key: str, arm: Arm) -> tuple[int, int, int]:
    """The runs :func:`estimate` counts for ``arm`` of comparison ``key`` before any run: ``(lr x warm-up
    tuning runs of its grid, no widening; regularisation runs: the settings of :attr:`Campaign.regs` that apply
    to the model, the unregularised one being the lr tuning's own; seeds: the first ones)``."""
    regs = [r for r in campaign.regs if r != (0.0, 0.0) and (r[1] == 0 or takes_dropout(arm.kind))]
    return (len(campaign.lr_grid) * len(campaign.warmups_for(key, arm.label)), len(regs),
            len(campaign.seeds_for(key)))


def estimate(campaign: Campaign = FAIR) -> list[dict[str, Any]]:
    """CPU hours per block (comparison) of ``campaign`` before any run: per arm, tuning runs (lr grid x
    warm-ups, plus the regularisation settings that apply, at the tuning budget, no widening) and full runs at
    the first seeds (``cpu_hours``) or at the seed rule's most seeds (``cpu_hours_max``), at :func:`step_seconds`'s
    CPU seconds per step (one thread; a shared 2-core machine). Rows: ``block``, ``arms``, ``runs``,
    ``cpu_hours``, ``cpu_hours_max``, ``estimated_arms`` (arms timed by a same-kind neighbour)."""
    rows = []
    for comp in campaign.comparisons():
        hours = hours_max = 0.0
        runs = 0
        guessed = []
        for arm in comp.arms:
            rate, guess = step_seconds(campaign, comp.key, arm)
            if guess:
                guessed.append(arm.label)
            n_lr, n_regs, seeds = first_runs(campaign, comp.key, arm)
            n_tune = n_lr + n_regs
            most = campaign.seed_rule[1] if campaign.seed_rule else seeds
            tune_s = n_tune * campaign.tune_steps(comp.key, arm.label) * rate
            full = campaign.full_steps(comp.key, arm.label) * rate
            hours += (tune_s + seeds * full) / 3600
            hours_max += (tune_s + most * full) / 3600
            runs += n_tune + seeds
        rows.append({"block": comp.key, "title": comp.title, "arms": len(comp.arms), "runs": runs,
                     "cpu_hours": round(hours, 1), "cpu_hours_max": round(hours_max, 1), "estimated_arms": guessed})
    return rows


def estimate_table(rows: list[dict[str, Any]], workers: int = 2) -> list[str]:
    """Markdown table of :func:`estimate`'s rows with totals and the days at ``workers`` runs at a time."""
    out = ["| block | arms | runs (3 seeds) | CPU hours (3 seeds) | CPU hours (8 seeds, the most) |",
           "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['block']} | {r['arms']} | {r['runs']} | {r['cpu_hours']:.1f} | {r['cpu_hours_max']:.1f} |")
    lo, hi = sum(r["cpu_hours"] for r in rows), sum(r["cpu_hours_max"] for r in rows)
    out.append(f"| **all** | {sum(r['arms'] for r in rows)} | {sum(r['runs'] for r in rows)} | {lo:.1f} | {hi:.1f} |")
    return out + ["", f"At {workers} run{'s' if workers != 1 else ''} at a time: {lo / workers / 24:.1f} to "
                  f"{hi / workers / 24:.1f} days of computing (CPU seconds per step as measured by the converged "
                  "campaign at 1 thread per run; arms without a measurement of their own are timed by the same "
                  "kind in their comparison: "
                  + ("; ".join(sorted({a for r in rows for a in r["estimated_arms"]})) or "none") + ")."]
