"""The normalisation statistics that aot's timm models report in ``pretrained_cfg`` (aot.models.timm_models.DATA_STATS):
per-channel mean and standard deviation of Fashion-MNIST's 60,000 training images on the 0-1 scale, computed by
aot.data.images.channel_stats, recorded in data_stats.json beside this script with the machine and date.

    python benchmarks/timm/data_stats.py [--root DIR]   # DIR: the idx.gz files (default: Debian's package)

A training run computes its own statistics on its training split (the set less its held-out val images); these are
the set's, as timm's ImageNet mean / std are ImageNet's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import torch

from aot.data.images import FASHION_MNIST_DIR, channel_stats, fashion_mnist_files, load_fashion_mnist
from aot.run_folder import write_text_atomic
from aot.runinfo import machine_info

OUT = Path(__file__).with_suffix(".json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=FASHION_MNIST_DIR, help="folder of Fashion-MNIST's idx.gz files")
    args = parser.parse_args(argv)
    splits, _ = load_fashion_mnist(args.root)
    images = torch.from_numpy(splits["train"][0].copy())
    mean, std = channel_stats(images)
    record = {
        **machine_info(),
        "command": "python benchmarks/timm/data_stats.py",
        "train_images_sha256": hashlib.sha256(fashion_mnist_files(args.root)["train"][0].read_bytes()).hexdigest(),
        "fashion-mnist": {"images": len(images), "shape": list(images.shape[1:]), "mean": mean, "std": std},
    }
    write_text_atomic(OUT, json.dumps(record, indent=2) + "\n")
    print(f"fashion-mnist train ({len(images):,} images): mean {mean}, std {std} -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
