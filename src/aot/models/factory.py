"""Build a model from a config: the task picks the head, the block picks the backbone."""

from __future__ import annotations

from aot.config import ModelConfig
from aot.models.base import AotModel


def build_model(cfg: ModelConfig) -> AotModel:
    from aot.models.icl import InContextRegressor
    from aot.models.lm import CausalLM
    from aot.models.vision import ImageClassifier

    heads: dict[str, type[AotModel]] = {"lm": CausalLM, "image": ImageClassifier, "icl": InContextRegressor}
    return heads[cfg.task](cfg)
