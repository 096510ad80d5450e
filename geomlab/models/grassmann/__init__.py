"""Grassmann flow language models: ``grassmann`` (attention-free) and ``grassmann-attn`` (its baseline).

Source: Zhang Chong, "Attention Is Not What You Need: Grassmann Flows as an Attention-Free Alternative for
Sequence Modeling", arXiv 2512.19428 (the layer, the model, its tiny configurations). The Causal Grassmann mixer of one layer, input ``H`` ``(B, T, d)``:

1. reduce: ``z_t = W_red h_t + b_red`` ``(B, T, r)``
2. for each offset ``D`` of the layer and each ``t >= D``: the oriented plane span(z_t, z_{t-D}) by its
   Plücker vector ``p_ij = z_{t,i} z_{t-D,j} - z_{t,j} z_{t-D,i}`` (``P = r(r-1)/2``), normalised
   ``p / max(||p||, eps)``. Offsets with no past partner (``t < D``) are skipped, not zero-padded.
3. ``g_t = W_plu mean_{D <= t} p_hat(t, D) + b_plu`` (average first, then one projection), and
   ``g_t = 0`` where no offset is valid (t = 0) (a choice the paper leaves open, fixed here).
4. gated fusion ``alpha_t = sigmoid(W_gate [h_t; g_t] + b_gate)``, ``m_t = alpha_t h_t + (1 - alpha_t) g_t``.

Block layouts (config ``layout``; the attention baseline uses the same one):

* ``post_norm`` (reported): ``v = LN1(m)``; ``x = LN2(v + FFN(v))`` — the mixer's ``alpha * h`` is the skip
  path. For ``grassmann-attn`` the mixer output is ``m = x + Attn(x)`` (attention has no skip of its own).
* ``post_norm_residual`` (kanenorman's reading): ``v = LN1(x + Mix(x))``; ``x = LN2(v + FFN(v))``.
* ``pre_norm`` (alphaXiv reading): ``x = x + LN_in(Mix(LN1(x)))``; ``x = x + FFN(LN2(x))``. For
  ``grassmann-attn``: the standard ``x = x + Attn(LN1(x))`` (no inner LayerNorm).

The whole model: token embedding (+ learned positions, config ``positions``), the blocks, a final
LayerNorm and the tied output head ``logits = LN_f(x) E^T``. FFN ``d -> d_ff -> d`` with GELU.

Positions (config ``positions``): ``learned`` (as reported) adds a trained table of ``max_len`` rows, so
the model cannot read past ``max_len`` (``ValueError``); ``sinusoidal`` adds the fixed code of
:func:`sinusoidal_positions` (no parameters, any length); ``none`` adds nothing — the mixer is already
order-aware, since each position pairs its own reduced vector with those at fixed causal offsets
``(t, t - D)``, and how many offsets are valid marks the first ``max(offsets)`` positions — so the model
reads any length (``max_len`` is then unused). ``none`` is what the bundled zoo model uses: at the zoo's
recipe it trained as well as the learned table (docs/zoo.md, docs/grassmann.md).

Incremental decoding (``grassmann`` only): :meth:`GrassmannLM.init_state` and
:meth:`GrassmannLM.step` keep per layer only the last ``max(offsets of the layer)`` reduced vectors, so the
state is ``O(n_layers * max(offsets) * rank)``, constant in the sequence length; the logits equal the full
forward pass up to float rounding.

Inferred / design choices (each a config key): ``eps`` (1e-6), ``normalize`` (``clamp`` as reported or
``smooth`` = ``p / sqrt(||p||^2 + eps^2)``), ``gate`` (``concat`` = sigmoid(W[h; g] + b), reported, or
``input`` = sigmoid(W h + b)), ``offset_schedule`` (``all`` = every layer uses every offset, the
reproductions' reading and default; ``per_layer`` = layer l uses ``offsets[l]`` only),
``positions`` (``learned`` up to ``max_len``, as reported, or ``none``: any length), initialisation (embeddings
N(0, 0.02), linear layers PyTorch default; design choice, identical for both kinds).

Modules: :mod:`~geomlab.models.grassmann.config` (the two configs), :mod:`~geomlab.models.grassmann.mixer` (the
Causal Grassmann mixer), :mod:`~geomlab.models.grassmann.attention` (the baseline's causal self-attention),
:mod:`~geomlab.models.grassmann.blocks` (one block in any layout), :mod:`~geomlab.models.grassmann.base` (the
shared LM skeleton and the sinusoidal positions), :mod:`~geomlab.models.grassmann.model` (the two kinds).
"""

from geomlab.models.grassmann.attention import CausalSelfAttention
from geomlab.models.grassmann.base import SINUSOID_RMS, PlaneLM, sinusoidal_positions
from geomlab.models.grassmann.blocks import PlaneBlock
from geomlab.models.grassmann.config import GrassmannAttentionConfig, GrassmannConfig, GrassmannConfigError
from geomlab.models.grassmann.mixer import GrassmannMixer
from geomlab.models.grassmann.model import GrassmannAttentionLM, GrassmannLM

__all__ = ["GrassmannConfigError", "GrassmannConfig", "GrassmannAttentionConfig", "GrassmannMixer",
           "CausalSelfAttention", "PlaneBlock", "SINUSOID_RMS", "sinusoidal_positions", "PlaneLM", "GrassmannLM",
           "GrassmannAttentionLM"]
