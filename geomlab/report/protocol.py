"""What a reproduction report compares, and how: the shared training/evaluation :class:`Protocol`, its
profiles (:data:`PROFILES`: ``smoke``, ``quick``, ``full``), the comparisons (:data:`COMPARISONS`: arms with
parameter budgets and the papers' numbers), the word-problem models (:data:`WORD_PROBLEM_ARMS`), the
validated overrides (:func:`protocol`) and the command that reproduces a protocol (:func:`command_line`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


class ReportError(ValueError):
    """Bad report request (unknown profile or comparison, invalid override)."""


@dataclass(frozen=True)
class Protocol:
    """One training/evaluation protocol shared by every model of a report.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        steps, batch_size, seq_len, lr, warmup: language-model training (equal for every model).
        lr_grid: when not empty, every language model is trained once per learning rate of this grid (seed
            ``seeds[0]``; an Optuna grid study, :func:`tune_lr`) and keeps the one with the best validation BPC
            for all its seeds (one tuning rule
            for every model, instead of one learning rate that suits some models and not others; ``lr`` is
            then unused). Rows record the chosen lr and the sweep.
        seeds: seeds averaged per row (mean, and the sample std when more than one).
        eval_tokens: cap on the number of valid/test characters scored (``None`` = whole split).
        wp_steps, wp_batch_size, wp_train_len, wp_lr: word-problem training.
        wp_curriculum: ``(length, steps)`` pairs trained before the rest at ``wp_train_len`` (a sequence-length
            curriculum, the same for every model; OSM-RNN does not learn S5 from scratch without one).
        wp_lengths: lengths at which final-position accuracy is measured (longer than ``wp_train_len`` =
            length generalisation).
        wp_groups: the groups of the word problem (a non-abelian and an abelian one).
        latency_len: characters traced for the trace-latency column.
        budget_scale: multiplies every parameter budget (``smoke`` shrinks the models; 1 otherwise).
        corpus_override: a text file used instead of every registered corpus (``smoke``: no download).
        comparisons: keys of the comparisons run (see :data:`COMPARISONS`).
    """

    name: str
    steps: int
    batch_size: int
    seq_len: int
    lr: float = 3e-3
    warmup: float = 0.02
    lr_grid: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    eval_tokens: int | None = None
    wp_steps: int = 1000
    wp_batch_size: int = 32
    wp_train_len: int = 16
    wp_lr: float = 1e-2
    wp_curriculum: tuple[tuple[int, int], ...] = ()
    wp_lengths: tuple[int, ...] = (4, 8, 16, 32, 64)
    wp_groups: tuple[str, ...] = ("S5", "Z60")
    latency_len: int = 256
    budget_scale: float = 1.0
    corpus_override: str | None = None
    comparisons: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("seeds", "wp_lengths", "wp_groups", "comparisons", "lr_grid"):
            d[k] = list(d[k])
        d["wp_curriculum"] = [list(pair) for pair in d["wp_curriculum"]]
        return d


@dataclass(frozen=True)
class Arm:
    """One model in a comparison: ``label`` (shown), ``kind``, ``budget`` (effective parameters; 0: ``config``
    is the whole model config), fixed ``config`` keys, the paper's numbers (``paper``: e.g. ``{"params": "91K",
    "valid": 2.254, "test":
    2.464}``), whether it is the comparison's speed baseline, ``goal``: a test BPC the project aims
    below for this model (the report's reading says whether the mean reached it), and
    ``versus``: the label of another arm of the comparison this one is read against besides the baseline,
    an ablation against what it ablates or a size-matched pair of a scaling study (the report then gives
    this arm's test BPC minus that arm's, with the seed-paired interval; design choice)."""

    label: str
    kind: str
    budget: int
    config: dict[str, Any] = field(default_factory=dict)
    paper: dict[str, Any] = field(default_factory=dict)
    baseline: bool = False
    goal: float | None = None
    versus: str | None = None


@dataclass(frozen=True)
class Comparison:
    """A table section: ``key``, ``title``, ``corpus`` (registered name), its arms (exactly one baseline),
    the claim of the paper it checks (``claim``) and notes."""

    key: str
    title: str
    corpus: str
    arms: tuple[Arm, ...]
    claim: str = ""
    note: str = ""


_TS100 = Comparison(
    "ts-100k", "Tiny Shakespeare, ~100K parameters: OSMFormer vs ALiBi Transformer", "tinyshakespeare",
    (Arm("OSMFormer O(d), linear mixing", "osmformer", 91_000, {"group": "O", "mixing": "linear"},
         {"params": "91K", "valid": 2.254, "test": 2.464}, goal=2.40),
     Arm("OSMFormer O(d), identity mixing", "osmformer", 91_000, {"group": "O", "mixing": "scalar"}, {},
         versus="OSMFormer O(d), linear mixing"),
     Arm("Transformer (ALiBi)", "transformer", 104_000, {}, {"params": "104K", "valid": 2.259, "test": 2.583},
         baseline=True)),
    claim="OSM paper: OSMFormer 2.464 vs Transformer 2.583 test BPC (val 2.254 vs 2.259); linear mixing helps.",
    note="Identity mixing is the paper's ablation baseline, Gamma = eta Id with a learned step eta per map "
         "(`mixing=\"scalar\"`; Nunley, arXiv 2602.18417), at the same parameter budget: without the mixing maps "
         "the budget goes to a larger state (d = 30, 2 layers, against d = 15, 3 layers). Toward the 2.40 goal, "
         "probes of the linear arm's shape at the tuning budget (2,000 steps, seed 0, lr 1e-2; valid BPC; not "
         "campaign runs): d = 15 with 3 layers (the arm) 2.264, d = 14 with 4 layers 2.263, 3 heads 2.270, "
         "beta = sqrt(d) 2.280, d = 16 with 3 layers and tied prototypes (94K) 2.344: none is ahead by more "
         "than 0.001. Both models end ~0.3 bits lower on their training text than on the valid split (seed 0: "
         "OSMFormer 1.920 vs 2.214, Transformer 1.936 vs 2.233), so regularisation, which this protocol gives no "
         "model, is the next lever for both (docs/osm.md).")
_TS50 = Comparison(
    "ts-50k", "Tiny Shakespeare, ~50K parameters: OSM-RNN vs LSTM", "tinyshakespeare",
    (Arm("OSM-RNN O(d)", "osm-rnn", 50_000, {"group": "O", "mixing": "linear"}, {"params": "~50K", "test": 2.539}),
     Arm("LSTM", "lstm", 50_000, {}, {"params": "~50K", "test": 2.594}, baseline=True)),
    claim="OSM paper: OSM-RNN 2.539 vs LSTM 2.594 test BPC.")
_PTB100 = Comparison(
    "ptb-100k", "PTB characters, ~100K parameters: OSMFormer vs ALiBi Transformer", "ptb-char",
    (Arm("OSMFormer O(d), linear mixing", "osmformer", 100_000, {"group": "O", "mixing": "linear"},
         {"params": "~100K", "valid": 1.665, "test": 1.614}),
     Arm("Transformer (ALiBi)", "transformer", 100_000, {}, {"params": "~100K", "valid": 1.716, "test": 1.664},
         baseline=True)),
    claim="OSM paper: OSMFormer 1.614 vs Transformer 1.664 test BPC (val 1.665 vs 1.716).")
_SCALING = Comparison(
    "ts-scaling", "Tiny Shakespeare, scaling 100K -> 500K: OSMFormer vs ALiBi Transformer", "tinyshakespeare",
    tuple(a for n in (200_000, 500_000) for a in (
        Arm(f"OSMFormer O(d) ~{n // 1000}K", "osmformer", n, {"group": "O", "mixing": "linear"}, {},
            versus=None if n == 200_000 else f"Transformer ~{n // 1000}K"),
        Arm(f"Transformer ~{n // 1000}K", "transformer", n, {}, {}, baseline=(n == 200_000)))),
    claim="OSM paper: a scaling study up to ~500K (no numbers available in the notes).",
    note="The ~100K points are the ts-100k rows (trained for 10,000 steps; these rows for 5,000).")
_CEM = Comparison(
    "cem-200k", "Tiny Shakespeare, ~200K parameters: CEM vs Llama", "tinyshakespeare",
    (Arm("Llama (RMSNorm, RoPE, SwiGLU)", "llama", 200_000, {"n_layers": 4, "n_heads": 4}, {}, baseline=True),
     Arm("CEM T=1, shared diagonal", "cem", 200_000, {"recursion_steps": 1, "diagonal": "shared"}, {}),
     Arm("CEM T=2, shared diagonal", "cem", 200_000, {"recursion_steps": 2, "diagonal": "shared"}, {}),
     Arm("CEM T=2, no diagonal", "cem", 200_000, {"recursion_steps": 2, "diagonal": "none"}, {})),
    claim="CEM paper: tied CEM layers match Llama at equal parameters; T=2 helps; the shared diagonal is "
          "essential (no numbers at this scale in the notes).")
_GRASS = Comparison(
    "grassmann-200k", "WikiText-2 characters, ~200K parameters: Grassmann vs attention", "wikitext-2",
    (Arm("Grassmann (Gr(2, r), offsets 1..16)", "grassmann", 200_000, {}, {"ppl_ratio": 1.11}),
     Arm("Same block with causal attention", "grassmann-attn", 200_000, {}, {}, baseline=True),
     Arm("Grassmann, one offset per layer (1, 2, 4, 8, 12, 16), 6 layers", "grassmann", 200_000,
         {"offset_schedule": "per_layer", "n_layers": 6}, {})),
    claim="Grassmann paper: validation perplexity 275.7 vs 248.4 (ratio 1.11) at 13M parameters, word-piece "
          "tokens; public re-runs: 1.23 (sherlok-xin/grassmann--flow), 1.40 and 1.45 "
          "(alphaXiv/paper-implementations), 1.43 (kanenorman/grassmann). Our per-character perplexity ratio "
          "is 2^(BPC difference) at 200K parameters, which is not the same quantity. The post-norm attention "
          "baseline needs a long warm-up or a low lr (docs/grassmann.md). The paper's offset list has one entry "
          "per layer (its 12-layer list repeats offsets): every public re-run gives every layer all six offsets "
          "(the first arm); the third arm reads the list as one offset per layer, six layers.")

#: Every comparison, by key.
COMPARISONS: dict[str, Comparison] = {c.key: c for c in (_TS100, _TS50, _PTB100, _SCALING, _CEM, _GRASS)}

#: The word-problem models: explicit small configs (about 10-20K parameters at |G| = 120; the torus has
#: the most parameters, so its failure on S5 is not a size effect). ``budget`` 0 = use ``config`` as is.
#: The OSM-RNNs use ``rnn_input="pull+token"`` with the pull step initialised at 0, so the update starts as
#: the group product ``H exp(A_x)`` (with the default pull-only input, OSM-RNN did not learn even S3 in
#: 1000 steps here, while the LSTM solved it), readout temperature 5 and token generators of std 1
#: (measured on S3: 1.00 accuracy up to length 16 after 1000 steps; design choice).
_WP_OSM = {"mixing": "linear", "rnn_input": "pull+token", "step": 0.0, "tau": 5.0, "token_init_std": 1.0}
WORD_PROBLEM_ARMS: tuple[Arm, ...] = (
    Arm("OSM-RNN O(8)", "osm-rnn", 0, {"group": "O", "d": 8, **_WP_OSM}),
    Arm("OSM-RNN U(5)", "osm-rnn", 0, {"group": "U", "d": 5, **_WP_OSM}),
    Arm("OSM-RNN torus T^8", "osm-rnn", 0, {"group": "T", "d": 8, **_WP_OSM}),
    Arm("LSTM (h=32)", "lstm", 0, {"hidden": 32, "embedding_dim": 32}, baseline=True),
    Arm("Transformer ALiBi (d=24, 2 layers)", "transformer", 0, {"d_model": 24, "n_layers": 2}),
)

_QUICK_KEYS = ("ts-100k", "ts-50k", "ptb-100k", "cem-200k", "grassmann-200k")
_SMOKE_KEYS = ("ts-100k", "ts-50k", "cem-200k", "grassmann-200k")
PROFILES: dict[str, Protocol] = {
    "smoke": Protocol("smoke", steps=2, batch_size=2, seq_len=16, eval_tokens=128, wp_steps=2, wp_batch_size=4,
                      wp_train_len=8, wp_lengths=(4, 8), latency_len=16, comparisons=_SMOKE_KEYS),
    "quick": Protocol("quick", steps=150, batch_size=16, seq_len=64, eval_tokens=8192, wp_steps=300,
                      wp_batch_size=32, wp_train_len=16, wp_lengths=(4, 8, 16, 32, 64), latency_len=128,
                      wp_groups=("S3", "Z5"), comparisons=_QUICK_KEYS),
    "full": Protocol("full", steps=3000, batch_size=32, seq_len=128, seeds=(0, 1, 2), eval_tokens=None,
                     lr_grid=(1e-3, 3e-3, 1e-2, 3e-2), wp_steps=6000, wp_batch_size=64, wp_train_len=16,
                     wp_curriculum=((2, 1500), (4, 1500), (8, 1500)), wp_lengths=(4, 8, 16, 32, 64, 128),
                     latency_len=128, comparisons=tuple(COMPARISONS)),
}


def protocol(name: str = "quick", **overrides: Any) -> Protocol:
    """The named profile with ``overrides`` applied (``None`` values ignored). Raises :class:`ReportError`
    for an unknown profile, key or comparison."""
    if name not in PROFILES:
        raise ReportError(f"unknown profile {name!r}; use one of {', '.join(PROFILES)}")
    p = PROFILES[name]
    clean = {k: v for k, v in overrides.items() if v is not None}
    if clean.get("eval_tokens") == "all":  # explicit request for whole splits (None means "no override")
        clean["eval_tokens"] = None
    elif "eval_tokens" in clean and int(clean["eval_tokens"]) < 1:
        raise ReportError(f"eval_tokens must be >= 1 or 'all', got {clean['eval_tokens']}")
    bad = set(clean) - set(p.to_dict())
    if bad:
        raise ReportError(f"unknown protocol keys {sorted(bad)}")
    for key in ("seeds", "wp_lengths", "wp_groups", "comparisons"):
        if key in clean:
            clean[key] = tuple(clean[key])
    if "lr_grid" in clean:
        clean["lr_grid"] = tuple(float(x) for x in clean["lr_grid"])
        if not all(0 < x < 10 for x in clean["lr_grid"]):
            raise ReportError(f"--lr-grid values must lie between 0 and 10 (exclusive), got {list(clean['lr_grid'])}")
    if "wp_curriculum" in clean:
        try:
            clean["wp_curriculum"] = tuple((int(n), int(k)) for n, k in clean["wp_curriculum"])
        except (TypeError, ValueError):
            raise ReportError(f"wp_curriculum must be (length, steps) pairs, got {clean['wp_curriculum']!r}") from None
    unknown = [c for c in clean.get("comparisons", ()) if c not in COMPARISONS]
    if unknown:
        raise ReportError(f"unknown comparisons {unknown}; known: {', '.join(COMPARISONS)}, word-problem")
    for key in ("steps", "batch_size", "seq_len", "wp_batch_size", "wp_train_len", "latency_len"):
        if key in clean and int(clean[key]) < 1:
            raise ReportError(f"{key} must be >= 1, got {clean[key]}")
    if "wp_steps" in clean and int(clean["wp_steps"]) < 0:
        raise ReportError(f"wp_steps must be >= 0 (0 skips the word problem), got {clean['wp_steps']}")
    out = replace(p, **clean)
    cur = out.wp_curriculum
    if (any(n < 1 or k < 1 or n > out.wp_train_len for n, k in cur)
            or (out.wp_steps and sum(k for _, k in cur) > out.wp_steps)):
        raise ReportError(f"the word-problem curriculum (--wp-curriculum) {[list(c) for c in cur]} needs lengths "
                          f"from 1 to the training length {out.wp_train_len}, steps >= 1, and at most --wp-steps "
                          f"{out.wp_steps} steps in all (lower it with --wp-curriculum, or '' for none)")
    if "lr" in clean and not (isinstance(clean["lr"], (int, float)) and 0 < clean["lr"] < 10):
        raise ReportError(f"lr must be a positive number, got {clean['lr']}")
    if "seeds" in clean and not clean["seeds"]:
        raise ReportError("seeds must name at least one seed")
    return out



def command_line(p: dict[str, Any]) -> str:
    """The ``python -m geomlab report ...`` command that reproduces protocol dict ``p`` (profile flag plus the
    overrides that differ from the profile)."""
    base = PROFILES.get(p["name"])
    parts = ["python -m geomlab report", f"--{p['name']}"]  # the profile always named: a bare command refuses
    if base is None:
        return " ".join(parts)
    b = base.to_dict()
    comps = list(p["comparisons"])
    if comps != b["comparisons"] or (p["wp_steps"] == 0) != (b["wp_steps"] == 0):
        keys = comps + (["word-problem"] if p["wp_steps"] else [])
        parts.append("--only " + ",".join(keys))
    if p["steps"] != b["steps"]:
        parts.append(f"--steps {p['steps']}")
    if p["wp_steps"] and p["wp_steps"] != b["wp_steps"]:
        parts.append(f"--wp-steps {p['wp_steps']}")
    if p.get("lr_grid"):
        if list(p["lr_grid"]) != list(b.get("lr_grid", [])):
            parts.append("--lr-grid " + ",".join(str(x) for x in p["lr_grid"]))
    elif b.get("lr_grid") or p["lr"] != b["lr"]:
        parts.append(f"--lr {p['lr']}")
    for key, flag in (("batch_size", "--batch-size"), ("seq_len", "--seq-len")):
        if p[key] != b[key]:
            parts.append(f"{flag} {p[key]}")
    if list(map(list, p.get("wp_curriculum", []))) != list(map(list, b.get("wp_curriculum", []))) and p["wp_steps"]:
        parts.append("--wp-curriculum " + (",".join(f"{n}:{k}" for n, k in p["wp_curriculum"]) or "''"))
    if p.get("corpus_override"):
        parts.append(f"--corpus-file {p['corpus_override']}")
    if p["eval_tokens"] != b["eval_tokens"]:
        parts.append(f"--eval-chars {'all' if p['eval_tokens'] is None else p['eval_tokens']}")
    if list(p["seeds"]) != list(b["seeds"]):
        parts.append(f"--seeds {len(p['seeds'])}")
    return " ".join(parts)

