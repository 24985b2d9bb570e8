"""Synthetic scaling runs drawn from a known law, shared by the scaling-law tests (tests/sweep/test_scaling_fit.py,
tests/sweep/test_scaling_shared.py, tests/sweep/test_scaling_holdout.py): 4 sizes × 3 budgets, each loss the law's
times exp(noise · N(0, 1)), FLOPs 6 N D."""

from __future__ import annotations

import math

import numpy as np

from aot.sweep.scaling import Law, ScalingRun

TRUE = Law(E=1.7, A=400.0, alpha=0.34, B=410.0, beta=0.28)
SIZES = (3e5, 1e6, 4e6, 2e7)
BUDGETS = (2e6, 8e6, 4e7)


def synthetic(law: Law = TRUE, noise: float = 0.0, family: str = "f", seed: int = 0) -> list[ScalingRun]:
    """Runs of ``law`` on the 4 × 3 grid, each loss times exp(noise · N(0, 1)) (numpy seed ``seed``)."""
    rng = np.random.default_rng(seed)
    return [
        ScalingRun(family, n, d, float(law.loss(n, d)) * math.exp(noise * rng.standard_normal()), 6 * n * d)
        for n in SIZES
        for d in BUDGETS
    ]
