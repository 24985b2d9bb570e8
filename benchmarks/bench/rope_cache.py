"""A/B of the rotary tables: recomputed in float64 in every layer on every call (the code before
2026-11-30) against cached per device and dtype (:meth:`aot.nn.rotary.Rotary.tables`), with MSSA's Q = K
rotated once. Same model, same process, interleaved rounds (order reversed every other round); median step time.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench/rope_cache.py [--rounds 4] [--note TEXT]

Writes benchmarks/bench/rope_cache.json and rope_cache.md through `aot.bench.record` (``--markdown-only``: the
table from the JSON). The recomputed variant is patched into the public classes for the time of its steps.
About 1.5 CPU-minutes with one thread.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from typing import Any
from unittest import mock

import torch

from aot import build_model, preset_config
from aot.bench.record import RecordedBenchmark, count, run_recorded
from aot.nn.attention import MultiHeadSelfAttention, MultiHeadSubspaceSelfAttention
from aot.nn.rotary import Rotary
from aot.runinfo import timing_header


def recomputed_forward(self: Rotary, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
    """The rotation as it was: cos / sin recomputed in float64 on every call."""
    T = x.shape[-2]
    pos = torch.arange(offset, offset + T, device=x.device, dtype=torch.float64)
    angles = torch.outer(pos, self.inv_freq.to(x.device))
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1).to(x.dtype)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1).to(x.dtype)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def rope_twice(self, q, k, q_offset):  # type: ignore[no-untyped-def]
    return self.rotary(q, offset=q_offset), self.rotary(k, offset=0)


VARIANTS = ("recomputed", "cached")
#: what the recomputed variant patches (the cached one is the classes' own code)
RECOMPUTED = (
    (Rotary, "forward", recomputed_forward),
    (MultiHeadSubspaceSelfAttention, "rotate", rope_twice),
    (MultiHeadSelfAttention, "rotate", rope_twice),
)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=count, default=2, help="timed training steps per round (default: 2)")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    rows = []
    for preset, layers in (("aot-mssa-tied-l-cpu", 8), ("llama-l-cpu", 6)):
        cfg = preset_config(preset, n_layer=layers, position="rope", block_size=128)
        model = build_model(cfg)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        idx = torch.randint(0, cfg.vocab_size, (16, 128))

        def step(model=model, optimizer=optimizer, idx=idx) -> None:  # type: ignore[no-untyped-def]
            logits, _ = model(idx)
            logits.float().logsumexp(-1).mean().backward()
            optimizer.step()
            optimizer.zero_grad()

        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for r in range(args.rounds):
            for name in VARIANTS[:: 1 if r % 2 == 0 else -1]:
                with contextlib.ExitStack() as patches:
                    for cls, method, function in RECOMPUTED if name == "recomputed" else ():
                        patches.enter_context(mock.patch.object(cls, method, function))
                    step()
                    start = time.perf_counter()
                    for _ in range(args.steps):
                        step()
                    times[name].append((time.perf_counter() - start) / args.steps)
        medians = {name: statistics.median(v) for name, v in times.items()}
        rows.append(
            dict(
                model=f"{preset} {layers} layers, rope",
                step_seconds=medians,
                speedup=medians["recomputed"] / medians["cached"],
            )
        )
        print(f"{rows[-1]['model']}: {medians} -> {rows[-1]['speedup']:.2f}x")
    return dict(
        what=(
            f"training step (AdamW), T=128, batch 16, fp32; per round one warm-up step and the mean of {args.steps} "
            f"timed steps; median over {args.rounds} interleaved rounds (order reversed every other round)"
        ),
        rows=rows,
    )


def markdown(record: dict) -> str:
    lines = [
        "# Rotary tables: recomputed on every call against cached",
        "",
        timing_header(record),
        "",
        record["what"] + ".",
        "",
        record["note"],
        "",
        "| model | recomputed s/step | cached s/step | speed-up |",
        "|---|---|---|---|",
    ]
    for r in record["rows"]:
        t = r["step_seconds"]
        lines.append(f"| {r['model']} | {t['recomputed']:.3f} | {t['cached']:.3f} | {r['speedup']:.2f}× |")
    return "\n".join(lines) + "\n"


BENCH = RecordedBenchmark(__file__, __doc__, measure, markdown, options=add_options)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
