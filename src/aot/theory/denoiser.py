"""The unrolled subspace denoiser with known bases (docs/paper.md §2–3), no training.

One layer, in the paper's notation (tokens as columns, φ column-wise):

    Z⁺ = Z + η Σ_k U_k U_kᵀ Z φ(Zᵀ U_k U_kᵀ Z).

Here tokens are rows (``Z`` is (..., N, d)), so with P_k = Z U_k (N, p) the same step reads

    Z⁺ = Z + η Σ_k φ(P_k P_kᵀ) P_k U_kᵀ,

φ acting on each row of the (symmetric) Gram matrix P_k P_kᵀ — row i of it is the paper's column i. φ is
either the plain softmax (practice) or the theorem's φ = h∘softmax with the hard threshold
h(x) = τ·1{x > τ}. There is no softmax temperature (the paper's formula); the core module
:class:`aot.nn.attention.MultiHeadSubspaceSelfAttention` computes the same step with ``score_scale=False``
and ``tied_output=True`` (tested).
"""

from __future__ import annotations

import torch

from aot.errors import AotError

PHIS = ("threshold", "softmax")


def hard_threshold(weights: torch.Tensor, tau: float) -> torch.Tensor:
    """h(x) = τ · 1{x > τ}, element-wise (docs/paper.md §2)."""
    return tau * (weights > tau).to(weights.dtype)


def subspace_projections(tokens: torch.Tensor, bases: torch.Tensor) -> torch.Tensor:
    """P_k = Z U_k for every k: (..., N, d) × (K, d, p) -> (..., K, N, p), the paper's U_kᵀ Z transposed."""
    return torch.einsum("...nd,kdp->...knp", tokens, bases)


def softmax_weights(tokens: torch.Tensor, bases: torch.Tensor, proj: torch.Tensor | None = None) -> torch.Tensor:
    """softmax of every row of P_k P_kᵀ: (..., K, N, N); row i is the paper's softmax of column i.

    ``proj`` (the :func:`subspace_projections` of ``tokens``) saves recomputing them.
    """
    if proj is None:
        proj = subspace_projections(tokens, bases)
    return torch.softmax(proj @ proj.transpose(-1, -2), dim=-1)


def check_phi(phi: str, tau: float | None) -> None:
    if phi not in PHIS:
        raise AotError(f"phi={phi!r} is not one of {', '.join(PHIS)}")
    if phi == "threshold" and (tau is None or not 0 < tau <= 1):
        raise AotError(f"phi='threshold' needs a threshold tau in (0, 1], got tau={tau!r}")


def apply_phi(softmax: torch.Tensor, phi: str, tau: float | None) -> torch.Tensor:
    """φ from softmax weights: the weights themselves (``softmax``) or h∘softmax (``threshold``)."""
    check_phi(phi, tau)
    if phi == "threshold":
        assert tau is not None
        return hard_threshold(softmax, tau)
    return softmax


def attention_weights(tokens: torch.Tensor, bases: torch.Tensor, phi: str, tau: float | None) -> torch.Tensor:
    """φ(P_k P_kᵀ) for every head: (..., K, N, N), with φ = softmax or h∘softmax (docs/paper.md §2–3)."""
    return apply_phi(softmax_weights(tokens, bases), phi, tau)


def lift_heads(weights: torch.Tensor, proj: torch.Tensor, bases: torch.Tensor) -> torch.Tensor:
    """Σ_k W_k P_k U_kᵀ: weights (..., K, N, N), proj (..., K, N, p), bases (K, d, p) -> (..., N, d)."""
    head_outputs = weights @ proj  # (..., K, N, p)
    return torch.einsum("...knp,kdp->...nd", head_outputs, bases)


def mssa(tokens: torch.Tensor, bases: torch.Tensor, phi: str = "softmax", tau: float | None = None) -> torch.Tensor:
    """MSSA(Z) = Σ_k U_k U_kᵀ Z φ(Zᵀ U_k U_kᵀ Z) with tokens as rows: Σ_k φ(P_k P_kᵀ) P_k U_kᵀ, (..., N, d)."""
    proj = subspace_projections(tokens, bases)  # (..., K, N, p)
    weights = apply_phi(softmax_weights(tokens, bases, proj), phi, tau)  # (..., K, N, N)
    return lift_heads(weights, proj, bases)


def mssa_step(
    tokens: torch.Tensor, bases: torch.Tensor, eta: float, phi: str = "threshold", tau: float | None = None
) -> torch.Tensor:
    """One layer of the unrolled denoiser: Z⁺ = Z + η · MSSA(Z) (docs/paper.md §2, Theorem 1 in §3)."""
    return tokens + eta * mssa(tokens, bases, phi, tau)


def unroll(
    tokens: torch.Tensor,
    bases: torch.Tensor,
    eta: float,
    n_layers: int,
    phi: str = "threshold",
    tau: float | None = None,
) -> list[torch.Tensor]:
    """Run ``n_layers`` steps; returns [Z⁽⁰⁾, Z⁽¹⁾, …, Z⁽ᴸ⁾] (L + 1 tensors).

    ``bases`` is (K, d, p), the same true U_k at every layer (the theorem), or (L, K, d, p), one set per layer.
    """
    check_phi(phi, tau)
    if n_layers < 0:
        raise AotError(f"n_layers={n_layers} must be non-negative")
    per_layer = bases.dim() == 4
    if per_layer and bases.shape[0] != n_layers:
        raise AotError(f"per-layer bases hold {bases.shape[0]} layers but n_layers={n_layers}; make them agree")
    trajectory = [tokens]
    for layer in range(n_layers):
        layer_bases = bases[layer] if per_layer else bases
        trajectory.append(mssa_step(trajectory[-1], layer_bases, eta, phi, tau))
    return trajectory


def threshold_events(
    tokens: torch.Tensor,
    bases: torch.Tensor,
    labels: torch.Tensor,
    tau: float,
    weights: torch.Tensor | None = None,
) -> dict[str, float]:
    """How often the two events behind Theorem 1's exact factor 1 + ητ hold at this layer (docs/paper.md §3).

    For a token i of cluster k the thresholded step adds exactly ητ U_k U_kᵀ z_i (its signal only) when
      (own)   in head k, the softmax weight of token i on itself is > τ (then τ > 1/2 makes it the only
              entry above τ), and
      (other) in every head j ≠ k, every softmax weight of token i is ≤ τ (the head is zeroed).
    Returns the fraction of tokens with each event, with both, the smallest own weight and the largest
    weight in another head. ``tokens`` is (N, d); ``weights`` (K, N, N), the softmax weights of ``tokens``,
    saves recomputing them.
    """
    if weights is None:
        weights = softmax_weights(tokens, bases)  # (K, N, N)
    n_tokens = tokens.shape[-2]
    index = torch.arange(n_tokens)
    own_weight = weights[labels, index, index]  # (N,)
    row_max = weights.amax(dim=-1)  # (K, N): the largest weight of token i in head k
    other = torch.ones_like(row_max, dtype=torch.bool)
    other[labels, index] = False
    other_max = torch.where(other, row_max, torch.zeros_like(row_max)).amax(dim=0)  # (N,)
    own_ok = own_weight > tau
    other_ok = other_max <= tau
    return {
        "own_head_kept": float(own_ok.double().mean()),
        "other_heads_zeroed": float(other_ok.double().mean()),
        "both": float((own_ok & other_ok).double().mean()),
        "min_own_weight": float(own_weight.min()),
        "max_other_weight": float(other_max.max()),
    }
