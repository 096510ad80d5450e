"""Matrix Lie groups for the orthogonal-state models: O(d), SO(d), U(d), SU(d), T^d, O(b)^m.

Every group is a closed subgroup ``G`` of ``U(d)`` represented by ``(..., d, d)`` matrices, real
(float32/float64) for O, SO and O-block, complex (complex64/complex128) for U, SU and the torus T.
The Lie algebra ``g`` is represented by matrices of the same shape and dtype, or by ``dim`` real
coordinates in a basis orthonormal for ``inner(A, B) = Re tr(A^* B)``.

Source: Nunley, arXiv 2602.18417 (the groups, their projections, exponentials, coordinates, the
realification of U(d), the torus, block-diagonal O, ``pull``, drift and reprojection). Everything not stated
there is a documented design choice.

Conventions
-----------
* ``A^*`` is the conjugate transpose (the transpose for real groups).
* Tangents are left-trivialised: a step from ``H`` is ``H @ exp(A)`` with ``A`` in the algebra.
* Angles are in radians, in ``(-pi, pi]``.
* ``proj``, ``exp``, ``inner``, ``norm``, ``pull``, ``to_coords``, ``from_coords``, ``real_embed`` and
  ``from_real`` are differentiable (autograd) and run on any device; ``dist`` is differentiable with the
  gradient ``M log(M) / dist`` (0 at distance 0); ``log``, ``eigen_angles``, ``belongs`` and ``reproject`` are
  for analysis/maintenance and are not meant to be differentiated.
* Non-finite input: NaN/inf never reach LAPACK; ``eigen_angles``, ``log``, ``dist``, ``reproject``
  and ``exp`` give NaN for a matrix with a non-finite entry, ``belongs`` False, the elementwise/linear
  operations propagate NaN (docs/groups.md, "Non-finite input").

Errors
------
Bad input raises :class:`GroupError` (a ``ValueError``): wrong shape, wrong dtype (a real tensor for a
complex group or the reverse, integer tensors), unknown group name or option, a block size that does not
divide ``d``, the log of a ``det = -1`` orthogonal matrix.

Example
-------
>>> import torch
>>> from geomlab.geometry.groups import get_group
>>> g = get_group("SO", 3)
>>> A = g.proj(torch.randn(5, 3, 3))
>>> H = g.exp(A)
>>> bool(g.belongs(H).all())
True

Modules
-------
One module per group behind the same verbs (the layout of geotorch, one manifold per file):

* :mod:`~geomlab.geometry.groups.base`: :class:`MatrixGroup`, the verbs and the numerics the groups share.
* :mod:`~geomlab.geometry.groups.expm`: the matrix exponential (:func:`expm_skew`, :func:`expm_taylor`, the eval-mode
  :func:`expm_taylor_reference`).
* :mod:`~geomlab.geometry.groups.orthogonal` (O), :mod:`~geomlab.geometry.groups.special_orthogonal` (SO),
  :mod:`~geomlab.geometry.groups.unitary` (U, with :func:`real_embed` / :func:`from_real`),
  :mod:`~geomlab.geometry.groups.special_unitary` (SU), :mod:`~geomlab.geometry.groups.torus` (T, with
  :func:`angles_to_matrix` / :func:`matrix_to_angles`), :mod:`~geomlab.geometry.groups.block_orthogonal` (O-block).
* :mod:`~geomlab.geometry.groups.registry`: :func:`get_group` by name, :func:`all_groups`.
* ``_linalg``: :class:`GroupError` and the small private helpers.
"""

from geomlab.geometry.groups._linalg import GroupError
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.block_orthogonal import BlockOrthogonalGroup
from geomlab.geometry.groups.expm import EXP_METHODS, expm_skew, expm_taylor, expm_taylor_reference
from geomlab.geometry.groups.orthogonal import OrthogonalGroup
from geomlab.geometry.groups.registry import GROUP_NAMES, all_groups, get_group
from geomlab.geometry.groups.special_orthogonal import SpecialOrthogonalGroup
from geomlab.geometry.groups.special_unitary import SpecialUnitaryGroup
from geomlab.geometry.groups.torus import TorusGroup, angles_to_matrix, matrix_to_angles
from geomlab.geometry.groups.unitary import UnitaryGroup, from_real, real_embed

__all__ = [
    "GroupError",
    "MatrixGroup",
    "GROUP_NAMES",
    "get_group",
    "real_embed",
    "from_real",
    "angles_to_matrix",
    "expm_skew",
    "expm_taylor",
    "expm_taylor_reference",
    "all_groups",
    "EXP_METHODS",
    "matrix_to_angles",
    "OrthogonalGroup",
    "SpecialOrthogonalGroup",
    "UnitaryGroup",
    "SpecialUnitaryGroup",
    "TorusGroup",
    "BlockOrthogonalGroup",
]
