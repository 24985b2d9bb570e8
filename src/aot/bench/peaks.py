"""Peak FLOP/s: a table of dense tensor-core peaks for known GPUs, and a matmul peak measured in this run.

The table holds the vendors' dense (no 2:4 sparsity) figures for the SXM parts unless the name says PCIe /
NVL; ``fp32`` is plain FP32 (CUDA cores), ``tf32`` what fp32 matmuls reach with TF32 enabled.
On a CPU there is no honest table: :func:`measure_matmul_peak` times large matmuls of the dtype in question, and
:func:`cpu_peak_flops` keeps that measurement per machine (:mod:`aot.bench.machine_cache`) with its date and the
load average when it was taken. On a busy machine a measured peak is low and an MFU divided by it reads high (a
run reported MFU 1.09 against a peak cached under load), so the peak a run divides by is never one measured under
load: only a quiet measurement (1-minute load average at most :data:`QUIET_LOAD` of the cores) is cached, and a
run takes the larger of that and a short measurement of its own. ``aot bench --refresh-peak`` measures it again.
A run whose achieved rate still exceeds its peak raises the peak to it and says so
(:func:`aot.bench.mfu.bounded_mfu`): MFU is never above 1.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from aot.bench.machine_cache import cache_path, now_utc, read_entry, write_entry
from aot.errors import AotError

#: dense peak FLOP/s by GPU and dtype, from NVIDIA's data sheets (their tensor-core figures "with sparsity" halved).
#: H800 and GH200 have the H100 SXM's tensor cores; L40S is an Ada card; B200 is Blackwell (HGX B200).
GPU_PEAK_FLOPS: dict[str, dict[str, float]] = {
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51.2e12},
    "H100 NVL": {"bf16": 835e12, "fp16": 835e12, "tf32": 418e12, "fp32": 60e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},  # SXM5
    "H200 NVL": {"bf16": 835e12, "fp16": 835e12, "tf32": 418e12, "fp32": 60e12},
    "H200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},  # SXM
    "H800 PCIe": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51.2e12},
    "H800": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},  # SXM5
    "GH200": {"bf16": 989e12, "fp16": 989e12, "tf32": 494e12, "fp32": 67e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "tf32": 183e12, "fp32": 91.6e12},
    "B200": {"bf16": 2250e12, "fp16": 2250e12, "tf32": 1100e12, "fp32": 75e12},
}

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def dtype_name(dtype: torch.dtype, tf32: bool = False) -> str:
    """The table key of a dtype: fp32 matmuls with TF32 enabled count as ``tf32``."""
    name = DTYPE_NAMES.get(dtype)
    if name is None:
        raise AotError(f"no peak FLOP/s for dtype {dtype}; use float32, bfloat16 or float16")
    return "tf32" if name == "fp32" and tf32 else name


def gpu_peak_flops(device_name: str, dtype: torch.dtype = torch.bfloat16, tf32: bool = False) -> float | None:
    """Dense peak FLOP/s of a known GPU (``torch.cuda.get_device_name()``), or None when it is not in the
    table. The most specific name wins ("NVIDIA H100 PCIe" → "H100 PCIe", "NVIDIA H100 80GB HBM3" → "H100")."""
    key = dtype_name(dtype, tf32)
    for name in sorted(GPU_PEAK_FLOPS, key=len, reverse=True):
        if name.lower() in device_name.lower():
            return GPU_PEAK_FLOPS[name][key]
    return None


def measure_matmul_peak(
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    sizes: tuple[int, ...] = (1024, 2048),
    repeat: int = 5,
) -> dict[str, float]:
    """The best FLOP/s of square (n × n) @ (n × n) matmuls of ``dtype`` on ``device`` (2·n³ FLOPs each; median
    of ``repeat`` timings after warm-up, best over ``sizes``). Returns {"peak": FLOP/s, "n<size>": FLOP/s...}."""
    from aot.bench.timing import median_seconds

    device = torch.device(device)
    result: dict[str, float] = {}
    for n in sizes:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)

        def product(a: torch.Tensor = a, b: torch.Tensor = b) -> torch.Tensor:
            return torch.mm(a, b)

        seconds = median_seconds(product, device=device, warmup=2, repeat=repeat)
        result[f"n{n}"] = 2 * n**3 / seconds
    result["peak"] = max(result.values())
    return result


REFRESH_COMMAND = "aot bench --refresh-peak"
_measured: dict[tuple[str, torch.dtype], float] = {}

#: a measurement is quiet (may be cached) when the 1-minute load average is at most this share of the cores
QUIET_LOAD = 0.5
#: the short measurement every run makes of its own: one size, a few repeats (a fraction of a second)
SHORT_SIZES, SHORT_REPEAT = (512,), 3


def _measurement(dtype: torch.dtype, load: float, cores: int, short: bool) -> dict:
    """A CPU matmul peak measured now (``short``: :data:`SHORT_SIZES`, else the full sizes), recorded with the load
    it was measured under (read before it, so its own work does not count)."""
    sizes, repeat = (SHORT_SIZES, SHORT_REPEAT) if short else ((1024, 2048), 5)
    return {
        "peak": measure_matmul_peak(dtype, "cpu", sizes, repeat)["peak"],
        "date": now_utc(),
        "load_1min": load,
        "cpu_count": cores,
        "busy": load > QUIET_LOAD * cores,
        "refresh": REFRESH_COMMAND,
    }


def cpu_peak_flops(dtype: torch.dtype = torch.float32, refresh: bool = False, path: Path | None = None) -> dict:
    """This machine's CPU matmul peak for ``dtype``, never one measured under load: ``{"peak": FLOP/s, "date",
    "load_1min", "cpu_count", "busy", "refresh": command, "source": "cached" | "fresh"}``.

    - A measurement is cached (:mod:`aot.bench.machine_cache`) only when it was quiet: the 1-minute load average at
      most :data:`QUIET_LOAD` × the cores (``"busy": false``); a cached entry that was not (written before this
      rule) is ignored.
    - Each call measures a peak now and returns the larger of it and the cached quiet one: under load the fresh
      one is low and the quiet one wins; a cached peak below what the machine does now gives way (and a quiet
      fresh one then replaces it in the cache).
    - The fresh one is the full measurement (a few seconds) when the machine is quiet and has no quiet entry, or
      with ``refresh`` (``aot bench --refresh-peak``); otherwise a short one (:data:`SHORT_SIZES`, a fraction of
      a second), so a run on a busy machine pays little for it."""
    path = path or cache_path("peaks")
    key = f"matmul-{dtype_name(dtype)}"
    cached = None if refresh else read_entry(path, key)
    if cached is not None and (cached.get("busy", True) or not isinstance(cached.get("peak"), (int, float))):
        cached = None  # measured under load (or unreadable): never divided by
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    quiet = load <= QUIET_LOAD * cores
    fresh = _measurement(dtype, load, cores, short=not refresh and (cached is not None or not quiet))
    if cached is not None and float(cached["peak"]) >= fresh["peak"]:
        return {**cached, "source": "cached"}
    if quiet:
        write_entry(path, key, fresh)
    return {**fresh, "source": "fresh"}


def peak_flops(device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, tf32: bool = False) -> float:
    """The peak FLOP/s to divide by for MFU: the table for a known GPU; on a CPU the machine's cached matmul
    peak (:func:`cpu_peak_flops`); on another device a matmul peak measured once per process."""
    device = torch.device(device)
    if device.type == "cuda":
        table = gpu_peak_flops(torch.cuda.get_device_name(device), dtype, tf32)
        if table is not None:
            return table
    if device.type == "cpu":
        return float(cpu_peak_flops(dtype)["peak"])
    key = (str(device), dtype)
    if key not in _measured:
        _measured[key] = measure_matmul_peak(dtype, device)["peak"]
    return _measured[key]
