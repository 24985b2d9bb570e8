"""One training loop for every task: optimizer, schedule, accumulation, AMP, DDP / FSDP, atomic checkpoints."""

from aot.train.trainer import TrainConfig, Trainer, TrainResult, read_metrics

__all__ = ["TrainConfig", "TrainResult", "Trainer", "read_metrics"]
