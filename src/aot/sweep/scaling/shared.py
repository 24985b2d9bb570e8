"""One E for every family: the laws L_f(N, D) = E + A_f / N^α_f + B_f / D^β_f of a study's families fitted
jointly, E shared, each family keeping its own A, α, B, β.

E is the loss no model reaches at any size or budget: on one corpus, tokenizer and context length it belongs to the
data (Hoffmann et al. 2022, §3.3, read it as the entropy of natural text), not to the architecture. Fitted family by
family (:mod:`aot.sweep.scaling.law`) from a small study's runs it is often not determined: at its bound E → 0 a
family's size term extrapolates as a pure power law and can run below every other family far from the runs.
Shared, the runs of every family pin it. The objective is the sum of the families' Huber objectives
(:func:`aot.sweep.scaling.law.objective`, eq. (D.2) of Hoffmann et al.), minimised by one L-BFGS run over the
1 + 4F numbers (e = log E, then a_f, b_f, α_f, β_f per family).

Starts: a profile over e. For each candidate e (each family's own fit's, and the e values of the paper's grid) each
family is fitted with e held, from its best grid point at that e and from its own fit; the candidates are ranked by
the sum of those objectives and the joint fit runs from the ``starts`` best. The bootstrap resamples the runs within
each family (every family keeps its number of runs), so refit i of every family is one joint refit and gaps between
families are read off paired refits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from aot.errors import AotError
from aot.sweep.scaling.bootstrap import Bootstrap, determinable, resample_weights
from aot.sweep.scaling.law import (
    INIT_GRID,
    Law,
    LawFit,
    Observations,
    finite_or_inf,
    huber_sum,
    lbfgs,
    minimize,
    objective,
    representable,
)

Weights = Mapping[str, torch.Tensor | None]


@dataclass(frozen=True)
class SharedFit:
    """The joint fit: each family's law (one E), its part of the joint objective, the joint objective, how many
    joint starts ran and how many ended within 10⁻⁶ (relative) of the best, and the ranked starts (flat vectors of
    :func:`pack`), which the bootstrap's refits reuse."""

    laws: dict[str, Law]
    parts: dict[str, float]
    objective: float
    starts: int
    agreeing: int
    points: tuple[torch.Tensor, ...]

    def family_fit(self, family: str) -> LawFit:
        """Family ``family``'s law as a :class:`LawFit` (its objective: its part of the joint one)."""
        return LawFit(self.laws[family], self.parts[family], self.starts, self.agreeing)


def levers(obs: Mapping[str, Observations]) -> dict[str, torch.Tensor]:
    """Each family's (mean log N, mean log D): L-BFGS moves a − α·mean(log N), b − β·mean(log D) (as
    :func:`aot.sweep.scaling.law.lbfgs` does)."""
    return {name: torch.stack([o.log_n.mean(), o.log_d.mean()]) for name, o in obs.items()}


def pack(
    e: float | torch.Tensor, thetas: Mapping[str, torch.Tensor], lever: Mapping[str, torch.Tensor]
) -> torch.Tensor:
    """The flat vector L-BFGS moves: e, then per family (in ``lever``'s order) a', b', α, β from θ = (a, b, ·, α, β)."""
    parts = [torch.as_tensor(e, dtype=torch.float64).reshape(1)]
    for name, arm in lever.items():
        theta = thetas[name]
        parts.append(torch.cat([theta[:2] - theta[3:5] * arm, theta[3:5]]))
    return torch.cat(parts)


def family_coordinates(x: torch.Tensor, lever: torch.Tensor) -> torch.Tensor:
    """Each family's (a, b, α, β) as rows of an F × 4 tensor, from the flat vector of :func:`pack` and the
    families' levers (F × 2): a = a' + α·mean(log N), b = b' + β·mean(log D)."""
    own = x[1:].reshape(-1, 4)
    return torch.cat([own[:, :2] + own[:, 2:] * lever, own[:, 2:]], 1)


