"""The check a WSD scaling study rests on: a cooldown branch of a warm-up–stable–decay run is as good as a run of
the same budget trained from scratch with a cosine schedule (Hägele et al. 2024, "Scaling Laws and Compute-Optimal
Training Beyond Fixed Training Durations", find a 20 % 1-sqrt cooldown matches cosine). If it is, one WSD run per
size gives every budget of the grid at the cost of its cooldowns.

A study's rows (``benchmarks/scaling/results.json``) say their ``kind``: ``main`` (a WSD run to its largest
budget), ``branch`` (a cooldown branch of one) and ``cosine`` (the check's from-scratch cosine runs). Each cosine
row is paired with the WSD row (main or branch) of the same family, width, seed and steps; the difference
``WSD − cosine`` in val loss is read against two yardsticks: its standard error (√(se_WSD² + se_cos²), from the
full-split scores: windows are correlated, so it understates) and the seed noise, the spread between the two
seeds of the same schedule at the same point (the larger of the WSD and the cosine spread, where both seeds ran).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from aot.sweep.render import table

WSD_KINDS = ("main", "branch")
COSINE_KIND = "cosine"
#: the fields that make a cosine row and a WSD row the same point of the grid
POINT_FIELDS = ("family", "n_embd", "seed", "steps")


@dataclass(frozen=True)
class SchedulePair:
    """A cosine run and the WSD run (a main run or a cooldown branch) of the same family, width, seed and steps."""

    family: str
    width: int
    params: int
    seed: int
    steps: int
    tokens: int
    wsd: float
    wsd_se: float | None
    cosine: float
    cosine_se: float | None
    wsd_kind: str

    @property
    def difference(self) -> float:
        """WSD − cosine val loss: negative when the cooldown branch is the better."""
        return self.wsd - self.cosine

    @property
    def difference_se(self) -> float | None:
        """√(se_WSD² + se_cos²) (None when a row has no standard error)."""
        if self.wsd_se is None or self.cosine_se is None:
            return None
        return math.hypot(self.wsd_se, self.cosine_se)


def point(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in POINT_FIELDS)


def schedule_pairs(rows: Sequence[dict[str, Any]]) -> list[SchedulePair]:
    """Every cosine row with its WSD row at the same point, sorted by family, width, steps and seed; a cosine row
    whose WSD run has not finished is left out."""
    wsd = {point(r): r for r in rows if r.get("kind") in WSD_KINDS}
    pairs = []
    for cos in (r for r in rows if r.get("kind") == COSINE_KIND):
        mate = wsd.get(point(cos))
        if mate is None:
            continue
        pairs.append(
            SchedulePair(
                family=cos["family"],
                width=cos["n_embd"],
                params=cos["non_embedding_params"],
                seed=cos["seed"],
                steps=cos["steps"],
                tokens=cos["tokens"],
                wsd=mate["val_loss"],
                wsd_se=mate.get("val_loss_se"),
                cosine=cos["val_loss"],
                cosine_se=cos.get("val_loss_se"),
                wsd_kind=mate["kind"],
            )
        )
    return sorted(pairs, key=lambda p: (p.family, p.width, p.steps, p.seed))


def seed_noise(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, int, int], float]:
    """Per (family, width, steps) where one schedule (WSD: main or branch rows; cosine) has two seeds or more: the
    larger of the two schedules' spreads over seeds (max − min of the val loss)."""
    groups: dict[tuple[Any, ...], dict[Any, float]] = {}
    for r in rows:
        schedule = "wsd" if r.get("kind") in WSD_KINDS else "cosine" if r.get("kind") == COSINE_KIND else None
        if schedule is not None:  # a row without the point's fields (another study's file) joins no point
            key = (r.get("family"), r.get("n_embd"), r.get("steps"), schedule)
            groups.setdefault(key, {})[r.get("seed")] = r["val_loss"]
    noise: dict[tuple[str, int, int], float] = {}
    for (family, width, steps, _), by_seed in groups.items():
        if len(by_seed) >= 2:
            spread = max(by_seed.values()) - min(by_seed.values())
            noise[(family, width, steps)] = max(spread, noise.get((family, width, steps), 0.0))
    return noise


