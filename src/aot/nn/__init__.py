"""The math: attention (MSSA, MHSA), blocks, norms, rotary, caches and hook points."""

from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention, reference_attention
from aot.nn.blocks import BLOCK_REGISTRY, AttentionOnlyBlock, CrateBlock, TransformerBlock, make_block
from aot.nn.cache import Cache, LayerCache
from aot.nn.hooks import HookedModule, HookPoint

__all__ = [
    "MultiHeadSubspaceSelfAttention", "MultiHeadSelfAttention", "reference_attention",
    "AttentionOnlyBlock", "TransformerBlock", "CrateBlock", "make_block", "BLOCK_REGISTRY",
    "Cache", "LayerCache", "HookPoint", "HookedModule",
]
