"""Eager against ``torch.compile`` for a training step, ours beside HuggingFace's GPT-2 in both modes: does
compilation close AoT-MSSA's element-wise gap (a third of its eager step on this CPU), and is our GPT-2 still
level with HF's when both are compiled?

    OMP_NUM_THREADS=2 PYTHONPATH=src python benchmarks/bench/compiled.py [--rounds 4] [--note TEXT]

Models at the `aot bench` size (d = 256, 4 heads, T = 256, batch 16, vocabulary 256, fp32): AoT-MSSA (tied) and
our GPT-2 at 6 layers (matched width and depth), and HF's GPT2LMHeadModel on our GPT-2's config (``aot[hf]``;
skipped without it). Each model is timed eager and compiled (inductor, default mode) in the same process,
in interleaved rounds whose order flips every other round; figures are medians over rounds. Compilation
time is recorded separately (the first compiled call). MFU counts the causal model FLOPs
(:meth:`aot.bench.flops.FlopsPerToken.training_causal`) against the matmul peak measured in this run.
Writes benchmarks/bench/compiled.json and compiled.md (``--markdown-only``: the table from the JSON).
About 10 CPU-minutes, most of it compilation. ``--quick``: a tiny size, seconds (a smoke test, not a record).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from aot.bench.flops import flops_per_token
from aot.bench.mfu import mfu
from aot.bench.peaks import measure_matmul_peak
from aot.bench.peer import hf_gpt2, transformers_available
from aot.bench.record import RecordedBenchmark, run_recorded, timed_rounds
from aot.bench.suite import BenchSettings, block_config
from aot.bench.timing import interleaved_timings, make_optimizer, random_tokens, training_step
from aot.models import build_model
from aot.runinfo import timing_header

MODELS = ("AoT-MSSA (tied)", "GPT-2")  # labels of aot.bench.suite.BLOCKS
HF_LABEL = "HF GPT-2"


def build(label: str, s: BenchSettings) -> torch.nn.Module:
    """Our model of block ``label`` at the bench size, or HF's GPT-2 on our GPT-2's config."""
    torch.manual_seed(0)
    if label == HF_LABEL:
        return hf_gpt2(block_config(s, "GPT-2", s.depth))
    return build_model(block_config(s, label, s.depth))


def measure(s: BenchSettings, rounds: int, log: Any = print) -> dict[str, Any]:
    """Every model eager and compiled: compile seconds, median step seconds, tokens/s and causal MFU."""
    labels = [*MODELS, *([HF_LABEL] if transformers_available() else [])]
    idx = random_tokens(block_config(s, "GPT-2", s.depth), s.batch, s.seq_len, "cpu")
    steps, rows = [], []
    for label in labels:
        for mode in ("eager", "compiled"):
            model = build(label, s)
            runner = torch.compile(model) if mode == "compiled" else model
            step = training_step(runner, make_optimizer(model), idx)
            start = time.perf_counter()
            step()  # eager: allocation; compiled: the compilation itself
            first = time.perf_counter() - start
            log(f"{label} {mode}: first step {first:.1f} s")
            steps.append([step])
            rows.append(dict(model=label, mode=mode, first_step_seconds=first))
    peak_before = measure_matmul_peak(torch.float32, "cpu", sizes=s.peak_sizes, repeat=s.repeat)["peak"]
    timings = interleaved_timings(steps, "cpu", rounds=rounds, warmup=1, repeat=s.repeat)
    peak = max(peak_before, measure_matmul_peak(torch.float32, "cpu", sizes=s.peak_sizes, repeat=s.repeat)["peak"])
    tokens = s.batch * s.seq_len
    for row, timing in zip(rows, timings, strict=True):
        label = "GPT-2" if row["model"] == HF_LABEL else row["model"]
        causal = flops_per_token(block_config(s, label, s.depth), s.seq_len)
        seconds = statistics.median(t for round_ in timing[0] for t in round_)
        row.update(
            step_seconds=seconds,
            tokens_per_second=tokens / seconds,
            causal_flops_per_token=causal.training_causal(),
            mfu_causal=mfu(causal.training_causal(), tokens / seconds, peak),
        )
    by = {(r["model"], r["mode"]): r for r in rows}
    for row in rows:
        row["speedup_from_compile"] = by[(row["model"], "eager")]["step_seconds"] / row["step_seconds"]
        if HF_LABEL in labels and row["model"] == "GPT-2":
            row["hf_over_ours"] = by[(HF_LABEL, row["mode"])]["step_seconds"] / row["step_seconds"]
    return dict(settings=dict(n_embd=s.n_embd, n_head=s.n_head, depth=s.depth, seq_len=s.seq_len, batch=s.batch,
                              vocab_size=s.vocab_size, rounds=rounds, repeat=s.repeat),
                peak_flops=peak, rows=rows)  # fmt: skip


def markdown(record: dict[str, Any]) -> str:
    st = record["settings"]
    lines = [
        "# Training step: eager against torch.compile, ours beside HF's GPT-2",
        "",
        timing_header(record, f"matmul peak {record['peak_flops'] / 1e9:.0f} GFLOP/s"),
        "",
        f"d = {st['n_embd']}, {st['n_head']} heads, {st['depth']} layers, T = {st['seq_len']}, batch {st['batch']}, "
        f"vocabulary {st['vocab_size']}, fp32; medians of {st['rounds']} interleaved rounds x {st['repeat']} steps "
        "(`benchmarks/bench/compiled.py`). MFU: causal FLOPs / measured matmul peak. Note: "
        + (record["note"] or "none"),
        "",
        "| model | mode | first step s | step s | tokens/s | causal MFU | compile speed-up | HF / ours (step time) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in record["rows"]:
        hf = f"{r['hf_over_ours']:.2f}x" if "hf_over_ours" in r else ""
        lines.append(
            f"| {r['model']} | {r['mode']} | {r['first_step_seconds']:.1f} | {r['step_seconds']:.3f} | "
            f"{r['tokens_per_second']:,.0f} | {100 * r['mfu_causal']:.1f} % | {r['speedup_from_compile']:.2f}x | {hf} |"
        )
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(BenchSettings.quick() if args.quick else BenchSettings(), timed_rounds(args))


BENCH = RecordedBenchmark(__file__, __doc__, run, markdown, quick=True)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
