"""Rotary position embedding (RoPE, Su et al. 2021), the Llama / GPT-NeoX "rotate half" convention."""

from __future__ import annotations

import torch
from torch import nn


class Rotary(nn.Module):
    """Rotates pairs of channels of q and k by position-dependent angles theta_i * t.

    Applied to the tensors that form attention scores only (never to values), so that
    ``<rope(q_s), rope(k_t)>`` depends on s - t alone. The cos / sin tables are computed in float64 once per
    device and dtype and grown by doubling (:meth:`tables`), not recomputed in every layer on every call.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        self.inv_freq: torch.Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._tables: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    def tables(self, length: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)``, each ``(n, p)`` with ``n >= length``: row t holds the angles of position t."""
        key = (device, dtype)
        cached = self._tables.get(key)
        if cached is None or cached[0].shape[0] < length:
            size = max(64, 1 << (length - 1).bit_length())
            # plain tensors even when called under inference_mode, so that a later training step can use them
            with torch.inference_mode(False), torch.no_grad():
                pos = torch.arange(size, device=device, dtype=torch.float64)
                angles = torch.outer(pos, self.inv_freq.to(device=device, dtype=torch.float64))  # (n, p/2)
                angles = torch.cat([angles, angles], dim=-1)
                cached = (angles.cos().to(dtype), angles.sin().to(dtype))
            self._tables[key] = cached
        return cached

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (B, H, T, p) -> same shape, token t at absolute position ``offset + t``."""
        T = x.shape[-2]
        cos, sin = self.tables(offset + T, x.device, x.dtype)
        cos, sin = cos[offset : offset + T], sin[offset : offset + T]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin
