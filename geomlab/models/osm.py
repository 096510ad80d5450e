"""Orthogonal-state models on any subgroup of U(d): ``osm-rnn`` and ``osmformer``.

Source: J. Nunley, "Subgroups of U(d) Induce Natural RNN and Transformer Architectures",
arXiv:2602.18417, as written up in the paper notes ``osm.md`` (section numbers below refer to them).

Every state ``H`` is an element of a matrix group ``G`` from :mod:`geomlab.groups`; every update is
left-trivialised, ``H <- H exp(Phi)`` with ``Phi`` in the Lie algebra (§2.3, §7.4), and every direction is a
``pull(H, X) = proj(H^* X)`` toward a target (§2.2). All group-specific math goes through the group object
(``proj``, ``exp``, ``pull``, ``to_coords``/``from_coords``, ``identity``), so O, SO, U, SU, T and O-block
train through this same code. U/SU/T use complex tensors for the states; attention and readout use the
real vector form ``[Re vec H, Im vec H]`` whose dot product is ``Re tr(A^* B)``.

Shared pieces (both kinds):

* Token matrices ``M_v = exp(A_v)`` (§2.1), computed once per forward for all ``V`` tokens. ``A_v`` is stored
  as algebra coordinates (``token_param="coords"``, default) or as a full matrix projected by ``proj``
  (``token_param="matrix"``; only the algebra part gets a gradient, see :meth:`OSMBase.effective_param_count`).
* Prototype readout ``logit_v = tau Re tr(H^* P_v) + b_v`` (§2.8) with ``prototypes`` ``free`` (any
  matrix), ``group`` (``P_v = exp(C_v)``) or ``tied`` (``P_v = M_v``) [inferred; free is the default].
* Tangent mixing ``Gamma`` (§2.4): ``identity`` (``Phi = eta * Delta`` with ``eta`` the fixed configured
  step), ``scalar`` (learnable ``eta``) or ``linear`` (a learnable ``dim x dim`` matrix on orthonormal
  algebra coordinates, initialised to ``eta I``).
* ``expm``: ``"auto"`` (default) uses :func:`expm_taylor` where the group's ``exp`` is the generic dense
  ``torch.linalg.matrix_exp`` (O, SO, U, SU) and the group's own ``exp`` where it has a structured one (T,
  O-block); ``"group"`` always uses the group's ``exp``; ``"taylor"`` always the Taylor series.
* ``complex_mode``: ``"native"`` (complex tensors) or ``"real"``: U/SU computed on the realification
  ``rho(X + iY) = [[X, -Y], [Y, X]]`` in real arithmetic (§4.4); the two give the same logits.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.groups import (_PAD_TO, MatrixGroup, OrthogonalGroup, SpecialOrthogonalGroup, expm_taylor,
                             expm_taylor_reference, from_real, get_group, real_embed)
from geomlab.models import register
from geomlab.models.base import SequenceModel
from geomlab.models.osm_rnn_fast import fused_states, pad, padding_identity, skew_recurrence_forward
from geomlab.models.budget import search_knobs


class OSMConfigError(ValueError):
    """An invalid OSM model configuration (unknown option value, bad size)."""


# ----------------------------------------------------------------------------------------------------------------------
# numerics
# ----------------------------------------------------------------------------------------------------------------------


def _ct(X: torch.Tensor) -> torch.Tensor:
    """Conjugate transpose of the last two axes."""
    return X.mT.conj() if X.is_complex() else X.mT


def _group_exp_reference(geo, A: torch.Tensor) -> torch.Tensor:
    """The group's ``exp`` with the algorithm its ``"auto"`` chose before issue 17 (``eigh`` on CPU)."""
    if isinstance(geo, MatrixGroup):
        ok = A.device.type == "cpu" and A.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128)
        return geo.exp(A, method="eigh" if ok else "matrix_exp")
    return geo.exp(A)


