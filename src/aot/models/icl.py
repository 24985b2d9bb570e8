"""In-context regressor (Garg et al. 2022): x and y interleaved in one causal sequence.

The prompt x_1, y_1, x_2, y_2, … is read in by one linear map (y padded with zeros to the width of x), the
backbone runs causally, and a scalar read-out at every x position predicts that x's y.
"""

from __future__ import annotations

import torch
from torch import nn

from aot.config import ModelConfig
from aot.models.base import AotModel
from aot.models.inputs import check_prompt


class InContextRegressor(AotModel):
    embedding_names = ("read_in", "pos_embed")

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.read_in = nn.Linear(cfg.n_dims, cfg.n_embd)
        self.pos_embed = nn.Embedding(2 * cfg.n_points, cfg.n_embd) if cfg.position == "learned" else None
        self.read_out = nn.Linear(cfg.n_embd, 1)
        self._finish()

    @staticmethod
    def interleave(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """xs (B, n, D), ys (B, n) → (B, 2n, D): x_1, [y_1, 0, …], x_2, [y_2, 0, …], …"""
        B, n, D = xs.shape
        ys_wide = torch.cat([ys.unsqueeze(-1), xs.new_zeros(B, n, D - 1)], dim=-1)
        return torch.stack([xs, ys_wide], dim=2).reshape(B, 2 * n, D)

    def forward(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """Predict y_i from (x_1, y_1, …, x_i): returns (B, n)."""
        check_prompt(xs, ys, self.cfg.n_dims, self.cfg.n_points)
        n = xs.shape[1]
        x = self.read_in(self.interleave(xs, ys))
        if self.pos_embed is not None:
            x = x + self.pos_embed(torch.arange(2 * n, device=xs.device))
        hidden = self.backbone(x)
        return self.read_out(hidden[:, ::2]).squeeze(-1)
