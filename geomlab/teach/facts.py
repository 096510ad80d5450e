"""Facts about the current model, as sentences a view page states: the group (its size, algebra dimension,
whether it is abelian), layers and heads, CEM recursion steps and whether the recorded energy fell at every
step or ran away past the trained steps (:func:`overshoot_text`), Grassmann rank and offsets, the gate share
(:func:`model_facts`, :func:`view_facts`, :func:`energy_rises`, :func:`is_abelian`, :func:`algebra_dim`).

Texts are Streamlit markdown with inline LaTeX between single dollars. No streamlit import.

Sources: the papers (OSM: Nunley, arXiv 2602.18417; CEM: Xu et al., arXiv 2605.07588; Grassmann:
Zhang, arXiv 2512.19428) named per family; the wording is a design choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from geomlab.core.markup import md_label
from geomlab.teach import views
from geomlab.teach.kinds import has_flag

GROUP_TITLES = {"O": "orthogonal group", "SO": "special orthogonal group", "U": "unitary group",
                "SU": "special unitary group", "T": "torus", "O-block": "block-diagonal orthogonal group"}


def algebra_dim(name: str, d: int, block: int | None = None) -> int:
    """Real dimension of the Lie algebra of group ``name`` at size ``d`` (Nunley, arXiv 2602.18417): O/SO ``d(d-1)/2``,
    U ``d^2``, SU ``d^2-1``, T ``d``, O-block ``(d/b) b(b-1)/2``. ``ValueError`` for an unknown name."""
    if name in ("O", "SO"):
        return d * (d - 1) // 2
    if name == "U":
        return d * d
    if name == "SU":
        return d * d - 1
    if name == "T":
        return d
    if name == "O-block":
        b = int(block or 2)
        return (d // b) * b * (b - 1) // 2
    raise ValueError(f"unknown group {name!r}")


def is_abelian(name: str, d: int, block: int | None = None) -> bool:
    """Whether the states' updates commute, i.e. the Lie algebra is abelian (the exponential map reaches the
    identity component only, so this is what the model can use): always for the torus T; for O/SO when
    ``d <= 2`` (plane rotations); U when ``d <= 1``; SU when ``d <= 1``; O-block when the blocks are
    ``2 x 2`` or smaller. Source: standard Lie theory; Nunley, arXiv 2602.18417."""
    if name == "T":
        return True
    if name in ("O", "SO"):
        return d <= 2
    if name in ("U", "SU"):
        return d <= 1
    if name == "O-block":
        return int(block or 2) <= 2
    return False


def _group_info(tr: Any, config: dict | None) -> tuple[str, int, int | None] | None:
    g = getattr(tr, "group", None) or {}
    name = g.get("name") or (config or {}).get("group") or (getattr(tr, "config", None) or {}).get("group")
    if not name:
        return None
    d = int(g.get("d") or (config or {}).get("d") or getattr(tr, "d", 0) or 0)
    block = (g.get("options") or {}).get("block") or (config or {}).get("block")
    return str(name), d, (int(block) if block else None)


def group_symbol(name: str, d: int) -> str:
    """The group as inline LaTeX: ``$O(16)$``, ``$T^{8}$``, ``$O(2)^{4}$`` style for O-block is written
    ``$O\\text{-block}(d)$``."""
    if name == "T":
        return f"$T^{{{d}}}$"
    if name == "O-block":
        return f"$O\\text{{-block}}({d})$"
    return f"${name}({d})$"


def _word_problem_group(task: Any) -> str | None:
    """The group of a word-problem task: ``"S5"`` from a card's task dict (``{"task": "word-problem",
    "group": "S5"}``) or a corpus spec (``"word-problem:S5:32"``, ``"word-problem S5"``); None otherwise."""
    if isinstance(task, dict):
        return str(task["group"]) if task.get("task") == "word-problem" and task.get("group") else None
    m = re.match(r"word-problem[: ]([A-Za-z0-9]+)", str(task or ""))
    return m.group(1) if m else None


def _nonabelian_task(group: str) -> bool:
    """Whether word-problem group ``group`` (``S3``, ``S5``, ``A5``, ``Z<n>``, ``parity``) is non-abelian:
    the symmetric groups from S3 on and the alternating groups from A4 on."""
    m = re.fullmatch(r"([SA])(\d+)", group.upper())
    return bool(m) and int(m.group(2)) >= (3 if m.group(1) == "S" else 4)


def _task_symbol(group: str) -> str:
    """``"S5"`` -> ``"$S_{5}$"``; other names escaped as text."""
    m = re.fullmatch(r"([SAZ])(\d+)", group)
    return f"${m.group(1)}_{{{m.group(2)}}}$" if m else md_label(group)


@dataclass(frozen=True)
class Fact:
    """One sentence about the current model (markdown with ``$...$``); ``warn`` marks something that looks
    wrong on this trace (e.g. an energy that rose), shown prominently."""

    text: str
    warn: bool = False


def energy_rises(tr: Any) -> list[tuple[int, int, int, float]]:
    """Steps where the token-mean CEM energy rose: ``[(layer, block, step, rise)]``, the steps the energy chart
    flags (:func:`geomlab.figures.energy.energy_rises`: step t >= 1 above step t - 1 beyond its tolerance,
    non-finite positions ignored), with the rise. Empty for a trace without energies. Source: Xu et al.,
    arXiv 2605.07588 (monotone decrease is the sanity check)."""
    if getattr(tr, "energies", None) is None:
        return []
    from geomlab.figures.energy import energy_rises as flagged
    from geomlab.figures.energy import token_mean

    m = token_mean(tr.energies)
    return [(int(l), int(b), int(t), float(m[l, b, t] - m[l, b, t - 1])) for l, b, t in zip(*np.nonzero(flagged(tr)))]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


#: Trace family (``Family.trace``: ``"osm"``, ``"cem"``, ``"grassmann"``) -> the function stating the facts of
#: its traces, ``(trace, config, task) -> [Fact]`` (:func:`facts_for`); a trace of any other family (a
#: baseline) gets :func:`_baseline_facts`.
FAMILY_FACTS: dict[str, Callable[[Any, dict, Any], list[Fact]]] = {}


def facts_for(family: str) -> Callable:
    """Decorator: register a function ``(trace, config, task) -> [Fact]`` as the facts :func:`model_facts`
    states about the traces of trace family ``family``."""
    def register(fn: Callable) -> Callable:
        FAMILY_FACTS[family] = fn
        return fn
    return register


def model_facts(tr: Any, config: dict | None = None, task: Any = None) -> list[Fact]:
    """Facts about the model behind trace ``tr`` as sentences, family by family (:data:`FAMILY_FACTS`):

    * OSM: the group, its size $d$ and algebra dimension, whether it is abelian (torus: the angles add
      independently, so it cannot track a non-abelian word problem; with ``task`` such a problem, a warning);
      layers and heads.
    * CEM: layers, heads, recursion steps T of this trace (and the trained T from ``config``), the
      preconditioner, and whether the recorded token-mean energy fell at every step (:func:`energy_rises`).
    * Grassmann: rank r, Plücker size r(r-1)/2, offsets per layer, the mean gate share on this text.
    * Attention models: layers, heads, positions (ALiBi/RoPE) from ``config``.

    ``config``: the checkpoint's model config (defaults to ``tr.config``); ``task``: the checkpoint card's
    task (a dict such as ``{"task": "word-problem", "group": "S5"}``) or corpus (``"word-problem:S5:32"``).
    Source: the paper notes named per family; wording: design choice.
    """
    cfg = dict(getattr(tr, "config", None) or {})
    cfg.update(config or {})
    return FAMILY_FACTS.get(getattr(tr, "family", "baseline"), _baseline_facts)(tr, cfg, task)


@facts_for("osm")
def _osm_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = views.n_layers(tr)
    heads = views.n_heads(tr)
    info = _group_info(tr, cfg)
    if info:
        name, d, block = info
        title = GROUP_TITLES.get(name, name)
        dim = algebra_dim(name, d, block) if name in GROUP_TITLES else None
        dim_s = f", Lie algebra of dimension {dim}" if dim is not None else ""
        shape = f"diagonal unitary ${d}\\times{d}$ matrices" if name == "T" else f"${d}\\times{d}$ matrices"
        facts.append(Fact(f"States live in the {title} {group_symbol(name, d)}: {shape}{dim_s}."))
        if is_abelian(name, d, block):
            what = ("its states are independent angles, so updates just add to them and their order "
                    "never matters" if name == "T" else "its updates commute, so their order never matters")
            facts.append(Fact(f"{group_symbol(name, d)} is abelian: {what}. It cannot track a "
                              "non-abelian word problem such as $S_5$."))
        else:
            facts.append(Fact(f"{group_symbol(name, d)} is not abelian: the same updates in another order "
                              "give another state, so the state can remember order (needed for a "
                              "non-abelian word problem such as $S_5$)."))
        wp = _word_problem_group(task)
        if wp and _nonabelian_task(wp):
            if is_abelian(name, d, block):
                facts.append(Fact(f"This checkpoint was trained on the {_task_symbol(wp)} word problem, which "
                                  "is not abelian: an abelian state cannot track it, so expect accuracy near "
                                  "chance on long inputs.", warn=True))
            else:
                facts.append(Fact(f"Trained on the {_task_symbol(wp)} word problem (not abelian): this group "
                                  "can represent the running product, order included."))
    kind = getattr(tr, "kind", "") or cfg.get("kind", "")
    if has_flag(kind, "recurrent"):
        facts.append(Fact("An OSM-RNN: one state per position, updated token by token (no layers, no "
                          "attention)."))
    else:
        facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(max(heads, 1), 'attention head')}; "
                          f"mixing: {md_label(cfg.get('mixing', '?'))}, positions: "
                          f"{md_label(cfg.get('position', '?'))}."))
    return facts


@facts_for("cem")
def _cem_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = views.n_layers(tr)
    heads = views.n_heads(tr)
    T = int(getattr(tr, "recursion_steps", 0) or 0)
    trained = views.trained_steps(cfg) if cfg else None
    facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(heads, 'head')}, each layer a gradient step on its "
                      f"energy repeated $T = {T}$ times" + (f" (trained with $T = {trained}$)"
                                                             if trained and trained != T else "") + "."))
    pre = cfg.get("preconditioner")
    if pre:
        facts.append(Fact(f"Preconditioner: {md_label(pre)}; diagonal interaction: "
                          f"{md_label(cfg.get('diagonal', '?'))}."))
    rises = energy_rises(tr)
    runaway = overshoot_text(tr, task, cfg)
    if not rises:
        facts.append(Fact("On this text the mean energy fell (or stayed) at every recursion step in every "
                          "layer and sub-block" + (" (but see the overshoot)." if runaway else
                                                   ", as gradient descent should.")))
    else:
        names = ("attention", "MLP")
        shown = "; ".join(f"layer {l} {names[b] if b < 2 else b}, step {t}" for l, b, t, _ in rises[:4])
        more = f" and {len(rises) - 4} more" if len(rises) > 4 else ""
        hint = (f" More steps are run than were trained ($T = {T} > {trained}$)." if trained and T > trained
                else "")
        facts.append(Fact(f"On this text the mean energy ROSE at {_plural(len(rises), 'step')} ({shown}"
                          f"{more}): the step has left the descent regime there.{hint}", warn=True))
    if runaway:
        facts.append(Fact(runaway, warn=True))
    return facts


def _amount(x: float) -> str:
    """A number for a sentence: 3 significant digits, whole numbers with separators from 1,000 on."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def sub_block(layer: int, block: int) -> str:
    """``layer 3's MLP``: a CEM layer's sub-block (0 attention, 1 MLP) in words."""
    return f"layer {layer}'s " + (("attention", "MLP")[block] if block < 2 else f"sub-block {block}")


