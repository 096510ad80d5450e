"""``hf-gpt2``: a GPT-2-family checkpoint of the ``transformers`` library (the ``hf`` extra) as a geomlab kind.

Source: Radford et al. 2019, "Language Models are Unsupervised Multitask Learners" (GPT-2), in the
``transformers`` implementation: learned positions ``wte[x] + wpe[t]``, pre-LayerNorm blocks
``x + Attn(LN_1(x))``, ``x + MLP(LN_2(x))``, a final LayerNorm ``ln_f`` and the head tied to ``wte``. The
blocks are ``transformers``' own ``GPT2Block`` modules (their weights, LayerNorms, ``Conv1D`` projections and
MLP are used as they are); only the attention product runs here, through :func:`geomlab.models.layers.attend`,
so its queries, keys and weights are hook points like the ``transformer`` baseline's (design choice: the same
trace family and views). The scale is GPT-2's: ``1/sqrt(d_head)`` when ``scale_attn_weights``, divided by
``layer + 1`` when ``scale_attn_by_inverse_layer_idx``.

A Hugging Face folder (``config.json`` with ``model_type`` ``gpt2``, ``model.safetensors``) is opened with
:meth:`HFGPT2.from_pretrained` (offline: ``local_files_only=True``); :mod:`geomlab.checkpoints.foreign`
lists and loads such folders. The kind is registered when ``transformers`` is installed (``geomlab.models``
skips it otherwise); the library itself is imported only when such a model is built or read.

Hook points (l = 0..n_layers-1, H heads of width d_head = D / H): ``hook_embed`` ``(B, T, D)`` (token plus
position embedding, the residual stream into block 0); ``blocks.l.hook_q`` / ``blocks.l.hook_k``
``(B, H, T, d_head)`` (queries unscaled); ``blocks.l.hook_pattern`` ``(B, H, T, T)`` (the attention weights,
formed only for an active hook); ``blocks.l.hook_z`` ``(B, H, T, d_head)``; ``blocks.l.hook_resid_mid``
``(B, T, D)`` (after the attention); ``blocks.l.hook_resid_post`` ``(B, T, D)`` (after the block; the last
one before ``ln_f``).
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from geomlab.models import register
from geomlab.models.base import LensStage, SequenceModel
from geomlab.models.budget import search_width
from geomlab.models.config import ConfigBase
from geomlab.models.family import TRANSFORMER
from geomlab.models.hooks import HookPoint
from geomlab.models.layers import attend

if TYPE_CHECKING:
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

if importlib.util.find_spec("transformers") is None:  # the kind needs it: not registered without it
    raise ModuleNotFoundError("No module named 'transformers'", name="transformers")


def _gpt2():
    """``transformers``' GPT-2 classes ``(GPT2Config, GPT2LMHeadModel)``, imported when a model is built or
    read (an import of seconds and 100+ MB, which listing the kinds must not pay)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2Config, GPT2LMHeadModel


