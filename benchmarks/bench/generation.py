"""Greedy generation speed: our cached decoding (``CausalLM.generate``, what ``aot sample`` runs) against
HuggingFace transformers' ``GPT2LMHeadModel.generate`` with the same weights.

Both models are the ``gpt2-cpu`` preset's GPT-2 (6 layers, d = 256, 4 heads, byte vocabulary of 256; random
weights, copied from ours into HF's by ``aot.bench.peer``, so both compute the same function), block size
1024. Each generates ``--new-tokens`` tokens (default 512) after a random 16-token prompt, greedy, with its
KV cache, at batch 1 and 8. HF's end-of-text token is switched off so that both always generate the full
count, and the two token sequences are compared token by token. AoT-MSSA (tied, ``aot-mssa-tied-l-cpu`` at
6 layers, same width) is timed beside them (ours only: HF has no MSSA).

Timing: interleaved rounds (order reversed every other round), one timed generation per model and round
after a short warm-up generation; tokens/s = batch × new tokens / median seconds; the ratio is ours / HF's
tokens/s. Run with one thread, as recorded (about 2 CPU-minutes at the defaults):

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench/generation.py [--rounds 3] [--note TEXT]

Writes generation.json and generation.md beside this script (``--markdown-only``: the table from the JSON).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from aot import build_model, preset_config
from aot.bench.peer import hf_gpt2, hf_version, load_aot_weights_into_hf
from aot.bench.record import RecordedBenchmark, count, run_recorded
from aot.models.lm import CausalLM
from aot.runinfo import timing_header

PROMPT_LEN = 16


def gpt2_pair(preset: str = "gpt2-cpu", block_size: int = 1024, **overrides: Any) -> tuple[CausalLM, Any]:
    """Our GPT-2 and HF's GPT2LMHeadModel with the same weights, in eval mode, HF's end-of-text switched off."""
    cfg = preset_config(preset, block_size=block_size, dropout=0.0, **overrides)
    torch.manual_seed(0)
    ours = build_model(cfg).eval()
    theirs: Any = hf_gpt2(cfg).eval()
    load_aot_weights_into_hf(ours, theirs)
    theirs.generation_config.eos_token_id = None  # generate the full count, never stop early
    theirs.generation_config.pad_token_id = cfg.vocab_size - 1
    return ours, theirs  # type: ignore[return-value]


def generate_ours(model: CausalLM, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    return model.generate(prompt, n_new, temperature=0)


def generate_hf(model: Any, prompt: torch.Tensor, n_new: int) -> torch.Tensor:
    with torch.no_grad():
        return model.generate(  # type: ignore[no-any-return]
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n_new, do_sample=False, use_cache=True
        )


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--new-tokens", type=count, default=512, help="tokens generated per sequence (default 512)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8], help="batch sizes (default: 1 8)")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Greedy generation of ``args.new_tokens`` tokens at each batch size: ours, HF's, and AoT-MSSA's."""
    ours, theirs = gpt2_pair(block_size=PROMPT_LEN + args.new_tokens)
    torch.manual_seed(0)
    mssa: CausalLM = build_model(  # type: ignore[assignment]
        preset_config("aot-mssa-tied-l-cpu", n_layer=6, block_size=PROMPT_LEN + args.new_tokens, dropout=0.0)
    ).eval()
    rows = []
    for batch in args.batches:
        prompt = torch.randint(0, ours.cfg.vocab_size, (batch, PROMPT_LEN), generator=torch.Generator().manual_seed(0))
        runs: dict[str, Callable[[int], torch.Tensor]] = {
            "aot GPT-2": partial(generate_ours, ours, prompt),
            "HF GPT2LMHeadModel": partial(generate_hf, theirs, prompt),
            "aot AoT-MSSA (tied)": partial(generate_ours, mssa, prompt),
        }
        outputs = {name: run(args.new_tokens) for name, run in runs.items()}  # also the warm-up
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for r in range(args.rounds):
            for name in list(runs)[:: 1 if r % 2 == 0 else -1]:
                start = time.perf_counter()
                runs[name](args.new_tokens)
                seconds[name].append(time.perf_counter() - start)
        median = {name: statistics.median(s) for name, s in seconds.items()}
        hf_rate = batch * args.new_tokens / median["HF GPT2LMHeadModel"]  # printed
        for name in runs:
            paired = [hf / s for hf, s in zip(seconds["HF GPT2LMHeadModel"], seconds[name])]  # same round
            rows.append(
                dict(
                    model=name,
                    batch=batch,
                    seconds=median[name],
                    seconds_rounds=seconds[name],
                    tokens_per_s=batch * args.new_tokens / median[name],
                    ratio_vs_hf=statistics.median(paired),
                    ratio_vs_hf_rounds=paired,
                )
            )
        same = bool(torch.equal(outputs["aot GPT-2"], outputs["HF GPT2LMHeadModel"]))
        rows[-3]["same_tokens_as_hf"] = same
        print(
            f"batch {batch}: ours {rows[-3]['tokens_per_s']:.0f} tok/s, HF {hf_rate:.0f} "
            f"(×{rows[-3]['ratio_vs_hf']:.2f}), same tokens: {same}; MSSA {rows[-1]['tokens_per_s']:.0f} tok/s",
            flush=True,
        )
    return dict(
        versions=hf_version(),
        setup=(
            f"gpt2-cpu GPT-2 ({ours.cfg.n_layer} layers, d = {ours.cfg.n_embd}, {ours.cfg.n_head} heads, vocab "
            f"{ours.cfg.vocab_size}, random weights, the same in both), fp32; "
            f"greedy, {args.new_tokens} new tokens after a {PROMPT_LEN}-token prompt, KV cache on; median of "
            f"{args.rounds} interleaved rounds of one generation each; vs HF = HF's seconds / ours in the same round, "
            "median over rounds (min–max beside it)."
        ),
        new_tokens=args.new_tokens,
        rows=rows,
    )


def markdown(record: dict[str, Any]) -> str:
    lines = [
        "# Greedy generation: our cached decoding against HF `generate`",
        "",
        timing_header(record, f"transformers {record['versions']['transformers']}"),
        "",
        record["setup"],
        "",
        record["note"],
        "",
        "| model | batch | seconds | tokens/s | vs HF | same tokens as HF |",
        "|---|---|---|---|---|---|",
    ]
    for r in record["rows"]:
        same = {True: "yes", False: "no"}.get(r.get("same_tokens_as_hf"), "—")  # type: ignore[call-overload]
        low, high = min(r["ratio_vs_hf_rounds"]), max(r["ratio_vs_hf_rounds"])
        lines.append(
            f"| {r['model']} | {r['batch']} | {r['seconds']:.2f} | {r['tokens_per_s']:,.0f} | "
            f"{r['ratio_vs_hf']:.2f}× ({low:.2f}–{high:.2f}) | {same} |"
        )
    return "\n".join(lines) + "\n"


BENCH = RecordedBenchmark(__file__, __doc__, measure, markdown, options=add_options, rounds=3)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
