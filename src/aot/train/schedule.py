"""Learning-rate schedule: linear warm-up, then cosine decay to ``min_lr`` (nanoGPT). Stateless: the rate is a
function of the step, so resuming needs nothing but the step."""

from __future__ import annotations

import math


def lr_at(step: int, base_lr: float, warmup_steps: int, total_steps: int, min_lr: float) -> float:
    """Rate for optimizer step ``step`` (0-based): ``base_lr·(step+1)/warmup`` during warm-up, then
    ``min_lr + ½(base_lr − min_lr)(1 + cos(π·progress))`` with progress from 0 to 1 at ``total_steps``."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
