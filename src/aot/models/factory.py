"""Build a model from a config: the task picks the head, the block picks the backbone.

This module registers the three heads in :data:`aot.models.base.HEADS`, which ``build_model`` and
``AotModel.from_pretrained`` read (so base.py imports no head, and no head imports this module).
"""

from __future__ import annotations

from aot.models.base import HEADS, build_model
from aot.models.icl import InContextRegressor
from aot.models.lm import CausalLM
from aot.models.vision import ImageClassifier

HEADS.update(lm=CausalLM, image=ImageClassifier, icl=InContextRegressor)

__all__ = ["build_model"]
