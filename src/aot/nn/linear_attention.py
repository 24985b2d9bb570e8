"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"), feature map φ(x) = elu(x) + 1.

With φ applied to queries and keys (per head, rows are tokens), the causal output at position i is

    normalised (the paper's Eq. 5 / 9):   o_i = φ(q_i)ᵀ S_i / (φ(q_i)ᵀ z_i),   S_i = Σ_{j≤i} φ(k_j) v_jᵀ,
                                                                          z_i = Σ_{j≤i} φ(k_j)
    unnormalised (``linear_attn_normalize=False``):  o_i = φ(q_i)ᵀ S_i

Two forms compute it. The *recurrent* form carries the fixed-size state (S, z) — p×p + p numbers per head —
through the tokens one at a time (decoding: O(1) work and memory per token). The *chunked parallel* form
(training) splits the sequence into chunks of C tokens: inside a chunk it computes the masked product
(φ(Q) φ(K)ᵀ ⊙ M) V as attention does, and adds φ(Q) S for the state left by the chunks before, so the work is
O(T·C·p + T·p²) and the state is read once per chunk. Both return the final state, so a cache can continue
either.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from aot.config import ModelConfig
from aot.nn.cache import LayerCache
from aot.nn.hooks import HookPoint

#: tokens per chunk of the parallel form
CHUNK_SIZE = 64

LinearState = tuple[torch.Tensor, torch.Tensor]  # S (B, H, p, p), z (B, H, p)


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 > 0 (Katharopoulos et al. 2020, §3.2)."""
    return F.elu(x) + 1.0


def empty_state(q: torch.Tensor) -> LinearState:
    B, H, _, p = q.shape
    return q.new_zeros(B, H, p, p), q.new_zeros(B, H, p)


def _combine(num: torch.Tensor, den: torch.Tensor, normalize: bool, eps: float) -> torch.Tensor:
    return num / (den.unsqueeze(-1) + eps) if normalize else num


def linear_attention_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: LinearState | None = None,
    normalize: bool = True,
    eps: float = 1e-6,
) -> tuple[torch.Tensor, LinearState]:
    """The recurrent form over featurised q, k (B, H, T, p) and v: one token at a time. Returns (out, state)."""
    S, z = state if state is not None else empty_state(q)
    outs = []
    for t in range(q.shape[-2]):
        k_t, v_t, q_t = k[..., t, :], v[..., t, :], q[..., t, :]
        S = S + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)  # S += φ(k_t) v_tᵀ
        z = z + k_t
        num = torch.einsum("bhp,bhpq->bhq", q_t, S)
        outs.append(_combine(num, (q_t * z).sum(-1), normalize, eps))
    return torch.stack(outs, dim=-2), (S, z)


def linear_attention_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: LinearState | None = None,
    normalize: bool = True,
    eps: float = 1e-6,
    chunk_size: int = CHUNK_SIZE,
) -> tuple[torch.Tensor, LinearState]:
    """The chunked parallel form over featurised q, k (B, H, T, p) and v; same outputs and final state as
    :func:`linear_attention_recurrent`."""
    B, H, T, p = q.shape
    S0, z0 = state if state is not None else empty_state(q)
    C = min(chunk_size, T)
    pad = (-T) % C
    if pad:  # zero rows after the feature map contribute nothing to any sum
        q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
    n = (T + pad) // C
    qc, kc, vc = (t.reshape(B, H, n, C, p) for t in (q, k, v))
    kv = torch.einsum("bhncp,bhncq->bhnpq", kc, vc)  # each chunk's Σ φ(k) vᵀ
    ksum = kc.sum(dim=3)  # each chunk's Σ φ(k)
    S_before = S0.unsqueeze(2) + kv.cumsum(dim=2) - kv  # state left by the chunks before (exclusive prefix)
    z_before = z0.unsqueeze(2) + ksum.cumsum(dim=2) - ksum
    mask = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    scores = torch.einsum("bhncp,bhndp->bhncd", qc, kc).masked_fill(~mask, 0.0)  # φ(q_i)ᵀφ(k_j), j ≤ i
    num = torch.einsum("bhncd,bhndq->bhncq", scores, vc) + torch.einsum("bhncp,bhnpq->bhncq", qc, S_before)
    den = scores.sum(-1) + torch.einsum("bhncp,bhnp->bhnc", qc, z_before)
    out = _combine(num, den, normalize, eps).reshape(B, H, n * C, p)[..., :T, :]
    return out, (S0 + kv.sum(dim=2), z0 + ksum.sum(dim=2))


class LinearSelfAttention(nn.Module):
    """Multi-head causal linear attention with W_Q, W_K, W_V, W_O as in MHSA (same parameters: 4d² + 4d).

    Training and prefill use the chunked form; a cached call of one token uses the recurrent form. The cache
    holds the state (S, z) only: its size does not grow with the sequence.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.p
        self.normalize = cfg.linear_attn_normalize
        self.chunk_size = CHUNK_SIZE
        self.qkv_proj = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.out_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.hook_z = HookPoint()  # (B, T, H, p) per-head outputs before the output projection (TransformerLens's)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        B, T, _ = t.shape
        return t.view(B, T, self.n_head, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (self._split(t) for t in self.qkv_proj(x).chunk(3, dim=-1))
        q, k = feature_map(q), feature_map(k)
        state = cache.state if cache is not None and cache.state else None
        if cache is not None and T == 1:
            out, new_state = linear_attention_recurrent(q, k, v, state, self.normalize)  # type: ignore[arg-type]
        else:
            out, new_state = linear_attention_chunked(q, k, v, state, self.normalize, chunk_size=self.chunk_size)  # type: ignore[arg-type]
        if cache is not None:
            cache.set_state(*new_state, n_new=T)
        z = self.hook_z(out.transpose(1, 2))  # (B, T, H, p)
        return self.out_proj(z.reshape(B, T, -1))
