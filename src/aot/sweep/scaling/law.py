"""The parametric loss law L(N, D) = E + A / N^α + B / D^β and its fit by Hoffmann et al. 2022, approach 3.

Hoffmann et al., *Training Compute-Optimal Large Language Models* (arXiv 2203.15556), §3.3 and appendix D.2: with
A = e^a, B = e^b, E = e^e the law is written L̂(N, D) = LSE(a − α log N, b − β log D, e) on the log scale, and
(a, b, e, α, β) minimise Σ_i Huber_δ(LSE(a − α log N_i, b − β log D_i, e) − log L_i) with δ = 10⁻³, by L-BFGS
started from a grid of initialisations (α, β ∈ {0, 0.5, …, 2}, e ∈ {−1, −0.5, …, 1}, a, b ∈ {0, 5, …, 25});
the best local minimum is kept. Here the grid's objective is evaluated in one batched call and L-BFGS
(``torch.optim.LBFGS``, strong-Wolfe line search, float64) runs from its ``starts`` best points (all 4,500 with
``starts=None``: the paper's procedure, one L-BFGS run per grid point). Runs may carry weights (the counts of a
bootstrap resample, :mod:`aot.sweep.scaling.bootstrap`).
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from aot.errors import AotError

#: Hoffmann et al.'s Huber δ on log L
HUBER_DELTA = 1e-3
#: the paper's grid of initialisations, as (a, b, e, α, β) rows
INIT_GRID: tuple[tuple[float, ...], ...] = tuple(
    (a, b, e, alpha, beta)
    for a, b, e, alpha, beta in itertools.product(
        (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
        (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
        (-1.0, -0.5, 0.0, 0.5, 1.0),
        (0.0, 0.5, 1.0, 1.5, 2.0),
        (0.0, 0.5, 1.0, 1.5, 2.0),
    )
)
PARAMETERS = ("E", "A", "alpha", "B", "beta")


@dataclass(frozen=True)
class Law:
    """L(N, D) = E + A / N^α + B / D^β (N: non-embedding parameters, D: training tokens)."""

    E: float
    A: float
    alpha: float
    B: float
    beta: float

    def loss(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        """The law at (N, D), elementwise."""
        n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
        return self.E + self.A * n**-self.alpha + self.B * d**-self.beta

    def values(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in PARAMETERS}

    @classmethod
    def from_theta(cls, theta: Sequence[float]) -> Law:
        """From the fit's coordinates (a, b, e, α, β)."""
        a, b, e, alpha, beta = (float(t) for t in theta)
        return cls(E=math.exp(e), A=math.exp(a), alpha=alpha, B=math.exp(b), beta=beta)

    def theta(self) -> list[float]:
        """The fit's coordinates (a, b, e, α, β) = (log A, log B, log E, α, β)."""
        return [math.log(self.A), math.log(self.B), math.log(self.E), self.alpha, self.beta]


@dataclass(frozen=True)
class LawFit:
    """The best local minimum of the Huber objective: the law, its objective (Σ Huber / δ), how many L-BFGS starts
    ran and how many of them ended within 10⁻⁶ (relative) of the best (1 of many: a rugged objective)."""

    law: Law
    objective: float
    starts: int
    agreeing: int


@dataclass(frozen=True)
class Observations:
    """The runs a law is fitted to, on the log scale, as float64 tensors: log N, log D, log L."""

    log_n: torch.Tensor
    log_d: torch.Tensor
    log_loss: torch.Tensor

    @classmethod
    def of(
        cls, n: Sequence[float] | np.ndarray, d: Sequence[float] | np.ndarray, loss: Sequence[float]
    ) -> Observations:
        def log(values: Sequence[float] | np.ndarray) -> torch.Tensor:
            return torch.log(torch.as_tensor(np.asarray(values, dtype=float), dtype=torch.float64))

        return cls(log(n), log(d), log(loss))

    def __len__(self) -> int:
        return len(self.log_loss)


def objective(
    theta: torch.Tensor, obs: Observations, weights: torch.Tensor | None = None, delta: float = HUBER_DELTA
) -> torch.Tensor:
    """Σ_i w_i Huber_δ(LSE(a − α log N_i, b − β log D_i, e) − log L_i) / δ for each row (a, b, e, α, β) of
    ``theta`` (shape (..., 5)); Hoffmann et al. eq. (D.2) (the division by δ only rescales it, so that L-BFGS's
    tolerances do not depend on δ)."""
    a, b, e, alpha, beta = (t[..., None] for t in theta.unbind(-1))
    return huber_sum(a, b, e, alpha, beta, obs, weights, delta)


def huber_sum(
    a: torch.Tensor,
    b: torch.Tensor,
    e: torch.Tensor,
    alpha: torch.Tensor,
    beta: torch.Tensor,
    obs: Observations,
    weights: torch.Tensor | None = None,
    delta: float = HUBER_DELTA,
) -> torch.Tensor:
    """:func:`objective` for coordinates that broadcast against the runs (a law per run, or one law per row with a
    trailing axis of 1), summed over the runs' axis."""
    by_size, by_data = a - alpha * obs.log_n, b - beta * obs.log_d
    terms = torch.stack([by_size, by_data, e.expand_as(by_size)], -1)
    predicted = torch.logsumexp(terms, -1)
    huber = torch.nn.functional.huber_loss(predicted, obs.log_loss.expand_as(predicted), reduction="none", delta=delta)
    return (huber if weights is None else weights * huber).sum(-1) / delta


