"""Language-model evaluation: loss (nats/token), perplexity, nats and bits per byte on a held-out split, and the
n-gram reference points (unigram, interpolated bigram) estimated on the training split.

Per byte: ``loss_per_byte = Σ_t loss_t / Σ_t bytes(target_t)``, where ``bytes(·)`` is the number of UTF-8 bytes
a token stands for; ``bits_per_byte = loss_per_byte / ln 2``. For the byte tokenizer the two units coincide
with nats / bits per token.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aot.data.shards import eval_windows
from aot.data.shardset import TokenSplit


@torch.no_grad()
def evaluate_lm(
    model: nn.Module,
    tokens: np.ndarray | TokenSplit,
    block_size: int,
    token_bytes: np.ndarray,
    batch_size: int = 16,
    max_windows: int | None = None,
    device: torch.device | str = "cpu",
    across_ranks: bool = False,
) -> dict[str, float]:
    """Mean next-token cross-entropy over non-overlapping windows of the split (all of them, or ``max_windows``
    spread evenly), with perplexity and per-byte figures and their standard errors. ``model(idx)`` must return
    (logits, ...).

    Scoring: each window holds ``block_size + 1`` tokens; the model sees the first ``block_size`` and the loss
    is computed here from its logits against explicit targets, the window's tokens 1..block_size (the model's
    own ``labels=`` loss is not used). So every scored token is predicted from up to ``block_size`` tokens of
    context, each token of the split is scored once (all of them but the first and a tail shorter than a window),
    and the bytes of exactly the scored tokens divide the nats. Windows and scores are the same as before the
    package adopted HF's shifted ``labels`` convention. The windows are read ``batch_size`` at a time from the
    (memory-mapped) split and only each window's sums are kept, so memory stays flat for a split of any length.

    Standard errors are over windows, each taken as one sample (adjacent windows of one text are not independent,
    so they understate the spread of another text): ``loss_se = std(ℓ_w) / √n`` of the per-window mean losses
    ``ℓ_w`` (every window scores ``block_size`` tokens, so their mean is ``loss``; ``std`` with ``n − 1``), and
    for the ratio ``nats_per_byte = Σ nats_w / Σ bytes_w`` the ratio estimator's
    ``√(Σ (nats_w − R·bytes_w)² / (n (n − 1))) / mean(bytes_w)`` (Cochran, *Sampling Techniques*, 1977, ch. 6);
    both 0 for a single window. No finite-population correction: on the full split the figure itself is exact, and
    the error says how far another text of the same kind could move it. ``windows`` is how many were scored,
    ``split_windows`` how many the split holds, ``full_split`` whether they are all of them."""
    starts = eval_windows(tokens, block_size, max_windows)
    rank, world = _ranks() if across_ranks else (0, 1)
    # this process's windows: every world-th one; every process runs as many batches (the last padded with a repeat
    # whose score is dropped), as a sharded model's forward needs all of them at once
    mine = np.arange(rank, len(starts), world)
    per_process = -(-len(starts) // world)
    padded = np.concatenate([mine, np.full(per_process - len(mine), mine[-1] if len(mine) else 0)])
    scored = torch.zeros(len(starts), dtype=torch.float64, device=device)
    window_bytes = np.zeros(len(starts))
    for first in range(0, len(padded), batch_size):
        rows = padded[first : first + batch_size]
        windows = np.stack([np.asarray(tokens[s : s + block_size + 1], dtype=np.int64) for s in starts[rows]])
        batch = torch.from_numpy(windows).to(device)
        logits = model(batch[:, :-1])[0]
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 -> fp32; fp64 stays
        nats = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="none")
        real = min(len(rows), max(len(mine) - first, 0))  # the padding's scores are dropped
        index = torch.from_numpy(rows[:real]).to(device)
        scored[index] = nats.double().view(len(rows), block_size).sum(1)[:real]  # no host sync per batch
        window_bytes[rows[:real]] = token_bytes[windows[:real, 1:]].sum(1)
    if world > 1:
        import torch.distributed as dist

        sizes = torch.from_numpy(window_bytes).to(device)
        for scores in (scored, sizes):
            dist.all_reduce(scores)  # each window is scored by one process: the sum assembles them all
        window_bytes = sizes.cpu().numpy()
    window_nats = scored.cpu().numpy()
    n, total_nats, total_bytes = len(starts), float(window_nats.sum()), float(window_bytes.sum())
    loss = total_nats / (n * block_size)
    per_byte = total_nats / max(total_bytes, 1.0)
    split_windows = len(eval_windows(tokens, block_size))
    return {
        "loss": loss,
        "loss_se": _standard_error(window_nats / block_size),
        "perplexity": math.exp(min(loss, 50.0)),
        "nats_per_byte": per_byte,
        "nats_per_byte_se": _ratio_standard_error(window_nats, window_bytes),
        "bits_per_byte": per_byte / math.log(2),
        "tokens": float(n * block_size),
        "windows": n,
        "split_windows": split_windows,
        "full_split": n == split_windows,
    }


def _ranks() -> tuple[int, int]:
    """(rank, world size) of the process group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _standard_error(values: np.ndarray) -> float:
    """``std(values, ddof=1) / √n``; 0 for fewer than two values."""
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def _ratio_standard_error(numerators: np.ndarray, denominators: np.ndarray) -> float:
    """The standard error of ``R = Σ numerators / Σ denominators`` over samples (Cochran 1977, ch. 6, the ratio
    estimator):
    ``√(Σ (yᵢ − R xᵢ)² / (n (n − 1))) / x̄``; 0 for fewer than two samples."""
    n = len(numerators)
    if n < 2 or not denominators.sum():
        return 0.0
    ratio = numerators.sum() / denominators.sum()
    residual = numerators - ratio * denominators
    return float(math.sqrt(float((residual**2).sum()) / (n * (n - 1))) / denominators.mean())


def ngram_baselines(
    train: np.ndarray, held_out: np.ndarray, vocab_size: int, token_bytes: np.ndarray
) -> dict[str, dict[str, float]]:
    """Cross-entropy on ``held_out`` of an add-one unigram and of an interpolated bigram
    ``λ·P(b|a) + (1-λ)·P(b)`` fitted on ``train`` (λ the best of a small grid on ``held_out``; a reference point,
    not a model). Returns nats/token and nats/byte for each."""
    train = np.asarray(train, dtype=np.int64)
    held = np.asarray(held_out, dtype=np.int64)
    unigram = (np.bincount(train, minlength=vocab_size) + 1.0) / (len(train) + vocab_size)
    pair_keys = train[:-1] * vocab_size + train[1:]
    keys, counts = np.unique(pair_keys, return_counts=True)
    context_counts = np.bincount(train[:-1], minlength=vocab_size).astype(np.float64)
    query = held[:-1] * vocab_size + held[1:]
    position = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    pair_count = np.where(keys[position] == query, counts[position], 0).astype(np.float64)
    conditional = pair_count / np.maximum(context_counts[held[:-1]], 1.0)
    p_unigram = unigram[held[1:]]
    n_bytes = float(token_bytes[held[1:]].sum())

    def scores(nats: float) -> dict[str, float]:
        return {"loss": nats, "nats_per_byte": nats * (len(held) - 1) / n_bytes}

    bigram = min(
        float(-np.mean(np.log(lam * conditional + (1 - lam) * p_unigram))) for lam in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)
    )
    return {"unigram": scores(float(-np.mean(np.log(p_unigram)))), "bigram": scores(bigram)}


def summarise(scores: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {f"{prefix}_{key}": value for key, value in scores.items()}
