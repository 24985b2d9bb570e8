"""The image recipes of ViT / DeiT / CRATE training, per image with its own random generator, on PIL images.

Why PIL and numpy, not torchvision or timm: torchvision's PyPI wheels are built for the CUDA torch and do not import
beside a CPU torch (``operator torchvision::nms does not exist``), and timm's data pipeline imports torchvision. PIL
is what torchvision's and timm's transforms call for PIL images anyway (bilinear resizing with antialiasing,
``ImageOps`` / ``ImageEnhance`` for RandAugment), it installs everywhere (laptop, CI, a GPU node), and owning the
random draws lets each image's augmentation be a function of ``(seed, sample number)`` alone: the same in any worker,
with any number of workers, after any resume.

The algorithms follow torchvision's definitions (cited per function), so a recipe written for torchvision means the
same here:

- :func:`random_resized_crop`: ``RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3))`` (Szegedy et al. 2015);
- :func:`resize_center_crop`: ``Resize(size / crop_pct)`` + ``CenterCrop(size)`` (crop_pct 0.875: 256 → 224);
- :func:`rand_augment`: ``RandAugment(num_ops, magnitude, num_magnitude_bins=31)`` (Cubuk et al. 2020);
- :func:`mix_pairs`: mixup (Zhang et al. 2018) / CutMix (Yun et al. 2019) as timm's ``Mixup(mode="pair")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

Rng = np.random.Generator
AUGMENTS = ("pad-crop", "random-resized-crop")


def random_resized_crop(image: Any, size: int, rng: Rng, scale: tuple[float, float], ratio=(3 / 4, 4 / 3)) -> Any:
    """torchvision's ``RandomResizedCrop.get_params`` then a bilinear (antialiased) resize to ``size`` × ``size``:
    up to 10 tries of an area fraction uniform in ``scale`` and a log-uniform aspect ratio in ``ratio``; if none fits,
    the largest central crop whose aspect ratio lies in ``ratio``."""
    from PIL import Image

    width, height = image.size
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            break
    else:
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, round(width / min(ratio))
        elif in_ratio > max(ratio):
            w, h = round(height * max(ratio)), height
        else:
            w, h = width, height
        top, left = (height - h) // 2, (width - w) // 2
    return image.resize((size, size), Image.Resampling.BILINEAR, box=(left, top, left + w, top + h))


def resize_center_crop(image: Any, size: int, crop_pct: float = 0.875) -> Any:
    """torchvision's ``Resize(int(size / crop_pct))`` (the shorter side, bilinear) then ``CenterCrop(size)``."""
    from PIL import Image

    short = int(size / crop_pct)
    width, height = image.size
    if width <= height:
        new = (short, int(short * height / width))
    else:
        new = (int(short * width / height), short)
    if new != (width, height):
        image = image.resize(new, Image.Resampling.BILINEAR)
    width, height = image.size
    top, left = round((height - size) / 2.0), round((width - size) / 2.0)
    return image.crop((left, top, left + size, top + size))


def _magnitudes(bins: int, width: int, height: int) -> dict[str, tuple[np.ndarray, bool]]:
    """torchvision ``RandAugment._augmentation_space``: each op's magnitudes over ``bins`` and whether it is signed."""
    lin = np.linspace
    return {
        "Identity": (np.zeros(bins), False),
        "ShearX": (lin(0.0, 0.3, bins), True),
        "ShearY": (lin(0.0, 0.3, bins), True),
        "TranslateX": (lin(0.0, 150.0 / 331.0 * width, bins), True),
        "TranslateY": (lin(0.0, 150.0 / 331.0 * height, bins), True),
        "Rotate": (lin(0.0, 30.0, bins), True),
        "Brightness": (lin(0.0, 0.9, bins), True),
        "Color": (lin(0.0, 0.9, bins), True),
        "Contrast": (lin(0.0, 0.9, bins), True),
        "Sharpness": (lin(0.0, 0.9, bins), True),
        "Posterize": (8 - np.round(np.arange(bins) / ((bins - 1) / 4)).astype(int), False),
        "Solarize": (lin(255.0, 0.0, bins), False),
        "AutoContrast": (np.zeros(bins), False),
        "Equalize": (np.zeros(bins), False),
    }


