"""timm registration (aot[timm]): every image preset builds through ``timm.create_model``.

timm needs torchvision, which does not import beside the pinned torch of CI; these tests skip there and run in
the environment that ``scripts/test_timm.sh`` builds (torch 2.14.1 + torchvision 0.29.1 + timm)."""

from __future__ import annotations

import pytest
import torch

from aot.models import build_model
from aot.models.presets import PRESETS
from aot.models.timm_models import timm_names

try:
    import timm
except Exception as exc:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
    pytest.skip(f"timm does not import here ({type(exc).__name__}); run scripts/test_timm.sh", allow_module_level=True)

import aot.models.timm_models  # noqa: F401  (registers the names)

NAMES = timm_names()


def test_every_image_preset_has_a_timm_name() -> None:
    image_presets = {p.name for p in PRESETS.values() if p.fields.get("task") == "image"}
    assert set(NAMES.values()) == image_presets
    assert set(NAMES) <= set(timm.list_models("aot_*"))


@pytest.mark.parametrize("name", sorted(NAMES))
def test_timm_create_model(name: str) -> None:
    preset = PRESETS[NAMES[name]]
    model = timm.create_model(name, num_classes=7)
    reference = build_model(preset.config(num_classes=7))
    assert model.num_params() == reference.num_params()
    assert model.get_classifier().out_features == 7
    if preset.fields["image_size"] <= 32:  # run the small ones end to end
        size, chans = preset.fields["image_size"], preset.fields["in_chans"]
        logits = model(torch.randn(2, chans, size, size))
        assert logits.shape == (2, 7)
        model.reset_classifier(3)
        assert model(torch.randn(1, chans, size, size)).shape == (1, 3)


def test_pretrained_is_refused() -> None:
    from aot.errors import AotError

    with pytest.raises(AotError, match="no pretrained weights"):
        timm.create_model(sorted(NAMES)[0], pretrained=True)
