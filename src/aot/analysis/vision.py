"""Vision models: how spread the class token's attention is, layer by layer.

H(a) = −Σ_j a_j ln a_j of the class token's (query 0) attention over the 1 + N tokens, per head, averaged over
images: ln(1 + N) is uniform attention, 0 attention to one token.
"""

from __future__ import annotations

import torch

from aot.analysis.heads import model_blocks
from aot.nn.hooks import HookedModule


def attention_entropy(pattern: torch.Tensor, query: int = 0) -> torch.Tensor:
    """Entropy (nats) of row ``query`` of every head's pattern (B, H, T, T), averaged over the batch: (H,)."""
    row = pattern[:, :, query, :].to(torch.float64)
    return -(row * torch.log(row.clamp_min(1e-300))).sum(-1).mean(0)


@torch.no_grad()
def cls_attention_entropy(model: HookedModule, images: torch.Tensor) -> torch.Tensor:
    """The class token's attention entropy per layer and head, (L, H), from ``blocks.{l}.attn.hook_pattern``."""
    n_layer = len(model_blocks(model))
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layer)]
    _, cache = model.run_with_cache(images, names_filter=names)
    return torch.stack([attention_entropy(cache[name]) for name in names])
