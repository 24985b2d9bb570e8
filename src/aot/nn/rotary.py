"""Rotary position embedding (RoPE, Su et al. 2021), the Llama / GPT-NeoX "rotate half" convention."""

from __future__ import annotations

import torch
from torch import nn


class Rotary(nn.Module):
    """Rotates pairs of channels of q and k by position-dependent angles theta_i * t.

    Applied to the tensors that form attention scores only (never to values), so that
    ``<rope(q_s), rope(k_t)>`` depends on s - t alone.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, H, T, p) -> same shape, token t at absolute position ``offset + t``."""
        T = x.shape[-2]
        pos = torch.arange(offset, offset + T, device=x.device, dtype=torch.float64)
        angles = torch.outer(pos, self.inv_freq.to(x.device))  # (T, p/2)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(x.dtype)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(x.dtype)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin
