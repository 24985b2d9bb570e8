"""The built-in block types, one :class:`~aot.blockspec.BlockSpec` each, registered on import.

Each spec names the block module and the mixer and feed-forward it is built from, the config rules that come
with it, and its forward FLOPs per token and layer, summed from the counts next to each module's forward
(``flops_per_token``, ``attention_flops``; the table is in :mod:`aot.bench.flops`):

| block       | module              | mixer          | after the mixer | FLOPs (dense)        |
|-------------|---------------------|----------------|-----------------|----------------------|
| aot-mssa    | AttentionOnlyBlock  | MSSA           | —               | 4·d·Kp               |
| aot-mhsa    | AttentionOnlyBlock  | MHSA           | —               | 8·d²                 |
| transformer | TransformerBlock    | MHSA           | GELU MLP        | 8·d² + 4·r·d²        |
| crate       | CrateBlock          | MSSA           | ISTA / CRATE-α  | 4·d·Kp + 6·d² / 8·C·d²|
| llama       | TransformerBlock    | MHSA (RoPE)    | SwiGLU          | 8·d² + 6·d·h         |
| linear-attn | AttentionOnlyBlock  | linear attn.   | —               | none (recurrent)     |
| mamba       | AttentionOnlyBlock  | Mamba's S6     | —               | none (recurrent)     |

``aot-mssa``'s ``token_shift`` (:mod:`aot.nn.token_shift`) is element-wise work: it adds no matrix-product FLOPs.

A new block type is one more ``register_block(BlockSpec(...))``, here or in a module ``aot/nn/__init__.py``
imports.
"""

from __future__ import annotations

from collections.abc import Callable

from aot.blockspec import BlockSpec, register_block
from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention
from aot.nn.blocks import AttentionOnlyBlock, CrateBlock, TransformerBlock
from aot.nn.feedforward import GeluMLP, SwiGLU, sparse_coding_flops, sparse_coding_step
from aot.nn.linear_attention import LinearSelfAttention
from aot.nn.mamba import MambaMixer

MSSA, MHSA = MultiHeadSubspaceSelfAttention, MultiHeadSelfAttention


def _sum(*counts: Callable[[ModelConfig], int]) -> Callable[[ModelConfig], int]:
    """The dense FLOPs of a block as the sum of its parts' counts."""
    return lambda cfg: sum(count(cfg) for count in counts)


def _check_crate(cfg: ModelConfig) -> None:
    if cfg.ista_expand > 1 and cfg.ista_residual:
        raise ConfigError(
            "ista_expand > 1 is CRATE-α's step, which always adds its output to the stream; drop ista_residual"
        )


AOT_MSSA = register_block(
    BlockSpec(
        name="aot-mssa",
        block=AttentionOnlyBlock,
        mixer=MSSA,
        own_fields={
            "subspace_init": "subspace_init={value!r} sets MSSA's bases U_k; block={block!r} has none, "
            "leave it 'normal'",
            "token_shift": "token_shift={value!r} mixes each token with the previous one ahead of AoT-MSSA's "
            "projection; block={block!r} has none, leave it 'none'",
        },
        dense_flops=MSSA.flops_per_token,
        attention_flops=MSSA.attention_flops,
        subspace=True,
        lens=True,
        family="mssa",
        bench=(("AoT-MSSA (tied)", {"tied_output": True}), ("AoT-MSSA (W_O)", {"tied_output": False})),
    )
)

AOT_MHSA = register_block(
    BlockSpec(
        name="aot-mhsa",
        block=AttentionOnlyBlock,
        mixer=MHSA,
        heads_span_width=True,
        dense_flops=MHSA.flops_per_token,
        attention_flops=MHSA.attention_flops,
        lens=True,
        family="mhsa",
        bench=(("AoT-MHSA", {}),),
    )
)

TRANSFORMER = register_block(
    BlockSpec(
        name="transformer",
        block=TransformerBlock,
        mixer=MHSA,
        feedforward=GeluMLP,
        heads_span_width=True,
        dense_flops=_sum(MHSA.flops_per_token, GeluMLP.flops_per_token),
        attention_flops=MHSA.attention_flops,
        lens=True,
        family="vit",
        hf_gpt2=True,
        bench=(("GPT-2", {"activation": "gelu_tanh"}),),
    )
)

CRATE = register_block(
    BlockSpec(
        name="crate",
        block=CrateBlock,
        mixer=MSSA,
        feedforward=sparse_coding_step,
        own_fields={
            "ista_residual": "ista_residual=true is for block='crate' (the ISTA step); block={block!r} has none",
            "ista_expand": "ista_expand={value} is for block='crate' (CRATE-α's sparse coding step)",
        },
        check=_check_crate,
        dense_flops=_sum(MSSA.flops_per_token, sparse_coding_flops),
        attention_flops=MSSA.attention_flops,
        subspace=True,
        family="crate",
        bench=(("CRATE", {"tied_output": False}),),
    )
)

LLAMA = register_block(
    BlockSpec(
        name="llama",
        block=TransformerBlock,
        mixer=MHSA,
        feedforward=SwiGLU,
        defaults={"norm": "rmsnorm", "position": "rope"},
        heads_span_width=True,
        dense_flops=_sum(MHSA.flops_per_token, SwiGLU.flops_per_token),
        attention_flops=MHSA.attention_flops,
        bench=(("Llama", {"bias": False}),),
    )
)

LINEAR_ATTN = register_block(
    BlockSpec(
        name="linear-attn",
        block=AttentionOnlyBlock,
        mixer=LinearSelfAttention,
        heads_span_width=True,
        recurrent=True,
    )
)

# the selective scan keeps its expanded state (~610 bytes per token and unit of width measured at d = 64)
MAMBA = register_block(
    BlockSpec(name="mamba", block=AttentionOnlyBlock, mixer=MambaMixer, recurrent=True, activation_bytes=768)
)

__all__ = ["AOT_MHSA", "AOT_MSSA", "CRATE", "LINEAR_ATTN", "LLAMA", "MAMBA", "TRANSFORMER"]
