"""Which position scheme lets an attention-only block look *past itself*? Two synthetic probes, seconds each.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/lm/position_probe.py        # ~5 CPU-minutes

- ``previous``: random tokens; at position t predict the token at t - 1 (a previous-token head).
- ``copy``: a random half of H tokens followed by the same H tokens; in the second half predict the next
  token, which sits H - 1 positions back (an induction-style look-up at a fixed offset).

Each probe trains a 2-layer model (width 64, 4 heads, LayerNorm, vocabulary 16, context 2H = 32) with AdamW
(lr 3e-3, 1,000 steps of 32 sequences) for AoT-MSSA (tied output) and AoT-MHSA, with learned absolute and
with rotary positions, over seeds; it scores the accuracy on 256 fresh sequences (chance 1/16).

Why it matters (docs/math.md, "Positions and the self-score bound"): an MSSA head scores keys with the same
projection as queries, s_ij = <R_i P_i, R_j P_j>, and by Cauchy-Schwarz s_ij <= |P_i| |P_j| <= s_ii whenever
|P_j| <= |P_i|. Rotary positions are rotations, so they keep every |P_j|: a rotary MSSA head can never give
another token more weight than the token itself unless that token's projection is longer. Learned absolute
positions change |P_j| with the position, so they can. MHSA has separate W_Q, W_K and no such bound.
Writes position_probe.json and position_probe.md beside this file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from aot.config import ModelConfig
from aot.models.factory import build_model
from aot.runinfo import machine_info

HERE = Path(__file__).resolve().parent
VOCAB, HALF = 16, 16


def batch(task: str, n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(idx, positions scored, targets) for one batch of a probe."""
    if task == "previous":
        idx = torch.randint(0, VOCAB, (n, 2 * HALF), generator=gen)
        return idx, torch.arange(1, 2 * HALF), idx[:, :-1]
    first = torch.randint(0, VOCAB, (n, HALF), generator=gen)
    idx = torch.cat([first, first], 1)
    return idx, torch.arange(HALF, 2 * HALF - 1), idx[:, HALF + 1 :]


def train_probe(task: str, block: str, position: str, seed: int, steps: int) -> dict:
    torch.manual_seed(seed)
    cfg = ModelConfig(
        block=block, n_layer=2, n_embd=64, n_head=4, norm="layernorm", position=position, task="lm",
        vocab_size=VOCAB, block_size=2 * HALF,
    )  # fmt: skip
    model = build_model(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(steps):
        idx, pos, target = batch(task, 32, gen)
        logits = model(idx)[0][:, pos]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    with torch.no_grad():
        idx, pos, target = batch(task, 256, gen)
        accuracy = (model(idx)[0][:, pos].argmax(-1) == target).float().mean().item()
    return {"task": task, "block": block, "position": position, "seed": seed, "steps": steps,
            "final_train_loss": loss.item(), "accuracy": accuracy,
            "seconds": time.perf_counter() - start}  # fmt: skip


def markdown(store: dict) -> str:
    rows = store["runs"]
    lines = [
        "# Position probe: can a 2-layer block attend past itself?",
        "",
        f"{store['machine']['date']}, {store['machine']['processor']}; `benchmarks/lm/position_probe.py` "
        f"({rows[0]['steps']} steps per run). Accuracy on 256 fresh sequences (chance 0.0625), mean over seeds "
        "(min-max).",
        "",
        "| task | block | learned absolute | rotary |",
        "|---|---|---|---|",
    ]
    for task in ("previous", "copy"):
        for block in ("aot-mssa", "aot-mhsa"):
            cells = []
            for position in ("learned", "rope"):
                acc = [r["accuracy"] for r in rows if (r["task"], r["block"], r["position"]) == (task, block, position)]
                cells.append(f"{statistics.mean(acc):.3f} ({min(acc):.3f}-{max(acc):.3f}, {len(acc)} seeds)")
            lines.append(f"| {task} | {block} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args(argv)
    runs = []
    for task in ("previous", "copy"):
        for block in ("aot-mssa", "aot-mhsa"):
            for position in ("learned", "rope"):
                for seed in args.seeds:
                    runs.append(train_probe(task, block, position, seed, args.steps))
                    print(json.dumps(runs[-1]), flush=True)
    store = {"machine": machine_info(), "runs": runs}
    (HERE / "position_probe.json").write_text(json.dumps(store, indent=2) + "\n")
    (HERE / "position_probe.md").write_text(markdown(store))
    print(markdown(store))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
