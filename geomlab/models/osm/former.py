"""``osmformer``: attention and grounding steps on the group (Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.geometry.groups import OrthogonalGroup, SpecialOrthogonalGroup, expm_taylor
from geomlab.geometry.groups.torus import TorusGroup
from geomlab.geometry.groups.expm import _PAD_TO
from geomlab.models import register
from geomlab.models.family import OSM
from geomlab.models.base import LensStage
from geomlab.models.hooks import HookPoint, any_active, run_with_cache
from geomlab.models.osm.base import OSMBase, _budget_with_knobs
from geomlab.models.osm.config import PROTOTYPES, OSMFormerConfig
from geomlab.models.osm.geometry import RealifiedGroup, _ct
from geomlab.models.osm.mixing import TangentMixing


class _SelfAttention(torch.autograd.Function):
    """``softmax(scale * V V^T + mask) V`` for ``V`` ``(B, heads, T, F)``, a 0-d ``scale`` and an additive ``mask``
    broadcast to ``(B, heads, T, T)``, with a hand-written backward that uses ``q = k = v``: with
    ``dS = W o (dW - rowsum(dW o W))``, ``dW = dO V^T``, the input gradient is ``W^T dO + scale (dS + dS^T) V``
    (three matmuls; ``scaled_dot_product_attention`` treats q, k, v as three inputs: four, one of them on a
    transposed layout). Gradients also for ``scale`` (``sum dS o V V^T``) and ``mask`` (``dS`` summed to its
    shape). Same mathematics as the fused call (checked in tests/test_speed.py). Design choice."""

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


class _LayerHooks(nn.Module):
    """The hook points of one OSMFormer layer, dense path (no parameters); ``n = d`` (2d realified)."""

    def __init__(self):
        super().__init__()
        self.hook_pattern = HookPoint("(B, heads, T, T) attention weights alpha_ij (formed only while a hook is "
                                      "attached)")
        self.hook_attn_target = HookPoint("(B, T, n, n) attention mean Hbar_i = sum_j alpha_ij H_j")
        self.hook_attn_raw = HookPoint("(B, T, n, n) attention pull proj(H_i^* Hbar_i) before the mixing "
                                       "(computed only for the hook; a replacement is mixed instead)")
        self.hook_attn_tangent = HookPoint("(B, T, n, n) attention tangent after the mixing: what is exponentiated")
        self.hook_ground_raw = HookPoint("(B, T, n, n) grounding pull proj(H_i^* X_i) before the mixing "
                                         "(computed only for the hook; a replacement is mixed instead)")
        self.hook_ground_tangent = HookPoint("(B, T, n, n) grounding tangent after the mixing: what is "
                                             "exponentiated")
        self.hook_state = HookPoint("(B, T, n, n) state H_i after the layer")


class _DiagonalLayerHooks(nn.Module):
    """The hook points of one layer of the torus's diagonal path (no parameters)."""

    def __init__(self):
        super().__init__()
        self.hook_attn_coords = HookPoint("(B, T, d) algebra coordinates Im(conj(h_i) hbar_i) of the attention pull")
        self.hook_attn_tangent = HookPoint("(B, T, d) attention tangent coordinates after the mixing")
        self.hook_ground_coords = HookPoint("(B, T, d) algebra coordinates Im(conj(h_i) x_i) of the grounding pull")
        self.hook_ground_tangent = HookPoint("(B, T, d) grounding tangent coordinates after the mixing")
        self.hook_state = HookPoint("(B, T, d) complex diagonal of the state after the layer")


