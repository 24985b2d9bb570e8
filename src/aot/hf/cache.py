"""The cache ``AotForCausalLM`` returns: transformers' ``Cache`` API over aot's own per-layer cache.

aot's blocks write :class:`aot.nn.cache.LayerCache` (``extend``): MSSA stores ONE tensor per layer, the projections
Uᵀz, which are query, key and value at once; MHSA stores two (keys, values); a recurrent block (``linear-attn``,
``mamba``) a fixed-size state, and a token shift the last token it saw. :class:`AotCacheLayer` is that
``LayerCache`` with what transformers calls on a cache layer (``get_seq_length``, ``crop``, ``reorder_cache``,
``batch_repeat_interleave``, ``batch_select_indices``, ``reset``, ``update``); its ``keys`` and ``values`` are the
cached tensors, and for MSSA they are views of one tensor (``len(layer.tensors) == 1``): the cache holds half
the bytes of a key-value cache. :class:`AotCache` is a ``DynamicCache`` of those layers, and holds the position of every
cached token too: with padding a token's position is not its index, and a rotary layer rotates each cached key by
its own position.

A layer that holds a state cannot be cropped (``is_croppable`` is false: the state of a recurrent block, or a
token shift's last token, cannot be rolled back), so assisted and prompt-lookup decoding, which crop, need a block
without one; transformers says so in one line.

This file depends on torch, transformers and :mod:`aot.nn.cache` only: ``aot export hf`` pastes it into the
export's modelling code (:mod:`aot.hf.standalone`).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache as TransformersCache
from transformers.cache_utils import CacheLayerMixin, DynamicCache

from aot.nn.cache import MIN_CAPACITY, LayerCache


class AotCacheLayer(LayerCache, CacheLayerMixin):
    """aot's :class:`LayerCache` of one block, with transformers' cache-layer methods (see the module docstring)."""

    is_compileable = False
    is_sliding = False
    supports_early_init = False  # the buffers are made by the first extend, at the size of what it brings

    def __init__(self, min_capacity: int = MIN_CAPACITY) -> None:
        LayerCache.__init__(self, min_capacity)  # not CacheLayerMixin's: keys and values are read from the buffers

    @property
    def is_initialized(self) -> bool:  # type: ignore[override]
        return bool(self._buffers or self._state)

    @property
    def is_croppable(self) -> bool:  # type: ignore[override]
        return not self._state

    @property
    def keys(self) -> torch.Tensor | None:  # type: ignore[override]
        """The cached keys (B, H, length, p); for MSSA the one cached tensor, which is the values too."""
        tensors = self.tensors
        return tensors[0] if tensors else None

    @property
    def values(self) -> torch.Tensor | None:  # type: ignore[override]
        tensors = self.tensors
        return tensors[-1] if tensors else None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """Nothing to prepare: the first ``extend`` makes the buffers."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor | None = None, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """transformers' name for ``extend``: one tensor when ``value_states`` is ``key_states`` (or None)."""
        one = value_states is None or value_states is key_states
        tensors = self.extend(key_states) if one else self.extend(key_states, value_states)  # type: ignore[arg-type]
        return tensors[0], tensors[-1]

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1  # grows by doubling

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def crop(self, tokens_to_remove: int) -> None:
        """Forget the last ``-tokens_to_remove`` tokens (transformers passes a negative count)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes the negative number of tokens to remove, got {tokens_to_remove}")
        if tokens_to_remove == 0:
            return
        if self._state:
            raise ValueError("this aot block keeps a state (recurrent, or a token shift's last token): no crop")
        self._length = max(0, self._length + tokens_to_remove)

    def reset(self) -> None:
        self._length = 0
        self._state = ()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self.select(beam_idx)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._buffers = tuple(buffer[indices.to(buffer.device)] for buffer in self._buffers)
        self._state = tuple(state[indices.to(state.device)] for state in self._state)

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._buffers = tuple(buffer.repeat_interleave(repeats, dim=0) for buffer in self._buffers)
        self._state = tuple(state.repeat_interleave(repeats, dim=0) for state in self._state)

    def offload(self) -> None:
        """Offloading is not supported: the buffers stay where they are."""

    def prefetch(self) -> None:
        """Offloading is not supported: nothing to fetch back."""


class AotCache(DynamicCache):
    """One :class:`AotCacheLayer` per block, and ``positions`` (B, length): the position of every cached token."""

    def __init__(self, n_layer: int, min_capacity: int = MIN_CAPACITY) -> None:
        TransformersCache.__init__(self, layers=[AotCacheLayer(min_capacity) for _ in range(n_layer)])
        self.positions: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """Tokens cached (aot's name; transformers': ``get_seq_length()``)."""
        return self.get_seq_length()

    @property
    def nbytes(self) -> int:
        """Bytes of the cached entries of every layer (see :attr:`aot.nn.cache.LayerCache.nbytes`)."""
        return sum(layer.nbytes for layer in self.layers if isinstance(layer, AotCacheLayer))

    def add_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """Append the positions (B, T) of the tokens a call brings; returns those of every cached token."""
        self.positions = positions if self.positions is None else torch.cat([self.positions, positions], dim=1)
        return self.positions

    def reset(self) -> None:
        super().reset()
        self.positions = None

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        if self.positions is not None:
            self.positions = self.positions[:, : self.get_seq_length()]

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        if self.positions is not None:
            self.positions = self.positions.index_select(0, beam_idx.to(self.positions.device))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        if self.positions is not None:
            self.positions = self.positions[indices.to(self.positions.device)]

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        if self.positions is not None:
            self.positions = self.positions.repeat_interleave(repeats, dim=0)
