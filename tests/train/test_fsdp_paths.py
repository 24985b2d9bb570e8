"""The multi-GPU path in a group of one and two (gloo on the CPU): `ddp` and `fsdp` wrap even at world size 1 (so one
GPU checks the 8-GPU path), FSDP with bf16 computes with bf16 parameters while the sharded parameters stay fp32, and
under FSDP a compiled run compiles each block rather than the whole model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from aot import run_folder
from aot.data.shards import LMBatches
from aot.models import build_model
from aot.models.presets import preset_config
from aot.train.trainer import TrainConfig, Trainer
from conftest import FIXTURE, gloo_group, lm_loss


def fixture_tokens() -> np.ndarray:
    return np.frombuffer(FIXTURE.read_bytes(), dtype=np.uint8).astype(np.uint16)


def _model():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    return build_model(preset_config("aot-mssa-l-cpu", n_layer=2, n_embd=16, n_head=2, block_size=16, vocab_size=256))


def _trainer(out: str, strategy: str, **cfg) -> Trainer:  # type: ignore[no-untyped-def]
    config = TrainConfig(
        steps=3, batch_size=4, lr=1e-2, warmup_steps=1, log_every=1, checkpoint_every=2, progress=False,
        strategy=strategy, **{"precision": "fp32", **cfg},
    )  # fmt: skip
    model = _model()
    trainer = Trainer(model, LMBatches(fixture_tokens(), 4, 16, seed=2), lm_loss, config, out)
    trainer.model_config = model.cfg.to_dict()
    return trainer


def _one_rank(rank: int, world: int, store: str, out: str) -> None:
    from torch.distributed.fsdp import FSDPModule
    from torch.nn.parallel import DistributedDataParallel

    with gloo_group(rank, world, store):
        assert not isinstance(_trainer(f"{out}/auto", "auto").model, (DistributedDataParallel, FSDPModule))
        assert isinstance(_trainer(f"{out}/ddp", "ddp").model, DistributedDataParallel)
        trainer = _trainer(f"{out}/fsdp", "fsdp")
        assert isinstance(trainer.model, FSDPModule)
        trainer.fit()


def test_ddp_and_fsdp_wrap_in_a_group_of_one_and_fsdp_saves_sharded(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_one_rank, args=(1, str(tmp_path / "store"), str(tmp_path)), nprocs=1, join=True)
    state = run_folder.read_trainer_state(tmp_path / "fsdp" / "checkpoint")
    assert state["format"] == "sharded" and state["step"] == 3 and state["world_size"] == 1


def _bf16_rank(rank: int, world: int, store: str, out: str) -> None:
    with gloo_group(rank, world, store):
        trainer = _trainer(out, "fsdp", precision="bf16")
        seen: list[torch.dtype] = []
        first = trainer.model.backbone.blocks[0]
        linear = next(m for m in first.modules() if isinstance(m, torch.nn.Linear))
        linear.register_forward_pre_hook(lambda module, args: seen.append(module.weight.dtype))
        trainer.fit()
        sharded = {p.dtype for p in trainer.model.parameters()}
        torch.save({"seen": seen, "sharded": sharded}, Path(out) / f"rank{rank}.pt")


def test_fsdp_bf16_computes_in_bf16_and_keeps_fp32_shards(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_bf16_rank, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        found = torch.load(tmp_path / f"rank{rank}.pt")
        assert found["seen"] and set(found["seen"]) == {torch.bfloat16}  # gathered for compute in bf16
        assert found["sharded"] == {torch.float32}  # what the optimizer updates and the checkpoint holds


def _compiled_rank(rank: int, world: int, store: str, out: str) -> None:
    with gloo_group(rank, world, store):
        trainer = _trainer(out, "fsdp", compile=True)
        blocks = trainer.model.backbone.blocks
        assert all(block._compiled_call_impl is not None for block in blocks)  # each block compiled on its own
        assert trainer.forward_model is trainer.model  # and not the whole model again
        result = trainer.fit()
        torch.save(result.losses, Path(out) / "losses.pt")


@pytest.mark.slow
def test_fsdp_compiles_block_by_block(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_compiled_rank, args=(1, str(tmp_path / "store"), str(tmp_path)), nprocs=1, join=True)
    assert len(torch.load(tmp_path / "losses.pt")) == 3
