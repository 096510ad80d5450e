"""O(b)^m: block-diagonal real orthogonal matrices, every verb computed per block with the O(b) numerics
(Nunley, arXiv 2602.18417)."""

from __future__ import annotations

import torch

from geomlab.geometry.groups._linalg import (GroupError, _batch_shape, _diag_embed_blocks, _extract_blocks, _finite,
                                    _finite_or_eye, _nan_where_bad, _unitary64)
from geomlab.geometry.groups.base import MatrixGroup
from geomlab.geometry.groups.expm import expm_skew
from geomlab.geometry.groups.orthogonal import OrthogonalGroup


class BlockOrthogonalGroup(MatrixGroup):
    """O(b)^m: block-diagonal real orthogonal matrices with ``m = d / b`` blocks of size ``b`` (Nunley, arXiv 2602.18417).

    Algebra: block-diagonal skew-symmetric matrices, dim ``m b(b-1)/2``. ``exp``/``log`` act per block
    (batched ``matrix_exp`` on ``(..., m, b, b)``); coordinates are the per-block O(b) coordinates, block-major.
    """

    name = "O-block"
    is_complex = False

    def __init__(self, d: int, block: int):
        super().__init__(d)
        if isinstance(block, bool) or not isinstance(block, int) or block < 1:
            raise GroupError(f"O-block: option block must be a positive int, got {block!r}")
        if d % block:
            raise GroupError(f"O-block: block={block} does not divide d={d}")
        self.block = int(block)
        self.m = d // block
        self.options = {"block": self.block}
        self._inner = OrthogonalGroup(self.block)
        self._mask_cache: dict = {}

    @property
    def dim(self) -> int:
        return self.m * self.block * (self.block - 1) // 2

    def _mask(self, device, dtype) -> torch.Tensor:
        key = (str(device), dtype)
        if key not in self._mask_cache:
            ones = torch.ones(self.m, self.block, self.block, dtype=dtype, device=device)
            self._mask_cache[key] = _diag_embed_blocks(ones)
        return self._mask_cache[key]

    def blocks(self, X: torch.Tensor) -> torch.Tensor:
        """The diagonal blocks of ``X``: ``(..., d, d)`` -> ``(..., m, b, b)`` (a differentiable view)."""
        self._check(X, "X")
        return _extract_blocks(X, self.block)

    def from_blocks(self, blocks: torch.Tensor) -> torch.Tensor:
        """Block-diagonal matrix from blocks: ``(..., m, b, b)`` -> ``(..., d, d)``. Differentiable."""
        if blocks.ndim < 3 or tuple(blocks.shape[-3:]) != (self.m, self.block, self.block):
            raise GroupError(f"{self!r}: blocks must have shape (..., {self.m}, {self.block}, {self.block})")
        return _diag_embed_blocks(blocks)

    def proj(self, Y: torch.Tensor) -> torch.Tensor:
        """``skew`` of each diagonal block, zero elsewhere. Idempotent, differentiable. Source: Nunley, arXiv 2602.18417."""
        self._check(Y, "Y")
        return (Y - Y.mT) / 2 * self._mask(Y.device, Y.dtype)

    def to_coords(self, A: torch.Tensor) -> torch.Tensor:
        """Per-block O(b) coordinates, block-major, shape ``(..., m b(b-1)/2)``. Source: Nunley, arXiv 2602.18417."""
        B = self.blocks(A)
        return self._inner.to_coords(B).flatten(-2)

    def from_coords(self, c: torch.Tensor) -> torch.Tensor:
        self._check_coords(c)
        per = self.block * (self.block - 1) // 2
        B = self._inner.from_coords(c.reshape(*c.shape[:-1], self.m, per))
        return _diag_embed_blocks(B)

    from_coords.__doc__ = MatrixGroup.from_coords.__doc__

    def exp(self, A: torch.Tensor, method: str = "auto") -> torch.Tensor:
        """Batched exponential of the diagonal blocks ``(..., m, b, b)`` (off-block entries of ``A`` are ignored),
        cost ``O(m b^3)``; ``method`` as in :func:`expm_skew`. Differentiable. Source: Nunley, arXiv 2602.18417."""
        B = self.blocks(A).contiguous()  # matrix_exp rejects this strided view
        return _diag_embed_blocks(expm_skew(B, method))

    def log(self, H: torch.Tensor) -> torch.Tensor:
        """Per-block principal log (see :meth:`MatrixGroup.log`); off-block entries are ignored.
        Raises :class:`GroupError` if a block has det < 0. Source: Nunley, arXiv 2602.18417 + design choice."""
        self._check(H, "H")
        ok = _finite(H)
        X, _ = _unitary64(self.blocks(_finite_or_eye(H.detach(), ok)))
        self._inner._check_det(X)
        return _nan_where_bad(_diag_embed_blocks(self._inner._log_real(X)), ok).to(H.dtype)

    def dist(self, H1: torch.Tensor, H2: torch.Tensor) -> torch.Tensor:
        """Geodesic distance ``||log(H1^T H2)||_F`` computed per block; ``inf`` where some block of
        ``H1^T H2`` has det < 0 (different components). Shape ``(...)``. Source: issue #2 + design choice."""
        self._check(H1, "H1")
        self._check(H2, "H2")
        M = H1.mT @ H2
        ok = _finite(M.detach())
        X, _ = _unitary64(_extract_blocks(_finite_or_eye(M.detach(), ok), self.block))  # (..., m, b, b)
        neg = torch.linalg.det(X) < 0
        eye = torch.eye(self.block, dtype=X.dtype, device=X.device)
        X = torch.where(neg[..., None, None], eye, X)
        theta = torch.angle(torch.linalg.eigvals(X))  # (..., m, b)
        f = theta.square().sum(dim=(-2, -1)).sqrt()
        return self._finish_dist(M, ok, f, lambda: _diag_embed_blocks(X @ self._inner._log_real(X)),
                                 far=neg.any(-1))

    def belongs(self, H: torch.Tensor, atol: float = 1e-5) -> torch.Tensor:
        ok = super().belongs(H, atol)
        off = (H * (1 - self._mask(H.device, H.dtype))).abs().amax(dim=(-2, -1))
        return ok & (off <= atol)

    belongs.__doc__ = MatrixGroup.belongs.__doc__

    def reproject(self, H: torch.Tensor) -> torch.Tensor:
        """Polar factor of each diagonal block; off-block entries are dropped (NaN everywhere when any entry is
        non-finite). Source: design choice."""
        self._check(H, "H")
        ok = _finite(H)
        U, _, Vh = torch.linalg.svd(_finite_or_eye(self.blocks(_finite_or_eye(H, ok))))
        return _nan_where_bad(_diag_embed_blocks(U @ Vh), ok)

    def random_point(self, *batch, generator=None, dtype=None, device=None) -> torch.Tensor:
        """Haar on each O(b) block independently (Haar on O(b)^m). Shape ``(*batch, d, d)``."""
        shape = _batch_shape(batch)
        dtype = self._resolve_dtype(dtype)
        Q = self._haar_unitary((*shape, self.m), self.block, generator, device, complex_=False)
        return _diag_embed_blocks(Q).to(dtype)
