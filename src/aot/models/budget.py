"""What a model config costs in memory, checked against the machine's before anything is allocated.

``build_model`` calls :func:`check_model_fits` (the weights and buffers of the model); a training task calls
:func:`check_training_fits` from its ``check``, before any data is read (the weights, their gradients and optimizer
state, and a rough count of one batch's activations); `aot sample`, `aot eval lm`, `aot analyze` check what their
forward passes add (:func:`generation_need`, :func:`forward_need`). A config that does not fit is refused in one
line::

    this config needs ≈ 5.2 TiB (1.42T parameters, 100% of them in the 200000 layers); the machine has 22.6 GiB
    available (MemAvailable); make it smaller (model.n_layer / n_embd / vocab_size / block_size)

The answer takes milliseconds whatever the config: nothing is built at its size.

Parameters. Exact, and the same for every registered block (recurrent ones, whose spec has no FLOPs count,
included): the head (embeddings, positions, read-out) and ONE layer are built on the ``meta`` device (shapes,
no storage) by the builder the caller passes (``build_model``, or the head class: this module is imported by
``aot.models.base``, so it imports no model), and the total is ``head + n_layer × layer``. (Half a block's
``dense_flops`` counts the weights each token multiplies, but not how many the block holds: a tied MSSA
multiplies by U twice, CRATE's ISTA by its dictionary three times.) ``tests/models/test_budget.py`` checks the
count against ``num_params()`` for every preset.

Activations (training only; a rough, stated estimate, not a measurement): k bytes per token, layer and unit of
width, the block's :attr:`aot.blockspec.BlockSpec.activation_bytes`, so ``B·T·d·L·k`` for B rows per forward
pass, plus :data:`HEAD_COPIES` float32 copies of the head's output (logits, their log-softmax, their gradient).
Measured with ``torch.autograd.graph.saved_tensors_hooks`` (what autograd keeps for the backward pass, float32,
CPU fused attention), one layer keeps 16–97 bytes per token and unit of width for the attention blocks (MSSA
least, Llama's SwiGLU most) and ~75 for causal linear attention, under their k = 128 (:data:`ACTIVATION_BYTES`,
the default); Mamba's selective scan keeps ~610 (its expanded state), under its k = 768. It is a guard against
configs that cannot fit, not a promise that the others will.

Machine memory (:func:`machine_memory`): the smallest of physical memory, ``MemAvailable`` (/proc/meminfo), a
cgroup limit (v2 ``memory.max``, v1 ``memory.limit_in_bytes``) and the address-space limit (``ulimit -v``) minus
what the process has mapped already. A training run on a GPU holds its weights, gradients, optimizer state and
activations there, so :func:`training_memory` reads that GPU's free memory (``torch.cuda.mem_get_info``) instead.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aot.blockspec import BlockSpec, block_spec
from aot.config import ModelConfig
from aot.errors import ConfigError

GiB = 2**30
#: k: bytes of activations kept for the backward pass per token, layer and unit of width, for a block whose spec
#: does not say otherwise (see the docstring)
ACTIVATION_BYTES = BlockSpec.activation_bytes
#: float32 copies of the head's output a training step holds at once: logits, log-softmax, their gradient
HEAD_COPIES = 3
#: float32 tensors per parameter for each optimizer: the weight, its gradient and the optimizer's state
OPTIMIZER_COPIES = {"adamw": 4, "lion": 3}
#: the fields to shrink, said by every refusal of a model
MODEL_FIX = "model.n_layer / n_embd / vocab_size / block_size"
#: ... and of a training run
TRAINING_FIX = "model.n_layer / n_embd / block_size / train.batch_size or train.micro_batch_size"


@dataclass(frozen=True)
class Memory:
    """What the machine can give: ``available`` bytes, and which limit said so (``source``)."""

    available: int
    source: str

    def describe(self) -> str:
        return f"{size(self.available)} available ({self.source})"


def _meminfo(key: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            name, _, value = line.partition(":")
            if name == key:
                return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: where a cgroup's memory limit is written: v2, then v1
CGROUP_LIMIT_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def _cgroup_limit() -> int | None:
    for path in CGROUP_LIMIT_FILES:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # "max" (v2) or a huge number (v1): no limit
            return int(text)
    return None


def _address_space_left() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    mapped = _status_bytes("VmSize") or 0
    return max(soft - mapped, 0)


def _status_bytes(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def machine_memory() -> Memory:
    """The memory this process can still use on the host: the smallest of the limits (module docstring)."""
    candidates: list[tuple[int, str]] = []
    with contextlib.suppress(ValueError, OSError):  # no sysconf names: not Linux
        candidates.append((os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "physical memory"))
    for value, source in (
        (_meminfo("MemAvailable"), "MemAvailable"),
        (_cgroup_limit(), "cgroup memory limit"),
        (_address_space_left(), "ulimit -v"),
    ):
        if value is not None:
            candidates.append((value, source))
    if not candidates:  # nothing to read (not Linux, no sysconf): no limit known
        return Memory(2**62, "unknown")
    available, source = min(candidates)
    return Memory(available, source)


def device_memory(device: torch.device) -> Memory | None:
    """The free memory of CUDA ``device`` (``torch.cuda.mem_get_info``: what other processes leave), or None when it
    cannot be read."""
    try:
        free, _ = torch.cuda.mem_get_info(device)
        name = torch.cuda.get_device_name(device)
    except (RuntimeError, AssertionError, ValueError):
        return None
    return Memory(int(free), f"free memory of {device} ({name})")


def training_memory(device: torch.device | str | None = None) -> Memory:
    """The memory a training run on ``device`` may use: a CUDA device's free memory (the training state lives there),
    else the host's (:func:`machine_memory`)."""
    device = torch.device(device) if device is not None else None
    if device is not None and device.type == "cuda":
        gpu = device_memory(device)
        if gpu is not None:
            return gpu
    return machine_memory()


