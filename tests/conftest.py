"""Fixtures shared by several test files."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

FIXTURE = Path(__file__).parent / "fixtures" / "sonnets.txt"


@contextmanager
def gloo_group(rank: int, world: int, store_file: str) -> Iterator[None]:
    """One process of a CPU gloo group for the distributed tests (run it in every process that mp.spawn starts,
    around the whole worker). The processes meet through a file (FileStore), not a TCP port: no port to race for
    and no TCPStore server thread. The group is left as the `aot` command leaves it
    (aot.train.distributed.shutdown_distributed): a barrier then destroy on success, destroy alone after an
    error. After a success the process then ends at once (``os._exit(0)``, as a forked multiprocessing worker
    does), skipping the interpreter's teardown: twice on CI (never in a dozen local runs) a worker of the FSDP test
    aborted (SIGABRT, "terminate called without an active exception", the C++ runtime's message for a thread
    destroyed unjoined), most likely in that teardown, where FSDP's device mesh still holds the destroyed
    group's gloo backend. What the tests check is written before this point. ``faulthandler`` prints every
    thread's Python stack if a worker aborts anyway, so a failure says where."""
    import faulthandler

    import torch.distributed as dist

    from aot.train.distributed import shutdown_distributed

    faulthandler.enable(all_threads=True)  # an abort (SIGABRT) prints where every thread of this process was
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK="0")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=world)
    try:
        yield
    except BaseException:
        shutdown_distributed(clean=False)
        raise
    shutdown_distributed(clean=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def lm_loss(model, batch):
    """Next-token cross-entropy of a batch ``(inputs, targets)`` or ``(tokens,)`` (targets = tokens shifted)."""
    import torch.nn.functional as F

    logits = model(batch[0])[0]
    if len(batch) == 1:
        logits, targets = logits[:, :-1], batch[0][:, 1:]
    else:
        targets = batch[1]
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


@pytest.fixture(scope="session")
def tiny_trainer():
    """``tiny_trainer(out, steps=6, seed=0, loss_fn=None, **train_fields) -> Trainer``: a 1-layer AoT-MSSA LM
    (d = 16, dropout 0.1) on the sonnets fixture, batch 4 x 16 tokens, a log row every step, fp32."""
    from aot.data.shards import LMBatches
    from aot.models import build_model, preset_config
    from aot.train import TrainConfig, Trainer

    tokens = np.frombuffer(FIXTURE.read_bytes(), dtype=np.uint8).astype(np.uint16)

    def make(out: Path, steps: int = 6, seed: int = 0, loss_fn=None, **cfg) -> Trainer:
        torch.manual_seed(seed)
        fields = dict(n_layer=1, n_embd=16, n_head=2, block_size=16, vocab_size=256, dropout=0.1)
        model = build_model(preset_config("aot-mssa-l-cpu", **fields))
        cfg.setdefault("precision", "fp32")
        cfg.setdefault("log_every", 1)
        config = TrainConfig(steps=steps, batch_size=4, lr=3e-3, warmup_steps=1, progress=False, **cfg)
        return Trainer(
            model,
            LMBatches(tokens, 4, 16, seed=1),
            loss_fn or lm_loss,
            config,
            out,
            fingerprint={"model": model.cfg.to_dict()},
            model_config=model.cfg.to_dict(),
        )

    return make


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """``aot ARGV`` in this process (``aot.cli.main``): (exit status, stdout, stderr); argparse's exit is a status
    too."""
    from aot.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_imagenet_folder(
    root: Path, classes: int = 3, train: int = 6, val: int = 2, seed: int = 0, sizes: tuple[int, int] = (20, 60)
) -> Path:
    """ImageNet's layout in miniature: ``root/train/nXXXXXXXX/*.JPEG`` and ``root/val/...``, JPEGs of mixed sizes
    (each side uniform in ``sizes``), one image per class grey; class k is tinted in channel k % 3, so the classes can
    be told apart."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split, count in (("train", train), ("val", val)):
        for label in range(classes):
            folder = root / split / f"n{1440764 + label:08d}"
            folder.mkdir(parents=True)
            for i in range(count):
                height, width = (int(v) for v in rng.integers(sizes[0], sizes[1], size=2))
                pixels = rng.integers(0, 70, size=(height, width, 3), dtype=np.uint8)
                pixels[..., label % 3] += 150
                image = Image.fromarray(pixels).convert("L" if i == 0 else "RGB")
                image.save(folder / f"{folder.name}_{i}.JPEG", quality=90)
    return root


@pytest.fixture(scope="module")
def imagenet_folder(tmp_path_factory) -> Path:
    """A fresh :func:`write_imagenet_folder` for a test module."""
    return write_imagenet_folder(tmp_path_factory.mktemp("imagenet"))
