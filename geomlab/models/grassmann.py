"""Grassmann flow language models: ``grassmann`` (attention-free) and ``grassmann-attn`` (its baseline).

Source: Zhang Chong, "Attention Is Not What You Need: Grassmann Flows as an Attention-Free Alternative for
Sequence Modeling", arXiv 2512.19428, as specified in the notes ``grassmann.md`` (§1 layer, §2 model,
§3 tiny configurations, §7 pitfalls). The Causal Grassmann mixer of one layer, input ``H`` ``(B, T, d)``:

1. reduce: ``z_t = W_red h_t + b_red`` ``(B, T, r)``                                   (§1.2)
2. for each offset ``D`` of the layer and each ``t >= D``: the oriented plane span(z_t, z_{t-D}) by its
   Plücker vector ``p_ij = z_{t,i} z_{t-D,j} - z_{t,j} z_{t-D,i}`` (``P = r(r-1)/2``) (§1.3), normalised
   ``p / max(||p||, eps)`` (§1.4). Offsets with no past partner (``t < D``) are skipped, not zero-padded.
3. ``g_t = W_plu mean_{D <= t} p_hat(t, D) + b_plu`` (average first, then one projection), and
   ``g_t = 0`` where no offset is valid (t = 0) (§1.5, the "[I]" choice fixed here).
4. gated fusion ``alpha_t = sigmoid(W_gate [h_t; g_t] + b_gate)``, ``m_t = alpha_t h_t + (1 - alpha_t) g_t``
   (§1.6).

Block layouts (config ``layout``, §2.1; the attention baseline uses the same one, §2.2):

* ``post_norm`` (reported): ``v = LN1(m)``; ``x = LN2(v + FFN(v))`` — the mixer's ``alpha * h`` is the skip
  path. For ``grassmann-attn`` the mixer output is ``m = x + Attn(x)`` (attention has no skip of its own).
* ``post_norm_residual`` (kanenorman's reading): ``v = LN1(x + Mix(x))``; ``x = LN2(v + FFN(v))``.
* ``pre_norm`` (alphaXiv reading): ``x = x + LN_in(Mix(LN1(x)))``; ``x = x + FFN(LN2(x))``. For
  ``grassmann-attn``: the standard ``x = x + Attn(LN1(x))`` (no inner LayerNorm).

The whole model (§2.1): token embedding (+ learned positions, config ``positions``), the blocks, a final
LayerNorm and the tied output head ``logits = LN_f(x) E^T``. FFN ``d -> d_ff -> d`` with GELU.

Positions (config ``positions``): ``learned`` (as reported) adds a trained table of ``max_len`` rows, so
the model cannot read past ``max_len`` (``ValueError``); ``sinusoidal`` adds the fixed code of
:func:`sinusoidal_positions` (no parameters, any length); ``none`` adds nothing — the mixer is already
order-aware, since each position pairs its own reduced vector with those at fixed causal offsets
``(t, t - D)``, and how many offsets are valid marks the first ``max(offsets)`` positions — so the model
reads any length (``max_len`` is then unused). ``none`` is what the bundled zoo model uses: at the zoo's
recipe it trained as well as the learned table (docs/zoo.md, docs/grassmann.md).

Incremental decoding (``grassmann`` only, §1.7): :meth:`GrassmannLM.init_state` and
:meth:`GrassmannLM.step` keep per layer only the last ``max(offsets of the layer)`` reduced vectors, so the
state is ``O(n_layers * max(offsets) * rank)``, constant in the sequence length; the logits equal the full
forward pass up to float rounding.

Inferred / design choices (each a config key): ``eps`` (1e-6, §3), ``normalize`` (``clamp`` as reported or
``smooth`` = ``p / sqrt(||p||^2 + eps^2)``), ``gate`` (``concat`` = sigmoid(W[h; g] + b), reported, or
``input`` = sigmoid(W h + b)), ``offset_schedule`` (``all`` = every layer uses every offset, the
reproductions' reading and default; ``per_layer`` = layer l uses ``offsets[l]`` only, §2.3),
``positions`` (``learned`` up to ``max_len``, as reported, or ``none``: any length), initialisation (embeddings
N(0, 0.02), linear layers PyTorch default; design choice, identical for both kinds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.models import register
from geomlab.models.family import GRASSMANN
from geomlab.models.hooks import HookPoint
from geomlab.models.base import SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase
from geomlab.geometry.planes import normalize_plucker, plucker_indices, plucker_size


class GrassmannConfigError(ValueError):
    """An invalid configuration value for a Grassmann-family model."""


def _check_plane_lm(c) -> None:
    """The rules both kinds share (sizes, dropout)."""
    c.positive("vocab_size", "d_model", "n_layers", "d_ff", "max_len")
    c.fraction("dropout")


@dataclass(frozen=True, kw_only=True)
class GrassmannConfig(ConfigBase):
    """The ``grassmann`` keys (grassmann.md §1-§3). Defaults = the G-XS config of §3 (216,000 parameters at
    V = 96)."""

    kind = "grassmann"
    error = GrassmannConfigError
    vocab_size: int                   # V, tokens in the vocabulary
    d_model: int = 64                 # width d
    n_layers: int = 4                 # blocks
    rank: int = 16                    # reduced dimension r >= 2 (planes in R^r, P = r(r-1)/2 coordinates)
    offsets: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 12, 16])  # causal offsets D of the pairs
    offset_schedule: Literal["all", "per_layer"] = "all"  # every layer every offset, or offsets[l] in layer l
    layout: Literal["post_norm", "post_norm_residual", "pre_norm"] = "post_norm"  # block layout (§2.1)
    d_ff: int = 256                   # FFN width
    max_len: int = 128                # rows of the learned position table (positions='learned' only)
    positions: Literal["learned", "none", "sinusoidal"] = "learned"  # learned table up to max_len; none or
    # sinusoidal: any length
    position_shift: int = 0           # sinusoidal only: training windows start at a random position in [0, this]
    dropout: float = 0.0              # dropout probability in [0, 1)
    eps: float = 1e-6                 # Plücker normalisation floor, > 0
    normalize: Literal["clamp", "smooth"] = "clamp"  # p / max(|p|, eps) or p / sqrt(|p|^2 + eps^2)
    gate: Literal["concat", "input"] = "concat"      # sigmoid(W [h; g] + b) or sigmoid(W h + b)
    impl: Literal["fused", "explicit"] = "fused"     # the same mixer computed two ways

    def validate(self) -> None:
        _check_plane_lm(self)
        if self.rank < 2:
            self.fail(f"rank must be >= 2 (planes need two dimensions), got {self.rank!r}")
        if not self.offsets or min(self.offsets) < 1:
            self.fail(f"offsets must be a non-empty list of positive integers, got {self.offsets!r}")
        if self.offset_schedule == "per_layer" and len(self.offsets) != self.n_layers:
            self.fail(f"offset_schedule 'per_layer' needs one offset per layer: {len(self.offsets)} offsets for "
                      f"{self.n_layers} layers")
        if not self.eps > 0:
            self.fail(f"eps must be > 0, got {self.eps!r}")
        if self.position_shift < 0 or self.position_shift and self.positions != "sinusoidal":
            self.fail(f"position_shift must be >= 0 and needs positions='sinusoidal', got {self.position_shift!r} "
                      f"with positions={self.positions!r}")


@dataclass(frozen=True, kw_only=True)
class GrassmannAttentionConfig(ConfigBase):
    """The ``grassmann-attn`` keys (grassmann.md §2.2). Defaults = T-XS of §3 (214,400 parameters at V = 96)."""

    kind = "grassmann-attn"
    error = GrassmannConfigError
    vocab_size: int                   # V, tokens in the vocabulary
    d_model: int = 64                 # width d, a multiple of n_heads
    n_layers: int = 4                 # blocks
    n_heads: int = 4                  # attention heads
    layout: Literal["post_norm", "post_norm_residual", "pre_norm"] = "post_norm"  # block layout (§2.1)
    d_ff: int = 256                   # FFN width
    max_len: int = 128                # rows of the learned position table (positions='learned' only)
    positions: Literal["learned", "none", "sinusoidal"] = "learned"  # learned table up to max_len; none or
    # sinusoidal: any length
    dropout: float = 0.0              # dropout probability in [0, 1)

    def validate(self) -> None:
        _check_plane_lm(self)
        if self.n_heads < 1 or self.d_model % self.n_heads:
            self.fail(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")


def _offsets_per_layer(offsets: list[int], schedule: str, n_layers: int) -> list[list[int]]:
    """The offsets each layer uses. ``all``: the sorted set of ``offsets`` for every layer; ``per_layer``:
    ``[offsets[l]]`` for layer ``l`` (the config checks ``len(offsets) == n_layers``). grassmann.md §2.3."""
    if schedule == "all":
        return [sorted(set(offsets)) for _ in range(n_layers)]
    return [[d] for d in offsets]


class GrassmannMixer(nn.Module):
    """The Causal Grassmann mixer of one layer (grassmann.md §1, reference forward §1.10).

    ``forward(h)``: ``h`` ``(B, T, d_model)`` float -> ``m`` ``(B, T, d_model)``. Strictly causal: position
    ``t`` reads ``h_s`` for ``s in {t} U {t - D : D in offsets, D <= t}`` only.

    Two implementations of the same function (``impl``):

    * ``explicit``: the reference — per offset the full Plücker vector ``p(t, D)`` ``(B, T - D, P)``, its
      normalisation, the mean over valid offsets.
    * ``fused`` (default, derived here): every plane at position ``t`` contains ``z_t``, and the wedge is
      bilinear, so ``mean_D p(t, D) / ||p(t, D)|| = z_t ^ u_t`` with
      ``u_t = mean_D w_{t,D} (z_{t-D} - c z_t)``, ``w = 1 / max(||z_t ^ z_{t-D}||, eps)`` (the part of the past
      vector along ``z_t`` wedges to zero; removing it keeps degenerate pairs exact, see
      :meth:`_scaled_perp`). The norms come from the
      Lagrange identity ``||a ^ b||^2 = ||a||^2 ||b||^2 - (a.b)^2`` evaluated in float64 (no cancellation
      problem at float32 inputs; float32 on MPS), so the per-offset work is r-dimensional and only one
      ``P``-dimensional wedge is formed per position: m times less P-sized work. Same output to rounding
      (tested). A consequence worth knowing for the views: the offset-averaged bivector of one layer is
      always decomposable (one plane, span(z_t, u_t); decomposability ratio 1).
    """

    def __init__(self, d_model: int, rank: int, offsets: list[int], eps: float, normalize: str, gate: str,
                 impl: str = "fused"):
        super().__init__()
        self.rank, self.offsets, self.eps, self.normalize, self.gate_form = rank, list(offsets), eps, normalize, gate
        if impl not in ("fused", "explicit"):
            raise ValueError(f"impl must be 'fused' or 'explicit', got {impl!r}")
        self.impl = impl
        self.P = plucker_size(rank)
        self.reduce = nn.Linear(d_model, rank)
        self.plu = nn.Linear(self.P, d_model)
        self.gate = nn.Linear(2 * d_model if gate == "concat" else d_model, d_model)
        I, J = plucker_indices(rank)
        sel = torch.zeros(2, rank, self.P)
        sel[0, I, torch.arange(self.P)] = 1.0
        sel[1, J, torch.arange(self.P)] = 1.0
        self.register_buffer("I", I, persistent=False)
        self.register_buffer("J", J, persistent=False)
        self.register_buffer("sel", sel, persistent=False)  # one-hot (r, P) selections of i and j
        m = len(self.offsets)
        self.hook_reduced = HookPoint("(B, T, r) reduced vectors z_t = W_red h_t + b_red")
        self.hook_plucker = HookPoint(f"(B, {m}, T, P) normalised Plücker vectors of (z_t, z_t-D) per offset slot "
                                      "D of the layer, zero where t < D (computed only for the hook)",
                                      writable=False)
        self.hook_plucker_norm = HookPoint(f"(B, {m}, T) ||z_t ^ z_t-D|| before normalisation, zero where t < D",
                                           writable=False)
        self.hook_plucker_mean = HookPoint("(B, T, P) offset-averaged normalised Plücker vector fed to W_plu "
                                           "(zero where no offset is valid)")
        self.hook_gate = HookPoint("(B, T, d_model) gate alpha_t of alpha h + (1 - alpha) g")

    @property
    def max_offset(self) -> int:
        return max(self.offsets)

    def _wedge(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Unnormalised Plücker vector ``(..., P)`` of ``(a, b)`` ``(..., r)`` (one-hot matmuls, no gathers)."""
        SI, SJ = self.sel[0].to(a.dtype), self.sel[1].to(a.dtype)
        return (a @ SI) * (b @ SJ) - (a @ SJ) * (b @ SI)

    def _inv_norm(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(w, n2)``: ``w = 1 / max(||a ^ b||, eps)`` (clamp) or ``1 / sqrt(||a ^ b||^2 + eps^2)`` (smooth),
        in ``a``'s dtype, and ``n2 = ||a ^ b||^2`` (Lagrange identity, float64 except on MPS). ``(...)``."""
        w, n2, _ = self._scaled_perp(a, b)
        return w, n2

    def _scaled_perp(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For the fused form: ``(w, n2, v)`` with ``w``, ``n2`` as in :meth:`_inv_norm` and
        ``v = w (b - c a)``, ``c = (a.b) / max(||a||^2, eps^2)`` ``(..., r)``, so that ``a ^ v = p_hat(a, b)``
        exactly in exact arithmetic. Removing the component along ``a`` first keeps ``||v|| <= 1 / ||a||``:
        a (nearly) parallel pair, weighted by up to ``1 / eps``, then adds (nearly) nothing instead of a huge
        multiple of ``a`` whose rounding would swamp the other offsets' terms. Computed in float64 (MPS:
        the input dtype)."""
        dt = a.dtype if a.device.type == "mps" else torch.float64
        a64, b64 = a.to(dt), b.to(dt)
        aa, bb, ab = (a64 * a64).sum(-1), (b64 * b64).sum(-1), (a64 * b64).sum(-1)
        n2 = (aa * bb - ab * ab).clamp_min(0)
        e2 = self.eps * self.eps
        w = n2.clamp_min(e2).rsqrt() if self.normalize == "clamp" else (n2 + e2).rsqrt()
        c = ab / aa.clamp_min(e2)
        v = (b64 - c.unsqueeze(-1) * a64) * w.unsqueeze(-1)
        return w.to(a.dtype), n2, v.to(a.dtype)

    def _gate(self, h: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        gin = torch.cat([h, g], dim=-1) if self.gate_form == "concat" else h
        return torch.sigmoid(self.gate(gin))

    def _fuse(self, h: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return torch.lerp(g, h, self._gate(h, g))  # alpha h + (1 - alpha) g in one pass

    def _partners(self, T: int, device) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """The offsets with a partner somewhere in a length-``T`` window, ``idx`` ``(T, m)`` long: row of the
        partner ``z_{t-D}`` in ``z`` padded in front by ``max(offsets)`` zero rows (a zero row where ``t < D``),
        and ``mask`` ``(T, m)`` bool: ``t >= D``."""
        key = (T, str(device))
        if getattr(self, "_partner_key", None) != key:
            offs = [D for D in self.offsets if D < T]
            top = max(offs, default=0)
            t = torch.arange(T, device=device).unsqueeze(1)
            d = torch.tensor(offs, dtype=torch.long, device=device).view(1, -1)
            self._partner_cache = (offs, (t - d + top).clamp_min(0), t >= d)
            self._partner_key = key
        return self._partner_cache

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        B, T, _ = h.shape
        z = self.hook_reduced(self.reduce(h))
        if self.impl == "fused":
            return self._forward_fused(h, z)
        cnt = torch.zeros(T, dtype=h.dtype, device=h.device)
        acc = None  # sum of p_hat (B, T, P)
        planes = []  # per offset slot, for the hook points: (D, p_hat, z_t, z_t-D), None where D >= T
        for D in self.offsets:
            if D >= T:  # no position has a partner at this offset: skipped
                planes.append(None)
                continue
            cur, past = z[:, D:], z[:, :-D]  # current first, past second
            cnt[D:] += 1
            p = self._wedge(cur, past)
            p_hat = normalize_plucker(p, self.eps, self.normalize)
            term = F.pad(p_hat, (0, 0, D, 0))
            acc = term if acc is None else acc + term
            planes.append((D, p_hat, cur, past))
        self._observe_planes(planes, z)
        if acc is None:
            g = torch.zeros_like(h)
            mean = self.hook_plucker_mean(h.new_zeros(B, T, self.P))
        else:
            mean = self.hook_plucker_mean(acc * (1 / cnt.clamp_min(1).unsqueeze(-1)))
            g = torch.where((cnt > 0).unsqueeze(-1), self.plu(mean), torch.zeros((), dtype=h.dtype))
        return self._finish(h, g)

    def _forward_fused(self, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The fused form with every offset at once: the partners of all offsets are gathered into one
        ``(B, T, m, r)`` tensor (a zero partner where ``t < D``, whose weight is masked to 0) and the terms of
        :meth:`_scaled_perp` (float64, ``z_{t-D} - c z_t`` before the weight, as there) are formed for all
        offsets in one set of batched operations; ``|z_{t-D}|^2`` is gathered from ``|z_t|^2``. Summing the
        weighted terms in float64 before the cast differs from the per-offset float32 sum by rounding only."""
        B, T, r = z.shape
        offs, idx, mask = self._partners(T, h.device)
        if self.hook_plucker.active or self.hook_plucker_norm.active:  # each plane, for the hook points only
            planes = []
            for D in self.offsets:
                cur, past = z[:, D:], z[:, :-D]
                planes.append(None if D >= T else (D, self._wedge(cur, self._scaled_perp(cur, past)[2]), cur, past))
            self._observe_planes(planes, z)
        if not offs:
            self.hook_plucker_mean(h.new_zeros(B, T, self.P))
            return self._finish(h, torch.zeros_like(h))
        m, top = len(offs), max(offs)
        dt = z.dtype if z.device.type == "mps" else torch.float64
        z64 = z.to(dt)
        past = F.pad(z64, (0, 0, top, 0)).index_select(1, idx.reshape(-1)).view(B, T, m, r)
        aa = (z64 * z64).sum(-1)  # (B, T)
        bb = F.pad(aa, (top, 0)).index_select(1, idx.reshape(-1)).view(B, T, m)
        ab = (z64.unsqueeze(2) * past).sum(-1)  # (B, T, m)
        n2 = (aa.unsqueeze(-1) * bb - ab * ab).clamp_min(0)
        e2 = self.eps * self.eps
        w = n2.clamp_min(e2).rsqrt() if self.normalize == "clamp" else (n2 + e2).rsqrt()
        w = w.masked_fill(~mask, 0)
        c = ab / aa.clamp_min(e2).unsqueeze(-1)
        cnt = mask.sum(dim=1).to(dt)  # valid offsets per position
        v = torch.addcmul(past, c.unsqueeze(-1), z64.unsqueeze(2), value=-1)  # z_{t-D} - c z_t, (B, T, m, r)
        u = (w.unsqueeze(-1) * v).sum(2)
        mean = self.hook_plucker_mean(self._wedge(z, (u / cnt.clamp_min(1).unsqueeze(-1)).to(z.dtype)))
        g = torch.where((cnt > 0).unsqueeze(-1), self.plu(mean), torch.zeros((), dtype=h.dtype))
        return self._finish(h, g)

    def _finish(self, h: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        alpha = self.hook_gate(self._gate(h, g))
        return torch.lerp(g, h, alpha)

    def _observe_planes(self, planes: list, z: torch.Tensor) -> None:
        """Pass the normalised Plücker vectors and the norms before normalisation of every offset slot to their
        hook points, ``(B, m, T, P)`` and ``(B, m, T)``, zero where ``t < D`` (only those that are active).
        ``planes``: per slot ``(D, p_hat, z_t, z_t-D)`` or None where the offset has no partner."""
        B, T, _ = z.shape
        if self.hook_plucker.active:
            self.hook_plucker(torch.stack([z.new_zeros(B, T, self.P) if pl is None else
                                           F.pad(pl[1], (0, 0, pl[0], 0)) for pl in planes], dim=1))
        if self.hook_plucker_norm.active:  # direct, for the views
            self.hook_plucker_norm(torch.stack([
                z.new_zeros(B, T) if pl is None else
                F.pad(torch.linalg.vector_norm(self._wedge(pl[2], pl[3]), dim=-1), (pl[0], 0)) for pl in planes],
                dim=1))

    def step(self, h: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One position: ``h`` ``(B, d_model)`` and ``past`` ``(B, K, rank)``, the reduced vectors of the last
        ``K <= max_offset`` positions (oldest first). Returns ``(m, past')`` with ``m`` ``(B, d_model)`` and
        ``past'`` the updated window, at most ``max_offset`` long (§1.7)."""
        z = self.reduce(h)
        K = past.shape[1]
        valid = [D for D in self.offsets if D <= K]
        if not valid:
            g = torch.zeros_like(h)
        elif self.impl == "fused":
            u = sum(self._scaled_perp(z, past[:, K - D])[2] for D in valid)
            g = self.plu(self._wedge(z, u / len(valid)))
        else:
            acc = sum(normalize_plucker(self._wedge(z, past[:, K - D]), self.eps, self.normalize) for D in valid)
            g = self.plu(acc / len(valid))
        m = self._fuse(h, g)
        past = torch.cat([past, z.unsqueeze(1)], dim=1)[:, -self.max_offset:]
        return m, past


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention (the matched baseline's mixer, grassmann.md §2.2): fused QKV
    ``Linear(d, 3d)``, output ``Linear(d, d)`` (``4 d^2 + 4 d`` parameters). ``(B, T, d) -> (B, T, d)``."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.hook_q = HookPoint("(B, H, T, d_head) attention queries (unscaled)")
        self.hook_k = HookPoint("(B, H, T, d_head) attention keys")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = self.hook_q(q), self.hook_k(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class _Block(nn.Module):
    """One block in the configured layout (module docstring); ``mixer`` is a GrassmannMixer or attention."""

    def __init__(self, mixer: nn.Module, d_model: int, d_ff: int, layout: str, dropout: float, attn: bool):
        super().__init__()
        self.mixer, self.layout, self.attn = mixer, layout, attn
        self.ln1 = nn.LayerNorm(d_model)
        self.ln_in = nn.LayerNorm(d_model) if (layout == "pre_norm" and not attn) else None
        self.ff1 = nn.Linear(d_model, d_ff)
        self.ff2 = nn.Linear(d_ff, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.hook_resid_pre = HookPoint("(B, T, d_model) block input (the residual stream)")
        self.hook_resid_post = HookPoint("(B, T, d_model) block output")

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.ff2(F.gelu(self.ff1(x))))

    def _mix_post(self, x, mix):
        if self.layout == "post_norm_residual" or self.attn:
            return x + self.drop(mix(x))
        return self.drop(mix(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        if self.layout == "pre_norm":
            y = self.mixer(self.ln1(x))
            x = x + self.drop(self.ln_in(y) if self.ln_in is not None else y)
            return self.hook_resid_post(x + self.ffn(self.ln2(x)))
        v = self.ln1(self._mix_post(x, self.mixer))
        return self.hook_resid_post(self.ln2(v + self.ffn(v)))

    def step(self, x: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Grassmann block at one position: ``x`` ``(B, d)``; see :meth:`GrassmannMixer.step`. Evaluation
        only (no dropout is applied)."""
        if self.layout == "pre_norm":
            y, past = self.mixer.step(self.ln1(x), past)
            x = x + self.ln_in(y)
            return x + self.ffn(self.ln2(x)), past
        m, past = self.mixer.step(x, past)
        if self.layout == "post_norm_residual":
            m = x + m
        v = self.ln1(m)
        return self.ln2(v + self.ffn(v)), past


#: Root-mean-square of the fixed sinusoidal position code (design choice, measured on Tiny Shakespeare at the
#: converged recipe's 2,000-step tuning budget, lr 1e-2: valid BPC 2.981 at RMS 0.02, the embeddings' initial
#: scale; 2.728 at 0.5; 2.904 at 1.0; the learned table 2.689; docs/grassmann.md).
SINUSOID_RMS = 0.5


def sinusoidal_positions(start: int, length: int, d: int, dtype: torch.dtype = torch.float32,
                         device: torch.device | str | None = None) -> torch.Tensor:
    """The fixed position code ``(length, d)`` of positions ``start .. start + length - 1`` (Vaswani et al.
    2017, §3.5: ``sin(t / 10000^(2i/d))`` in even and ``cos`` in odd columns), scaled to RMS
    :data:`SINUSOID_RMS`. Defined for any position, so a model using it reads any length; no parameters.
    Used by ``positions='sinusoidal'``: without any position input, equal characters have equal layer-0
    vectors, so their planes are degenerate (design choice, docs/grassmann.md)."""
    t = torch.arange(start, start + length, device=device, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, device=device, dtype=torch.float64)
    angle = t / torch.pow(10000.0, i / d)
    out = torch.zeros(length, d, device=device, dtype=torch.float64)
    out[:, 0::2] = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, : d // 2])
    return (out * (SINUSOID_RMS * 2 ** 0.5)).to(dtype)


class _PlaneLM(SequenceModel):
    """Shared skeleton of both kinds: embeddings, blocks, final LayerNorm, tied head (grassmann.md §2.1)."""

    attn = False

    def __init__(self, config: ConfigBase | dict[str, Any]):
        super().__init__(config)
        c = self.config
        d = int(c["d_model"])
        self.d_model, self.vocab_size, self.max_len = d, int(c["vocab_size"]), int(c["max_len"])
        self.tok = nn.Embedding(self.vocab_size, d)
        self.pos = nn.Embedding(self.max_len, d) if c["positions"] == "learned" else None
        self.sinusoidal = c["positions"] == "sinusoidal"
        self.position_shift = int(c.get("position_shift", 0) or 0)
        self.drop = nn.Dropout(float(c["dropout"]))
        self.blocks = nn.ModuleList(
            _Block(self._mixer(i), d, int(c["d_ff"]), c["layout"], float(c["dropout"]), self.attn)
            for i in range(int(c["n_layers"])))
        self.ln_f = nn.LayerNorm(d)
        nn.init.normal_(self.tok.weight, std=0.02)
        if self.pos is not None:
            nn.init.normal_(self.pos.weight, std=0.02)

    @property
    def no_weight_decay(self) -> set[str]:
        """Parameter names the trainer exempts from weight decay: the embeddings (grassmann.md §3 recipe;
        LayerNorm weights and biases are 1-d and exempt anyway)."""
        return {"tok.weight"} | ({"pos.weight"} if self.pos is not None else set())

    def _mixer(self, layer: int) -> nn.Module:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_tokens(self, tokens: torch.Tensor, start: int = 0) -> None:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        if self.pos is not None and start + tokens.shape[1] > self.max_len:
            raise ValueError(f"sequence of length {start + tokens.shape[1]} exceeds max_len={self.max_len} "
                             "(learned positions); use a shorter context or positions='none'")

    def embed(self, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token (+ position) embedding ``(B, T, d)`` of ``tokens`` ``(B, T)`` starting at position ``start``."""
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(start, start + tokens.shape[1], device=tokens.device))
        elif self.sinusoidal:
            if self.training and self.position_shift:  # no absolute position is special: longer texts read
                start = start + int(torch.randint(0, self.position_shift + 1, ()))  # like the training windows
            x = x + sinusoidal_positions(start, tokens.shape[1], self.d_model, x.dtype, x.device)
        return self.drop(x)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """Tied output head: ``LN_f(x) @ E^T``, ``(..., d) -> (..., V)``."""
        return self.ln_f(x) @ self.tok.weight.t()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(B, T)`` long -> logits ``(B, T, V)``; ``logits[:, t]`` predicts token ``t + 1``."""
        self._check_tokens(tokens)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)

    @staticmethod
    def _analytic_block(c: dict[str, Any]) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def analytic_param_count(cls, config: dict[str, Any]) -> int:
        """Trainable parameters of the full ``config`` from the closed form of grassmann.md §2.3 (shared
        ``V d + max_len d + 2 d`` plus ``n_layers`` blocks). Equals ``count_params`` of the built model."""
        c = config
        d, V = int(c["d_model"]), int(c["vocab_size"])
        shared = V * d + 2 * d + (int(c["max_len"]) * d if c["positions"] == "learned" else 0)
        d_ff = int(c["d_ff"])
        ffn = 2 * d * d_ff + d_ff + d + 2 * d + 2 * d  # FFN + LN1 + LN2
        return shared + int(c["n_layers"]) * (ffn + cls._analytic_block(c))

    @classmethod
    def _budget(cls, n_params: int, vocab_size: int, fixed: dict[str, Any], derive) -> dict[str, Any]:
        """Search ``d_model`` (``derive(base, w)`` completes the config); if no width with the derived
        ``d_ff = 4 d_model`` is within 5% (coarse width steps at small sizes), also let ``d_ff`` range over
        ``[3 d, 5 d]`` in steps of 4. Candidates are pre-filtered with :meth:`analytic_param_count`."""
        base = {**cls.default_config(), **fixed, "kind": cls.kind}
        step = 1 if "d_model" in fixed else int(base.get("n_heads", 2))
        widths = [int(fixed["d_model"])] if "d_model" in fixed else range(step, 2049, step)

        def near(cands):
            return [c for c in cands if abs(cls.analytic_param_count({**c, "vocab_size": vocab_size}) - n_params)
                    <= 0.1 * n_params]

        cands = near([derive(base, w) for w in widths])
        try:
            if not cands:
                raise ValueError("no candidate")
            return search_width(lambda c: c, cands, n_params, vocab_size)
        except ValueError:
            if "d_ff" in fixed:
                raise ValueError(f"{cls.kind}: no d_model gives {n_params} parameters (±5%) with the fixed keys "
                                 f"{sorted(fixed)}") from None
        cands = near([{**derive(base, w), "d_ff": f} for w in widths for f in range(3 * w, 5 * w + 1, 4)])
        if not cands:
            raise ValueError(f"{cls.kind}: no d_model/d_ff gives ~{n_params} parameters with the fixed keys "
                             f"{sorted(fixed)}")
        return search_width(lambda c: c, cands, n_params, vocab_size)


@register
class GrassmannLM(_PlaneLM):
    """``grassmann``: the attention-free Grassmann flow LM (grassmann.md §1–§2; module docstring).

    Config: :class:`GrassmannConfig` (``positions='none'``: no position input, the causal offset pairs carry
    the order, any length — the zoo model's choice; ``impl``: the same function computed two ways, see
    :class:`GrassmannMixer`). Raises :class:`GrassmannConfigError` (a ``ValueError``) on bad values.
    """

    kind = "grassmann"
    family = GRASSMANN
    config_class = GrassmannConfig

    def __init__(self, config: GrassmannConfig | dict[str, Any]):
        cfg = GrassmannConfig.coerce(config)
        self.layer_offsets = _offsets_per_layer(list(cfg.offsets), cfg.offset_schedule, cfg.n_layers)
        super().__init__(cfg)

    def _mixer(self, layer: int) -> nn.Module:
        c = self.config
        return GrassmannMixer(int(c["d_model"]), int(c["rank"]), self.layer_offsets[layer], float(c["eps"]),
                              c["normalize"], c["gate"], c["impl"])

    @staticmethod
    def _analytic_block(c: dict[str, Any]) -> int:
        d, r = int(c["d_model"]), int(c["rank"])
        P = r * (r - 1) // 2
        gate = (2 * d * d if c["gate"] == "concat" else d * d) + d
        return d * r + r + P * d + d + gate + (2 * d if c["layout"] == "pre_norm" else 0)

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d_model`` (even widths) at fixed depth; unless fixed, ``d_ff = 4 d_model`` and
        ``rank = round(2 sqrt(d_model))`` (so ``d r + P d ~ 2 d^2`` and the mixer matches attention's
        ``4 d^2``: the re-matching by r of grassmann.md §3 / pitfall §7.7, design choice). ±5%; else
        ``ValueError``."""
        def derive(base, w):
            cfg = {**base, "d_model": w}
            if "d_ff" not in fixed:
                cfg["d_ff"] = 4 * w
            if "rank" not in fixed:
                cfg["rank"] = max(2, int(round(2 * math.sqrt(w))))
            return cfg
        return cls._budget(n_params, vocab_size, fixed, derive)

    # ---------------------------------------------------------------- recording

    def record_hooks(self) -> list[str]:
        """Every block's input and every mixer's reduced vectors, planes, norms, mean and gate."""
        names = []
        for l in range(len(self.blocks)):
            names.append(f"blocks.{l}.hook_resid_pre")
            names += [f"blocks.{l}.mixer.hook_{w}" for w in ("reduced", "plucker", "plucker_norm", "gate",
                                                             "plucker_mean")]
        return names

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """Everything the plane views need for sequence ``b``: ``inputs`` ``[layer, T, d]`` (block inputs, the
        residual stream), ``reduced`` ``[layer, T, r]``, ``plucker`` ``[layer, slot, T, P]`` (normalised, zero
        where masked), ``plucker_mask`` ``[layer, slot, T]`` bool, ``offsets`` ``[layer, slot]`` long (0 = unused
        slot), ``gates`` ``[layer, T, d]`` (alpha), ``logits`` ``[T, V]`` (equal to ``model(tokens)[b]``), and
        the extras ``plucker_norm`` ``[layer, slot, T]`` (``||p||`` before normalisation, for degenerate-pair
        monitoring, pitfall §7.1) and ``plucker_mean`` ``[layer, T, P]`` (the offset-averaged bivector fed to
        ``W_plu``, §5.9; zero where no offset is valid). Slots: the layer's sorted offsets (``all``) or its
        single offset (``per_layer``)."""
        logits = logits[b]
        L, S = len(self.blocks), max(len(o) for o in self.layer_offsets)
        T, P = logits.shape[0], self.blocks[0].mixer.P
        plu = logits.new_zeros(L, S, T, P)
        norm = logits.new_zeros(L, S, T)
        mask = torch.zeros(L, S, T, dtype=torch.bool, device=logits.device)
        offsets = torch.zeros(L, S, dtype=torch.long)
        for layer, offs in enumerate(self.layer_offsets):
            mixer = f"blocks.{layer}.mixer."
            for slot, D in enumerate(offs):
                plu[layer, slot] = cache[mixer + "hook_plucker"][b, slot]
                norm[layer, slot] = cache[mixer + "hook_plucker_norm"][b, slot]
                mask[layer, slot, D:] = True
                offsets[layer, slot] = D

        def per_layer(name):
            return torch.stack([cache[f"blocks.{l}.{name}"][b] for l in range(L)])

        return {"inputs": per_layer("hook_resid_pre"), "reduced": per_layer("mixer.hook_reduced"),
                "plucker": plu, "plucker_mask": mask, "offsets": offsets, "gates": per_layer("mixer.hook_gate"),
                "logits": logits, "plucker_norm": norm, "plucker_mean": per_layer("mixer.hook_plucker_mean")}

    # ---------------------------------------------------------------- incremental decoding

    def init_state(self, batch_size: int = 1) -> dict[str, Any]:
        """Empty decoding state for ``batch_size`` sequences: ``{"t": 0, "past": [tensor (B, 0, r)] * n_layers}``.
        ``past[l]`` never holds more than ``max(offsets of layer l)`` reduced vectors (grassmann.md §1.7)."""
        w = self.blocks[0].mixer.reduce.weight
        r = int(self.config["rank"])
        return {"t": 0, "past": [w.new_zeros(batch_size, 0, r) for _ in self.blocks]}

    def step(self, tokens: torch.Tensor, state: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """Feed one token per sequence: ``tokens`` ``(B,)`` long at position ``state["t"]``.

        Returns ``(logits, new_state)`` with ``logits`` ``(B, V)`` equal (to float rounding) to
        ``model(prefix)[:, -1]``; the state is not modified in place. Raises ``ValueError`` past ``max_len``
        with learned positions, or for a batch size that does not match the state.
        """
        if tokens.dim() != 1:
            raise ValueError(f"step expects tokens of shape (B,), got {tuple(tokens.shape)}")
        t = int(state["t"])
        if tokens.shape[0] != state["past"][0].shape[0]:
            raise ValueError(f"batch of {tokens.shape[0]} tokens for a state of batch {state['past'][0].shape[0]}")
        self._check_tokens(tokens[:, None], start=t)
        x = self.embed(tokens[:, None], start=t)[:, 0]
        new_past = []
        for block, past in zip(self.blocks, state["past"]):
            x, past = block.step(x, past)
            new_past.append(past)
        return self.head(x), {"t": t + 1, "past": new_past}

    @torch.no_grad()
    def forward_incremental(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, T, V)`` for ``tokens`` ``(B, T)`` computed one position at a time with :meth:`step`
        (constant-size state); equals ``model(tokens)`` to float rounding."""
        state = self.init_state(tokens.shape[0])
        out = []
        for t in range(tokens.shape[1]):
            logits, state = self.step(tokens[:, t], state)
            out.append(logits)
        return torch.stack(out, dim=1)

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, n_new: int, temperature: float = 1.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Sample ``n_new`` tokens after ``prompt`` ``(B, T0)`` (T0 >= 1) with incremental decoding; returns
        ``(B, T0 + n_new)`` long. ``temperature`` > 0 (``ValueError`` otherwise)."""
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if prompt.dim() != 2 or prompt.shape[1] < 1:
            raise ValueError(f"prompt must have shape (B, T0) with T0 >= 1, got {tuple(prompt.shape)}")
        state = self.init_state(prompt.shape[0])
        for t in range(prompt.shape[1]):
            logits, state = self.step(prompt[:, t], state)
        out = [prompt]
        for _ in range(n_new):
            probs = torch.softmax(logits / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
            out.append(nxt)
            if _ < n_new - 1:
                logits, state = self.step(nxt[:, 0], state)
        return torch.cat(out, dim=1)


@register
class GrassmannAttentionLM(_PlaneLM):
    """``grassmann-attn``: the matched baseline — the same model and block layout with causal multi-head
    self-attention in place of the Grassmann mixer (grassmann.md §2.2).

    Config: :class:`GrassmannAttentionConfig`.
    """

    kind = "grassmann-attn"
    family = GRASSMANN
    attention = True
    baseline = True
    config_class = GrassmannAttentionConfig
    attn = True

    def _mixer(self, layer: int) -> nn.Module:
        return CausalSelfAttention(int(self.config["d_model"]), int(self.config["n_heads"]))

    @staticmethod
    def _analytic_block(c: dict[str, Any]) -> int:
        d = int(c["d_model"])
        return 4 * d * d + 4 * d

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d_model`` (multiples of ``n_heads``) at fixed depth; ``d_ff = 4 d_model`` unless fixed.
        ±5%; else ``ValueError``."""
        def derive(base, w):
            cfg = {**base, "d_model": w}
            if "d_ff" not in fixed:
                cfg["d_ff"] = 4 * w
            return cfg
        return cls._budget(n_params, vocab_size, fixed, derive)

    def record_hooks(self) -> list[str]:
        """The queries and keys of every block."""
        return [f"blocks.{l}.mixer.hook_{a}" for l in range(len(self.blocks)) for a in "qk"]

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """Sequence ``b``: ``{"logits": (T, V), "attention_q", "attention_k": [layer, head, T, d_head]}`` (scores
        ``q_i·k_j``, the scale folded into ``q``; ``geomlab.trace`` turns them into weights on demand). The
        logits are computed exactly as in ``forward`` (bit-identical)."""
        L = len(self.blocks)
        d_head = self.d_model // int(self.config["n_heads"])
        return {"logits": logits[b],
                "attention_q": torch.stack([cache[f"blocks.{l}.mixer.hook_q"][b] / math.sqrt(d_head)
                                            for l in range(L)]),
                "attention_k": torch.stack([cache[f"blocks.{l}.mixer.hook_k"][b] for l in range(L)])}