def overshoot_text(tr: Any, task: Any = None, config: dict | None = None) -> str:
    """The warning for a CEM trace whose descent runs away past the trained steps
    (:func:`geomlab.whatif.energy.overshoot`, trained T from ``config`` or the trace's config): which
    sub-block runs away fastest and how much faster than within the trained steps, how far its iterate
    drifted, which others run away, and the mean surprisal of the predictions against a uniform guess's.
    Empty when it does not run away."""
    from geomlab.whatif.energy import overshoot

    trained = (config or {}).get("recursion_steps")
    o = overshoot(tr, task, trained=int(trained) if trained else None)
    if o is None:
        return ""
    moved = (f", and its iterate ends {o.moved:.3g}ρ from the layer input ({o.trained_moved:.3g}ρ at step "
             f"{o.trained})" if np.isfinite(o.moved) else "")
    also = (f"; {' and '.join(sub_block(*lb) for lb in o.others)} {'runs' if len(o.others) == 1 else 'run'} "
            "away too" if o.others else "")
    worse = "worse than" if o.bits > o.uniform_bits else "against"
    bits = (f" Mean surprisal on this text: {o.bits:.2f} bits, {worse} a uniform guess ({o.uniform_bits:.2f})."
            if np.isfinite(o.bits) else "")
    return (f"Overshoot past the trained $T = {o.trained}$: {sub_block(o.layer, o.block)} energy falls "
            f"{_amount(o.rate)}× faster per step than within the trained steps (to "
            f"$\\Delta\\varepsilon = {_amount(o.lowest).replace(',', '{,}')}$){moved}{also}.{bits} A lower energy "
            "is not a better prediction here.")


