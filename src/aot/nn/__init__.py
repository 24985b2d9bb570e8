"""The math: attention (MSSA, MHSA), blocks, norms, rotary, caches and hook points."""

from aot.nn.attention import (
    MultiHeadSelfAttention,
    MultiHeadSubspaceSelfAttention,
    reference_attention,
    use_reference_attention,
)
from aot.nn.blocks import BLOCK_REGISTRY, AttentionOnlyBlock, CrateBlock, TransformerBlock, make_block
from aot.nn.cache import Cache, LayerCache
from aot.nn.hooks import HookedModule, HookPoint

__all__ = [
    "BLOCK_REGISTRY",
    "AttentionOnlyBlock",
    "Cache",
    "CrateBlock",
    "HookPoint",
    "HookedModule",
    "LayerCache",
    "MultiHeadSelfAttention",
    "MultiHeadSubspaceSelfAttention",
    "TransformerBlock",
    "make_block",
    "reference_attention",
    "use_reference_attention",
]
