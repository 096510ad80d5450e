"""The Causal Grassmann mixer of one layer (Zhang, arXiv 2512.19428): reduce, Plücker vectors of the causal offset
pairs, their normalised mean, gated fusion; full-sequence forward and one-position step."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from geomlab.geometry.planes import normalize_plucker, plucker_indices, plucker_size
from geomlab.models.hooks import HookPoint


class GrassmannMixer(nn.Module):
    """The Causal Grassmann mixer of one layer (Zhang, arXiv 2512.19428, reference forward).

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
                                      "D of the layer, zero where t < D (computed only for the hook); a "
                                      "replacement's change at t >= D is averaged into the offset mean")
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
        change = self._observe_planes(planes, z)
        if acc is None:
            g = torch.zeros_like(h)
            mean = self.hook_plucker_mean(h.new_zeros(B, T, self.P))
        else:
            mean = acc * (1 / cnt.clamp_min(1).unsqueeze(-1))
            if change is not None:
                mean = mean + change / cnt.clamp_min(1).unsqueeze(-1)
            mean = self.hook_plucker_mean(mean)
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
        change = None  # the sum over slots of a replacement's change at hook_plucker, (B, T, P)
        if self.hook_plucker.active or self.hook_plucker_norm.active:  # each plane, for the hook points only
            planes = []
            for D in self.offsets:
                cur, past = z[:, D:], z[:, :-D]
                planes.append(None if D >= T else (D, self._wedge(cur, self._scaled_perp(cur, past)[2]), cur, past))
            change = self._observe_planes(planes, z)
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
        mean = self._wedge(z, (u / cnt.clamp_min(1).unsqueeze(-1)).to(z.dtype))
        if change is not None:
            mean = mean + change / cnt.clamp_min(1).unsqueeze(-1).to(z.dtype)
        mean = self.hook_plucker_mean(mean)
        g = torch.where((cnt > 0).unsqueeze(-1), self.plu(mean), torch.zeros((), dtype=h.dtype))
        return self._finish(h, g)

    def _finish(self, h: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        alpha = self.hook_gate(self._gate(h, g))
        return torch.lerp(g, h, alpha)

    def _observe_planes(self, planes: list, z: torch.Tensor) -> torch.Tensor | None:
        """Pass the normalised Plücker vectors and the norms before normalisation of every offset slot to their
        hook points, ``(B, m, T, P)`` and ``(B, m, T)``, zero where ``t < D`` (only those that are active).
        ``planes``: per slot ``(D, p_hat, z_t, z_t-D)`` or None where the offset has no partner.

        Returns None, or, where a function replaced the Plücker vectors, the change ``(B, T, P)`` summed over
        the slots with a partner (``t >= D``): the forward adds it, divided by the number of valid offsets, to
        the offset mean. Entries the function left alone change by exactly 0, so their positions keep every
        bit (design choice: a correction to the fused mean rather than a second way to compute it)."""
        B, T, _ = z.shape
        change = None
        if self.hook_plucker.active:
            seen = torch.stack([z.new_zeros(B, T, self.P) if pl is None else
                                F.pad(pl[1], (0, 0, pl[0], 0)) for pl in planes], dim=1)
            out = self.hook_plucker(seen)
            if out is not seen:
                if out.shape != seen.shape:
                    raise ValueError(f"hook_plucker replacement of shape {tuple(out.shape)}, expected "
                                     f"{tuple(seen.shape)}")
                valid = torch.tensor([pl is not None for pl in planes], device=z.device).view(1, -1, 1, 1) & (
                    torch.arange(T, device=z.device).view(1, 1, T, 1)
                    >= torch.tensor(self.offsets, device=z.device).view(1, -1, 1, 1))
                change = ((out.to(seen.dtype) - seen) * valid).sum(1)
        if self.hook_plucker_norm.active:  # direct, for the views
            self.hook_plucker_norm(torch.stack([
                z.new_zeros(B, T) if pl is None else
                F.pad(torch.linalg.vector_norm(self._wedge(pl[2], pl[3]), dim=-1), (pl[0], 0)) for pl in planes],
                dim=1))
        return change

    def step(self, h: torch.Tensor, past: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One position: ``h`` ``(B, d_model)`` and ``past`` ``(B, K, rank)``, the reduced vectors of the last
        ``K <= max_offset`` positions (oldest first). Returns ``(m, past')`` with ``m`` ``(B, d_model)`` and
        ``past'`` the updated window, at most ``max_offset`` long."""
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
