"""Floating-point operations of one training step per model: the measure of compute that does not depend on the
machine (the campaign's equal-compute comparison reads it beside CPU seconds).

:func:`step_flops` counts one forward pass, cross-entropy and backward pass on a ``(batch, seq_len)`` batch with
:class:`torch.utils.flop_counter.FlopCounterMode` (matrix products and attention kernels, the usual convention:
one multiply-add = 2 FLOPs; element-wise work is not counted). Attention runs through its math path while counting,
so fused CPU kernels the counter does not know are counted as their matrix products.
:func:`transformer_step_flops` is the analytic count of the ALiBi Transformer, which a test holds the counter to.
Source: design choice (the counting convention is PyTorch's flop counter's)."""

from __future__ import annotations

from typing import Any


class FlopsError(ValueError):
    """A model config whose training step cannot be counted."""


def step_flops(config: dict[str, Any], batch_size: int, seq_len: int) -> int:
    """FLOPs of one training step (forward + cross-entropy + backward, no optimizer update) of the model
    ``config`` (a complete :func:`geomlab.models.build_model` config) on a ``(batch_size, seq_len)`` batch of
    tokens, with the weights drawn at seed 0: the matrix exponential of the OSM models chooses its number of
    squarings from the norms of its inputs, so their count depends on the weights (the count at
    initialisation; a trained model's may differ by a few percent). Deterministic: the same config and shapes
    give the same count. Raises :class:`FlopsError` for a config that does not build or a model whose output
    is not logits ``(B, T, V)``."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from geomlab.models import build_model

    if batch_size < 1 or seq_len < 1:
        raise FlopsError(f"batch_size and seq_len must be >= 1, got {batch_size} and {seq_len}")
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = build_model(dict(config))
    except (KeyError, TypeError, ValueError) as exc:
        raise FlopsError(f"cannot build the model to count its FLOPs: {exc}") from None
    vocab = int(model.config["vocab_size"])
    tokens = torch.randint(0, vocab, (batch_size, seq_len), generator=torch.Generator().manual_seed(0))
    model.train()
    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
        logits = model(tokens)
        if not isinstance(logits, torch.Tensor) or logits.shape != (batch_size, seq_len, vocab):
            raise FlopsError(f"{model.config.get('kind')}: forward did not return logits of shape (B, T, V)")
        F.cross_entropy(logits.reshape(-1, vocab), tokens.reshape(-1)).backward()
    return int(counter.get_total_flops())


def transformer_step_flops(config: dict[str, Any], batch_size: int, seq_len: int) -> int:
    """Analytic FLOPs of one training step of the ALiBi Transformer (:class:`geomlab.models.transformer.Transformer`)
    with ``d_model`` D, ``n_layers`` L, ``mlp_ratio`` r, vocabulary V on ``N = batch_size * seq_len`` tokens of
    length T: forward ``2 N (L (4 D^2 + 2 r D^2 + 2 T D) + D V)`` (QKV and output projections, the MLP, the
    T x T scores and their weighted sum over every position, the head), backward twice the forward (each product
    has a gradient for both operands). Source: the standard count (Kaplan et al. 2020, arXiv 2001.08361, Table 1,
    with the full T x T attention this implementation computes)."""
    D, L, r, V = (int(config[k]) for k in ("d_model", "n_layers", "mlp_ratio", "vocab_size"))
    N, T = batch_size * seq_len, seq_len
    forward = 2 * N * (L * (4 * D * D + 2 * r * D * D + 2 * T * D) + D * V)
    return 3 * forward
