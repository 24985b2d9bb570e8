"""Zero-shot evaluation of the language benchmark's own models: for each model of a `benchmarks/lm` tag, the run at
its best learning rate (lowest val loss at seed 0, as `benchmarks/lm/run.py` picks it) goes through `aot eval lm
--task austen`; writes DIR/results.json, results.md and table.md (default DIR: benchmarks/zeroshot/lm-bench-TAG).

    PYTHONPATH=src python benchmarks/zeroshot/lm_bench.py --tag rope --tokenizer bytes

The run folders (runs/bench-lm/..., with their checkpoints) must still exist on this machine: the checkpoints are
not committed; `benchmarks/lm/run.py` with the row's command retrains one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from aot.cli import main as aot_main
from aot.sweep import best_row, read_store, store_spec
from aot.sweep.training import finished_results

HERE = Path(__file__).resolve().parent
LM_RESULTS = HERE.parent / "lm" / "results.json"
MODELS = ["gpt2-cpu", "aot-mhsa-l-cpu", "aot-mssa-l-cpu", "aot-mssa-tied-l-cpu"]


def best_run_folders(store: dict, tag: str, tokenizer: str, runs: Path, models: list[str]) -> list[Path]:
    """The folder (under ``runs``) of each model's seed-0 run at its best lr in ``tag`` (the sweep's own choice,
    by the metric the store declares); models without rows are left out."""
    metric = store_spec(store).metric
    rows = [r for r in store["runs"] if r["tag"] == tag and r["tokenizer"] == tokenizer and r["seed"] == 0]
    folders = []
    for model in models:
        best = best_row([r for r in rows if r["model"] == model], metric)
        if best is not None:
            folders.append(runs / Path(best["run_dir"]).name)
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", default="rope", help="benchmarks/lm tag whose models are evaluated")
    parser.add_argument("--tokenizer", default="bytes")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--runs", default="runs/bench-lm", help="where benchmarks/lm/run.py wrote the runs")
    parser.add_argument("--out", help="output folder (default benchmarks/zeroshot/lm-bench-TAG)")
    args = parser.parse_args(argv)
    folders = best_run_folders(read_store(LM_RESULTS), args.tag, args.tokenizer, Path(args.runs), args.models)
    missing = [str(f) for f in folders if finished_results(f) is None]
    if not folders or missing:
        raise SystemExit(f"lm_bench.py: error: no finished runs of tag {args.tag!r} here ({', '.join(missing)})")
    out = Path(args.out or HERE / f"lm-bench-{args.tag}")
    code = aot_main(["eval", "lm", *map(str, folders), "--task", "austen", "--out", str(out)])
    if code == 0:  # the table, by its own script (benchmarks/zeroshot/table.py)
        code = subprocess.run([sys.executable, str(HERE / "table.py"), str(out)], check=False).returncode
    return code


if __name__ == "__main__":
    sys.exit(main())
