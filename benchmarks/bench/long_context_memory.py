"""Training memory at long context: peak memory of one training step of AoT-MSSA (tied), AoT-MHSA and GPT-2 at
the CPU bench width (6 layers, d = 256, 4 heads, byte vocabulary), batch 1, T = 1024 … 8192, fp32.

Each figure is :func:`aot.bench.timing.peak_training_memory` with ``steps=1``: a fresh subprocess's peak
resident set size over one step (forward, backward, AdamW update: weights, gradients, activations, optimizer
state, allocator slack) minus its RSS before the model was built. The attention is PyTorch's fused SDPA
kernel, which never holds the T × T scores, so the peak grows linearly in T. *Fits 16 GiB up to* is a
straight line through the two longest contexts measured, extended to 16 GiB: an extrapolation of memory
only, labelled so (the step's time grows with T², so such lengths are far out of a CPU's reach anyway).

Section ``generate`` (:func:`aot.bench.timing.peak_generation_memory`): a cached greedy generation of 16
tokens after a T-token prompt, its peak measured the same way, and the exact bytes of the cache after the
prompt: MSSA caches one tensor per layer (P = U_kᵀ z), MHSA and GPT-2 two (K and V), so MSSA's cache is half.

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench/long_context_memory.py [--sections train generate]

About 3 CPU-minutes at the defaults (mostly starting the subprocesses); writes long_context_memory.json and
.md beside this script (``--markdown-only``: the tables from the JSON).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from aot.bench.record import RecordedBenchmark, count, run_recorded
from aot.bench.timing import peak_generation_memory, peak_training_memory
from aot.config import ModelConfig
from aot.runinfo import timing_header

SECTIONS = ("train", "generate")
SETUP = (
    "6 layers, d = 256, 4 heads, vocab 256 (AoT-MSSA tied; AoT-MHSA; GPT-2 with its MLP), batch 1, fp32. train: "
    "peak RSS of one training step (forward, backward, AdamW) in a fresh process, minus its RSS before the model "
    "was built; fits 16 GiB: the line through the two longest T, extended (an extrapolation). generate: the same "
    "for a cached greedy generation of {n_new} tokens after a T-token prompt (prefill + decoding; generate sizes "
    "the cache once for prompt + new tokens; the prefill's activations dominate the peak, and RSS includes the "
    "allocator's slack, so read peaks to ±20 MiB), and the bytes of the cache's filled entries after the prompt "
    "(exact)."
)
GIB = 1024**3
MODELS: dict[str, dict[str, Any]] = {
    "AoT-MSSA (tied)": dict(block="aot-mssa", tied_output=True),
    "AoT-MHSA": dict(block="aot-mhsa"),
    "GPT-2": dict(block="transformer", activation="gelu_tanh"),
}


def config(options: dict[str, Any], seq_len: int) -> ModelConfig:
    return ModelConfig(n_layer=6, n_embd=256, n_head=4, vocab_size=256, block_size=seq_len, dropout=0.0, **options)


def fits_up_to(points: list[tuple[int, int]], budget: int = 16 * GIB) -> int | None:
    """The T at which the line through the two longest (T, peak bytes) points reaches ``budget``."""
    if len(points) < 2:
        return None
    (t0, m0), (t1, m1) = sorted(points)[-2:]
    slope = (m1 - m0) / (t1 - t0)
    return None if slope <= 0 else int(t1 + (budget - m1) / slope)


def markdown(record: dict[str, Any]) -> str:
    train = [r for r in record["rows"] if r.get("kind", "train") == "train"]
    seq_lens = sorted({r["T"] for r in train})
    lines = [
        "# Training memory at long context (one step, batch 1, fp32)",
        "",
        timing_header(record),
        "",
        record["setup"],
        "",
        record["note"],
        "",
        "## Training: peak MiB of one step (KiB per token)",
        "",
        "| model | " + " | ".join(f"T = {T}" for T in seq_lens) + " | fits 16 GiB up to (extrapolated) |",
        "|---|" + "---|" * (len(seq_lens) + 1),
    ]
    for name in dict.fromkeys(r["model"] for r in train):
        by_t = {r["T"]: r for r in train if r["model"] == name}
        cells = [
            f"{by_t[T]['peak_bytes'] / 2**20:,.0f} ({by_t[T]['peak_bytes'] / T / 1024:.0f})" if T in by_t else "—"
            for T in seq_lens
        ]
        fit = record["fits_16_gib"].get(name)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'—' if fit is None else f'T ≈ {fit:,}'} |")
    generate = [r for r in record["rows"] if r.get("kind") == "generate"]
    if generate:
        prompts = sorted({r["T"] for r in generate})
        lines += [
            "",
            "## Generation after a T-token prompt: cache MiB (KiB per token) · peak MiB",
            "",
            "| model | " + " | ".join(f"T = {T}" for T in prompts) + " |",
            "|---|" + "---|" * len(prompts),
        ]
        for name in dict.fromkeys(r["model"] for r in generate):
            by_t = {r["T"]: r for r in generate if r["model"] == name}
            lines.append(
                f"| {name} | "
                + " | ".join(
                    f"{by_t[T]['cache_bytes'] / 2**20:,.0f} ({by_t[T]['cache_bytes'] / T / 1024:.0f}) · "
                    f"{by_t[T]['peak_bytes'] / 2**20:,.0f}"
                    if T in by_t
                    else "—"
                    for T in prompts
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


def measure(section: str, seq_lens: list[int], n_new: int) -> list[dict[str, Any]]:
    rows = []
    for T in sorted(seq_lens):
        for name, options in MODELS.items():
            start = time.perf_counter()
            if section == "train":
                peak = peak_training_memory(config(options, T), batch=1, seq_len=T, steps=1)
            else:
                peak = peak_generation_memory(config(options, T + n_new), batch=1, prompt_len=T, n_new=n_new)
            row = dict(kind=section, model=name, T=T, **peak, seconds=time.perf_counter() - start)
            rows.append(row)
            extra = f", cache {row['cache_bytes'] / 2**20:.0f} MiB" if "cache_bytes" in row else ""
            print(f"{section} {name:16s} T={T:5d}: {row['peak_bytes'] / 2**20:6.0f} MiB{extra}", flush=True)
    return rows


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="what to measure (default: both); the JSON keeps the other section's earlier rows",
    )
    parser.add_argument("--new-tokens", type=count, default=16, help="tokens generated after each prompt (default 16)")


def measure_sections(args: argparse.Namespace) -> dict[str, Any]:
    """The sections asked for, with the recorded rows of the others kept, and how far each model fits 16 GiB."""
    old = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    kept = [r for r in old["rows"] if r.get("kind", "train") not in args.sections]
    rows = kept + [row for section in args.sections for row in measure(section, args.seq_lens, args.new_tokens)]
    train = [r for r in rows if r.get("kind", "train") == "train"]
    return dict(
        setup=SETUP.format(n_new=args.new_tokens),
        sections_measured_now=args.sections,
        rows=rows,
        fits_16_gib={
            name: fits_up_to([(r["T"], r["peak_bytes"]) for r in train if r["model"] == name]) for name in MODELS
        },
    )


BENCH = RecordedBenchmark(__file__, __doc__, measure_sections, markdown, options=add_options, rounds=None)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
