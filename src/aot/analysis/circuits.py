"""Circuits in the transformer-circuits conventions (Elhage et al. 2021; Olsson et al. 2022).

* QK and OV circuits of every head (:mod:`aot.analysis.heads`) and their singular values. An MSSA head's
  W_QK = U_kU_kᵀ has rank p; its spectrum is the squared singular values of U_k.
* composition scores between a head h₁ of an earlier layer and a head h₂ of a later one,
  ‖A B‖_F / (‖A‖_F ‖B‖_F) with B = W_OV^{h₁} and A = W_QK^{h₂ᵀ} (Q-composition), W_QK^{h₂} (K-), W_OV^{h₂} (V-).
  The norms between the layers are left out (as in the paper that defined the scores); the random baseline of
  two independent Gaussian matrices of the same ranks is reported beside them.
* the direct path of each head's OV circuit through the token embedding W_E and unembedding W_U: the
  V × V matrix W_U W_OV W_E says which token a head writes when it attends to a token; its copying score
  Σ_i λ_i / Σ_i |λ_i| over the eigenvalues (Elhage et al.) is 1 for a head that copies, −1 for one that
  suppresses (LayerNorm left out). The eigenvalues are those of the d × d matrix W_OV W_E W_U.
* previous-token and induction scores on repeated random token sequences [r, r], r of length n:
  prev(h) = mean_t A_h[t, t − 1] and ind(h) = mean_{t ≥ n} A_h[t, t − n + 1], A_h the attention pattern.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from aot.analysis.heads import HeadWeights, model_blocks, model_heads
from aot.nn.hooks import HookedModule


def singular_values(matrices: torch.Tensor, top: int | None = None) -> torch.Tensor:
    """Singular values (descending) of every matrix of a (H, d, d) stack, optionally the ``top`` largest."""
    values = torch.linalg.svdvals(matrices.to(torch.float64))
    return values if top is None else values[..., :top]


Factors = tuple[torch.Tensor, torch.Tensor]  # a rank-p head matrix W = L R as (L (H, d, p), R (H, p, d))


def _squared_norms(left: Factors) -> torch.Tensor:
    """‖L R‖²_F = tr(LᵀL · R Rᵀ) for every head: (H,), computed with p × p matrices only."""
    l, r = left
    return torch.einsum("hpq,hqp->h", l.transpose(1, 2) @ l, r @ r.transpose(1, 2))


def composition_score(left: Factors, right: Factors) -> torch.Tensor:
    """‖A B‖_F / (‖A‖_F ‖B‖_F) for every pair, A = L_a R_a of the later heads (H₂) and B = L_b R_b of the earlier
    ones (H₁): (H₂, H₁). With M = R_a L_b, ‖A B‖²_F = tr(Mᵀ L_aᵀL_a M R_bR_bᵀ), all in p × p."""
    (la, ra), (lb, rb) = left, right
    m = torch.einsum("apd,bdq->abpq", ra, lb)  # (H₂, H₁, p, p)
    g = la.transpose(1, 2) @ la  # (H₂, p, p)
    h = rb @ rb.transpose(1, 2)  # (H₁, p, p)
    product = (m * torch.einsum("apr,abrs,bsq->abpq", g, m, h)).sum(dim=(-1, -2))
    norms = (_squared_norms(left)[:, None] * _squared_norms(right)[None, :]).sqrt()
    norms = norms.clamp_min(torch.finfo(norms.dtype).tiny)  # a silent head (zero matrix) composes with nothing
    return product.clamp_min(0).sqrt() / norms


def compositions(earlier: HeadWeights, later: HeadWeights) -> dict[str, torch.Tensor]:
    """Q-, K- and V-composition of every head of ``later`` (rows) with every head of ``earlier`` (columns):
    B = W_OV = W_O · W_V of the earlier head; A = W_QKᵀ = W_Kᵀ W_Q, W_QK = W_Qᵀ W_K or W_OV of the later one."""
    ov = (earlier.w_o, earlier.w_v)
    return {
        "q": composition_score((later.w_k.transpose(1, 2), later.w_q), ov),
        "k": composition_score((later.w_q.transpose(1, 2), later.w_k), ov),
        "v": composition_score((later.w_o, later.w_v), ov),
    }


def random_composition_baseline(d: int, rank: int, samples: int = 64, seed: int = 0) -> float:
    """Mean composition score of two independent rank-``rank`` Gaussian products (d × d): what unrelated heads
    score by chance (measured by sampling)."""
    generator = torch.Generator().manual_seed(seed)

    def draw() -> torch.Tensor:
        a = torch.randn(samples, d, rank, generator=generator, dtype=torch.float64)
        b = torch.randn(samples, rank, d, generator=generator, dtype=torch.float64)
        return a @ b

    left, right = draw(), draw()
    scores = torch.linalg.matrix_norm(left @ right) / (torch.linalg.matrix_norm(left) * torch.linalg.matrix_norm(right))
    return float(scores.mean())


def composition_table(model: nn.Module) -> dict[str, Any]:
    """Every pair of layers l₁ < l₂: the mean and largest Q/K/V-composition over head pairs, the largest pair, and
    the random baseline. Also each head's QK / OV singular values."""
    heads = model_heads(model)
    pairs = []
    for l1 in range(len(heads)):
        for l2 in range(l1 + 1, len(heads)):
            scores = compositions(heads[l1], heads[l2])
            row: dict[str, Any] = {"earlier": l1, "later": l2}
            for kind, matrix in scores.items():
                h2, h1 = divmod(int(matrix.argmax()), matrix.shape[1])
                row[kind] = {"mean": float(matrix.mean()), "max": float(matrix.max()), "max_pair": [h1, h2]}
            pairs.append(row)
    first = heads[0]
    d, p = first.w_q.shape[2], first.w_q.shape[1]
    return {
        "pairs": pairs,
        "random_baseline": random_composition_baseline(d, p),
        "qk_singular_values": [singular_values(h.qk(), top=p).tolist() for h in heads],  # [layer][head][i]
        "ov_singular_values": [singular_values(h.ov(), top=p).tolist() for h in heads],
    }