@dataclass(frozen=True, kw_only=True)
class HFGPT2Config(ConfigBase):
    """The ``hf-gpt2`` keys: ``transformers``' ``GPT2Config`` under geomlab's names (``d_model`` = ``n_embd``,
    ``n_layers`` = ``n_layer``, ``n_heads`` = ``n_head``). Defaults: a small random GPT-2 (design choice)."""

    kind = "hf-gpt2"
    vocab_size: int                 # V
    d_model: int = 64               # n_embd, divisible by n_heads
    n_layers: int = 2               # n_layer
    n_heads: int = 2                # n_head
    n_positions: int = 1024         # longest text in tokens
    n_inner: int = 0                # MLP width; 0 = 4 d_model
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    tie_word_embeddings: bool = True
    dropout: float = 0.0            # resid_pdrop, embd_pdrop and attn_pdrop (0 for an opened folder)

    def validate(self) -> None:
        self.positive("vocab_size", "d_model", "n_layers", "n_heads", "n_positions")
        if self.d_model % self.n_heads:
            self.fail(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_inner < 0:
            self.fail(f"n_inner must be >= 0, got {self.n_inner}")
        self.fraction("dropout")

    def gpt2_config(self) -> GPT2Config:
        """The ``transformers`` config of this model (eager attention: its weights are readable)."""
        GPT2Config, _ = _gpt2()
        return GPT2Config(
            vocab_size=self.vocab_size, n_embd=self.d_model, n_layer=self.n_layers, n_head=self.n_heads,
            n_positions=self.n_positions, n_inner=self.n_inner or None,
            activation_function=self.activation_function, layer_norm_epsilon=self.layer_norm_epsilon,
            scale_attn_weights=self.scale_attn_weights,
            scale_attn_by_inverse_layer_idx=self.scale_attn_by_inverse_layer_idx,
            tie_word_embeddings=self.tie_word_embeddings, resid_pdrop=self.dropout, embd_pdrop=self.dropout,
            attn_pdrop=self.dropout, bos_token_id=None, eos_token_id=None, attn_implementation="eager")

    @classmethod
    def from_gpt2(cls, c: GPT2Config) -> "HFGPT2Config":
        """The geomlab config of a ``transformers`` ``GPT2Config``; ``ValueError`` for settings this kind
        does not reproduce (cross-attention, ``reorder_and_upcast_attn``)."""
        if getattr(c, "add_cross_attention", False):
            raise ValueError("a GPT-2 with cross-attention is not a language model this kind opens")
        if getattr(c, "reorder_and_upcast_attn", False):
            raise ValueError("reorder_and_upcast_attn=true is not supported by hf-gpt2")
        return cls(vocab_size=int(c.vocab_size), d_model=int(c.n_embd), n_layers=int(c.n_layer),
                   n_heads=int(c.n_head), n_positions=int(c.n_positions), n_inner=int(c.n_inner or 0),
                   activation_function=str(c.activation_function), layer_norm_epsilon=float(c.layer_norm_epsilon),
                   scale_attn_weights=bool(c.scale_attn_weights),
                   scale_attn_by_inverse_layer_idx=bool(c.scale_attn_by_inverse_layer_idx),
                   tie_word_embeddings=bool(getattr(c, "tie_word_embeddings", True)))


class _Block(nn.Module):
    """One GPT-2 block (``transformers``' ``GPT2Block`` as ``self.hf``) run with hook points,
    ``(B, T, D) -> (B, T, D)``."""

    def __init__(self, block: GPT2Block, n_heads: int, scaling: float):
        super().__init__()
        self.hf = block
        self.n_heads = n_heads
        self.scaling = scaling  # GPT-2's score scale of this layer
        self.hook_q = HookPoint("(B, H, T, d_head) attention queries (unscaled)")
        self.hook_k = HookPoint("(B, H, T, d_head) attention keys")
        self.hook_pattern = HookPoint("(B, H, T, T) attention weights (formed only while a hook is attached)")
        self.hook_z = HookPoint("(B, H, T, d_head) per-head attention outputs, before the output projection")
        self.hook_resid_mid = HookPoint("(B, T, D) residual stream after the attention")
        self.hook_resid_post = HookPoint("(B, T, D) residual stream after the block")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        H, attn = self.n_heads, self.hf.attn
        q, k, v = attn.c_attn(self.hf.ln_1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        q, k = self.hook_q(q), self.hook_k(k)
        # attend scales by 1/sqrt(d_head); GPT-2's own scale is folded into q
        y = attend(q * (self.scaling * math.sqrt(D // H)), k, v, self.hook_pattern, self.hook_z,
                   dropout_p=attn.attn_dropout.p if self.training else 0.0)
        x = self.hook_resid_mid(x + attn.resid_dropout(attn.c_proj(y.transpose(1, 2).reshape(B, T, D))))
        return self.hook_resid_post(x + self.hf.mlp(self.hf.ln_2(x)))


@register
class HFGPT2(SequenceModel):
    """A GPT-2-family model of ``transformers`` (kind ``hf-gpt2``), read through geomlab's hook points.

    Config: :class:`HFGPT2Config`. ``forward(tokens (B, T) long) -> logits (B, T, V) float32``, equal to
    ``GPT2LMHeadModel``'s logits; ``record`` adds the attention queries and keys. ``ValueError`` for an
    invalid config or a text longer than ``n_positions``.
    """

    kind = "hf-gpt2"
    family = TRANSFORMER
    attention = True
    config_class = HFGPT2Config

    @classmethod
    def config_for_budget(cls, n_params: int, vocab_size: int, **fixed: Any) -> dict[str, Any]:
        """Vary ``d_model`` (multiples of ``n_heads``) at fixed depth to meet the budget (±5%); ``ValueError``
        with the closest miss (design choice, as the ``transformer`` baseline)."""
        base = {**cls.default_config(), **fixed, "kind": cls.kind}
        h = int(base["n_heads"])
        widths = [fixed["d_model"]] if "d_model" in fixed else range(h, 1025, h)
        return search_width(lambda w: {**base, "d_model": w}, widths, n_params, vocab_size, monotone=True)

    def __init__(self, config: HFGPT2Config | dict[str, Any], hf: GPT2LMHeadModel | None = None):
        """``hf``: the ``transformers`` model whose modules this one uses (its weights); None builds a random
        one from ``config`` (GPT-2's initialisation)."""
        super().__init__(config)
        c = self.cfg
        hf = hf if hf is not None else _gpt2()[1](c.gpt2_config())
        body = hf.transformer
        self.wte, self.wpe, self.drop, self.ln_f = body.wte, body.wpe, body.drop, body.ln_f
        self.blocks = nn.ModuleList(_Block(b, c.n_heads, float(b.attn.scaling)) for b in body.h)
        self.head = None if c.tie_word_embeddings else hf.lm_head
        self.hook_embed = HookPoint("(B, T, D) token plus position embedding: the residual stream into block 0")

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> "HFGPT2":
        """The GPT-2 checkpoint in the Hugging Face folder ``folder`` (``config.json`` with ``model_type``
        ``gpt2`` and its weights), read offline (``local_files_only=True``), in eval mode with dropout 0.
        Raises ``ValueError`` for a config this kind does not reproduce; ``transformers``' own errors (OSError,
        ValueError) for a folder it cannot read."""
        hf = _gpt2()[1].from_pretrained(os.fspath(folder), local_files_only=True, use_safetensors=True,
                                        attn_implementation="eager")
        cfg = HFGPT2Config.from_gpt2(hf.config)
        model = cls(cfg, hf=hf)
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = 0.0
        return model.eval()

    def logits_of(self, x: torch.Tensor) -> torch.Tensor:
        """The readout: ``ln_f`` then the head (``wte`` transposed when tied), ``(B, T, D) -> (B, T, V)``."""
        x = self.ln_f(x)
        return x @ self.wte.weight.T if self.head is None else self.head(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (B, T), got {tuple(tokens.shape)}")
        T = tokens.shape[1]
        if T > self.cfg.n_positions:
            raise ValueError(f"the text has {T} tokens; this GPT-2 reads at most n_positions="
                             f"{self.cfg.n_positions}")
        pos = torch.arange(T, device=tokens.device)
        x = self.hook_embed(self.drop(self.wte(tokens) + self.wpe(pos)))
        for block in self.blocks:
            x = block(x)
        return self.logits_of(x)

    def lens_stages(self) -> list[LensStage]:
        """The embedding (stage 0) and the residual stream after each block, through ``ln_f`` and the head."""
        return [LensStage("embedding", "hook_embed", self.logits_of)] + [
            LensStage(f"block {l}", f"blocks.{l}.hook_resid_post", self.logits_of) for l in range(len(self.blocks))]

    def record_hooks(self) -> list[str]:
        """The queries and keys of every block, the embedding and the residual stream after each block."""
        L = len(self.blocks)
        return ([f"blocks.{l}.hook_{a}" for l in range(L) for a in "qk"] + ["hook_embed"]
                + [f"blocks.{l}.hook_resid_post" for l in range(L)])

    def record_from_cache(self, cache: dict[str, torch.Tensor], logits: torch.Tensor, b: int) -> dict[str, torch.Tensor]:
        """``logits`` ``(T, V)``, ``attention_q`` / ``attention_k`` ``(layer, head, T, d_head)`` of sequence
        ``b`` (scores ``q_i·k_j``, GPT-2's scale folded into ``q``; ``geomlab.trace`` forms the weights) and
        ``residual`` ``(layer + 1, T, D)``: the embedding, then the stream after each block (the last before
        ``ln_f``), for the residual-stream figures (:mod:`geomlab.figures.residual`)."""
        L = len(self.blocks)
        q = torch.stack([cache[f"blocks.{l}.hook_q"][b] * self.blocks[l].scaling for l in range(L)])
        resid = [cache["hook_embed"][b]] + [cache[f"blocks.{l}.hook_resid_post"][b] for l in range(L)]
        return {"logits": logits[b], "attention_q": q,
                "attention_k": torch.stack([cache[f"blocks.{l}.hook_k"][b] for l in range(L)]),
                "residual": torch.stack(resid)}
