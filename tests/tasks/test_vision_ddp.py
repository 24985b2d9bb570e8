"""Vision under torchrun (2 gloo CPU processes): each process decodes only its rows of a step, and together they are
the one-process batch bit for bit (mixup / CutMix pairs included); the evaluation split across processes gives the
one-process scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("PIL")


def _setup(folder: str):  # type: ignore[no-untyped-def]
    from aot.data.images import open_images
    from aot.tasks.vision import VisionRun
    from aot.tasks.vision_inputs import batch_source, recipe_of

    sets = ["data.workers=1", "data.mixup=0.8", "data.cutmix=1.0", "data.randaug_ops=2", "data.val_size=0"]
    run = VisionRun.build("fashion-mssa", sets=[f"data.dataset={folder}", *sets])
    data = open_images(folder, val_size=0)
    recipe = recipe_of(data, run.data, 16, 3)
    return run, data, recipe, batch_source(data, run.data, 8, 3, recipe)[0]


def _model():  # type: ignore[no-untyped-def]
    from aot.config import ModelConfig
    from aot.models import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(task="image", block="aot-mssa", n_layer=1, n_embd=16, n_head=2, image_size=16, patch_size=8,
                      in_chans=3, num_classes=3)  # fmt: skip
    return build_model(cfg).eval()


def _worker(rank: int, world: int, store: str, folder: str, out: str) -> None:
    from aot.tasks.vision_inputs import evaluate_split
    from aot.train.trainer import split_batch
    from conftest import gloo_group

    with gloo_group(rank, world, store):
        run, data, recipe, stream = _setup(folder)
        per_process, micro, n_micro, _ = split_batch(8, world, 2)
        starts = [rank * per_process + m * micro for m in range(n_micro)]
        stream.set_rows([(s, s + micro) for s in starts])
        rows = {step: [stream.get(step, s, s + micro) for s in starts] for step in range(3)}
        stream.close()
        with torch.no_grad():
            scores = evaluate_split(_model(), data, "test", run.data, recipe, 2, None, torch.device("cpu"), 3)
        torch.save({"rows": rows, "starts": starts, "scores": scores}, Path(out) / f"rank{rank}.pt")


def test_two_processes_decode_their_rows_and_evaluate_their_share(imagenet_folder, tmp_path):
    import torch.multiprocessing as mp

    from aot.tasks.vision_inputs import evaluate_split

    run, data, recipe, stream = _setup(str(imagenet_folder))
    whole = {step: stream.get(step) for step in range(3)}
    stream.close()
    with torch.no_grad():
        one = evaluate_split(_model(), data, "test", run.data, recipe, 2, None, torch.device("cpu"), 3)
    mp.spawn(_worker, args=(2, str(tmp_path / "store"), str(imagenet_folder), str(tmp_path)), nprocs=2, join=True)
    parts = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    for step, batch in whole.items():  # uint8 pixels, class ids and the mixing draws of each pair
        assert len(batch) == 3 and batch[0].dtype == torch.uint8
        for k, value in enumerate(batch):
            assert torch.equal(torch.cat([rows[k] for part in parts for rows in part["rows"][step]]), value)
    for part in parts:
        assert part["scores"]["images"] == one["images"] == len(data.splits["test"])
        assert part["scores"]["top1"] == one["top1"] and part["scores"]["confusion"] == one["confusion"]
        assert part["scores"]["loss"] == pytest.approx(one["loss"], rel=1e-6)
    assert np.asarray(parts[1]["starts"]).min() == 4  # rank 1 decoded rows 4..7 only
