"""Self-attention: multi-head *subspace* self-attention (MSSA, the paper's operator) and standard MHSA.

Shapes: tokens are rows, ``x`` is (B, T, d). Per head k the paper's columns-as-tokens formula (docs/paper.md §2)

    MSSA(Z) = Σ_k U_k · (U_kᵀ Z) · softmax((U_kᵀ Z)ᵀ (U_kᵀ Z) · s)

becomes, with P_k = x U_k (B, T, p) standing for U_kᵀ Z:  out = Σ_k softmax(s · P_k P_kᵀ) P_k U_kᵀ.
The scale s is 1/√p (CRATE's code; default) or 1 (the paper's formula). Query, key and value are the same
tensor P_k, so one d → K·p projection replaces three, and the output is lifted back either by the same
bases (``tied_output``: W_O = [U_1 … U_K]) or by a learned W_O with bias.

Two numerically equivalent paths compute the attention: a fused one through
``F.scaled_dot_product_attention`` and an explicit reference (``softmax(q kᵀ s + mask) v``), used by the
tests and whenever the attention pattern is read (a hook on ``hook_pattern``, e.g. ``run_with_cache``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from aot.config import ModelConfig
from aot.nn.cache import LayerCache
from aot.nn.hooks import HookPoint
from aot.nn.rotary import Rotary
from aot.nn.token_shift import TokenShift


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, mask: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ · scale + mask) v, computed explicitly. Returns (output, pattern).

    q: (B, H, Tq, p); k, v: (B, H, Tk, p); mask: bool (Tq, Tk), True where attention is allowed.
    """
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    # softmax in at least float32 (bf16 scores lose the small weights), in float64 when given float64
    pattern = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(q.dtype)
    return torch.matmul(pattern, v), pattern


def causal_mask(n_query: int, n_key: int, device: torch.device) -> torch.Tensor:
    """Bool (n_query, n_key) mask for queries that are the last ``n_query`` of ``n_key`` positions."""
    offset = n_key - n_query
    rows = torch.arange(n_query, device=device)[:, None] + offset
    return torch.arange(n_key, device=device)[None, :] <= rows


