"""`aot sample RUN_DIR --prompt ...`: stream a trained language model's continuation of a prompt, decoded with the
cache (:meth:`aot.models.lm.CausalLM.generate`), and print tokens/s at the end."""

from __future__ import annotations

import argparse
import sys
import textwrap

from aot.cli.options import SEED_NUMBER, add_number
from aot.devices import resolve_device
from aot.eval.lm_folder import load_lm_run
from aot.eval.sampling import SAMPLE_OPTIONS, check_options, check_prompt, sample


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sample",
        help="stream a trained language model's continuation of a prompt",
        description=textwrap.fill(
            "Continue --prompt with the language model of a run folder (`aot train lm --out DIR`) or an export "
            "(`aot export hf`), printing tokens as they come (decoded with the KV cache), then tokens/s on stderr. "
            "The same --seed gives the same text. --temperature 0 is greedy. A prompt longer than the model's "
            "context keeps its last block_size - 1 tokens (a note on stderr says so); the context then slides.",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot sample runs/lm --prompt 'ROMEO:' --max-new-tokens 200\n"
        "  aot sample runs/lm --prompt 'To be' --temperature 0.8 --top-k 40 --top-p 0.95 --seed 1\n"
        "  aot sample runs/lm --prompt 'To be' --temperature 0          # greedy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", metavar="RUN_DIR", help="run or export folder")
    parser.add_argument("--prompt", required=True, help="text to continue (UTF-8; other bytes are refused)")
    for flag, text, default in (
        ("--max-new-tokens", "tokens to generate; memory is checked too", 200),
        ("--temperature", "0 = greedy", 1.0),
        ("--top-k", "sample from the k most likely tokens", None),
        ("--top-p", "nucleus sampling: the fewest tokens with probability >= p", None),
    ):
        add_number(parser, flag, SAMPLE_OPTIONS[flag], text, default=default)
    parser.add_argument("--seed", type=int, default=0, help=f"random seed ({SEED_NUMBER.describe()}; default: 0)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole window at every step")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    check_options(args.max_new_tokens, args.temperature, args.top_k, args.top_p)  # before the run is read
    check_prompt(args.prompt)
    run = load_lm_run(args.run, str(resolve_device(args.device)))
    n_prompt = len(run.tokenizer.encode(args.prompt))
    if n_prompt > run.block_size - 1:
        print(
            f"aot: note: the prompt has {n_prompt} tokens; the model's context is {run.block_size}, so it sees only "
            f"the last {run.block_size - 1}",
            file=sys.stderr,
        )
    sys.stdout.write(args.prompt)
    _, new, seconds = sample(
        run, args.prompt, args.max_new_tokens, args.temperature, args.top_k, args.top_p, args.seed,
        not args.no_cache, sys.stdout,
    )  # fmt: skip
    sys.stdout.write("\n")
    sys.stdout.flush()
    print(f"[{len(new)} tokens in {seconds:.2f}s: {len(new) / max(seconds, 1e-9):,.1f} tokens/s]", file=sys.stderr)
    return 0
