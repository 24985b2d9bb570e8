"""Calibration on Theorem 1's setting, where the answer is known (docs/paper.md §1–3).

A stack of core AoT-MSSA blocks (no norm, tied output, no score scale, not causal, the explicit step size η
as the block's scalar residual scale) is loaded with the true bases of Definition 1 data at every layer, so it
computes exactly the unrolled softmax denoiser of :func:`aot.theory.denoiser.unroll`. The analysis reads it
through its hook points like any trained model; its per-layer SNR must equal :mod:`aot.theory`'s SNR of the
unrolled trajectory, and its gains the measured factors.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from aot.analysis.heads import attention_layers
from aot.analysis.profile import denoising_profile
from aot.config import ModelConfig
from aot.models.backbone import Backbone
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.nn.hooks import HookedModule
from aot.theory.data import MixtureSample, sample_mixture
from aot.theory.denoiser import check_phi, hard_threshold, unroll
from aot.theory.metrics import snr_trajectory


class HookedBackbone(HookedModule):
    """A bare :class:`aot.models.backbone.Backbone` with hook names (``blocks.{l}...``) and ``run_with_cache``:
    tokens (B, N, d) in, tokens out (no embedding, no head)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.backbone = Backbone(cfg)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.backbone(tokens)  # type: ignore[return-value]


def unrolled_denoiser(bases: torch.Tensor, eta: float, n_layers: int) -> HookedBackbone:
    """Core MSSA blocks computing Z ← Z + η Σ_k U_k U_kᵀ Z softmax(Zᵀ U_k U_kᵀ Z) with the given (K, d, p)
    bases at every layer (float64)."""
    n_clusters, d, p = bases.shape
    cfg = ModelConfig(
        block="aot-mssa",
        n_layer=n_layers,
        n_embd=d,
        n_head=n_clusters,
        head_dim=p,
        tied_output=True,
        score_scale=False,
        norm="none",
        final_norm=False,
        residual_scale="scalar",
        residual_scale_init=eta,
        position="none",
        dropout=0.0,
        task="image",  # not causal: every token sees every token, as in the theorem
    )
    model = HookedBackbone(cfg).to(torch.float64)
    with torch.no_grad():
        for attn in attention_layers(model):
            cast(MultiHeadSubspaceSelfAttention, attn).subspace_proj.weight.copy_(bases.transpose(1, 2).reshape(-1, d))
    return model.eval()


def calibrate(
    d: int = 128,
    p: int = 32,
    n_clusters: int = 4,
    tokens_per_cluster: int = 64,
    delta: float = 0.2,
    eta: float = 0.1,
    n_layers: int = 8,
    batches: int = 4,
    eps: float = 0.5,
    seed: int = 0,
    phi: str = "softmax",
    tau: float | None = None,
) -> dict[str, Any]:
    """The analysis on Definition 1 data through the hooked unrolled denoiser, beside :mod:`aot.theory`'s SNR
    of the same trajectory. ``phi="threshold"`` replaces every attention pattern by h∘softmax (h(x) = τ·1{x > τ})
    through a hook on ``hook_pattern`` — Theorem 1's operator, whose per-layer factor is 1 + ητ inside the
    conditions. Returns the profile (claims from the energies, as for trained models), the theory's SNR per
    layer (mean over clusters and batches) and the largest relative difference."""
    check_phi(phi, tau)
    generator = torch.Generator().manual_seed(seed)
    first = sample_mixture(d, p, n_clusters, tokens_per_cluster, delta, generator=generator)
    samples: list[MixtureSample] = [first] + [
        sample_mixture(d, p, n_clusters, tokens_per_cluster, delta, bases=first.bases, generator=generator)
        for _ in range(batches - 1)
    ]
    model = unrolled_denoiser(first.bases, eta, n_layers)
    patches: list[tuple[Any, Any]] = []
    if phi == "threshold":
        threshold = float(tau)  # type: ignore[arg-type]
        patches = [
            (lambda name: name.endswith("attn.hook_pattern"), lambda weights, _: hard_threshold(weights, threshold))
        ]
    with model.hooks(patches):
        profile = denoising_profile(model, [(s.tokens[None],) for s in samples], eps=eps)
    theory = torch.stack(
        [snr_trajectory(unroll(s.tokens, s.bases, eta, n_layers, phi, tau), s.bases, s.labels) for s in samples]
    )  # (batches, L + 1, K)
    theory_mean = theory.mean(dim=2).mean(dim=0)  # (L + 1,)
    measured = [row["snr_in"]["mean"] for row in profile["layers"]] + [profile["layers"][-1]["snr_out"]["mean"]]
    measured_t = torch.tensor(measured, dtype=torch.float64)
    return {
        "setting": {
            "d": d,
            "p": p,
            "K": n_clusters,
            "N": n_clusters * tokens_per_cluster,
            "delta": delta,
            "eta": eta,
            "layers": n_layers,
            "batches": batches,
            "phi": phi,
            "tau": tau,
            "predicted_factor": 1.0 + eta * (tau if tau is not None else 1.0),
        },
        "profile": profile,
        "theory_snr": theory_mean.tolist(),
        "analysis_snr": measured,
        "max_relative_difference": float(((measured_t - theory_mean).abs() / theory_mean).max()),
    }
