"""Scaling laws of a study's runs: L(N, D) = E + A / N^α + B / D^β per family, fitted as Hoffmann et al. 2022
(approach 3), with bootstrap intervals over runs, the compute frontier, the gap to a reference family along
compute and the extrapolation to given sizes; its table and figures (what ``aot scaling fit`` writes).

- :mod:`aot.sweep.scaling.law`: the law, the Huber objective on log L and its multi-start L-BFGS fit;
- :mod:`aot.sweep.scaling.bootstrap`: resampling the runs, refits, percentile intervals;
- :mod:`aot.sweep.scaling.frontier`: FLOPs per token against N, the compute-optimal N and the frontier;
- :mod:`aot.sweep.scaling.runs`: reading the runs file (or an ``aot sweep`` store);
- :mod:`aot.sweep.scaling.study`: every family fitted, the frontier, gaps and points as one results dict;
- :mod:`aot.sweep.scaling.render`, :mod:`aot.sweep.scaling.figures`: the Markdown table and the figures;
- :mod:`aot.sweep.scaling.plan`: a study to fit, planned from a sweep file of ``kind: scaling`` (``aot sweep --file``),
  read by :mod:`aot.sweep.scaling.study_file`, its lr rule in :mod:`aot.sweep.scaling.lr_rule`.

    from aot.sweep.scaling import read_scaling_runs, fit_study, Point
    runs = read_scaling_runs("benchmarks/scaling/results.json")
    results = fit_study(runs, reference="transformer", points=[Point("GPT-2", "transformer", 85e6, 2.95e11)])
"""

from __future__ import annotations

from aot.sweep.scaling.bootstrap import Bootstrap, bootstrap_laws, estimate, interval
from aot.sweep.scaling.frontier import FlopsModel, fit_flops_model, frontier_loss, optimal_params
from aot.sweep.scaling.law import Law, LawFit, Observations, fit_law
from aot.sweep.scaling.runs import ScalingRun, by_family, read_scaling_runs
from aot.sweep.scaling.study import FitSettings, Point, fit_family, fit_study, gap_along_frontier

__all__ = [
    "Bootstrap",
    "FitSettings",
    "FlopsModel",
    "Law",
    "LawFit",
    "Observations",
    "Point",
    "ScalingRun",
    "bootstrap_laws",
    "by_family",
    "estimate",
    "fit_family",
    "fit_flops_model",
    "fit_law",
    "fit_study",
    "frontier_loss",
    "gap_along_frontier",
    "interval",
    "optimal_params",
    "read_scaling_runs",
]
