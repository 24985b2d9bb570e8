"""Image sets that stay on disk: an index of files (or of tar members), read one image at a time.

A set of this kind is listed, never loaded: :class:`ImageFiles` holds, per split, the images' locations in numpy
arrays (no Python object per image, so the DataLoader workers forked from the trainer share them without copying)
and their class ids. :mod:`aot.data.image_stream` decodes and augments them in worker processes.

Layouts (:func:`open_image_files`):

- **ImageNet's**: ``ROOT/train/CLASS/*.JPEG`` and ``ROOT/val/CLASS/*.JPEG`` (``ROOT/test/CLASS`` is read when there is
  no ``val/``). The evaluation folder becomes the ``test`` split, the number a run reports. Class ids are the
  positions of the class names in ``ROOT/classes.txt`` when that file exists (one folder name per line: the ids of a
  subset stay those of the full set), else the sorted train folder names (for ImageNet-1K: the standard ids).
- **class folders**: ``ROOT/CLASS/*``, split 80/20 into train / test by a fixed seeded permutation.

(Tar shards written by ``aot data pack-images``, a folder with ``meta.json``, are read by :mod:`aot.data.image_tars`;
:func:`aot.data.images.open_images` picks between the two.)

Files whose suffix is not an image's (``notes.txt``, ``.DS_Store``) and hidden files are skipped and counted. A file
that cannot be decoded (corrupt, zero bytes) is found when a worker reads it: see
:class:`aot.data.image_stream.DecodedImages`.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from aot.errors import AotError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
CLASS_INDEX_FILE = "classes.txt"
EVAL_FOLDERS = ("val", "test")  # ImageNet's evaluation folder, or a test folder


class UnreadableImage(Exception):
    """An image file that exists in the index but cannot be decoded (corrupt, truncated, zero bytes, not an image)."""


class ImageSplit(Protocol):
    """One split of an image set: ``len``, the class id of each image, and image ``i`` as a PIL image."""

    labels: np.ndarray

    def __len__(self) -> int: ...

    def image(self, i: int) -> Any: ...  # a PIL.Image.Image; raises UnreadableImage

    def describe(self, i: int) -> str: ...  # where image i lives, for messages

    def subset(self, indices: np.ndarray) -> ImageSplit: ...


def decode_image(raw: bytes, where: str) -> Any:
    """The bytes of an encoded image as a loaded PIL image; :class:`UnreadableImage` naming ``where`` if they are not
    one (zero bytes, a corrupt or truncated file, another format)."""
    from PIL import Image, UnidentifiedImageError

    if not raw:
        raise UnreadableImage(f"{where}: empty file")
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
    except UnidentifiedImageError:
        raise UnreadableImage(f"{where}: not an image format PIL reads") from None
    except (Image.DecompressionBombError, OSError, ValueError, SyntaxError) as exc:
        raise UnreadableImage(f"{where}: {type(exc).__name__}: {exc}") from None
    return image


@dataclass
class FileSplit:
    """Images as files: ``root / paths[i]`` (``paths``: the file names relative to ``root``, as a numpy bytes array)
    with class id ``labels[i]``."""

    root: Path
    paths: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def path(self, i: int) -> Path:
        return self.root / os.fsdecode(bytes(self.paths[i]))

    def describe(self, i: int) -> str:
        return str(self.path(i))

    def image(self, i: int) -> Any:
        path = self.path(i)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise UnreadableImage(f"{path}: {exc.strerror or exc}") from None
        return decode_image(raw, str(path))

    def subset(self, indices: np.ndarray) -> FileSplit:
        return FileSplit(self.root, self.paths[indices], self.labels[indices])


@dataclass
class ImageFiles:
    """A classification set whose images stay on disk: ``splits`` (train, val, test) of :class:`ImageSplit`, the class
    names, the layout it was read from, the files skipped while listing it, and the per-channel mean / std when known
    (else computed on a sample by :func:`aot.data.image_stream.sample_stats`)."""

    name: str
    splits: dict[str, ImageSplit]
    classes: list[str]
    layout: str
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    mean: list[float] | None = None
    std: list[float] | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def size(self, split: str) -> int:
        """The number of images of ``split``."""
        return len(self.splits[split])

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "layout": self.layout,
            "num_classes": self.num_classes,
            "classes": self.classes,
            "sizes": {split: len(images) for split, images in self.splits.items()},
            "skipped_files": dict(self.skipped),
            "notes": list(self.notes),
            "mean": self.mean,
            "std": self.std,
        }


# -- listing folders --------------------------------------------------------------------------------------


def _is_image_name(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


def _class_folders(root: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))


def _list_class(folder: Path, skipped: dict[str, int]) -> list[str]:
    """The image file names of one class folder (sorted); others are counted in ``skipped``."""
    names = []
    for entry in os.scandir(folder):
        if entry.name.startswith("."):
            if entry.is_file():
                skipped["hidden file"] = skipped.get("hidden file", 0) + 1
            continue
        if entry.is_file() and _is_image_name(entry.name):
            names.append(entry.name)
        elif entry.is_file():
            skipped["not an image (by its suffix)"] = skipped.get("not an image (by its suffix)", 0) + 1
    return sorted(names)


def list_class_folders(root: Path, classes: Sequence[str], skipped: dict[str, int], allow_empty: bool) -> FileSplit:
    """Every image under ``root/CLASS/`` for the given classes (class id = position in ``classes``). A class folder
    that is missing or holds no image is a one-line error unless ``allow_empty`` (an evaluation split may lack a
    class)."""
    paths: list[bytes] = []
    labels: list[int] = []
    for label, name in enumerate(classes):
        folder = root / name
        files = _list_class(folder, skipped) if folder.is_dir() else []
        if not files and not allow_empty:
            raise AotError(
                f"class folder {str(folder)!r} has no images ({', '.join(IMAGE_SUFFIXES)}); add some or remove it"
            )
        paths.extend(os.fsencode(f"{name}/{file}") for file in files)
        labels.extend([label] * len(files))
    return FileSplit(root, np.array(paths, dtype=bytes), np.asarray(labels, dtype=np.int64))


def _read_class_index(root: Path, found: list[str]) -> list[str]:
    index_file = root / CLASS_INDEX_FILE
    if not index_file.is_file():
        return found
    classes = [line.strip() for line in index_file.read_text().splitlines() if line.strip()]
    if len(set(classes)) != len(classes):
        raise AotError(f"{index_file} names a class twice; list each class folder once")
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise AotError(
            f"train class folder(s) {', '.join(unknown[:3])} are not in {index_file}; add them or remove the folders"
        )
    return classes


def _imagenet_layout(root: Path) -> ImageFiles:
    eval_name = next(name for name in EVAL_FOLDERS if (root / name).is_dir())
    skipped: dict[str, int] = {}
    train_classes = _class_folders(root / "train")
    if not train_classes:
        raise AotError(f"{root}/train has no class sub-folders; lay it out as {root}/train/CLASS/IMAGE.JPEG")
    classes = _read_class_index(root, train_classes)
    eval_root = root / eval_name
    eval_classes = _class_folders(eval_root)
    if not eval_classes:
        loose = sum(1 for e in os.scandir(eval_root) if e.is_file() and _is_image_name(e.name))
        what = f"holds {loose} images directly" if loose else "has no class sub-folders"
        raise AotError(
            f"{eval_root} {what}; sort them into {eval_root}/CLASS/ as train/ is "
            "(for ImageNet's val: the devkit's labels, e.g. with the widely used valprep.sh)"
        )
    stray = sorted(set(eval_classes) - set(classes))
    if stray:
        raise AotError(
            f"{eval_root} has class folder(s) {', '.join(stray[:3])} that train/ does not have; "
            "remove them or add them to train/"
        )
    train = list_class_folders(root / "train", classes, skipped, allow_empty=(root / CLASS_INDEX_FILE).is_file())
    test = list_class_folders(eval_root, classes, skipped, allow_empty=True)
    if not len(test):
        raise AotError(f"{eval_root} holds no images; add the evaluation images as {eval_root}/CLASS/IMAGE")
    notes = [f"test = {eval_name}/"]
    return ImageFiles(root.name, {"train": train, "test": test}, list(classes), "imagenet", skipped, notes)


def _class_folder_layout(root: Path, seed: int) -> ImageFiles:
    skipped: dict[str, int] = {}
    classes = _class_folders(root)
    if not classes:
        raise AotError(f"{str(root)!r} has no class sub-folders; lay it out as {root}/CLASS/IMAGE.png")
    everything = list_class_folders(root, classes, skipped, allow_empty=False)
    order = np.random.default_rng(seed).permutation(len(everything))
    cut = max(1, round(0.8 * len(everything)))
    train, test = np.sort(order[:cut]), np.sort(order[cut:])
    splits: dict[str, ImageSplit] = {"train": everything.subset(train), "test": everything.subset(test)}
    return ImageFiles(root.name, splits, classes, "class-folders", skipped, ["test = 20 % of the images, seeded"])


def open_image_files(root: Path, seed: int = 0) -> ImageFiles:
    """List the images of folder ``root`` in the first layout that fits, ImageNet's or class folders (see the module
    docstring); nothing is decoded."""
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        raise AotError(f"image folder {str(root)!r} {what}; give a folder of class folders, ImageNet's or tar shards")
    if (root / "train").is_dir():
        if any((root / name).is_dir() for name in EVAL_FOLDERS):
            return _imagenet_layout(root)
        raise AotError(f"{root} has train/ but no val/ or test/; add {root}/val/CLASS/ (ImageNet's layout)")
    return _class_folder_layout(root, seed)


def held_out_indices(n: int, val_size: int | float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(rest, held_out)`` indices of ``n`` training images: ``val_size`` of them (a count, or a fraction below 1)
    chosen by a fixed seeded permutation, and the others, both sorted. The one rule for every image set's ``val``."""
    count = round(val_size * n) if isinstance(val_size, float) else int(val_size)
    if not 0 <= count < n:
        raise AotError(
            f"data.val_size={val_size} holds out {count} of the {n} training images and leaves none to train on; "
            "lower data.val_size"
        )
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[count:]), np.sort(order[:count])


def hold_out(split: ImageSplit, val_size: int | float, seed: int = 0) -> tuple[ImageSplit, ImageSplit]:
    """``(rest, held_out)``: :func:`held_out_indices` of ``split``, both in their original order."""
    rest, held = held_out_indices(len(split), val_size, seed)
    return split.subset(rest), split.subset(held)


@dataclass
class ArraySplit:
    """An in-memory split (uint8 images (N, C, H, W), labels (N,)) behind the same interface, so the worker pipeline can
    serve Fashion-MNIST and the other small sets too."""

    images: Any  # torch.Tensor or np.ndarray, uint8 (N, C, H, W)
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    def describe(self, i: int) -> str:
        return f"image {i}"

    def image(self, i: int) -> Any:
        from PIL import Image

        pixels = np.asarray(self.images[i])
        return Image.fromarray(pixels[0] if pixels.shape[0] == 1 else pixels.transpose(1, 2, 0))

    def subset(self, indices: np.ndarray) -> ArraySplit:
        return ArraySplit(self.images[indices], self.labels[indices])
