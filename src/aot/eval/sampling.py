"""Sampling a trained language model's continuation of a prompt, decoded with the cache
(:meth:`aot.models.lm.CausalLM.generate`) and streamed as text (the logic of `aot sample`, :mod:`aot.cli.sample`)."""

from __future__ import annotations

import time
from typing import TextIO

import torch

from aot.errors import AotError
from aot.eval.lm_folder import LMRunFolder
from aot.models.budget import check_fits, generation_need, machine_memory
from aot.validation import integer, number

#: the most tokens one `aot sample` generates (stated in its --help); memory is checked as well
MAX_NEW_TOKENS = 1_000_000
#: the range of each sampling option, stated once: :func:`sample` checks it, `aot sample` parses and documents it
SAMPLE_OPTIONS = {
    "--max-new-tokens": integer(1, MAX_NEW_TOKENS),
    "--temperature": number(0),
    "--top-k": integer(1),
    "--top-p": number(0, 1, low_open=True),
}
#: tokens held back at most while their text ends in an incomplete UTF-8 sequence (a character is 4 bytes at most)
HOLD_TOKENS = 4


class TextStream:
    """Prints the decoded text as tokens arrive. The tokenizers are byte-level (bytes, GPT-2's and the trained
    BPE), so the text of the tokens since the last write decodes on its own: it is written when it does not end in
    a replacement character (a UTF-8 sequence not complete yet), or once :data:`HOLD_TOKENS` tokens have not
    completed it (the bytes are invalid). Each token is decoded a bounded number of times: streaming n tokens
    costs O(n), not O(n²)."""

    def __init__(self, decode, out: TextIO) -> None:  # type: ignore[no-untyped-def]
        self.decode, self.out = decode, out
        self.pending: list[int] = []
        self.written = ""

    def __call__(self, next_ids: torch.Tensor) -> None:
        self.pending.append(int(next_ids[0, 0]))
        self.flush(final=False)

    def flush(self, final: bool = True) -> None:
        text = self.decode(self.pending) if self.pending else ""
        if not final and text.endswith("\ufffd") and len(self.pending) < HOLD_TOKENS:
            return
        if text:
            self.out.write(text)
            self.out.flush()
            self.written += text
        self.pending = []


def check_options(max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Each option in its range (:data:`SAMPLE_OPTIONS`): one line naming the option otherwise."""
    given = {"--max-new-tokens": max_new_tokens, "--temperature": temperature, "--top-k": top_k, "--top-p": top_p}
    for flag, value in given.items():
        if value is not None:
            SAMPLE_OPTIONS[flag].named(flag).check(value)


def check_prompt(prompt: str) -> None:
    """The prompt must be text: bytes that are not UTF-8 reach Python's argv as lone surrogates (PEP 383), which
    no tokenizer can encode; refused in one line naming the first such byte (rather than replaced: the model would
    continue a text the user did not write)."""
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as exc:
        raw = prompt[exc.start].encode("utf-8", "surrogateescape")
        raise AotError(
            f"--prompt is not UTF-8 text (byte 0x{raw[0]:02x} at character {exc.start}); give the prompt in UTF-8 "
            "(check the terminal's encoding, e.g. LANG=C.UTF-8)"
        ) from None


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
    check_options(max_new_tokens, temperature, top_k, top_p)
    check_prompt(prompt)
    ids = run.tokenizer.encode(prompt)
    if not ids:
        raise AotError("the prompt is empty; give at least one character with --prompt")
    ids = ids[-(run.block_size - 1) :]
    check_fits(generation_need(run.model.cfg, len(ids) + max_new_tokens), machine_memory(), "--max-new-tokens")
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
