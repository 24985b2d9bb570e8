"""The shared backbone: a stack of blocks and a final norm. Every model is embedding → Backbone → head."""

from __future__ import annotations

import math

import torch
from torch import nn

from aot.config import ModelConfig
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.nn.blocks import make_block
from aot.nn.cache import Cache
from aot.nn.feedforward import ISTA, OvercompleteISTA
from aot.nn.hooks import HookPoint
from aot.nn.norms import make_norm

# residual output projections get std / sqrt(2 L) (GPT-2 / nanoGPT); an MSSA with a tied output has none
_RESIDUAL_OUTPUTS = ("attn.out_proj.weight", "mlp.down_proj.weight", "attn.ssm.out_proj.weight")


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.blocks = nn.ModuleList(make_block(cfg) for _ in range(cfg.n_layer))
        self.final_norm = make_norm(cfg) if cfg.final_norm else nn.Identity()
        self.hook_final = HookPoint()

    def forward(
        self, x: torch.Tensor, cache: Cache | None = None, return_intermediates: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, list[torch.Tensor]]:
        """x: (B, T, d) → (B, T, d). With ``return_intermediates`` also the residual stream after each block."""
        intermediates = []
        for index, block in enumerate(self.blocks):
            x = block(x, None if cache is None else cache[index])
            if return_intermediates:
                intermediates.append(x)
        x = self.hook_final(self.final_norm(x))
        return (x, intermediates) if return_intermediates else x


def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
    """Normal(0, init_std) for every linear and embedding weight, zeros for biases, init_std / sqrt(2 L) for
    residual output projections (GPT-2 / nanoGPT), CRATE's kaiming-uniform for its dictionaries. Norms stay 1.
    With ``subspace_init='orthogonal'`` MSSA's bases [U_1 … U_K] get orthonormal columns of the length a normal
    column has (init_std·√d). A module marked ``keep_init`` (Mamba's Δ projection) keeps the initialisation its
    constructor gave it."""
    residual_std = cfg.init_std / math.sqrt(2 * cfg.n_layer)
    for module in model.modules():
        if getattr(module, "keep_init", False):
            continue
        if isinstance(module, (nn.Linear, nn.Embedding, nn.Conv2d)):
            nn.init.normal_(module.weight, std=cfg.init_std)
            bias = getattr(module, "bias", None)
            if isinstance(bias, torch.Tensor):
                nn.init.zeros_(bias)
        elif isinstance(module, ISTA):
            nn.init.kaiming_uniform_(module.dictionary)  # as in the CRATE code
        elif isinstance(module, OvercompleteISTA):
            nn.init.kaiming_uniform_(module.encoder)  # as in CRATE-α's code
            nn.init.kaiming_uniform_(module.decoder)
    if getattr(cfg, "subspace_init", "normal") == "orthogonal":
        for module in model.modules():
            if isinstance(module, MultiHeadSubspaceSelfAttention):
                # weight (K·p, d) = [U_1 … U_K]ᵀ: orthonormal rows = orthonormal columns of U
                nn.init.orthogonal_(module.subspace_proj.weight, gain=cfg.init_std * math.sqrt(cfg.n_embd))
    for name, param in model.named_parameters():
        if name.endswith(_RESIDUAL_OUTPUTS):
            nn.init.normal_(param, std=residual_std)
