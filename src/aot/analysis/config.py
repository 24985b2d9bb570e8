"""The config of `aot analyze` (:mod:`aot.cli.analyze`): what to measure inside a trained model and how much."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from aot.validation import Limit, above, at_least


@dataclass
class AnalyzeConfig:
    """Options (also the fields of a --config file's ``analyze:`` section): batches × batch_size windows of
    seq_len tokens; ε of the coding rates; the length n of the repeated random sequences [r, r] for the
    induction scores."""

    data: str = "val"
    batches: int = 8
    batch_size: int = 8
    seq_len: int = 128
    eps: float = 0.5
    induction_length: int = 32

    LIMITS: ClassVar[dict[str, Limit]] = {
        **{name: at_least(1) for name in ("batches", "batch_size", "seq_len", "induction_length")},
        "eps": above(0),
    }
