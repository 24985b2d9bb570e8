"""The bench blocks of docs/guide/bench.md ("Cost side by side"), rendered from the records beside this script:
``<!-- bench:models -->`` from `aot bench`'s results.json, ``<!-- bench:speed -->`` from generation.py,
attention_paths.py, long_context_memory.py, rope_cache.py, precision_ab.py and compiled.py.
tests/bench/test_bench_scripts.py checks that the guide holds exactly these blocks.

    python benchmarks/bench/readme_rows.py            # rewrite the guide's blocks from the records
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from aot.runinfo import replace_marked_block

HERE = Path(__file__).parent
README = HERE.parents[1] / "docs" / "guide" / "bench.md"  # where the blocks live (the name is kept)
MARKER = "bench:speed"
MODELS_MARKER = "bench:models"
LINKS = "../../"  # the rows link to benchmarks/bench/*.md, relative to the guide (docs/guide/)


def _load(name: str) -> dict[str, Any]:
    return dict(json.loads((HERE / f"{name}.json").read_text()))


def _row(record: dict[str, Any], model: str, batch: int) -> dict[str, Any]:
    return next(r for r in record["rows"] if r["model"] == model and r["batch"] == batch)


def block() -> str:
    gen, paths, memory, rope = (
        _load(n) for n in ("generation", "attention_paths", "long_context_memory", "rope_cache")
    )
    lines = [
        "| measured (benchmarks/bench/, 1 thread unless said, 2-core Intel Xeon) | result |",
        "|---|---|",
    ]
    cells = []
    for batch in (1, 8):
        ours, hf = _row(gen, "aot GPT-2", batch), _row(gen, "HF GPT2LMHeadModel", batch)
        same = "same tokens" if ours["same_tokens_as_hf"] else "tokens differ"
        cells.append(
            f"batch {batch}: {ours['tokens_per_s']:,.0f} tok/s against HF's {hf['tokens_per_s']:,.0f} "
            f"(**{ours['ratio_vs_hf']:.2f}×**, {same})"
        )
    mssa = [_row(gen, "aot AoT-MSSA (tied)", b)["tokens_per_s"] for b in (1, 8)]
    lines.append(
        f"| [greedy generation](benchmarks/bench/generation.md), our GPT-2 against HF `generate`, same weights, "
        f"{gen['new_tokens']} new tokens | " + "; ".join(cells) + f"; AoT-MSSA (tied, 6 layers) {mssa[0]:,.0f} / "
        f"{mssa[1]:,.0f} tok/s |"
    )
    alone = [r for r in paths["rows"] if r["kind"] == "training" and r["variant"] == "blocked-64"]
    step = [r for r in paths["rows"] if r["kind"] == "model" and r["variant"] == "blocked-64"]
    short = [r["ratio"] for r in alone if r["T"] <= 512]
    long = [r for r in alone if r["T"] > 512]
    flex = next((r for r in paths["rows"] if r["kind"] == "flex"), None)
    flex_text = (
        f"; FlexAttention has no CPU backward (its forward {flex['ratio']:.2f}× SDPA after a "
        f"{flex['compile_seconds']:.0f} s compile)"
        if flex
        else ""
    )
    lines.append(
        "| [attention paths for MSSA training](benchmarks/bench/attention_paths.md) against SDPA | blocked causal "
        f"attention reusing P: {min(short):.2f}–{max(short):.2f}× alone at T ≤ 512"
        + "".join(f", {r['ratio']:.2f}× at T = {r['T']}" for r in long)
        + f", but {min(r['ratio'] for r in step):.2f}–{max(r['ratio'] for r in step):.2f}× a whole training step: "
        f"SDPA kept{flex_text} |"
    )
    train = [r for r in memory["rows"] if r.get("kind", "train") == "train"]
    longest = max(r["T"] for r in train)
    peaks = {r["model"]: r["peak_bytes"] for r in train if r["T"] == longest}
    lines.append(
        f"| [training memory](benchmarks/bench/long_context_memory.md), one step, batch 1, T = {longest:,} | "
        + ", ".join(f"{name} {peak / 2**20:,.0f} MiB" for name, peak in peaks.items())
        + " |"
    )
    generate = [r for r in memory["rows"] if r.get("kind") == "generate"]
    if generate:
        longest = max(r["T"] for r in generate)
        at = {r["model"]: r for r in generate if r["T"] == longest}
        lines.append(
            f"| [decoding cache](benchmarks/bench/long_context_memory.md) after a prompt of {longest:,} tokens "
            "(peak of prefill + decoding) | "
            + ", ".join(
                f"{name} {r['cache_bytes'] / 2**20:,.0f} MiB ({r['peak_bytes'] / 2**20:,.0f})" for name, r in at.items()
            )
            + " |"
        )
    lines.append(
        "| [cached rotary tables](benchmarks/bench/rope_cache.md), training step, T = 128 | "
        + "; ".join(f"{r['model']}: {r['speedup']:.2f}×" for r in rope["rows"])
        + " (against recomputing them in every layer) |"
    )
    lines += [precision_row(_load("precision_ab")), compiled_row(_load("compiled"))]
    return "\n".join(lines).replace("](benchmarks/bench/", f"]({LINKS}benchmarks/bench/")


def precision_row(record: dict[str, Any]) -> str:
    """`--precision auto`'s choice per model against the precision it rejected, whole training steps."""
    threads = record.get("omp_num_threads") or "all"
    return (
        f"| [precision `auto` chose](benchmarks/bench/precision_ab.md) against the one it rejected, whole training "
        f"step, {threads} threads | "
        + "; ".join(
            f"{r['model']}: {r['chosen']}, **{r['chosen_over_rejected']:.2f}×** the rejected one's step time"
            for r in record["rows"]
        )
        + " |"
    )


