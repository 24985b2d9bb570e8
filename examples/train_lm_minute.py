"""Build an AoT-MSSA language model and train it for about a minute on Shakespeare's bytes.

    python examples/train_lm_minute.py            # fetches Shakespeare once, ~1 min on 2 cores, writes runs/example-lm
    python examples/train_lm_minute.py --tiny     # a few steps on a small local text (what the test suite runs)

The same run from the command line: `aot train lm --model aot-mssa-l-cpu --set model.n_layer=8 --steps 120`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aot.tasks import get_task, run_task

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sonnets.txt"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="5 steps of a 2-layer model on a small local text")
    parser.add_argument("--out", default="runs/example-lm")
    args = parser.parse_args(argv)

    sets = [
        "model.n_layer=2" if args.tiny else "model.n_layer=8",  # AoT-MSSA with a learned W_O, d = 256
        f"train.steps={5 if args.tiny else 120}",
        "train.warmup_steps=2" if args.tiny else "train.warmup_steps=20",
        "train.lr=2e-3",
        "train.progress=false" if args.tiny else "train.progress=true",
        "eval.final_windows=8",
    ]
    if args.tiny:
        sets.append(f"data.corpus={FIXTURE}")
    lm = get_task("lm")
    run = lm.build_run("cpu-quick", model_preset="aot-mssa-l-cpu", sets=sets)
    results = run_task(lm, run, args.out, resume="auto")  # a second run reports the first (or finishes it)
    print(f"val loss {results['val']['loss']:.3f} nats/token after {results['train']['tokens']:,} tokens")
    return results


if __name__ == "__main__":
    main()
