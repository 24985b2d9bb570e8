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
- lm-evaluation-harness (``aot[eval]``): ``aot eval harness RUN --tasks ...`` from the shell; ``import
  aot.eval.lm_eval_model`` registers ``--model aot`` for ``lm_eval.simple_evaluate``.
- timm (``aot[timm]``): ``import aot.models.timm_models`` registers the image presets (``timm.create_model(
  "aot_mssa_tiny_patch7_28", num_classes=0)``).
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
