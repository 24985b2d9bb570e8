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

A block's own hyperparameters are its options (:class:`aot.blockspec.BlockOptions`), declared here beside its
spec: :class:`MssaOptions`, :class:`CrateOptions`, :class:`LinearAttnOptions`, :class:`MambaOptions`. The
modules read them as ``cfg.NAME``, as they read the shared fields.

A new block type is one more ``register_block(BlockSpec(...))``, here or in a module ``aot/nn/__init__.py``
imports (or, outside the package, in the module that defines the block: tests/nn/throwaway_block.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from aot.blockspec import BlockOptions, BlockSpec, register_block
from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention
from aot.nn.blocks import AttentionOnlyBlock, CrateBlock, TransformerBlock
from aot.nn.feedforward import GeluMLP, SwiGLU, sparse_coding_flops, sparse_coding_step
from aot.nn.linear_attention import LinearSelfAttention
from aot.nn.mamba import MambaMixer
from aot.validation import Limit, at_least, one_of

MSSA, MHSA = MultiHeadSubspaceSelfAttention, MultiHeadSelfAttention


def _sum(*counts: Callable[[ModelConfig], int]) -> Callable[[ModelConfig], int]:
    """The dense FLOPs of a block as the sum of its parts' counts."""
    return lambda cfg: sum(count(cfg) for count in counts)


@dataclass
class MssaOptions(BlockOptions):
    """AoT-MSSA's own fields.

    subspace_init: ``normal`` (every weight from the normal init) or ``orthogonal``: the bases [U_1 … U_K] start
        with orthonormal columns scaled by ``init_std * sqrt(n_embd)`` (the length a normal column has), so the K
        subspaces start mutually orthogonal, as Definition 1's data assumes (when K·p > d, as orthogonal as the
        shape allows: [U_1 … U_K] has orthogonal rows).
    token_shift: ``none`` (the paper's operator), or mix each token with the one before it ahead of the
        projection, z̃_t = z_t + μ ⊙ (z_{t−1} − z_t), with one learned μ (``scalar``) or one per channel
        (``channel``) (:mod:`aot.nn.token_shift`; RWKV's time-mix): Q = K = V = U_kᵀz̃, a previous-token path
        for recall (docs/math.md).
    """

    subspace_init: str = "normal"
    token_shift: str = "none"

    LIMITS: ClassVar[dict[str, Limit]] = {
        "subspace_init": one_of("normal", "orthogonal"),
        "token_shift": one_of("none", "scalar", "channel"),
    }
    ADDED_LATER: ClassVar[dict[str, object]] = {"token_shift": "none"}


@dataclass
class CrateOptions(BlockOptions):
    """CRATE's sparse-coding step.

    ista_step, ista_lambda: η and λ of the ISTA step (0.1 and 0.1 in the CRATE code).
    ista_residual: False (the CRATE code): the ISTA output replaces the residual stream, ``z <- ISTA(LN(z))``.
        True: the step is added as an increment, ``z <- z + ISTA(LN(z)) - LN(z)``, so the stream keeps what the
        step leaves unchanged; without it a deep causal LM collapses every token onto one vector and stays at the
        unigram (benchmarks/lm/crate_diagnosis.md).
    ista_expand: 1 (CRATE): the complete d × d dictionary above. C > 1: CRATE-α's overcomplete step (Yang et al.,
        2024): an encoding dictionary D ∈ R^{d×Cd}, two ISTA iterations from a zero code,
        a ← ReLU(η Dᵀu − ηλ), a ← ReLU(a − η Dᵀ(D a − u) − ηλ), decoded by a second dictionary D̂ ∈ R^{d×Cd} and
        added to the stream, ``z <- z + D̂ a`` with ``u = LN(z)`` (CRATE-α uses C = 4; 2·C·d² parameters against
        the complete step's d²).
    """

    ista_step: float = 0.1
    ista_lambda: float = 0.1
    ista_residual: bool = False
    ista_expand: int = 1

    LIMITS: ClassVar[dict[str, Limit]] = {
        "ista_step": at_least(0),
        "ista_lambda": at_least(0),
        "ista_expand": at_least(1),
    }

    def check(self, cfg: ModelConfig) -> None:
        if self.ista_expand > 1 and self.ista_residual:
            raise ConfigError(
                "ista_expand > 1 is CRATE-α's step, which always adds its output to the stream; drop ista_residual"
            )


@dataclass
class LinearAttnOptions(BlockOptions):
    """linear_attn_normalize: divide by φ(q)ᵀ Σ φ(k) (Katharopoulos et al.) or not."""

    linear_attn_normalize: bool = True


@dataclass
class MambaOptions(BlockOptions):
    """Mamba's state size N (``mamba_d_state``), expansion E/d (``mamba_expand``) and conv width (``mamba_d_conv``)."""

    mamba_d_state: int = 16
    mamba_expand: int = 2
    mamba_d_conv: int = 4

    LIMITS: ClassVar[dict[str, Limit]] = {
        "mamba_d_state": at_least(1),
        "mamba_expand": at_least(1),
        "mamba_d_conv": at_least(1),
    }


AOT_MSSA = register_block(
    BlockSpec(
        name="aot-mssa",
        block=AttentionOnlyBlock,
        mixer=MSSA,
        options=MssaOptions,
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
        options=CrateOptions,
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
        options=LinearAttnOptions,
        heads_span_width=True,
        recurrent=True,
    )
)

# the selective scan keeps its expanded state (~610 bytes per token and unit of width measured at d = 64)
MAMBA = register_block(
    BlockSpec(
        name="mamba",
        block=AttentionOnlyBlock,
        mixer=MambaMixer,
        options=MambaOptions,
        recurrent=True,
        activation_bytes=768,
    )
)

__all__ = [
    "AOT_MHSA",
    "AOT_MSSA",
    "CRATE",
    "LINEAR_ATTN",
    "LLAMA",
    "MAMBA",
    "TRANSFORMER",
    "CrateOptions",
    "LinearAttnOptions",
    "MambaOptions",
    "MssaOptions",
]
