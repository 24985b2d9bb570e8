"""timm registration (aot[timm]): every image preset builds through ``timm.create_model`` and keeps timm's
conventions (num_classes=0, num_features, global_pool, pretrained_cfg → resolve_data_config), takes timm's model
keywords (device, dtype, in_chans, img_size, drop_path_rate) and refuses others with a TypeError, and has the
model API of timm's ViTs (forward_intermediates, features_only, prune_intermediate_layers, set_input_size,
group_matcher, set_grad_checkpointing), traceable by torch.fx and torch.export — computing what aot's own
ImageClassifier computes.

timm imports torchvision: ``make install`` installs timm with scripts/install_timm.py (torchvision's Python part
where no torchvision built for this torch is reachable); these tests skip in one line where timm does not import.
timm's own model tests run over the same models in test_timm_suite.py; what needs no timm is in
test_timm_registration.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from aot.errors import AotError
from aot.models import build_model
from aot.models.base import AotModel
from aot.models.presets import PRESETS

try:
    import timm
    import timm.data
except Exception as exc:  # ImportError, or torchvision's "operator torchvision::nms does not exist"
    pytest.skip(f"timm does not import here ({type(exc).__name__}); make install-timm", allow_module_level=True)

from aot.models.timm_models import DATA_STATS, TIMM_KEYWORDS, TimmArgumentError, timm_names  # registers the names

NAMES = timm_names()
TINY = "aot_mssa_tiny_patch7_28"
TINY_NAMES = sorted(name for name in NAMES if "_tiny_" in name)


def images(n: int = 2, size: int = 28, chans: int = 1) -> torch.Tensor:
    return torch.randn(n, chans, size, size, generator=torch.Generator().manual_seed(0))


def test_every_image_preset_has_a_timm_name() -> None:
    image_presets = {p.name for p in PRESETS.values() if p.fields.get("task") == "image"}
    assert set(NAMES.values()) == image_presets
    assert set(NAMES) <= set(timm.list_models("aot_*"))
    assert set(timm.list_models(module="timm_models")) == set(NAMES)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_timm_create_model(name: str) -> None:
    preset = PRESETS[NAMES[name]]
    model = timm.create_model(name, num_classes=7, device="meta")
    with torch.device("meta"):
        reference = build_model(preset.config(num_classes=7))
    assert model.num_params() == reference.num_params()
    assert model.get_classifier().out_features == 7
    assert model.num_features == preset.fields["n_embd"] and model.in_chans == preset.fields["in_chans"]
    assert len(model.feature_info) == preset.fields["n_layer"]
    if preset.fields["image_size"] <= 32:  # run the small ones end to end
        model = timm.create_model(name, num_classes=7)
        size, chans = preset.fields["image_size"], preset.fields["in_chans"]
        assert model(torch.randn(2, chans, size, size)).shape == (2, 7)
        model.reset_classifier(3)
        assert model(torch.randn(1, chans, size, size)).shape == (1, 3)


@pytest.mark.parametrize("name", TINY_NAMES)
def test_the_timm_model_computes_what_aot_builds(name: str) -> None:
    """Same weights, same numbers: the timm model's block-by-block forward, pooling and heads are the
    ImageClassifier's (aot's own intermediates too)."""
    model = timm.create_model(name).eval()
    reference = build_model(model.cfg).eval()
    reference.load_state_dict(model.state_dict())
    x = images()
    torch.testing.assert_close(model(x), reference(x), rtol=0, atol=0)
    torch.testing.assert_close(model.forward_features(x), reference.forward_features(x), rtol=0, atol=0)
    _, tokens = reference.forward_intermediates(x)  # aot's: the whole residual stream after each block
    final, taps = model.forward_intermediates(x, output_fmt="NLC")
    torch.testing.assert_close(final, reference.forward_features(x), rtol=0, atol=0)
    assert len(taps) == len(tokens) == model.cfg.n_layer
    for tap, stream in zip(taps, tokens):
        torch.testing.assert_close(tap, stream[:, 1:], rtol=0, atol=0)  # the class token split off


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


def test_reset_classifier_builds_the_head_on_the_models_device_dtype_and_mode() -> None:
    model = timm.create_model(TINY, dtype=torch.float64).eval()
    model.reset_classifier(5)
    assert model.head.weight.dtype == torch.float64 and not model.head.training
    assert model(images().double()).dtype == torch.float64
    model.to(device="meta").train()
    model.reset_classifier(2)
    assert model.head.weight.device.type == "meta" and model.head.weight.dtype == torch.float64
    assert model.head.training


def test_device_and_dtype_keywords() -> None:
    meta = timm.create_model(TINY, device="meta", dtype=torch.bfloat16)
    tensors = [*meta.parameters(), *meta.buffers()]
    assert tensors and all(t.device.type == "meta" and t.dtype == torch.bfloat16 for t in tensors)
    double = timm.create_model(TINY, dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in double.parameters())


def test_global_pool_options() -> None:
    model = timm.create_model(TINY, num_classes=0, global_pool="avg").eval()
    x = images()
    tokens = model.forward_features(x)
    torch.testing.assert_close(model(x), tokens[:, 1:].mean(dim=1))  # the patch tokens, not the class token
    model.reset_classifier(0, global_pool="max")
    torch.testing.assert_close(model(x), tokens[:, 1:].amax(dim=1))
    model.reset_classifier(4)  # global_pool=None keeps the pooling
    assert model.global_pool == "max" and model(x).shape == (2, 4)
    model.reset_classifier(4, global_pool="")
    assert model(x).shape == (2, 17, 4)  # every token: 16 patches + the class token
    with pytest.raises(AotError, match=r"global_pool='map' is not supported.*'token'"):
        timm.create_model(TINY, global_pool="map")


def test_in_chans_and_img_size() -> None:
    model = timm.create_model(TINY, in_chans=3, img_size=35).eval()
    assert model.in_chans == 3 and model.patch_embed.weight.shape[1] == 3
    assert model(images(chans=3, size=35)).shape == (2, 10)
    with pytest.raises(AotError, match="images must have shape"):  # the input check stays on outside tracing
        model(images(chans=3, size=28))


def test_drop_path_rate_is_timms_stochastic_depth() -> None:
    model = timm.create_model(TINY, drop_path_rate=0.3)
    plain = timm.create_model(TINY)
    plain.load_state_dict(model.state_dict())  # no parameters added
    rates = [
        block.drop[1].drop_prob if isinstance(block.drop, nn.Sequential) else 0.0 for block in model.backbone.blocks
    ]
    assert rates == pytest.approx([0.3 * i / 5 for i in range(6)])  # timm's linear decay over the 6 blocks
    x = images()
    model.eval(), plain.eval()
    torch.testing.assert_close(model(x), plain(x), rtol=0, atol=0)  # inactive outside training
    model.train()
    torch.manual_seed(1)
    first = model(x)
    torch.manual_seed(2)
    assert not torch.equal(first, model(x))  # a different set of dropped branches


def test_resolve_data_config_gives_the_models_input_and_statistics() -> None:
    config = timm.data.resolve_data_config({}, model=timm.create_model(TINY))
    _, mean, std = DATA_STATS[(1, 28)]
    assert config["input_size"] == (1, 28, 28)
    assert config["mean"] == mean and config["std"] == std and config["crop_pct"] == 1.0
    grey = timm.data.resolve_data_config({}, model=timm.create_model(TINY, in_chans=3, img_size=35))
    assert grey["input_size"] == (3, 35, 35) and grey["mean"] == mean * 3
    imagenet = timm.data.resolve_data_config({}, model=timm.create_model("aot_vit_small_patch16_224", device="meta"))
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


def test_forward_intermediates_options() -> None:
    model = timm.create_model(TINY).eval()
    x = images()
    final, maps = model.forward_intermediates(x)  # NCHW by default, every block
    tokens = model.forward_intermediates(x, output_fmt="NLC", intermediates_only=True)
    assert len(maps) == 6 and maps[0].shape == (2, model.num_features, 4, 4)
    torch.testing.assert_close(maps[2], tokens[2].transpose(1, 2).reshape(2, -1, 4, 4), rtol=0, atol=0)
    torch.testing.assert_close(final, model.forward_features(x), rtol=0, atol=0)
    last_two = model.forward_intermediates(x, indices=2, intermediates_only=True)
    torch.testing.assert_close(last_two[1], maps[5], rtol=0, atol=0)
    early = model.forward_intermediates(x, indices=[1], stop_early=True, intermediates_only=True)
    torch.testing.assert_close(early[0], maps[1], rtol=0, atol=0)
    normed = model.forward_intermediates(x, indices=[-1], norm=True, output_fmt="NLC", intermediates_only=True)
    torch.testing.assert_close(normed[0], final[:, 1:], rtol=0, atol=0)  # the last block, normed: the features
    with_prefix = model.forward_intermediates(x, indices=[0], return_prefix_tokens=True, intermediates_only=True)
    assert with_prefix[0][1].shape == (2, 1, model.num_features)  # (map, class token)
    as_dict = model.forward_intermediates(x, indices=[0], output_dict=True)
    assert set(as_dict) == {"image_intermediates", "image_features"}
    with pytest.raises(AotError, match="block indices \\[6\\] are not in 0 to 5"):
        model.forward_intermediates(x, indices=[6])


def test_features_only_is_the_vits_feature_getter() -> None:
    model = timm.create_model(TINY).eval()
    features = timm.create_model(TINY, features_only=True).eval()
    loaded = features.model.load_state_dict(model.state_dict(), strict=False)  # pruned: no final norm, no head
    assert not loaded.missing_keys and loaded.unexpected_keys
    assert features.feature_info.channels() == [model.num_features] * 3
    assert features.feature_info.reduction() == [7, 7, 7]
    x = images()
    maps = features(x)
    expected = model.forward_intermediates(x, indices=3, intermediates_only=True)
    assert len(maps) == 3
    for got, want in zip(maps, expected):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    chosen = timm.create_model(TINY, features_only=True, out_indices=(0, 2))
    assert [o.shape for o in chosen(x)] == [(2, model.num_features, 4, 4)] * 2
    assert len(chosen.model.backbone.blocks) == 3  # pruned after block 2


def test_prune_intermediate_layers_keeps_the_taps_and_saves_as_what_it_is(tmp_path: Path) -> None:
    model = timm.create_model(TINY).eval()
    x = images()
    taps = model.forward_intermediates(x, intermediates_only=True, output_fmt="NLC")
    kept = model.prune_intermediate_layers([1, 3], prune_head=False)
    assert kept == [1, 3] and len(model.backbone.blocks) == 4 and model.cfg.n_layer == 4
    torch.testing.assert_close(model.forward_intermediates(x, [1, 3], output_fmt="NLC")[1][1], taps[3])
    model.save_pretrained(tmp_path)
    loaded = AotModel.from_pretrained(tmp_path).eval()  # aot's own loader: the config says 4 blocks
    torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
    model.prune_intermediate_layers([0], prune_norm=True)
    assert model.num_classes == 0 and model.global_pool == "" and not model.cfg.final_norm
    torch.testing.assert_close(model.forward_features(x)[:, 1:], taps[0], rtol=0, atol=0)


def test_set_input_size_resamples_positions_and_patches() -> None:
    model = timm.create_model(TINY).eval()
    before = model.pos_embed.detach().clone()
    model.set_input_size(img_size=(28, 28))  # the same size: nothing changes
    assert torch.equal(model.pos_embed, before)
    model.set_input_size(img_size=56)
    assert model.pos_embed.shape == (1, 1 + 8 * 8, model.num_features)
    torch.testing.assert_close(model.pos_embed[:, :1], before[:, :1], rtol=0, atol=0)  # the class token's position
    assert model(images(size=56)).shape == (2, 10)
    assert model.pretrained_cfg["input_size"] == (1, 56, 56) and model.cfg.image_size == 56
    model.requires_grad_(False)
    model.set_input_size(img_size=28, patch_size=4)
    assert model.patch_embed.weight.shape[-2:] == (4, 4) and model.pos_embed.shape[1] == 1 + 7 * 7
    assert not any(p.requires_grad for p in model.parameters())  # frozen stays frozen
    assert model(images()).shape == (2, 10) and model.feature_info[0]["reduction"] == 4
    with pytest.raises(AotError, match="square images"):
        model.set_input_size(img_size=(28, 32))


def test_group_matcher_groups_embedding_then_blocks() -> None:
    from timm.models import group_parameters

    model = timm.create_model(TINY)
    groups = group_parameters(model, model.group_matcher(), reverse=True)
    assert groups["cls_token"] == groups["pos_embed"] == groups["patch_embed.weight"] == 0
    block_groups = [groups[f"backbone.blocks.{i}.attn.subspace_proj.weight"] for i in range(6)]
    assert block_groups == sorted(set(block_groups)) and block_groups[0] > 0  # one group per block, in order
    assert groups["backbone.final_norm.weight"] == block_groups[-1]  # (99999,): with the last block, as ViTs'
    assert groups["head.weight"] == block_groups[-1] + 1  # unmatched: last


def test_grad_checkpointing_keeps_the_numbers_and_the_gradients() -> None:
    model = timm.create_model(TINY)
    x = images()
    model(x).square().sum().backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    model.set_grad_checkpointing()
    assert model.grad_checkpointing
    model(x).square().sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], msg=name)


@pytest.mark.parametrize("name", TINY_NAMES)
def test_fx_and_export_trace_the_model(name: str) -> None:
    model = timm.create_model(name).eval()
    x = images()
    expected = model(x)
    traced = torch.fx.symbolic_trace(model)  # the input check steps aside for the Proxy
    torch.testing.assert_close(traced(x), expected, rtol=0, atol=0)
    exported = torch.export.export(model, (x,))
    torch.testing.assert_close(exported.module()(x), expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"pretrained": True}, AotError, "no pretrained weights"),
        ({"not_a_model_arg": 1}, TypeError, "unexpected keyword argument 'not_a_model_arg'; it takes num_classes"),
        ({"img_size": (28, 35)}, AotError, "square images"),
        ({"drop_path_rate": 1.5}, AotError, r"drop_path_rate=1.5 must be in \[0, 1\)"),
    ],
)
def test_unsupported_arguments_are_one_line(kwargs: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        timm.create_model(TINY, **kwargs)
    assert "\n" not in str(info.value)


def test_an_unknown_keyword_is_a_type_error_and_an_aot_error() -> None:
    with pytest.raises(TimmArgumentError) as info:
        timm.create_model(TINY, device="meta", nonsense=True)
    assert isinstance(info.value, TypeError) and isinstance(info.value, AotError)
    assert all(keyword in str(info.value) for keyword in TIMM_KEYWORDS)