@facts_for("grassmann")
def _grassmann_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = views.n_layers(tr)
    r = int(getattr(tr, "rank", 0) or 0)
    offs = getattr(tr, "offsets", None)
    per_layer = ([sorted({int(o) for o in row if int(o) > 0}) for row in np.asarray(offs)]
                 if offs is not None else [])
    if per_layer and all(p == per_layer[0] for p in per_layer):
        off_s = "offsets $\\Delta \\in \\{" + ", ".join(map(str, per_layer[0])) + "\\}$ in every layer"
    elif per_layer:
        off_s = "offsets " + "; ".join(f"layer {i}: {', '.join(map(str, p)) or 'none'}"
                                       for i, p in enumerate(per_layer))
    else:
        off_s = "offsets " + md_label(cfg.get("offsets", "?"))
    facts.append(Fact(f"{_plural(L, 'layer')}; tokens reduced to rank $r = {r}$, so each plane has "
                      f"$r(r-1)/2 = {r * (r - 1) // 2}$ Plücker coordinates; {off_s}."))
    gates = getattr(tr, "gates", None)
    if gates is not None and np.size(gates):
        with np.errstate(all="ignore"):
            share = 1.0 - np.nanmean(np.asarray(gates, dtype=np.float64), axis=(1, 2))
        if np.isfinite(share).all():
            facts.append(Fact("On this text the gate takes " + ", ".join(
                f"{100 * s:.0f}%" for s in share) + " of each layer's output from the planes (layer 0 "
                "first)."))
    return facts


