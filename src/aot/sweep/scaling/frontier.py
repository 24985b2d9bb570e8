"""The compute frontier of a fitted law: the lowest loss a FLOPs budget C buys, over model sizes N.

A run of N non-embedding parameters spends f(N) training FLOPs per token, so a budget C trains D = C / f(N)
tokens. f is fitted per family on the runs' recorded training FLOPs (the analytic count of
:mod:`aot.bench.flops`, ``train_flops`` / tokens) as a power law f(N) = k · N^p (least squares on the log scale);
runs that record no FLOPs get Kaplan et al.'s 6 N (k = 6, p = 1). On L(N, C / f(N)) = E + A N^−α + B (C/k)^−β N^(pβ)
the minimum over N is where dL/dN = 0:

    N_opt(C) = [α A / (p β B) · (C / k)^β]^(1 / (α + p β)),

Hoffmann et al. 2022 eq. (4) (there p = 1, k = 6: N_opt = G (C/6)^(β/(α+β)), G = (αA / (βB))^(1/(α+β))). It
is a minimum for α, β, p > 0; a law without (a bootstrap refit with α ≤ 0) has no interior optimum: NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aot.sweep.scaling.law import Law

#: Kaplan et al. 2020's training FLOPs per token and parameter (forward + backward, attention left out)
FLOPS_PER_PARAM_TOKEN = 6.0


@dataclass(frozen=True)
class FlopsModel:
    """Training FLOPs per token at N non-embedding parameters: f(N) = k · N^p. ``source``: ``recorded`` (fitted on
    the runs' training FLOPs) or ``6N``; ``max_error``: its largest relative error over those runs."""

    k: float
    p: float
    source: str
    max_error: float = 0.0

    def per_token(self, n: np.ndarray | float) -> np.ndarray:
        return self.k * np.asarray(n, dtype=float) ** self.p

    def tokens(self, n: np.ndarray | float, flops: np.ndarray | float) -> np.ndarray:
        """The tokens a budget of ``flops`` trains at size ``n``."""
        return np.asarray(flops, dtype=float) / self.per_token(n)


def fit_flops_model(n: np.ndarray, d: np.ndarray, flops: np.ndarray | None) -> FlopsModel:
    """f(N) = k N^p by least squares of log(FLOPs / D) on log N over the runs; 6 N without recorded FLOPs."""
    if flops is None:
        return FlopsModel(FLOPS_PER_PARAM_TOKEN, 1.0, "6N")
    per_token = np.asarray(flops, dtype=float) / np.asarray(d, dtype=float)
    p, log_k = np.polyfit(np.log(n), np.log(per_token), 1)
    model = FlopsModel(float(np.exp(log_k)), float(p), "recorded")
    error = float(np.max(np.abs(model.per_token(n) / per_token - 1)))
    return FlopsModel(model.k, model.p, model.source, error)


def optimal_params(law: Law, flops_model: FlopsModel, flops: np.ndarray | float) -> np.ndarray:
    """N_opt(C) of the module's formula for each budget (NaN where α, β or p is not positive)."""
    c = np.asarray(flops, dtype=float)
    alpha, beta, p = law.alpha, law.beta, flops_model.p
    if min(alpha, beta, p) <= 0:
        return np.full(c.shape, np.nan)
    log_n = (np.log(alpha * law.A / (p * beta * law.B)) + beta * np.log(c / flops_model.k)) / (alpha + p * beta)
    return np.exp(log_n)


def frontier_loss(law: Law, flops_model: FlopsModel, flops: np.ndarray | float) -> np.ndarray:
    """The fitted loss on the compute frontier: L(N_opt(C), C / f(N_opt(C))) for each budget C."""
    n = optimal_params(law, flops_model, flops)
    return law.loss(n, flops_model.tokens(n, flops))
