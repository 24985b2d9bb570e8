"""Benchmark two blocks side by side: AoT-MSSA against GPT-2 at the same width and depth.

    python examples/bench_two_blocks.py           # d = 256, 6 layers, T = 256, batch 16, fp32
    python examples/bench_two_blocks.py --tiny    # 1 layer, T = 32 (what the test suite runs)

FLOPs per token come from the analytic count (equal to torch's flop_counter), MFU from a matmul peak measured
in the same process. The full comparison of every block, with memory, scaling and decoding: `aot bench`.
"""

from __future__ import annotations

import argparse

import torch

from aot import build_model, preset_config
from aot.bench import flops_per_token, mfu, peak_flops
from aot.bench.timing import median_seconds


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    n_layer, seq_len, batch = (1, 32, 2) if args.tiny else (6, 256, 16)

    peak = peak_flops("cpu", torch.float32)
    rows = {}
    for name in ("aot-mssa-tied-l-cpu", "gpt2-cpu"):
        cfg = preset_config(name, n_layer=n_layer, block_size=seq_len)
        model = build_model(cfg)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        idx = torch.randint(0, cfg.vocab_size, (batch, seq_len))

        def train_step(model=model, optimizer=optimizer, idx=idx) -> None:
            _, loss = model(idx, labels=idx)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        seconds = median_seconds(train_step, warmup=1, repeat=2 if args.tiny else 5)
        tokens_per_s = batch * seq_len / seconds
        flops = flops_per_token(cfg, seq_len).training()
        rows[name] = dict(tokens_per_s=tokens_per_s, flops_per_token=flops, mfu=mfu(flops, tokens_per_s, peak))
        print(
            f"{name:20s} {n_layer} layers: {tokens_per_s:9,.0f} tok/s, {flops / 1e6:6.2f} MFLOP/token, "
            f"MFU {100 * rows[name]['mfu']:.1f} % of {peak / 1e9:.0f} GFLOP/s"
        )
    speedup = rows["aot-mssa-tied-l-cpu"]["tokens_per_s"] / rows["gpt2-cpu"]["tokens_per_s"]
    print(f"AoT-MSSA trains {speedup:.2f}x GPT-2's tokens/s at the same width and depth")
    return rows


if __name__ == "__main__":
    main()
