"""Which autocast precision pays on this machine: ``train.precision: auto``.

bf16 autocast halves the bytes of matrix-product operands, but whether it is *faster* on a CPU depends on the
processor: with AMX or fast AVX-512-BF16 kernels (recent Xeons, some EPYCs) it can be several times faster than
fp32; on others it is slower than fp32 (the conversions cost more than the products save). So on a CPU we
measure instead of assuming: one block of the model, forward + backward at the run's micro-batch shape, under
fp32 and under bf16 autocast, in interleaved rounds (median), and pick bf16 only when it is faster by a margin.
The answer is cached in ``$AOT_DATA/precision.json`` (``~/.cache/aot`` by default) under the machine's identity
(processor, threads, torch version) and the shape, so a machine measures each shape once; ``refresh=True``
measures again. On a GPU: bf16 where the device supports it, else fp32 — no measurement.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from aot.bench.machine_cache import cache_path, now_utc, read_entry, write_entry
from aot.config import ModelConfig
from aot.runinfo import cpu_model

#: bf16 must take at most this share of fp32's time to be chosen (5 % faster), so noise does not flip the choice
BF16_MARGIN = 0.95


@dataclass
class PrecisionChoice:
    """The precision chosen, why, and the measurement behind it (None on a GPU)."""

    precision: str  # "bf16" or "fp32"
    reason: str
    seconds: dict[str, float] | None = None  # median block step time per precision
    cached: bool = False  # read from the cache file instead of measured now

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def shape_key(cfg: ModelConfig, rows: int, seq_len: int) -> str:
    return f"{cfg.block} d={cfg.n_embd} heads={cfg.n_head}x{cfg.p} rows={rows} T={seq_len}"


def time_block_step(cfg: ModelConfig, rows: int, seq_len: int, precision: str, repeat: int = 2) -> float:
    """Seconds of one forward + backward of one block of ``cfg`` on a (rows, seq_len, d) input, fp32 weights,
    under ``precision`` autocast (CPU). The mean of ``repeat`` steps after one warm-up step."""
    from aot.nn.blocks import make_block

    generator_state = torch.random.get_rng_state()  # leave the caller's random stream as it was
    try:
        block = make_block(cfg)
        x = torch.randn(rows, seq_len, cfg.n_embd, requires_grad=True)
    finally:
        torch.random.set_rng_state(generator_state)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = block(x)
        out.float().square().mean().backward()

    step()
    start = time.perf_counter()
    for _ in range(repeat):
        step()
    return (time.perf_counter() - start) / repeat


def measure_precisions(
    cfg: ModelConfig,
    rows: int,
    seq_len: int,
    rounds: int = 3,
    timer: Callable[[ModelConfig, int, int, str], float] = time_block_step,
) -> dict[str, float]:
    """Median block step seconds under fp32 and bf16, timed in interleaved rounds (order reversed every other
    round) so a burst of load on the machine hits both alike."""
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for r in range(rounds):
        for name in ("fp32", "bf16") if r % 2 == 0 else ("bf16", "fp32"):
            times[name].append(timer(cfg, rows, seq_len, name))
    return {name: statistics.median(values) for name, values in times.items()}


def choose_precision(
    cfg: ModelConfig,
    rows: int,
    seq_len: int,
    device: torch.device | str = "cpu",
    *,
    refresh: bool = False,
    cache_file: Path | None = None,
    timer: Callable[[ModelConfig, int, int, str], float] = time_block_step,
) -> PrecisionChoice:
    """The precision ``auto`` resolves to for a model of ``cfg`` trained on micro-batches of ``rows`` sequences
    of ``seq_len`` tokens on ``device`` (see the module's docstring)."""
    device = torch.device(device)
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return PrecisionChoice("bf16", f"bf16 autocast: supported by {torch.cuda.get_device_name(device)}")
        return PrecisionChoice("fp32", f"fp32: {torch.cuda.get_device_name(device)} has no bf16 support")
    if device.type != "cpu":
        return PrecisionChoice("fp32", f"fp32: no measured choice for device type {device.type!r}")
    path, shape = cache_file or cache_path("precision"), shape_key(cfg, rows, seq_len)
    entry = None if refresh else read_entry(path, shape)
    cached = entry is not None
    if entry is None:
        entry = {"seconds": measure_precisions(cfg, rows, seq_len, timer=timer), "date": now_utc()}
        write_entry(path, shape, entry)
    seconds = entry["seconds"]
    ratio = seconds["bf16"] / seconds["fp32"]
    precision = "bf16" if ratio <= BF16_MARGIN else "fp32"
    verdict = f"{1 / ratio:.2f}x faster" if ratio < 1 else f"{ratio:.2f}x slower"
    reason = (
        f"{precision}: bf16 autocast was {verdict} than fp32 for one {cfg.block} block at this shape on "
        f"{cpu_model()} ({1e3 * seconds['bf16']:.1f} vs {1e3 * seconds['fp32']:.1f} ms, "
        f"{'cached ' + entry['date'] if cached else 'measured now'}; bf16 needs <= {BF16_MARGIN:.2f}x fp32's time)"
    )
    return PrecisionChoice(precision, reason, dict(seconds), cached)
