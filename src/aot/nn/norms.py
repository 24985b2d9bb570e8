"""Pre-norms: LayerNorm (optionally without bias), RMSNorm, or none (the paper's vision models)."""

from __future__ import annotations

from torch import nn

from aot.config import ModelConfig


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm == "layernorm":
        return nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
    if cfg.norm == "rmsnorm":
        return nn.RMSNorm(cfg.n_embd, eps=1e-6)
    return nn.Identity()
