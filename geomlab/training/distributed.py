"""Data-parallel training across processes (``torchrun``): the process group, each rank's shard of a batch.

``torchrun --nproc_per_node N -m geomlab train ...`` starts N processes (ranks) with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` in their environment.
:func:`init_from_env` joins them into one process group (NCCL for CUDA tensors, gloo for CPU tensors), and
:class:`geomlab.training.trainer.Trainer` then trains one model with ``torch.nn.parallel.DistributedDataParallel``:

* **Batches**: ``--batch-size`` is the *global* batch. Every rank draws the same global batch with the same
  seeded generator and keeps its rows ``[r*B/N, (r+1)*B/N)`` (:meth:`Replicas.shard`), so the data order
  is the single-process one and ``B`` must be divisible by ``N``. DDP averages the gradients of the N shard
  losses (each a mean over its ``B/N`` windows), which is the gradient of the global batch's mean loss;
  the logged loss is the mean of the shard losses (:meth:`Replicas.mean`).
* **Agreement**: the gradients are the same on every rank after DDP's all-reduce, so every rank takes the
  same step, sees the same non-finite values and evaluates the same weights; a stop asked on one rank is
  agreed on by all at the next step (it travels in the all-reduce of the loss), so no rank waits alone in
  a collective.
* **Files and output**: only rank 0 writes checkpoints and logs and prints (:attr:`Replicas.is_main`).
* **Dropout**: every rank's run generators (:class:`geomlab.core.rng.RunRNG`) start from the same seed (and,
  on resume, the same saved state), so the ranks draw the same masks for their own rows (design choice:
  one generator state to save; the default model configs have no dropout).

Source: design choice, following PyTorch's DDP documentation (one process per device).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Replicas:
    """Where this process stands among the data-parallel ranks: ``rank`` in ``[0, world_size)``.

    ``Replicas()`` is a single process (every method is then a no-op); :meth:`current` reads the process
    group that :func:`init_from_env` made."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def current(cls) -> "Replicas":
        """This process's rank and the world size of torch's default process group (one process when
        none is initialised)."""
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes checkpoints and logs and prints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def check_batch(self, batch_size: int) -> None:
        """``ValueError`` (one line) when the global ``batch_size`` cannot be split evenly across ranks."""
        if int(batch_size) % self.world_size:
            raise ValueError(f"--batch-size {batch_size} (the global batch) cannot be split evenly across "
                             f"{self.world_size} processes: choose a multiple of {self.world_size}")

    def place(self, device: torch.device) -> torch.device:
        """The device of this rank: ``cuda`` becomes ``cuda:LOCAL_RANK`` across several processes.
        ``ValueError`` for MPS, which DDP does not support."""
        if not self.distributed:
            return device
        if device.type == "mps":
            raise ValueError("training across processes (torchrun) runs on CUDA or the CPU, not on MPS: "
                             "pass --device cpu")
        if device.type == "cuda" and device.index is None:
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        return device

    def shard(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's rows of a global batch: ``x``, ``y`` ``(B, ...)`` -> rows ``[r*B/N, (r+1)*B/N)``."""
        if not self.distributed:
            return x, y
        k = x.shape[0] // self.world_size
        rows = slice(self.rank * k, (self.rank + 1) * k)
        return x[rows], y[rows]

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``model`` for training: wrapped in ``DistributedDataParallel`` across several processes (its
        parameters are broadcast from rank 0 and its gradients averaged in backward), else itself."""
        if not self.distributed:
            return model
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of ``value`` (a tensor, same shape on every rank) over the ranks; ``value`` itself for
        one process."""
        if not self.distributed:
            return value
        out = value.detach().clone()
        torch.distributed.all_reduce(out)
        return out / self.world_size


def init_from_env(device: str | None = None) -> Replicas:
    """Join the process group that ``torchrun`` describes in the environment (``WORLD_SIZE`` > 1), once;
    a single process otherwise. ``device``: the requested training device (``--device``), ``None`` = auto.
    The backend is ``cpu:gloo,cuda:nccl`` when CUDA is present and the device is not ``cpu`` (NCCL for CUDA
    tensors, gloo for CPU ones; each rank then uses GPU ``LOCAL_RANK``), else ``gloo``.
    Raises ``ValueError`` (one line) for a malformed environment or more ranks than CUDA devices."""
    dist = torch.distributed
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        raise ValueError("WORLD_SIZE and LOCAL_RANK must be integers (start several processes with torchrun)"
                         ) from None
    if world <= 1 or (dist.is_available() and dist.is_initialized()):
        return Replicas.current()
    if not dist.is_available():
        raise ValueError("this torch build has no torch.distributed: train in one process")
    backend = "gloo"
    if torch.cuda.is_available() and not str(device or "auto").startswith("cpu"):
        if local >= torch.cuda.device_count():
            raise ValueError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} CUDA device(s): start at "
                             "most one process per GPU (or train on the CPU with --device cpu)")
        torch.cuda.set_device(local)
        backend = "cpu:gloo,cuda:nccl"
    dist.init_process_group(backend=backend)
    return Replicas.current()


def shutdown() -> None:
    """Leave the process group made by :func:`init_from_env` (no-op without one), all ranks together: a
    barrier first, so a rank with nothing left to do (no checkpoint to write) does not tear its side of the
    group down while rank 0 is still saving (gloo then aborted that rank at exit under load: "terminate called
    without an active exception")."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
