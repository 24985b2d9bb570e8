"""What aot's timm face decides without timm: the names, the pretrained configs, the data statistics against
their record, and the one warning that says why nothing was registered (these run where timm does not import)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest

from aot.models.presets import PRESETS

with warnings.catch_warnings():  # where timm does not import, importing the module warns (the last test checks it)
    warnings.simplefilter("ignore", RuntimeWarning)
    from aot.models import timm_models
from aot.models.timm_models import DATA_STATS, import_failure, pretrained_cfg, register, timm_names, torchvision_for

RECORD = Path(__file__).resolve().parents[2] / "benchmarks" / "timm" / "data_stats.json"


def test_every_image_preset_has_a_pretrained_cfg_of_its_own_input() -> None:
    for name, preset in timm_names().items():
        fields = PRESETS[preset].fields
        cfg = pretrained_cfg(preset)
        assert cfg["input_size"] == (fields["in_chans"], fields["image_size"], fields["image_size"]), name
        assert len(cfg["mean"]) == len(cfg["std"]) == fields["in_chans"]
        assert cfg["num_classes"] == fields["num_classes"]
        assert timm_models.default_cfgs[name] == cfg  # what timm's register_model reads


def test_fashion_mnist_statistics_are_the_recorded_ones() -> None:
    recorded = json.loads(RECORD.read_text())["fashion-mnist"]
    data, mean, std = DATA_STATS[(1, 28)]
    assert data == "fashion-mnist" and recorded["images"] == 60_000
    assert mean == pytest.approx(recorded["mean"], abs=5e-5)
    assert std == pytest.approx(recorded["std"], abs=5e-5)


def test_fashion_mnist_statistics_match_the_data_when_installed() -> None:
    from aot.data.images import channel_stats, fashion_mnist_installed, load_fashion_mnist

    if not fashion_mnist_installed():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    import torch

    train = torch.from_numpy(load_fashion_mnist()[0]["train"][0].copy())
    _, mean, std = DATA_STATS[(1, 28)]
    measured_mean, measured_std = channel_stats(train)
    assert mean == pytest.approx(measured_mean, abs=5e-5) and std == pytest.approx(measured_std, abs=5e-5)


@pytest.mark.parametrize(
    ("torch_version", "requirement", "index"),
    [  # PyTorch's pairs: torch 2.0 / torchvision 0.15, 2.6 / 0.21, 2.13 / 0.28 (torchvision 0.28.0 needs torch==2.13.0)
        ("2.13.0+cpu", "torchvision==0.28.*", "https://download.pytorch.org/whl/cpu"),
        ("2.6.0+cu126", "torchvision==0.21.*", "https://download.pytorch.org/whl/cu126"),
        ("2.0.1", "torchvision==0.15.*", None),
    ],
)
def test_torchvision_for(torch_version: str, requirement: str, index: str | None) -> None:
    assert torchvision_for(torch_version) == (requirement, index)


def test_torchvision_mismatch_names_the_build_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timm_models, "torch_version", lambda: "2.13.0+cpu")
    line = import_failure(RuntimeError("operator torchvision::nms does not exist"))
    assert "does not import beside torch 2.13.0+cpu" in line and "operator torchvision::nms" in line
    assert "pip install 'torchvision==0.28.*' --index-url https://download.pytorch.org/whl/cpu" in line
    missing = import_failure(ModuleNotFoundError("No module named 'torchvision'", name="torchvision"))
    assert missing.startswith("timm needs torchvision, which is not installed")


def test_registration_failure_is_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm now raises ModuleNotFoundError(name="timm")
    monkeypatch.delitem(sys.modules, "timm.models", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert register() == []
    assert len(caught) == 1 and caught[0].category is RuntimeWarning
    text = str(caught[0].message)
    assert "timm models are not registered: timm is not installed" in text and "\n" not in text
    assert "pip install 'aot[timm]'" in text
