"""Model FLOPs utilisation: the share of a peak FLOP/s that a run's useful FLOPs reach.

    MFU = FLOPs per token × tokens per second / peak FLOP/s

with FLOPs per token from :func:`aot.bench.flops.flops_per_token` (model FLOPs: ``.training()`` for a
training step, ``.forward`` for inference) and the peak from :mod:`aot.bench.peaks`. These are small pure
functions so that a trainer can print an MFU on every log line. :func:`bounded_mfu` is the one a run reports: a
run cannot do more than its machine's peak, so a rate above the peak means the peak is wrong (measured under load)
and is raised to the rate — MFU is never above 1.
"""

from __future__ import annotations

from aot.errors import AotError


def achieved_flops(flops_per_token: float, tokens_per_second: float) -> float:
    """FLOP/s a run achieves: FLOPs per token × tokens per second."""
    return flops_per_token * tokens_per_second


def mfu(flops_per_token: float, tokens_per_second: float, peak_flops: float) -> float:
    """Model FLOPs utilisation as a fraction (0.42 = 42 %) of ``peak_flops`` (FLOP/s)."""
    if peak_flops <= 0:
        raise AotError(f"peak_flops={peak_flops} must be positive; measure it or look it up in aot.bench.peaks")
    return achieved_flops(flops_per_token, tokens_per_second) / peak_flops


def bounded_mfu(flops_per_token: float, tokens_per_second: float, peak_flops: float) -> tuple[float, float]:
    """``(MFU, the peak it divides by)``: ``peak_flops``, or the achieved FLOP/s when that exceeds it (then MFU is
    1 and the caller says the peak was raised), so MFU is never above 1."""
    peak = max(peak_flops, achieved_flops(flops_per_token, tokens_per_second))
    return mfu(flops_per_token, tokens_per_second, peak), peak
