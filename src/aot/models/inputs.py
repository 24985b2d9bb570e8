"""Input checks of the models' Python API: a wrong rank, size, dtype or value is a one-line :class:`AotError`
that says what the model expects, instead of an IndexError or a shape mismatch deep inside.

Cheap by design: shapes and dtypes cost nothing; value checks (token ids in ``[0, vocab)``, finite images and
prompts) read the tensor once (min / max / isfinite), only for CPU tensors and never while ``torch.compile``
traces — on an accelerator they would force a device sync on every call (there the embedding's own device-side
assertion still stops out-of-range ids).
"""

from __future__ import annotations

import torch

from aot.errors import AotError


def _check_values(tensor: torch.Tensor) -> bool:
    return tensor.device.type == "cpu" and not torch.compiler.is_compiling() and tensor.numel() > 0


def check_token_ids(idx: torch.Tensor, vocab_size: int) -> None:
    """``idx``: (B, T) integer token ids in ``[0, vocab_size)``."""
    if not isinstance(idx, torch.Tensor):
        raise AotError(f"token ids must be a torch tensor of shape (batch, time), got {type(idx).__name__}")
    if idx.ndim != 2:
        hint = "; add the batch dimension with idx[None]" if idx.ndim == 1 else ""
        raise AotError(f"token ids must have shape (batch, time), got {tuple(idx.shape)}{hint}")
    if idx.dtype not in (torch.long, torch.int32):
        raise AotError(f"token ids must be torch.long (or torch.int32), got {idx.dtype}; convert with idx.long()")
    if _check_values(idx):
        low, high = int(idx.min()), int(idx.max())
        if low < 0 or high >= vocab_size:
            bad = low if low < 0 else high
            raise AotError(f"token id {bad} is outside the vocabulary [0, {vocab_size}) of this model")


def check_images(images: torch.Tensor, in_chans: int, image_size: int) -> None:
    """``images``: (B, in_chans, image_size, image_size), floating point, finite."""
    expected = f"(batch, {in_chans}, {image_size}, {image_size})"
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        shape = tuple(images.shape) if isinstance(images, torch.Tensor) else type(images).__name__
        raise AotError(f"images must have shape {expected}, got {shape}")
    if tuple(images.shape[1:]) != (in_chans, image_size, image_size):
        raise AotError(
            f"images must have shape {expected} for this model (in_chans={in_chans}, image_size={image_size}), "
            f"got {tuple(images.shape)}; resize the images or build the model for their size"
        )
    if not images.dtype.is_floating_point:
        raise AotError(f"images must be floating point (e.g. torch.float32 in [0, 1]), got {images.dtype}")
    if _check_values(images) and not bool(torch.isfinite(images).all()):
        raise AotError("images hold NaN or Inf values; clean the input (the model's output would be NaN)")


def check_prompt(xs: torch.Tensor, ys: torch.Tensor, n_dims: int, n_points: int) -> None:
    """In-context regression prompt: ``xs`` (B, n, n_dims), ``ys`` (B, n), 1 <= n <= n_points, finite."""
    if not isinstance(xs, torch.Tensor) or not isinstance(ys, torch.Tensor):
        raise AotError("xs and ys must be torch tensors of shapes (batch, points, n_dims) and (batch, points)")
    if xs.ndim != 3 or ys.ndim != 2 or tuple(ys.shape) != tuple(xs.shape[:2]):
        raise AotError(
            f"xs must have shape (batch, points, {n_dims}) and ys (batch, points), got {tuple(xs.shape)} and "
            f"{tuple(ys.shape)}"
        )
    n, dims = xs.shape[1], xs.shape[2]
    if dims != n_dims or not 1 <= n <= n_points:
        raise AotError(
            f"prompt of {n} points in {dims} dims does not fit this model (n_dims={n_dims}, 1..{n_points} points); "
            "rebuild the model or shorten the prompt"
        )
    if not (xs.dtype.is_floating_point and ys.dtype.is_floating_point):
        raise AotError(f"xs and ys must be floating point, got {xs.dtype} and {ys.dtype}")
    if _check_values(xs) and not (bool(torch.isfinite(xs).all()) and bool(torch.isfinite(ys).all())):
        raise AotError("the prompt holds NaN or Inf values; clean the input (the model's output would be NaN)")
