"""Where a training step's time goes: matmuls, the fused attention kernel, and everything else.

``torch.profiler`` records every aten op of a few training steps; each op's *self* time (excluding the ops
it calls) goes to one category by name:

- ``matmul``: the dense products (``mm``, ``addmm``, ``bmm``, ``baddbmm``) — linear layers, LM head;
- ``attention``: the fused scaled-dot-product-attention kernels, forward and backward (any backend);
- ``other``: element-wise work and the rest (norms, activations, residual adds, softmax, cross-entropy,
  the optimizer, fills and copies).

Dividing each category's FLOPs by its time says which part runs below the hardware's peak. The dense
products do 3 × ``FlopsPerToken.dense`` per token; the attention kernel's real work is the unmasked part
(``attention_causal``) of its 2 forward products and 5 backward ones (the backward recomputes the scores):
3.5 × ``attention_causal``. The profiler's own overhead makes the profiled step a little slower than an
unprofiled one; shares are what to read.

On CPU the self time is the wall time of the op on the calling thread (intra-op worker threads record no
events; the autograd engine runs CPU backward ops on the caller); on CUDA it is the device time of the
kernels each op launched (not yet checked on a GPU).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from aot.bench.flops import FlopsPerToken

CATEGORIES = ("matmul", "attention", "other")
_MATMUL_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"})


def op_category(name: str) -> str:
    """The category of a profiler op name (``aten::mm`` → ``matmul``, SDPA kernels → ``attention``)."""
    if name in _MATMUL_OPS:
        return "matmul"
    if "scaled_dot_product" in name and not name.startswith("autograd::") and not name.endswith("Backward0"):
        return "attention"
    return "other"


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Send file descriptor 2 to /dev/null for the duration: the profiler's C++ side (kineto) prints a
    line on every start and stop that no setting turns off. Python exceptions still propagate."""
    try:
        saved = os.dup(2)
    except OSError:  # no usable fd 2 (embedded interpreters): leave it alone
        yield
        return
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def time_breakdown(
    step: Callable[[], Any], device: torch.device | str = "cpu", steps: int = 3, warmup: int = 1
) -> dict[str, float]:
    """Seconds per call of ``step`` by category (:data:`CATEGORIES`), from ``steps`` profiled calls, plus
    ``profiled_step``: the wall time of one profiled call."""
    device = torch.device(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for _ in range(warmup):
        step()
    with _native_stderr_silenced(), profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - start
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    for event in prof.key_averages():
        if event.device_type != DeviceType.CPU:  # CUDA kernels: already counted in the op that launched them
            continue
        self_us = event.self_device_time_total if device.type == "cuda" else event.self_cpu_time_total
        seconds[op_category(event.key)] += self_us * 1e-6 / steps
    seconds["profiled_step"] = wall / steps
    return seconds


def rest_seconds(seconds: dict[str, float]) -> float:
    """The profiled step's time outside the two kinds of products (element-wise ops, optimizer, copies,
    Python): ``profiled_step − matmul − attention``, at least 0."""
    return max(0.0, seconds["profiled_step"] - seconds["matmul"] - seconds["attention"])


def category_rates(seconds: dict[str, float], flops: FlopsPerToken, tokens: int) -> dict[str, float]:
    """FLOP/s each category achieves: dense products (3 × dense per token) and the attention kernel's
    unmasked work including the recomputed scores (3.5 × attention_causal per token)."""
    done = {"matmul": 3 * flops.dense * tokens, "attention": 3.5 * flops.attention_causal * tokens}
    return {name: work / seconds[name] for name, work in done.items() if seconds.get(name, 0.0) > 0}


__all__ = ["CATEGORIES", "category_rates", "op_category", "rest_seconds", "time_breakdown"]
