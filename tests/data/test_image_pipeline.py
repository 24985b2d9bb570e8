"""The on-disk image pipeline end to end, on a tiny ImageNet-layout folder of mixed JPEGs / PNGs: layouts, class ids,
worker decoding (bitwise equal for any number of workers, per-sample seeds, out-of-order steps), exact resume of
`aot train vision`, tar shards (bytes, tarfile, determinism, resumed packing), and bad input: a counted skip or one
line with exit status 2, never a traceback."""

from __future__ import annotations

import hashlib
import io
import json
import re
import struct
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("PIL")

from PIL import Image

from aot.data import image_tars
from aot.data.image_files import FileSplit, UnreadableImage, hold_out, open_image_files
from aot.data.image_stream import ImageStream, ModelInputs, Normaliser, eval_batches
from aot.data.image_tars import open_image_shards, pack_images
from aot.data.image_transforms import ImageRecipe, Mixing
from aot.data.images import EpochOrder, open_images
from aot.errors import AotError
from conftest import run_cli

CLASSES = ("bird", "ant", "cat")  # written in this order; the ids are the sorted names: ant 0, bird 1, cat 2
TRAIN, VAL = 8, 3
SMALL_MODEL = ["model.n_layer=1", "model.n_embd=32", "model.image_size=16", "model.patch_size=8", "model.in_chans=3"]
QUICK_RUN = [*SMALL_MODEL, "train.steps=6", "train.batch_size=8", "train.progress=false", "train.eval_every=3"]


def write_image(path: Path, seed: int, mode: str = "RGB", fmt: str = "JPEG") -> None:
    """A noise image of a random size in 20..60 pixels a side, saved in ``mode`` and ``fmt``."""
    rng = np.random.default_rng(seed)
    width, height = (int(v) for v in rng.integers(20, 61, size=2))
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).convert(mode).save(path, format=fmt)


def make_imagenet(root: Path, train: int = TRAIN, val: int = VAL) -> Path:
    """``root/{train,val}/CLASS/*``: JPEGs in RGB and grayscale (L), one RGBA PNG and one CMYK JPEG."""
    seed = 0
    for split, count in (("train", train), ("val", val)):
        for name in CLASSES:
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                seed += 1
                if (split, name, i) == ("train", "ant", 2):
                    write_image(folder / f"{name}_{i}.png", seed, "RGBA", "PNG")
                elif (split, name, i) == ("train", "cat", 3):
                    write_image(folder / f"{name}_{i}.jpg", seed, "CMYK")
                else:
                    write_image(folder / f"{name}_{i}.JPEG", seed, "L" if i % 3 == 1 else "RGB")
    return root


@pytest.fixture
def imagenet(tmp_path: Path) -> Path:
    return make_imagenet(tmp_path / "imagenet")


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the folder, its tar shards with ~5 images per shard), shared by the read-only shard tests."""
    base = tmp_path_factory.mktemp("packed")
    root = make_imagenet(base / "imagenet")
    pack_images(root, base / "shards", shard_bytes=8_000)
    return root, base / "shards"


def assert_one_line_error(code: int, err: str, *fragments: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aot: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def truncated_jpeg(path: Path, seed: int = 99) -> None:
    """A JPEG whose header is intact and whose body is cut in half (opens, does not decode)."""
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(buffer, "JPEG")
    raw = buffer.getvalue()
    path.write_bytes(raw[: len(raw) // 2])


def bomb_png(path: Path) -> None:
    """A few-byte PNG whose header claims 20,000 x 20,000 pixels: PIL refuses it as a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 20_000, 20_000, 8, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    )