def compiled_row(record: dict[str, Any]) -> str:
    """torch.compile's speed-up per model and our GPT-2 against HF's in each mode (step time ratios)."""
    threads = record.get("omp_num_threads") or "all"
    speedups = [r for r in record["rows"] if r["mode"] == "compiled"]
    versus_hf = {r["mode"]: r["hf_over_ours"] for r in record["rows"] if "hf_over_ours" in r}
    return (
        f"| [torch.compile](benchmarks/bench/compiled.md), training step, {threads} threads | "
        + "; ".join(f"{r['model']} {r['speedup_from_compile']:.2f}× from compiling" for r in speedups)
        + "; our GPT-2 against HF's: "
        + ", ".join(f"**{ratio:.2f}×** {mode}" for mode, ratio in versus_hf.items())
        + " |"
    )


MODEL_ROWS = [  # (group, label) of results.json's model table shown in the guide, in this order
    ("matched width/depth", "AoT-MSSA (tied)"),
    ("matched width/depth", "AoT-MSSA (W_O)"),
    ("matched width/depth", "AoT-MHSA"),
    ("matched width/depth", "GPT-2"),
    ("matched params", "AoT-MSSA (tied)"),
    ("matched params", "AoT-MSSA (W_O)"),
    ("matched params", "AoT-MHSA"),
]


def models_block() -> str:
    """The headline rows of `aot bench` (benchmarks/bench/results.json) with the run's date, CPU and peak."""
    bench = _load("results")
    env, settings = bench["environment"], bench["settings"]
    rows = {(r["group"], r["label"]): r for r in bench["models"]}
    gpt2 = {group: rows[(group, "GPT-2")]["train_tokens_per_s"] for group, _ in MODEL_ROWS}
    peer = bench.get("peer") or {}
    lines = [
        f"Recorded in `benchmarks/bench/` ({env['date']}, {env['cpu_count']} cores of an {env['processor']}, "
        f"{settings.get('dtype', 'fp32')}, d = {settings['n_embd']}, {settings['n_head']} heads, "
        f"T = {settings['seq_len']}, batch {settings['batch']}; matmul peak measured in the run "
        f"{bench['peak']['used'] / 1e9:.0f} GFLOP/s; models of a comparison timed in interleaved rounds)"
        + (
            f"; our GPT-2 trains at {peer['train_speed_ratio']:.2f}× HF's `GPT2LMHeadModel` with the same weights "
            f"(paired rounds {min(peer['train_speed_ratio_rounds']):.2f}–{max(peer['train_speed_ratio_rounds']):.2f})"
            if peer.get("train_speed_ratio")
            else ""
        )
        + ":",
        "",
        "| model | layers | FLOPs/token (train) | train tok/s | MFU (causal) | MFU (full square) | peak memory "
        "| tok/s vs GPT-2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group, label in MODEL_ROWS:
        r = rows[(group, label)]
        name = f"{label}, {'same depth' if group == 'matched width/depth' else 'matched params'}"
        if label == "GPT-2":
            name = "GPT-2"
        peak = r.get("train_peak_bytes")
        lines.append(
            f"| {name} | {r['n_layer']} | {r['flops_training'] / 1e6:.1f} M | {r['train_tokens_per_s']:,.0f} | "
            f"{100 * r['train_mfu_causal']:.1f} % | {100 * r['train_mfu']:.1f} % | "
            f"{'—' if peak is None else f'{peak / 2**20:.0f} MiB'} | {r['train_tokens_per_s'] / gpt2[group]:.2f}× |"
        )
    return "\n".join(lines)


def update_readme(readme: Path = README) -> None:
    text = replace_marked_block(readme.read_text(), MARKER, block(), readme)
    readme.write_text(replace_marked_block(text, MODELS_MARKER, models_block(), readme))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        raise SystemExit("usage: python benchmarks/bench/readme_rows.py (no arguments)")
    update_readme()
