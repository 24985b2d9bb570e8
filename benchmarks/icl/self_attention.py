"""What the attention of trained in-context regressors looks like, layer by layer: is it still averaging?

Two measures per layer on held-out prompts of the run's own task and d (mean over heads and query positions
1 … 2n−1): the total-variation distance of each query's attention from uniform causal attention (0: plain
averaging over the prefix), and the weight on the query's own position beside what uniform attention puts
there. The second tests a suspicion about MSSA: with Q = K = U_kᵀ z and equal projected norms no key scores
higher than the query itself (Cauchy–Schwarz), so attention could stay stuck on the diagonal. Writes
self_attention.json and self_attention.md here.

    PYTHONPATH=src python benchmarks/icl/self_attention.py \
        runs/bench-icl/d10-15k-linear-{aot-mssa,aot-mhsa,gpt2,llama}-icl-cpu
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from aot.analysis.circuits import distance_from_uniform, self_attention_share
from aot.analysis.heads import model_blocks
from aot.data.icl import ICLDataConfig, eval_prompts
from aot.eval.icl_runs import load_run
from aot.runinfo import machine_info

HERE = Path(__file__).resolve().parent


@torch.no_grad()
def layer_self_shares(run_dir: Path, n_prompts: int) -> dict:
    """The run's per-layer self-attention share (mean over heads) on ``n_prompts`` held-out prompts."""
    results, model = load_run(run_dir)
    model.eval()
    prompts = eval_prompts(ICLDataConfig(**results["config"]["data"]), n_prompts)
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(len(model_blocks(model)))]
    _, cache = model.run_with_cache(prompts.xs.float(), prompts.ys.float(), names_filter=names)
    missing = [n for n in names if n not in cache]
    if missing:
        raise SystemExit(f"{run_dir}: no attention pattern at {missing[0]} (a block without softmax attention?)")
    patterns = [cache[n].double() for n in names]
    shares = [self_attention_share(p).mean().item() for p in patterns]
    spread = [distance_from_uniform(p) for p in patterns]
    T = 2 * prompts.xs.shape[1]
    uniform = sum(1.0 / (t + 1) for t in range(1, T)) / (T - 1)  # the diagonal weight of uniform causal attention
    return {
        "run": str(run_dir),
        "block": results["model"]["block"],
        "n_layer": len(names),
        "error_at_2d": results["eval"].get("k=2d"),
        "self_share_by_layer": shares,
        "distance_from_uniform_by_layer": spread,
        "uniform": uniform,
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| run | block | error at k = 2d | self share, layer 1 … L (mean over heads) | uniform | distance from "
        "uniform attention, layer 1 … L |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        shares = " ".join(f"{s:.2f}" for s in r["self_share_by_layer"])
        spread = " ".join(f"{s:.2f}" for s in r["distance_from_uniform_by_layer"])
        error = f"{r['error_at_2d']:.3f}" if r["error_at_2d"] is not None else "—"
        lines.append(f"| {Path(r['run']).name} | {r['block']} | {error} | {shares} | {r['uniform']:.2f} | {spread} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="finished `aot train icl` run folders")
    parser.add_argument("--prompts", type=int, default=500, help="held-out prompts (default 500)")
    args = parser.parse_args(argv)
    rows = [layer_self_shares(run, args.prompts) for run in args.runs]
    record = {"machine": machine_info(), "command": " ".join(["benchmarks/icl/self_attention.py", *sys.argv[1:]])}
    (HERE / "self_attention.json").write_text(json.dumps({**record, "runs": rows}, indent=2) + "\n")
    (HERE / "self_attention.md").write_text(table(rows))
    print(table(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
