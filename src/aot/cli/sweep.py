"""``aot sweep``: train a grid of one task's runs over ``--set`` values and seeds, or a sweep file, resumably, here or
as Slurm jobs, and summarise it; ``aot sweep status OUT``: what its jobs are doing."""

from __future__ import annotations

import argparse
from pathlib import Path

from aot.cli.options import add_number, add_recipe_arg
from aot.errors import ConfigError
from aot.sweep.execute import Study, branch_parent
from aot.sweep.launch.cost import MFU, CostModel, run_flops, start_step
from aot.sweep.launch.resources import CPUS, GPUS, Resources
from aot.sweep.store import STORE_FILE, read_store
from aot.sweep.task_sweep import GridSweep
from aot.tasks import TASKS, get_task

DESCRIPTION = """\
Train every config of a grid and summarise it: the mean and min-max over seeds of each config at its best lr.

Grid. Each --set section.field=v1,v2,... is an axis (the fields of `aot train TASK --set`); every combination
of the values is one config. Values are split at commas outside brackets (model.foo=[1,2] is one value). A sweep
file (--file FILE, YAML) says the same once, with what each trial's cluster job asks for; `kind: scaling` files
describe a scaling study (families, sizes, budgets, the lr rule; benchmarks/scaling/*.yaml).

Seeds and best lr. train.lr is the lr sweep: each config trains at every lr with the first of --seeds; the lr
with the best metric at that seed wins (ties: the smaller lr), and the other seeds train at the winner only. The
metric: lm val nats/byte (lowest), vision val top-1 (highest), icl held-out error at k = 2d (lowest). Without
several lrs, every config trains at every seed.

Resume. Runs live in OUT/runs/; a run whose folder holds a whole results.json is finished and is not trained
again (a truncated or unreadable one is not finished: the run continues from its checkpoint), so the same
command resumes an interrupted sweep. OUT/results.json keeps a row per run (written atomically, under a lock);
OUT/table.md is the summary table, rewritten after every run.

Launchers. --launcher local (the default) trains the runs here, one after another. --launcher slurm submits each
run as a Slurm job through submitit (`pip install 'aot[slurm]'`), one job array per phase, asking for --gpus,
--cpus, --mem, --time, --partition and --account (or the sweep file's launcher: section); more than one GPU runs
the trial under torchrun inside its job. The seeds that wait for an lr sweep's winner are submitted by a small
planner job that starts when the sweep's jobs end (or by this command with --wait). Each job records its row as it
finishes. After a crash, a cancellation, preemption or a time-out, run the same command again: finished runs are
skipped, queued and running ones are left alone, killed ones continue from their checkpoints. `aot sweep status
OUT` lists what is queued, running, finished and failed (with why). OUT must be on a file system every node sees.

Cost. --plan lists every run with its training FLOPs (the analytic count the trainer's MFU uses) and the
GPU-hours they take on --gpu-type at --mfu (default: H100, bf16, 40 %): an estimate that leaves out evaluation,
data loading and start-up.
"""

