"""Model families, each declared once: a :class:`Family` record per paper (and one per baseline group) that
the model classes point to (``SequenceModel.family``). Everything that lists families or treats kinds by
family (the views a kind has, the trace it records, the figure drawn while it trains, the home page's cards,
the lessons) reads these records and the per-kind flags on the model classes, never its own list.

A family's kinds are the registered model classes that point to it, in registration order
(:func:`kinds_of`); a new kind in a known family is its model file plus ``family = <FAMILY>`` on its class.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    """One family of models.

    Attributes:
        name: short key (``"osm"``, ``"cem"``, ``"grassmann"``, ``"transformer"``, ``"recurrent"``).
        title: how pages name it (``"Orthogonal-state models"``).
        paper: the source, e.g. ``"Nunley, arXiv 2602.18417"``; empty for baselines.
        trace: the trace family its geometric kinds record (``"osm"``, ``"cem"``, ``"grassmann"`` or
            ``"baseline"``); a kind with ``baseline = True`` records a ``"baseline"`` trace whatever its family.
        views: slugs of the view pages about this family, its own geometry view first (empty for baselines).
        probe: ``(figure name, view slug)`` drawn while a run of a geometric kind of this family trains, or
            None (then a kind with attention shows its attention maps, design choice).
        lesson: the Tour's label of the family, or empty when no lesson is about it.
        summary: one paragraph for the home page (markdown), or empty.
    """

    name: str
    title: str
    paper: str = ""
    trace: str = "baseline"
    views: tuple[str, ...] = ()
    probe: tuple[str, str] | None = None
    lesson: str = ""
    summary: str = ""


OSM = Family(
    name="osm", title="Orthogonal-state models", paper="Nunley, arXiv 2602.18417", trace="osm",
    views=("trajectories", "tangents"), probe=("phase_circle", "trajectories"),
    lesson="OSM",
    summary=("**OSM-RNN** and **OSMFormer** keep the hidden state as a matrix *on a group* (orthogonal O(d), "
             "SO(d), unitary U(d), SU(d), the torus T, or block-orthogonal). Each token moves the state by "
             "exp(Φ) of an update Φ in the group's Lie algebra, so states never blow up or vanish."),
)
CEM = Family(
    name="cem", title="Causal energy minimisation", paper="Xu et al., arXiv 2605.07588", trace="cem",
    views=("energy",), probe=("energy_descent", "energy"), lesson="CEM",
    summary=("**CEM** reads a Transformer layer as a few gradient-descent steps on an energy. Running more "
             "recursion steps T at inference time should lower the energy further; the view flags any step "
             "where it rose."),
)
GRASSMANN = Family(
    name="grassmann", title="Grassmann flows", paper="Zhang, arXiv 2512.19428", trace="grassmann",
    views=("planes",), probe=("plane_distances", "planes"), lesson="Grassmann",
    summary=("**Grassmann** layers mix positions without attention: each token and an earlier one span a "
             "2-plane, encoded by its Plücker coordinates, and a gate blends that back into the stream."),
)
TRANSFORMER = Family(name="transformer", title="Transformer baselines")
RECURRENT = Family(name="recurrent", title="Recurrent baselines")

#: Every family, the papers' first (the order pages list them in).
FAMILIES: tuple[Family, ...] = (OSM, CEM, GRASSMANN, TRANSFORMER, RECURRENT)


def family_named(name: str) -> Family:
    """The family called ``name``; ``ValueError`` naming the known ones otherwise."""
    for fam in FAMILIES:
        if fam.name == name:
            return fam
    raise ValueError(f"unknown model family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")
