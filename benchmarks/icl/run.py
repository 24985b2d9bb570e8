"""In-context linear and sparse regression (Garg et al. 2022): AoT-MSSA, AoT-MHSA, GPT-2 (`transformer`), Llama,
causal linear attention and Mamba at matched parameters (~0.4M, width 128) and the same steps.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/icl/run.py --lock /tmp/aot-cpu.lock

Every run goes through `aot.tasks.run_task` (the code behind `aot train icl`; planned and recorded by
`aot.sweep`) from preset cpu-quick (d = 5, 11 points, curriculum from 2 dims / 5 points, +1 dim / +2 points every
100 steps) with the overrides below; runs checkpoint every 100 steps and an interrupted script continues them
exactly when run again (finished runs are reused). After each task the runs are evaluated together with
`aot.eval.icl_runs.evaluate_runs` (the code behind `aot eval icl`) on 1,000 held-out prompts:
benchmarks/icl/<tag>-<task>.json and .png, and table.md is rewritten. results.json records the command of every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from aot.bench.lock import cpu_lock
from aot.eval.icl_runs import evaluate_runs, plot_curves
from aot.run_folder import write_text_atomic
from aot.sweep import Execution, SweepSpec
from aot.sweep.training import build_run, finished_results
from aot.tasks import TaskRun

HERE = Path(__file__).resolve().parent
MODELS = [
    "aot-mhsa-icl-cpu",
    "gpt2-icl-cpu",
    "aot-mssa-icl-cpu",
    "llama-icl-cpu",
    "linear-attn-icl-cpu",
    "mamba-icl-cpu",
]
TASKS = {"linear": [], "sparse": ["data.sparsity=2"]}
SPEC = SweepSpec(task="icl")  # the rows' presets and steps vary by tag: each row's command names them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument(
        "--recipe",
        dest="preset",
        default="cpu-quick",
        help="ICL training recipe: cpu-quick (d = 5) or cpu-bench (d = 10)",
    )
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps of 64 prompts (default 1000)")
    parser.add_argument("--set", action="append", default=[], help="override for every run, e.g. model.position=rope")
    parser.add_argument("--tag", default="main")
    parser.add_argument("--runs", default="runs/bench-icl", help="folder for the individual runs")
    parser.add_argument("--prompts", type=int, default=1000, help="held-out prompts of the final evaluation")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the finished runs only (train none)")
    parser.add_argument("--lock", metavar="FILE", help="hold this flock(1)-style lock around each task's runs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    store_path = HERE / "results.json"
    for task in args.tasks:
        with cpu_lock(args.lock):  # one task's runs back to back (the queue for the lock is not first-come)
            run_task(args, task, store_path)
        write_table(HERE)
    return 0


@dataclass(frozen=True)
class Run:
    """One training run: ``model`` on ``task`` (linear or sparse regression) from the ICL ``preset``."""

    tag: str
    regression: str
    model: str
    preset: str
    sets: tuple[str, ...]
    task = "icl"

    @property
    def key(self) -> str:
        return f"{self.tag}/{self.regression}/{self.model}"

    def folder(self, runs: Path) -> Path:
        return runs / f"{self.tag}-{self.regression}-{self.model}"

    def build(self) -> TaskRun:
        return build_run("icl", self.preset, list(self.sets), self.model)

    def describe(self) -> str:
        return f"{time.strftime('%H:%M:%S')} {self.tag} {self.regression} {self.model}"

    def command(self, runs: Path) -> str:
        """The `aot train icl` command of this run (recorded in its row)."""
        sets = " ".join(f"--set {s}" for s in self.sets)
        return f"aot train icl --recipe {self.preset} --model {self.model} --out {self.folder(runs)} --resume {sets}"


def plan_runs(args: argparse.Namespace, regression: str) -> list[Run]:
    """Every model on ``regression`` with the benchmark's overrides and the command line's."""
    sets = (
        f"train.steps={args.steps}",
        "train.progress=false",
        "train.checkpoint_every=100",
        "train.eval_every=250",
        "data.curriculum_interval=100",
        f"data.task={regression}",
        *TASKS[regression],
        *args.set,
    )
    return [Run(args.tag, regression, model, args.preset, sets) for model in args.models]


def entry(run: Run, result: dict, folder: Path) -> dict:
    """A results.json row: the run's command, model, training and held-out errors (the curve lives in
    <tag>-<task>.json)."""
    return {
        "command": run.command(folder.parent),
        "model": result["model"],
        "train": {k: result["train"][k] for k in ("steps", "prompts", "train_seconds", "final_train_loss")},
        "eval": {k: v for k, v in result["eval"].items() if k != "error_by_k"},
    }


def run_task(args: argparse.Namespace, regression: str, store_path: Path) -> None:
    """Train every model on ``regression`` (or reuse its finished run), then evaluate them together."""
    run_dirs, labels = [], []
    runs = Path(args.runs)
    # keep_recorded=False: the evaluation below reads every run's folder, so a recorded run without one trains again
    log = lambda line: print(line, flush=True)  # noqa: E731
    execution = Execution(runs, store_path, entry, SPEC, "cpu", log=log, keep_recorded=False)
    for run in plan_runs(args, regression):
        if args.eval_only and finished_results(run.folder(runs)) is None:
            continue
        execution.run_trial(run)
        run_dirs.append(run.folder(runs))
        labels.append(run.model)
    if not run_dirs:
        return
    print(f"== {time.strftime('%H:%M:%S')} evaluating {regression}", flush=True)
    curves = evaluate_runs(run_dirs, n_prompts=args.prompts, labels=labels)
    curves["command"] = f"aot eval icl {' '.join(str(d) for d in run_dirs)} --labels {','.join(labels)}"
    write_text_atomic(HERE / f"{args.tag}-{regression}.json", json.dumps(curves, indent=2) + "\n")
    plot_curves(curves, HERE / f"{args.tag}-{regression}.png")


def write_table(folder: Path) -> None:
    """table.md: the normalised error at k = d/2, d, 2d of every curve of every evaluated task."""
    lines = []
    for path in sorted(folder.glob("*-*.json")):
        if path.name == "results.json":
            continue
        res = json.loads(path.read_text())
        d = res["data"]["n_dims"]
        lines += [
            f"### {path.stem}: {res['data']['task']} regression, d = {d}, {res['n_prompts']} held-out prompts",
            "",
            f"| curve | params | steps | train s | k = {d // 2} | k = d = {d} | k = 2d = {2 * d} |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, curve in res["curves"].items():
            at = curve["at"]
            model = curve.get("model", {})
            train = curve.get("train", {})
            params = f"{model['params'] / 1e6:.2f}M" if model else "—"
            cells = " | ".join(f"{at[k]:.3f}" if k in at else "—" for k in ("k=d/2", "k=d", "k=2d"))
            steps = train.get("steps", "—")
            seconds = f"{train['train_seconds']:.0f}" if "train_seconds" in train else "—"
            lines.append(f"| {name} | {params} | {steps} | {seconds} | {cells} |")
        lines.append("")
    write_text_atomic(folder / "table.md", "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
