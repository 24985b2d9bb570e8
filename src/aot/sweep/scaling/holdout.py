"""The extrapolation check the runs can make themselves: each family's law fitted without its largest size
(:func:`aot.sweep.scaling.law.fit_law`), then read at that size's runs and set beside what they measured.

A law read at the paper's sizes extrapolates 30-300× beyond the runs; one that misses the next size up, 2× beyond
the sizes it was fitted on, says little there. The check needs a family with three sizes or more (the fit keeps
two) whose smaller sizes alone can be fitted (:func:`aot.sweep.scaling.study.check_family`); runs of one (N, D) at
several seeds are averaged before the comparison (the fit itself sees every run).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aot.errors import AotError
from aot.sweep.render import table
from aot.sweep.scaling.law import fit_law
from aot.sweep.scaling.runs import ScalingRun, by_family
from aot.sweep.scaling.study import check_family, observations


@dataclass(frozen=True)
class HeldOut:
    """One held-out (N, D) of ``family``: the measured loss (mean over its ``seeds`` runs) and the law's prediction
    from the runs at ``fitted_sizes`` only."""

    family: str
    fitted_sizes: tuple[float, ...]
    params: float
    tokens: float
    seeds: int
    measured: float
    predicted: float

    @property
    def error(self) -> float:
        """predicted / measured − 1."""
        return self.predicted / self.measured - 1


def hold_out_largest(runs: Sequence[ScalingRun], starts: int = 32) -> list[HeldOut]:
    """Every family's largest-size points predicted by the law of its other sizes (families that cannot be checked
    are left out), in the order the families first appear, each family's points by budget."""
    rows = []
    for family, mine in by_family(runs).items():
        sizes = sorted({r.params for r in mine})
        fitted = [r for r in mine if r.params < sizes[-1]]
        if len(sizes) < 3:
            continue
        try:
            check_family(family, fitted, "the runs")
        except AotError:
            continue
        law = fit_law(observations(fitted), starts=starts).law
        held: dict[float, list[float]] = {}
        for run in mine:
            if run.params == sizes[-1]:
                held.setdefault(run.tokens, []).append(run.loss)
        for tokens, losses in sorted(held.items()):
            predicted = float(law.loss(sizes[-1], tokens))
            rows.append(
                HeldOut(family, tuple(sizes[:-1]), sizes[-1], tokens, len(losses), sum(losses) / len(losses), predicted)
            )
    return rows


HOLDOUT_HEADER = ["family", "fitted on N", "held-out N", "D", "seeds", "measured", "predicted", "error"]


def hold_out_table(
    rows: Sequence[HeldOut], labels: Mapping[str, str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """The check as (header, rows of cells) (``labels``: a display name per family)."""
    labels = labels or {}
    body = [
        [
            labels.get(r.family, r.family),
            ", ".join(f"{n / 1e6:.2f}" for n in r.fitted_sizes) + " M",
            f"{r.params / 1e6:.2f} M",
            f"{r.tokens / 1e6:.3g} M",
            str(r.seeds),
            f"{r.measured:.3f}",
            f"{r.predicted:.3f}",
            f"{100 * r.error:+.1f} %",
        ]
        for r in rows
    ]
    return list(HOLDOUT_HEADER), body


def hold_out_markdown(rows: Sequence[HeldOut], labels: Mapping[str, str] | None = None) -> str:
    """The check as a Markdown table."""
    return "\n".join(table(*hold_out_table(rows, labels)))