# -- what a config needs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSize:
    """A config's parameters: ``params`` in all (a tied weight once), ``layer_params`` of one layer (so
    ``n_layer × layer_params`` are in the blocks), and the bytes of parameters + buffers."""

    params: int
    layer_params: int
    n_layer: int
    bytes: int

    @property
    def layer_share(self) -> float:
        return self.n_layer * self.layer_params / max(self.params, 1)


def _tensor_bytes(tensors: list[torch.Tensor]) -> int:
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            total += t.numel() * t.element_size()
    return total


#: what builds a model from a config (``aot.models.build_model``, or a head class): called here on the meta device
#: with one layer. Passed in, since the builder calls this module (so it cannot be imported from here)
Builder = Callable[[ModelConfig], Any]  # an AotModel (aot.models.base, which imports this module)


def model_size(cfg: ModelConfig, build: Builder) -> ModelSize:
    """The exact parameter count of ``cfg``'s model and its bytes, from its head and one layer that ``build``
    makes on the meta device (no memory, the same time for any size)."""
    with torch.device("meta"):
        one = build(cfg.replace(n_layer=1))
    layer: nn.Module = one.backbone.blocks[0]
    layer_tensors = [*layer.parameters(), *layer.buffers()]
    layer_params = sum(p.numel() for p in layer.parameters())
    extra = cfg.n_layer - 1
    params = one.num_params() + extra * layer_params
    size = _tensor_bytes([*one.parameters(), *one.buffers()]) + extra * _tensor_bytes(layer_tensors)
    return ModelSize(params, layer_params, cfg.n_layer, size)