class _DiagonalHooks(nn.Module):
    """The hook points of the torus's diagonal path: its inputs and its layers."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.hook_inputs = HookPoint("(B, T, d) complex diagonals of the layer-0 states")
        self.layers = nn.ModuleList(_DiagonalLayerHooks() for _ in range(n_layers))


@register
class OSMFormer(OSMBase):
    """OSMFormer (kind ``osmformer``): layers of attention + grounding steps on the group.

    ``H^(0)_i = M_{x_i}`` (``position="rotation"``: ``R^i M_{x_i}`` with ``R = exp(A_pos)``, the paper's second option).
    Each layer ``l``:

    * attention: ``S_ij = beta_l * Re tr(H_i^* H_j) * heads / d + bias_ij``, causal softmax over
      ``j <= i``, ``Hbar_i = sum_j alpha_ij H_j``, ``H_i <- H_i exp(Gamma^att_l(pull(H_i, Hbar_i)))``. Computed
      as one ``scaled_dot_product_attention`` with ``q = k = v = vec H`` (no Q/K/V maps). ``bias_ij`` is
      ``-m_l,h (i - j)`` for ``position="alibi"`` [I], zero otherwise.
    * grounding: ``H_i <- H_i exp(Gamma^gr_l(pull(H_i, X_i)))`` with ``X_i`` the layer-0 state.

    Readout ``tau Re tr(H_i^* P_v) + b_v`` of ``H_i`` (rotation: of ``R^{-i} H_i``).

    ``heads`` > 1 [design choice]: the rows of ``H`` are split into ``heads`` equal groups; head ``k`` scores
    with the partial similarity ``Re tr(H_i^* P_k H_j)`` (``P_k`` the projector on its rows; for O-block with
    ``heads = d / block`` these are exactly the blocks) and averages only its rows of ``Hbar``.

    Config: :class:`geomlab.models.osm.config.OSMFormerConfig` (``beta`` defaults to 1.0: the notes'
    ``sqrt(d)`` makes the self term, which scores ``beta`` and moves nothing, take almost all the attention
    mass at init and learned more slowly in our runs). Shapes: ``tokens (B, T) long -> logits (B, T, V)``.
    Raises :class:`OSMConfigError` / ``GroupError`` (ValueErrors) for bad config.

    Hook points (``model.hook_points()``; l = 0..n_layers-1), in the arithmetic representation (``n = d``;
    ``2d``, real, for ``complex_mode="real"``; complex for native U/SU/T): ``hook_inputs`` ``(B, T, n, n)``
    (layer-0 states); ``layers.l.hook_pattern`` ``(B, heads, T, T)`` (the attention weights, formed only for
    an active hook; a replacement is used); ``layers.l.hook_attn_target`` (``Hbar``), ``layers.l.hook_attn_raw`` /
    ``layers.l.hook_ground_raw`` (pulls before the mixing), ``layers.l.hook_attn_tangent`` /
    ``layers.l.hook_ground_tangent`` (what is exponentiated) and ``layers.l.hook_state`` (after the layer),
    each ``(B, T, n, n)``. On T^d (positions other than ``rotation``) the forward runs on the states'
    diagonals unless one of these is active, with its own points: ``diag.hook_inputs`` ``(B, T, d)`` complex,
    ``diag.layers.l.hook_attn_coords`` / ``hook_attn_tangent`` / ``hook_ground_coords`` /
    ``hook_ground_tangent`` ``(B, T, d)`` real (algebra coordinates) and ``diag.layers.l.hook_state``
    ``(B, T, d)`` complex.
    """

    kind = "osmformer"
    family = OSM
    attention = True
    config_class = OSMFormerConfig

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d`` to meet the effective-parameter budget (±5%); keys in ``fixed`` are kept. If no ``d``
        fits at the default depth, the unfixed ``n_layers`` (default, then 3, 1, 4, 5, 6) is varied, and
        only then ``prototypes`` (e.g. 91K at V = 65: d = 15 with 3 layers, 87.7K)."""
        knobs = [("prototypes", PROTOTYPES), ("n_layers", (2, 3, 1, 4, 5, 6))]
        return _budget_with_knobs(cls, fixed, knobs, n_params, vocab_size)

    def __init__(self, config: OSMFormerConfig | dict[str, Any]):
        super().__init__(config)
        c = self.config
        L, heads = int(c["n_layers"]), int(c["heads"])
        self.n_layers, self.heads = L, heads
        # T^d: every state is diagonal, so forward (training and eval) and traces run on the diagonals
        # (:meth:`_run_diagonal`, :meth:`trace_record`); :meth:`record` keeps the dense reference arithmetic
        self._diagonal = isinstance(self.geo, TorusGroup)
        self.hook_inputs = HookPoint("(B, T, n, n) layer-0 states X_i = M_{x_i} (R^i M_{x_i} with rotation)")
        self.layers = nn.ModuleList(_LayerHooks() for _ in range(L))
        if self._diagonal:
            self.diag = _DiagonalHooks(L)
        self.mix_att = nn.ModuleList(TangentMixing(c["mixing"], self.dim, c["attn_step"]) for _ in range(L))
        self.mix_gr = nn.ModuleList(TangentMixing(c["mixing"], self.dim, c["ground_step"]) for _ in range(L))
        beta = float(c["beta"]) if c["beta"] is not None else math.sqrt(self.d)
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

    def attention_mean(self, H: torch.Tensor, layer: int, explicit: bool = False, hook_pattern=None):
        """The attention target ``Hbar`` ``(B, T, n, n)`` and the weights ``(B, heads, T, T)`` (or None).

        ``explicit=False``: one fused ``scaled_dot_product_attention`` call (weights not returned);
        ``explicit=True``: the same with einsum and softmax, weights returned (for tests and recording).
        ``hook_pattern``: a hook point the weights pass (explicit while it is active; a replacement is used).
        """
        out, w = self._attend(self._heads_view(H), layer, explicit, hook_pattern)
        return self._heads_merge(out, H), w

    def _attend(self, v: torch.Tensor, layer: int, explicit: bool = False, hook_pattern=None):
        """``softmax(scale v v^T + mask) v`` on the heads' features ``v`` ``(B, heads, T, F)``, and the weights
        when ``explicit`` or ``hook_pattern`` is active (see :meth:`attention_mean`)."""
        scale = self._attention_scale(layer)
        mask = self._mask(layer, v.shape[2], v.device, v.dtype)
        hooked = hook_pattern is not None and hook_pattern.active
        if not explicit and not hooked:
            if self.training:  # training: the symmetric backward; eval: the reference arithmetic (see OSMBase._exp)
                return _SelfAttention.apply(v, scale, mask), None
            return F.scaled_dot_product_attention(v * scale, v, v, attn_mask=mask, scale=1.0), None
        scores = torch.einsum("bhif,bhjf->bhij", v * scale, v) + mask
        w = torch.softmax(scores, dim=-1)
        if hooked:
            w = hook_pattern(w)
        return torch.einsum("bhij,bhjf->bhif", w, v), w

    def _run_diagonal(self, tokens: torch.Tensor) -> torch.Tensor:
        """Forward on T^d with the states' diagonals ``h`` ``(B, T, d)`` instead of ``d x d`` matrices: the
        same arithmetic as :meth:`forward`'s dense path written entrywise (products of diagonal matrices are
        entrywise products; the pull ``H^* X`` is ``conj(h) x``; its algebra coordinates are ``Im(conj(h) x)``;
        ``exp`` of ``i phi`` is ``exp(i phi)``; a head owns a block of the diagonal as it owns a block of rows).
        Equal to the dense path up to float rounding, gradients included (tests/test_speed.py); ~10x faster at
        91K. Its values pass the ``diag.*`` hook points (:meth:`trace_record`). Design choice (the
        torus zoo model at the converged recipe)."""
        B, T = tokens.shape
        M = self.token_matrices()
        hooks = self.diag
        x = hooks.hook_inputs(torch.diagonal(M, dim1=-2, dim2=-1)[tokens])  # (B, T, d)
        h = x

        def turn(mixing: TangentMixing, hook_coords, hook_tangent, h: torch.Tensor, target: torch.Tensor):
            z = h.conj() * target
            c = hook_coords(z.imag + 0 * z.real)  # to_coords (a non-finite real part stays visible, as there)
            phi = hook_tangent(c @ mixing.weight.mT if mixing.mode == "linear" else mixing.eta * c)
            return h * torch.exp(torch.complex(torch.zeros_like(phi), phi))

        for layer, lh in enumerate(hooks.layers):
            v = torch.view_as_real(h).reshape(B, T, self.heads, -1).transpose(1, 2)
            out, _ = self._attend(v, layer)
            hbar = torch.view_as_complex(out.transpose(1, 2).reshape(B, T, -1, 2).contiguous())
            h = turn(self.mix_att[layer], lh.hook_attn_coords, lh.hook_attn_tangent, h, hbar)
            h = lh.hook_state(turn(self.mix_gr[layer], lh.hook_ground_coords, lh.hook_ground_tangent, h, x))
        return self.readout_diagonal(h, M)

    def trace_run(self, tokens: torch.Tensor, names: list[str] = ()) -> tuple[dict[str, torch.Tensor], dict]:
        """What :func:`geomlab.trace.trace` stores, computed directly, with the extra hook points ``names``
        (:meth:`SequenceModel.trace_run`): on T^d (positions other than
        ``rotation``) the diagonal arithmetic of training (:meth:`_run_diagonal`, read at its ``diag.*`` hook
        points) gives the trace's compact fields, ``state_data`` ``(L, T, d)`` and ``input_data`` ``(T, d)``
        (the diagonals), ``tangent_coords`` ``(2, L, 2, T, d)`` float16 (before / after mixing; substep 0
        attention, 1 grounding) with their exact norms and inner products ``tangent_stats`` ``(3, L, 2, T)``,
        the attention as in :meth:`record` and ``logits`` ``(T, V)``; no ``d x d`` matrix is formed (at d = 128
        and 2,048 characters :meth:`record` takes a minute and 5.7 GB; this takes well under a second). Equal
        to :meth:`record` compacted up to float rounding (tests/models/test_osm.py). Other groups: :meth:`record`.
        Design choice."""
        if not self._diagonal or self.config["position"] == "rotation" or not self.n_layers:
            return super().trace_run(tokens, names)
        self._check_record(tokens)
        extra = set(names)
        with torch.no_grad():
            logits, cache = run_with_cache(self, tokens, lambda name: name.startswith("diag.") or name in extra)
        L, T = self.n_layers, tokens.shape[1]
        part = [(l, sub) for l in range(L) for sub in ("attn", "ground")]
        c = torch.stack([torch.stack([cache[f"diag.layers.{l}.hook_{sub}_{what}"][0] for l, sub in part])
                         for what in ("coords", "tangent")]).reshape(2, L, 2, T, self.d)
        rec = {"state_data": torch.stack([cache[f"diag.layers.{l}.hook_state"][0] for l in range(L)]),
               "input_data": cache["diag.hook_inputs"][0], "tangent_coords": c.to(torch.float16),
               "tangent_stats": torch.stack([c[0].norm(dim=-1), c[1].norm(dim=-1), (c[0] * c[1]).sum(-1)]),
               "logits": logits[0]}
        self._record_attention(rec, logits.dtype)
        return rec, cache

    def _record_attention(self, rec: dict, dtype) -> None:
        """The attention as what scores it: ``attention_scale`` ``(L,)`` and, with ALiBi, ``attention_slopes``."""
        if self.n_layers:
            rec["attention_scale"] = torch.stack([
                self._attention_scale(l) / (self.sim_scale if isinstance(self.geo, RealifiedGroup) else 1.0)
                for l in range(self.n_layers)]).to(dtype)
        if self.config["position"] == "alibi" and self.n_layers:
            rec["attention_slopes"] = self.alibi.detach().to(dtype).clone()

    def readout_diagonal(self, h: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
        """:meth:`readout` of diagonal states given by their diagonals ``h`` ``(..., d)`` complex (T^d):
        ``Re tr(H^* P_v) = sum_p Re(conj(h_p) P_v,pp)``, so only the prototypes' diagonals are read; logits
        ``(..., V)``. No ``d x d`` matrix is formed. Design choice (the torus at d = 128)."""
        if self.config["prototypes"] == "support":  # T^d's support is the diagonal, in order
            P = torch.view_as_complex(self.proto)
        else:
            P = torch.diagonal(self._prototypes(M), dim1=-2, dim2=-1)  # (V, d)
        return self.tau * (torch.view_as_real(h).flatten(-2) @ torch.view_as_real(P).flatten(-2).mT) + self.bias

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        self._check_tokens(tokens)
        dense_hooked = self.hook_inputs.active or any_active(self.layers)
        if self._diagonal and not dense_hooked and self.config["position"] != "rotation":
            return self._run_diagonal(tokens)
        B, T = tokens.shape
        M = self.token_matrices()
        X = M[tokens]  # (B, T, n, n)
        R = None
        if self.config["position"] == "rotation":
            R = self._rotations(T, M.dtype, M.device)
            X = R @ X
        pad = self._pad_frame()
        if pad:  # training on O/SO at an MKL-unfriendly size: diag(X, I) in a frame whose matmuls run faster
            n0 = X.shape[-1]
            X = F.pad(X, (0, pad, 0, pad))
            X.diagonal(dim1=-2, dim2=-1)[..., n0:] = 1.0
        H = X = self.hook_inputs(X)
        block = self.d if pad else None
        for layer, lh in enumerate(self.layers):
            Hbar = lh.hook_attn_target(self.attention_mean(H, layer, hook_pattern=lh.hook_pattern)[0])
            p_att = lh.hook_attn_tangent(self.mix_att[layer](self._pull(lh.hook_attn_raw, H, Hbar), self.geo, block))
            H = H @ self._exp(p_att)
            p_gr = lh.hook_ground_tangent(self.mix_gr[layer](self._pull(lh.hook_ground_raw, H, X), self.geo, block))
            H = lh.hook_state(H @ self._exp(p_gr))
        Hr = _ct(R) @ H if R is not None else H
        return self.readout(Hr, M, pad)

    def lens_stages(self) -> list[LensStage]:
        """The layer-0 states (stage 0) and each layer's states through the prototype readout, as
        :meth:`forward` reads them (rotation: of ``R^{-i} H_i``). On T^d without rotation the diagonal
        arithmetic's ``diag.*`` points are read (:meth:`readout_diagonal`), so no ``d x d`` matrix is formed."""
        M = self.token_matrices()
        if self._diagonal and self.config["position"] != "rotation":
            def readout(h: torch.Tensor) -> torch.Tensor:
                return self.readout_diagonal(h, M)
            prefix = "diag."
        else:
            def readout(H: torch.Tensor) -> torch.Tensor:
                if self.config["position"] == "rotation":
                    H = _ct(self._rotations(H.shape[1], M.dtype, M.device)) @ H
                return self.readout(H, M)
            prefix = ""
        return [LensStage("input", f"{prefix}hook_inputs", readout)] + [
            LensStage(f"layer {l}", f"{prefix}layers.{l}.hook_state", readout) for l in range(self.n_layers)]

    def _pull(self, hook: HookPoint, H: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """:meth:`_direction` of ``H`` toward ``X``, seen projected at ``hook`` (computed only when it is
        active; a replacement is mixed instead)."""
        d = self._direction(H, X)
        if not hook.active:
            return d
        raw = self.geo.proj(d)
        seen = hook(raw)
        return d if seen is raw else seen

    def record_hooks(self) -> list[str]:
        """The inputs and, per layer, the tangents and the state (the dense path)."""
        return ["hook_inputs"] + [f"layers.{l}.hook_{what}" for l in range(self.n_layers)
                                  for what in ("attn_raw", "attn_tangent", "ground_raw", "ground_tangent", "state")]

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, Any]:
        """Sequence ``b``: ``inputs`` ``(T, d, d)`` (layer-0 states, with the rotation if used), ``states``
        ``(L, T, d, d)``, ``tangents_raw`` / ``tangents`` ``(L, 2, T, d, d)`` (substep 0 attention, 1 grounding;
        ``tangents`` is what was exponentiated), ``logits`` ``(T, V)`` equal to ``model(tokens)[b]``, and the
        attention as what scores it (no ``T x T`` array): ``attention_scale`` ``(L,)`` with scores
        ``S_ij = scale_l * <H_i, H_j>_head + bias_ij`` on the layer's input states (native rows split evenly
        into heads; layer 0 reads ``inputs``, layer l the ``states[l-1]``) and, with ALiBi,
        ``attention_slopes`` ``(L, heads)`` (bias ``-m (i - j)``). ``geomlab.trace`` turns them into weights
        and similarities ``Re tr(H_i^* H_j)`` on demand. States are native (complex for U/SU/T)."""
        nat, L = self._to_native, self.n_layers
        inputs = nat(cache["hook_inputs"][b])
        T, n = inputs.shape[0], self.group.d

        def per_layer(whats, shape):
            if not L:
                return torch.zeros(shape, dtype=inputs.dtype, device=logits.device)
            rows = [[nat(cache[f"layers.{l}.hook_{w}"][b]) for w in whats] for l in range(L)]
            return torch.stack([r[0] if len(whats) == 1 else torch.stack(r) for r in rows])

        rec = {"inputs": inputs, "states": per_layer(["state"], (0, T, n, n)),
               "tangents_raw": per_layer(["attn_raw", "ground_raw"], (0, 2, T, n, n)),
               "tangents": per_layer(["attn_tangent", "ground_tangent"], (0, 2, T, n, n))}
        self._record_attention(rec, logits.dtype)
        rec["logits"] = logits[b]
        return rec

    def _pad_frame(self) -> int:
        """How many rows and columns the training states get: ``H`` is carried as ``diag(H, I)`` of size
        ``_PAD_TO[d]`` (e.g. 15 -> 16) so the pulls and products ``H exp(Phi)`` run at a size MKL handles well.
        Exact: ``diag(A, I) diag(B, I) = diag(AB, I)``, pulls are ``diag(H^T X, I)`` (skew part, the only part
        the mixing reads, ``diag(Delta, 0)``), ``exp(diag(Phi, 0)) = diag(exp Phi, I)``; attention scores gain
        the same constant ``pad`` in every row (the softmax ignores it) and ``Hbar = diag(Hbar, I)``; the
        prototypes are zero-padded. Only for O/SO with linear mixing (whose index path reads the block) and the
        Taylor exp, one head, no rotation positions, in training mode (eval keeps the reference arithmetic),
        with no hook active (hook points see the group's own size). Design choice."""
        if (not self.training or any_active(self) or self.heads != 1 or self.config["position"] == "rotation"
                or self.config["mixing"] != "linear" or self._exp_fast is not expm_taylor or self.geo.is_complex
                or not isinstance(self.geo, (OrthogonalGroup, SpecialOrthogonalGroup))):
            return 0
        return _PAD_TO.get(self.d, self.d) - self.d
