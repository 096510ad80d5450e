"""Orthogonal-state models on any subgroup of U(d): ``osm-rnn`` and ``osmformer``.

Source: J. Nunley, "Subgroups of U(d) Induce Natural RNN and Transformer Architectures",
arXiv 2602.18417.

Every state ``H`` is an element of a matrix group ``G`` from :mod:`geomlab.geometry.groups`; every update is
left-trivialised, ``H <- H exp(Phi)`` with ``Phi`` in the Lie algebra, and every direction is a
``pull(H, X) = proj(H^* X)`` toward a target. All group-specific math goes through the group object
(``proj``, ``exp``, ``pull``, ``to_coords``/``from_coords``, ``identity``), so O, SO, U, SU, T and O-block
train through this same code. U/SU/T use complex tensors for the states; attention and readout use the
real vector form ``[Re vec H, Im vec H]`` whose dot product is ``Re tr(A^* B)``.

Shared pieces (both kinds):

* Token matrices ``M_v = exp(A_v)``, computed once per forward for all ``V`` tokens. ``A_v`` is stored
  as algebra coordinates (``token_param="coords"``, default) or as a full matrix projected by ``proj``
  (``token_param="matrix"``; only the algebra part gets a gradient, see :meth:`OSMBase.effective_param_count`).
* Prototype readout ``logit_v = tau Re tr(H^* P_v) + b_v`` with ``prototypes`` ``free`` (any
  matrix), ``group`` (``P_v = exp(C_v)``) or ``tied`` (``P_v = M_v``) [inferred; free is the default].
* Tangent mixing ``Gamma``: ``identity`` (``Phi = eta * Delta`` with ``eta`` the fixed configured
  step), ``scalar`` (learnable ``eta``) or ``linear`` (a learnable ``dim x dim`` matrix on orthonormal
  algebra coordinates, initialised to ``eta I``).
* ``expm``: ``"auto"`` (default) uses :func:`expm_taylor` where the group's ``exp`` is the generic dense
  ``torch.linalg.matrix_exp`` (O, SO, U, SU) and the group's own ``exp`` where it has a structured one (T,
  O-block); ``"group"`` always uses the group's ``exp``; ``"taylor"`` always the Taylor series.
* ``complex_mode``: ``"native"`` (complex tensors) or ``"real"``: U/SU computed on the realification
  ``rho(X + iY) = [[X, -Y], [Y, X]]`` in real arithmetic; the two give the same logits.
"""

from geomlab.models.osm.base import OSMBase
from geomlab.models.osm.config import OSMConfig, OSMConfigError, OSMFormerConfig, OSMRNNConfig
from geomlab.models.osm.geometry import RealifiedGroup
from geomlab.models.osm.mixing import TangentMixing
from geomlab.models.osm.rnn import OSMRNN  # registered before the OSMFormer: the family lists the RNN first
from geomlab.models.osm.former import OSMFormer

__all__ = ["OSMConfig", "OSMConfigError", "OSMFormerConfig", "OSMRNNConfig", "RealifiedGroup", "TangentMixing",
           "OSMBase", "OSMRNN", "OSMFormer"]