def grid_starts(obs: Observations, weights: torch.Tensor | None, starts: int | None) -> torch.Tensor:
    """The ``starts`` points of :data:`INIT_GRID` with the lowest objective (every point with ``None``)."""
    grid = torch.tensor(INIT_GRID, dtype=torch.float64)
    if starts is None or starts >= len(grid):
        return grid
    with torch.no_grad():
        values = objective(grid, obs, weights)
    return grid[torch.argsort(values)[:starts]]


def minimize(x0: torch.Tensor, value_of: Callable[[torch.Tensor], torch.Tensor], max_iter: int = 500) -> torch.Tensor:
    """A local minimum of ``value_of`` (a float64 scalar of a flat tensor) from ``x0`` by ``torch.optim.LBFGS``
    (strong-Wolfe line search, the tolerances every fit here uses); returns the end point, detached."""
    x = x0.detach().clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [x], lr=1.0, max_iter=max_iter, tolerance_grad=1e-9, tolerance_change=1e-12, history_size=10,
        line_search_fn="strong_wolfe",
    )  # fmt: skip

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = value_of(x)
        value.backward()
        return value

    optimizer.step(closure)
    return x.detach()


def lbfgs(
    theta: torch.Tensor,
    obs: Observations,
    weights: torch.Tensor | None = None,
    max_iter: int = 500,
    hold_e: bool = False,
) -> tuple[torch.Tensor, float]:
    """A local minimum of :func:`objective` from ``theta`` (5 numbers) by :func:`minimize`; returns it and its
    objective (infinite when the run left the finite numbers). With ``hold_e`` e stays at ``theta``'s and the other
    four move. L-BFGS moves a − α·mean(log N) and b − β·mean(log D) instead of a and b: the same minima, but a and
    α no longer move together along the data's long lever arm (log N ≈ 12-20), which cuts the iterations by a
    third."""
    lever = torch.stack([obs.log_n.mean(), obs.log_d.mean()])
    held = theta[2:3].detach()

    def raw(x: torch.Tensor) -> torch.Tensor:
        exponents = x[-2:]
        return torch.cat([x[:2] + exponents * lever, held if hold_e else x[2:3], exponents])

    moved = [theta[:2] - theta[3:5] * lever, *([] if hold_e else [theta[2:3]]), theta[3:5]]
    x = minimize(torch.cat(moved), lambda x: objective(raw(x), obs, weights), max_iter)
    with torch.no_grad():
        end = raw(x)
        value = float(objective(end, obs, weights))
    return end, finite_or_inf(end, value)


def finite_or_inf(end: torch.Tensor, value: float) -> float:
    """``value``, or infinity when it or the end point left the finite numbers."""
    return value if math.isfinite(value) and bool(torch.isfinite(end).all()) else math.inf


#: the largest log A, log B or log E a law can hold: exp of more overflows a float (log of its largest, ≈ 709.8)
LOG_LIMIT = math.log(sys.float_info.max)


def representable(theta: torch.Tensor) -> bool:
    """Whether a fit's end point (a, b, e, α, β) is a law of floats: A = e^a, B = e^b and E = e^e finite. Where the
    runs do not determine α (one or two sizes) L-BFGS can run off along a ≈ α · log N to a point whose objective is
    finite but whose A is not; that start is dropped, as one that left the finite numbers is."""
    return bool(torch.isfinite(theta).all()) and float(theta[:3].abs().max()) < LOG_LIMIT


def fit_law(
    obs: Observations,
    weights: torch.Tensor | None = None,
    starts: int | None = 32,
    extra_starts: Sequence[Sequence[float]] = (),
) -> LawFit:
    """The law of ``obs`` (optionally weighted): L-BFGS from the ``starts`` best points of the paper's grid (all
    with ``None``) and from ``extra_starts`` (θ = (a, b, e, α, β) rows, e.g. an earlier fit); the best minimum.
    A one-line :class:`AotError` when no start ends at a finite objective."""
    points = grid_starts(obs, weights, starts)
    if extra_starts:
        points = torch.cat([torch.tensor(list(extra_starts), dtype=torch.float64), points])
    with torch.no_grad():
        before = objective(points, obs, weights)
    ends = [lbfgs(p, obs, weights) for p, v in zip(points, before) if torch.isfinite(v)]
    finite = [(theta, value) for theta, value in ends if math.isfinite(value) and representable(theta)]
    if not finite:
        raise AotError("the scaling-law fit found no finite minimum from any start; are the losses positive numbers?")
    theta, best = min(finite, key=lambda tv: tv[1])
    agreeing = sum(value - best <= 1e-6 * best + 1e-10 for _, value in finite)
    return LawFit(Law.from_theta(theta.tolist()), best, len(points), agreeing)
