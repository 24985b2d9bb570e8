"""Sampling a trained language model's continuation of a prompt, decoded with the cache
(:meth:`aot.models.lm.CausalLM.generate`) and streamed as text (the logic of `aot sample`, :mod:`aot.cli.sample`)."""

from __future__ import annotations

import time
from typing import TextIO

import torch

from aot.errors import AotError
from aot.eval.lm_folder import LMRunFolder


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