def _baseline_facts(tr: Any, cfg: dict, task: Any) -> list[Fact]:
    facts: list[Fact] = []
    L = views.n_layers(tr)
    heads = views.n_heads(tr)
    if heads:
        pos = (cfg.get("positional") or cfg.get("position")
               or {"transformer": "ALiBi", "llama": "RoPE"}.get(cfg.get("kind") or getattr(tr, "kind", "")))
        facts.append(Fact(f"{_plural(L, 'layer')}, {_plural(heads, 'attention head')}"
                          + (f", positions: {md_label(pos)}" if pos else "") + "."))
    return facts

#: The facts of :func:`model_facts` each view shows (by family; all of them, design choice), plus
#: view-specific ones from :func:`view_facts`.
def view_facts(slug: str, tr: Any, config: dict | None = None, task: Any = None) -> list[Fact]:
    """The facts a view page states about the current model: :func:`model_facts` plus, on the attention
    view, how this model scores (OSM similarity or query-key products) and the number of heads."""
    facts = model_facts(tr, config, task)
    if slug == "attention" and getattr(tr, "family", "") == "osm":
        facts.append(Fact("This OSMFormer has no query or key matrices: its scores are the state similarity "
                          "$\\mathrm{Re}\\,\\mathrm{tr}(H_i^* H_j)$ of the layer's input states, scaled."))
    return facts
