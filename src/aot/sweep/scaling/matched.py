"""The gap to a reference family at matched size and budget, read off the runs without a law: for every (N, D) a
family has runs at, its loss against the reference's loss at the same D and the same N — the reference's runs at
that D interpolated linearly in (log N, log L) between the two sizes around N, or taken as they are when N is
within ``tolerance`` of a reference size. Never extrapolated: an N outside the reference's sizes at that D has no
gap. Several seeds at a point are averaged (and counted), so a reader sees how many runs stand behind each gap.

This is the question "does the gap close with scale?" asked of the data itself: the gap along D at a fixed size,
and along N at a fixed budget, where :func:`aot.sweep.scaling.study.fit_study`'s law needs enough sizes to be
determined and reads far outside its runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aot.sweep.render import table
from aot.sweep.scaling.runs import ScalingRun

TOLERANCE = 0.05  # sizes within 5 % count as the same N (0.2998 M and 0.3000 M non-embedding parameters)


@dataclass(frozen=True)
class MatchedGap:
    """One (family, N, D): its mean loss over ``seeds`` runs, the reference's loss there and how it was read."""

    family: str
    params: float
    tokens: float
    loss: float
    seeds: int
    reference_loss: float
    reference_seeds: int
    reference_sizes: tuple[float, ...]  # the reference size(s) read: one (matched) or the two around N

    @property
    def gap(self) -> float:
        """L / L_ref − 1."""
        return self.loss / self.reference_loss - 1


def mean_by_point(runs: Sequence[ScalingRun]) -> dict[tuple[str, float, float], tuple[float, int]]:
    """(family, N, D) → (mean loss over its seeds, how many)."""
    groups: dict[tuple[str, float, float], list[float]] = {}
    for run in runs:
        groups.setdefault((run.family, run.params, run.tokens), []).append(run.loss)
    return {key: (sum(losses) / len(losses), len(losses)) for key, losses in groups.items()}


def reference_at(
    sizes: Sequence[tuple[float, float, int]], params: float, tolerance: float = TOLERANCE
) -> tuple[float, int, tuple[float, ...]] | None:
    """The reference loss at N = ``params`` from its (N, mean loss, seeds) at one budget: a size within
    ``tolerance`` as it is, else the log-log interpolation between the sizes around N; None outside them."""
    sizes = sorted(sizes)
    near = min(sizes, key=lambda s: abs(math.log(s[0] / params)))
    if abs(near[0] / params - 1) <= tolerance:
        return near[1], near[2], (near[0],)
    for (n1, l1, k1), (n2, l2, k2) in itertools.pairwise(sizes):
        if n1 < params < n2:
            t = math.log(params / n1) / math.log(n2 / n1)
            return math.exp((1 - t) * math.log(l1) + t * math.log(l2)), min(k1, k2), (n1, n2)
    return None


def matched_gaps(runs: Sequence[ScalingRun], reference: str, tolerance: float = TOLERANCE) -> list[MatchedGap]:
    """Every (N, D) of the families other than ``reference`` whose gap the reference's runs determine (see the
    module), ordered by family, N, D."""
    points = mean_by_point(runs)
    by_budget: dict[float, list[tuple[float, float, int]]] = {}
    for (family, n, d), (loss, k) in points.items():
        if family == reference:
            by_budget.setdefault(d, []).append((n, loss, k))
    out = []
    for (family, n, d), (loss, k) in sorted(points.items()):
        if family == reference or d not in by_budget:
            continue
        ref = reference_at(by_budget[d], n, tolerance)
        if ref is not None:
            out.append(MatchedGap(family, n, d, loss, k, ref[0], ref[1], ref[2]))
    return out


def matched_table(
    gaps: Sequence[MatchedGap], reference: str, labels: Mapping[str, str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the matched gaps: one row per family and size, one column per budget (``labels``: how
    a family or the reference is named, default its name); a cell says the seeds behind it when either side has
    more than one."""
    labels = labels or {}
    budgets = sorted({g.tokens for g in gaps})
    cells_of: dict[tuple[str, float], dict[float, MatchedGap]] = {}
    for g in gaps:
        cells_of.setdefault((g.family, g.params), {})[g.tokens] = g
    header = ["family", "N", f"{labels.get(reference, reference)} read at"]
    header += [f"{d / 1e6:.0f} M tokens" for d in budgets]
    rows = []
    for (family, n), cells in cells_of.items():
        read = "; ".join(
            " – ".join(f"{s / 1e6:.2f} M" for s in sizes) + (" (interpolated)" if len(sizes) == 2 else "")
            for sizes in sorted({g.reference_sizes for g in cells.values()})
        )
        rows.append([labels.get(family, family), f"{n / 1e6:.2f} M", read, *(_cell(cells.get(d)) for d in budgets)])
    return header, rows


def matched_markdown(gaps: Sequence[MatchedGap], reference: str, labels: Mapping[str, str] | None = None) -> str:
    """:func:`matched_table` as Markdown (a sentence when no gap is determined yet)."""
    if not gaps:
        name = (labels or {}).get(reference, reference)
        return f"No size of another family lies within {name}'s sizes at a common budget yet."
    return "\n".join(table(*matched_table(gaps, reference, labels)))


def _cell(g: MatchedGap | None) -> str:
    if g is None:
        return "—"
    seeds = "" if g.seeds == 1 and g.reference_seeds == 1 else f" ({g.seeds} / {g.reference_seeds} seeds)"
    return f"{100 * g.gap:+.1f} %{seeds}"
