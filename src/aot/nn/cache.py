"""Key/value cache for incremental decoding.

MSSA caches one tensor per layer, the subspace projections P = U^T z (it is query, key and value at once);
standard attention caches two (keys and values). So MSSA's cache is half the bytes per token.
"""

from __future__ import annotations

import torch


class LayerCache:
    """The cached attention inputs of one layer, grown along the time axis (dim -2)."""

    def __init__(self) -> None:
        self.tensors: tuple[torch.Tensor, ...] = ()

    @property
    def length(self) -> int:
        return self.tensors[0].shape[-2] if self.tensors else 0

    def extend(self, *new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Append this step's tensors (B, H, T_new, p) and return the full cached tensors."""
        if self.tensors:
            self.tensors = tuple(torch.cat([old, t], dim=-2) for old, t in zip(self.tensors, new))
        else:
            self.tensors = tuple(new)
        return self.tensors

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors)


class Cache(list[LayerCache]):
    """One :class:`LayerCache` per block; ``len(cache[0])`` tokens are cached."""

    @classmethod
    def for_layers(cls, n_layer: int) -> Cache:
        return cls(LayerCache() for _ in range(n_layer))

    @property
    def length(self) -> int:
        return self[0].length if self else 0

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self)
