"""``aot sweep``: train a grid of one task's runs over ``--set`` values and seeds, resumably, and summarise it."""

from __future__ import annotations

import argparse
from pathlib import Path

from aot.sweep import GridSweep, read_store, run_grid_sweep
from aot.sweep.store import STORE_FILE
from aot.sweep.training import finished_results
from aot.tasks import TASKS, get_task

DESCRIPTION = """\
Train every config of a grid and summarise it: the mean and min-max over seeds of each config at its best lr.

Grid. Each --set section.field=v1,v2,... is an axis (the fields of `aot train TASK --set`); every combination
of the values is one config. Values are split at commas outside brackets (model.foo=[1,2] is one value).

Seeds and best lr. train.lr is the lr sweep: each config trains at every lr with the first of --seeds; the lr
with the best metric at that seed wins (ties: the smaller lr), and the other seeds train at the winner only. The
metric: lm val nats/byte (lowest), vision val top-1 (highest), icl held-out error at k = 2d (lowest). Without
several lrs, every config trains at every seed.

Resume. Runs live in OUT/runs/; a run whose folder holds a whole results.json is finished and is not trained
again (a truncated or unreadable one is not finished: the run continues from its checkpoint), so the same
command resumes an interrupted sweep. OUT/results.json keeps a row per run (written atomically); OUT/table.md is
the summary table, rewritten after every run.
"""

EXAMPLES = """\
examples:
  aot sweep lm --preset cpu-quick --set train.lr=1e-3,3e-3 --seeds 0 1 --out runs/sweep
  aot sweep lm --preset cpu-quick --set model.n_layer=4,6 --set train.lr=1e-3,2e-3 --out runs/depth
  aot sweep vision --preset aot-mssa --set train.lr=5e-4,1e-3 --seeds 0 1 2 --out runs/vision-lr
  aot sweep lm --set train.lr=1e-3,3e-3 --plan           # list the runs, train nothing
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="train a grid of runs over --set values and seeds (lr sweep, best lr, resumable)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task", choices=list(TASKS), help="what to train (as `aot train TASK`)")
    parser.add_argument("--preset", help="training preset of the task (default: the task's `aot train` default)")
    parser.add_argument("--model", help="model preset (see `aot models`); replaces the training preset's model")
    parser.add_argument("--config", metavar="FILE", help="YAML or JSON config under the --set values")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="SECTION.FIELD=V1,V2",
        help="an axis of the grid (repeatable); train.lr with several values is the lr sweep",
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="seeds (the first is the sweep's; default 0)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: auto)")
    parser.add_argument("--out", metavar="DIR", default="runs/sweep", help="folder of the sweep (default: runs/sweep)")
    parser.add_argument("--plan", action="store_true", help="list the runs of the grid (done or to run); train nothing")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    sweep = GridSweep(
        task=args.task,
        preset=args.preset or get_task(args.task).command.default_preset,
        sets=tuple(args.sets),
        seeds=tuple(args.seeds),
        model=args.model,
        config_file=args.config,
    )
    if args.plan:
        return print_plan(sweep, args.out)
    store = run_grid_sweep(sweep, args.out, args.device)
    print(sweep.markdown(store), end="")
    print(f"wrote {Path(args.out) / STORE_FILE} and {Path(args.out) / 'table.md'}")
    return 0


def print_plan(sweep: GridSweep, out: str) -> int:
    """One line per run of the grid: done, to run, or waiting for its sweep."""
    sweep.check()
    store = read_store(Path(out) / STORE_FILE)
    recorded = {r["key"] for r in store["runs"]}
    plan = sweep.plan(store)
    for status, trials in (("run", plan.runs), ("after sweep", plan.pending)):
        for t in trials:
            done = t.key in recorded or finished_results(t.folder(Path(out) / "runs")) is not None
            lr = t.lr if t.lr is not None else ("best" if status != "run" else "preset")
            print(f"{'done' if done else status:12s} {' '.join(t.config) or '—'}  lr {lr}  seed {t.seed}")
    print(f"{len(plan.runs) + len(plan.pending)} runs")
    return 0
