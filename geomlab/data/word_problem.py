"""The group word problem: read a sequence of group elements, output the running product.

Input tokens are element ids ``g_1 .. g_T`` (uniform, independent); the label at position ``t`` (1-based)
is the id of the product ``p_t = g_1 g_2 ... g_t``. A model must track a state that is updated by
non-commuting elements for S3, S5, A5 (the classic test of state tracking; S5/A5 are non-solvable), and by
commuting ones for Z_n and parity (Z_2). With the model contract, ``logits[:, t]`` (0-based) predicts the
label of position ``t``, i.e. the product of elements ``0..t``.

Conventions (design choice, documented in ``docs/pipeline.md``):

* a permutation of ``{0..n-1}`` is a tuple ``p`` with ``p[i]`` the image of ``i`` ("one-line notation");
* the product is function composition, ``(a b)(i) = a(b(i))``, so ``p_t = p_{t-1} b`` with ``b = g_t``:
  ``p_t[i] = p_{t-1}[g_t[i]]`` (the newest element acts first on the points);
* elements are numbered in lexicographic order of their one-line tuples (id 0 is the identity); A5 keeps
  the even permutations of S5 in that order; Z_n element ``k`` is the residue ``k`` and the product is
  addition mod n.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import torch

from geomlab.data.errors import DataError
from geomlab.data.tasks import Task
from geomlab.data.vocab import Vocab


def _sign(p: tuple[int, ...]) -> int:
    """+1 for an even permutation, -1 for an odd one (by counting inversions)."""
    inv = sum(1 for i in range(len(p)) for j in range(i + 1, len(p)) if p[i] > p[j])
    return -1 if inv % 2 else 1


@dataclass(frozen=True)
class FiniteGroup:
    """A finite group given by its multiplication table.

    ``table[a, b]`` (``LongTensor`` ``(n, n)``) is the id of the product ``a b``; ``names[i]`` names
    element ``i``; ``identity`` is the identity's id; ``abelian`` says whether the table is symmetric.
    """

    name: str
    names: tuple[str, ...]
    table: torch.Tensor
    identity: int

    @property
    def order(self) -> int:
        return len(self.names)

    @property
    def abelian(self) -> bool:
        return bool(torch.equal(self.table, self.table.T))

    def running_product(self, elements: torch.Tensor) -> torch.Tensor:
        """Prefix products: ``elements`` ``(..., T)`` long ids -> ``(..., T)`` ids of ``g_1 ... g_t``."""
        if elements.numel() and (elements.min() < 0 or elements.max() >= self.order):
            raise DataError(f"element ids must lie in 0..{self.order - 1} for {self.name}")
        out = torch.empty_like(elements)
        state = torch.full(elements.shape[:-1], self.identity, dtype=torch.long)
        for t in range(elements.shape[-1]):
            state = self.table[state, elements[..., t]]
            out[..., t] = state
        return out


def permutation_group(n: int, even_only: bool = False, name: str | None = None) -> FiniteGroup:
    """S_n (or A_n with ``even_only``) with the conventions of the module docstring."""
    perms = [p for p in itertools.permutations(range(n)) if not even_only or _sign(p) == 1]
    index = {p: i for i, p in enumerate(perms)}
    table = torch.tensor([[index[tuple(a[b[i]] for i in range(n))] for b in perms] for a in perms],
                         dtype=torch.long)
    names = tuple("".join(str(i) for i in p) if n <= 10 else ",".join(map(str, p)) for p in perms)
    return FiniteGroup(name or (f"A{n}" if even_only else f"S{n}"), names, table, index[tuple(range(n))])


def cyclic_group(n: int, name: str | None = None) -> FiniteGroup:
    """Z_n: residues ``0..n-1`` under addition mod n."""
    if n < 1:
        raise DataError(f"Z_n needs n >= 1, got {n}")
    r = torch.arange(n)
    return FiniteGroup(name or f"Z{n}", tuple(str(k) for k in range(n)), (r[:, None] + r[None, :]) % n, 0)


def get_group(name: str) -> FiniteGroup:
    """``"S3"``, ``"S5"``, ``"A5"``, ``"Zn"`` (e.g. ``"Z5"``), ``"parity"`` (= Z2); also ``"Sn"``/``"An"``
    for 2 <= n <= 6. Raises :class:`DataError` otherwise."""
    key = name.strip()
    low = key.lower()
    if low == "parity":
        return cyclic_group(2, name="parity")
    try:
        if low[0] in "sa" and 2 <= int(low[1:]) <= 6:
            return permutation_group(int(low[1:]), even_only=low[0] == "a")
        if low[0] == "z" and 1 <= int(low[1:]) <= 10_000:
            return cyclic_group(int(low[1:]))
    except (ValueError, IndexError):
        pass
    raise DataError(f"unknown group {name!r}; use S3, S5, A5, Zn (e.g. Z5) or parity")


class WordProblemTask(Task):
    """The word problem of ``group`` as a training task.

    Training batches: ``inputs`` uniform element ids ``(B, T)``, ``targets`` their running products
    ``(B, T)``. Evaluation uses a fixed set of ``n_eval`` sequences of length ``length`` per split
    (seeded by ``seed`` and the split), reporting ``accuracy`` (all positions), ``final_accuracy`` (last
    position) and ``nll`` (nats). The model's ``vocab_size`` is the group order.

    Args:
        group: a group name (:func:`get_group`) or a :class:`FiniteGroup`.
        length: default sequence length for evaluation (training uses the Trainer's ``seq_len``).
        n_eval: sequences per evaluation split. seed: seed of the evaluation sets.
    """

    kind = "classification"
    metric = "accuracy"
    higher_is_better = True

    def __init__(self, group: str | FiniteGroup = "S5", length: int = 32, n_eval: int = 512, seed: int = 1234):
        self.group = get_group(group) if isinstance(group, str) else group
        if length < 1 or n_eval < 1:
            raise DataError(f"length and n_eval must be >= 1, got {length}, {n_eval}")
        self.length, self.n_eval, self.seed = int(length), int(n_eval), int(seed)
        self.vocab = Vocab.from_symbols(self.group.names)
        self.vocab_size = self.group.order
        self.name = f"word-problem {self.group.name}"
        self._eval: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def sample_batch(self, batch_size, seq_len, generator):
        x = torch.randint(0, self.group.order, (batch_size, seq_len), generator=generator)
        return x, self.group.running_product(x)

    def eval_set(self, split: str = "valid", length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The fixed ``(inputs, targets)`` of a split, each ``(n_eval, length)`` long."""
        length = self.length if length is None else int(length)
        key = (split, length)
        if key not in self._eval:
            offset = {"train": 0, "valid": 1, "test": 2}.get(split)
            if offset is None:
                raise DataError(f"unknown split {split!r}")
            g = torch.Generator().manual_seed(self.seed * 3 + offset)
            self._eval[key] = self.sample_batch(self.n_eval, length, g)
        return self._eval[key]

    @torch.no_grad()
    def per_length_accuracy(self, model, split: str = "valid", length: int | None = None,
                            device="cpu") -> torch.Tensor:
        """Accuracy at each position: ``FloatTensor`` ``(length,)``; entry ``t`` is the accuracy on
        prefixes of ``t + 1`` elements."""
        x, y = self.eval_set(split, length)
        was = model.training
        model.eval()
        try:
            correct = torch.zeros(x.shape[1])
            for i in range(0, x.shape[0], 256):
                logits = model(x[i:i + 256].to(device))
                correct += (logits.argmax(-1).cpu() == y[i:i + 256]).float().sum(0)
        finally:
            model.train(was)
        return correct / x.shape[0]

    @torch.no_grad()
    def evaluate(self, model, split="valid", *, seq_len=None, device="cpu", max_tokens=None, stride=None):
        x, y = self.eval_set(split)
        was = model.training
        model.eval()
        try:
            correct = torch.zeros(x.shape[1])
            nll = 0.0
            for i in range(0, x.shape[0], 256):
                logits = model(x[i:i + 256].to(device)).float().cpu()
                correct += (logits.argmax(-1) == y[i:i + 256]).float().sum(0)
                nll += float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), y[i:i + 256].reshape(-1), reduction="sum"))
        finally:
            model.train(was)
        per_pos = correct / x.shape[0]
        return {"accuracy": float(per_pos.mean()), "final_accuracy": float(per_pos[-1]),
                "nll": nll / y.numel(), "tokens": float(y.numel())}

    def spec(self) -> dict[str, Any]:
        return {"task": "word-problem", "name": self.name, "group": self.group.name, "length": self.length,
                "n_eval": self.n_eval, "seed": self.seed}