def _apply_op(image: Any, op: str, value: float) -> Any:
    """One RandAugment operation with magnitude ``value`` (torchvision's ``_apply_op`` on a PIL image; geometric ops
    fill with black, nearest-neighbour resampling)."""
    from PIL import Image, ImageEnhance, ImageOps

    fill = (0,) * len(image.getbands())
    affine, nearest = Image.Transform.AFFINE, Image.Resampling.NEAREST
    if op == "ShearX":  # torchvision: affine with shear atan(value) degrees about the corner (0, 0)
        return image.transform(image.size, affine, (1, value, 0, 0, 1, 0), nearest, fillcolor=fill)
    if op == "ShearY":
        return image.transform(image.size, affine, (1, 0, 0, value, 1, 0), nearest, fillcolor=fill)
    if op == "TranslateX":
        return image.transform(image.size, affine, (1, 0, -int(value), 0, 1, 0), nearest, fillcolor=fill)
    if op == "TranslateY":
        return image.transform(image.size, affine, (1, 0, 0, 0, 1, -int(value)), nearest, fillcolor=fill)
    if op == "Rotate":
        return image.rotate(value, nearest, fillcolor=fill)
    if op in ("Brightness", "Color", "Contrast", "Sharpness"):
        return getattr(ImageEnhance, op)(image).enhance(1.0 + value)
    if op == "Posterize":
        return ImageOps.posterize(image, int(value))
    if op == "Solarize":
        return ImageOps.solarize(image, math.ceil(value))  # pixels < value stay, as torchvision's float threshold
    if op == "AutoContrast":
        return ImageOps.autocontrast(image)
    if op == "Equalize":
        return ImageOps.equalize(image)
    return image  # Identity


def rand_augment(image: Any, rng: Rng, num_ops: int = 2, magnitude: int = 9, bins: int = 31) -> Any:
    """torchvision's ``RandAugment``: ``num_ops`` operations drawn uniformly (with replacement) from the 14 above, each
    at magnitude bin ``magnitude`` of ``bins``, negated with probability ½ where the op is signed."""
    space = _magnitudes(bins, *image.size)
    names = list(space)
    for _ in range(num_ops):
        op = names[int(rng.integers(len(names)))]
        values, signed = space[op]
        value = float(values[magnitude])
        if signed and rng.random() < 0.5:
            value = -value
        image = _apply_op(image, op, value)
    return image


def pad_crop_flip(pixels: np.ndarray, rng: Rng, padding: int, flip: bool) -> np.ndarray:
    """CIFAR's augmentation on one (C, H, W) uint8 image: zero-pad by ``padding``, cut a random window of the original
    size, mirror left-right with probability ½ (the per-image form of :func:`aot.data.images.random_crop_flip`)."""
    c, h, w = pixels.shape
    if padding:
        top, left = (int(v) for v in rng.integers(0, 2 * padding + 1, size=2))
        padded = np.zeros((c, h + 2 * padding, w + 2 * padding), dtype=pixels.dtype)
        padded[:, padding : padding + h, padding : padding + w] = pixels
        pixels = padded[:, top : top + h, left : left + w]
    if flip and rng.random() < 0.5:
        pixels = pixels[:, :, ::-1]
    return np.ascontiguousarray(pixels)


@dataclass(frozen=True)
class ImageRecipe:
    """What becomes of one decoded image: converted to ``mode`` (``RGB`` or ``L``), then

    - training (``rng`` given), ``augment="random-resized-crop"``: RandomResizedCrop(``size``, ``scale``), a flip with
      probability ½ (``flip``), RandAugment(``randaug_ops``, ``randaug_magnitude``) when ``randaug_ops > 0``;
    - training, ``augment="pad-crop"``: resize-and-center-crop to ``size`` (images of another size), then CIFAR's pad
      by ``padding``, random crop and flip;
    - evaluation (``rng=None``): resize the shorter side to ``size / crop_pct`` and center-crop ``size``
      (``crop_pct=1``: resize to ``size`` only).

    The result is uint8 (C, ``size``, ``size``); normalisation happens on the batch, in the training process."""

    size: int
    mode: str = "RGB"
    augment: str = "random-resized-crop"
    scale: tuple[float, float] = (0.08, 1.0)
    flip: bool = True
    padding: int = 0
    randaug_ops: int = 0
    randaug_magnitude: int = 9
    crop_pct: float = 0.875

    def __call__(self, image: Any, rng: Rng | None) -> np.ndarray:
        if image.mode != self.mode:
            image = image.convert(self.mode)
        if rng is None or self.augment == "pad-crop":  # evaluation, or CIFAR's crop at the model's size
            image = resize_center_crop(image, self.size, 1.0 if rng is not None else self.crop_pct)
            pixels = _chw(image)
            return pixels if rng is None else pad_crop_flip(pixels, rng, self.padding, self.flip)
        image = random_resized_crop(image, self.size, rng, self.scale)
        if self.flip and rng.random() < 0.5:
            from PIL import Image

            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        if self.randaug_ops:
            image = rand_augment(image, rng, self.randaug_ops, self.randaug_magnitude)
        return _chw(image)


def _chw(image: Any) -> np.ndarray:
    pixels = np.asarray(image, dtype=np.uint8)
    return pixels[None].copy() if pixels.ndim == 2 else np.ascontiguousarray(pixels.transpose(2, 0, 1))


