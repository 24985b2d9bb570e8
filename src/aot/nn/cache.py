"""Key/value cache for incremental decoding.

MSSA caches one tensor per layer, the subspace projections P = U^T z (it is query, key and value at once);
standard attention caches two (keys and values). So MSSA's cache is half the bytes per token.

Storage: each cached tensor lives in a buffer (B, H, capacity, p) that is written in place and grows by
doubling when full, so a decoding step copies only its own new entries (appending with ``torch.cat`` would
copy the whole prefix at every step: O(T²) bytes over a generation). The attention reads a view of the
filled part. When the new entries need gradients (a cache used under autograd) the cache concatenates
instead, since in-place writes into a buffer that an earlier step's graph still reads would be wrong.

Recurrent blocks (``linear-attn``, ``mamba``) cache no tokens but a fixed-size state that each call replaces
(:meth:`LayerCache.set_state`): their cache does not grow with the sequence.
"""

from __future__ import annotations

import torch

#: entries a buffer holds when it is first allocated, unless the first chunk is longer
MIN_CAPACITY = 256


class LayerCache:
    """The cached attention inputs of one layer, grown along the time axis (dim -2)."""

    def __init__(self, min_capacity: int = MIN_CAPACITY) -> None:
        self._buffers: tuple[torch.Tensor, ...] = ()
        self._state: tuple[torch.Tensor, ...] = ()
        self._length = 0
        self.min_capacity = min_capacity

    @property
    def length(self) -> int:
        return self._length

    @property
    def capacity(self) -> int:
        return self._buffers[0].shape[-2] if self._buffers else 0

    @property
    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The cached tensors (B, H, length, p): views of the filled part of the buffers."""
        return tuple(buffer[..., : self._length, :] for buffer in self._buffers)

    def extend(self, *new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Append this step's tensors (B, H, T_new, p) and return the full cached tensors."""
        n_new = new[0].shape[-2]
        needed = self._length + n_new
        if any(t.requires_grad for t in new):  # autograd: a fresh tensor per step, nothing written in place
            old = self.tensors
            self._buffers = tuple(torch.cat([o, t], dim=-2) for o, t in zip(old, new)) if old else new
        else:
            if needed > self.capacity:
                self._grow(new, needed)
            for buffer, t in zip(self._buffers, new):
                buffer[..., self._length : needed, :].copy_(t)
        self._length = needed
        return self.tensors

    def _grow(self, new: tuple[torch.Tensor, ...], needed: int) -> None:
        capacity = max(needed, 2 * self.capacity, self.min_capacity)
        grown = tuple(t.new_empty(*t.shape[:-2], capacity, t.shape[-1]) for t in new)
        for buffer, cached in zip(grown, self.tensors):  # nothing to copy on the first call
            buffer[..., : self._length, :].copy_(cached)
        self._buffers = grown

    def select(self, index: torch.Tensor) -> None:
        """Keep the batch rows ``index`` (B',) in that order, buffers and state: beam search reorders its beams with
        it."""
        self._buffers = tuple(buffer.index_select(0, index.to(buffer.device)) for buffer in self._buffers)
        self._state = tuple(state.index_select(0, index.to(state.device)) for state in self._state)

    @property
    def state(self) -> tuple[torch.Tensor, ...]:
        """The recurrent state of a recurrent block (empty before its first call and for attention blocks)."""
        return self._state

    def set_state(self, *state: torch.Tensor, n_new: int) -> None:
        """A recurrent block's new state after ``n_new`` more tokens (replaces the old one: fixed size)."""
        self._state = state
        self._length += n_new

    @property
    def nbytes(self) -> int:
        """Bytes of the cached entries (the buffers may hold up to twice as many slots) or recurrent state."""
        return sum(t.numel() * t.element_size() for t in (*self.tensors, *self._state))


class Cache(list[LayerCache]):
    """One :class:`LayerCache` per block; ``cache.length`` tokens are cached (``len(cache)`` is the number of
    layers)."""

    @classmethod
    def for_layers(cls, n_layer: int, min_capacity: int = MIN_CAPACITY) -> Cache:
        return cls(LayerCache(min_capacity) for _ in range(n_layer))

    @property
    def length(self) -> int:
        return self[0].length if self else 0

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self)

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        """Keep batch rows ``beam_idx`` in every layer (the name HuggingFace's beam search calls)."""
        for layer in self:
            layer.select(beam_idx)
