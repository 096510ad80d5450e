"""The two registered kinds of the Grassmann family: ``grassmann`` (:class:`GrassmannLM`, the Plücker mixer,
with recording and incremental decoding) and ``grassmann-attn`` (:class:`GrassmannAttentionLM`, its attention
baseline)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from geomlab.models import register
from geomlab.models.family import GRASSMANN
from geomlab.models.grassmann.attention import CausalSelfAttention
from geomlab.models.grassmann.base import PlaneLM
from geomlab.models.grassmann.config import GrassmannAttentionConfig, GrassmannConfig, offsets_per_layer
from geomlab.models.grassmann.mixer import GrassmannMixer


@register
class GrassmannLM(PlaneLM):
    """``grassmann``: the attention-free Grassmann flow LM (Zhang, arXiv 2512.19428; package docstring of
    :mod:`geomlab.models.grassmann`).

    Config: :class:`GrassmannConfig` (``positions='none'``: no position input, the causal offset pairs carry
    the order, any length — the zoo model's choice; ``impl``: the same function computed two ways, see
    :class:`GrassmannMixer`). Raises :class:`GrassmannConfigError` (a ``ValueError``) on bad values.
    """

    kind = "grassmann"
    family = GRASSMANN
    config_class = GrassmannConfig

    def __init__(self, config: GrassmannConfig | dict[str, Any]):
        cfg = GrassmannConfig.coerce(config)
        self.layer_offsets = offsets_per_layer(list(cfg.offsets), cfg.offset_schedule, cfg.n_layers)
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
        ``4 d^2``: re-matched by r; design choice). ±5%; else
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
        monitoring, pitfall) and ``plucker_mean`` ``[layer, T, P]`` (the offset-averaged bivector fed to
        ``W_plu``; zero where no offset is valid). Slots: the layer's sorted offsets (``all``) or its
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
        ``past[l]`` never holds more than ``max(offsets of layer l)`` reduced vectors (Zhang, arXiv 2512.19428)."""
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
class GrassmannAttentionLM(PlaneLM):
    """``grassmann-attn``: the matched baseline — the same model and block layout with causal multi-head
    self-attention in place of the Grassmann mixer (Zhang, arXiv 2512.19428).

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
