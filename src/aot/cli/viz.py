"""`aot viz attention RUN_DIR`: where the class token of a trained image classifier looks, head by head."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import numpy as np

from aot.cli.options import add_number
from aot.errors import AotError
from aot.run_folder import check_output_dir
from aot.validation import integer

#: how many test images one figure draws (a row each)
VIZ_IMAGES = integer(1, 64)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "viz",
        help="figures of trained models (class-token attention maps, ...)",
        description="Draw what a trained model does. Pick a figure.",
    )
    figures = parser.add_subparsers(dest="figure", metavar="FIGURE")
    attention = figures.add_parser(
        "attention",
        help="the class token's attention over the patches, per head, overlaid on test images",
        description=textwrap.fill(
            "Load the model of an `aot train vision` run (RUN_DIR/checkpoint) and its data set, run N test images "
            "with the attention hooks on (blocks.L.attn.hook_pattern), and draw one PNG grid: a row per image with "
            "the image, the class token's attention over the patches for every head of layer L, and the mean over "
            "all layers and heads, upsampled and overlaid on the image. The arrays (images, labels, predictions, "
            "the attention of every layer and head, shape (layers, images, heads, grid, grid)) go to an .npz "
            "beside it. Works for every block type with attention (AoT-MSSA, AoT-MHSA, ViT, CRATE).",
            width=100,
        ),
        epilog="Examples:\n"
        "  aot viz attention runs/vision --images 6 --layer -1\n"
        "  aot viz attention runs/vit --images 4 --layer 2 --out figures/vit_attention",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    attention.add_argument("run_dir", help="a folder written by `aot train vision` (with checkpoint/, results.json)")
    add_number(attention, "--images", VIZ_IMAGES, "test images to draw, one row each", default=6)
    add_number(
        attention, "--layer", integer(), "layer whose heads are drawn: 0..L-1, or -L..-1 from the end (-1: the last)",
        default=-1,
    )  # fmt: skip
    attention.add_argument("--data", help="image set to draw from (default: the run's)")
    attention.add_argument("--out", help="output folder (default: RUN_DIR)")
    attention.set_defaults(func=run_attention)
    parser.set_defaults(func=lambda args: parser.print_help() or 0)


def run_attention(args: argparse.Namespace) -> int:
    from aot.analysis.attention_maps import class_token_attention, patch_maps, plot_attention_grid
    from aot.data.image_stream import Normaliser
    from aot.data.images import ImageData, eval_pixels, open_images
    from aot.loader import load_run

    run_dir = Path(args.run_dir)
    VIZ_IMAGES.named("--images").check(args.images)
    out = check_output_dir(args.out or run_dir, reads=run_dir)  # RUN_DIR itself (the default) takes the figures
    run = load_run(run_dir, task="image", purpose="attention maps")
    model = run.model
    n_layer = model.cfg.n_layer
    if not -n_layer <= args.layer < n_layer:
        raise AotError(f"--layer {args.layer} is out of range for {n_layer} layers (use 0..{n_layer - 1} or -1)")
    layer = args.layer % n_layer
    dataset, val_size = run.need("config.data.dataset"), run.need("config.data.val_size")
    data = open_images(args.data or dataset, val_size if val_size < 1 else int(val_size))
    first = np.arange(min(args.images, data.size("test")))
    crop_pct = run.results.get("config", {}).get("data", {}).get("crop_pct", 0.875)
    images, labels = eval_pixels(data, "test", first, model.cfg.image_size, model.cfg.in_chans, crop_pct)
    shape = (model.cfg.in_chans, model.cfg.image_size, model.cfg.image_size)
    if isinstance(data, ImageData) and data.image_shape == shape:  # the set's own statistics, as before
        normalise = data.normalise
    else:
        normalise = Normaliser(run.need("data.mean"), run.need("data.std"))
    logits, attention = class_token_attention(model, normalise(images))
    grid = model.cfg.image_size // model.cfg.patch_size
    maps = patch_maps(attention, grid).float()  # (L, B, heads, g, g)
    predictions = logits.argmax(-1)
    out.mkdir(parents=True, exist_ok=True)
    names = data.classes
    titles = [f"{names[int(y)]} -> {names[int(p)]}" for y, p in zip(labels, predictions)]
    figure = plot_attention_grid(
        out / f"attention_layer{layer}.png",
        images.numpy(),
        maps[layer].numpy(),
        maps.mean(dim=(0, 2)).numpy(),
        titles,
        layer,
        model.cfg.image_size,
    )
    arrays = out / "attention.npz"
    np.savez_compressed(
        arrays,
        images=images.numpy(),
        labels=labels.numpy(),
        predictions=predictions.numpy(),
        cls_attention=attention.float().numpy(),
        patch_maps=maps.numpy(),
    )
    correct = int((predictions == labels).sum())
    print(
        f"{model.cfg.block} L={n_layer}: class-token attention of layer {layer} ({model.cfg.n_head} heads) on "
        f"{len(labels)} test images ({correct} classified right). Wrote {figure} and {arrays}"
    )
    return 0
