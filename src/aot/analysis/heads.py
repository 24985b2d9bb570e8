"""The weights of every attention head of a trained model, in the transformer-circuits convention.

Tokens are rows in :mod:`aot.nn`; here every matrix acts on a column vector x ∈ R^d, as in Elhage et al.
(2021): head h reads q = W_Q x, k = W_K x, v = W_V x (each p × d) and writes W_O v (W_O is d × p), so

    W_QK = W_Qᵀ W_K  (d × d, the bilinear form x_qᵀ W_QK x_k of the score),   W_OV = W_O W_V  (d × d).

For an MSSA head (docs/paper.md §2) W_Q = W_K = W_V = U_kᵀ, so W_QK = U_k U_kᵀ (symmetric, rank p) and, with the
tied output W_O = U_k, W_OV = U_k U_kᵀ too; with a learned W_O, W_OV = W_O,k U_kᵀ. The score scale (1/√p or
1) and rotary positions are left out (they do not change the subspaces); biases are left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import torch
from torch import nn

from aot.errors import AotError
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention


@dataclass
class HeadWeights:
    """One layer's heads: w_q, w_k, w_v (H, p, d) and w_o (H, d, p), float64 copies."""

    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor
    w_o: torch.Tensor
    subspace: bool  # True for MSSA (Q = K = V = U_kᵀ)

    @property
    def n_head(self) -> int:
        return int(self.w_q.shape[0])

    def qk(self) -> torch.Tensor:
        """W_QK = W_Qᵀ W_K for every head: (H, d, d)."""
        return self.w_q.transpose(1, 2) @ self.w_k

    def ov(self) -> torch.Tensor:
        """W_OV = W_O W_V for every head: (H, d, d)."""
        return self.w_o @ self.w_v

    def read_bases(self) -> torch.Tensor:
        """The subspace each head reads its values from, span(W_Vᵀ): (H, d, p). For MSSA these are the U_k."""
        return self.w_v.transpose(1, 2)


def model_blocks(model: nn.Module) -> list[nn.Module]:
    """The blocks of an aot model (``model.backbone.blocks``), in order."""
    backbone = getattr(model, "backbone", None)
    if backbone is None or not isinstance(getattr(backbone, "blocks", None), nn.ModuleList):
        raise AotError(f"{type(model).__name__} has no backbone.blocks; analysis needs an aot model")
    return list(backbone.blocks)


def attention_layers(model: nn.Module) -> list[nn.Module]:
    """The attention module of every block, in order (``model.backbone.blocks[l].attn``)."""
    return [cast(nn.Module, block.attn) for block in model_blocks(model)]


def head_weights(attn: nn.Module) -> HeadWeights:
    """W_Q, W_K, W_V, W_O per head of an MSSA or MHSA layer (parameter names of :mod:`aot.nn.attention`)."""
    with torch.no_grad():
        if isinstance(attn, MultiHeadSubspaceSelfAttention):
            bases = attn.bases().detach().to(torch.float64)  # (K, d, p)
            u_t = bases.transpose(1, 2)  # (K, p, d) = U_kᵀ
            if attn.out_proj is None:
                w_o = bases
            else:  # out_proj.weight (d, K·p): column block k is W_O,k
                weight = attn.out_proj.weight.detach().to(torch.float64)
                w_o = weight.view(weight.shape[0], attn.n_head, attn.head_dim).permute(1, 0, 2)
            return HeadWeights(u_t, u_t, u_t, w_o.contiguous(), subspace=True)
        if isinstance(attn, MultiHeadSelfAttention):
            n_head, p = attn.n_head, attn.head_dim
            w = attn.qkv_proj.weight.detach().to(torch.float64)  # (3d, d): rows Q | K | V, head h at rows h·p:(h+1)·p
            d = w.shape[1]
            w_q, w_k, w_v = (part.reshape(n_head, p, d) for part in w.chunk(3, dim=0))
            w_o = attn.out_proj.weight.detach().to(torch.float64).view(d, n_head, p).permute(1, 0, 2)
            return HeadWeights(w_q.contiguous(), w_k.contiguous(), w_v.contiguous(), w_o.contiguous(), subspace=False)
    raise AotError(f"cannot read heads of {type(attn).__name__}; analysis knows MSSA and MHSA layers")


def model_heads(model: nn.Module) -> list[HeadWeights]:
    """:func:`head_weights` of every layer."""
    return [head_weights(attn) for attn in attention_layers(model)]
