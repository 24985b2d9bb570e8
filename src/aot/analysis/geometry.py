"""Geometry of the heads' subspaces: principal angles within a layer and across layers, and how far a layer's
subspaces are from the mutually orthogonal U_1 … U_K that Definition 1 and Theorem 1 assume (docs/paper.md §1, §3).

For orthonormal bases Q_i, Q_j (d × p) of two heads, the cosines of the principal angles are the singular
values of Q_iᵀ Q_j (:func:`aot.theory.metrics.principal_angles`); the *overlap* is their mean cos² (0 for
orthogonal subspaces, 1 for equal ones, p/d on average for random ones). A layer's distance from
orthogonality is ‖QᵀQ − I‖_F / √(K(K−1)p) with Q = [Q_1 … Q_K]: since ‖QᵀQ − I‖²_F = Σ_{i≠j} ‖Q_iᵀQ_j‖²_F, it is
√(mean overlap of the head pairs) — 0 for mutually orthogonal heads, 1 when they all coincide.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from aot.analysis.denoising import orthonormal_bases
from aot.analysis.heads import model_heads
from aot.theory.metrics import principal_angles


def pairwise_angles(bases_a: torch.Tensor, bases_b: torch.Tensor) -> torch.Tensor:
    """Principal angles (radians, ascending) between every head of ``bases_a`` (H_a, d, p) and every head of
    ``bases_b`` (H_b, d, p): (H_a, H_b, p)."""
    return torch.stack([torch.stack([principal_angles(a, b) for b in bases_b]) for a in bases_a])


def overlap(angles: torch.Tensor) -> torch.Tensor:
    """Mean cos² of principal angles (..., p) -> (...)."""
    return torch.cos(angles).pow(2).mean(-1)


def overlaps(q_a: torch.Tensor, q_b: torch.Tensor) -> torch.Tensor:
    """Mean cos² of the principal angles between every head of ``q_a`` (H_a, d, p) and of ``q_b`` (H_b, d, p),
    both orthonormal, without the angles: Σ_i cos² θ_i = ‖Q_aᵀQ_b‖²_F, so the overlap is ‖Q_aᵀQ_b‖²_F / p."""
    return torch.einsum("adp,bdq->abpq", q_a, q_b).pow(2).sum(dim=(-1, -2)) / q_a.shape[-1]


def orthogonality_gap(bases: torch.Tensor) -> float:
    """‖QᵀQ − I‖_F / √(K(K−1)p) for Q = [Q_1 … Q_K], the heads orthonormalised one by one: 0 when the subspaces
    are mutually orthogonal (Definition 1), 1 when they all coincide. It equals √(mean overlap of head pairs)."""
    q = orthonormal_bases(bases)  # (K, d, p)
    n_head, _, p = q.shape
    stacked = q.transpose(0, 1).reshape(q.shape[1], n_head * p)  # (d, K·p)
    gram = stacked.T @ stacked - torch.eye(n_head * p, dtype=torch.float64)
    return float(torch.linalg.matrix_norm(gram) / math.sqrt(n_head * (n_head - 1) * p))


def subspace_geometry(model: nn.Module) -> dict[str, Any]:
    """Per layer: the overlap of every pair of heads, their smallest principal angle, the orthogonality gap and
    the random-subspace expectation p/d; across layers: the mean over heads of the best overlap with any head
    of the other layer (L × L), beside the same statistic for random subspaces (8 draws)."""
    bases = [orthonormal_bases(h.read_bases()) for h in model_heads(model)]
    n_head, d, p = bases[0].shape
    layers = []
    for index, layer_bases in enumerate(bases):
        angles = pairwise_angles(layer_bases, layer_bases)
        off = ~torch.eye(n_head, dtype=torch.bool)
        layers.append(
            {
                "layer": index,
                "overlap": overlap(angles).tolist(),  # [head][head]
                "mean_overlap": float(overlap(angles)[off].mean()) if n_head > 1 else 0.0,
                "min_angle_degrees": float(torch.rad2deg(angles[off][:, 0]).min()) if n_head > 1 else 90.0,
                "orthogonality_gap": orthogonality_gap(layer_bases) if n_head > 1 else 0.0,
            }
        )
    across = torch.tensor([[float(overlaps(a, b).amax(dim=1).mean()) for b in bases] for a in bases])
    generator = torch.Generator().manual_seed(0)
    shape = (2 * n_head, d, p)
    draws = [orthonormal_bases(torch.randn(shape, generator=generator, dtype=torch.float64)) for _ in range(8)]
    random_best = sum(float(overlaps(q[:n_head], q[n_head:]).amax(dim=1).mean()) for q in draws) / 8
    return {
        "random_overlap": p / d,
        "layers": layers,
        "across_layers_best_overlap": across.tolist(),
        "random_best_overlap": random_best,  # the same statistic for two layers of random subspaces
    }
