"""Configuration of `aot denoise`: the main run, the sweeps and the learned-bases experiment.

A config file (YAML or JSON) may hold the sections ``denoise``, ``sweep`` and ``learn``; see
configs/denoise.yaml. Each field's rule is stated once, in its class's ``LIMITS`` (checked by
:func:`aot.validation.check_fields`); unknown keys are one-line errors with a suggestion.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from aot.layering import layered
from aot.validation import Limit, above, at_least, within


@dataclass
class DenoiseConfig:
    """The main run (docs/paper.md §3 figure): one panel per δ, ``n_layers`` thresholded MSSA steps.

    Defaults: K = 4 subspaces of dimension p = 32 in d = K·p = 128, 256 tokens per cluster (N = 1024).
    p = 32 > (32/9) ln 1024 ≈ 24.6 makes the τ interval (1/2, 0.9993] non-empty; δ = 0.2 lies inside
    √(ln N / p) ≈ 0.465 and δ = 0.5 just outside. η = 0.055, τ = 0.8 give 1 + ητ = 1.044, the per-layer
    factor of the paper's figure (≈ 1.55 → 2.62 over 13 layers).
    """

    p: int = 32
    n_clusters: int = 4
    tokens_per_cluster: int = 256
    d: int | None = None
    deltas: list[float] = field(default_factory=lambda: [0.1, 0.2, 0.3, 0.5])
    eta: float = 0.055
    tau: float = 0.8
    n_layers: int = 13
    delta_constant: float = 1.0
    tolerance: float = 0.02  # the per-layer factor must be within this of 1 + ητ inside the conditions

    LIMITS: ClassVar[dict[str, Limit]] = {
        **{name: at_least(1) for name in ("p", "n_clusters", "tokens_per_cluster", "d", "n_layers")},
        "deltas": at_least(0, nonempty=True),
        "eta": above(0),
        "tau": within(0, 1, low_open=True),
        "delta_constant": above(0),
        "tolerance": above(0),
    }


@dataclass
class SweepConfig:
    """Sweeps around a base point (K = 4, p = 32, N = 256, δ = 0.2, η = 0.1, τ = 0.8, 5 layers) that map
    where the factor 1 + ητ holds and where it fails."""

    p: int = 32
    n_clusters: int = 4
    tokens_per_cluster: int = 64
    delta: float = 0.2
    eta: float = 0.1
    tau: float = 0.8
    n_layers: int = 5
    seeds: int = 2
    deltas: list[float] = field(default_factory=lambda: [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8])
    taus: list[float] = field(default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 0.97])
    ps: list[int] = field(default_factory=lambda: [4, 8, 12, 16, 24, 32, 48, 64])
    tokens_per_cluster_grid: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128, 256])
    etas: list[float] = field(default_factory=lambda: [0.01, 0.03, 0.1, 0.3, 1.0, 3.0])

    LIMITS: ClassVar[dict[str, Limit]] = {
        **{name: at_least(1) for name in ("p", "n_clusters", "tokens_per_cluster", "n_layers", "seeds")},
        "delta": at_least(0),
        "eta": above(0),
        "tau": within(0, 1, low_open=True),
        "deltas": at_least(0, nonempty=True),
        "taus": within(0, 1, low_open=True),
        "ps": at_least(1, nonempty=True),
        "tokens_per_cluster_grid": at_least(1, nonempty=True),
        "etas": above(0),
    }


@dataclass
class LearnConfig:
    """The learned-bases experiment (beyond the paper): per-layer U_k^(l) trained by backprop to denoise.

    Defaults: d = K·p = 64, p = 16, K = 4, N = 128, δ = 0.3, 4 layers with η = 1 (the bases' scale is
    learned), 800 Adam steps of 16 fresh samples, plain softmax (the threshold has no gradient).
    """

    p: int = 16
    n_clusters: int = 4
    tokens_per_cluster: int = 32
    d: int | None = None
    delta: float = 0.3
    n_layers: int = 4
    eta: float = 1.0
    steps: int = 800
    batch_size: int = 16
    lr: float = 0.02
    eval_samples: int = 8
    every_layer: bool = True  # the loss averages every layer's output (deep supervision), not only the last

    LIMITS: ClassVar[dict[str, Limit]] = {
        **{name: at_least(1) for name in ("p", "n_clusters", "tokens_per_cluster", "d", "n_layers")},
        **{name: at_least(1) for name in ("batch_size", "eval_samples")},
        "delta": at_least(0),
        "eta": above(0),
        "steps": at_least(0),
        "lr": above(0),
    }


@dataclass
class DenoiseSettings:
    denoise: DenoiseConfig
    sweep: SweepConfig
    learn: LearnConfig

    def to_dict(self) -> dict[str, Any]:
        return {"denoise": asdict(self.denoise), "sweep": asdict(self.sweep), "learn": asdict(self.learn)}


SECTIONS = {"denoise": DenoiseConfig, "sweep": SweepConfig, "learn": LearnConfig}


def load_settings(
    path: str | Path | None = None, flags: dict[str, Any] | None = None, sets: Iterable[str] | None = None
) -> DenoiseSettings:
    """The defaults < the sections of a YAML/JSON file (``path``) < ``flags`` (``{section: {field: value}}``) <
    ``sets`` (``section.field=value``), each section validated (:func:`aot.layering.layered`)."""
    config_file = None if path is None else str(path)
    return DenoiseSettings(**layered(SECTIONS, config_file=config_file, flags=flags, sets=sets))
