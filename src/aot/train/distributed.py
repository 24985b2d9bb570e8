"""Distributed training: torchrun environment, DDP, and FSDP (FULL_SHARD: one shard group per block).

Launch with ``torchrun --nproc_per_node N -m aot.cli train lm ...``: each process reads RANK / WORLD_SIZE /
LOCAL_RANK, takes its slice of every global batch (the global batch does not change with N) and averages
gradients (DDP) or shards parameters, gradients and optimizer state (FSDP, ``fully_shard`` per block).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from aot.errors import AotError, ConfigError

STRATEGIES = ("auto", "ddp", "fsdp")


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def env_from_torchrun() -> DistEnv:
    return DistEnv(
        rank=int(os.environ.get("RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
    )


#: minutes a collective may wait for the slowest process before the run stops (``AOT_PG_TIMEOUT_MINUTES``): longer
#: than NCCL's default 10 so that the start (each rank checks its share of the data's sha256) and the end (the main
#: process writes results and figures) never trip it on a large run
PG_TIMEOUT_MINUTES = 30.0


def process_group_timeout() -> timedelta:
    """The process group's timeout: ``$AOT_PG_TIMEOUT_MINUTES`` or :data:`PG_TIMEOUT_MINUTES`."""
    raw = os.environ.get("AOT_PG_TIMEOUT_MINUTES", "")
    try:
        minutes = float(raw) if raw else PG_TIMEOUT_MINUTES
    except ValueError:
        raise AotError(f"AOT_PG_TIMEOUT_MINUTES={raw!r} is not a number of minutes; unset it or give e.g. 30") from None
    if not 0 < minutes < 10**6:
        raise AotError(f"AOT_PG_TIMEOUT_MINUTES={raw!r}: give a positive number of minutes, e.g. 30")
    return timedelta(minutes=minutes)


def init_distributed(device: torch.device) -> DistEnv:
    """Join the process group torchrun (or the caller) set up in the environment; nothing for one process."""
    env = env_from_torchrun()
    if env.distributed and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend, rank=env.rank, world_size=env.world_size, timeout=process_group_timeout())
    return env


def current_env() -> DistEnv:
    if dist.is_available() and dist.is_initialized():
        return DistEnv(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    return DistEnv()


def wrap_model(
    model: nn.Module, strategy: str, device: torch.device, bf16: bool = False, compile_blocks: bool = False
) -> nn.Module:
    """DDP or FSDP around ``model`` in a process group: ``auto`` wraps in DDP when more than one process runs;
    ``ddp`` and ``fsdp`` wrap even in a group of one (a one-GPU check of the multi-GPU path). Outside a process group,
    the model itself.

    FSDP shards each block, then the rest (torchtitan's order). ``bf16``: the blocks compute with bf16 parameters and
    gradients are reduced in fp32 (``MixedPrecisionPolicy``), so the all-gathers move half the bytes; the sharded
    parameters and the optimizer stay fp32. ``compile_blocks``: each block is compiled on its own before sharding
    (torchtitan's per-block compile; the trainer then does not compile the whole model)."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy={strategy!r} is not one of {', '.join(STRATEGIES)}")
    if not (dist.is_available() and dist.is_initialized()):
        return model
    if dist.get_world_size() == 1 and strategy == "auto":
        return model
    if strategy in ("auto", "ddp"):
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None
    options: dict = {"mesh": mesh, **({"mp_policy": policy} if policy is not None else {})}
    blocks = getattr(getattr(model, "backbone", None), "blocks", None)
    for block in blocks or []:
        if compile_blocks:
            block.compile()
        fully_shard(block, **options)  # FULL_SHARD: each block's parameters are gathered only while it runs
    fully_shard(model, **options)
    # an aligned vocabulary's logits are a view (cut back to vocab_size); FSDP warns that an in-place op on a view
    # output would skip its backward hook: nothing here modifies logits in place (the loss is taken out of place)
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor", category=UserWarning)
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether ``model`` was sharded by FSDP (:func:`wrap_model` with ``fsdp`` in a process group)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def compiles_per_block(model: nn.Module, strategy: str) -> bool:
    """Whether :func:`wrap_model` compiles ``model`` block by block (FSDP in a process group, a model with blocks)."""
    in_group = dist.is_available() and dist.is_initialized()
    blocks = getattr(getattr(model, "backbone", None), "blocks", None)
    return in_group and strategy == "fsdp" and bool(blocks)


def unwrap(model: nn.Module) -> nn.Module:
    """The user's model inside a DDP wrapper (FSDP2 shards in place and needs no unwrapping)."""
    return model.module if hasattr(model, "module") and isinstance(model.module, nn.Module) else model


def set_gradient_sync(model: nn.Module, enabled: bool) -> None:
    """Skip the gradient all-reduce on accumulation micro-steps (DDP ``require_backward_grad_sync``,
    FSDP2 ``set_requires_gradient_sync``)."""
    setter = getattr(model, "set_requires_gradient_sync", None)
    if callable(setter):
        setter(enabled)
    elif hasattr(model, "require_backward_grad_sync"):
        setattr(model, "require_backward_grad_sync", enabled)  # noqa: B010


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        value = value.clone()
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return value


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def shutdown_distributed(clean: bool = True) -> None:
    """Leave the process group before the interpreter exits (every entry point that may run under torchrun ends
    with this). ``clean``: the command succeeded on every process, so wait for all of them first (a barrier:
    no peer is still sending) and then destroy the group; after an error only destroy it (a peer may be gone).
    A group left alive at exit lets gloo's worker threads outlive the objects they hold, and the process can
    abort in interpreter shutdown (SIGABRT, "terminate called without an active exception")."""
    if dist.is_available() and dist.is_initialized():
        if clean:
            dist.barrier()
        dist.destroy_process_group()


def first_error(message: str) -> str:
    """The first non-empty error message of any process (every process calls it), so that all of them stop
    together with the same one-line error instead of waiting for each other forever."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return message
    messages: list[str] = [""] * dist.get_world_size()
    dist.all_gather_object(messages, message)
    return next((m for m in messages if m), "")


def broadcast_from_main(value: object) -> object:
    """Rank 0's ``value`` on every process (a decision only rank 0 takes, e.g. which checkpoint to resume)."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_reduce_max(value: torch.Tensor) -> torch.Tensor:
    """Element-wise maximum over the processes (flags: any process raising one raises it everywhere)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value
