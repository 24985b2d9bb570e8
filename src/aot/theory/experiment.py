"""One measured run of the unrolled denoiser: SNR per layer and cluster, the per-layer factors against
Theorem 1's 1 + ητ, and how often the theorem's two events hold (docs/paper.md §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from aot.theory.conditions import TheoremConditions, check_conditions
from aot.theory.data import MixtureSample, sample_mixture
from aot.theory.denoiser import (
    apply_phi,
    check_phi,
    lift_heads,
    softmax_weights,
    subspace_projections,
    threshold_events,
)
from aot.theory.metrics import layer_factors, snr_per_cluster


@dataclass
class Trajectory:
    """SNR of every cluster through the layers of one unrolled run.

    snr: (L + 1, K); factors: (L, K) measured SNR⁽ˡ⁺¹⁾/SNR⁽ˡ⁾; predicted: 1 + ητ; events: one dict per layer
    (see :func:`aot.theory.denoiser.threshold_events`), empty for plain softmax.
    """

    snr: torch.Tensor
    eta: float
    tau: float | None
    phi: str
    events: list[dict[str, float]] = field(default_factory=list)

    @property
    def factors(self) -> torch.Tensor:
        return layer_factors(self.snr)

    @property
    def predicted(self) -> float:
        """Theorem 1's per-layer factor 1 + ητ; for plain softmax (τ None) the ideal 1 + η (own weight 1,
        other heads silent)."""
        return 1.0 + self.eta * (self.tau if self.tau is not None else 1.0)

    @property
    def relative_deviation(self) -> torch.Tensor:
        """|factor / (1 + ητ) − 1| for every layer and cluster: (L, K)."""
        return (self.factors / self.predicted - 1.0).abs()

    @property
    def max_relative_deviation(self) -> float:
        return float(self.relative_deviation.max()) if self.factors.numel() else 0.0

    @property
    def rate_ratio(self) -> float:
        """Measured over predicted linear rate: mean ln(factor) / ln(1 + ητ); 1 when Theorem 1 holds exactly."""
        return float(torch.log(self.factors).mean() / math.log(self.predicted))

    def fitted_rate(self) -> float:
        """exp of the least-squares slope of ln SNR against the layer, averaged over clusters."""
        layers = torch.arange(self.snr.shape[0], dtype=torch.float64)
        log_snr = torch.log(self.snr).mean(dim=1)
        centred = layers - layers.mean()
        return float(torch.exp((centred * (log_snr - log_snr.mean())).sum() / (centred**2).sum()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "phi": self.phi,
            "eta": self.eta,
            "tau": self.tau,
            "predicted_factor": self.predicted,
            "snr": self.snr.tolist(),  # [layer][cluster]
            "factor": self.factors.tolist(),  # [layer transition][cluster]
            "max_relative_deviation": self.max_relative_deviation,
            "rate_ratio": self.rate_ratio,
            "fitted_rate": self.fitted_rate(),
            "events": self.events,
        }


def run_trajectory(
    sample: MixtureSample, eta: float, n_layers: int, phi: str = "threshold", tau: float | None = None
) -> Trajectory:
    """Unroll ``n_layers`` MSSA steps with the true bases (docs/paper.md §2) and measure SNR per cluster per layer.

    Same steps as :func:`aot.theory.denoiser.unroll`, but each layer's softmax is computed once and also
    used to count the events of Theorem 1 (thresholded φ only).
    """
    check_phi(phi, tau)
    tokens, bases, labels = sample.tokens, sample.bases, sample.labels
    snrs = [snr_per_cluster(tokens, bases, labels).cpu()]
    events = []
    for _ in range(n_layers):
        proj = subspace_projections(tokens, bases)
        weights = softmax_weights(tokens, bases, proj)
        if phi == "threshold":
            assert tau is not None
            events.append(threshold_events(tokens, bases, labels, tau, weights))
        tokens = tokens + eta * lift_heads(apply_phi(weights, phi, tau), proj, bases)
        snrs.append(snr_per_cluster(tokens, bases, labels).cpu())
    return Trajectory(snr=torch.stack(snrs), eta=eta, tau=tau, phi=phi, events=events)


@dataclass
class Measurement:
    """A run together with its parameters and the theorem's condition check."""

    d: int
    p: int
    n_clusters: int
    tokens_per_cluster: int
    delta: float
    seed: int
    trajectory: Trajectory
    conditions: TheoremConditions

    @property
    def n_tokens(self) -> int:
        return self.n_clusters * self.tokens_per_cluster

    def to_dict(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "p": self.p,
            "K": self.n_clusters,
            "N": self.n_tokens,
            "tokens_per_cluster": self.tokens_per_cluster,
            "delta": self.delta,
            "seed": self.seed,
            "conditions": self.conditions.to_dict(),
            **self.trajectory.to_dict(),
        }


def measure(
    *,
    p: int,
    n_clusters: int,
    tokens_per_cluster: int,
    delta: float,
    eta: float,
    tau: float,
    n_layers: int,
    phi: str = "threshold",
    d: int | None = None,
    seed: int = 0,
    delta_constant: float = 1.0,
    device: str = "cpu",
) -> Measurement:
    """Sample Definition 1 data, unroll the denoiser and check Theorem 1's conditions, in one call.

    ``d`` defaults to K·p (the data has no component outside the span of the bases anyway).
    """
    d = n_clusters * p if d is None else d
    sample = sample_mixture(d, p, n_clusters, tokens_per_cluster, delta, seed).to(device)
    trajectory = run_trajectory(sample, eta, n_layers, phi, tau if phi == "threshold" else None)
    conditions = check_conditions(
        p, n_clusters * tokens_per_cluster, delta, tau, delta_constant, eta=eta, n_layers=n_layers
    )
    return Measurement(d, p, n_clusters, tokens_per_cluster, delta, seed, trajectory, conditions)
