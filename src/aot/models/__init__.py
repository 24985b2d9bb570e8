"""Backbone + heads: causal LM, image classifier, in-context regressor; named presets."""

from aot.models.backbone import Backbone
from aot.models.base import AotModel
from aot.models.factory import build_model
from aot.models.icl import InContextRegressor
from aot.models.lm import CausalLM
from aot.models.presets import PRESETS, get_preset, preset_config
from aot.models.vision import ImageClassifier

__all__ = [
    "PRESETS",
    "AotModel",
    "Backbone",
    "CausalLM",
    "ImageClassifier",
    "InContextRegressor",
    "build_model",
    "get_preset",
    "preset_config",
]
