"""Checkpoint files altered the way a damaged copy would be, for the tests of the weights' sha256."""

from __future__ import annotations

from pathlib import Path


def change_one_value(weights: Path) -> None:
    """Write the safetensors file ``weights`` again with one value changed: the same names, shapes, dtypes,
    header metadata (the save id) and size, a valid safetensors file whose sha256 is not the one recorded at
    the save."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(weights), framework="pt") as f:
        header = f.metadata()
        tensors = {k: f.get_tensor(k).clone() for k in f.keys()}
    name = next(k for k, v in tensors.items() if v.is_floating_point() and v.numel())
    tensors[name].view(-1)[0] += 0.5
    size = weights.stat().st_size
    save_file(tensors, str(weights), metadata=header)
    assert weights.stat().st_size == size
