"""A synthetic ImageNet-layout folder of mixed-size JPEGs for the image-pipeline benchmark (``run.py`` beside it).

    python benchmarks/data/images/generate.py --images 10000 --out /tmp/aot-images/10k [--seed 0] [--processes 2]

Writes ``OUT/train/nXXXXXXXX/nXXXXXXXX_K.JPEG`` and ``OUT/val/nXXXXXXXX/ILSVRC2012_val_K.JPEG``: ``--images`` files
over 100 classes, 50 of every 1,350 of a class in val/ (ImageNet-1K's 1,300 + 50 per class), and ``OUT/classes.txt``.
Deterministic for a seed: image ``k`` is a function of ``(seed, k)`` alone, whatever ``--processes``.

The images are drawn to decode like ImageNet's, not to look like it:

- sizes: about 5 % small (each side 64-299 px); the rest have a long side of 500 px (70 %) or 300-500 px, an aspect
  ratio of 4:3 (half), 3:2, 1:1 or anything up to 2:1, landscape three times in four (ImageNet's most common sizes
  are 500 × 375 and 500 × 333);
- content: 48 base canvases (640 × 640, rendered once: gradients, a cosine ripple, a few filled shapes, a blur and
  mild Gaussian noise of 4-8 levels), of which each image is a random crop, possibly mirrored or turned, tinted by
  per-channel lookup tables; 2 % are saved grayscale (ImageNet's train set has about 1.7 %);
- JPEG quality 90, 4:2:0 chroma subsampling (Pillow's default): 20-60 KB for a 500 × 375 image.

Reusing canvases keeps it at about a thousand images per second per process (the JPEG encoder is most of it), so
100,000 images take minutes. Idempotent and resumable: each file is written under a hidden temporary name and
renamed, existing files are kept, and ``OUT/generate.json`` (written last) marks a finished folder, which a rerun
with the same settings leaves alone. Prints a JSON line: images written, bytes, seconds, images/s.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = 100
CANVASES = 48
CANVAS = 640  # px: larger than the largest image, so every image is a crop
VAL_PER_CLASS, TRAIN_PER_CLASS = 50, 1300  # ImageNet-1K's
QUALITY = 90
GRAY = 0.02
SMALL = 0.05
MARKER = "generate.json"
TURNS = (Image.Transpose.FLIP_LEFT_RIGHT, Image.Transpose.FLIP_TOP_BOTTOM, Image.Transpose.ROTATE_180)

_canvases: list[Image.Image] = []  # set before the pool forks, shared by its workers


def render_canvas(rng: np.random.Generator) -> Image.Image:
    """One base canvas: per channel a linear gradient plus a cosine ripple around a random centre, 4-9 filled
    ellipses / rectangles / polygons, a Gaussian blur of 1-3 px and Gaussian noise of 4-8 levels."""
    y, x = np.mgrid[0:CANVAS, 0:CANVAS].astype(np.float32) / CANVAS
    planes = []
    for _ in range(3):
        slope_x, slope_y, ripple = rng.uniform(-120, 120, 3)
        cx, cy = rng.uniform(0, 1, 2)
        radius = np.hypot(x - cx, y - cy)
        wave = np.cos(rng.uniform(2, 9) * radius + rng.uniform(0, 2 * math.pi))
        planes.append(rng.uniform(60, 190) + slope_x * x + slope_y * y + ripple * wave)
    image = Image.fromarray(np.clip(np.stack(planes, axis=-1), 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(4, 10))):
        left, top = rng.uniform(0, CANVAS, 2)
        width, height = rng.uniform(40, 260, 2)
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        box = [left, top, left + width, top + height]
        kind = int(rng.integers(3))
        if kind == 0:
            draw.ellipse(box, fill=colour)
        elif kind == 1:
            draw.rectangle(box, fill=colour)
        else:
            draw.polygon([tuple(rng.uniform(0, CANVAS, 2)) for _ in range(int(rng.integers(3, 7)))], fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(float(rng.uniform(1, 3))))
    noise = rng.normal(0, rng.uniform(4, 8), (CANVAS, CANVAS, 3))
    return Image.fromarray(np.clip(np.asarray(image, dtype=np.float32) + noise, 0, 255).astype(np.uint8))


def image_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height) drawn as the module docstring says."""
    if rng.random() < SMALL:
        return int(rng.integers(64, 300)), int(rng.integers(64, 300))
    long = 500 if rng.random() < 0.7 else int(rng.integers(300, 501))
    pick = rng.random()
    ratio = 4 / 3 if pick < 0.5 else 3 / 2 if pick < 0.7 else 1.0 if pick < 0.8 else float(rng.uniform(1.0, 2.0))
    short = max(64, round(long / ratio))
    return (long, short) if rng.random() < 0.75 else (short, long)


