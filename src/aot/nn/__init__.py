"""The math: attention (MSSA, MHSA), blocks and their specs, norms, rotary, caches and hook points.

Importing the package registers the built-in block types (:mod:`aot.nn.specs`).
"""

from aot.blockspec import BlockSpec, block_spec, register_block
from aot.nn.attention import (
    MultiHeadSelfAttention,
    MultiHeadSubspaceSelfAttention,
    reference_attention,
    use_reference_attention,
)
from aot.nn.blocks import AttentionOnlyBlock, CrateBlock, TransformerBlock, make_block
from aot.nn.cache import Cache, LayerCache
from aot.nn.hooks import HookedModule, HookPoint
from aot.nn.specs import AOT_MHSA, AOT_MSSA, CRATE, LINEAR_ATTN, LLAMA, MAMBA, TRANSFORMER

__all__ = [
    "AOT_MHSA",
    "AOT_MSSA",
    "CRATE",
    "LINEAR_ATTN",
    "LLAMA",
    "MAMBA",
    "TRANSFORMER",
    "AttentionOnlyBlock",
    "BlockSpec",
    "Cache",
    "CrateBlock",
    "HookPoint",
    "HookedModule",
    "LayerCache",
    "MultiHeadSelfAttention",
    "MultiHeadSubspaceSelfAttention",
    "TransformerBlock",
    "block_spec",
    "make_block",
    "reference_attention",
    "register_block",
    "use_reference_attention",
]