class Served:
    """An :class:`ImageStream` whose ``get`` returns what the loss sees: the batch through :class:`ModelInputs`
    (normalised, mixed when the stream mixes)."""

    def __init__(self, stream: ImageStream, inputs: ModelInputs) -> None:
        self.stream, self.inputs = stream, inputs

    def get(self, *args: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs(self.stream.get(*args))

    def __getattr__(self, name: str):  # set_rows, close, unreadable
        return getattr(self.stream, name)


def stream(split, workers: int = 0, mixing: Mixing | None = None, batch_size: int = 8, seed: int = 3) -> Served:
    recipe = ImageRecipe(size=16, randaug_ops=2)
    order = EpochOrder(len(split), batch_size, seed)
    source = ImageStream(split, recipe, order, batch_size, seed, workers=workers, mixing=mixing or Mixing())
    return Served(source, ModelInputs(Normaliser([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]), num_classes=3))


# -- layouts ----------------------------------------------------------------------------------------------


def test_imagenet_layout_sorted_classes_and_val_becomes_test(imagenet: Path) -> None:
    data = open_image_files(imagenet)
    assert data.layout == "imagenet" and data.classes == ["ant", "bird", "cat"]
    assert {split: len(s) for split, s in data.splits.items()} == {"train": 3 * TRAIN, "test": 3 * VAL}
    assert "test = val/" in data.notes and data.skipped == {}
    for split, folder in (("train", "train"), ("test", "val")):
        images = data.splits[split]
        assert isinstance(images, FileSplit)
        for i in range(len(images)):
            path = images.path(i)
            assert path.parent.parent == imagenet / folder
            assert data.classes[int(images.labels[i])] == path.parent.name
    (imagenet / "val").rename(imagenet / "test")  # a test/ folder is read when there is no val/
    data = open_image_files(imagenet)
    assert len(data.splits["test"]) == 3 * VAL and "test = test/" in data.notes


def test_classes_txt_fixes_the_ids_of_a_subset(imagenet: Path) -> None:
    (imagenet / "classes.txt").write_text("zebra\ncat\n\nant\nbird\n")  # a class this subset lacks, a blank line
    data = open_image_files(imagenet)
    assert data.classes == ["zebra", "cat", "ant", "bird"] and data.num_classes == 4
    train = data.splits["train"]
    assert isinstance(train, FileSplit)
    for i in range(len(train)):
        assert data.classes[int(train.labels[i])] == train.path(i).parent.name
    assert set(train.labels.tolist()) == {1, 2, 3}  # no image of zebra (id 0), the others keep the file's ids
    (imagenet / "classes.txt").write_text("cat\nant\n")
    with pytest.raises(AotError, match="bird are not in"):
        open_image_files(imagenet)
    (imagenet / "classes.txt").write_text("cat\nant\nbird\nant\n")
    with pytest.raises(AotError, match="names a class twice"):
        open_image_files(imagenet)


def test_hold_out_and_val_size(imagenet: Path) -> None:
    train = open_image_files(imagenet).splits["train"]
    rest, held = hold_out(train, 5, seed=0)
    assert (len(rest), len(held)) == (3 * TRAIN - 5, 5)
    names = {bytes(p) for p in train.paths}
    assert {bytes(p) for p in rest.paths} | {bytes(p) for p in held.paths} == names
    assert not {bytes(p) for p in rest.paths} & {bytes(p) for p in held.paths}
    assert [bytes(p) for p in hold_out(train, 5, seed=0)[1].paths] == [bytes(p) for p in held.paths]  # seeded
    assert [bytes(p) for p in hold_out(train, 5, seed=1)[1].paths] != [bytes(p) for p in held.paths]
    assert list(rest.paths) == sorted(rest.paths, key=lambda p: list(train.paths).index(p))  # original order kept
    with pytest.raises(AotError, match=r"lower data\.val_size"):
        hold_out(train, 3 * TRAIN)
    data = open_images(str(imagenet), val_size=0.25)
    assert {k: len(v) for k, v in data.splits.items()} == {"train": 18, "val": 6, "test": 3 * VAL}
    assert len(open_images(str(imagenet), val_size=4).splits["val"]) == 4


def test_class_folders_split_80_20_and_skip_non_images(tmp_path: Path) -> None:
    root = tmp_path / "folders"
    for c, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for i in range(10):
            write_image(root / name / f"{i}.jpg", 100 * c + i)
    (root / "ant" / "notes.txt").write_text("not an image")
    (root / "ant" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (root / "bird" / ".hidden.jpg").write_bytes(b"")
    (root / ".cache").mkdir()  # a hidden folder is no class
    data = open_image_files(root)
    assert data.layout == "class-folders" and data.classes == ["ant", "bird", "cat"]
    train, test = data.splits["train"], data.splits["test"]
    assert (len(train), len(test)) == (24, 6)
    assert not {bytes(p) for p in train.paths} & {bytes(p) for p in test.paths}
    assert all(not bytes(p).split(b"/")[-1].startswith(b".") for p in [*train.paths, *test.paths])
    assert not any(bytes(p).endswith(b".txt") for p in [*train.paths, *test.paths])
    assert sum(data.skipped.values()) == 3  # notes.txt, .DS_Store and .hidden.jpg: skipped and counted
    assert data.skipped == {"not an image (by its suffix)": 1, "hidden file": 2}
    again = open_image_files(root)
    assert [bytes(p) for p in again.splits["test"].paths] == [bytes(p) for p in test.paths]  # a seeded split
    info = data.info()
    assert info["skipped_files"] == data.skipped and info["sizes"] == {"train": 24, "test": 6}


# -- decoding: any mode, any size ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_every_image_becomes_size_by_size_in_the_recipe_mode(imagenet: Path, mode: str) -> None:
    data = open_image_files(imagenet)
    modes = set()
    for split in data.splits.values():
        for i in range(len(split)):
            modes.add(split.image(i).mode)
    assert {"RGB", "L", "RGBA", "CMYK"} <= modes  # the fixture has them all
    recipe = ImageRecipe(size=16, mode=mode, randaug_ops=2)
    channels = 3 if mode == "RGB" else 1
    train = data.splits["train"]
    for i in range(len(train)):
        for rng in (None, np.random.default_rng(i)):
            out = recipe(train.image(i), rng)
            assert out.shape == (channels, 16, 16) and out.dtype == np.uint8
    batches = list(eval_batches(data.splits["test"], recipe, np.arange(3 * VAL), 4, 0, None))
    assert [tuple(x.shape) for x, _ in batches] == [(4, channels, 16, 16), (4, channels, 16, 16), (1, channels, 16, 16)]


# -- ImageStream --------------------------------------------------------------------------------------------


def test_stream_is_bitwise_equal_with_and_without_workers(imagenet: Path) -> None:
    train = open_image_files(imagenet).splits["train"]
    mixing = Mixing(mixup=0.8, cutmix=1.0, seed=3)
    inline, workers = stream(train, 0, mixing), stream(train, 2, mixing)
    try:
        for step in range(4):  # 32 samples over 24 images: into the second epoch
            a, b = inline.get(step), workers.get(step)
            assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
            assert a[0].shape == (8, 3, 16, 16) and a[1].shape == (8, 3)
    finally:
        workers.close()


def test_a_row_depends_only_on_seed_and_sample(imagenet: Path) -> None:
    train = open_image_files(imagenet).splits["train"]
    whole = [stream(train).get(step) for step in range(3)]
    part = stream(train)
    for step in range(3):
        images, labels = part.get(step, 4, 8)
        assert torch.equal(images, whole[step][0][4:8]) and torch.equal(labels, whole[step][1][4:8])
    resumed = stream(train)
    assert torch.equal(resumed.get(2)[0], whole[2][0])  # a step asked first, as after a resume
    assert torch.equal(resumed.get(0)[0], whole[0][0])  # and one before it
    assert not torch.equal(stream(train, seed=4).get(0)[0], whole[0][0])  # another seed, other crops
    assert whole[0][1].dtype == torch.int64  # no mixing: the labels stay class ids
    mixed = stream(train, mixing=Mixing(mixup=0.8, seed=3))
    for start in (0, 2, 4, 6):
        full = stream(train, mixing=Mixing(mixup=0.8, seed=3)).get(1)
        images, target = mixed.get(1, start, start + 2)
        assert torch.equal(images, full[0][start : start + 2]) and torch.equal(target, full[1][start : start + 2])
    with pytest.raises(AotError, match="split a pair"):
        mixed.set_rows([(0, 3), (3, 8)])


def test_a_row_is_its_image_through_the_recipe_with_the_sample_seed(imagenet: Path) -> None:
    """Row r of step s: image order(s)[r] (or, when that one does not decode, the next image of the split) through the
    training recipe with the generator of (seed, s·B + r), normalised."""
    data = open_image_files(imagenet)
    train = data.splits["train"]
    broken = 5
    truncated_jpeg(train.path(broken))  # image 5 is now unreadable: image 6 takes its place
    s = stream(train, seed=3)
    recipe, order = ImageRecipe(size=16, randaug_ops=2), EpochOrder(len(train), 8, 3)
    met = 0
    for step in range(3):
        images, labels = s.get(step)
        for r, i in enumerate(order(step).tolist()):
            j = broken + 1 if i == broken else i
            met += i == broken
            pixels = recipe(train.image(j), np.random.default_rng([3, step * 8 + r]))
            expected = (torch.from_numpy(pixels).double() / 255.0 - 0.5) / 0.25  # normalised, in float64
            torch.testing.assert_close(images[r].double(), expected, rtol=0, atol=1e-6, msg=str((step, r)))
            assert int(labels[r]) == int(train.labels[j])
    assert met == 1  # 24 samples over 24 images: the broken one once
    (name,) = s.unreadable
    assert name.startswith(f"{train.path(broken)}: OSError: image file is truncated")


def test_resume_at_step_5_equals_the_uninterrupted_sequence(imagenet: Path) -> None:
    train = open_image_files(imagenet).splits["train"]
    mixing = Mixing(mixup=0.8, cutmix=1.0, seed=1)
    straight = stream(train, mixing=mixing)
    sequence = [straight.get(step) for step in range(7)]
    resumed = stream(train, workers=2, mixing=mixing)
    try:
        for step in (5, 6):
            images, target = resumed.get(step)
            assert torch.equal(images, sequence[step][0]) and torch.equal(target, sequence[step][1])
    finally:
        resumed.close()
    assert len({sequence[s][0].sum().item() for s in range(7)}) == 7  # steps differ


def test_resumed_run_with_workers_equals_the_uninterrupted_run(imagenet: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from aot.tasks import get_task, run_task

    task = get_task("vision")
    sets = [
        *QUICK_RUN,
        f"data.dataset={imagenet}",
        "data.val_size=4",
        "data.randaug_ops=2",
        "data.mixup=0.8",
        "data.cutmix=1.0",
    ]
    whole = run_task(task, task.build_run("fashion-mssa", sets=[*sets, "data.workers=0"]), tmp_path / "whole", "cpu")
    split_run = task.build_run("fashion-mssa", sets=[*sets, "data.workers=1"])
    assert run_task(task, split_run, tmp_path / "split", "cpu", stop_at=3) == {}
    resumed_run = task.build_run("fashion-mssa", sets=[*sets, "data.workers=2"])  # the workers may change on resume
    resumed = run_task(task, resumed_run, tmp_path / "split", "cpu", resume=True)
    assert resumed["test"] == whole["test"] and resumed["val"] == whole["val"]
    assert resumed["train"]["evals"] == whole["train"]["evals"]
    a = load_file(str(tmp_path / "whole" / "checkpoint" / "model.safetensors"))
    b = load_file(str(tmp_path / "split" / "checkpoint" / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert whole["data"]["sizes"] == {"train": 20, "test": 9, "val": 4}
    assert whole["data"]["unreadable_images"]["count"] == 0 and whole["train"]["workers"] == 0
    assert resumed["train"]["workers"] == 2 and len(whole["test"]["confusion"]) == 3


# -- tar shards ---------------------------------------------------------------------------------------------


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def test_shards_hold_every_image_byte_for_byte(packed: tuple[Path, Path]) -> None:
    root, shards = packed
    folder, tars = open_image_files(root), open_image_shards(shards)
    assert tars.layout == "tar-shards" and tars.classes == folder.classes
    assert {k: len(v) for k, v in tars.splits.items()} == {k: len(v) for k, v in folder.splits.items()}
    for split, files in folder.splits.items():
        originals = {digest(files.path(i).read_bytes()): (i, int(files.labels[i])) for i in range(len(files))}
        packed_split = tars.splits[split]
        found = set()
        for i in range(len(packed_split)):
            row = packed_split.index[i]
            with open(packed_split.shards[int(row["shard"])], "rb") as handle:
                handle.seek(int(row["offset"]))
                raw = handle.read(int(row["size"]))
            j, label = originals[digest(raw)]  # the original bytes, never re-encoded
            assert int(packed_split.labels[i]) == label
            found.add(j)
            a, b = packed_split.image(i), files.image(j)
            assert a.mode == b.mode and np.array_equal(np.asarray(a), np.asarray(b))
        assert found == set(range(len(files)))
    assert len(tars.splits["train"].shards) > 2  # several shards, every image in one


def test_shards_are_plain_webdataset_tars(packed: tuple[Path, Path]) -> None:
    _, shards = packed
    meta = json.loads((shards / "meta.json").read_text())
    data = open_image_shards(shards)
    for split, entry in meta["splits"].items():
        keys_seen: list[str] = []
        labels: list[int] = []
        for spec in entry["shards"]:
            with tarfile.open(shards / spec["name"]) as tar:
                members = tar.getmembers()
                assert len(members) == 2 * spec["images"]
                for image, cls in zip(members[::2], members[1::2], strict=True):
                    key, suffix = image.name.rsplit(".", 1)
                    assert cls.name == f"{key}.cls" and suffix in ("jpeg", "jpg", "png")
                    labels.append(int(tar.extractfile(cls).read().decode()))
                    raw = tar.extractfile(image).read()
                    assert Image.open(io.BytesIO(raw)).size[0] >= 20
                    keys_seen.append(key)
        assert len(keys_seen) == len(set(keys_seen)) == entry["images"]
        assert labels == data.splits[split].labels.tolist()  # the index's order is the shards' order
    assert not (shards / "progress.json").exists() and not list(shards.glob(".*-rows.npy"))


def test_packing_is_deterministic_and_shuffles_across_shards(packed: tuple[Path, Path], tmp_path: Path) -> None:
    root, shards = packed
    again = tmp_path / "again"
    pack_images(root, again, shard_bytes=8_000)
    names = sorted(p.name for p in shards.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (shards / name).read_bytes() == (again / name).read_bytes(), name
    first = open_image_shards(shards).splits["train"]
    in_first = first.labels[first.index["shard"] == 0]
    assert len(set(in_first.tolist())) > 1  # a shard holds several classes


@pytest.mark.parametrize("killed_in", ["train", "test"])
def test_an_interrupted_pack_resumes_to_the_same_bytes(
    packed: tuple[Path, Path], tmp_path: Path, monkeypatch, killed_in: str
) -> None:
    root, shards = packed
    train_shards = len(json.loads((shards / "meta.json").read_text())["splits"]["train"]["shards"])
    assert train_shards > 3
    kill_at = 2 if killed_in == "train" else train_shards + 1  # the third shard, or the second of test/
    real = image_tars._OpenShard.close
    written: list[str] = []

    def failing(shard) -> int:
        if len(written) == kill_at:
            raise KeyboardInterrupt  # killed while writing a shard
        written.append(shard.path.name)
        return real(shard)

    out = tmp_path / "resumed"
    monkeypatch.setattr(image_tars._OpenShard, "close", failing)
    with pytest.raises(KeyboardInterrupt):
        pack_images(root, out, shard_bytes=8_000)
    assert (out / "progress.json").is_file() and not (out / "meta.json").exists()
    assert not list(out.glob(".*.tmp"))  # the shard being written when it was interrupted is gone
    with pytest.raises(AotError, match="unfinished packing"):
        pack_images(root, out, shard_bytes=9_000)
    rewritten: list[str] = []
    monkeypatch.setattr(
        image_tars._OpenShard, "close", lambda shard: (rewritten.append(shard.path.name), real(shard))[1]
    )
    pack_images(root, out, shard_bytes=8_000)
    assert written[-1].startswith(f"{killed_in}-") and not set(written) & set(rewritten)  # finished shards kept
    names = sorted(p.name for p in shards.iterdir())
    assert names == sorted(p.name for p in out.iterdir())
    for name in names:
        assert (shards / name).read_bytes() == (out / name).read_bytes(), name


def test_pack_skips_what_is_not_an_image_and_the_stream_counts_what_does_not_decode(
    imagenet: Path, tmp_path: Path
) -> None:
    (imagenet / "train" / "ant" / "empty.jpg").write_bytes(b"")
    (imagenet / "train" / "ant" / "fake.jpg").write_bytes(b"this is text, not a JPEG")
    truncated_jpeg(imagenet / "train" / "bird" / "cut.jpg")  # its header opens: packed, found when decoded
    meta = pack_images(imagenet, tmp_path / "shards", shard_bytes=8_000)
    assert meta["skipped"] == {"empty file": 1, "not readable as an image": 1}
    data = open_image_shards(tmp_path / "shards")
    train = data.splits["train"]
    assert len(train) == 3 * TRAIN + 1
    s = stream(train)
    for step in range(4):  # 32 samples: every one of the 25 images at least once
        images, _ = s.get(step)
        assert torch.isfinite(images).all()
    assert len(s.unreadable) == 1
    (name,) = s.unreadable
    assert str(tmp_path / "shards") in name and "at byte" in name


# -- bad input --------------------------------------------------------------------------------------------


def train_args(data: Path, out: Path, *sets: str) -> list[str]:
    args = ["train", "vision", "--data", str(data), "--out", str(out)]
    for item in [*QUICK_RUN, "data.workers=2", *sets]:
        args += ["--set", item]
    return args


def test_unreadable_images_are_counted_skips_and_the_run_finishes(imagenet: Path, tmp_path: Path, capfd) -> None:
    truncated_jpeg(imagenet / "train" / "ant" / "cut.jpg")
    (imagenet / "train" / "bird" / "zero.jpg").write_bytes(b"")
    bomb_png(imagenet / "train" / "cat" / "bomb.png")
    (imagenet / "train" / "cat" / "notes.txt").write_text("not an image")
    truncated_jpeg(imagenet / "val" / "ant" / "cut_val.jpg")
    out = tmp_path / "run"
    # 27 training images, 7 x 8 = 56 samples: every one met at least twice, each bad one named once
    sets = ("data.val_size=0", "eval.periodic_split=test", "data.randaug_ops=2", "train.steps=7", "train.eval_every=3")
    args = train_args(imagenet, out, *sets)
    code, _, err = run_cli(args, capfd)
    assert code == 0, err
    assert "Traceback" not in err
    assert all(line.startswith(("aot: ", "step=")) for line in err.splitlines()), err
    results = json.loads((out / "results.json").read_text())
    unreadable = results["data"]["unreadable_images"]
    bad = ("cut.jpg", "zero.jpg", "bomb.png")
    assert unreadable["count"] == 4 and sum("cut_val.jpg" in entry for entry in unreadable["first"]) == 1
    assert sum(map(sum, results["test"]["confusion"])) == 3 * VAL  # the evaluation leaves the broken image out
    assert results["train"]["images"] == 56  # every row filled
    for name in bad:
        assert sum(name in entry for entry in unreadable["first"]) == 1, unreadable
        lines = [line for line in err.splitlines() if name in line]
        assert len(lines) == 1 and lines[0].startswith("aot: skipped an unreadable image"), err
    assert results["data"]["skipped_files"] == {"not an image (by its suffix)": 1}
    assert results["data"]["sizes"]["train"] == 3 * TRAIN + 3  # listed; replaced when read
    assert (out / "checkpoint" / "model.safetensors").is_file()
    evals = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [row for row in evals if row.get("eval")]
    assert [row["step"] for row in evals] == [3, 6, 7] and all("test_loss" in row for row in evals)
    assert all(np.isfinite(row["test_loss"]) for row in evals) and not any("val_loss" in row for row in evals)


def test_a_split_of_only_unreadable_images_is_one_line_from_the_training_process(
    imagenet: Path, tmp_path: Path, capfd
) -> None:
    """Workers find nothing to decode: the training process says so in one line (not a worker's traceback), and the
    earlier run in another folder is untouched."""
    for path in (imagenet / "train").rglob("*.*"):
        path.write_bytes(b"\xff\xd8 not a jpeg")
    stats = ("data.val_size=0", "data.mean=[0.5,0.5,0.5]", "data.std=[0.25,0.25,0.25]")  # no statistics to compute
    code, _, err = run_cli(train_args(imagenet, tmp_path / "run", *stats), capfd)
    lines = [line for line in err.splitlines() if line.startswith("aot: error")]
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert "cannot be decoded" in lines[0] and "check the data set" in lines[0]


def test_bad_folders_are_one_line_errors(imagenet: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    (imagenet / "train" / "dog").mkdir()
    code, _, err = run_cli(train_args(imagenet, out), capsys)
    assert_one_line_error(code, err, str(imagenet / "train" / "dog"), "has no images")
    (imagenet / "train" / "dog").rmdir()
    (imagenet / "val" / "eel").mkdir()
    write_image(imagenet / "val" / "eel" / "0.jpg", 7)
    code, _, err = run_cli(train_args(imagenet, out), capsys)
    assert_one_line_error(code, err, "eel", "train/ does not have")
    for name in ("eel", *CLASSES):  # ImageNet's raw val: every image directly in val/
        for image in (imagenet / "val" / name).iterdir():
            image.rename(imagenet / "val" / f"{name}_{image.name}")
        (imagenet / "val" / name).rmdir()
    code, _, err = run_cli(train_args(imagenet, out), capsys)
    assert_one_line_error(code, err, f"holds {3 * VAL + 1} images directly", "sort them into")
    code, _, err = run_cli(["data", "info", "--images", str(imagenet)], capsys)
    assert_one_line_error(code, err, "sort them into")
    for image in (imagenet / "val").iterdir():
        image.unlink()
    (imagenet / "val").rmdir()
    code, _, err = run_cli(train_args(imagenet, out), capsys)
    assert_one_line_error(code, err, "has train/ but no val/ or test/")
    assert not (out / "results.json").exists()


def test_truncated_shard_is_a_one_line_error(packed: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    import shutil

    _, shards = packed
    cut = tmp_path / "cut"
    shutil.copytree(shards, cut)
    victim = cut / "train-000001.tar"
    victim.write_bytes(victim.read_bytes()[:-700])
    with pytest.raises(AotError, match=r"train-000001\.tar"):
        open_image_shards(cut)
    code, _, err = run_cli(train_args(cut, tmp_path / "run"), capsys)
    assert_one_line_error(code, err, str(victim), "cut short")
    code, _, err = run_cli(["data", "info", "--images", str(cut)], capsys)
    assert_one_line_error(code, err, str(victim), "cut short")
    victim.unlink()
    code, _, err = run_cli(["data", "info", "--images", str(cut)], capsys)
    assert_one_line_error(code, err, str(victim), "missing")


def test_a_cut_or_missing_index_is_a_one_line_error(packed: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    import shutil

    _, shards = packed
    cut = tmp_path / "cut"
    shutil.copytree(shards, cut)
    index = cut / "train-index.npy"
    raw = index.read_bytes()
    index.write_bytes(raw[:-50])
    code, _, err = run_cli(["data", "info", "--images", str(cut)], capsys)
    assert_one_line_error(code, err, str(index), "copy it again")
    code, _, err = run_cli(train_args(cut, tmp_path / "run"), capsys)
    assert_one_line_error(code, err, str(index))
    index.unlink()
    code, _, err = run_cli(["data", "info", "--images", str(cut)], capsys)
    assert_one_line_error(code, err, str(index), "copy it again")
    np.save(index, np.load(shards / "train-index.npy")[:-1])  # a whole file of another length
    code, _, err = run_cli(["data", "info", "--images", str(cut)], capsys)
    assert_one_line_error(code, err, str(index), f"lists {3 * TRAIN - 1} images, meta.json says {3 * TRAIN}")


@pytest.mark.parametrize(
    ("setting", "fragment"),
    [
        ("data.augment=bogus", "data.augment='bogus'"),
        ("data.scale=[0.5,0.1]", "data.scale"),
        ("data.mixup=-1", "data.mixup"),
        ("data.mean=[0.5,0.5,0.5]", "data.mean and data.std together"),
        ("eval.periodic_split=train", "eval.periodic_split='train'"),
        ("data.workers=-1", "data.workers=-1"),
        ("data.randaug_magnitude=31", "data.randaug_magnitude"),
    ],
)
def test_config_errors_are_one_line(imagenet: Path, tmp_path: Path, capsys, setting: str, fragment: str) -> None:
    code, _, err = run_cli(train_args(imagenet, tmp_path / "run", setting), capsys)
    assert_one_line_error(code, err, fragment)
    assert not (tmp_path / "run" / "checkpoint").exists()


def test_a_failed_run_keeps_the_finished_run(imagenet: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    code, _, err = run_cli(train_args(imagenet, out, "data.val_size=4", "train.steps=2"), capsys)
    assert code == 0, err
    before = (out / "results.json").read_bytes(), (out / "checkpoint" / "model.safetensors").read_bytes()
    (imagenet / "train" / "dog").mkdir()  # the folder breaks; the same --out is refused, nothing is lost
    code, _, err = run_cli(train_args(imagenet, out, "data.val_size=4", "train.steps=2"), capsys)
    assert_one_line_error(code, err, "dog")
    assert ((out / "results.json").read_bytes(), (out / "checkpoint" / "model.safetensors").read_bytes()) == before


# -- the CLI ------------------------------------------------------------------------------------------------


def test_pack_images_and_info_cli(imagenet: Path, tmp_path: Path, capsys) -> None:
    (imagenet / "train" / "ant" / "empty.jpg").write_bytes(b"")
    (imagenet / "train" / "ant" / "notes.txt").write_text("x")
    shards = tmp_path / "shards"
    code, out, err = run_cli(["data", "pack-images", str(imagenet), "--out", str(shards), "--shard-mb", "0.01"], capsys)
    assert code == 0, err
    summary = out.strip().splitlines()
    assert len(summary) == 1
    assert summary[0].startswith(f"packed {imagenet} into {shards}: train {3 * TRAIN} images in ")
    assert re.search(
        rf"train {3 * TRAIN} images in [3-9] shard\(s\); test {3 * VAL} images in \d shard\(s\)", summary[0]
    )
    assert "1 not an image (by its suffix)" in summary[0] and "1 empty file" in summary[0]
    assert err.count("aot: train: ") >= 2  # a progress line per shard
    code, out, err = run_cli(["data", "info", "--images", str(shards)], capsys)
    assert code == 0, err
    assert out.startswith(
        f"shards (tar-shards, read from disk): 3 classes; train {3 * TRAIN - 2}, test {3 * VAL}, val 2 images"
    )
    assert "classes: ant, bird, cat" in out and f"tar shards packed from {imagenet}" in out
    code, out, err = run_cli(["data", "info", "--images", "--json", str(shards)], capsys)
    info = json.loads(out)
    assert info["layout"] == "tar-shards" and info["sizes"] == {"train": 3 * TRAIN - 2, "test": 3 * VAL, "val": 2}
    assert info["skipped_files"] == {"not an image (by its suffix)": 1, "empty file": 1}
    code, _, err = run_cli(["data", "pack-images", str(shards), "--out", str(tmp_path / "twice")], capsys)
    assert_one_line_error(code, err, "already packed")
    code, _, err = run_cli(
        ["data", "pack-images", str(imagenet), "--out", str(tmp_path / "x"), "--shard-mb", "0"], capsys
    )
    assert_one_line_error(code, err, "--shard-mb")


def test_decompression_bomb_is_an_unreadable_image(tmp_path: Path) -> None:
    bomb_png(tmp_path / "bomb.png")
    split = FileSplit(tmp_path, np.array([b"bomb.png"]), np.array([0]))
    with pytest.raises(UnreadableImage, match=r"bomb\.png"):
        split.image(0)
