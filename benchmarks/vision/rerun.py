"""Do the recorded Fashion-MNIST numbers still hold? Rerun recorded one-epoch runs of results.json with today's code and
put the two side by side in rerun.json.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/vision/rerun.py --presets transformer aot-mssa --seed 0 \
        --runs /tmp/aot-rerun

Each rerun is `aot train vision --recipe R --seed S` (one epoch, the recorded recipe; --presets takes the names the
rows were recorded under, aot-mssa for fashion-mssa, transformer for fashion-vit); a finished run folder under
--runs is read, not trained again. A run equals its record bit for bit only on the same kind of CPU: float kernels
differ between CPUs (an Intel Xeon recorded the rows; a different vector unit sums in another order), so read the
difference against the seed spread recorded beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from aot.cli import main as aot
from aot.run_folder import read_results, write_text_atomic
from aot.runinfo import machine_info

HERE = Path(__file__).resolve().parent


def recorded_rows(preset: str) -> list[dict]:
    """The recorded one-epoch Fashion-MNIST rows of ``preset`` at its current shape (no overrides)."""
    from aot.tasks.vision import VISION_RECIPE_RENAMES, VisionRun

    model = VisionRun.build(VISION_RECIPE_RENAMES.get(preset, preset)).model_config()
    runs = json.loads((HERE / "results.json").read_text())["runs"]
    return [
        r
        for r in runs
        if r["tag"] == "main"
        and r["data"] == "fashion-mnist"
        and r["preset"] == preset
        and not r["overrides"]
        and (r["n_layer"], r["n_embd"]) == (model.n_layer, model.n_embd)
        and 0.9 < r["epochs"] < 1.1
    ]


def rerun(preset: str, seed: int, runs: Path) -> dict:
    out = runs / f"{preset}-s{seed}"
    if read_results(out) is None:
        from aot.tasks.vision import VISION_RECIPE_RENAMES

        recipe = VISION_RECIPE_RENAMES.get(preset, preset)  # the rows keep the name they were recorded under
        argv = ["train", "vision", "--recipe", recipe, "--seed", str(seed), "--set", "train.progress=false"]
        assert aot([*argv, "--out", str(out), "--force"]) == 0, f"the rerun of {preset} failed"
    results = read_results(out)
    assert results is not None
    return {"test_top1": results["test"]["top1"], "test_loss": results["test"]["loss"], "machine": results["machine"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["transformer", "aot-mssa"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", type=Path, default=Path("runs/bench-vision-rerun"))
    args = parser.parse_args()
    rows = []
    for preset in args.presets:
        recorded = recorded_rows(preset)
        same_seed = [r for r in recorded if r["seed"] == args.seed]
        if not same_seed:
            raise SystemExit(f"no recorded one-epoch row of {preset} with seed {args.seed}")
        new = rerun(preset, args.seed, args.runs)
        top1s = [r["test_top1"] for r in recorded]
        rows.append(
            {
                "preset": preset,
                "seed": args.seed,
                "recorded": {k: same_seed[0][k] for k in ("test_top1", "test_loss", "date")},
                "recorded_seeds_top1": top1s,
                "recorded_sd_top1": statistics.stdev(top1s) if len(top1s) > 1 else None,
                "rerun": new,
                "difference_points": 100 * (new["test_top1"] - same_seed[0]["test_top1"]),
            }
        )
    record = {"machine": machine_info(), "rows": rows}
    write_text_atomic(HERE / "rerun.json", json.dumps(record, indent=2) + "\n")
    for row in rows:
        print(
            f"{row['preset']} seed {row['seed']}: recorded {100 * row['recorded']['test_top1']:.2f} %, "
            f"rerun {100 * row['rerun']['test_top1']:.2f} % ({row['difference_points']:+.2f} points; "
            f"recorded seed sd {100 * (row['recorded_sd_top1'] or 0):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
