"""Names that say one thing: what a model is built for (aot.config.MODEL_TASKS) is not the training tasks of
`aot train` (aot.tasks.TASKS); the old name aot.config.TASKS still answers for one release, with a warning."""

from __future__ import annotations

import pytest

import aot.config
from aot.config import MODEL_TASKS, ModelConfig
from aot.errors import ConfigError
from aot.tasks import TASKS


def test_model_tasks_are_what_a_model_is_built_for_not_the_training_tasks():
    assert MODEL_TASKS == ("lm", "image", "icl") and set(TASKS) == {"lm", "vision", "icl", "recall"}
    with pytest.raises(ConfigError, match="task='vision' is not one of lm, image, icl"):
        ModelConfig(task="vision")


def test_the_old_name_warns_once_and_still_answers():
    with pytest.warns(DeprecationWarning, match="renamed MODEL_TASKS"):
        assert aot.config.TASKS == MODEL_TASKS
