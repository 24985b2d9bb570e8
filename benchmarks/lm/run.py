"""AoT-MSSA, AoT-MHSA, GPT-2 (`transformer`) and CRATE at matched non-embedding parameters (~4.7M, d = 256)
and the same token budget on Shakespeare, bytes and BPE-4096: val / test loss, tokens/s, wall time.

    PYTHONPATH=src python benchmarks/lm/run.py --lock /tmp/aot-cpu.lock           # the comparison
    PYTHONPATH=src python benchmarks/lm/run.py --lock /tmp/aot-cpu.lock --tag explore \
        --models aot-mssa-l-cpu --set model.residual_scale=channel --set model.residual_scale_init=0.1

Every run goes through `aot.train.lm_task.train_lm` (the code behind `aot train lm`) with preset cpu-bench;
finished runs are skipped when the script is run again (their results.json is reused). Results are appended to
benchmarks/lm/results.json (keyed by tag / tokenizer / model / overrides) and benchmarks/lm/table.md is rewritten.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from aot.bench.lock import cpu_lock
from aot.runinfo import machine_info
from aot.train.lm_task import build_run_config, train_lm

HERE = Path(__file__).resolve().parent
MODELS = ["gpt2-cpu", "aot-mhsa-l-cpu", "aot-mssa-l-cpu", "crate-l-cpu"]
TOKENIZERS = ["bytes", "bpe-4096"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--tokenizers", nargs="+", default=TOKENIZERS)
    parser.add_argument("--steps", type=int, default=250, help="optimizer steps (x 16 x 256 tokens; default 250)")
    parser.add_argument("--set", action="append", default=[], help="override, e.g. model.n_layer=12")
    parser.add_argument("--tag", default="main", help="group name in results.json (main = the comparison)")
    parser.add_argument("--runs", default="runs/bench-lm", help="folder for the individual runs")
    parser.add_argument(
        "--lock", metavar="FILE", help="hold this flock(1)-style lock around each run (e.g. /tmp/aot-cpu.lock)"
    )
    args = parser.parse_args(argv)
    results_path = HERE / "results.json"
    store = json.loads(results_path.read_text()) if results_path.is_file() else {"runs": []}
    for tokenizer in args.tokenizers:
        for model in args.models:
            sets = [f"train.steps={args.steps}", "train.progress=false", *args.set]
            key = hashlib.sha256(json.dumps([args.tag, tokenizer, model, sets]).encode()).hexdigest()[:10]
            out = Path(args.runs) / f"{args.tag}-{tokenizer}-{model}-{key}"
            if not (out / "results.json").is_file():
                run = build_run_config(
                    "cpu-bench", flags={"data": {"tokenizer": tokenizer}}, sets=sets, model_preset=model
                )
                print(f"== {args.tag} {tokenizer} {model} {' '.join(args.set)}", flush=True)
                with cpu_lock(args.lock):
                    train_lm(run, out, "cpu", resume="auto")  # a killed run continues; seed: train.seed (0)
            result = json.loads((out / "results.json").read_text())
            row = summary_row(args.tag, tokenizer, model, args.set, result)
            store["runs"] = [r for r in store["runs"] if r["key"] != key] + [{"key": key, **row}]
            store["machine"] = machine_info()
            results_path.write_text(json.dumps(store, indent=2) + "\n")
            (HERE / "table.md").write_text(markdown(store))
            print(json.dumps(row), flush=True)
    return 0


def summary_row(tag: str, tokenizer: str, model: str, sets: list[str], result: dict) -> dict:
    return {
        "tag": tag,
        "tokenizer": tokenizer,
        "model": model,
        "overrides": sets,
        "block": result["model"]["block"],
        "n_layer": result["model"]["n_layer"],
        "non_embedding_params": result["model"]["non_embedding_params"],
        "tokens": result["train"]["tokens"],
        "val_loss": result["val"]["loss"],
        "test_loss": result["test"]["loss"],
        "val_nats_per_byte": result["val"]["nats_per_byte"],
        "test_nats_per_byte": result["test"]["nats_per_byte"],
        "tokens_per_second": result["train"]["tokens_per_second"],
        "train_seconds": result["train"]["train_seconds"],
        "wall_seconds": result["train"]["wall_seconds"],
        "bigram_val_loss": result["baselines"]["val"]["bigram"]["loss"],
        "date": result["machine"]["date"],
    }


def markdown(store: dict) -> str:
    machine = store["machine"]
    lines = [
        "# Language modelling on Shakespeare: AoT against GPT-2 at matched parameters",
        "",
        f"Machine: {machine['platform']}, {machine['cpu_count']} CPUs ({machine['torch_threads']} torch threads), "
        f"torch {machine['torch']}; written {machine['date']}. Reproduce: `PYTHONPATH=src python "
        "benchmarks/lm/run.py --lock /tmp/aot-cpu.lock` (rows tagged other than `main`: add "
        "`--tag TAG --tokenizers bytes --models ... --set ...` as in the row). Tokens/s come from a 2-core "
        "machine shared with other jobs (heavy runs serialised by flock, light ones not): read them as ±30 %; "
        "losses at a fixed token budget do not depend on it.",
        "",
        "Context 256, batch 16, AdamW lr 1e-3 (warm-up 40, cosine to 1e-4), bf16 autocast, one seed; val / test loss "
        "in nats/token on the last 10 % (val 5 %, test 5 %; 128 windows of 256 tokens each). Gap = val loss relative "
        "to GPT-2's with the same tokenizer and overrides (where that run exists, else the main GPT-2 run).",
        "",
        "| tag | tokenizer | model | layers | non-emb. params | tokens | val loss | test loss | gap to GPT-2 | "
        "nats/byte (val) | tokens/s | train s | overrides |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    # the gap is to GPT-2 trained with the same overrides (e.g. the same learning rate) where that run exists,
    # else to GPT-2 of the main comparison
    reference = {
        (r["tag"], r["tokenizer"], tuple(r["overrides"])): r["val_loss"]
        for r in store["runs"]
        if r["model"] == "gpt2-cpu"
    }
    for r in sorted(store["runs"], key=lambda r: (r["tag"] != "main", r["tag"], r["tokenizer"], r["model"])):
        same = reference.get((r["tag"], r["tokenizer"], tuple(r["overrides"])))
        ref = same if same is not None else reference.get(("main", r["tokenizer"], ()))
        gap = f"{100 * (r['val_loss'] - ref) / ref:+.1f} %" if ref else "—"
        lines.append(
            f"| {r['tag']} | {r['tokenizer']} | {r['model']} | {r['n_layer']} | "
            f"{r['non_embedding_params'] / 1e6:.2f}M | "
            f"{r['tokens'] / 1e6:.2f}M | {r['val_loss']:.4f} | {r['test_loss']:.4f} | {gap} | "
            f"{r['val_nats_per_byte']:.3f} | {r['tokens_per_second']:,.0f} | {r['train_seconds']:.0f} | "
            f"{' '.join(r['overrides']) or '—'} |"
        )
    bigrams = {r["tokenizer"]: r["bigram_val_loss"] for r in store["runs"]}
    lines += ["", "Interpolated bigram on val (fitted on train), nats/token: "]
    lines[-1] += ", ".join(f"{tok} {loss:.3f}" for tok, loss in sorted(bigrams.items()))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
