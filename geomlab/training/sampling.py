"""Sampling text from a trained model: :func:`generate` (``python -m geomlab sample``)."""

from __future__ import annotations

import torch


@torch.no_grad()
def generate(model, prompt_ids: torch.Tensor, length: int, temperature: float = 1.0, top_k: int | None = None,
             context: int | None = None, seed: int | None = None, device: str | torch.device = "cpu",
             exclude: list[int] | None = None) -> torch.Tensor:
    """Sample ``length`` new tokens after ``prompt_ids`` (``LongTensor`` ``(N,)``, ``N >= 1``).

    Each step re-runs the model on the last ``context`` tokens (default: all) and samples from
    ``softmax(logits / temperature)`` (``temperature = 0``: greedy; ``top_k``: keep the k most likely).
    Token ids in ``exclude`` (e.g. the unknown token) are never produced.
    Uses its own ``torch.Generator`` seeded with ``seed``. Returns ``LongTensor`` ``(length,)`` (CPU).
    The scaling is done in float64 after subtracting the largest logit, so any finite temperature works (a huge
    one samples uniformly, a tiny one greedily); design choice.

    Raises ``ValueError`` for an empty prompt, a negative length, a negative or non-finite temperature, a
    ``top_k`` or ``context`` below 1, or a seed outside ``0 <= seed < 2**63``.
    """
    import math

    if prompt_ids.numel() < 1:
        raise ValueError("the prompt must hold at least one token")
    if length < 0 or not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"length and temperature must be finite and >= 0, got {length}, {temperature}")
    for name, value in (("top_k", top_k), ("context", context)):
        if value is not None and int(value) < 1:
            raise ValueError(f"{name} must be at least 1 (or None: not set), got {value}")
    if seed is not None and not 0 <= int(seed) < 2 ** 63:
        raise ValueError(f"seed must be 0 to 2**63 - 1, got {seed}")
    gen = torch.Generator().manual_seed(int(seed) if seed is not None else 0)
    seq = prompt_ids.reshape(-1).long().cpu()
    was = model.training
    model.eval()
    out = []
    try:
        for _ in range(int(length)):
            window = seq[-context:] if context else seq
            logits = model(window[None, :].to(device))[0, -1].float().cpu()
            if exclude:
                logits[torch.tensor(exclude, dtype=torch.long)] = float("-inf")
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                logits = (logits.double() - logits.max()) / temperature
                if top_k:
                    kth = torch.topk(logits, min(int(top_k), logits.numel())).values[-1]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=gen))
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([nxt])])
    finally:
        model.train(was)
    return torch.tensor(out, dtype=torch.long)
