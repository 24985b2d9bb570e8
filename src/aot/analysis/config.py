"""The config of `aot analyze` (:mod:`aot.cli.analyze`): what to measure inside a trained model and how much."""

from __future__ import annotations

from dataclasses import dataclass

from aot.errors import AotError


@dataclass
class AnalyzeConfig:
    """Options (also the keys of a --config file): batches × batch_size windows of seq_len tokens; ε of the
    coding rates; the length n of the repeated random sequences [r, r] for the induction scores."""

    data: str = "val"
    batches: int = 8
    batch_size: int = 8
    seq_len: int = 128
    eps: float = 0.5
    induction_length: int = 32

    def validate(self) -> None:
        for name in ("batches", "batch_size", "seq_len", "induction_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AotError(f"{name}={value!r} must be a positive integer")
        if not self.eps > 0:
            raise AotError(f"eps={self.eps!r} must be positive")