def unpack(x: torch.Tensor, lever: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Each family's θ = (a, b, e, α, β) from the flat vector of :func:`pack`."""
    rows = family_coordinates(x, torch.stack(list(lever.values())))
    return {name: torch.cat([row[:2], x[:1], row[2:]]) for name, row in zip(lever, rows)}


@dataclass(frozen=True)
class Stacked:
    """Every family's runs in one set of tensors, for one batched objective: the runs (log N, log D, log L)
    concatenated in the families' order, each run's family index, each family's lever (F × 2) and the runs'
    weights (1 where a family has none)."""

    obs: Observations
    family: torch.Tensor
    lever: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def of(cls, obs: Mapping[str, Observations], weights: Weights | None = None) -> Stacked:
        weights = weights or {}
        parts = list(obs.values())
        joined = Observations(*(torch.cat([getattr(o, f) for o in parts]) for f in ("log_n", "log_d", "log_loss")))
        family = torch.cat([torch.full((len(o),), i, dtype=torch.long) for i, o in enumerate(parts)])
        drawn = [weights.get(name) for name in obs]
        w = torch.cat([torch.ones(len(o), dtype=torch.float64) if d is None else d for o, d in zip(parts, drawn)])
        return cls(joined, family, torch.stack(list(levers(obs).values())), w)


def stacked_objective(x: torch.Tensor, stacked: Stacked) -> torch.Tensor:
    """:func:`joint_objective` in one batched call: each run gets its family's (a, b, α, β) and the shared e."""
    a, b, alpha, beta = family_coordinates(x, stacked.lever)[stacked.family].unbind(1)
    return huber_sum(a, b, x[0], alpha, beta, stacked.obs, stacked.weights)


def joint_objective(x: torch.Tensor, obs: Mapping[str, Observations], weights: Weights | None = None) -> torch.Tensor:
    """Σ_f Σ_i w_i Huber_δ(log L̂_f(N_i, D_i) − log L_i) / δ: the families' objectives summed, E shared."""
    return stacked_objective(x, Stacked.of(obs, weights))


def held_e_fit(
    obs: Observations, e: float, own: Law, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, float]:
    """One family's best θ with e = log E held: L-BFGS over (a, b, α, β) (:func:`aot.sweep.scaling.law.lbfgs` with
    ``hold_e``) from the family's best point of the paper's grid at that e and from its own fit; returns θ and its
    objective (infinite where no start ends at a representable law)."""
    grid = torch.tensor(INIT_GRID, dtype=torch.float64)
    grid[:, 2] = e
    with torch.no_grad():
        values = objective(grid, obs, weights)
    mine = torch.tensor(own.theta(), dtype=torch.float64)
    mine[2] = e
    ends = [lbfgs(start, obs, weights, hold_e=True) for start in (grid[torch.argmin(values)], mine)]
    kept = [(theta, value) for theta, value in ends if math.isfinite(value) and representable(theta)]
    return min(kept, key=lambda tv: tv[1]) if kept else (mine, math.inf)


def profile_starts(obs: Mapping[str, Observations], own: Mapping[str, Law], starts: int) -> list[torch.Tensor]:
    """The ``starts`` best joint starts of the profile over e (the module's docstring), best first."""
    candidates = sorted({float(g[2]) for g in INIT_GRID} | {math.log(law.E) for law in own.values() if law.E > 0})
    lever = levers(obs)
    ranked = []
    for e in candidates:
        fits = {name: held_e_fit(o, e, own[name]) for name, o in obs.items()}
        total = sum(value for _, value in fits.values())
        if math.isfinite(total):
            ranked.append((total, pack(e, {name: theta for name, (theta, _) in fits.items()}, lever)))
    ranked.sort(key=lambda tv: tv[0])
    return [x for _, x in ranked[:starts]]


def joint_fit(
    obs: Mapping[str, Observations], points: Sequence[torch.Tensor], weights: Weights | None = None
) -> tuple[torch.Tensor, float, list[float]]:
    """L-BFGS on :func:`joint_objective` from each of ``points``; the best end, its objective, every finite one's."""
    stacked = Stacked.of(obs, weights)
    lever = levers(obs)
    ends = []
    for x0 in points:
        end = minimize(x0, lambda x: stacked_objective(x, stacked))
        with torch.no_grad():
            value = finite_or_inf(end, float(stacked_objective(end, stacked)))
        if math.isfinite(value) and all(representable(t) for t in unpack(end, lever).values()):
            ends.append((end, value))
    if not ends:
        raise AotError("the shared-E scaling-law fit found no finite minimum from any start; are the losses positive?")
    end, best = min(ends, key=lambda tv: tv[1])
    return end, best, [v for _, v in ends]


def laws_of(x: torch.Tensor, obs: Mapping[str, Observations]) -> dict[str, Law]:
    return {name: Law.from_theta(theta.tolist()) for name, theta in unpack(x, levers(obs)).items()}


def fit_shared(obs: Mapping[str, Observations], own: Mapping[str, Law], starts: int = 32) -> SharedFit:
    """The joint fit of ``obs`` (runs per family) with E shared; ``own`` holds each family's own fit (the profile's
    candidates and starts)."""
    points = profile_starts(obs, own, starts)
    if not points:
        raise AotError("the shared-E scaling-law fit found no finite start; are the losses positive numbers?")
    end, best, values = joint_fit(obs, points)
    lever = levers(obs)
    with torch.no_grad():
        parts = {name: float(objective(theta, obs[name])) for name, theta in unpack(end, lever).items()}
    agreeing = sum(v - best <= 1e-6 * best + 1e-10 for v in values)
    return SharedFit(laws_of(end, obs), parts, best, len(points), agreeing, (end, *points))


def bootstrap_shared(
    obs: Mapping[str, Observations], fit: SharedFit, resamples: int, seed: int = 0, starts: int = 2
) -> dict[str, Bootstrap]:
    """The joint law refitted on ``resamples`` resamples, each family's runs drawn with replacement within the
    family; each refit starts from the full-data fit and the ``starts − 1`` best profile starts. A resample
    leaving some family one size or one budget is counted as failed for every family. Refit i of each family's
    :class:`Bootstrap` is the same joint refit."""
    generator = torch.Generator().manual_seed(seed)
    laws: dict[str, list[Law]] = {name: [] for name in obs}
    failed = 0
    for _ in range(resamples):
        weights = {name: resample_weights(len(o), generator) for name, o in obs.items()}
        if not all(determinable(o, weights[name]) for name, o in obs.items()):
            failed += 1
            continue
        end, _, _ = joint_fit(obs, fit.points[:starts], weights)
        for name, law in laws_of(end, obs).items():
            laws[name].append(law)
    return {name: Bootstrap(mine, resamples, failed, seed) for name, mine in laws.items()}
