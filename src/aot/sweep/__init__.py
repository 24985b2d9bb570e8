"""The sweep engine: grids of training runs over configs, lrs and seeds, resumable, in one results store.

- :mod:`aot.sweep.grid`: the grid of ``--set section.field=v1,v2`` assignments and the order of its runs (the lr
  sweep at the first seed, then the other seeds at the winner: :func:`plan_sweep`);
- :mod:`aot.sweep.store`: the one results-store format (rows keyed, written atomically, re-read before each
  write) and the declaration of how to read it (:class:`SweepSpec`);
- :mod:`aot.sweep.selection`: the best lr (the seed-0 sweep winner) and each config's summary over seeds;
- :mod:`aot.sweep.metrics`: the metric each task ranks by and the numbers a row keeps of a run;
- :mod:`aot.sweep.execute`: skip what finished (a whole results.json only), train the rest, record, plan again;
- :mod:`aot.sweep.render`, :mod:`aot.sweep.figures`, :mod:`aot.sweep.reference`: tables, quality per compute,
  gaps to a reference model;
- :mod:`aot.sweep.training`: the one place it calls the package's training (:func:`aot.tasks.run_task`);
- :mod:`aot.sweep.task_sweep`: what ``aot sweep`` runs;
- :mod:`aot.sweep.scaling`: scaling laws of a study's runs (``aot scaling fit``): L(N, D) per family with bootstrap
  intervals, the compute frontier, gaps to a reference family, extrapolation, their table and figures.

    from aot.sweep import GridSweep, run_grid_sweep
    sweep = GridSweep("lm", "cpu-quick", ("train.lr=1e-3,3e-3", "model.n_layer=2,4"), seeds=(0, 1))
    store = run_grid_sweep(sweep, "runs/sweep")     # runs/sweep/results.json, table.md, runs/
"""

from __future__ import annotations

from aot.sweep.execute import Execution
from aot.sweep.grid import Plan, grid_configs, parse_axes, plan_sweep, run_key
from aot.sweep.metrics import TASK_METRICS, Metric, task_metrics
from aot.sweep.scaling import FitSettings, Law, Point, ScalingRun, fit_study, read_scaling_runs
from aot.sweep.selection import Axes, Summary, best_lr, best_row, seed_summary, sweep_winners
from aot.sweep.spec import Reference, SweepSpec
from aot.sweep.store import read_store, record_rows, store_spec, write_store
from aot.sweep.task_sweep import GridSweep, run_grid_sweep

__all__ = [
    "TASK_METRICS",
    "Axes",
    "Execution",
    "FitSettings",
    "GridSweep",
    "Law",
    "Metric",
    "Plan",
    "Point",
    "Reference",
    "ScalingRun",
    "Summary",
    "SweepSpec",
    "best_lr",
    "best_row",
    "fit_study",
    "grid_configs",
    "parse_axes",
    "plan_sweep",
    "read_scaling_runs",
    "read_store",
    "record_rows",
    "run_grid_sweep",
    "run_key",
    "seed_summary",
    "store_spec",
    "sweep_winners",
    "task_metrics",
    "write_store",
]
