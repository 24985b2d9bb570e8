"""`aot sample RUN_DIR --prompt ...`: stream a trained language model's continuation of a prompt, decoded with the
cache (:meth:`aot.models.lm.CausalLM.generate`), and print tokens/s at the end."""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from typing import TextIO

import torch

from aot.devices import resolve_device
from aot.errors import AotError
from aot.eval.runs import LMRunFolder, load_lm_run


class TextStream:
    """Prints the decoded text as tokens arrive: decodes everything generated so far and writes the new part,
    holding back a trailing replacement character (a UTF-8 sequence or BPE token not yet complete)."""

    def __init__(self, decode, out: TextIO) -> None:  # type: ignore[no-untyped-def]
        self.decode, self.out = decode, out
        self.ids: list[int] = []
        self.written = ""

    def __call__(self, next_ids: torch.Tensor) -> None:
        self.ids.append(int(next_ids[0, 0]))
        self.flush(final=False)

    def flush(self, final: bool = True) -> None:
        text = self.decode(self.ids)
        if not final:
            text = text.rstrip("\ufffd")
        if text.startswith(self.written) and len(text) > len(self.written):
            self.out.write(text[len(self.written) :])
            self.out.flush()
            self.written = text


def sample(
    run: LMRunFolder,
    prompt: str,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
    use_cache: bool = True,
    stream: TextIO | None = None,
) -> tuple[list[int], list[int], float]:
    """(prompt ids as fed, generated ids, seconds). A prompt longer than the model's context keeps its last
    ``block_size - 1`` tokens (said on stderr by the command)."""
    if temperature < 0 or (top_p is not None and not 0 < top_p <= 1) or (top_k is not None and top_k < 1):
        raise AotError("--temperature must be >= 0, --top-p in (0, 1], --top-k >= 1")
    if max_new_tokens < 1:
        raise AotError("--max-new-tokens must be at least 1")
    ids = run.tokenizer.encode(prompt)
    if not ids:
        raise AotError("the prompt is empty; give at least one character with --prompt")
    ids = ids[-(run.block_size - 1) :]
    device = next(run.model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    streamer = TextStream(run.tokenizer.decode, stream) if stream is not None else None
    start = time.perf_counter()
    tokens = run.model.generate(
        torch.tensor([ids], device=device),
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        use_cache=use_cache,
        generator=generator,
        on_token=streamer,
    )
    seconds = time.perf_counter() - start
    if streamer is not None:
        streamer.flush()
    return ids, tokens[0, len(ids) :].tolist(), seconds


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
    parser.add_argument("--prompt", required=True, help="text to continue")
    parser.add_argument("--max-new-tokens", type=int, default=200, help="tokens to generate (default: 200)")
    parser.add_argument("--temperature", type=float, default=1.0, help="0 = greedy (default: 1.0)")
    parser.add_argument("--top-k", type=int, help="sample from the k most likely tokens")
    parser.add_argument("--top-p", type=float, help="nucleus sampling: the fewest tokens with probability >= p")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--no-cache", action="store_true", help="recompute the whole window at every step")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto (default: cpu)")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
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
