"""In-context linear and sparse regression (Garg et al. 2022): AoT-MSSA, AoT-MHSA, GPT-2 (`transformer`), Llama,
causal linear attention and Mamba at matched parameters (~0.4M, width 128) and the same steps.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/icl/run.py --lock /tmp/aot-cpu.lock

Every run goes through `aot.train.icl_task.train_icl` (the code behind `aot train icl`) from preset cpu-quick
(d = 5, 11 points, curriculum from 2 dims / 5 points, +1 dim / +2 points every 100 steps) with the overrides
below; runs checkpoint every 100 steps and an interrupted script continues them exactly when run again
(finished runs are reused). After each task the runs are evaluated together with
`aot.eval.icl_runs.evaluate_runs` (the code behind `aot eval icl`) on 1,000 held-out prompts:
benchmarks/icl/<tag>-<task>.json and .png, and table.md is rewritten. results.json records the command of every run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from aot.train.icl_task import build_run_config, train_icl

from aot.bench.lock import cpu_lock
from aot.eval.icl_runs import evaluate_runs, plot_curves
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--preset", default="cpu-quick", help="ICL run preset: cpu-quick (d = 5) or cpu-bench (d = 10)")
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps of 64 prompts (default 1000)")
    parser.add_argument("--set", action="append", default=[], help="override for every run, e.g. model.position=rope")
    parser.add_argument("--tag", default="main")
    parser.add_argument("--runs", default="runs/bench-icl", help="folder for the individual runs")
    parser.add_argument("--prompts", type=int, default=1000, help="held-out prompts of the final evaluation")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the finished runs only (train none)")
    parser.add_argument("--lock", metavar="FILE", help="hold this flock(1)-style lock around each task's runs")
    args = parser.parse_args(argv)
    store_path = HERE / "results.json"
    for task in args.tasks:
        with cpu_lock(args.lock):  # one task's runs back to back (the queue for the lock is not first-come)
            run_task(args, task, store_path)
        write_table(HERE)
    return 0


def record_run(store_path: Path, key: str, entry: dict) -> None:
    """Add one run's entry to results.json, re-read just before writing (several lanes of this script may run
    at once, each on its own models) and replaced in one step (never a half-written file)."""
    store = json.loads(store_path.read_text()) if store_path.is_file() else {"machine": machine_info(), "runs": {}}
    store["runs"][key] = entry
    write_text_atomic(store_path, json.dumps(store, indent=2) + "\n")


def run_task(args: argparse.Namespace, task: str, store_path: Path) -> None:
    """Train every model on ``task`` (or reuse its finished run), then evaluate them together."""
    run_dirs, labels = [], []
    for model in args.models:
        sets = [
            f"train.steps={args.steps}",
            "train.progress=false",
            "train.checkpoint_every=100",
            "train.eval_every=250",
            "data.curriculum_interval=100",
            f"data.task={task}",
            *TASKS[task],
            *args.set,
        ]
        out = Path(args.runs) / f"{args.tag}-{task}-{model}"
        if args.eval_only and not (out / "results.json").is_file():
            continue
        command = f"aot train icl --preset {args.preset} --model {model} --out {out} --resume " + " ".join(
            f"--set {s}" for s in sets
        )
        if not (out / "results.json").is_file():
            run = build_run_config(args.preset, sets=sets, model_preset=model)
            print(f"== {time.strftime('%H:%M:%S')} {args.tag} {task} {model}", flush=True)
            train_icl(run, out, "cpu", resume="auto")
        result = json.loads((out / "results.json").read_text())
        entry = {
            "command": command,
            "model": result["model"],
            "train": {k: result["train"][k] for k in ("steps", "prompts", "train_seconds", "final_train_loss")},
            "eval": {k: v for k, v in result["eval"].items() if k != "error_by_k"},
        }
        record_run(store_path, f"{args.tag}/{task}/{model}", entry)
        run_dirs.append(out)
        labels.append(model)
    if not run_dirs:
        return
    print(f"== {time.strftime('%H:%M:%S')} evaluating {task}", flush=True)
    curves = evaluate_runs(run_dirs, n_prompts=args.prompts, labels=labels)
    curves["command"] = f"aot eval icl {' '.join(str(d) for d in run_dirs)} --labels {','.join(labels)}"
    (HERE / f"{args.tag}-{task}.json").write_text(json.dumps(curves, indent=2) + "\n")
    plot_curves(curves, HERE / f"{args.tag}-{task}.png")


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
    (folder / "table.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
