"""Part ``efficiency``: parameters, FLOPs, memory and time per training step of every block type with
``aot bench``, beside the paper's count of attention parameters per layer (its efficiency claim)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from aot.report.document import Block, Paragraph, Table
from aot.report.paper_numbers import PARAMS_PER_LAYER_D2
from aot.report.part import (
    Context,
    Part,
    Plan,
    Step,
    differences_blocks,
    existing_figures,
    figure_blocks,
    fmt_count,
    read_step_results,
)

# fields of aot.bench.suite.BenchSettings per preset (written to bench.yaml's bench: section, passed with --config)
SETTINGS: dict[str, dict[str, Any]] = {
    "tiny": {},
    # batch 4 (the first quick at batch 16 took 8.6 of its 34 minutes; the 72-layer matched-params model dominates)
    "quick": {"repeat": 1, "rounds": 2, "warmup": 1, "batch": 4, "decode_new": 64},
    "full": {},
    # GPT-2-small width on GPUs, bf16 (as the GPU check of `aot bench`)
    "paper": {"n_embd": 768, "n_head": 12, "seq_len": 1024, "batch": 16, "vocab_size": 50304, "depth": 12,
              "warmup": 3, "repeat": 5, "seq_lens": [256, 512, 1024, 2048, 4096], "scaling_tokens": 16384,
              "depths": [3, 6, 12, 24], "peak_sizes": [4096, 8192]},
}  # fmt: skip
OPTIONS: dict[str, list[str]] = {
    "tiny": ["--quick", "--only", "models,decode", "--no-breakdown"],
    "quick": ["--only", "models,decode", "--no-breakdown"],
    "full": [],
    "paper": ["--device", "cuda", "--dtype", "bf16"],
}


def plan(ctx: Context) -> Plan:
    settings = SETTINGS[ctx.preset]
    files = {"bench.yaml": yaml.safe_dump({"bench": settings}, sort_keys=True)} if settings else {}
    config = ["--config", str(ctx.part_dir / "bench.yaml")] if settings else []
    missing = ["no CUDA GPU here: the paper measures on GPUs"] if ctx.preset == "paper" and not ctx.cuda_devices else []
    return Plan([Step("bench", ["bench", *OPTIONS[ctx.preset], *config])], settings, files, missing)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    bench = read_step_results(part_dir, plan, "bench")
    keep = ("group", "label", "n_layer", "n_embd", "params", "non_embedding_params", "flops_training",
            "train_tokens_per_s", "train_mfu", "train_peak_bytes")  # fmt: skip
    return {
        "machine": bench["environment"],
        "settings": bench["settings"],
        "peak_flops": bench["peak"]["used"],
        "models": [{k: row.get(k) for k in keep} for row in bench.get("models", [])],
        "decode": bench.get("decode", []),
        "figures": existing_figures(part_dir, {"bench/bench.png": "aot bench: every panel of the run"}),
    }


def _models_table(rows: list[dict[str, Any]], group: str, d: int) -> Table:
    base = next((r for r in rows if r["label"] == "GPT-2"), None)
    cells = []
    for r in rows:
        paper = PARAMS_PER_LAYER_D2.get(r["label"])
        mem = r.get("train_peak_bytes")
        cells.append(
            [
                r["label"],
                str(r["n_layer"]),
                fmt_count(r["non_embedding_params"]),
                f"{r['non_embedding_params'] / r['n_layer'] / d**2:.2f}",
                f"{paper} d²" if paper else "—",
                f"{r['flops_training'] / 1e6:.1f} M",
                f"{r['train_tokens_per_s']:,.0f}",
                f"{100 * r['train_mfu']:.1f} %",
                "—" if mem is None else f"{mem / 2**20:.0f} MiB",
                "—" if base is None else f"{r['train_tokens_per_s'] / base['train_tokens_per_s']:.2f}×",
            ]
        )
    return Table(
        f"{group}: one training step (forward + backward + AdamW)",
        [
            "model",
            "layers",
            "non-emb. params",
            "params per layer / d² (ours)",
            "paper: attention params per layer",
            "FLOPs/token (train)",
            "train tok/s",
            "MFU",
            "peak memory",
            "tok/s vs GPT-2",
        ],
        cells,
    )


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    s = results["settings"]
    d = s["n_embd"]
    blocks: list[Block] = [
        Paragraph(
            f"Width d = {d}, {s['n_head']} heads, T = {s['seq_len']}, batch {s['batch']}, {s['dtype']} on "
            f"{s['device']}; MFU against a matmul peak of {results['peak_flops'] / 1e9:.0f} GFLOP/s measured in the "
            "same run. Models of a comparison are timed in interleaved rounds."
        )
    ]
    for group in dict.fromkeys(r["group"] for r in results["models"]):
        blocks.append(_models_table([r for r in results["models"] if r["group"] == group], group, d))
    if results["decode"]:
        blocks.append(
            Table(
                f"Decoding {results['decode'][0]['n_new']} tokens (batch {results['decode'][0]['batch']})",
                ["model", "cache bytes per token", "cached tok/s", "uncached tok/s", "speed-up", "same tokens"],
                [
                    [
                        r["label"],
                        f"{r['cache_bytes_per_token']:,.0f}",
                        f"{r['cached_tokens_per_s']:,.0f}",
                        f"{r['uncached_tokens_per_s']:,.0f}",
                        f"{r['speedup']:.1f}×",
                        "yes" if r["same_tokens"] else "no",
                    ]
                    for r in results["decode"]
                ],
            )
        )
    blocks += figure_blocks(results, part_dir)
    differences = [
        "The paper reports GFLOPs, GPU memory and time per pass of its 102M-124M models on GPUs; here the block "
        f"types are measured at d = {d} on {s['device']} in {s['dtype']}, so compare ratios, not absolute values.",
        "Parameters per layer include the LayerNorm and bias vectors (a few d), hence slightly above the paper's "
        "count of weight matrices.",
    ]
    if s["device"] == "cpu":
        differences.append("CPU timings on a machine shared with other jobs: read tokens/s as ±5-30 %.")
    return [*blocks, *differences_blocks(differences)]


PART = Part(
    name="efficiency",
    title="Efficiency: cost against a transformer",
    paper_items=("efficiency",),
    plan=plan,
    collect=collect,
    render=render,
)
