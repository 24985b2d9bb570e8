"""The recall-hit decomposition of a language model's loss (Zoology, Arora et al. 2023, "Zoology: Measuring and
Improving Recall in Efficient Language Models", arXiv 2312.04927: the share of a gap between two models that
associative recall explains).

A scored token x_t of a window is a *recall hit* when the bigram (x_{t−1}, x_t) it completes already occurred in
the same window, at (x_{s−1}, x_s) with s < t: a model that can look the earlier occurrence up can predict it from
the context alone. Every other scored token is *other*. For a model, the loss splits into the mean cross-entropy
of the hits and of the others (:func:`hit_losses`, on exactly the windows and targets :func:`aot.eval.lm.evaluate_lm`
scores); for two models on the same windows, the share of the gap the hits explain is

    share = Δ_hits · n_hits / (Δ_all · n_all),     Δ = mean loss of the contender − mean loss of the reference,

the hits' part of the excess nats summed over all tokens (:func:`gap_share`; Δ_all · n_all = Δ_hits · n_hits +
Δ_other · n_other).

Many hits need no recall: a frequent bigram repeats in every window (on bytes, ``th`` and ``e ``) and a bigram
model predicts it from the previous token alone. Given the training split's bigram statistics
(:class:`BigramTable`), the hits are split further (our refinement, not Zoology's measure): *unpredicted* hits, whose
bigram the training split's bigram model gives probability p(x_t | x_{t−1}) < ``below`` (the model must look the
earlier occurrence up), and the rest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from aot.data.shards import eval_windows


def recall_hits(windows: torch.Tensor) -> torch.Tensor:
    """``windows`` (B, L) token ids → (B, L − 1) bool: target t + 1 of each window (the token at position t + 1,
    predicted from positions ≤ t) is a hit when the bigram (x_t, x_{t+1}) occurred at (x_{s−1}, x_s), 1 ≤ s ≤ t."""
    first, second = windows[:, :-1], windows[:, 1:]  # bigram i ends at position i + 1
    same = (first[:, :, None] == first[:, None, :]) & (second[:, :, None] == second[:, None, :])
    earlier = torch.ones(same.shape[-1], same.shape[-1], dtype=torch.bool, device=windows.device).tril(-1)
    return (same & earlier).any(dim=-1)


class BigramTable:
    """p(y | x) = count(x, y) / count(x) of the bigrams of ``tokens`` (a training split; 0 for a bigram it never
    holds), stored sparsely so that any vocabulary fits: the sorted keys x · V + y of the bigrams seen and their
    counts."""

    def __init__(self, tokens: np.ndarray, vocab_size: int) -> None:
        tokens = np.asarray(tokens, dtype=np.int64)
        self.vocab_size = vocab_size
        self.keys, self.counts = np.unique(tokens[:-1] * vocab_size + tokens[1:], return_counts=True)
        self.previous = np.bincount(tokens[:-1], minlength=vocab_size)

    def probability(self, first: np.ndarray, second: np.ndarray) -> np.ndarray:
        """p(second | first), elementwise."""
        first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
        keys = first * self.vocab_size + second
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        counts = np.where(self.keys[at] == keys, self.counts[at], 0)
        return counts / np.maximum(self.previous[first], 1)


@dataclass(frozen=True)
class HitLosses:
    """A model's nats summed over the recall hits and over the other scored tokens, and how many of each; of the
    hits, those the training split's bigram model does not predict (``unpredicted_*``: 0 when no table was given)."""

    hit_nats: float
    hits: int
    other_nats: float
    others: int
    unpredicted_hit_nats: float = 0.0
    unpredicted_hits: int = 0

    @property
    def hit_loss(self) -> float:
        return self.hit_nats / max(self.hits, 1)

    @property
    def other_loss(self) -> float:
        return self.other_nats / max(self.others, 1)

    @property
    def loss(self) -> float:
        return (self.hit_nats + self.other_nats) / max(self.hits + self.others, 1)

    @property
    def unpredicted_hit_loss(self) -> float:
        return self.unpredicted_hit_nats / max(self.unpredicted_hits, 1)

    @property
    def hit_share(self) -> float:
        """The share of the scored tokens that are hits."""
        return self.hits / max(self.hits + self.others, 1)

    def to_dict(self) -> dict[str, Any]:
        losses = {"hit_loss": self.hit_loss, "other_loss": self.other_loss, "loss": self.loss}
        return {**asdict(self), **losses, "unpredicted_hit_loss": self.unpredicted_hit_loss}


@torch.no_grad()
def hit_losses(
    model: nn.Module,
    tokens: np.ndarray,
    block_size: int,
    batch_size: int = 16,
    max_windows: int | None = None,
    device: torch.device | str = "cpu",
    bigrams: BigramTable | None = None,
    below: float = 0.1,
) -> HitLosses:
    """The loss of ``model`` on the windows of ``tokens`` that :func:`aot.eval.lm.evaluate_lm` scores (non-overlapping,
    ``block_size`` + 1 tokens each; all, or ``max_windows`` spread evenly), split into recall hits and the rest;
    with ``bigrams``, also the hits whose bigram it gives probability < ``below`` (see the module)."""
    hit_nats = other_nats = unpredicted_nats = 0.0
    hits = others = unpredicted = 0
    starts = eval_windows(tokens, block_size, max_windows)
    for first in range(0, len(starts), batch_size):
        rows = starts[first : first + batch_size]
        batch = torch.from_numpy(np.stack([np.asarray(tokens[s : s + block_size + 1], dtype=np.int64) for s in rows]))
        batch = batch.to(device)
        logits = model(batch[:, :-1])[0]
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        nats = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none").double()  # (B, block_size)
        hit = recall_hits(batch)
        hit_nats += float(nats[hit].sum())
        other_nats += float(nats[~hit].sum())
        hits += int(hit.sum())
        others += int((~hit).sum())
        if bigrams is not None:
            pairs = batch.cpu().numpy()
            rare = hit & torch.from_numpy(bigrams.probability(pairs[:, :-1], pairs[:, 1:]) < below).to(hit.device)
            unpredicted_nats += float(nats[rare].sum())
            unpredicted += int(rare.sum())
    return HitLosses(hit_nats, hits, other_nats, others, unpredicted_nats, unpredicted)


def gap_share(contender: HitLosses, reference: HitLosses) -> dict[str, Any]:
    """The gap of ``contender`` to ``reference`` (the same windows) on the hits, the others and all tokens, and the
    share of it the hits explain (``None`` when the models tie overall)."""
    if (contender.hits, contender.others) != (reference.hits, reference.others):
        raise ValueError("the two models were scored on different tokens; score them on the same windows")
    n_all = contender.hits + contender.others
    delta_all = contender.loss - reference.loss
    delta_hits = contender.hit_loss - reference.hit_loss
    delta_unpredicted = contender.unpredicted_hit_loss - reference.unpredicted_hit_loss
    return {
        "delta_hits": delta_hits,
        "delta_other": contender.other_loss - reference.other_loss,
        "delta_all": delta_all,
        "hit_share_of_gap": None if delta_all == 0 else delta_hits * contender.hits / (delta_all * n_all),
        "delta_unpredicted_hits": delta_unpredicted,
        "unpredicted_hit_share_of_gap": None
        if delta_all == 0 or not contender.unpredicted_hits
        else delta_unpredicted * contender.unpredicted_hits / (delta_all * n_all),
    }


__all__ = ["BigramTable", "HitLosses", "gap_share", "hit_losses", "recall_hits"]
