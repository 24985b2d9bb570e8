"""The config of the model ``AotForCausalLM`` wraps, with aot installed: config.json's ``aot`` fields as aot's own
validated :class:`aot.config.ModelConfig` (one line naming the field when one does not validate).

An export's standalone modelling code has no aot to validate with; it reads the same fields as attributes instead
(:mod:`aot.hf.inner_standalone`, pasted in place of this module by :mod:`aot.hf.standalone`).
"""

from __future__ import annotations

from typing import Any

from aot.config import ModelConfig
from aot.errors import AotError


def model_config(fields: dict[str, Any]) -> ModelConfig:
    """The validated config of a language model."""
    cfg = ModelConfig.from_dict(fields, saved=True)
    if cfg.task != "lm":
        raise AotError(f"AotForCausalLM wraps language models; the config describes a {cfg.task!r} model")
    return cfg
