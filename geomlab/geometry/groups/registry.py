"""The groups by name: :data:`GROUP_NAMES`, :func:`get_group` (the constructor every caller uses, also to
rebuild a group from its ``spec``) and :func:`all_groups` (every kind, for tests and benchmarks)."""

from __future__ import annotations

from typing import Iterable

from geomlab.geometry.groups._linalg import GroupError
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.block_orthogonal import BlockOrthogonalGroup
from geomlab.geometry.groups.orthogonal import OrthogonalGroup
from geomlab.geometry.groups.special_orthogonal import SpecialOrthogonalGroup
from geomlab.geometry.groups.special_unitary import SpecialUnitaryGroup
from geomlab.geometry.groups.torus import TorusGroup
from geomlab.geometry.groups.unitary import UnitaryGroup

GROUP_NAMES = ("O", "SO", "U", "SU", "T", "O-block")
"""The names accepted by :func:`get_group`."""

_CLASSES = {
    "O": OrthogonalGroup,
    "SO": SpecialOrthogonalGroup,
    "U": UnitaryGroup,
    "SU": SpecialUnitaryGroup,
    "T": TorusGroup,
}


def get_group(name: str, d: int, **options) -> MatrixGroup:
    """Build a group by name: ``"O"``, ``"SO"``, ``"U"``, ``"SU"``, ``"T"`` or ``"O-block"`` (option ``block``).

    ``d`` is the matrix size (for T it is the torus dimension k). Raises :class:`GroupError` for an unknown
    name, a non-positive ``d``, an unknown option, or (O-block) a missing ``block`` / one that does not divide d.
    Source: Nunley, arXiv 2602.18417
    """
    if name not in GROUP_NAMES:
        raise GroupError(f"unknown group {name!r}; choose one of {', '.join(GROUP_NAMES)}")
    if name == "O-block":
        unknown = set(options) - {"block"}
        if unknown:
            raise GroupError(f"O-block: unknown option(s) {sorted(unknown)}; the only option is block")
        if "block" not in options:
            raise GroupError("O-block needs the option block (the block size b, dividing d)")
        return BlockOrthogonalGroup(d, options["block"])
    if options:
        raise GroupError(f"group {name!r} takes no options, got {sorted(options)}")
    return _CLASSES[name](d)


def all_groups(dims: Iterable[int] = (1, 2, 3, 4, 8)) -> list[MatrixGroup]:
    """Every group kind for each ``d`` in ``dims`` (O-block with b = 2 and b = d/2 where they divide d).
    Convenience for tests and benchmarks."""
    out: list[MatrixGroup] = []
    for d in dims:
        for name in ("O", "SO", "U", "SU", "T"):
            out.append(get_group(name, d))
        for b in sorted({2, d // 2} - {0}):
            if d % b == 0 and b < d:
                out.append(get_group("O-block", d, block=b))
    return out
