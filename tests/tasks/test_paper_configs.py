"""The paper's OpenWebText runs as config files (configs/paper/): each one trains for two steps at reduced width from
shards that `aot data prepare` wrote, with every field the file sets reaching the run (what a GPU launch uses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from aot.cli import main

pytest.importorskip("tiktoken")
CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "paper").glob("owt-*.yaml"))
# what a CPU cannot hold or do at the paper's size: the width, the context, compile, bf16; every other field stays
REDUCED = {
    "model.n_layer": 2,
    "model.n_embd": 32,
    "model.n_head": 2,
    "model.block_size": 32,
    "train.steps": 2,
    "train.batch_size": 4,
    "train.micro_batch_size": 2,
    "train.warmup_steps": 1,
    "train.compile": False,
    "train.precision": "fp32",
    "train.progress": False,
    "eval.final_windows": 2,
    "eval.periodic_windows": 2,
    "eval.batch_size": 2,
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    """A small web-like corpus (JSON lines) prepared with GPT-2's BPE, as the configs' comments say to."""
    folder = tmp_path_factory.mktemp("owt")
    words = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
    ]
    with open(folder / "docs.jsonl", "w") as handle:
        for i in range(400):
            text = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(40 + i % 90))
            handle.write(json.dumps({"text": text.capitalize() + "."}) + "\n")
    out = folder / "shards"
    argv = ["data", "prepare", str(folder / "docs.jsonl"), "--tokenizer", "gpt2", "--out", str(out)]
    assert main([*argv, "--workers", "0", "--val-fraction", "0.05", "--test-fraction", "0.05", "--no-progress"]) == 0
    return out


def test_the_paper_configs_cover_the_papers_language_models():
    assert {p.stem for p in CONFIGS} == {
        "owt-gpt2-base", "owt-aot-mhsa-l-base", "owt-aot-mssa-l-base", "owt-aot-mssa-l-medium"
    }  # fmt: skip


def train_reduced(task: str, config: Path, data: Path, reduced: dict, out: Path) -> tuple[dict, dict]:
    """``aot train TASK --config CONFIG --data DATA`` with the ``reduced`` fields set: (the config file's fields,
    the run's results.json), after checking the run used the file's model preset."""
    fields = yaml.safe_load(config.read_text())
    argv = ["train", task, "--config", str(config), "--data", str(data), "--out", str(out)]
    for key, value in reduced.items():
        argv += ["--set", f"{key}={json.dumps(value) if isinstance(value, bool) else value}"]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["model"]["preset"] == fields["model"]["preset"]
    return fields, results


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_paper_config_trains_two_steps_from_prepared_shards(config, shards, tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DATA", str(tmp_path / "cache"))
    fields, results = train_reduced("lm", config, shards, REDUCED, tmp_path / "run")
    recorded = results["config"]
    for key, value in fields["train"].items():  # every training field the file sets, unless reduced here
        if f"train.{key}" not in REDUCED:
            assert recorded["train"][key] == value, key
    assert results["data"]["tokenizer"] == "gpt2" and results["data"]["vocab_size"] == 50257
    assert recorded["model"]["vocab_multiple"] == 64  # the head's 50,304 aligned rows, logits cut back to 50,257
    assert results["data"]["folder"] == str(shards) and results["train"]["steps"] == 2


# -- the paper's ImageNet runs ------------------------------------------------------------------------------

IMAGENET_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs" / "paper").glob("imagenet-*.yaml"))
IMAGENET_RECIPES = {  # config file -> the training recipe it spells out
    "imagenet-aot-mssa-v-s": "imagenet-mssa-s",
    "imagenet-aot-mhsa-v-s": "imagenet-mhsa-s",
    "imagenet-vit-s": "imagenet-vit-s",
    "imagenet-crate-v-s": "imagenet-crate-s",
}
IMAGENET_REDUCED = {
    "model.n_layer": 1,
    "model.n_embd": 48,
    "model.n_head": 2,
    "model.image_size": 32,
    "train.steps": 2,
    "train.batch_size": 4,
    "train.micro_batch_size": 2,
    "train.warmup_steps": 1,
    "train.precision": "fp32",
    "train.progress": False,
    "data.workers": 1,
    "eval.periodic_images": 4,
    "eval.batch_size": 4,
}


def test_the_imagenet_configs_spell_out_the_training_recipes():
    from aot.tasks.vision import VisionRun

    assert {p.stem for p in IMAGENET_CONFIGS} == set(IMAGENET_RECIPES)
    for config in IMAGENET_CONFIGS:
        from_file = VisionRun.build("fashion-mssa", config_file=str(config)).to_dict()
        recipe = VisionRun.build(IMAGENET_RECIPES[config.stem]).to_dict()
        from_file["data"]["dataset"] = recipe["data"]["dataset"]  # the file names an example path
        assert from_file == recipe, config.stem


@pytest.mark.parametrize("config", IMAGENET_CONFIGS, ids=lambda p: p.stem)
def test_imagenet_config_trains_two_steps_on_a_jpeg_folder(config, imagenet_folder, tmp_path):
    fields, results = train_reduced("vision", config, imagenet_folder, IMAGENET_REDUCED, tmp_path / "run")
    recorded = results["config"]
    for section in ("train", "data", "eval"):
        for key, value in fields[section].items():  # every field the file sets, unless reduced here
            if f"{section}.{key}" not in IMAGENET_REDUCED and key != "dataset":
                assert recorded[section][key] == value, f"{section}.{key}"
    assert results["data"]["layout"] == "imagenet" and results["data"]["sizes"] == {"train": 18, "val": 0, "test": 6}
    assert results["test"]["images"] == 6 and results["train"]["steps"] == 2
