"""Which model kinds a view shows and how two kinds are related, read from the family records
(:mod:`geomlab.models.family`) and the model classes' flags (``attention``, ``recurrent``, ``baseline``),
never from a list of kinds of its own: a new kind appears on the views and among the related kinds of its
family once its class is registered.

The model registry is read when a view's kinds are asked for, not at import: listing the views (the app's
page list) imports no model code and no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

#: How a kind mixes positions (a model class flag) -> how another kind that mixes them the same way is
#: related to it, and the families whose kinds come first in that group (design choice: softmax attention
#: ranks the Transformer baselines first, then CEM, whose layer is a tied-weight Transformer layer, Xu et al.
#: arXiv 2605.07588; the other families follow in the order of ``FAMILIES``).
MIXING = (("recurrent", "also recurrent", ()), ("attention", "also attention-based", ("transformer", "cem")))


def kinds_where(test: Callable[[type], bool], first: Sequence[str] = ()) -> list[str]:
    """The registered kinds whose model class passes ``test``, family by family: the families named in
    ``first`` in that order, then the others in the order of ``FAMILIES``; each family's kinds in
    registration order (:func:`geomlab.models.kinds_of`). Raises ``ValueError`` for an unknown family name.
    Design choice."""
    from geomlab.models import kinds_of, model_class
    from geomlab.models.family import FAMILIES, family_named

    order = [family_named(name) for name in first] + [f for f in FAMILIES if f.name not in first]
    return [k for fam in order for k in kinds_of(fam) if test(model_class(k))]


def has_flag(kind: str, flag: str) -> bool:
    """Whether the model class of ``kind`` has the class flag ``flag`` (``"attention"``, ``"recurrent"``,
    ``"baseline"``); False for a kind that is not registered. Reads the model registry."""
    from geomlab.models import kinds, model_class

    return kind in kinds() and bool(getattr(model_class(kind), flag))


def is_geometric(cls: type) -> bool:
    """Whether the kind of model class ``cls`` records its paper family's geometry (not a ``"baseline"``
    trace: a baseline family's kinds and a paper's baselines, e.g. ``grassmann-attn``, record none)."""
    return cls.trace_family() != "baseline"


def geometric_kinds(family) -> list[str]:
    """The kinds of ``family`` (a :class:`~geomlab.models.family.Family` or its name) that record its
    geometry (:func:`is_geometric`), in registration order: the kinds its views are about."""
    from geomlab.models import kinds_of, model_class

    return [k for k in kinds_of(family) if is_geometric(model_class(k))]


@dataclass(frozen=True)
class Shows:
    """Which kinds a view shows, declared by family and class flag (design choice of each view).

    flag: a model class flag (``"attention"``): the view shows every kind whose class has it; empty: the
    geometric kinds (:func:`is_geometric`) of the families that list the view in ``Family.views``.
    first: names of the families whose kinds the view lists first, in this order (:func:`kinds_where`).
    prefer: a class flag whose kinds show the view best: they come first in :meth:`preferred` (the kinds to
    open the view on when any will do, e.g. a load benchmark's), the others after them; empty: no preference.
    """

    flag: str = ""
    first: tuple[str, ...] = ()
    prefer: str = ""

    def kinds(self, slug: str) -> tuple[str, ...]:
        """The kinds view ``slug`` shows, in the order its messages list them."""
        if self.flag:
            return tuple(kinds_where(lambda cls: getattr(cls, self.flag), self.first))
        return tuple(kinds_where(lambda cls: slug in cls.family.views and is_geometric(cls), self.first))

    def preferred(self, slug: str) -> tuple[str, ...]:
        """:meth:`kinds` of view ``slug``, those whose class has the flag ``prefer`` first (stable order)."""
        from geomlab.models import model_class

        kinds = self.kinds(slug)
        if not self.prefer:
            return kinds
        return tuple(sorted(kinds, key=lambda k: not getattr(model_class(k), self.prefer)))


def related_kinds(kind: str) -> dict[str, str]:
    """Model kinds related to ``kind``, most related first, each with how it is related: ``kind`` itself
    (``"same kind"``), then the other kinds of its family (``"same family"``: one paper's models, e.g.
    OSM-RNN and OSMFormer, Nunley arXiv 2602.18417; Grassmann flows and their attention baseline
    ``grassmann-attn``, Zhang arXiv 2512.19428; the Transformer baselines ``transformer`` and ``llama``),
    then the kinds that mix positions the same way (:data:`MIXING`, from the class flags: ``"also
    recurrent"``, a state carried token to token; ``"also attention-based"``, softmax attention over earlier
    positions). Kinds left out are unrelated.

    ``related_kinds("osm-rnn")`` -> ``{"osm-rnn": "same kind", "osmformer": "same family", "lstm": "also
    recurrent"}``. An unknown kind gets ``{kind: "same kind"}``. Used to choose a stand-in checkpoint when a
    view cannot show the chosen one, and Compare's second checkpoint. Design choice."""
    from geomlab.models import kinds, kinds_of, model_class

    out = {kind: "same kind"}
    if kind not in kinds():
        return out
    cls = model_class(kind)
    out.update({k: "same family" for k in kinds_of(cls.family) if k not in out})
    for flag, how, first in MIXING:
        if getattr(cls, flag):
            out.update({k: how for k in kinds_where(lambda c: getattr(c, flag), first) if k not in out})
    return out
