"""`aot reproduce --scale paper`'s vision steps are commands the data layer serves: each trains from an ImageNet-layout
folder (train/ + val/ class folders of JPEGs of mixed sizes), as printed, here for two steps at reduced size."""

from __future__ import annotations

import json

import pytest

from aot.cli import main
from aot.report.part import Context
from aot.report.parts import vision as vision_part

PIL = pytest.importorskip("PIL")

REDUCED = ["--steps", "2", "--batch-size", "4", "--set", "train.micro_batch_size=2", "--set", "model.n_layer=1",
           "--set", "model.n_embd=48", "--set", "model.n_head=2", "--set", "model.image_size=32",
           "--set", "train.precision=fp32", "--set", "train.warmup_steps=1", "--set", "train.progress=false",
           "--set", "data.workers=0", "--set", "eval.periodic_images=4"]  # fmt: skip


def test_the_paper_vision_commands_train_from_imagenets_layout(imagenet_folder, tmp_path):
    folder = imagenet_folder
    plan = vision_part.plan(Context("paper", tmp_path / "part", {"imagenet": str(folder)}))
    runs = [s for s in plan.steps if s.argv[:2] == ["train", "vision"]]
    assert [s.argv[s.argv.index("--recipe") + 1] for s in runs] == [
        "imagenet-mssa-s",
        "imagenet-mhsa-s",
        "imagenet-vit-s",
        "imagenet-crate-s",
    ]
    for step in runs[:2]:  # the two AoT models, as printed (the launcher aside), at reduced size
        assert step.launcher[0] == "torchrun" and step.argv[step.argv.index("--data") + 1] == str(folder)
        assert main([*step.options(tmp_path / "part"), *REDUCED]) == 0
        results = json.loads((step.out_dir(tmp_path / "part") / "results.json").read_text())
        assert results["data"]["layout"] == "imagenet" and results["data"]["sizes"]["test"] == 6
        assert results["config"]["data"]["mixup"] == 0.8 and results["config"]["train"]["optimizer"] == "lion"
