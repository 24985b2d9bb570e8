"""The cost of the safety checks at the cpu-quick size (AoT-MHSA 6 x 256, context 128, batch 16, bytes):
the models' input check (token ids in [0, vocab)) against one forward pass, and the trainer's per-step
non-finite check (isfinite of loss and gradient norm, one .tolist()) against one training step.

    flock /tmp/aot-cpu.lock python benchmarks/checks/run.py   # writes results.json and table.md here

Timings interleave the measured pair in the same process (median of rounds), so machine load shifts both.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from aot.models import build_model, preset_config
from aot.models.inputs import check_token_ids
from aot.runinfo import machine_info

HERE = Path(__file__).parent


def seconds(fn, repeat: int) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def main() -> None:
    torch.manual_seed(0)
    cfg = preset_config("aot-mhsa-l-cpu", n_layer=6, block_size=128, vocab_size=256)
    model = build_model(cfg)
    idx = torch.randint(0, 256, (16, 128))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def forward() -> None:
        with torch.no_grad():
            model(idx)

    def train_step() -> None:
        _, loss = model(idx, idx)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    _, loss = model(idx, idx)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

    def nonfinite_flags() -> None:  # what Trainer.train_step adds per step (the norm is computed for clipping)
        flags = torch.stack([(~(torch.isfinite(loss) & torch.isfinite(norm))).float(), torch.tensor(0.0)])
        flags.tolist()

    forward(), train_step()
    rounds: dict[str, list[float]] = {"forward": [], "id_check": [], "train_step": [], "nonfinite_check": []}
    for _ in range(5):
        rounds["forward"].append(seconds(forward, 2))
        rounds["id_check"].append(seconds(lambda: check_token_ids(idx, 256), 200))
        rounds["train_step"].append(seconds(train_step, 1))
        rounds["nonfinite_check"].append(seconds(nonfinite_flags, 200))
    median = {k: statistics.median(v) for k, v in rounds.items()}
    results = {
        "machine": machine_info(),
        "size": "aot-mhsa-l-cpu, 6 layers, d=256, context 128, batch 16, fp32",
        "seconds": median,
        "id_check_over_forward": median["id_check"] / median["forward"],
        "nonfinite_check_over_train_step": median["nonfinite_check"] / median["train_step"],
    }
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = (
        f"# Cost of the safety checks ({results['machine']['date']}, {results['machine'].get('processor', '')})\n\n"
        f"{results['size']}; medians of 5 interleaved rounds, measured while other jobs shared the CPU.\n\n"
        "| check | its time | against | ratio |\n|---|---|---|---|\n"
        f"| token ids in [0, vocab) (`aot.models.inputs`) | {1e6 * median['id_check']:.1f} µs | forward "
        f"{1e3 * median['forward']:.0f} ms | {100 * results['id_check_over_forward']:.4f} % |\n"
        f"| non-finite loss / gradient flags (`Trainer.train_step`) | {1e6 * median['nonfinite_check']:.1f} µs | "
        f"training step {1e3 * median['train_step']:.0f} ms | "
        f"{100 * results['nonfinite_check_over_train_step']:.4f} % |\n"
    )
    (HERE / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