EXAMPLES = """\
examples:
  aot sweep lm --recipe cpu-quick --set train.lr=1e-3,3e-3 --seeds 0 1 --out runs/sweep
  aot sweep lm --recipe cpu-quick --set model.n_layer=4,6 --set train.lr=1e-3,2e-3 --out runs/depth
  aot sweep vision --recipe fashion-mssa --set train.lr=5e-4,1e-3 --seeds 0 1 2 --out runs/vision-lr
  aot sweep lm --set train.lr=1e-3,3e-3 --plan           # list the runs, train nothing
  aot sweep --file benchmarks/scaling/gpu-a.yaml --plan --gpu-type H100 --mfu 0.4   # runs and GPU-hours
  aot sweep --file benchmarks/scaling/gpu-a.yaml --out /shared/scaling-a --launcher slurm --partition gpu
  aot sweep status /shared/scaling-a                     # queued, running, finished, failed (and why)
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="train a grid of runs over --set values and seeds, here or as Slurm jobs (lr sweep, best lr, resumable)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "task",
        nargs="?",
        choices=[*TASKS, "status"],
        help="what to train (as `aot train TASK`; optional with --file), or `status OUT`",
    )
    parser.add_argument("folder", nargs="?", help=argparse.SUPPRESS)  # aot sweep status OUT
    parser.add_argument("--file", metavar="FILE", help="a sweep file (YAML: task, grid, seeds, launcher; see above)")
    add_recipe_arg(parser, None, "training recipe of the task (default: the task's `aot train` default); was --preset")
    parser.add_argument("--model", help="model preset (see `aot models`); replaces the training recipe's model")
    parser.add_argument("--config", metavar="FILE", help="YAML or JSON config under the --set values")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="SECTION.FIELD=V1,V2",
        help="an axis of the grid (repeatable); train.lr with several values is the lr sweep",
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, default=None, help="seeds (the first is the sweep's; default 0)"
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (default: auto)")
    parser.add_argument("--out", metavar="DIR", default="runs/sweep", help="folder of the sweep (default: runs/sweep)")
    parser.add_argument(
        "--plan", action="store_true", help="list the runs (done or to run) and their cost; train nothing"
    )
    launch = parser.add_argument_group("launcher (--launcher slurm)")
    launch.add_argument(
        "--launcher", choices=("local", "slurm"), default="local", help="where runs train (default: local)"
    )
    add_number(launch, "--gpus", GPUS, "GPUs per run (0 when not given; more than 1: torchrun inside the job)")
    add_number(launch, "--cpus", CPUS, "CPUs per run (1 when not given)")
    launch.add_argument("--mem", help="memory per run, as sbatch reads it (e.g. 64G)")
    launch.add_argument("--time", help="time limit per run: minutes or sbatch's [D-]HH:MM:SS (default 60 minutes)")
    launch.add_argument("--partition", help="Slurm partition")
    launch.add_argument("--account", help="Slurm account")
    launch.add_argument(
        "--sbatch", action="append", default=[], metavar="NAME=VALUE", help="any other sbatch option (repeatable)"
    )
    launch.add_argument("--wait", action="store_true", help="stay until every phase has run (no planner jobs)")
    cost = parser.add_argument_group("cost (--plan)")
    cost.add_argument("--gpu-type", default="H100", help="the GPU the GPU-hours are for (default: H100)")
    add_number(cost, "--mfu", MFU, "model-FLOPs utilisation the GPU-hours assume", default=0.4)
    parser.set_defaults(func=run_command)


def study_of(args: argparse.Namespace) -> tuple[Study, Resources]:
    """The study the flags or --file describe, with the resources the file asks for."""
    if args.file:
        if args.task or args.sets or args.recipe or args.model or args.config or args.seeds:
            raise ConfigError(
                "--file holds the whole sweep; drop the task, --recipe, --model, --config, --set, --seeds"
            )
        from aot.sweep.sweep_file import read_sweep_file

        found = read_sweep_file(args.file)
        return found.study, found.resources
    if not args.task:
        raise ConfigError("name a task (aot sweep lm ...) or give a sweep file (aot sweep --file FILE)")
    sweep = GridSweep(
        task=args.task,
        recipe=args.recipe or get_task(args.task).command.default_recipe,
        sets=tuple(args.sets),
        seeds=tuple(args.seeds or (0,)),
        model=args.model,
        config_file=args.config,
    )
    return sweep, Resources()


def resources_of(args: argparse.Namespace, base: Resources) -> Resources:
    extra = dict(base.extra)
    for item in args.sbatch:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--sbatch {item!r} must look like NAME=VALUE (e.g. qos=high)")
        extra[name.lstrip("-")] = value
    return base.with_overrides(
        gpus=args.gpus,
        cpus=args.cpus,
        mem=args.mem,
        time=args.time,
        partition=args.partition,
        account=args.account,
        extra=tuple(extra.items()),
    )


def run_command(args: argparse.Namespace) -> int:
    if args.task == "status":
        from aot.sweep.launch.status import status_text

        print(status_text(Path(args.folder or args.out)))
        return 0
    if args.folder:
        raise ConfigError(f"unexpected argument {args.folder!r}; only `aot sweep status OUT` takes a folder")
    study, base = study_of(args)
    resources = resources_of(args, base)
    if args.plan:
        return print_plan(study, Path(args.out), CostModel(args.gpu_type, args.mfu), resources)
    if args.launcher == "slurm":
        from aot.sweep.launch.slurm import SlurmLaunch, launch_slurm

        launch_slurm(study, SlurmLaunch(Path(args.out), resources, args.device), wait=args.wait)
        if args.wait:
            print(study.markdown(read_store(Path(args.out) / STORE_FILE)), end="")
        print(f"status: aot sweep status {args.out}")
        return 0
    from aot.sweep.launch.local import TABLE_FILE, run_local

    store = run_local(study, args.out, args.device)
    print(study.markdown(store), end="")
    print(f"wrote {Path(args.out) / STORE_FILE} and {Path(args.out) / TABLE_FILE}")
    return 0


def print_plan(study: Study, out: Path, cost: CostModel, resources: Resources) -> int:
    """One line per run: done, to run or waiting for others, with its training FLOPs and GPU-hours; the totals."""
    from aot.sweep.training import finished_results

    study.check()
    execution = study.execution(out)
    store = read_store(execution.store)
    recorded = {r["key"] for r in store["runs"]}
    plan = study.plan(store)
    total_flops, unknown, todo = 0.0, 0, 0
    for status, trials in (("run", plan.runs), ("waiting", plan.pending)):
        for trial in trials:
            done = trial.key in recorded or finished_results(trial.folder(execution.runs)) is not None
            flops = (
                None if done else run_flops(trial.task, trial.build(), start_step(branch_parent(trial, execution.runs)))
            )
            if not done:
                todo += 1
                total_flops += flops or 0.0
                unknown += flops is None
            figure = (
                ""
                if done
                else ("  FLOPs —" if flops is None else f"  {flops:.3g} FLOPs, {cost.gpu_hours(flops):.3g} GPU-h")
            )
            print(f"{'done' if done else status:8s} {trial.describe()}{figure}")
    print(f"{len(plan.runs) + len(plan.pending)} runs, {todo} to train: {total_flops:.3g} FLOPs, "
          f"{cost.gpu_hours(total_flops):.3g} GPU-hours on {cost.describe()}"
          + (f" ({unknown} runs without an analytic count left out)" if unknown else "")
          + (f"; {resources.gpus} GPU(s) per run" if resources.gpus else ""))  # fmt: skip
    if plan.pending:
        print("(waiting runs are listed at the lr known now; an lr sweep extended at an edge may add runs)")
    return 0
