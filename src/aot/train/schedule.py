"""Learning-rate schedules. Stateless: the rate is a function of the step, so resuming needs nothing but the step.

- ``cosine`` (the default; nanoGPT): linear warm-up, then cosine decay to ``min_lr`` at ``total_steps``.
- ``wsd`` (warm-up, stable, decay; Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed
  Training Durations"): the same linear warm-up, then ``base_lr`` held constant, then a cooldown over the last
  ``decay_fraction`` of the steps to ``min_lr``. The cooldown's shape is their **1 − sqrt**, not linear: they
  find it better than a linear cooldown and, with a 20 % cooldown (our default), on par with cosine.

Because the stable phase's rate does not depend on ``total_steps``, the first :func:`decay_start` steps of a WSD run
are the same for every length: a checkpoint taken there can be cooled down to any longer budget and gives the run
that budget would have given from scratch (a cooldown branch, :mod:`aot.train.resume`).
"""

from __future__ import annotations

import math

SCHEDULES = ("cosine", "wsd")


def decay_start(total_steps: int, warmup_steps: int, decay_fraction: float) -> int:
    """The first step of a WSD run's cooldown: ``total_steps − round(decay_fraction · total_steps)`` (at least one
    cooldown step), never before warm-up ends. Steps before it train at the rate of a run of any length."""
    decay_steps = max(1, round(decay_fraction * total_steps))
    return max(warmup_steps, total_steps - decay_steps)


def lr_at(
    step: int,
    base_lr: float,
    warmup_steps: int,
    total_steps: int,
    min_lr: float,
    schedule: str = "cosine",
    decay_fraction: float = 0.2,
) -> float:
    """Rate for optimizer step ``step`` (0-based). Warm-up (both schedules): ``base_lr·(step+1)/warmup``.

    ``cosine``: then ``min_lr + ½(base_lr − min_lr)(1 + cos(π·progress))`` with progress from 0 to 1 at
    ``total_steps``.
    ``wsd``: then ``base_lr`` until :func:`decay_start` ``s₀``, then ``min_lr + (base_lr − min_lr)(1 − √p)`` with
    ``p = (step + 1 − s₀) / (total_steps − s₀)``, so the last step trains at ``min_lr`` (Hägele et al. 2024, the
    1-sqrt cooldown). ``min_lr`` from ``total_steps`` on."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    if schedule == "wsd":
        start = decay_start(total_steps, warmup_steps, decay_fraction)
        if step < start:
            return base_lr
        progress = (step + 1 - start) / (total_steps - start)
        return min_lr + (base_lr - min_lr) * (1.0 - math.sqrt(progress))
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
