"""Image-classification evaluation: mean cross-entropy, top-1 and top-5 accuracy, and the confusion matrix.

``top-k = (1/N) Σ_i 1[y_i ∈ the k largest logits of image i]``; the loss is the plain cross-entropy (no label
smoothing), so it compares across recipes. ``confusion[t, p]`` counts images of true class t predicted as p.
"""

from __future__ import annotations

from collections.abc import Callable

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
    total_loss, top1, top5 = 0.0, 0, 0
    confusion = torch.zeros(num_classes or 1, num_classes or 1, dtype=torch.int64)
    for first in range(0, n, batch_size):
        x = normalise(images[first : min(first + batch_size, n)]).to(device)
        y = labels[first : min(first + batch_size, n)].to(device)
        logits = model(x)
        logits = logits if logits.dtype == torch.float64 else logits.float()  # bf16 autocast → fp32 for the loss
        total_loss += float(F.cross_entropy(logits, y, reduction="sum"))
        k = min(5, logits.shape[-1])
        best = logits.topk(k, dim=-1).indices
        top1 += int((best[:, 0] == y).sum())
        top5 += int((best == y[:, None]).any(dim=-1).sum())
        if num_classes:
            pairs = (y * num_classes + best[:, 0]).cpu()
            confusion += torch.bincount(pairs, minlength=num_classes * num_classes).view(num_classes, num_classes)
    scores: dict = {"loss": total_loss / max(n, 1), "top1": top1 / max(n, 1), "top5": top5 / max(n, 1), "images": n}
    if num_classes:
        scores["confusion"] = confusion.tolist()
    return scores