class RealifiedGroup:
    """A complex group (U, SU) acting on its realification ``rho(X + iY) = [[X, -Y], [Y, X]]`` (§4.4).

    Same interface subset as :class:`geomlab.groups.MatrixGroup` that the models use (``d`` is ``2 d_base``,
    ``dim`` and coordinates are the base group's): ``proj(W) = rho(base.proj(from_real(W)))`` (the
    orthogonal projection, since ``rho`` is a scaled isometry), ``exp`` = real ``matrix_exp`` / Taylor on
    ``2d x 2d``, ``pull(H, X) = proj(H^T X)``. ``Re tr(A^* B) = tr(rho(A)^T rho(B)) / 2``, so callers scale
    similarities by :attr:`sim_scale` ``= 1/2``. Source: osm.md §4.4; the wrapper is a design choice.
    """

    is_complex = False
    sim_scale = 0.5

    def __init__(self, base: MatrixGroup):
        if not base.is_complex:
            raise OSMConfigError(f"complex_mode='real' needs a complex group (U, SU, T), got {base.name}")
        self.base = base
        self.name = base.name
        self.d = 2 * base.d
        self.dim = base.dim

    def proj(self, W: torch.Tensor) -> torch.Tensor:
        return real_embed(self.base.proj(from_real(W)))

    def pull(self, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return self.proj(H.mT @ X)

    def exp(self, A: torch.Tensor) -> torch.Tensor:
        return torch.linalg.matrix_exp(A)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        return self.base.to_coords(from_real(A))

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        return real_embed(self.base.from_coords(c))

    def identity(self, *batch, dtype=None, device=None) -> torch.Tensor:
        eye = torch.eye(self.d, dtype=dtype or torch.float32, device=device)
        return eye.expand(*batch, self.d, self.d).clone()


# ----------------------------------------------------------------------------------------------------------------------
# building blocks
# ----------------------------------------------------------------------------------------------------------------------


MIXINGS = ("identity", "scalar", "linear")
POSITIONS = ("alibi", "rotation", "none")
PROTOTYPES = ("free", "group", "tied")


class _SkewMixing(torch.autograd.Function):
    """O / SO linear mixing on flattened ``n x n`` matrices ``v`` ``(N, n^2)``: ``c = v[upper] - v[lower]``
    (``sqrt 2 * to_coords``), ``h = (c W^T) / 2``, ``out = [h, -h, 0][back]`` (``from_coords(W c / sqrt 2)``).
    The map is ``out = D^T W D v / 2`` with ``D`` the gather-and-subtract, so the backward is gathers as well:
    ``dh = g[upper] - g[lower]``, ``dW = dh^T c / 2``, ``dv = [dc, -dc, 0][back]`` with ``dc = dh W / 2`` (no
    scatter, fill or negation passes of autograd's index backward). Design choice (issue 17)."""

    @staticmethod
    def forward(ctx, v, weight, upper, lower, back):
        c = v.index_select(-1, upper) - v.index_select(-1, lower)
        h = (c @ weight.mT) * 0.5
        ctx.save_for_backward(c, weight, upper, lower, back)
        return torch.cat([h, -h, h.new_zeros(h.shape[0], 1)], dim=-1).index_select(-1, back)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        c, weight, upper, lower, back = ctx.saved_tensors
        dh = (g.index_select(-1, upper) - g.index_select(-1, lower)) * 0.5
        dW = dh.mT @ c if ctx.needs_input_grad[1] else None
        dv = None
        if ctx.needs_input_grad[0]:
            dc = dh @ weight
            dv = torch.cat([dc, -dc, dc.new_zeros(dc.shape[0], 1)], dim=-1).index_select(-1, back)
        return dv, dW, None, None, None


class TangentMixing(nn.Module):
    """Tangent mixing ``Gamma: g -> g`` (§2.4).

    ``mode``: ``"identity"`` -> ``eta * Delta`` with ``eta`` fixed (a buffer, not trained); ``"scalar"`` ->
    ``eta * Delta`` with ``eta`` learnable (init ``step``); ``"linear"`` -> ``from_coords(W coords(Delta))``
    with ``W`` ``(dim, dim)`` learnable, initialised to ``step * I`` (so it starts equal to ``scalar``).
    ``forward(delta (..., d, d), geo) -> (..., d, d)`` in the algebra. Source: notes §2.4 [B] + init [I].
    """

    def __init__(self, mode: str, dim: int, step: float):
        super().__init__()
        self.mode = mode
        if mode == "identity":
            self.register_buffer("eta", torch.tensor(float(step)))
        elif mode == "scalar":
            self.eta = nn.Parameter(torch.tensor(float(step)))
        elif mode == "linear":
            self.weight = nn.Parameter(float(step) * torch.eye(dim))
        else:  # pragma: no cover - validated by the model
            raise OSMConfigError(f"mixing must be one of {MIXINGS}, got {mode!r}")

    def forward(self, delta: torch.Tensor, geo, block: int | None = None) -> torch.Tensor:
        """``block``: O/SO training only, ``delta`` ``(..., n, n)`` holds the group's ``block x block`` matrices
        in its top-left corner (a zero-padded frame, see :meth:`OSMFormer._run`); the result is padded alike."""
        if self.mode != "linear":
            return self.eta * delta
        if not self.training:  # eval mode: the reference arithmetic (see OSMBase._exp)
            return geo.from_coords(geo.to_coords(delta) @ self.weight.mT)
        if isinstance(geo, (OrthogonalGroup, SpecialOrthogonalGroup)) and not delta.is_complex():
            return self._skew_forward(delta, block)
        to_c, from_c = self.coordinate_maps(geo, delta.shape[-1], delta.dtype, delta.device)
        cplx = delta.is_complex()
        v = (torch.view_as_real(delta) if cplx else delta).flatten(-3 if cplx else -2)
        out = (v @ (to_c @ self.weight.mT)) @ from_c  # = flat(from_coords(to_coords(delta) @ W^T))
        if cplx:
            return torch.view_as_complex(out.unflatten(-1, (*delta.shape[-2:], 2)))
        return out.unflatten(-1, delta.shape[-2:])

    def _skew_forward(self, delta: torch.Tensor, block: int | None = None) -> torch.Tensor:
        """O / SO: ``to_coords`` (``sqrt 2`` times the upper triangle of ``skew(delta)``) and ``from_coords`` as
        ``index_select`` on the flattened matrices, the mixing as one ``(dim, dim)`` matmul. Design choice
        (issue 17): measured 2x faster forward + backward than the dense coordinate maps for 2048 17 x 17."""
        n = delta.shape[-1]
        b = block or n
        key = ("skew", n, b, str(delta.device))
        cache = self.__dict__.setdefault("_coord_cache", {})
        if key not in cache:
            r, c = torch.triu_indices(b, b, 1, device=delta.device)
            dim = r.numel()
            upper, lower = r * n + c, c * n + r
            back = torch.full((n * n,), 2 * dim, dtype=torch.long, device=delta.device)  # -> 0
            back[upper] = torch.arange(dim, device=delta.device)  # -> +c_k / sqrt 2
            back[lower] = dim + torch.arange(dim, device=delta.device)  # -> -c_k / sqrt 2
            cache[key] = (upper, lower, back)
        upper, lower, back = cache[key]
        v = delta.reshape(-1, n * n)
        return _SkewMixing.apply(v, self.weight, upper, lower, back).reshape(delta.shape)

    def coordinate_maps(self, geo, n: int, dtype: torch.dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
        """``to_coords`` and ``from_coords`` of ``geo`` as real matrices ``(F, dim)`` and ``(dim, F)`` on flattened
        ``n x n`` matrices (``F = n^2``, complex ``2 n^2`` as ``[Re, Im]`` pairs), built once per (group, dtype,
        device) from the images of the basis. Design choice (issue 17): two dense matmuls instead of an index
        gather and scatter per call, which cost 14% of an OSMFormer step."""
        key = (id(geo), n, dtype, str(device))
        cache = self.__dict__.setdefault("_coord_cache", {})
        if key not in cache:
            cplx = dtype.is_complex
            F_ = n * n * (2 if cplx else 1)
            real = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32
            with torch.no_grad():
                E = torch.eye(F_, dtype=real, device=device)
                basis = torch.view_as_complex(E.reshape(F_, n, n, 2)) if cplx else E.reshape(F_, n, n)
                to_c = geo.to_coords(basis)  # (F, dim): flat(A) @ to_c = to_coords(A), to_coords is real-linear
                Y = geo.from_coords(torch.eye(to_c.shape[-1], dtype=real, device=device))
                from_c = (torch.view_as_real(Y) if cplx else Y).reshape(-1, F_)
            cache[key] = (to_c.contiguous(), from_c.contiguous(), geo)  # geo kept alive: its id stays unique
        to_c, from_c, _ = cache[key]
        return to_c, from_c

    def dense(self, geo, n: int, dtype: torch.dtype, device) -> torch.Tensor:
        """The map as one real matrix ``K`` ``(F, F)`` on flattened matrices (``F = n^2``, complex ``2 n^2``
        as ``[Re, Im]`` pairs): ``flat(Gamma(proj(Y))) = flat(Y) @ K`` for any ``Y``. Built by applying the
        mixing to the ``F`` basis matrices (design choice: one matmul per RNN step instead of coordinates)."""
        cplx = dtype.is_complex
        F_ = n * n * (2 if cplx else 1)
        real = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32
        E = torch.eye(F_, dtype=real, device=device)
        basis = torch.view_as_complex(E.reshape(F_, n, n, 2)) if cplx else E.reshape(F_, n, n)
        out = self(geo.proj(basis), geo)
        return (torch.view_as_real(out) if cplx else out).reshape(F_, F_)

    def effective(self) -> int:
        return {"identity": 0, "scalar": 1, "linear": self.weight.numel() if self.mode == "linear" else 0}[self.mode]


# ----------------------------------------------------------------------------------------------------------------------
# the shared base
# ----------------------------------------------------------------------------------------------------------------------


class OSMBase(SequenceModel):
    """State on a group, token matrices, prototype readout: what ``osm-rnn`` and ``osmformer`` share.

    Attributes: ``group`` (the :class:`geomlab.groups.MatrixGroup`), ``geo`` (the group the arithmetic runs
    on: ``group`` itself, or a :class:`RealifiedGroup` for ``complex_mode="real"``).
    """

    _COMMON = {
        "group": "O",
        "d": 16,
        "block": None,
        "mixing": "linear",
        "prototypes": "free",
        "tau": 1.0,
        "token_init_std": None,
        "proto_init_std": None,
        "token_param": "coords",
        "complex_mode": "native",
        "expm": "auto",
    }

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        c = self.config
        V, d = int(c["vocab_size"]), int(c["d"])
        if V < 1 or d < 1:
            raise OSMConfigError(f"vocab_size and d must be positive, got {V} and {d}")
        for key, allowed in (("mixing", MIXINGS), ("prototypes", PROTOTYPES), ("token_param", ("coords", "matrix")),
                             ("complex_mode", ("native", "real")), ("expm", ("auto", "group", "taylor"))):
            if c[key] not in allowed:
                raise OSMConfigError(f"{key} must be one of {allowed}, got {c[key]!r}")
        if c["group"] != "O-block" and c["block"] is not None:
            raise OSMConfigError(f"block is only an option of group 'O-block', got group {c['group']!r}")
        if c["group"] == "O-block" and c["block"] is None:
            raise OSMConfigError("group 'O-block' needs a block size: config key 'block'")
        opts = {"block": int(c["block"])} if c["group"] == "O-block" else {}
        self.group = get_group(c["group"], d, **opts)  # GroupError (a ValueError) for bad names/sizes
        g = self.group
        self.geo = RealifiedGroup(g) if c["complex_mode"] == "real" and g.is_complex else g
        if c["complex_mode"] == "real" and not g.is_complex:
            self.geo = g  # real groups are already real: nothing to embed
        self.sim_scale = getattr(self.geo, "sim_scale", 1.0)
        # training mode: the fast exponential (issue 17); eval mode: the reference arithmetic of earlier versions,
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
        elif c["prototypes"] == "group":
            self.proto_coords = nn.Parameter(std_tok * torch.randn(V, g.dim))
        self.tau = nn.Parameter(torch.tensor(float(c["tau"])))
        self.bias = nn.Parameter(torch.zeros(V))

    def _exp(self, A: torch.Tensor) -> torch.Tensor:
        """``exp`` of algebra elements in the arithmetic representation: the fast path in training mode, the
        reference arithmetic (:func:`geomlab.groups.expm_taylor_reference`, or the group's ``eigh`` exp) in eval
        mode. Design choice (issue 17)."""
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
        """``M_v = exp(A_v)`` in the arithmetic representation, ``(V, n, n)`` (§2.1)."""
        return self._exp(self._to_geo(self.token_generators()))

    def _prototypes(self, M: torch.Tensor) -> torch.Tensor:
        kind = self.config["prototypes"]
        if kind == "free":
            return self._to_geo(self._from_params(self.proto))
        if kind == "group":
            return self._exp(self._to_geo(self.group.from_coords(self.proto_coords)))
        return M

    def readout(self, H: torch.Tensor, M: torch.Tensor, pad: int = 0) -> torch.Tensor:
        """``tau Re tr(H^* P_v) + b_v``: ``H`` ``(…, n, n)`` -> logits ``(…, V)`` (§2.8). ``pad``: ``H`` carries
        ``pad`` extra rows and columns (:meth:`OSMFormer._pad_frame`); the prototypes are zero-padded to match."""
        P = self._prototypes(M)
        if pad:
            P = F.pad(P, (0, pad, 0, pad))
        return self.tau * self.sim_scale * (self._flat(H) @ self._flat(P).mT) + self.bias

    # -- parameters ----------------------------------------------------------------------------------------------

    @property
    def no_weight_decay(self) -> set[str]:
        """Names of parameters the trainer must not weight-decay: algebra coordinates and full token matrices
        (decay would shrink every generator toward the identity, notes §5.3), mixing maps (initialised at
        ``eta I``, not 0), temperatures and positions (notes §7.10)."""
        return {n for n, _ in self.named_parameters() if not n.startswith("proto") or n == "proto_coords"}


    def effective_param_count(self) -> int:
        """Trainable degrees of freedom.

        Every stored value counts once, except a token table stored as full matrices
        (``token_param="matrix"``): of each ``d x d`` (complex: ``2 d^2`` reals) matrix only its
        algebra part is used (``proj``), so it counts ``dim`` per token (the symmetric / Hermitian half gets
        zero gradient, notes §7.6). ``identity`` mixing has no parameter. ``count_params(model, "stored")``
        gives the plain ``numel`` sum.
        """
        total = sum(p.numel() for p in self.parameters() if p.requires_grad)
        if self.config["token_param"] == "matrix":
            total -= self.token_matrix.numel() - self.V * self.dim
        return int(total)

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


# ----------------------------------------------------------------------------------------------------------------------
# OSM-RNN
# ----------------------------------------------------------------------------------------------------------------------


@register
class OSMRNN(OSMBase):
    """OSM-RNN (kind ``osm-rnn``): ``H_{t+1} = H_t exp(Phi_t)`` with ``H_0 = I`` (§3.1).

    ``Phi_t = Gamma(pull(H_t, M_{x_t}))`` (``rnn_input="pull"``, default: the state is pulled toward the
    current token along the geodesic-like direction of §2.2), optionally ``+ Gamma_tok(A_{x_t})``
    (``rnn_input="pull+token"``: the group product of token generators, §3.1 "richer choices"), both [I].
    Logits at ``t`` are the readout of ``H_{t+1}`` (after consuming ``x_t``), so they predict ``x_{t+1}``.

    Config keys (defaults in :meth:`default_config`): ``group``, ``d``, ``block`` (O-block only),
    ``mixing`` (identity|scalar|linear), ``step`` (eta: mixing step / init of ``eta I``), ``rnn_input``,
    ``token_step`` (init of Gamma_tok), ``prototypes`` (free|group|tied), ``tau`` (readout temperature init),
    ``token_init_std`` / ``proto_init_std`` (None = ``1/sqrt(d)``), ``token_param``, ``complex_mode``, ``expm``.
    Shapes: ``tokens (B, T) long -> logits (B, T, V) float32``. A loop over positions (the recurrence is
    sequential): in training mode on O/SO, float32, CPU, one fused autograd node with a hand-written backward
    (:mod:`geomlab.models.osm_rnn_fast`, issue 17); in eval mode and otherwise the reference loop of
    :meth:`_run`. Raises :class:`OSMConfigError` / ``GroupError`` (ValueErrors) for bad config.
    """

    kind = "osm-rnn"

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        return {**cls._COMMON, "d": 17, "step": 0.5, "rnn_input": "pull", "token_step": 1.0}

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d`` to meet the effective-parameter budget (±5%); keys in ``fixed`` are kept. If no ``d``
        fits with the defaults, the unfixed ``prototypes`` and then ``rnn_input`` are varied too (in that
        order of preference: e.g. 50K at V = 65 has no free-prototype ``d``: d = 17 gives 46.2K, d = 18
        54.5K, so it becomes d = 19 with group prototypes, 51.5K)."""
        knobs = [("prototypes", PROTOTYPES), ("rnn_input", ("pull", "pull+token"))]
        return _budget_with_knobs(cls, fixed, knobs, n_params, vocab_size)

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        c = self.config
        if c["rnn_input"] not in ("pull", "pull+token"):
            raise OSMConfigError(f"rnn_input must be 'pull' or 'pull+token', got {c['rnn_input']!r}")
        self.mix = TangentMixing(c["mixing"], self.dim, c["step"])
        self.mix_tok = TangentMixing(c["mixing"], self.dim, c["token_step"]) if c["rnn_input"] == "pull+token" else None

    def _run(self, tokens: torch.Tensor, rec: dict | None) -> torch.Tensor:
        self._check_tokens(tokens)
        B, T = tokens.shape
        ref = self.token_coords if hasattr(self, "token_coords") else self.token_matrix
        if self._fused(ref.dtype, ref.device):
            return self._run_fused(tokens, rec)
        A = self._to_geo(self.token_generators())
        M = self._exp(A)
        H = self.geo.identity(B, dtype=M.dtype, device=ref.device)
        n, cplx = M.shape[-1], M.is_complex()
        # training on O/SO: the mixing's index-select path (a dim x dim matmul per step); eval mode keeps the
        # reference arithmetic, one dense F x F matmul per step (see OSMBase._exp)
        skew = isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup)) and self.mix.mode == "linear"
        if skew and self.training:
            def mix(delta):
                return self.mix(delta, self.geo)
        else:  # one F x F matmul per step
            K = self.mix.dense(self.geo, n, M.dtype, M.device)
            flat = (lambda Z: torch.view_as_real(Z).reshape(B, -1)) if cplx else (lambda Z: Z.reshape(B, -1))
            unflat = ((lambda v: torch.view_as_complex(v.reshape(B, n, n, 2))) if cplx
                      else (lambda v: v.reshape(B, n, n)))

            def mix(delta):
                return unflat(flat(delta) @ K)
        drive = self.mix_tok(A, self.geo) if self.mix_tok is not None else None  # (V, n, n), once
        # the inputs of every step gathered once (one index and one backward instead of T), then unbound
        inputs = M[tokens].unbind(1)
        drives = drive[tokens].unbind(1) if drive is not None else None
        states, raws, phis = [], [], []
        for t in range(T):
            delta = _ct(H) @ inputs[t]
            phi = mix(delta)
            if drives is not None:
                phi = phi + drives[t]
            H = H @ self._exp(phi)
            states.append(H)
            if rec is not None:
                raws.append(self.geo.proj(delta))
                phis.append(phi)
        return self._finish(tokens, rec, M, states, raws, phis)

    def _fused(self, dtype: torch.dtype, device) -> bool:
        """Whether this forward takes :mod:`geomlab.models.osm_rnn_fast`: training mode, O/SO, the Taylor
        exponential, float32 on CPU (it reads one norm per step; other devices and dtypes keep the loop)."""
        return (self.training and isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup))
                and self._exp_fast is expm_taylor and dtype == torch.float32 and device.type == "cpu")

    def _run_fused(self, tokens, rec) -> torch.Tensor:
        """The recurrence as one fused autograd node (design choice, issue 17): same mathematics as the loop
        of :meth:`_run`, the rounding of :func:`geomlab.models.osm_rnn_fast.skew_recurrence_forward`. Token
        matrices and group prototypes are exponentiated in one call; states run at the padded size
        ``diag(H, I)`` (:data:`geomlab.models.osm_rnn_fast.PAD_TO`), read out against ``diag(P, 0)``."""
        A = self.token_generators()
        V, n = A.shape[0], A.shape[-1]
        kind = self.config["prototypes"]
        gens = torch.cat([A, self.group.from_coords(self.proto_coords)]) if kind == "group" else A
        both = self._exp(pad(gens, group=False))  # exp(diag(A, 0)) = diag(exp A, I): the padded inputs directly
        Mp = both[:V]
        if kind == "free":
            Pp = pad(self.proto, group=False)
        else:  # group or tied prototypes: diag(P, I) - diag(0, I)
            Pp = (both[V:] if kind == "group" else Mp) - padding_identity(n, A.dtype, A.device)
        mix = self.mix
        W = mix.weight if mix.mode == "linear" else mix.eta * torch.eye(self.dim, dtype=A.dtype, device=A.device)
        Dv = pad(self.mix_tok(A, self.geo), group=False) if self.mix_tok is not None else None
        if rec is None:
            Hs = fused_states(Mp, tokens.T, W, Dv)  # (T, B, m, m), time-major
        else:
            got: dict = {}
            D = Dv[tokens.T] if Dv is not None else None
            Hs = skew_recurrence_forward(Mp[tokens.T], W, D, record=got)
            rec.update(states=Hs[:, 0, :n, :n][None], inputs=Mp[tokens[0], :n, :n],
                       tangents_raw=got["raw"][:, 0, :n, :n][None, None], tangents=got["phi"][:, 0, :n, :n][None, None])
        # the readout of diag(H, I) against diag(P, 0) is that of H against P: no copy of the top-left blocks
        return (self.tau * self.sim_scale * (Hs.flatten(-2) @ Pp.flatten(-2).mT) + self.bias).transpose(0, 1)

    def _finish(self, tokens, rec, M, states, raws, phis) -> torch.Tensor:
        Hs = torch.stack(states, dim=1)  # (B, T, n, n)
        logits = self.readout(Hs, M)
        if rec is not None:
            nat = self._to_native
            rec.update(states=nat(Hs[0])[None], inputs=nat(M[tokens[0]]),
                       tangents_raw=nat(torch.stack(raws, 1)[0])[None, None],
                       tangents=nat(torch.stack(phis, 1)[0])[None, None])
        return logits

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._run(tokens, None)

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """For ``tokens`` ``(1, T)``: ``states`` ``(1, T, d, d)`` (after consuming token t), ``inputs``
        ``(T, d, d)`` (token matrices), ``tangents_raw`` / ``tangents`` ``(1, 1, T, d, d)`` (pull before /
        after mixing; ``tangents`` is what was exponentiated), ``logits`` ``(T, V)``. See docs/architecture.md."""
        self._check_record(tokens)
        rec: dict[str, torch.Tensor] = {}
        rec["logits"] = self._run(tokens, rec)[0]
        return rec


# ----------------------------------------------------------------------------------------------------------------------
# OSMFormer
# ----------------------------------------------------------------------------------------------------------------------


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


class _SelfAttention(torch.autograd.Function):
    """``softmax(scale * V V^T + mask) V`` for ``V`` ``(B, heads, T, F)``, a 0-d ``scale`` and an additive ``mask``
    broadcast to ``(B, heads, T, T)``, with a hand-written backward that uses ``q = k = v``: with
    ``dS = W o (dW - rowsum(dW o W))``, ``dW = dO V^T``, the input gradient is ``W^T dO + scale (dS + dS^T) V``
    (three matmuls; ``scaled_dot_product_attention`` treats q, k, v as three inputs: four, one of them on a
    transposed layout). Gradients also for ``scale`` (``sum dS o V V^T``) and ``mask`` (``dS`` summed to its
    shape). Same mathematics as the fused call (checked in tests/test_speed.py). Design choice (issue 17)."""

    @staticmethod
    def forward(ctx, v: torch.Tensor, scale: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        K = v @ v.mT
        W = torch.softmax(K * scale + mask, dim=-1)
        ctx.save_for_backward(v, scale, K, W)
        ctx.mask_shape = mask.shape
        return W @ v

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g: torch.Tensor):
        v, scale, K, W = ctx.saved_tensors
        dW = g @ v.mT
        dS = W * (dW - (dW * W).sum(-1, keepdim=True))
        dv = W.mT @ g
        dv += ((dS + dS.mT) * scale) @ v
        d_scale = (dS * K).sum().reshape(scale.shape) if ctx.needs_input_grad[1] else None
        d_mask = dS.sum_to_size(ctx.mask_shape) if ctx.needs_input_grad[2] else None
        return dv, d_scale, d_mask


@register
class OSMFormer(OSMBase):
    """OSMFormer (kind ``osmformer``): layers of attention + grounding steps on the group (§3.2).

    ``H^(0)_i = M_{x_i}`` (``position="rotation"``: ``R^i M_{x_i}`` with ``R = exp(A_pos)``, §2.6 option 2).
    Each layer ``l``:

    * attention (§2.6): ``S_ij = beta_l * Re tr(H_i^* H_j) * heads / d + bias_ij``, causal softmax over
      ``j <= i``, ``Hbar_i = sum_j alpha_ij H_j``, ``H_i <- H_i exp(Gamma^att_l(pull(H_i, Hbar_i)))``. Computed
      as one ``scaled_dot_product_attention`` with ``q = k = v = vec H`` (no Q/K/V maps). ``bias_ij`` is
      ``-m_l,h (i - j)`` for ``position="alibi"`` [I], zero otherwise.
    * grounding (§2.7): ``H_i <- H_i exp(Gamma^gr_l(pull(H_i, X_i)))`` with ``X_i`` the layer-0 state.

    Readout ``tau Re tr(H_i^* P_v) + b_v`` of ``H_i`` (rotation: of ``R^{-i} H_i``).

    ``heads`` > 1 [design choice]: the rows of ``H`` are split into ``heads`` equal groups; head ``k`` scores
    with the partial similarity ``Re tr(H_i^* P_k H_j)`` (``P_k`` the projector on its rows; for O-block with
    ``heads = d / block`` these are exactly the blocks) and averages only its rows of ``Hbar``.

    Config keys (defaults in :meth:`default_config`): ``group``, ``d``, ``block``, ``n_layers``, ``heads``,
    ``mixing``, ``attn_step`` / ``ground_step`` (eta of the two mixings per layer), ``position``
    (alibi|rotation|none), ``alibi_slope`` (init of the per-layer slope; heads get it times the standard
    geometric series ``2^(-8k/heads)`` normalised to start at 1), ``learn_alibi``, ``rotation_init_std``
    (std of the coordinates of ``A_pos``), ``beta`` (attention inverse temperature init, learned as
    ``log beta``; default 1.0 — the notes' ``sqrt(d)`` makes the self term, which scores ``beta`` and moves
    nothing, take almost all the attention mass at init and learned more slowly in our runs; None =
    ``sqrt(d)``), ``prototypes``, ``tau``, ``token_init_std``, ``proto_init_std``,
    ``token_param``, ``complex_mode``, ``expm``. Shapes: ``tokens (B, T) long -> logits (B, T, V)``.
    Raises :class:`OSMConfigError` / ``GroupError`` (ValueErrors) for bad config.
    """

    kind = "osmformer"

    @classmethod
    def default_config(cls) -> dict[str, Any]:
        return {**cls._COMMON, "n_layers": 2, "heads": 1, "attn_step": 1.0, "ground_step": 1.0,
                "position": "alibi", "alibi_slope": 0.5, "learn_alibi": True, "rotation_init_std": 0.1,
                "beta": 1.0}

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d`` to meet the effective-parameter budget (±5%); keys in ``fixed`` are kept. If no ``d``
        fits at the default depth, the unfixed ``n_layers`` (default, then 3, 1, 4, 5, 6) is varied, and
        only then ``prototypes`` (e.g. 91K at V = 65: d = 15 with 3 layers, 87.7K)."""
        knobs = [("prototypes", PROTOTYPES), ("n_layers", (2, 3, 1, 4, 5, 6))]
        return _budget_with_knobs(cls, fixed, knobs, n_params, vocab_size)

    def __init__(self, config: dict[str, Any]):
        super().__init__(config)
        c = self.config
        L, heads = int(c["n_layers"]), int(c["heads"])
        if L < 0:
            raise OSMConfigError(f"n_layers must be >= 0, got {L}")
        if heads < 1 or self.d % heads:
            raise OSMConfigError(f"heads={heads} must be >= 1 and divide d={self.d}")
        if c["position"] not in POSITIONS:
            raise OSMConfigError(f"position must be one of {POSITIONS}, got {c['position']!r}")
        self.n_layers, self.heads = L, heads
        self.mix_att = nn.ModuleList(TangentMixing(c["mixing"], self.dim, c["attn_step"]) for _ in range(L))
        self.mix_gr = nn.ModuleList(TangentMixing(c["mixing"], self.dim, c["ground_step"]) for _ in range(L))
        beta = float(c["beta"]) if c["beta"] is not None else math.sqrt(self.d)
        if beta <= 0:
            raise OSMConfigError(f"beta must be positive, got {beta}")
        self.log_beta = nn.Parameter(torch.full((L,), math.log(beta)))
        if c["position"] == "alibi":
            geo_series = torch.tensor([2.0 ** (-8.0 * k / heads) for k in range(heads)])
            slopes = float(c["alibi_slope"]) * geo_series.expand(L, heads).clone()
            if c["learn_alibi"]:
                self.alibi = nn.Parameter(slopes)
            else:
                self.register_buffer("alibi", slopes)
        elif c["position"] == "rotation":
            self.pos_coords = nn.Parameter(float(c["rotation_init_std"]) * torch.randn(self.dim))

    # -- pieces ----------------------------------------------------------------------------------------------------

    def _rotations(self, T: int, dtype, device) -> torch.Tensor:
        """``R^i = exp(i A_pos)`` for ``i = 0..T-1``, arithmetic representation ``(T, n, n)``."""
        i = torch.arange(T, dtype=self.pos_coords.dtype, device=device)
        A = self.group.from_coords(i[:, None] * self.pos_coords)
        return self._exp(self._to_geo(A))

    def _mask(self, layer: int, T: int, device, dtype) -> torch.Tensor:
        """Additive causal mask (heads, T, T): ``-m (i - j)`` (alibi) or 0 for ``j <= i``, ``-inf`` above."""
        pos = torch.arange(T, device=device)
        rel = (pos[:, None] - pos[None, :]).to(dtype)
        if self.config["position"] == "alibi":
            bias = -self.alibi[layer].to(dtype)[:, None, None] * rel
        else:
            bias = torch.zeros(self.heads, T, T, dtype=dtype, device=device)
        return bias.masked_fill(rel < 0, float("-inf"))

    def _heads_view(self, H: torch.Tensor) -> torch.Tensor:
        """``(B, T, n, n)`` -> real ``(B, heads, T, F/heads)``: the rows of each head, flattened.

        Heads own contiguous blocks of the native rows. Realified states (``complex_mode="real"``) keep
        native row ``r`` together with its imaginary twin ``r + d`` (rows ``[X_r, -Y_r]`` and ``[Y_r, X_r]``),
        so each head scores exactly what the native head scores (times ``1 / sim_scale``)."""
        B, T, n, _ = H.shape
        if isinstance(self.geo, RealifiedGroup):
            H = H.reshape(B, T, 2, n // 2, n).transpose(2, 3)  # (B, T, d, 2, 2d): row r beside row r + d
        X = torch.view_as_real(H) if H.is_complex() else H
        return X.reshape(B, T, self.heads, -1).transpose(1, 2)

    def _heads_merge(self, Y: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        B, h, T, f = Y.shape
        X = Y.transpose(1, 2).reshape(B, T, -1)
        n = like.shape[-1]
        if like.is_complex():
            return torch.view_as_complex(X.reshape(B, T, n, n, 2).contiguous())
        if isinstance(self.geo, RealifiedGroup):
            return X.reshape(B, T, n // 2, 2, n).transpose(2, 3).reshape(B, T, n, n)
        return X.reshape(B, T, n, n)

    def _attention_scale(self, layer: int) -> torch.Tensor:
        """The factor on the per-head dot product of the arithmetic states, ``beta_l * sim_scale * heads / d``."""
        return torch.exp(self.log_beta[layer]) * self.sim_scale * self.heads / self.group.d

    def attention_mean(self, H: torch.Tensor, layer: int, explicit: bool = False):
        """The attention target ``Hbar`` ``(B, T, n, n)`` and the weights ``(B, heads, T, T)`` (or None).

        ``explicit=False``: one fused ``scaled_dot_product_attention`` call (weights not returned);
        ``explicit=True``: the same with einsum and softmax, weights returned (for tests and recording).
        """
        v = self._heads_view(H)
        scale = self._attention_scale(layer)
        mask = self._mask(layer, H.shape[1], H.device, v.dtype)
        if not explicit:
            if self.training:  # training: the symmetric backward; eval: the reference arithmetic (see OSMBase._exp)
                out = _SelfAttention.apply(v, scale, mask)
            else:
                out = F.scaled_dot_product_attention(v * scale, v, v, attn_mask=mask, scale=1.0)
            return self._heads_merge(out, H), None
        scores = torch.einsum("bhif,bhjf->bhij", v * scale, v) + mask
        w = torch.softmax(scores, dim=-1)
        out = torch.einsum("bhij,bhjf->bhif", w, v)
        return self._heads_merge(out, H), w

    def _run(self, tokens: torch.Tensor, rec: dict | None) -> torch.Tensor:
        self._check_tokens(tokens)
        B, T = tokens.shape
        M = self.token_matrices()
        X = M[tokens]  # (B, T, n, n)
        R = None
        if self.config["position"] == "rotation":
            R = self._rotations(T, M.dtype, M.device)
            X = R @ X
        pad = self._pad_frame(rec)
        if pad:  # training on O/SO at an MKL-unfriendly size: diag(X, I) in a frame whose matmuls run faster
            n0 = X.shape[-1]
            X = F.pad(X, (0, pad, 0, pad))
            X.diagonal(dim1=-2, dim2=-1)[..., n0:] = 1.0
        H = X
        # the attention is recorded as what scores it (design choice: no T x T array is formed): the layer's
        # input states and a scale (the heads of the arithmetic states follow the native rows)
        if rec is not None:
            nat = self._to_native
            rec.update(inputs=nat(X[0]), states=[], tangents_raw=[], tangents=[])
        for layer in range(self.n_layers):
            Hbar, _ = self.attention_mean(H, layer)
            block = self.d if pad else None
            d_att = self._direction(H, Hbar)
            p_att = self.mix_att[layer](d_att, self.geo, block)
            H = H @ self._exp(p_att)
            d_gr = self._direction(H, X)
            p_gr = self.mix_gr[layer](d_gr, self.geo, block)
            H = H @ self._exp(p_gr)
            if rec is not None:
                proj = self.geo.proj
                rec["states"].append(nat(H[0]))
                rec["tangents_raw"].append(torch.stack([nat(proj(d_att[0])), nat(proj(d_gr[0]))]))
                rec["tangents"].append(torch.stack([nat(p_att[0]), nat(p_gr[0])]))
        Hr = _ct(R) @ H if R is not None else H
        logits = self.readout(Hr, M, pad)
        if rec is not None:
            n = self.group.d
            cdtype = rec["inputs"].dtype
            empty = {"states": (0, T, n, n), "tangents_raw": (0, 2, T, n, n), "tangents": (0, 2, T, n, n)}
            for key, shape in empty.items():
                if rec[key]:
                    rec[key] = torch.stack(rec[key])
                else:
                    rec[key] = torch.zeros(shape, dtype=cdtype, device=logits.device)
            if self.n_layers:
                rec["attention_scale"] = torch.stack([
                    self._attention_scale(l) / (self.sim_scale if isinstance(self.geo, RealifiedGroup) else 1.0)
                    for l in range(self.n_layers)]).to(logits.dtype)
            if self.config["position"] == "alibi" and self.n_layers:
                rec["attention_slopes"] = self.alibi.detach().to(logits.dtype).clone()
        return logits

    def _pad_frame(self, rec) -> int:
        """How many rows and columns the training states get: ``H`` is carried as ``diag(H, I)`` of size
        ``_PAD_TO[d]`` (e.g. 15 -> 16) so the pulls and products ``H exp(Phi)`` run at a size MKL handles well.
        Exact: ``diag(A, I) diag(B, I) = diag(AB, I)``, pulls are ``diag(H^T X, I)`` (skew part, the only part
        the mixing reads, ``diag(Delta, 0)``), ``exp(diag(Phi, 0)) = diag(exp Phi, I)``; attention scores gain
        the same constant ``pad`` in every row (the softmax ignores it) and ``Hbar = diag(Hbar, I)``; the
        prototypes are zero-padded. Only for O/SO with linear mixing (whose index path reads the block) and the
        Taylor exp, one head, no rotation positions, in training mode (eval keeps the reference arithmetic).
        Design choice (issue 17)."""
        if (rec is not None or not self.training or self.heads != 1 or self.config["position"] == "rotation"
                or self.config["mixing"] != "linear" or self._exp_fast is not expm_taylor or self.geo.is_complex
                or not isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup))):
            return 0
        return _PAD_TO.get(self.d, self.d) - self.d

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._run(tokens, None)

    @torch.no_grad()
    def record(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """For ``tokens`` ``(1, T)``: ``inputs`` ``(T, d, d)`` (layer-0 states, with the rotation if used),
        ``states`` ``(L, T, d, d)``, ``tangents_raw`` / ``tangents`` ``(L, 2, T, d, d)`` (substep 0 attention,
        1 grounding; ``tangents`` is what was exponentiated), ``logits`` ``(T, V)`` equal to
        ``model(tokens)[0]``, and the attention as what scores it (no ``T x T`` array): ``attention_scale``
        ``(L,)`` with scores ``S_ij = scale_l * <H_i, H_j>_head + bias_ij`` on the layer's input states (native
        rows split evenly into heads; layer 0 reads ``inputs``, layer l the ``states[l-1]``) and, with ALiBi,
        ``attention_slopes`` ``(L, heads)`` (bias ``-m (i - j)``). ``geomlab.trace`` turns them
        into weights and similarities ``Re tr(H_i^* H_j)`` on demand. States are native (complex for
        U/SU/T); the states and logits use the fused path, exactly as ``forward``."""
        self._check_record(tokens)
        rec: dict[str, Any] = {}
        logits = self._run(tokens, rec)
        rec["logits"] = logits[0]
        return rec
