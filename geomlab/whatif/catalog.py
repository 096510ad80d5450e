"""The interventions one knob can drive: for each, which models it applies to, what its size means and its
range, and one call that applies it at a position (the app's "What if" panel, ``python -m geomlab``, notebooks).

Each entry adapts one intervention of this package to ``apply(name, model, tokens, position, size,
layer=..., head=..., slot=...)``; size 0 (or the model's own setting, for CEM's steps) is the plain run.
Design choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from geomlab.whatif.outcome import Outcome


@dataclass(frozen=True)
class Intervention:
    """One intervention as a knob: ``name`` (its key, in links), ``label`` (a short phrase), ``size_label``
    and ``unit`` (what the knob moves), ``lo``..``hi`` its range with ``step``, ``default`` the size a panel
    opens on, ``neutral`` the size that changes nothing, ``kinds`` the model kinds it applies to, ``takes``
    the page controls it reads (``layer``, ``head``, ``slot``), ``help`` one sentence."""

    name: str
    label: str
    size_label: str
    unit: str
    lo: float
    hi: float
    step: float
    default: float
    neutral: float
    kinds: tuple[str, ...]
    takes: tuple[str, ...]
    help: str
    run: Callable[..., Outcome]


def _steer(model, tokens, position, size, layer=0, **_):
    from geomlab.whatif.steer import steer_state

    return steer_state(model, tokens, layer=layer, position=position, direction="tangent", eps=size)


def _plane(model, tokens, position, size, layer=0, slot=0, **_):
    from geomlab.whatif.planes import rotate_plane

    return rotate_plane(model, tokens, layer=layer, position=position, slot=slot, angle=size)


def _steps(model, tokens, position, size, layer=0, **_):
    from geomlab.whatif.energy import energy_steps

    L = len(model.stack.layers)
    if not 0 <= layer < L:
        raise ValueError(f"layer {layer} outside 0..{L - 1}")
    trained = int(model.stack.steps)
    steps = [trained] * L
    steps[layer] = int(round(size))
    return energy_steps(model, tokens, steps=steps)


def _ablate(model, tokens, position, size, layer=0, head=0, **_):
    from geomlab.whatif.heads import ablate_head

    if size < 0.5:  # the knob's "off" end: the plain run, through the same code path
        out = ablate_head(model, tokens, layer=layer, head=head, mode="zero")
        return Outcome(out.tokens, out.before, out.before.copy(), out.position, "nothing ablated", {})
    return ablate_head(model, tokens, layer=layer, head=head, mode="zero")


INTERVENTIONS: dict[str, Intervention] = {i.name: i for i in (
    Intervention("steer", "steer the state along its group", "step ε along the layer's own update", "rad",
                 -5.0, 5.0, 0.1, 0.5, 0.0, ("osm-rnn", "osmformer"), ("layer",),
                 "H_t of the chosen layer at the cursor becomes H_t exp(ε X), X the layer's own update there "
                 "(normalised): the state stays on its group, the model runs on from it.", _steer),
    Intervention("rotate_plane", "move a plane along the Grassmannian", "angle of the move", "rad",
                 -1.57, 1.57, 0.05, 0.5, 0.0, ("grassmann",), ("layer", "slot"),
                 "The 2-plane of the pair (cursor, cursor − Δ) in the chosen layer and offset slot moves along "
                 "a geodesic of Gr(2, r) by this angle; the model runs on from its Plücker vector.", _plane),
    Intervention("energy_steps", "run the layer's energy descent for other steps", "recursion steps T of "
                 "the chosen layer", "steps", 0, 16, 1, 1, -1, ("cem",), ("layer",),
                 "The chosen layer descends its energy for T steps (the others keep theirs); T = 0 returns "
                 "its input.", _steps),
    Intervention("ablate_head", "ablate an attention head", "head ablated", "", 0, 1, 1, 1, 0,
                 ("transformer", "llama", "grassmann-attn", "cem"), ("layer", "head"),
                 "The chosen head's output is set to zero at every position of the chosen layer.", _ablate),
)}
"""Every knob-driven intervention by name."""


def model_kind(model: Any) -> str:
    """The registry kind of ``model`` (``model.config["kind"]``, else its class's ``kind``); ``""`` unknown."""
    config = getattr(model, "config", None) or {}
    return str(config.get("kind") or getattr(type(model), "kind", "") or "")


def available(model: Any) -> list[Intervention]:
    """The interventions that apply to ``model``'s kind, in :data:`INTERVENTIONS` order."""
    kind = model_kind(model)
    return [i for i in INTERVENTIONS.values() if kind in i.kinds]


def neutral_size(name: str, model: Any) -> float:
    """The size at which intervention ``name`` changes nothing on ``model`` (CEM's steps: the trained T)."""
    spec = INTERVENTIONS[name]
    if name == "energy_steps":
        return float(int(model.stack.steps))
    return float(spec.neutral)


def apply(name: str, model: Any, tokens: torch.Tensor, position: int, size: float, **controls: Any) -> Outcome:
    """Apply intervention ``name`` of size ``size`` at ``position`` of ``tokens`` (``(T,)`` ids) and return the
    :class:`Outcome`. ``controls``: the page's ``layer``, ``head``, ``slot`` (others ignored; missing ones are
    0). Raises ``KeyError`` for an unknown name, ``ValueError`` when it does not apply to the model or a value
    is out of range (the message says which)."""
    spec = INTERVENTIONS[name]
    if model_kind(model) not in spec.kinds:
        kind = model_kind(model) or "model of unknown kind"
        raise ValueError(f"{spec.label!r} does not apply to {'an' if kind[0] in 'aeiou' else 'a'} {kind} "
                         f"(it applies to {', '.join(spec.kinds)})")
    if not spec.lo <= float(size) <= spec.hi:
        raise ValueError(f"{spec.size_label} {size} is outside {spec.lo}..{spec.hi}")
    if float(spec.step).is_integer() and not float(size).is_integer():
        raise ValueError(f"{spec.size_label}: {size} is not a whole number (the knob takes steps of {spec.step:g})")
    kw = {k: int(controls.get(k) or 0) for k in spec.takes}
    return spec.run(model, tokens, int(position), float(size), **kw)
