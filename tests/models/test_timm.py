"""timm registration (aot[timm]): every image preset builds through ``timm.create_model`` and keeps timm's
conventions (num_classes=0, num_features, global_pool, pretrained_cfg → resolve_data_config).

timm imports torchvision, and no torchvision on PyPI imports beside the pinned torch 2.13.0+cpu (the one that
does, 0.28.0+cpu, is on download.pytorch.org: ``make install-timm``); these tests skip without it and run in the
environment that ``scripts/test_timm.sh`` builds (torch 2.14.1 + torchvision 0.29.1 + timm). What needs no timm
is in test_timm_registration.py."""

from __future__ import annotations

import pytest
import torch

from aot.errors import AotError
from aot.models import build_model
from aot.models.presets import PRESETS

try:
    import timm
    import timm.data
except Exception as exc:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
    pytest.skip(f"timm does not import here ({type(exc).__name__}); run scripts/test_timm.sh", allow_module_level=True)

from aot.models.timm_models import DATA_STATS, timm_names  # registers the names

NAMES = timm_names()
TINY = "aot_mssa_tiny_patch7_28"


def images(n: int = 2) -> torch.Tensor:
    return torch.randn(n, 1, 28, 28, generator=torch.Generator().manual_seed(0))


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
    assert model.num_features == preset.fields["n_embd"]
    if preset.fields["image_size"] <= 32:  # run the small ones end to end
        size, chans = preset.fields["image_size"], preset.fields["in_chans"]
        logits = model(torch.randn(2, chans, size, size))
        assert logits.shape == (2, 7)
        model.reset_classifier(3)
        assert model(torch.randn(1, chans, size, size)).shape == (1, 3)


def test_num_classes_zero_returns_the_class_token_features() -> None:
    torch.manual_seed(0)
    model = timm.create_model(TINY, num_classes=0).eval()
    x = images()
    features = model(x)
    assert model.num_classes == 0 and features.shape == (2, model.num_features)
    torch.testing.assert_close(features, model.forward_features(x)[:, 0], rtol=0, atol=0)


def test_reset_classifier_zero_keeps_the_features_the_head_read() -> None:
    model = timm.create_model(TINY, num_classes=10).eval()
    x = images()
    before = model.forward_head(model.forward_features(x), pre_logits=True)
    logits = model(x)
    torch.testing.assert_close(logits, before @ model.head.weight.T + model.head.bias)
    model.reset_classifier(0)
    torch.testing.assert_close(model(x), before, rtol=0, atol=0)


def test_global_pool_options() -> None:
    model = timm.create_model(TINY, num_classes=0, global_pool="avg").eval()
    x = images()
    tokens = model.forward_features(x)
    torch.testing.assert_close(model(x), tokens[:, 1:].mean(dim=1))  # the patch tokens, not the class token
    model.reset_classifier(0, global_pool="max")
    torch.testing.assert_close(model(x), tokens[:, 1:].amax(dim=1))
    model.reset_classifier(4, global_pool="")
    assert model(x).shape == (2, 17, 4)  # every token: 16 patches + the class token
    with pytest.raises(AotError, match=r"global_pool='map' is not supported.*'token'"):
        timm.create_model(TINY, global_pool="map")


def test_resolve_data_config_gives_the_models_input_and_statistics() -> None:
    config = timm.data.resolve_data_config({}, model=timm.create_model(TINY))
    _, mean, std = DATA_STATS[(1, 28)]
    assert config["input_size"] == (1, 28, 28)
    assert config["mean"] == mean and config["std"] == std and config["crop_pct"] == 1.0
    grey = timm.data.resolve_data_config({}, model=timm.create_model(TINY, in_chans=3, img_size=35))
    assert grey["input_size"] == (3, 35, 35) and grey["mean"] == mean * 3
    imagenet = timm.data.resolve_data_config({}, model=timm.create_model("aot_vit_small_patch16_224"))
    assert imagenet["input_size"] == (3, 224, 224)
    assert imagenet["mean"] == timm.data.IMAGENET_DEFAULT_MEAN and imagenet["std"] == timm.data.IMAGENET_DEFAULT_STD


def test_timm_knows_the_pretrained_cfg_without_building() -> None:
    cfg = timm.models.get_pretrained_cfg(TINY)
    assert cfg.input_size == (1, 28, 28) and cfg.num_classes == 10 and not cfg.has_weights


def test_timm_transform_feeds_the_model() -> None:
    model = timm.create_model(TINY).eval()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    from PIL import Image

    picture = Image.fromarray((torch.rand(28, 28) * 255).to(torch.uint8).numpy(), mode="L")
    batch = transform(picture).unsqueeze(0)
    assert batch.shape == (1, 1, 28, 28)
    assert model(batch).shape == (1, 10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pretrained": True}, "no pretrained weights"),
        ({"features_only": True}, "features_only is not supported.*forward_features"),
        ({"drop_path_rate": 0.1}, "'drop_path_rate' is not supported.*num_classes, in_chans, img_size"),
        ({"img_size": (28, 35)}, "square images"),
    ],
)
def test_unsupported_arguments_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(AotError, match=message) as info:
        timm.create_model(TINY, **kwargs)
    assert "\n" not in str(info.value)
