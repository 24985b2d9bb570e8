"""The token shift: each token mixed with the one before it, ahead of MSSA's projection (``token_shift``, off by
default). RWKV's time-mix (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era", §3.1.1) and the short
convolution of Based (Arora et al. 2024) give their token mixers the same previous-token path.

    z̃_t = z_t + μ ⊙ (z_{t−1} − z_t) = (1 − μ) ⊙ z_t + μ ⊙ z_{t−1},      z_{−1} = 0

with μ one learned scalar (``scalar``, starts at 0.5) or one per channel (``channel``, starts as the ramp
μ_c = c / (d − 1) from 0 to 1, as RWKV's per-channel ramp: some channels carry the token, some its predecessor).
MSSA then runs unchanged on z̃, Q = K = V = U_kᵀ z̃ (:class:`aot.nn.attention.MultiHeadSubspaceSelfAttention`): the
shift gives its symmetric scores a previous-token term, which a look-up needs (docs/math.md, "What MSSA can and
cannot express for recall"). Element-wise work, so no matrix-product FLOPs (:mod:`aot.bench.flops`); 1 or d
parameters per layer. With a cache the last input token is the layer's state
(:meth:`aot.nn.cache.LayerCache.set_state`), so cached decoding continues the shift exactly.
"""

from __future__ import annotations

import torch
from torch import nn

from aot.config import ModelConfig
from aot.nn.cache import LayerCache


class TokenShift(nn.Module):
    """z ↦ z + μ ⊙ (shift(z) − z) over the time axis of (B, T, d) inputs; see the module docstring."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        d = cfg.n_embd
        start = torch.full((1,), 0.5) if cfg.token_shift == "scalar" else torch.linspace(0.0, 1.0, d)
        self.mix = nn.Parameter(start)  # μ: the weight of the previous token

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        if cache is not None and cache.state:
            first = cache.state[0].to(x.dtype)  # the last token of the previous call
        else:
            first = x.new_zeros(x.shape[0], 1, x.shape[2])
        previous = torch.cat([first, x[:, :-1]], dim=1)
        if cache is not None:
            cache.set_state(x[:, -1:], n_new=0)  # the attention's cache.extend counts the tokens
        return x + self.mix * (previous - x)
