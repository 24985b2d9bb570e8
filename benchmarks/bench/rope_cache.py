"""A/B of the rotary tables: recomputed in float64 in every layer on every call (the code before
2026-11-30) against cached per device and dtype (:meth:`aot.nn.rotary.Rotary.tables`), with MSSA's Q = K
rotated once. Same model, same process, interleaved rounds (order reversed every other round); median step time.

    flock /tmp/aot-cpu.lock env PYTHONPATH=src python benchmarks/bench/rope_cache.py [--rounds 6]

Writes benchmarks/bench/rope_cache.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import aot.nn.attention as attention
from aot import build_model, preset_config
from aot.nn.rotary import Rotary
from aot.runinfo import machine_info


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


VARIANTS = {
    "recomputed": (recomputed_forward, rope_twice),
    "cached": (Rotary.forward, attention._AttentionCore._rope),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default=str(Path(__file__).with_name("rope_cache.json")))
    args = parser.parse_args()
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
            for name in list(VARIANTS)[:: 1 if r % 2 == 0 else -1]:
                Rotary.forward, attention._AttentionCore._rope = VARIANTS[name]  # type: ignore[method-assign]
                step()
                start = time.perf_counter()
                for _ in range(3):
                    step()
                times[name].append((time.perf_counter() - start) / 3)
        Rotary.forward, attention._AttentionCore._rope = VARIANTS["cached"]  # type: ignore[method-assign]
        medians = {name: statistics.median(v) for name, v in times.items()}
        rows.append(
            dict(
                model=f"{preset} {layers} layers, rope",
                step_seconds=medians,
                speedup=medians["recomputed"] / medians["cached"],
            )
        )
        print(f"{rows[-1]['model']}: {medians} -> {rows[-1]['speedup']:.2f}x")
    record = dict(
        what="training step (AdamW), T=128, batch 16, fp32; median of interleaved rounds",
        machine=machine_info(),
        rows=rows,
    )
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