def copying_scores(model: nn.Module) -> torch.Tensor | None:
    """Copying score of every head's direct path W_U W_OV W_E: (L, H); ``None`` for a model without a token
    embedding and LM head (``tok_embed``, ``lm_head``)."""
    embed, unembed = getattr(model, "tok_embed", None), getattr(model, "lm_head", None)
    if not isinstance(embed, nn.Embedding) or not isinstance(unembed, nn.Linear):
        return None
    vocab = int(getattr(getattr(model, "cfg", None), "vocab_size", embed.num_embeddings))  # not the aligned rows
    w_e = embed.weight.detach()[:vocab].to(torch.float64).T  # (d, V)
    w_u = unembed.weight.detach()[:vocab].to(torch.float64)  # (V, d)
    rows = []
    for heads in model_heads(model):
        eigenvalues = torch.linalg.eigvals(heads.ov() @ (w_e @ w_u))  # (H, d): the nonzero spectrum of W_U W_OV W_E
        rows.append(eigenvalues.real.sum(-1) / eigenvalues.abs().sum(-1).clamp_min(torch.finfo(torch.float64).tiny))
    return torch.stack(rows)


def repeated_random_tokens(
    batch: int, length: int, vocab_size: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """(batch, 2·length) ids [r, r]; r draws ``length`` distinct tokens when the vocabulary allows (so the
    token after the earlier occurrence is unambiguous), with replacement otherwise."""
    rows = []
    for _ in range(batch):
        if length <= vocab_size:
            r = torch.randperm(vocab_size, generator=generator)[:length]
        else:
            r = torch.randint(vocab_size, (length,), generator=generator)
        rows.append(torch.cat([r, r]))
    return torch.stack(rows)


def pattern_scores(pattern: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Previous-token and induction scores per head from patterns (B, H, 2n, 2n) of [r, r] sequences: (H,) each."""
    t_all = torch.arange(1, 2 * length)
    previous = pattern[:, :, t_all, t_all - 1].mean(dim=(0, 2))
    t_second = torch.arange(length, 2 * length)
    induction = pattern[:, :, t_second, t_second - length + 1].mean(dim=(0, 2))
    return previous, induction


def self_attention_share(pattern: torch.Tensor, first: int = 1) -> torch.Tensor:
    """The mean weight a query puts on its own position (the diagonal of the pattern) per head, over the batch
    and the query positions from ``first`` on: patterns (B, H, T, T) → (H,). Under a causal mask position 0
    can only attend to itself, hence ``first=1``. With Q = K (MSSA) a head whose projected tokens have equal
    norms scores every key at most as high as the query itself (Cauchy–Schwarz), so this share measures how
    far a trained MSSA head has learned to look away from itself."""
    positions = torch.arange(first, pattern.shape[-1], device=pattern.device)
    return pattern[:, :, positions, positions].mean(dim=(0, 2))


def distance_from_uniform(pattern: torch.Tensor) -> float:
    """Mean total-variation distance between each causal query's attention (B, H, T, T) and uniform attention
    over its keys (queries 1 … T−1; query 0 has one key): 0 for plain averaging, near 1 for attention on one key
    far back."""
    T = pattern.shape[-1]
    causal = torch.ones(T, T, dtype=pattern.dtype, device=pattern.device).tril()
    uniform = causal / causal.sum(-1, keepdim=True)
    return (0.5 * (pattern - uniform).abs().sum(-1))[:, :, 1:].mean().item()


@torch.no_grad()
def head_scores(model: HookedModule, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Previous-token and induction scores of every head: (L, H) each, from the attention patterns
    (``blocks.{l}.attn.hook_pattern``) of ``model(tokens)``, ``tokens`` from :func:`repeated_random_tokens`."""
    length = tokens.shape[1] // 2
    n_layer = len(model_blocks(model))
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(n_layer)]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    previous, induction = zip(*(pattern_scores(cache[name].double(), length) for name in names))
    return {"previous_token": torch.stack(previous), "induction": torch.stack(induction)}
