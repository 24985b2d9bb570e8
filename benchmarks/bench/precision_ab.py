"""Is the precision `--precision auto` picks never slower than the one it rejects? Whole training steps of
each model in fp32 and under bf16 autocast, timed in the same run, beside the choice `aot train` makes.

    OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench/precision_ab.py [--rounds 4] [--note TEXT]

`auto` decides from one block's forward + backward (:func:`aot.bench.precision.choose_precision`, cached per
machine and shape); this script checks the decision on what it is for: the full training step (embedding,
every block, head, loss, backward, AdamW) at the `aot bench` size (d = 256, 4 heads, T = 256, batch 16,
6 layers), in interleaved rounds whose order flips every other round (medians). Writes
benchmarks/bench/precision_ab.json and precision_ab.md (``--markdown-only``: the table from the JSON).
About 3 CPU-minutes. ``--quick``: a tiny size, seconds (a smoke test, not a record).
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import torch

from aot.bench.precision import BF16_MARGIN, choose_precision
from aot.bench.record import RecordedBenchmark, run_recorded, timed_rounds
from aot.bench.suite import BenchSettings, block_config
from aot.bench.timing import interleaved_timings, make_optimizer, random_tokens, training_step
from aot.models import build_model
from aot.runinfo import timing_header

MODELS = ("AoT-MSSA (tied)", "AoT-MHSA", "GPT-2")  # labels of aot.bench.suite.BLOCKS
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def measure(s: BenchSettings, rounds: int) -> list[dict[str, Any]]:
    """Per model: the choice of `auto`, and the median training-step seconds under each precision."""
    rows = []
    for label in MODELS:
        cfg = block_config(s, label, s.depth)
        choice = choose_precision(cfg, s.batch, s.seq_len)
        torch.manual_seed(0)
        idx = random_tokens(cfg, s.batch, s.seq_len, "cpu")
        steps = []
        for dtype in PRECISIONS.values():
            model = build_model(cfg)
            steps.append([training_step(model, make_optimizer(model), idx, dtype)])
        timings = interleaved_timings(steps, "cpu", rounds=rounds, warmup=1, repeat=s.repeat)
        seconds = {
            name: statistics.median(t for round_ in timing[0] for t in round_)
            for name, timing in zip(PRECISIONS, timings, strict=True)
        }
        rejected = "fp32" if choice.precision == "bf16" else "bf16"
        rows.append(
            dict(
                model=label,
                chosen=choice.precision,
                reason=choice.reason,
                step_seconds=seconds,
                tokens_per_second={k: s.batch * s.seq_len / v for k, v in seconds.items()},
                chosen_over_rejected=seconds[choice.precision] / seconds[rejected],
            )
        )
    return rows


def markdown(record: dict[str, Any]) -> str:
    st = record["settings"]
    lines = [
        "# `--precision auto` against the precision it rejects: whole training steps",
        "",
        timing_header(record),
        "",
        f"d = {st['n_embd']}, {st['n_head']} heads, {st['depth']} layers, T = {st['seq_len']}, batch {st['batch']}; "
        f"medians of {st['rounds']} interleaved rounds x {st['repeat']} steps (`benchmarks/bench/precision_ab.py`). "
        f"`auto` picks bf16 only when one block runs in at most {BF16_MARGIN:.2f}x fp32's time. Note: "
        + (record["note"] or "none"),
        "",
        "| model | auto chose | fp32 step s | bf16 step s | chosen / rejected (step time) |",
        "|---|---|---|---|---|",
    ]
    for r in record["rows"]:
        sec = r["step_seconds"]
        lines.append(
            f"| {r['model']} | {r['chosen']} | {sec['fp32']:.3f} | {sec['bf16']:.3f} | "
            f"{r['chosen_over_rejected']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    s, rounds = BenchSettings.quick() if args.quick else BenchSettings(), timed_rounds(args)
    settings = dict(n_embd=s.n_embd, n_head=s.n_head, depth=s.depth, seq_len=s.seq_len, batch=s.batch,
                    rounds=rounds, repeat=s.repeat)  # fmt: skip
    return {"settings": settings, "rows": measure(s, rounds)}


BENCH = RecordedBenchmark(__file__, __doc__, run, markdown, quick=True)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
