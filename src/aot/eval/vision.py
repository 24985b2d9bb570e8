"""Image-classification evaluation: mean cross-entropy, top-1 and top-5 accuracy, and the confusion matrix.

``top-k = (1/N) Σ_i 1[y_i ∈ the k largest logits of image i]``; the loss is the plain cross-entropy (no label
smoothing), so it compares across recipes. ``confusion[t, p]`` counts images of true class t predicted as p.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn


@torch.no_grad()
def evaluate_classifier(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    normalise: Callable[[torch.Tensor], torch.Tensor],
    batch_size: int = 256,
    limit: int | None = None,
    device: torch.device | str = "cpu",
    num_classes: int | None = None,
) -> dict:
    """Scores on the first ``limit`` images (all when ``None``): ``loss``, ``top1``, ``top5`` (top-k for
    k = min(5, classes)), ``images``, and ``confusion`` (a list of rows) when ``num_classes`` is given."""
    n = len(labels) if limit is None else min(limit, len(labels))
    batches = (
        (normalise(images[first : min(first + batch_size, n)]), labels[first : min(first + batch_size, n)])
        for first in range(0, n, batch_size)
    )
    return scores_of(classify_counts(model, batches, device, num_classes), num_classes)


@torch.no_grad()
def classify_counts(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device | str = "cpu",
    num_classes: int | None = None,
    prepare: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """The sums behind the scores, over ``(images, labels)`` batches (normalised, or made so by ``prepare`` once on
    ``device``), as one float64 vector
    ``[loss sum, top-1 hits, top-5 hits, images, confusion (classes² entries)...]``: sums add across processes
    (one ``all_reduce``) and across parts of a split before :func:`scores_of` divides."""
    classes = num_classes or 1
    counts = torch.zeros(4 + classes * classes, dtype=torch.float64)
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        if prepare is not None:
            x = prepare(x)
        logits = model(x)
        logits = logits if logits.dtype == torch.float64 else logits.float()  # bf16 autocast → fp32 for the loss
        k = min(5, logits.shape[-1])
        best = logits.topk(k, dim=-1).indices
        counts[0] += float(F.cross_entropy(logits, y, reduction="sum"))
        counts[1] += int((best[:, 0] == y).sum())
        counts[2] += int((best == y[:, None]).any(dim=-1).sum())
        counts[3] += len(y)
        if num_classes:
            pairs = (y * num_classes + best[:, 0]).cpu()
            counts[4:] += torch.bincount(pairs, minlength=num_classes * num_classes).to(torch.float64)
    return counts


def scores_of(counts: torch.Tensor, num_classes: int | None = None) -> dict:
    """``loss``, ``top1``, ``top5``, ``images`` (and ``confusion`` with ``num_classes``) of
    :func:`classify_counts`."""
    n = int(counts[3])
    scores: dict = {
        "loss": float(counts[0]) / max(n, 1),
        "top1": float(counts[1]) / max(n, 1),
        "top5": float(counts[2]) / max(n, 1),
        "images": n,
    }
    if num_classes:
        scores["confusion"] = counts[4:].round().to(torch.int64).view(num_classes, num_classes).tolist()
    return scores
