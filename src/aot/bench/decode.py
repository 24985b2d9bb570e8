"""Generation cost: decode tokens/s with and without the KV cache, and cache bytes per token.

Without a cache every new token re-runs the model over the whole prefix (cost grows with the square of the
length); with one, each step runs the model on one token and attends to the cached prefix. MSSA caches one
tensor per layer (the subspace projections P = U_kᵀ z, which are query, key and value at once), standard
attention two (K and V): MSSA's cache is half the bytes per token at the same width (docs/paper.md §2).
"""

from __future__ import annotations

from typing import Any

import torch

from aot.bench.timing import median_seconds
from aot.models.lm import CausalLM


def cache_bytes_per_token(model: CausalLM, tokens: torch.Tensor) -> float:
    """Bytes the cache holds per token (per sequence) after the model has read ``tokens`` (B, T) into it.

    The cache after a cached generation of ``tokens`` holds exactly these entries (every token but the last,
    which is sampled and not yet fed back); feeding them in one call builds the same cache."""
    cache = model.new_cache()
    with torch.no_grad():
        model(tokens, cache=cache)
    return cache.nbytes / (tokens.shape[0] * cache.length)


def decode_benchmark(
    model: CausalLM, n_new: int = 512, prompt_len: int = 16, batch: int = 1, repeat: int = 1, warmup: int = 1
) -> dict[str, Any]:
    """Greedy generation of ``n_new`` tokens after a random prompt, with the cache and by recomputing the
    prefix at each step; returns seconds, tokens/s, the speed-up and the cache bytes per token."""
    device = next(model.parameters()).device
    cfg = model.cfg
    if prompt_len + n_new > cfg.block_size:
        from aot.errors import AotError

        raise AotError(
            f"prompt {prompt_len} + {n_new} new tokens exceed block_size={cfg.block_size}; "
            "build the model with a larger block_size"
        )
    generator = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, cfg.vocab_size, (batch, prompt_len), generator=generator).to(device)
    was_training = model.training
    model.eval()
    result: dict[str, Any] = dict(n_new=n_new, prompt_len=prompt_len, batch=batch)
    outputs = {}
    for use_cache in (True, False):
        key = "cached" if use_cache else "uncached"

        def run(use_cache: bool = use_cache, key: str = key) -> None:
            outputs[key] = model.generate(prompt, n_new, temperature=0, use_cache=use_cache)

        seconds = median_seconds(run, device=device, warmup=warmup if use_cache else 0, repeat=repeat)
        result[f"{key}_seconds"] = seconds
        result[f"{key}_tokens_per_s"] = batch * n_new / seconds
    result["speedup"] = result["uncached_seconds"] / result["cached_seconds"]
    result["same_tokens"] = bool(torch.equal(outputs["cached"], outputs["uncached"]))
    result["cache_bytes_per_token"] = cache_bytes_per_token(model, outputs["cached"][:, :-1])
    model.train(was_training)
    return result
