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

Each block type is one :class:`aot.blockspec.BlockSpec` in :mod:`aot.nn.specs`: one of the modules below with
the mixer and feed-forward it is handed, its config rules and its FLOPs.

AoT layer (docs/paper.md, eq. 2): ``Z ← Z + η · MSSA(LN(Z))``; η is absorbed into the weights unless
``residual_scale`` makes it an explicit learnable step size (scalar) or LayerScale (per channel).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from aot.blockspec import block_spec
from aot.config import ModelConfig
from aot.nn.cache import LayerCache
from aot.nn.hooks import HookPoint
from aot.nn.norms import make_norm

#: what a block is handed to build its token mixer and feed-forward with (``aot.blockspec.BlockSpec``)
ModuleFactory = Callable[[ModelConfig], nn.Module]


def make_block(cfg: ModelConfig) -> nn.Module:
    """One layer of ``cfg.block``, built from its registered spec (:mod:`aot.nn.specs`)."""
    return block_spec(cfg.block).build(cfg)


class ResidualScale(nn.Module):
    """The step size η of a residual branch: none, one learnable scalar, or one per channel (LayerScale)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        shape = {"none": None, "scalar": (1,), "channel": (cfg.n_embd,)}[cfg.residual_scale]
        self.eta = None if shape is None else nn.Parameter(torch.full(shape, cfg.residual_scale_init))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.eta is None else x * self.eta


class _Block(nn.Module):
    """Pre-norm attention (``mixer``: MSSA, MHSA, linear attention, S6) with a residual; subclasses say what
    follows it (``feedforward``)."""

    def __init__(self, cfg: ModelConfig, mixer: ModuleFactory) -> None:
        super().__init__()
        self.attn_norm = make_norm(cfg)
        self.attn = mixer(cfg)
        self.attn_scale = ResidualScale(cfg)
        self.drop = nn.Dropout(cfg.dropout)
        self.hook_resid_pre = HookPoint()
        self.hook_attn_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def attention_step(self, x: torch.Tensor, cache: LayerCache | None) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        branch = self.hook_attn_out(self.attn_scale(self.attn(self.attn_norm(x), cache)))
        return x + self.drop(branch)


class AttentionOnlyBlock(_Block):
    """The AoT layer: ``x + η · attn(norm(x))`` and nothing else (``attn``: the block's token mixer)."""

    def __init__(self, cfg: ModelConfig, mixer: ModuleFactory, feedforward: ModuleFactory | None = None) -> None:
        if feedforward is not None:
            raise ValueError("an attention-only block has no feed-forward; use TransformerBlock")
        super().__init__(cfg, mixer)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        return self.hook_resid_post(self.attention_step(x, cache))


class TransformerBlock(_Block):
    """Attention then a feed-forward, both pre-norm and residual: GPT-2 / ViT (MHSA, GELU MLP, LayerNorm) or
    Llama (MHSA with RoPE, SwiGLU, RMSNorm)."""

    def __init__(self, cfg: ModelConfig, mixer: ModuleFactory, feedforward: ModuleFactory | None = None) -> None:
        if feedforward is None:
            raise ValueError("a transformer block needs a feed-forward")
        super().__init__(cfg, mixer)
        self.mlp_norm = make_norm(cfg)
        self.mlp = feedforward(cfg)
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_out = HookPoint()

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        x = self.hook_resid_mid(self.attention_step(x, cache))
        x = x + self.drop(self.hook_mlp_out(self.mlp(self.mlp_norm(x))))
        return self.hook_resid_post(x)


class CrateBlock(_Block):
    """CRATE: ``z = z + MSSA(LN(z))`` then ``z = ISTA(LN(z))`` — the sparse-coding step replaces the MLP and,
    as in the CRATE code, has no skip connection. With ``ista_residual`` the step is an increment of the
    residual stream instead, ``z = z + (ISTA(u) − u)`` with ``u = LN(z)``: the same proximal-gradient step, written
    the way the block already writes its MSSA step, so that what the step leaves alone stays in the stream. With
    ``ista_expand`` C > 1 the step is CRATE-α's overcomplete one (:class:`aot.nn.feedforward.OvercompleteISTA`),
    added to the stream: ``z = z + D̂ a``. ``feedforward`` builds the step
    (:func:`aot.nn.feedforward.sparse_coding_step`)."""

    def __init__(self, cfg: ModelConfig, mixer: ModuleFactory, feedforward: ModuleFactory | None = None) -> None:
        if feedforward is None:
            raise ValueError("a CRATE block needs its sparse-coding step")
        super().__init__(cfg, mixer)
        self.mlp_norm = make_norm(cfg)
        self.mlp = feedforward(cfg)
        self.overcomplete = cfg.ista_expand > 1
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
