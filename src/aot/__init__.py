"""aot — Attention-Only Transformers via unrolled subspace denoising (Wang et al., ICML 2025).

>>> from aot import preset_config, build_model
>>> model = build_model(preset_config("aot-mssa-l-cpu", n_layer=2))

The main entry points, one line each (the README's "Use it from Python"; docs/integrations.md for the libraries):

- ``build_model(preset_config(NAME, **fields))``: any preset of ``aot models`` (``PRESETS``), any field overridden.
- ``load_run(FOLDER)``: any ``aot train`` run or ``aot export`` / ``save_pretrained`` folder — the model (checkpoints
  verified), results.json, the tokenizer (:mod:`aot.loader`).
- :mod:`aot.hf` (``aot[hf]``): ``import aot.hf`` and ``AutoModelForCausalLM.from_pretrained(EXPORT)`` loads an
  ``aot export hf`` folder; ``trust_remote_code=True`` loads it where aot is not installed.
- :mod:`aot.lens` (``aot[lens]``): ``to_hooked_transformer(model)``, TransformerLens's ``HookedTransformer`` with the
  same weights.
- lm-evaluation-harness (``aot[eval]``): ``lm_eval --model aot`` or ``aot eval harness RUN --tasks ...`` from the
  shell; ``import aot.eval.lm_eval_model`` registers ``--model aot`` for ``lm_eval.simple_evaluate`` by hand.
- timm (``aot[timm]``): ``import aot.models.timm_models`` registers the image presets by hand (``timm.create_model(
  "aot_mssa_tiny_patch7_28", num_classes=0)``).
- Installed, aot registers both when timm or lm-eval's model registry is imported (``aot-plugins.pth`` runs
  ``_aot_plugins`` at start-up; ``AOT_NO_PLUGINS=1`` turns it off).
"""

from typing import TYPE_CHECKING, Any

from aot.errors import AotError, ConfigError

if TYPE_CHECKING:
    from aot.config import ModelConfig
    from aot.loader import LoadedRun, load_run
    from aot.models import PRESETS, build_model, preset_config

__version__ = "0.1.0"

# the entry points that need torch load on first use (PEP 562), so that `import aot.data.prepare` in a tokenizer
# worker, and `aot data prepare` itself, do not import torch
_LAZY = {
    "ModelConfig": "aot.config",
    "LoadedRun": "aot.loader",
    "load_run": "aot.loader",
    "PRESETS": "aot.models",
    "build_model": "aot.models",
    "preset_config": "aot.models",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        if name == "ModelConfig":
            importlib.import_module("aot.nn")  # registers the built-in blocks a config is checked against
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'aot' has no attribute {name!r}")


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
