"""The `--device` option of every command: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``, checked once."""

from __future__ import annotations

import torch

from aot.errors import AotError


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` is CUDA when available (this process's ``local_rank`` under torchrun), else the CPU; a device
    that does not exist here is a one-line error."""
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise AotError(f"--device {name!r} is not a device; use cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise AotError("--device cuda was asked for but no CUDA device is available; use --device cpu")
    if device.type == "cuda" and device.index is None:
        device = torch.device(f"cuda:{local_rank}")
    return device