# -- batch-level: mixup / CutMix ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Mixing:
    """Mixup / CutMix in timm's ``pair`` mode, over pairs of rows ``(2k, 2k + 1)`` of the global batch (a random pair:
    the rows are a random permutation). Pair ``k`` of step ``s`` draws from its own generator seeded by
    ``(seed, s, k)``: with probability ``prob`` it is mixed, by CutMix with probability ``switch_prob`` when both are
    on, with λ ~ Beta(α, α) (``mixup`` / ``cutmix`` are the α's; 0 turns one off). Targets become soft, ``λ·onehot(a)
    + (1 − λ)·onehot(b)``, with λ the pasted area's complement for CutMix; the loss's label smoothing applies on
    top, as timm's ``mixup_target`` does.

    The draws (:meth:`plan`: a few numbers per pair) are made on the host with the batch; the mixing itself
    (:meth:`apply`) runs wherever the images are, on the GPU in a GPU run."""

    mixup: float = 0.0
    cutmix: float = 0.0
    prob: float = 1.0
    switch_prob: float = 0.5
    seed: int = 0

    @property
    def active(self) -> bool:
        return (self.mixup > 0 or self.cutmix > 0) and self.prob > 0

    def plan(self, step: int, first_row: int, rows: int, height: int, width: int) -> torch.Tensor:
        """The draws for rows ``[first_row, first_row + rows)`` of step ``step``'s global batch (``first_row`` and
        ``rows`` even: every pair lies inside): float32 (rows // 2, 6) of ``λ, cut, y0, y1, x0, x1`` per pair
        (``λ = 1``: not mixed; ``cut = 1``: CutMix of the box ``[y0, y1) × [x0, x1)``, whose complement λ is)."""
        plan = torch.zeros(rows // 2, 6)
        plan[:, 0] = 1.0
        for pair in range(rows // 2):
            rng = np.random.default_rng([self.seed, step, first_row // 2 + pair, 0x6D6978])
            if rng.random() >= self.prob:
                continue
            cut = self.cutmix > 0 and (self.mixup <= 0 or rng.random() < self.switch_prob)
            lam = float(rng.beta(self.cutmix, self.cutmix) if cut else rng.beta(self.mixup, self.mixup))
            if cut:
                cut_h, cut_w = int(height * math.sqrt(1 - lam)), int(width * math.sqrt(1 - lam))
                cy, cx = int(rng.integers(height)), int(rng.integers(width))
                y0, y1 = max(cy - cut_h // 2, 0), min(cy + cut_h // 2, height)
                x0, x1 = max(cx - cut_w // 2, 0), min(cx + cut_w // 2, width)
                lam = 1.0 - (y1 - y0) * (x1 - x0) / (height * width)
                plan[pair] = torch.tensor([lam, 1.0, y0, y1, x0, x1], dtype=torch.float64).float()
            else:
                plan[pair, 0] = lam
        return plan

    @staticmethod
    def apply(
        images: torch.Tensor, labels: torch.Tensor, plan: torch.Tensor, num_classes: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix the pairs of ``images`` (b, C, H, W) and one-hot ``labels`` as ``plan`` (:meth:`plan`) says, on their
        device: row ``r`` with its partner ``r xor 1``."""
        b, _, h, w = images.shape
        per_row = plan.to(images.device).repeat_interleave(2, dim=0)  # each pair's draws on both its rows
        partner = torch.arange(b, device=images.device) ^ 1
        lam, cut = per_row[:, 0], per_row[:, 1] > 0
        target = torch.nn.functional.one_hot(labels, num_classes).to(torch.float32)
        lam_view = lam.view(b, 1, 1, 1).to(images.dtype)
        mixed = lam_view * images + (1 - lam_view) * images[partner]
        ys = torch.arange(h, device=images.device).view(1, 1, h, 1)
        xs = torch.arange(w, device=images.device).view(1, 1, 1, w)
        y0, y1, x0, x1 = (per_row[:, k].view(b, 1, 1, 1) for k in range(2, 6))
        box = (ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)
        pasted = torch.where(box, images[partner], images)
        out = torch.where(cut.view(b, 1, 1, 1), pasted, mixed)
        lam_target = lam.view(b, 1).to(torch.float32)
        return out, lam_target * target + (1 - lam_target) * target[partner]

    def __call__(
        self, images: torch.Tensor, labels: torch.Tensor, num_classes: int, step: int, first_row: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mix rows ``[first_row, first_row + len(images))`` of step ``step``'s global batch: :meth:`plan` then
        :meth:`apply`."""
        b, _, h, w = images.shape
        return self.apply(images, labels, self.plan(step, first_row, b, h, w), num_classes)