class _AttentionCore(nn.Module):
    """What MSSA and MHSA share: scaling, masking, the fused / reference paths, hooks and rotary."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.head_dim = cfg.p
        self.causal = bool(cfg.causal)
        self.scale = 1.0 / math.sqrt(cfg.p) if cfg.score_scale else 1.0
        self.dropout = cfg.dropout
        self.rotary = Rotary(cfg.p, cfg.rope_theta) if cfg.position == "rope" else None
        self.use_reference = False  # force the explicit path (tests, analysis)
        self.hook_pattern = HookPoint()  # (B, H, Tq, Tk) attention weights
        self.hook_z = HookPoint()  # (B, T, H, p) per-head outputs before the output projection (TransformerLens's)

    @staticmethod
    def attention_flops(cfg: ModelConfig, n_keys: float) -> float:
        """Forward FLOPs per query token of the attention over ``n_keys`` keys: per head q kᵀ (2·n_keys·p) and
        pattern · v (2·n_keys·p)."""
        return 2 * 2 * n_keys * cfg.n_head * cfg.p

    def split_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, T, H·p) → (B, H, T, p): one slice per head."""
        B, T, _ = t.shape  # (B, T, H*p) -> (B, H, T, p)
        return t.view(B, T, self.n_head, self.head_dim).transpose(1, 2)

    def merge_heads(self, t: torch.Tensor) -> torch.Tensor:
        """(B, H, T, p) → (B, T, H·p), the inverse of :meth:`split_heads`."""
        B, H, T, p = t.shape  # (B, H, T, p) -> (B, T, H*p)
        return t.transpose(1, 2).reshape(B, T, H * p)

    @staticmethod
    def hook_heads(hook: HookPoint, t: torch.Tensor) -> torch.Tensor:
        """``hook`` on per-head activations ``t`` (B, H, T, p) in TransformerLens's layout (B, T, H, p): a hook on
        ``hook_q``, ``hook_k``, ``hook_v`` or ``hook_z`` reads and returns (batch, pos, head, d_head), as it would on a
        ``HookedTransformer``. Views only; ``t`` itself when no hook replaced it."""
        shown = t.transpose(1, 2)
        hooked = hook(shown)
        return t if hooked is shown else hooked.transpose(1, 2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, q_offset: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotary positions on queries (starting at position ``q_offset``) and keys (from 0); unchanged without
        rotary. MSSA's Q = K without a cache is rotated once."""
        if self.rotary is None:
            return q, k
        if q is k and q_offset == 0:  # MSSA without a cache: Q = K, rotate once
            rotated = self.rotary(q)
            return rotated, rotated
        return self.rotary(q, offset=q_offset), self.rotary(k, offset=0)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Attention of q (B,H,Tq,p) over k, v (B,H,Tk,p); the queries are the last Tq positions."""
        n_query, n_key = q.shape[-2], k.shape[-2]
        dropout = self.dropout if self.training else 0.0
        if self.use_reference or self.hook_pattern.active:
            mask = causal_mask(n_query, n_key, q.device) if self.causal else None
            out, pattern = reference_attention(q, k, v, scale=self.scale, mask=mask)
            pattern = self.hook_pattern(pattern)
            if dropout:
                pattern = F.dropout(pattern, dropout)
                out = torch.matmul(pattern, v)
            elif self.hook_pattern.active:
                out = torch.matmul(pattern, v)  # a hook may have replaced the pattern
            return self.hook_heads(self.hook_z, out)
        if not self.causal or n_query == 1:
            mask, is_causal = None, False
        elif n_query == n_key:
            mask, is_causal = None, True
        else:  # a chunk of queries after a cached prefix
            mask, is_causal = causal_mask(n_query, n_key, q.device), False
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal, scale=self.scale
        )
        return self.hook_heads(self.hook_z, out)


def use_reference_attention(model: nn.Module, on: bool = True) -> None:
    """Make every attention layer of ``model`` compute the explicit ``softmax(q kᵀ s + mask) v`` instead of
    the fused SDPA kernel (``on=False``: back to the kernel). For tests, analysis and timing comparisons."""
    for module in model.modules():
        if isinstance(module, _AttentionCore):
            module.use_reference = on


class MultiHeadSubspaceSelfAttention(_AttentionCore):
    """MSSA (docs/paper.md §2): per head, Q = K = V = U_kᵀ z, output Σ_k U_k(·) (tied) or a learned W_O.

    ``subspace_proj.weight`` is [U_1 … U_K]ᵀ, shape (K·p, d): row block k holds U_kᵀ. With ``token_shift`` the
    projection reads z̃_t = z_t + μ ⊙ (z_{t−1} − z_t) instead of z_t (:class:`aot.nn.token_shift.TokenShift`).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        # an export's saved config (aot.hf.inner_standalone) lacks the field at its default
        shift = getattr(cfg, "token_shift", "none")
        self.token_shift = TokenShift(cfg) if shift != "none" else None
        self.tied_output = cfg.tied_output
        self.subspace_proj = nn.Linear(cfg.n_embd, cfg.n_head * cfg.p, bias=False)
        self.out_proj = None if cfg.tied_output else nn.Linear(cfg.n_head * cfg.p, cfg.n_embd, bias=cfg.bias)
        self.hook_subspace = HookPoint()  # (B, K, T, p): the projections U_kᵀ z of every token

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token of the projections: U (d → K·p), then Uᵀ (tied) or W_O (K·p → d)."""
        width = cfg.n_head * cfg.p
        return 2 * cfg.n_embd * width + 2 * width * cfg.n_embd

    def bases(self) -> torch.Tensor:
        """The subspace bases U_k as a (K, d, p) tensor (U_k = bases()[k])."""
        W = self.subspace_proj.weight  # (K·p, d)
        return W.view(self.n_head, self.head_dim, -1).transpose(1, 2)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        offset = cache.length if cache is not None else 0
        if self.token_shift is not None:
            x = self.token_shift(x, cache)  # z̃_t = z_t + μ ⊙ (z_{t−1} − z_t)
        proj = self.hook_subspace(self.split_heads(self.subspace_proj(x)))  # (B, K, T, p) = U_kᵀ z
        (proj_all,) = cache.extend(proj) if cache is not None else (proj,)  # one cached tensor per layer
        q, k = self.rotate(proj, proj_all, offset)
        out = self.merge_heads(self.attend(q, k, proj_all))  # (B, T, K·p)
        if self.out_proj is not None:
            return self.out_proj(out)
        return F.linear(out, self.subspace_proj.weight.t())  # Σ_k U_k · out_k


class MultiHeadSelfAttention(_AttentionCore):
    """Standard multi-head self-attention with separate W_Q, W_K, W_V and W_O (GPT-2, ViT, AoT-MHSA)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.qkv_proj = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.out_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.hook_q = HookPoint()  # (B, T, H, p), TransformerLens's layout, as hook_k and hook_v
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()

    @staticmethod
    def flops_per_token(cfg: ModelConfig) -> int:
        """Forward FLOPs per token of the projections: W_QKV (d → 3d) and W_O (d → d)."""
        d = cfg.n_embd
        return 2 * d * 3 * d + 2 * d * d

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        offset = cache.length if cache is not None else 0
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)  # unpacked, not iterated: torch.fx can trace it
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        q, k, v = (self.hook_heads(hook, t) for hook, t in ((self.hook_q, q), (self.hook_k, k), (self.hook_v, v)))
        if cache is not None:
            k, v = cache.extend(k, v)
        q, k = self.rotate(q, k, offset)  # keys are cached unrotated: each is rotated by its own position
        return self.out_proj(self.merge_heads(self.attend(q, k, v)))
