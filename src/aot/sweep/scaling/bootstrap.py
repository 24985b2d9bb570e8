"""Bootstrap intervals over runs: resample the runs with replacement, refit the law, read any quantity off each
refit, and take percentile intervals (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, §13.3).

A resample is the counts of each run drawn (the refit's Huber weights, :func:`aot.sweep.scaling.law.objective`),
so no run is copied. Each refit starts from the full-data fit and from the ``starts − 1`` best points of the
paper's grid for the resample. A resample holding one model size or one token budget only cannot determine the
law: it is counted as failed and left out (their number is reported beside the interval).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from aot.sweep.scaling.law import Law, LawFit, Observations, fit_law

#: the coverage of every interval
LEVEL = 0.95


@dataclass(frozen=True)
class Bootstrap:
    """The refitted laws of ``requested`` resamples (``failed`` of them could not be fitted)."""

    laws: list[Law]
    requested: int
    failed: int
    seed: int

    def replicates(self, quantity: Callable[[Law], Any]) -> np.ndarray:
        """``quantity`` of every refit, stacked along the first axis (empty without refits)."""
        if not self.laws:
            return np.empty(0)
        return np.stack([np.asarray(quantity(law), dtype=float) for law in self.laws])


def resample_weights(n: int, generator: torch.Generator) -> torch.Tensor:
    """How often each of ``n`` runs is drawn in one resample of size ``n`` with replacement."""
    drawn = torch.randint(n, (n,), generator=generator)
    return torch.bincount(drawn, minlength=n).to(torch.float64)


def determinable(obs: Observations, weights: torch.Tensor) -> bool:
    """Whether the runs a resample drew (weight > 0) hold two sizes or more and two budgets or more."""
    drawn = weights > 0
    return len(set(obs.log_n[drawn].tolist())) >= 2 and len(set(obs.log_d[drawn].tolist())) >= 2


def bootstrap_laws(obs: Observations, fit: LawFit, resamples: int, seed: int = 0, starts: int = 2) -> Bootstrap:
    """The law refitted on ``resamples`` resamples of the runs of ``obs`` (seeded: the same seed, the same
    intervals); ``fit`` is the full-data fit each refit starts from."""
    generator = torch.Generator().manual_seed(seed)
    laws, failed = [], 0
    for _ in range(resamples):
        weights = resample_weights(len(obs), generator)
        if not determinable(obs, weights):
            failed += 1
            continue
        laws.append(fit_law(obs, weights, starts=starts - 1, extra_starts=[fit.law.theta()]).law)
    return Bootstrap(laws, resamples, failed, seed)


def interval(replicates: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of ``replicates`` (at least one) along the first axis (NaN replicates, where a
    quantity is not defined for a refit, are left out; NaN where none is left)."""
    tail = 100 * (1 - level) / 2
    flat = replicates.reshape(len(replicates), -1)
    defined = ~np.isnan(flat).all(axis=0)
    low, high = np.full(flat.shape[1], np.nan), np.full(flat.shape[1], np.nan)
    if defined.any():
        low[defined] = np.nanpercentile(flat[:, defined], tail, axis=0)
        high[defined] = np.nanpercentile(flat[:, defined], 100 - tail, axis=0)
    return low.reshape(replicates.shape[1:]), high.reshape(replicates.shape[1:])


def estimate(point: Any, replicates: np.ndarray, level: float = LEVEL) -> dict[str, Any]:
    """``{"value", "low", "high"}``: the full-data value and the percentile interval of its refits (lists for an
    array; None where undefined)."""
    value = np.asarray(point, dtype=float)
    if len(replicates) == 0:  # no refits (--bootstrap 0): no interval
        low = high = np.full(value.shape, np.nan)
    else:
        low, high = interval(replicates, level)
    return {"value": _plain(value), "low": _plain(low), "high": _plain(high)}


def _plain(values: np.ndarray) -> Any:
    """A float or a list of floats, with None for NaN (JSON has no NaN)."""
    if values.ndim == 0:
        return None if np.isnan(values) else float(values)
    return [None if np.isnan(v) else float(v) for v in values]