def render_image(seed: int, number: int) -> Image.Image:
    """Image ``number``: a crop of one canvas at a random place, mirrored / turned by chance, tinted, maybe gray."""
    rng = np.random.default_rng([seed, number])
    width, height = image_size(rng)
    canvas = _canvases[int(rng.integers(len(_canvases)))]
    left, top = int(rng.integers(0, CANVAS - width + 1)), int(rng.integers(0, CANVAS - height + 1))
    image = canvas.crop((left, top, left + width, top + height))
    turn = int(rng.integers(4))
    if turn:
        image = image.transpose(TURNS[turn - 1])
    gain, offset = rng.uniform(0.7, 1.2, 3), rng.uniform(-30, 30, 3)
    levels = np.arange(256, dtype=np.float32)
    tables = np.concatenate([np.clip(levels * g + o, 0, 255) for g, o in zip(gain, offset)])
    image = image.point(tables.astype(int).tolist())  # one lookup table per channel
    return image.convert("L") if rng.random() < GRAY else image


def plan(images: int, seed: int) -> list[tuple[str, str, list[str]]]:
    """``(split, class, file names)`` per folder, in the order images are numbered: class names ``nXXXXXXXX``
    (eight random digits, as ImageNet's WordNet ids), ``images`` files split ``CLASSES`` ways (the first classes
    take the remainder), 50 of every 1,350 of a class (at least one) in val/."""
    rng = np.random.default_rng([seed, 1])
    classes = [f"n{v:08d}" for v in sorted(rng.choice(np.arange(1_000_000, 15_000_000), CLASSES, replace=False))]
    folders: list[tuple[str, str, list[str]]] = []
    val_number = 0
    for c, name in enumerate(classes):
        count = images // CLASSES + (c < images % CLASSES)
        val = max(1, round(count * VAL_PER_CLASS / (VAL_PER_CLASS + TRAIN_PER_CLASS)))
        folders.append(("train", name, [f"{name}_{k + 1}.JPEG" for k in range(count - val)]))
        folders.append(("val", name, [f"ILSVRC2012_val_{val_number + k + 1:08d}.JPEG" for k in range(val)]))
        val_number += val
    return folders


def write_folder(task: tuple[Path, int, int, list[str]]) -> tuple[int, int]:
    """Write the missing files of one class folder (``first`` is the number of its first image); returns (files
    written, bytes written)."""
    folder, seed, first, names = task
    folder.mkdir(parents=True, exist_ok=True)
    written = size = 0
    for k, name in enumerate(names):
        path = folder / name
        if path.exists():
            continue
        scratch = folder / f".{name}.{os.getpid()}.tmp"
        render_image(seed, first + k).save(scratch, "JPEG", quality=QUALITY)
        size += scratch.stat().st_size
        os.replace(scratch, path)
        written += 1
    return written, size


def generate(images: int, out: Path, seed: int = 0, processes: int = 2) -> dict[str, Any]:
    """Write the folder (the files it lacks); returns what it holds and what this call wrote."""
    settings = {"images": images, "seed": seed, "classes": CLASSES, "quality": QUALITY, "canvases": CANVASES}
    marker = out / MARKER
    if marker.is_file():
        info = json.loads(marker.read_text())
        if info.get("settings") == settings:
            return {**info, "written": 0, "skipped": "complete"}
        raise SystemExit(f"{out} holds another generation ({info.get('settings')}); use another --out")
    start = time.perf_counter()
    canvas_rng = np.random.default_rng([seed, 2])
    _canvases[:] = [render_canvas(canvas_rng) for _ in range(CANVASES)]
    canvas_s = time.perf_counter() - start
    folders = plan(images, seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "classes.txt").write_text("".join(f"{name}\n" for split, name, _ in folders if split == "train"))
    tasks, first = [], 0
    for split, name, names in folders:
        tasks.append((out / split / name, seed, first, names))
        first += len(names)
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        done = pool.map(write_folder, tasks, chunksize=1)
    seconds = time.perf_counter() - start
    written = sum(n for n, _ in done)
    total = sum(p.stat().st_size for p in out.glob("*/*/*.JPEG"))
    info = {
        "settings": settings,
        "images": images,
        "train": sum(len(n) for s, _, n in folders if s == "train"),
        "val": sum(len(n) for s, _, n in folders if s == "val"),
        "bytes": total,
        "mean_kb": round(total / images / 1e3, 1),
        "written": written,
        "seconds": round(seconds, 1),
        "canvas_s": round(canvas_s, 1),
        "images_s": round(written / max(seconds - canvas_s, 1e-9), 1),
        "processes": processes,
    }
    marker.write_text(json.dumps(info, indent=1) + "\n")
    return info


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, required=True, help="JPEG files to write in all (train + val)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (ImageNet's layout)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2, help="encoding processes (the result does not change)")
    args = parser.parse_args(argv)
    if args.images < 2 * CLASSES:
        parser.error(f"--images must be at least {2 * CLASSES} (a train and a val image per class)")
    print(json.dumps(generate(args.images, args.out, args.seed, args.processes)), flush=True)


if __name__ == "__main__":
    main()
