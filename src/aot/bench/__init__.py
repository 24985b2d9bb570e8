"""Cost of every block type side by side: parameters, FLOPs, memory, time per pass, MFU (`aot bench`).

The small pure functions a trainer needs for an MFU on every log line:

>>> from aot.bench import flops_per_token, mfu, peak_flops
>>> fpt = flops_per_token(cfg, seq_len=256).training()      # model FLOPs per token of a training step
>>> mfu(fpt, tokens_per_second, peak_flops("cuda", torch.bfloat16))
"""

from aot.bench.flops import FlopsPerToken, flops_per_token, measure_flops
from aot.bench.mfu import achieved_flops, mfu
from aot.bench.peaks import GPU_PEAK_FLOPS, gpu_peak_flops, measure_matmul_peak, peak_flops

__all__ = [
    "GPU_PEAK_FLOPS",
    "FlopsPerToken",
    "achieved_flops",
    "flops_per_token",
    "gpu_peak_flops",
    "measure_flops",
    "measure_matmul_peak",
    "mfu",
    "peak_flops",
]