def image_tokens(cfg: ModelConfig) -> int:
    """Tokens an image classifier's input puts through the backbone: its patches and the class token."""
    return (cfg.image_size // cfg.patch_size) ** 2 + 1


def head_width(cfg: ModelConfig) -> int:
    """Numbers the head puts out per token: the vocabulary (lm), the classes (image), one y (icl)."""
    return {"lm": cfg.vocab_size, "image": cfg.num_classes}.get(cfg.task, 1)


@dataclass(frozen=True)
class Need:
    """What something needs: bytes per labelled part, and a few words on what it is (the model's parameters)."""

    parts: Mapping[str, int] = field(default_factory=dict)
    detail: str = ""

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        """``≈ 16.0 GiB (4.29B parameters, 99% of them in the 200000 layers; weights 16.0 GiB, ...)``."""
        words = [self.detail] if self.detail else []
        if len(self.parts) > 1:
            largest = sorted(self.parts.items(), key=lambda kv: -kv[1])
            words.append(", ".join(f"{name} {size(v)}" for name, v in largest if v >= 0.01 * self.total))
        return f"≈ {size(self.total)}" + (f" ({'; '.join(words)})" if words else "")


def size(n: float) -> str:
    """Bytes in binary units, GiB at least (the scale of a refusal): ``3.9 GiB``, ``12.5 TiB``, ``1,024.0 PiB``."""
    for power, unit in ((5, "PiB"), (4, "TiB")):
        if n >= 1024**power:
            return f"{n / 1024**power:,.1f} {unit}"
    return f"{n / GiB:.1f} GiB"


def _count(n: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(int(n))


def parameters_detail(size: ModelSize) -> str:
    """``4.29B parameters, 99% of them in the 200000 layers`` (the share when the layers hold most of them)."""
    words = f"{_count(size.params)} parameters"
    if size.n_layer > 1 and size.layer_share >= 0.5:
        words += f", {size.layer_share:.0%} of them in the {size.n_layer} layers"
    return words


def model_need(cfg: ModelConfig, build: Builder) -> Need:
    """The weights and buffers of ``cfg``'s model."""
    size = model_size(cfg, build)
    return Need({"weights": size.bytes}, parameters_detail(size))


def training_need(
    cfg: ModelConfig,
    build: Builder,
    rows: int,
    seq_len: int,
    optimizer: str = "adamw",
    data: Mapping[str, int] | None = None,
) -> Need:
    """A training step of ``cfg`` on ``rows`` rows of ``seq_len`` tokens per forward pass: float32 weights,
    gradients and optimizer state (:data:`OPTIMIZER_COPIES`), activations ``rows·seq_len·d·L·k`` plus the head's
    output (:data:`ACTIVATION_BYTES`, :data:`HEAD_COPIES`), and the ``data`` the task holds (label → bytes)."""
    size = model_size(cfg, build)
    copies = OPTIMIZER_COPIES.get(optimizer, max(OPTIMIZER_COPIES.values()))
    tokens = rows * seq_len
    parts = {
        "weights, gradients and optimizer state": copies * size.bytes,
        "activations": tokens * cfg.n_embd * cfg.n_layer * block_spec(cfg.block).activation_bytes
        + tokens * head_width(cfg) * 4 * HEAD_COPIES,
        **(data or {}),
    }
    return Need(parts, parameters_detail(size))


def forward_need(cfg: ModelConfig, rows: int, seq_len: int, hooked: bool = False) -> Need:
    """What a forward pass without gradients adds to a loaded model, for ``rows`` rows of ``seq_len`` tokens: one
    layer's activations (``rows·seq_len·d·k``, :data:`ACTIVATION_BYTES`: an upper bound, nothing outlives its
    layer), the head's output and its log-softmax (float32). ``hooked``: the hooks of ``aot analyze`` keep every
    layer's activations (``× n_layer``) and attention patterns (``rows·heads·seq_len²`` float32 per layer:
    reading ``hook_pattern`` takes the reference attention path)."""
    tokens = rows * seq_len
    layers = cfg.n_layer if hooked else 1
    parts = {
        "activations": tokens * cfg.n_embd * layers * block_spec(cfg.block).activation_bytes
        + tokens * head_width(cfg) * 4 * 2
    }
    if hooked:
        parts["attention patterns"] = rows * cfg.n_head * seq_len * seq_len * 4 * cfg.n_layer
    return Need(parts, f"{rows:,} rows of {seq_len:,} tokens")


def generation_need(cfg: ModelConfig, n_tokens: int) -> Need:
    """What decoding ``n_tokens`` (prompt and new tokens, one sequence) adds to a loaded model: the token buffer
    (int64), the KV cache sized once for ``min(block_size, n_tokens)`` tokens (at most ``2·d`` float32 per token
    and layer, MHSA's keys and values; MSSA keeps less, the recurrent blocks a fixed state) and a forward pass
    over that window (:func:`forward_need`, the path without a cache)."""
    window = min(cfg.block_size, n_tokens)
    parts = {
        "tokens": n_tokens * 8,
        "cache": window * 2 * cfg.n_embd * cfg.n_layer * 4,
        **forward_need(cfg, 1, window).parts,
    }
    return Need(parts, f"{n_tokens:,} tokens")


def check_fits(need: Need, memory: Memory, fix: str) -> None:
    """A one-line :class:`ConfigError` when ``need`` exceeds ``memory``: what it needs, what the machine has, and
    the fields to shrink (``fix``)."""
    if need.total <= memory.available:
        return
    raise ConfigError(
        f"this config needs {need.describe()}; the machine has {memory.describe()}; make it smaller ({fix})"
    )


def check_model_fits(cfg: ModelConfig, build: Builder) -> None:
    """Refuse (one line) a model whose weights do not fit in the machine's memory; nothing is allocated."""
    check_fits(model_need(cfg, build), machine_memory(), MODEL_FIX)


def check_training_fits(need: Need, device: torch.device | str | None = None) -> None:
    """Refuse (one line) a training run whose :func:`training_need` exceeds :func:`training_memory` of ``device``."""
    check_fits(need, training_memory(device), TRAINING_FIX)


def rows_per_pass(batch_size: int, micro_batch_size: int | None, world_size: int = 1) -> int:
    """Rows one process puts through one forward pass: the micro-batch, or its share of the global batch."""
    share = math.ceil(batch_size / max(world_size, 1))
    return min(micro_batch_size or share, share)


__all__ = [
    "ACTIVATION_BYTES",
    "Builder",
    "GiB",
    "Memory",
    "ModelSize",
    "Need",
    "check_fits",
    "check_model_fits",
    "check_training_fits",
    "forward_need",
    "generation_need",
    "image_tokens",
    "machine_memory",
    "model_need",
    "model_size",
    "rows_per_pass",
    "training_memory",
    "training_need",
]
