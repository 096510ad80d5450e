"""What ``osm-rnn`` and ``osmformer`` share: the state's group, token matrices, prototype readout, parameter
counting, and the budget search over ``d`` (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.geometry.groups import MatrixGroup, expm_taylor, expm_taylor_reference, from_real, get_group, real_embed
from geomlab.models.base import SequenceModel
from geomlab.models.budget import search_knobs
from geomlab.models.osm.config import OSMConfig
from geomlab.models.osm.geometry import RealifiedGroup, _ct, _group_exp_reference


class OSMBase(SequenceModel):
    """State on a group, token matrices, prototype readout: what ``osm-rnn`` and ``osmformer`` share.

    Attributes: ``group`` (the :class:`geomlab.geometry.groups.MatrixGroup`), ``geo`` (the group the arithmetic runs
    on: ``group`` itself, or a :class:`RealifiedGroup` for ``complex_mode="real"``).
    """

    config_class = OSMConfig

    def __init__(self, config: OSMConfig | dict[str, Any]):
        super().__init__(config)
        c = self.config
        V, d = int(c["vocab_size"]), int(c["d"])
        opts = {"block": int(c["block"])} if c["group"] == "O-block" else {}
        self.group = get_group(c["group"], d, **opts)  # GroupError (a ValueError) for bad names/sizes
        g = self.group
        self.geo = RealifiedGroup(g) if c["complex_mode"] == "real" and g.is_complex else g
        if c["complex_mode"] == "real" and not g.is_complex:
            self.geo = g  # real groups are already real: nothing to embed
        self.sim_scale = getattr(self.geo, "sim_scale", 1.0)
        # training mode: the fast exponential; eval mode: the reference arithmetic of earlier versions,
        # so traces and evaluations of saved checkpoints reproduce bit for bit (the two agree to float32 rounding)
        if c["expm"] == "taylor" or (c["expm"] == "auto" and (
                isinstance(self.geo, RealifiedGroup) or type(g).exp is MatrixGroup.exp)):
            self._exp_fast, self._exp_ref = expm_taylor, expm_taylor_reference
        else:
            self._exp_fast = self.geo.exp
            self._exp_ref = functools.partial(_group_exp_reference, self.geo)
        self.V, self.d, self.dim = V, d, g.dim
        self.cplx = g.is_complex  # native states are complex
        std_tok = c["token_init_std"] if c["token_init_std"] is not None else 1 / math.sqrt(d)
        std_pro = c["proto_init_std"] if c["proto_init_std"] is not None else 1 / math.sqrt(d)
        parts = 2 if self.cplx else 1
        if c["token_param"] == "coords":
            self.token_coords = nn.Parameter(std_tok * torch.randn(V, g.dim))
        else:  # full matrices, only their algebra part is used; scaled so the algebra part matches coords init
            full = torch.randn(V, d, d, parts).squeeze(-1) * std_tok * math.sqrt(2.0)
            self.token_matrix = nn.Parameter(full)
        if c["prototypes"] == "free":
            self.proto = nn.Parameter(std_pro * torch.randn(V, d, d, parts).squeeze(-1))
        elif c["prototypes"] == "support":  # the same draw as "free", kept where a state can be non-zero
            full = std_pro * torch.randn(V, d, d, parts)
            rows, cols = torch.nonzero(self.proto_support(), as_tuple=True)
            self.register_buffer("_support_rows", rows, persistent=False)
            self.register_buffer("_support_cols", cols, persistent=False)
            self.proto = nn.Parameter(full[:, rows, cols].squeeze(-1).contiguous())
        elif c["prototypes"] == "group":
            self.proto_coords = nn.Parameter(std_tok * torch.randn(V, g.dim))
        self.tau = nn.Parameter(torch.tensor(float(c["tau"])))
        self.bias = nn.Parameter(torch.zeros(V))

    def _exp(self, A: torch.Tensor) -> torch.Tensor:
        """``exp`` of algebra elements in the arithmetic representation: the fast path in training mode, the
        reference arithmetic (:func:`geomlab.geometry.groups.expm_taylor_reference`, or the group's ``eigh`` exp) in eval
        mode. Design choice."""
        return (self._exp_fast if self.training else self._exp_ref)(A)

    # -- conversions between the native group and the arithmetic one ---------------------------------------------

    def _from_params(self, X: torch.Tensor) -> torch.Tensor:
        """A stored real ``(…, d, d[, 2])`` tensor as a native ``(…, d, d)`` matrix."""
        return torch.view_as_complex(X.contiguous()) if self.cplx else X

    def _to_geo(self, X: torch.Tensor) -> torch.Tensor:
        """Native matrix -> the arithmetic representation (realified for complex_mode='real')."""
        return real_embed(X) if isinstance(self.geo, RealifiedGroup) else X

    def _to_native(self, X: torch.Tensor) -> torch.Tensor:
        return from_real(X) if isinstance(self.geo, RealifiedGroup) else X

    def _flat(self, X: torch.Tensor) -> torch.Tensor:
        """``(…, n, n)`` -> real ``(…, F)`` with ``flat(A) . flat(B) = Re tr(A^* B) / sim_scale``."""
        if X.is_complex():
            return torch.view_as_real(X).flatten(-3)
        return X.flatten(-2)

    def _unflat(self, v: torch.Tensor) -> torch.Tensor:
        n = self.geo.d
        if self.geo.is_complex:
            return torch.view_as_complex(v.reshape(*v.shape[:-1], n, n, 2).contiguous())
        return v.reshape(*v.shape[:-1], n, n)

    # -- tokens and readout ------------------------------------------------------------------------------------------

    def token_generators(self) -> torch.Tensor:
        """Algebra elements ``A_v``, native ``(V, d, d)``."""
        if self.config["token_param"] == "coords":
            return self.group.from_coords(self.token_coords)
        return self.group.proj(self._from_params(self.token_matrix))

    def token_matrices(self) -> torch.Tensor:
        """``M_v = exp(A_v)`` in the arithmetic representation, ``(V, n, n)``."""
        return self._exp(self._to_geo(self.token_generators()))

    def free_prototypes(self) -> torch.Tensor:
        """Native ``(V, d, d)`` prototypes of ``prototypes="free"`` or ``"support"`` (the stored values placed on
        :meth:`proto_support`, zeros elsewhere). Raises ``ValueError`` for group or tied prototypes."""
        kind = self.config["prototypes"]
        if kind == "free":
            return self._from_params(self.proto)
        if kind != "support":
            raise ValueError(f"prototypes={kind!r} are not free values")
        vals = torch.view_as_complex(self.proto) if self.cplx else self.proto  # (V, nnz)
        P = vals.new_zeros(self.V, self.d, self.d)
        P[:, self._support_rows, self._support_cols] = vals
        return P

    def _prototypes(self, M: torch.Tensor) -> torch.Tensor:
        kind = self.config["prototypes"]
        if kind in ("free", "support"):
            return self._to_geo(self.free_prototypes())
        if kind == "group":
            return self._exp(self._to_geo(self.group.from_coords(self.proto_coords)))
        return M

    def readout(self, H: torch.Tensor, M: torch.Tensor, pad: int = 0) -> torch.Tensor:
        """``tau Re tr(H^* P_v) + b_v``: ``H`` ``(…, n, n)`` -> logits ``(…, V)``. ``pad``: ``H`` carries
        ``pad`` extra rows and columns (:meth:`OSMFormer._pad_frame`); the prototypes are zero-padded to match."""
        P = self._prototypes(M)
        if pad:
            P = F.pad(P, (0, pad, 0, pad))
        return self.tau * self.sim_scale * (self._flat(H) @ self._flat(P).mT) + self.bias

    # -- parameters ----------------------------------------------------------------------------------------------

    @property
    def no_weight_decay(self) -> set[str]:
        """Names of parameters the trainer must not weight-decay: everything but the token and prototype tables.
        Decay acts on the token generators (algebra coordinates or full matrices) and on the prototypes (their
        generators, or free matrices), as a Transformer's decays its embedding table: it pulls each token
        matrix toward the identity. Mixing maps (initialised at ``eta I``, not 0), temperatures, attention
        scales and positions are exempt. Source: design choice (docs/osm.md, "Regularisation")."""
        return {n for n, _ in self.named_parameters() if not n.startswith(("token_", "proto"))}


    def effective_param_count(self) -> int:
        """Trainable degrees of freedom.

        Every stored value counts once, except a token table stored as full matrices
        (``token_param="matrix"``): of each ``d x d`` (complex: ``2 d^2`` reals) matrix only its
        algebra part is used (``proj``), so it counts ``dim`` per token (the symmetric / Hermitian half gets
        zero gradient); and free prototypes of a group whose elements are sparse (T^d: diagonal,
        O-block: block-diagonal): the readout ``Re tr(H^* P_v)`` reads only the entries of ``P_v`` where a
        state can be non-zero (:meth:`proto_support`), so the others count nothing (they get zero gradient;
        at T^26 that is 85.8K of 89.2K prototype values). ``identity`` mixing has no parameter.
        ``count_params(model, "stored")`` gives the plain ``numel`` sum.
        """
        total = sum(p.numel() for p in self.parameters() if p.requires_grad)
        if self.config["token_param"] == "matrix":
            total -= self.token_matrix.numel() - self.V * self.dim
        if self.config["prototypes"] == "free":  # ("support" stores only what is read)
            unread = int((~self.proto_support()).sum())
            total -= self.V * unread * (2 if self.cplx else 1)
        return int(total)

    def proto_support(self) -> torch.Tensor:
        """Boolean ``(d, d)``: the entries where a state of the group can be non-zero, i.e. where the basis of
        the algebra or the identity is (the pattern is closed under products for every group here: full for
        O/SO/U/SU, the diagonal for T^d, the blocks for O-block). Design choice (the parameter count)."""
        basis = self.group.from_coords(torch.eye(self.dim, device="cpu"))  # cpu: also under a meta-device build
        return (basis.abs().sum(0) > 0) | torch.eye(self.d, dtype=torch.bool, device="cpu")

    def _direction(self, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """What the mixing needs of ``pull(H, X) = proj(H^* X)``: with ``linear`` mixing the unprojected
        ``H^* X`` (its ``to_coords`` already projects, so ``proj`` would be computed twice), else the pull."""
        raw = _ct(H) @ X
        return raw if self.config["mixing"] == "linear" else self.geo.proj(raw)

    def _check_tokens(self, tokens: torch.Tensor) -> None:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise ValueError(f"tokens must be a (B, T) LongTensor, got {getattr(tokens, 'shape', tokens)!r}")
        if not tokens.numel():
            return
        if tokens.device.type != "cpu":  # no host synchronisation on an accelerator: the check runs on the device
            torch._assert_async(((tokens >= 0) & (tokens < self.V)).all(), f"token ids must lie in [0, {self.V})")
            return
        lo, hi = torch.aminmax(tokens)
        if int(lo) < 0 or int(hi) >= self.V:
            raise ValueError(f"token ids must lie in [0, {self.V}), got range [{int(lo)}, {int(hi)}]")

    def _check_record(self, tokens: torch.Tensor) -> None:
        if tokens.dim() != 2 or tokens.shape[0] != 1:
            raise ValueError(f"record expects tokens of shape (1, T), got {tuple(tokens.shape)}")


def _budget_with_knobs(cls, fixed: dict, knobs, n_params: int, vocab_size: int) -> dict[str, Any]:
    """:func:`geomlab.models.budget.search_knobs` varying ``d`` (the sizes :func:`_valid_ds` allows up to 64)."""
    base = {**cls.default_config(), **fixed, "kind": cls.kind}
    return search_knobs(cls.kind, base, fixed, knobs, "d", lambda cfg: _valid_ds(cfg, range(2, 65)),
                        n_params, vocab_size)


def _valid_ds(base: dict, ds) -> list[int]:
    """The sizes ``d`` allowed by the group options in ``base`` (O-block: multiples of ``block``)."""
    if base.get("group") == "O-block" and base.get("block"):
        return [d for d in ds if d % int(base["block"]) == 0]
    heads = int(base.get("heads", 1) or 1)
    return [d for d in ds if d % heads == 0]
