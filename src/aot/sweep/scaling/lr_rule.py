"""The lr rule of a scaling study (issue 27's method), as functions of plain values: an lr sweep extended along a
ladder while its best lr is at an edge (:func:`sweep_lrs`), the best lr read off the parabola through (log lr, loss)
(:func:`vertex_lr`), carried to every size log-linearly in log N between two swept sizes (:func:`log_linear_lr`);
and where a WSD run's cooldown starts (:func:`stable_checkpoint`), where its branches take their checkpoint."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def stable_checkpoint(steps: int, decay_fraction: float) -> int:
    """Where a ``steps``-step WSD run's cooldown starts: a longer run's checkpoint there is that run's state."""
    return round(steps * (1 - decay_fraction))


def sweep_lrs(losses: Mapping[float, float], first: Sequence[float], ladder: Sequence[float]) -> list[float]:
    """The lrs a swept size needs, given the val losses of those finished (``losses``): ``first``, then one more
    step along ``ladder`` on the side of the best while the best finished lr is the highest (or lowest) tried, so
    that the best has a tried neighbour on each side."""
    lrs = list(first)
    while all(lr in losses for lr in lrs):
        best = min(lrs, key=lambda lr: losses[lr])
        i = ladder.index(best)
        if best == max(lrs) and i + 1 < len(ladder):
            lrs.append(ladder[i + 1])
        elif best == min(lrs) and i > 0:
            lrs.insert(0, ladder[i - 1])
        else:
            break
    return lrs


def vertex_lr(losses: Mapping[float, float], lrs: Sequence[float]) -> float:
    """The best lr of a finished sweep over ``lrs`` (ascending): the vertex of the parabola through (log lr, val
    loss) of the best tried lr and its two neighbours (or the two beside it, at an end), clipped to them; the best
    of the three where the parabola opens downwards."""
    i = lrs.index(min(lrs, key=lambda lr: losses[lr]))
    i = min(max(i, 1), len(lrs) - 2)
    xs = [math.log(lr) for lr in lrs[i - 1 : i + 2]]
    ys = [losses[lr] for lr in lrs[i - 1 : i + 2]]
    (x0, x1, x2), (y0, y1, y2) = xs, ys
    denom = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / denom
    b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / denom
    best = xs[ys.index(min(ys))] if a <= 0 else -b / (2 * a)
    return math.exp(min(max(best, xs[0]), xs[-1]))


def swept_lr(losses: Mapping[float, float], first: Sequence[float], ladder: Sequence[float]) -> float | None:
    """The best lr of a swept size (:func:`vertex_lr`); None until its sweep (:func:`sweep_lrs`) has finished."""
    lrs = sweep_lrs(losses, first, ladder)
    if not all(lr in losses for lr in lrs):
        return None
    return vertex_lr(losses, lrs)


def log_linear_lr(anchors: Sequence[tuple[int, float]], params: int) -> float:
    """The lr at ``params`` non-embedding parameters: log lr linear in log N through the two (N, lr) ``anchors``
    (extrapolated beyond them): a measured rule, not μP."""
    (n0, l0), (n1, l1) = ((math.log(n), math.log(lr)) for n, lr in anchors)
    n = math.log(params)
    return math.exp(l0 + (l1 - l0) * (n - n0) / (n1 - n0))


def sweep_losses(rows: Sequence[Mapping[str, Any]], family: str, size: int) -> dict[float, float]:
    """The val loss of each lr of ``family``'s finished sweep runs at ``size`` (rows of kind ``sweep``)."""
    return {
        r["lr"]: r["val_loss"] for r in rows if r["kind"] == "sweep" and r["family"] == family and r["size"] == size
    }
