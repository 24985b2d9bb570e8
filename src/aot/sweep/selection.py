"""Which lr won a sweep, and each config's summary over seeds at that lr.

The rule: a config's best lr is the winner of its sweep at the sweep seed (seed 0 unless the sweep says
otherwise) — the lr whose run at that seed has the best metric (ties: the smaller lr) — not the lr with the best
mean, so an lr that got extra seeds by hand cannot displace the one the protocol chose. A config with no run at
the sweep seed falls back to the best mean.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from aot.sweep.metrics import Metric


@dataclass(frozen=True)
class Axes:
    """The row fields of a sweep: those that name a config (``group``: everything but lr and seed), the lr
    and the seed."""

    group: tuple[str, ...]
    lr: str = "lr"
    seed: str = "seed"

    def config_key(self, row: dict[str, Any]) -> tuple[Hashable, ...]:
        """The config a row belongs to, hashable (list fields become tuples)."""
        return tuple(_hashable(row.get(name)) for name in self.group)


def _hashable(value: Any) -> Hashable:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Summary:
    """One config at its best lr: the config's group fields, the lr chosen and those tried, the seeds at it and
    the mean / min / max over them of the shown field, and the rows behind it."""

    config: dict[str, Any]
    lr: float
    lrs_tried: list[float]
    seeds: list[int]
    mean: float
    min: float
    max: float
    rows: list[dict[str, Any]]

    def get(self, name: str) -> Any:
        """A group field of the config, else the field of its first run (fields its seeds share: tokens, ...)."""
        return self.config[name] if name in self.config else self.rows[0].get(name)


def best_row(rows: Sequence[dict[str, Any]], metric: Metric, lr_field: str = "lr") -> dict[str, Any] | None:
    """The row with the best metric (ties: the smaller lr), or None without rows."""
    if not rows:
        return None
    return min(rows, key=lambda r: (metric.rank(r), float(r[lr_field])))


def best_lr(rows: Sequence[dict[str, Any]], metric: Metric, lr_field: str = "lr") -> float | None:
    """The lr of :func:`best_row`, or None without rows."""
    row = best_row(rows, metric, lr_field)
    return None if row is None else float(row[lr_field])


def sweep_winners(
    rows: Sequence[dict[str, Any]],
    axes: Axes,
    metric: Metric,
    lrs: Sequence[float] | None = None,
    seed: int = 0,
) -> dict[tuple[Hashable, ...], float]:
    """For each config of ``rows``: the best lr among its rows at ``seed``. With ``lrs``, a config has a winner
    only once each of them is recorded (a half-done sweep has none), and only those compete."""
    groups: dict[tuple[Hashable, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r[axes.seed] == seed:
            groups.setdefault(axes.config_key(r), []).append(r)
    winners = {}
    for key, mine in groups.items():
        if lrs is not None:
            mine = [r for r in mine if r[axes.lr] in lrs]
            if {r[axes.lr] for r in mine} != set(lrs):
                continue
        lr = best_lr(mine, metric, axes.lr)
        if lr is not None:
            winners[key] = lr
    return winners


def seed_summary(
    rows: Sequence[dict[str, Any]], axes: Axes, metric: Metric, shown: str = "", sweep_seed: int = 0
) -> list[Summary]:
    """Per config (in the order the rows first name it): the rows at its best lr (the winner of its sweep at
    ``sweep_seed``; without a run at that seed, the best mean), with the mean and min-max of ``shown`` (the
    metric's field when empty) over their seeds."""
    shown = shown or metric.field
    groups: dict[tuple[Hashable, ...], dict[float, list[dict[str, Any]]]] = {}
    for r in rows:
        groups.setdefault(axes.config_key(r), {}).setdefault(float(r[axes.lr]), []).append(r)
    summaries = []
    for by_lr in groups.values():
        sweep = [r for at_lr in by_lr.values() for r in at_lr if r[axes.seed] == sweep_seed]
        if sweep:
            lr = best_lr(sweep, metric, axes.lr)
        else:
            lr = min(by_lr, key=lambda x: (statistics.fmean(metric.rank(r) for r in by_lr[x]), x))
        assert lr is not None
        best = by_lr[lr]
        values = [float(r[shown]) for r in best]
        summaries.append(
            Summary(
                config={name: best[0].get(name) for name in axes.group},
                lr=lr,
                lrs_tried=sorted(by_lr),
                seeds=sorted(int(r[axes.seed]) for r in best),
                mean=statistics.fmean(values),
                min=min(values),
                max=max(values),
                rows=best,
            )
        )
    return summaries


def mean_curve(rows: Sequence[dict[str, Any]], x: str = "tokens", y: str = "val_loss") -> tuple[list, list[float]]:
    """(x, y averaged over ``rows``) at each periodic evaluation (``row["evals"]``) of runs that share a schedule."""
    xs = [e[x] for e in rows[0]["evals"]]
    return xs, [statistics.fmean(r["evals"][i][y] for r in rows) for i in range(len(xs))]
