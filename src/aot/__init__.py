"""aot — Attention-Only Transformers via unrolled subspace denoising (Wang et al., ICML 2025).

>>> from aot import preset_config, build_model
>>> model = build_model(preset_config("aot-mssa-l-cpu", n_layer=2))

A trained run or export folder, checkpoints verified: ``run = load_run("runs/lm")`` (:mod:`aot.loader`).
"""

from aot.config import ModelConfig
from aot.errors import AotError, ConfigError
from aot.loader import LoadedRun, load_run
from aot.models import PRESETS, build_model, preset_config

__version__ = "0.1.0"
__all__ = [
    "PRESETS",
    "AotError",
    "ConfigError",
    "LoadedRun",
    "ModelConfig",
    "__version__",
    "build_model",
    "load_run",
    "preset_config",
]
