"""The blocks a backbone is made of. The block is the only thing two compared models differ in.

| block        | attention            | after attention          | norm        |
|--------------|----------------------|--------------------------|-------------|
| aot-mssa     | MSSA                 | nothing                  | pre-LN / -  |
| aot-mhsa     | MHSA                 | nothing                  | pre-LN / -  |
| transformer  | MHSA                 | x + GELU MLP(LN(x)) [1]  | pre-LN      |
| crate        | MSSA                 | ISTA(LN(x)) (no skip) [2]| pre-LN      |
| llama        | MHSA with RoPE       | x + SwiGLU(RMSNorm(x))   | RMSNorm     |
| linear-attn  | causal linear attn.  | nothing                  | pre-LN      |
| mamba        | Mamba's S6 mixer     | nothing                  | pre-LN      |

``linear-attn`` (Katharopoulos et al. 2020) and ``mamba`` (Gu & Dao 2023, through ``mambapy``) replace the
attention of the AoT layer and are wrapped the same way, ``x + η · mixer(norm(x))``; their cache is a
fixed-size recurrent state.

[1] exact GELU, or GPT-2's tanh approximation (``activation``).
[2] as in the CRATE code; ``ista_residual=True`` adds the step instead: ``x + ISTA(LN(x)) − LN(x)``;
``ista_expand`` > 1 is CRATE-α's overcomplete step, ``x + D̂ a(LN(x))``.

AoT layer (docs/paper.md, eq. 2): ``Z ← Z + η · MSSA(LN(Z))``; η is absorbed into the weights unless
``residual_scale`` makes it an explicit learnable step size (scalar) or LayerScale (per channel).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from aot.config import ModelConfig
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention
from aot.nn.cache import LayerCache
from aot.nn.feedforward import ISTA, GeluMLP, OvercompleteISTA, SwiGLU
from aot.nn.hooks import HookPoint
from aot.nn.linear_attention import LinearSelfAttention
from aot.nn.mamba import MambaMixer
from aot.nn.norms import make_norm

BLOCK_REGISTRY: dict[str, Callable[[ModelConfig], nn.Module]] = {}


def register_block(name: str) -> Callable[[Callable[[ModelConfig], nn.Module]], Callable[[ModelConfig], nn.Module]]:
    """Register a block constructor under ``name``; a config then accepts ``block=name``
    (``aot.config.block_types()`` reads this registry). A block in a new module is registered when the module
    is imported: import it from ``aot/nn/__init__.py``."""

    def wrap(factory: Callable[[ModelConfig], nn.Module]) -> Callable[[ModelConfig], nn.Module]:
        BLOCK_REGISTRY[name] = factory
        return factory

    return wrap


def make_block(cfg: ModelConfig) -> nn.Module:
    return BLOCK_REGISTRY[cfg.block](cfg)


class ResidualScale(nn.Module):
    """The step size η of a residual branch: none, one learnable scalar, or one per channel (LayerScale)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        shape = {"none": None, "scalar": (1,), "channel": (cfg.n_embd,)}[cfg.residual_scale]
        self.eta = None if shape is None else nn.Parameter(torch.full(shape, cfg.residual_scale_init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.eta is None else x * self.eta


def _attention(cfg: ModelConfig) -> nn.Module:
    """The token mixer of a block: MSSA, MHSA, causal linear attention or Mamba's S6."""
    if cfg.block == "linear-attn":
        return LinearSelfAttention(cfg)
    if cfg.block == "mamba":
        return MambaMixer(cfg)
    subspace = cfg.block in ("aot-mssa", "crate")
    return MultiHeadSubspaceSelfAttention(cfg) if subspace else MultiHeadSelfAttention(cfg)


class _Block(nn.Module):
    """Pre-norm attention with a residual; subclasses say what follows it."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn_norm = make_norm(cfg)
        self.attn = _attention(cfg)
        self.attn_scale = ResidualScale(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def attention_step(self, x: torch.Tensor, cache: LayerCache | None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        branch = self.hook_attn_out(self.attn_scale(self.attn(self.attn_norm(x), cache)))
        return x + self.drop(branch)


@register_block("aot-mssa")
@register_block("aot-mhsa")
@register_block("linear-attn")
@register_block("mamba")
class AttentionOnlyBlock(_Block):
    """The AoT layer: ``x + η · attn(norm(x))`` and nothing else (``attn``: the block's token mixer)."""

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        return self.hook_resid_post(self.attention_step(x, cache))


@register_block("transformer")
@register_block("llama")
class TransformerBlock(_Block):
    """GPT-2 / ViT (GELU MLP, LayerNorm) or Llama (SwiGLU, RMSNorm, RoPE): attention then MLP, both residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mlp_norm = make_norm(cfg)
        self.mlp = SwiGLU(cfg) if cfg.block == "llama" else GeluMLP(cfg)
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_out = HookPoint()

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        x = self.hook_resid_mid(self.attention_step(x, cache))
        x = x + self.drop(self.hook_mlp_out(self.mlp(self.mlp_norm(x))))
        return self.hook_resid_post(x)


@register_block("crate")
class CrateBlock(_Block):
    """CRATE: ``z = z + MSSA(LN(z))`` then ``z = ISTA(LN(z))`` — the sparse-coding step replaces the MLP and,
    as in the CRATE code, has no skip connection. With ``ista_residual`` the step is an increment of the
    residual stream instead, ``z = z + (ISTA(u) − u)`` with ``u = LN(z)``: the same proximal-gradient step, written
    the way the block already writes its MSSA step, so that what the step leaves alone stays in the stream. With
    ``ista_expand`` C > 1 the step is CRATE-α's overcomplete one (:class:`OvercompleteISTA`), added to the stream:
    ``z = z + D̂ a``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.mlp_norm = make_norm(cfg)
        self.overcomplete = cfg.ista_expand > 1
        self.mlp = OvercompleteISTA(cfg) if self.overcomplete else ISTA(cfg)
        self.residual = cfg.ista_residual
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_out = HookPoint()

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        x = self.hook_resid_mid(self.attention_step(x, cache))
        code = self.mlp_norm(x)
        if self.overcomplete:  # CRATE-α: z + D̂ a
            return self.hook_resid_post(x + self.hook_mlp_out(self.mlp(code)))
        if self.residual:
            return self.hook_resid_post(x + self.hook_mlp_out(self.mlp(code) - code))
        return self.hook_resid_post(self.hook_mlp_out(self.mlp(code)))
