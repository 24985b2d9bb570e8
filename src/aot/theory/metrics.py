"""Measures of the denoiser: SNR per cluster (docs/paper.md §3), per-layer factors, principal angles."""

from __future__ import annotations

import itertools

import torch


def snr_per_cluster(tokens: torch.Tensor, bases: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """SNR(Z_k) = ‖U_k U_kᵀ Z_k‖_F / ‖(I − U_k U_kᵀ) Z_k‖_F for every cluster k (docs/paper.md §3). Returns (K,).

    tokens: (N, d) rows; bases: (K, d, p) orthonormal; labels: (N,) cluster of every token.
    """
    n_clusters = bases.shape[0]
    snrs = []
    for k in range(n_clusters):
        cluster_tokens = tokens[labels == k]  # (N_k, d)
        in_subspace = cluster_tokens @ bases[k] @ bases[k].T  # rows of U_k U_kᵀ Z_k
        signal = torch.linalg.norm(in_subspace)
        noise = torch.linalg.norm(cluster_tokens - in_subspace)
        snrs.append(signal / noise)
    return torch.stack(snrs)


def snr_trajectory(trajectory: list[torch.Tensor], bases: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """SNR of every cluster at every layer: (L + 1, K)."""
    return torch.stack([snr_per_cluster(z, bases, labels) for z in trajectory])


def layer_factors(snrs: torch.Tensor) -> torch.Tensor:
    """Measured per-layer factors SNR⁽ˡ⁺¹⁾ / SNR⁽ˡ⁾: (L + 1, K) -> (L, K). Theorem 1 predicts 1 + ητ."""
    return snrs[1:] / snrs[:-1]


def principal_angles(basis_a: torch.Tensor, basis_b: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, ascending) between span(basis_a) and span(basis_b); (d, p) each.

    cos θ_i are the singular values of Q_aᵀ Q_b with Q orthonormal bases of the two spans (Björck–Golub).
    """
    q_a, _ = torch.linalg.qr(basis_a.to(torch.float64))
    q_b, _ = torch.linalg.qr(basis_b.to(torch.float64))
    cosines = torch.linalg.svdvals(q_a.T @ q_b).clamp(-1.0, 1.0)
    return torch.arccos(cosines)


def subspace_overlap(basis_a: torch.Tensor, basis_b: torch.Tensor) -> float:
    """Mean cos² of the principal angles: 1 for equal subspaces, p_b/d on average for random ones."""
    return float(torch.cos(principal_angles(basis_a, basis_b)).pow(2).mean())


def match_heads(learned: torch.Tensor, true: torch.Tensor) -> list[int]:
    """Assign each true subspace k a distinct learned head: ``match[k]`` maximises the total overlap.

    learned: (H, d, p') and true: (K, d, p) with H ≥ K. Exhaustive over assignments when H ≤ 8, greedy otherwise.
    """
    n_heads, n_clusters = learned.shape[0], true.shape[0]
    overlap = torch.tensor(
        [[subspace_overlap(learned[h], true[k]) for h in range(n_heads)] for k in range(n_clusters)]
    )  # (K, H)
    if n_heads <= 8:
        best = max(
            itertools.permutations(range(n_heads), n_clusters),
            key=lambda heads: sum(float(overlap[k, h]) for k, h in enumerate(heads)),
        )
        return list(best)
    match: list[int] = [-1] * n_clusters
    free = set(range(n_heads))
    for flat in torch.argsort(overlap.flatten(), descending=True).tolist():
        k, h = divmod(flat, n_heads)
        if match[k] < 0 and h in free:
            match[k] = h
            free.discard(h)
    return match
