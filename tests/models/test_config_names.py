"""Names that say one thing: what a model is built for (aot.config.MODEL_TASKS) is not the training tasks of
`aot train` (aot.tasks.TASKS); the score scaling (score_scale) is not the blocks' residual step (their attn_scale
module). The old names still answer for one release, each with one line (aot.errors.RenamedWarning)."""

from __future__ import annotations

import pytest

import aot.config
import aot.errors
from aot.config import MODEL_TASKS, ModelConfig
from aot.errors import ConfigError, RenamedWarning
from aot.models import build_model
from aot.tasks import TASKS


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each old name is said once per process: a fresh record for each test."""
    monkeypatch.setattr(aot.errors, "_renamed_said", set())


def test_model_tasks_are_what_a_model_is_built_for_not_the_training_tasks():
    assert MODEL_TASKS == ("lm", "image", "icl") and set(TASKS) == {"lm", "vision", "icl", "recall"}
    with pytest.raises(ConfigError, match="task='vision' is not one of lm, image, icl"):
        ModelConfig(task="vision")


def test_the_old_name_warns_once_and_still_answers():
    with pytest.warns(RenamedWarning, match="aot.config.TASKS is renamed aot.config.MODEL_TASKS") as said:
        assert aot.config.TASKS == MODEL_TASKS
        assert aot.config.TASKS == MODEL_TASKS
    assert len(said) == 1 and "\n" not in str(said[0].message)


def test_attn_scale_is_score_scale_in_files_keywords_and_attributes_with_one_line():
    base = {"n_layer": 1, "n_embd": 16, "n_head": 2}
    new = ModelConfig.from_dict({**base, "score_scale": False})
    with pytest.warns(RenamedWarning, match=r"model.attn_scale is renamed model.score_scale .*the old field goes"):
        assert ModelConfig.from_dict({**base, "attn_scale": False}) == new
    with pytest.warns(RenamedWarning, match=r"ModelConfig\(attn_scale=...\) is renamed"):
        assert ModelConfig(**base, attn_scale=False) == new  # type: ignore[call-arg]
    with pytest.warns(RenamedWarning, match="ModelConfig.attn_scale is renamed ModelConfig.score_scale"):
        assert new.attn_scale is False
    assert "attn_scale" not in new.to_dict() and new.to_dict()["score_scale"] is False
    assert build_model(new).backbone.blocks[0].attn.scale == 1.0  # no 1/sqrt(p): the paper's formula


def test_a_saved_config_with_the_old_name_loads_silently(recwarn: pytest.WarningsRecorder):
    saved = {**ModelConfig(n_layer=1, n_embd=16, n_head=2).to_dict(), "attn_scale": False}
    del saved["score_scale"]
    assert ModelConfig.from_dict(saved, saved=True).score_scale is False
    assert not [w for w in recwarn if issubclass(w.category, RenamedWarning)]


def test_options_as_keywords_still_work_with_one_line():
    with pytest.warns(RenamedWarning, match=r"ModelConfig\(ista_expand=...\) is renamed ModelConfig\(options="):
        cfg = ModelConfig(block="crate", n_layer=1, n_embd=16, n_head=2, ista_expand=4)  # type: ignore[call-arg]
    assert cfg == ModelConfig(block="crate", n_layer=1, n_embd=16, n_head=2, options={"ista_expand": 4})
    assert cfg.ista_expand == 4 and cfg.to_dict()["ista_expand"] == 4
