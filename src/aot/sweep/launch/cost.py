"""What a trial will cost, before it runs: its training FLOPs from the analytic count of its model
(:func:`aot.bench.flops.training_flops_per_sample`, the count the trainer's MFU divides by) times the samples it
trains on, and the GPU-hours that takes at a stated model-FLOPs utilisation of a named GPU's dense peak
(:data:`aot.bench.peaks.GPU_PEAK_FLOPS`). An estimate: the evaluation, the data loading and the start-up are not in
it, and the MFU is the user's assumption, printed beside the figure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aot.bench.flops import training_flops_per_sample
from aot.bench.peaks import GPU_PEAK_FLOPS
from aot.errors import AotError, ConfigError
from aot.tasks import TaskRun, get_task
from aot.validation import number

MFU = number(0, 1, low_open=True)  # the share of the GPU's dense peak a run is assumed to reach


@dataclass(frozen=True)
class CostModel:
    """GPU-hours of a number of FLOPs on ``gpu`` (a name of :data:`GPU_PEAK_FLOPS`) in ``dtype`` at ``mfu``."""

    gpu: str = "H100"
    mfu: float = 0.4
    dtype: str = "bf16"

    def __post_init__(self) -> None:
        if self.gpu not in GPU_PEAK_FLOPS:
            raise ConfigError(f"--gpu-type {self.gpu!r} is not a known GPU; use one of {', '.join(GPU_PEAK_FLOPS)}")
        MFU.named("--mfu").check(self.mfu)

    @property
    def peak(self) -> float:
        return GPU_PEAK_FLOPS[self.gpu][self.dtype]

    def gpu_hours(self, flops: float) -> float:
        return flops / (self.peak * self.mfu) / 3600

    def describe(self) -> str:
        return f"{self.gpu} {self.dtype} at {100 * self.mfu:.0f} % MFU ({self.peak / 1e12:.0f} TFLOP/s peak)"


def run_flops(task: str, run: TaskRun, start_step: int = 0) -> float | None:
    """The training FLOPs of ``run`` from ``start_step`` (a cooldown branch starts at its parent's checkpoint) to its
    last step (forward and backward of every sample); None when its model's count is not known analytically (a
    block without a formula) or its model cannot be planned without its data."""
    try:
        cfg, seq_len = get_task(task).planned_model(run)
    except (AotError, NotImplementedError, OSError):
        return None
    per_sample = training_flops_per_sample(cfg, seq_len)
    if per_sample is None:
        return None
    return per_sample * max(run.train.steps - start_step, 0) * run.train.batch_size


def start_step(checkpoint: Path | None) -> int:
    """The step a run branched from ``checkpoint`` (``RUN/checkpoint-step800``) starts at; 0 for a fresh run."""
    match = re.search(r"step(\d+)$", checkpoint.name) if checkpoint is not None else None
    return int(match.group(1)) if match else 0
