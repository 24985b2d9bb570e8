"""How a vision run's images reach the model: which batch source, which evaluation, which normalisation.

Two paths, chosen by :func:`uses_workers`:

- **in memory, vectorised** (:class:`aot.data.images.ImageBatches`): a registered set (Fashion-MNIST, MNIST, digits,
  ``hf:``) with CIFAR's pad-crop-flip and no RandAugment. The CPU recipes and their recorded results run here,
  unchanged.
- **decoded by workers** (:class:`aot.data.image_stream.ImageStream`): a folder (ImageNet's layout, class folders,
  tar shards), or any set with RandomResizedCrop / RandAugment. Evaluation goes through the evaluation recipe (resize,
  center crop) in workers too, and under torchrun each process scores its share of the split (one ``all_reduce``).

Mixup / CutMix (:class:`aot.data.image_transforms.Mixing`) work on both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from aot.data.image_files import ArraySplit, ImageFiles, ImageSplit
from aot.data.image_stream import (
    ImageStream,
    ModelInputs,
    Normaliser,
    default_workers,
    eval_batches,
    subset_indices,
)
from aot.data.image_transforms import ImageRecipe, Mixing
from aot.data.images import EpochOrder, ImageBatches, ImageData, sample_stats
from aot.eval.vision import classify_counts, evaluate_classifier, scores_of

VisionData = ImageData | ImageFiles


def augment_of(data: VisionData, augment: str) -> str:
    """``auto`` → CIFAR's ``pad-crop`` for the in-memory sets, ``random-resized-crop`` for folders."""
    if augment != "auto":
        return augment
    return "pad-crop" if isinstance(data, ImageData) else "random-resized-crop"


def uses_workers(data: VisionData, cfg: Any) -> bool:
    """Whether the run's images go through the worker pipeline (see the module docstring)."""
    return not isinstance(data, ImageData) or augment_of(data, cfg.augment) != "pad-crop" or cfg.randaug_ops > 0


def split_of(data: VisionData, name: str) -> ImageSplit:
    if isinstance(data, ImageData):
        images, labels = data.splits[name]
        return ArraySplit(images, labels.numpy())
    return data.splits[name]


def recipe_of(data: VisionData, cfg: Any, image_size: int, in_chans: int) -> ImageRecipe:
    """The per-image recipe of the data config ``cfg`` for a model taking ``in_chans`` × ``image_size``²."""
    augment = augment_of(data, cfg.augment)
    flip = (data.flip if isinstance(data, ImageData) else True) if cfg.flip is None else cfg.flip
    return ImageRecipe(
        size=image_size,
        mode="RGB" if in_chans == 3 else "L",
        augment=augment,
        scale=(float(cfg.scale[0]), float(cfg.scale[1])),
        flip=flip,
        padding=cfg.padding,
        randaug_ops=cfg.randaug_ops,
        randaug_magnitude=cfg.randaug_magnitude,
        crop_pct=cfg.crop_pct,
    )


def workers_of(cfg: Any) -> int:
    return default_workers() if cfg.workers is None else cfg.workers


def normaliser_of(data: VisionData, cfg: Any, recipe: ImageRecipe) -> Normaliser:
    """The config's mean / std when given (ImageNet's in the paper's configs), an in-memory set's own, or those of a
    bounded sample of training images (``cfg.stats_images``), stored on ``data`` for results.json."""
    if cfg.mean is not None and cfg.std is not None:
        data.mean, data.std = list(cfg.mean), list(cfg.std)
    elif isinstance(data, ImageFiles) or data.image_shape[0] != (3 if recipe.mode == "RGB" else 1):
        data.mean, data.std = sample_stats(split_of(data, "train"), recipe, cfg.stats_images, workers_of(cfg))
    assert data.mean is not None and data.std is not None
    return Normaliser(data.mean, data.std)


def mixing_of(cfg: Any, seed: int) -> Mixing:
    return Mixing(cfg.mixup, cfg.cutmix, cfg.mix_prob, cfg.switch_prob, seed)


def batch_source(
    data: VisionData, cfg: Any, batch_size: int, seed: int, recipe: ImageRecipe
) -> tuple[Any, ModelInputs]:
    """The trainer's batch source for data config ``cfg`` (see the module docstring), and what turns its batches into
    the model's inputs and the loss's targets on the device."""
    mixing = mixing_of(cfg, seed)
    if not uses_workers(data, cfg):
        assert isinstance(data, ImageData)
        batches = ImageBatches(data, batch_size, seed=seed, padding=cfg.padding, flip=cfg.flip, mixing=mixing)
        return batches, ModelInputs(None, data.num_classes)  # normalised and mixed on the host already
    train = split_of(data, "train")
    order = EpochOrder(len(train), batch_size, seed)
    stream = ImageStream(train, recipe, order, batch_size, seed, workers=workers_of(cfg), mixing=mixing)
    return stream, ModelInputs(normaliser_of(data, cfg, recipe), data.num_classes)


def _all_reduce(counts: torch.Tensor, device: torch.device) -> torch.Tensor:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return counts
    on_device = counts.to(device)
    dist.all_reduce(on_device)
    return on_device.cpu()


def evaluate_split(
    model: nn.Module,
    data: VisionData,
    split: str,
    cfg: Any,
    recipe: ImageRecipe,
    batch_size: int,
    limit: int | None,
    device: torch.device,
    num_classes: int | None = None,
    unreadable: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Loss / top-1 / top-5 (and the confusion matrix with ``num_classes``) on ``limit`` images of ``split`` (all when
    None): in memory as before, or through the evaluation recipe in workers, each process scoring every
    ``world``-th image and the sums added across processes."""
    if not uses_workers(data, cfg):
        assert isinstance(data, ImageData)
        x, y = data.splits[split]
        return evaluate_classifier(model, x, y, data.normalise, batch_size, limit, device, num_classes)
    images = split_of(data, split)
    chosen = subset_indices(len(images), limit)
    if dist.is_available() and dist.is_initialized():
        chosen = chosen[dist.get_rank() :: dist.get_world_size()]
    normalise = Normaliser(data.mean or [0.0], data.std or [1.0])  # on the device, after the uint8 batch moved
    batches = eval_batches(images, recipe, np.asarray(chosen), batch_size, workers_of(cfg), None, unreadable)
    counts = classify_counts(model, batches, device, num_classes, prepare=normalise)
    return scores_of(_all_reduce(counts, device), num_classes)
