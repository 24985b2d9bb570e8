"""Mamba's selective state-space mixer (S6; Gu & Dao 2023) through PyPI ``mambapy`` (pure PyTorch, optional
extra ``aot[mamba]``).

Per channel c of the expanded input u = SiLU(conv(x W_in)) (width E = expand · d), with input-dependent
Δ_t = softplus(W_Δ u_t), B_t = W_B u_t, C_t = W_C u_t and a learned diagonal A = −exp(A_log) (E × N):

    h_t = exp(Δ_t A) ⊙ h_{t−1} + Δ_t B_t u_t,      y_t = C_tᵀ h_t + D ⊙ u_t,      out = (y ⊙ SiLU(z)) W_out

``mambapy.mamba.MambaBlock`` computes this with a parallel scan over the whole sequence (training) and one
step at a time (decoding). The state a decoding step carries is h (B, E, N) plus the last d_conv − 1 conv
inputs (B, E, d_conv − 1): fixed size, whatever the length of the sequence.

The block wraps it like every other mixer: ``x + η · mixer(norm(x))`` (:class:`aot.nn.blocks.AttentionOnlyBlock`).
"""

from __future__ import annotations

import torch
from torch import nn

from aot.config import ModelConfig
from aot.errors import AotError
from aot.nn.cache import LayerCache


def mamba_inner_sizes(cfg: ModelConfig) -> tuple[int, int, int]:
    """(E, R, N): the expanded width expand · d, the rank of Δ's projection ⌈d / 16⌉ (mambapy's 'auto'),
    and the state size per channel."""
    return cfg.mamba_expand * cfg.n_embd, -(-cfg.n_embd // 16), cfg.mamba_d_state


class MambaMixer(nn.Module):
    """The S6 mixer of one block: ``mambapy.mamba.MambaBlock`` (no biases in its input / output projections,
    as in Mamba). ``ssm.dt_proj`` keeps Mamba's own initialisation (Δ between 0.001 and 0.1)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        try:
            from mambapy.mamba import MambaBlock, MambaConfig
        except ImportError:
            raise AotError(
                "block='mamba' needs the mambapy package; install it with `pip install 'aot[mamba]'`"
            ) from None
        self.config = MambaConfig(
            d_model=cfg.n_embd,
            n_layers=cfg.n_layer,
            d_state=cfg.mamba_d_state,
            expand_factor=cfg.mamba_expand,
            d_conv=cfg.mamba_d_conv,
            bias=False,
        )
        self.ssm = MambaBlock(self.config)
        self.ssm.dt_proj.keep_init = True  # type: ignore[assignment]  # aot.models.backbone.init_weights skips it

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        if cache is None:
            return self.ssm(x)
        # cached: the recurrence, token by token, from the state the cache holds
        if cache.state:
            h, inputs = cache.state
        else:
            E = self.config.d_inner
            h = x.new_zeros(x.shape[0], E, self.config.d_state)
            inputs = x.new_zeros(x.shape[0], E, self.config.d_conv - 1)
        outs = []
        for t in range(x.shape[1]):
            out, (h, inputs) = self.ssm.step(x[:, t], (h, inputs))
            outs.append(out)
        cache.set_state(h, inputs, n_new=x.shape[1])
        return torch.stack(outs, dim=1)
