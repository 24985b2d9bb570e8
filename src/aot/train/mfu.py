"""Model FLOPs utilisation: an analytic FLOP estimate per sample and a peak measured once on this device.

The estimate is nanoGPT's (Kaplan et al. / PaLM appendix B): ``6·N`` FLOPs per token for the matrix multiplies
of forward + backward over the N parameters that multiply activations (non-embedding ones plus the output head),
plus ``12·L·H·p·T`` per token for the attention
scores and their weighted sum (causality not discounted). A dedicated FLOP counter may replace it.
"""

from __future__ import annotations

import time

import torch


def flops_per_token(matmul_params: int, n_layer: int, n_head: int, head_dim: int, context: int) -> float:
    """Training FLOPs (forward + backward) per token: ``6 N + 12 L H p T``."""
    return 6.0 * matmul_params + 12.0 * n_layer * n_head * head_dim * context


def measure_peak_flops(device: torch.device, dtype: torch.dtype, size: int = 2048, seconds: float = 0.5) -> float:
    """Achievable matmul FLOP/s, timed once on ``device`` in ``dtype`` (a stand-in for a datasheet peak)."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    a @ b  # warm up
    _sync(device)
    count, start = 0, time.perf_counter()
    while True:
        a @ b
        count += 1
        if count % 4 == 0:
            _sync(device)
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return 2.0 * size**3 * count / elapsed


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