def schedule_summary(pairs: Sequence[SchedulePair], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The check as a JSON-able dict: every pair with the seed noise at its point (from ``rows``, the study's rows:
    :func:`seed_noise`), and the verdict's numbers (signed and absolute differences, the largest seed noise at a
    paired point)."""
    noise = seed_noise(rows)
    at_pairs = {(p.family, p.width, p.steps) for p in pairs}
    table = [
        {**asdict(p), "difference": p.difference, "difference_se": p.difference_se,
         "seed_noise": noise.get((p.family, p.width, p.steps))}
        for p in pairs
    ]  # fmt: skip
    return {
        "pairs": table,
        "max_abs_difference": max((abs(p.difference) for p in pairs), default=None),
        "max_difference": max((p.difference for p in pairs), default=None),
        "min_difference": min((p.difference for p in pairs), default=None),
        "mean_difference": sum(p.difference for p in pairs) / len(pairs) if pairs else None,
        "max_seed_noise": max((v for k, v in noise.items() if k in at_pairs), default=None),
    }


def verdict(summary: dict[str, Any]) -> str:
    """One sentence: whether the cooldown branches are within the seed noise of cosine (or better), on these runs."""
    worst, noise, mean = summary["max_abs_difference"], summary["max_seed_noise"], summary["mean_difference"]
    if worst is None:
        return "No cosine run has its WSD run finished yet: the check has not been made."
    said = f"WSD − cosine over {len(summary['pairs'])} pairs: mean {mean:+.4f}, largest |difference| {worst:.4f} nats"
    if noise is None:
        return said + "; no paired point has two seeds yet, so the seed noise is not measured."
    if summary["max_difference"] > noise:
        return (
            said + f"; a branch is worse than cosine by more than the seed noise ({noise:.4f}): a cooldown branch "
            "does NOT stand for a cosine run here."
        )
    if summary["min_difference"] < -noise:
        return (
            said + f"; no branch is worse than cosine beyond the seed noise ({noise:.4f}) and some are better "
            "beyond it: the budgets are WSD budgets, at least as good as cosine runs of the same length."
        )
    return said + f", within the seed noise ({noise:.4f}): a cooldown branch stands for a cosine run."


SCHEDULE_HEADER = [
    "family",
    "width",
    "N",
    "steps",
    "tokens",
    "seed",
    "WSD (kind)",
    "cosine",
    "WSD − cosine",
    "seed noise",
]


def schedule_rows(summary: dict[str, Any]) -> list[list[str]]:
    def loss(value: float, se: float | None) -> str:
        return f"{value:.4f}" + ("" if se is None else f" ± {se:.4f}")

    rows = []
    for p in summary["pairs"]:
        diff = f"{p['difference']:+.4f}" + ("" if p["difference_se"] is None else f" ± {p['difference_se']:.4f}")
        rows.append(
            [
                p["family"],
                str(p["width"]),
                f"{p['params'] / 1e6:.2f} M",
                str(p["steps"]),
                f"{p['tokens'] / 1e6:.1f} M",
                str(p["seed"]),
                f"{loss(p['wsd'], p['wsd_se'])} ({p['wsd_kind']})",
                loss(p["cosine"], p["cosine_se"]),
                diff,
                "—" if p["seed_noise"] is None else f"{p['seed_noise']:.4f}",
            ]
        )
    return rows


def schedule_markdown(summary: dict[str, Any]) -> str:
    """The check as Markdown: a sentence and the table of pairs (val loss ± its standard error)."""
    lines = [verdict(summary), ""]
    if summary["pairs"]:
        lines += table(SCHEDULE_HEADER, schedule_rows(summary))
    return "\n".join(lines) + "\n"


__all__ = ["SchedulePair", "schedule_markdown", "schedule_pairs", "schedule_summary", "seed_noise", "verdict"]
