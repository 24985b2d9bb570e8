"""Build a model from a config: the task picks the head, the block picks the backbone."""

from __future__ import annotations

from aot.config import CAUSAL_TASKS, ModelConfig
from aot.errors import ConfigError
from aot.models.base import AotModel


def build_model(cfg: ModelConfig) -> AotModel:
    if cfg.task in CAUSAL_TASKS and not cfg.causal:
        raise ConfigError(
            f"task={cfg.task!r} predicts each position from the ones before it and needs causal=True "
            "(causal=False would let every token see what it predicts); leave causal unset"
        )
    from aot.models.icl import InContextRegressor
    from aot.models.lm import CausalLM
    from aot.models.vision import ImageClassifier

    heads: dict[str, type[AotModel]] = {"lm": CausalLM, "image": ImageClassifier, "icl": InContextRegressor}
    return heads[cfg.task](cfg)
