"""Time per pass and peak memory of a training step.

Timing: the median of ``repeat`` wall-clock timings after ``warmup`` untimed calls (the first calls pay for
allocation and kernel selection); on CUDA each call is followed by a synchronisation.

Peak memory of a training step (forward, backward, AdamW step; weights, gradients, optimizer state and
activations all count):
- CUDA: ``torch.cuda.max_memory_allocated`` after a reset — the bytes held by tensors.
- CPU: PyTorch frees tensors to the C allocator and no tensor-level counter exists (``tracemalloc`` does not
  see them), so a fresh subprocess measures its peak resident set size over two training steps (or
  ``steps``; Linux: ``VmHWM``, reset to the current RSS through ``/proc/self/clear_refs``; elsewhere
  ``getrusage`` max RSS), minus its RSS after importing torch and running a tiny step of the same block
  (which loads the kernels' code pages). This is what the process really held, allocator slack included,
  so it is an upper bound on the tensor bytes; figures to a few MB.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aot.config import ModelConfig
from aot.errors import AotError
from aot.interpreter import module_argv


def synchronize(device: torch.device | str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(
    fn: Callable[[], Any], device: torch.device | str = "cpu", warmup: int = 2, repeat: int = 5
) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


def median_seconds(
    fn: Callable[[], Any], device: torch.device | str = "cpu", warmup: int = 2, repeat: int = 5
) -> float:
    """Median wall-clock seconds of one call of ``fn`` after warm-up."""
    return statistics.median(time_calls(fn, device, warmup, repeat))


def autocast_context(device: torch.device | str, dtype: torch.dtype) -> contextlib.AbstractContextManager[Any]:
    """bf16 / fp16 autocast on ``device`` (weights stay fp32, matmuls run in ``dtype``), or nothing for fp32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def lm_loss(model: nn.Module, idx: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of an aot CausalLM or a HuggingFace causal LM on ``idx`` (B, T): both take the
    inputs as labels and shift them, so the two compute the same loss."""
    out = model(idx, labels=idx) if not _is_hf(model) else model(input_ids=idx, labels=idx)
    return out[1] if isinstance(out, tuple) else out.loss


def _is_hf(model: nn.Module) -> bool:
    return hasattr(model, "config") and not hasattr(model, "cfg")


def training_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, idx: torch.Tensor, dtype: torch.dtype = torch.float32
) -> Callable[[], None]:
    """A closure doing one training step on ``idx``: forward + loss, backward, optimizer step, zero grads."""

    def step() -> None:
        with autocast_context(idx.device, dtype):
            loss = lm_loss(model, idx)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def forward_pass(model: nn.Module, idx: torch.Tensor, dtype: torch.dtype = torch.float32) -> Callable[[], None]:
    """A closure doing one inference forward (eval mode, no grad) of ``model`` on ``idx``; the model's mode is
    restored after."""

    def forward() -> None:
        was_training = model.training
        model.eval()
        with torch.no_grad(), autocast_context(idx.device, dtype):
            model(idx) if not _is_hf(model) else model(input_ids=idx)
        model.train(was_training)

    return forward


def interleaved_timings(
    groups: Sequence[Sequence[Callable[[], Any]]],
    device: torch.device | str = "cpu",
    rounds: int = 3,
    warmup: int = 2,
    repeat: int = 2,
) -> list[list[list[list[float]]]]:
    """Time groups of calls (e.g. one model's forward and training step) in ``rounds`` interleaved rounds, the
    order of the groups reversed every other round, so that a burst of load on a shared machine hits every
    group alike. ``warmup`` untimed calls precede each call's first round. Returns ``timings[g][c][r]``: the
    ``repeat`` wall-clock seconds of call ``c`` of group ``g`` in round ``r``."""
    timings: list[list[list[list[float]]]] = [[[] for _ in calls] for calls in groups]
    for r in range(rounds):
        for g in range(len(groups)) if r % 2 == 0 else reversed(range(len(groups))):
            for c, call in enumerate(groups[g]):
                timings[g][c].append(time_calls(call, device, warmup if r == 0 else 0, repeat))
    return timings


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    """AdamW as the trainer uses it (its update is element-wise work, not counted in FLOPs)."""
    return torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)


# -- peak memory -----------------------------------------------------------------------------------------


def peak_training_memory(
    cfg: ModelConfig,
    batch: int,
    seq_len: int,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    steps: int = 2,
) -> dict[str, Any]:
    """Peak bytes of ``steps`` training steps of a model built from ``cfg`` (see the module docstring for how;
    one step already holds weights, gradients, activations and, at its end, AdamW's state)."""
    device = torch.device(device)
    if device.type == "cuda":
        return _cuda_peak(cfg, batch, seq_len, device, dtype, steps)
    spec = dict(
        config=cfg.to_dict(),
        batch=batch,
        seq_len=seq_len,
        dtype=str(dtype),
        threads=torch.get_num_threads(),
        steps=steps,
    )
    return _run_probe(spec)


def _run_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Run :func:`_probe` on ``spec`` in a fresh Python process (its peak RSS is its own) and return its result."""
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding aot/: the child imports this aot
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [*module_argv("aot.bench.timing"), json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise AotError(f"memory probe subprocess failed: {tail}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def peak_generation_memory(
    cfg: ModelConfig, batch: int, prompt_len: int, n_new: int, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """Peak bytes of a cached greedy generation of ``n_new`` tokens after a ``prompt_len``-token prompt (the
    prefill and the decoding steps; weights, activations and the cache, measured as for a training step), and
    ``cache_bytes``: the bytes of the cache's filled entries after the prompt (exact, from ``Cache.nbytes``)."""
    spec = dict(kind="generate", config=cfg.to_dict(), batch=batch, prompt_len=prompt_len, n_new=n_new)
    if torch.device(device).type == "cuda":
        return _generation_peak(spec, torch.device(device))
    return _run_probe(dict(spec, threads=torch.get_num_threads()))


def _generation_peak(spec: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """In this process (a fresh one on CPU): the peak of the generation, and the cache bytes after the prompt."""
    from aot.models import build_model

    cfg = ModelConfig.from_dict(spec["config"])
    prompt = random_tokens(cfg, spec["batch"], spec["prompt_len"], device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    baseline = _reset_peak_rss() if device.type == "cpu" else 0
    model: Any = build_model(cfg).to(device).eval()  # a CausalLM (cfg.task == "lm")
    model.generate(prompt, spec["n_new"], temperature=0)
    if device.type == "cuda":
        peak, method = torch.cuda.max_memory_allocated(device), "torch.cuda.max_memory_allocated"
    else:
        peak, method = _max_rss_bytes() - baseline, "fresh subprocess: peak RSS (VmHWM) minus RSS before"
    cache = model.new_cache()
    with torch.no_grad():
        model(prompt, cache=cache)
    return dict(peak_bytes=int(peak), cache_bytes=cache.nbytes, method=method)


def _cuda_peak(
    cfg: ModelConfig, batch: int, seq_len: int, device: torch.device, dtype: torch.dtype, steps: int = 2
) -> dict[str, Any]:
    from aot.models import build_model

    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    model = build_model(cfg).to(device)
    step = training_step(model, make_optimizer(model), random_tokens(cfg, batch, seq_len, device), dtype)
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    del model, step
    torch.cuda.empty_cache()
    return dict(peak_bytes=int(peak), method="torch.cuda.max_memory_allocated")


def random_tokens(cfg: ModelConfig, batch: int, seq_len: int, device: torch.device | str) -> torch.Tensor:
    """Token ids (batch, seq_len) drawn uniformly from the vocabulary, the same for every call (seed 0)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, cfg.vocab_size, (batch, seq_len), generator=generator).to(device)


def _proc_status_bytes(field: str) -> int | None:
    """``VmRSS`` / ``VmHWM`` from /proc/self/status in bytes (Linux), or None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _max_rss_bytes() -> int:
    """Peak RSS of this process. On Linux /proc's ``VmHWM`` (per address space: a fresh process does not
    inherit its parent's peak, which ``getrusage``'s ``ru_maxrss`` does across fork + exec)."""
    hwm = _proc_status_bytes("VmHWM")
    if hwm is not None:
        return hwm
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # bytes on macOS, KiB on Linux


def _reset_peak_rss() -> int:
    """Reset the peak RSS to the current RSS where Linux allows it (``5 > /proc/self/clear_refs``) and return
    the baseline to subtract: the current RSS after a reset, else the peak so far."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        current = _proc_status_bytes("VmRSS")
        if current is not None:
            return current
    except OSError:
        pass
    return _max_rss_bytes()


def _probe(spec: dict[str, Any]) -> dict[str, Any]:
    """Run in a fresh process: peak RSS of ``steps`` (default 2) training steps minus the RSS after a tiny
    warm-up step; for ``kind="generate"`` the peak of a cached generation (:func:`peak_generation_memory`)."""
    from aot.models import build_model

    torch.set_num_threads(int(spec["threads"]))
    if spec.get("kind") == "generate":
        tiny_cfg = ModelConfig.from_dict(spec["config"]).replace(n_layer=1, block_size=8)
        tiny: Any = build_model(tiny_cfg).eval()
        tiny.generate(random_tokens(tiny_cfg, 1, 4, "cpu"), 2, temperature=0)  # loads the kernels' code
        return _generation_peak(spec, torch.device("cpu"))
    dtype = getattr(torch, str(spec["dtype"]).removeprefix("torch."))
    cfg = ModelConfig.from_dict(spec["config"])
    tiny_cfg = cfg.replace(n_layer=1, block_size=8)
    tiny = build_model(tiny_cfg)
    training_step(tiny, make_optimizer(tiny), random_tokens(tiny_cfg, 1, 8, "cpu"), dtype)()
    del tiny
    baseline = _reset_peak_rss()
    model = build_model(cfg)
    step = training_step(model, make_optimizer(model), random_tokens(cfg, spec["batch"], spec["seq_len"], "cpu"), dtype)
    for _ in range(int(spec.get("steps", 2))):
        step()
    return dict(peak_bytes=_max_rss_bytes() - baseline, method="fresh subprocess: peak RSS (VmHWM) minus RSS before")


@contextlib.contextmanager
def num_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` intra-op threads (None: leave torch's setting), restoring it after."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


if __name__ == "__main__":
    print(json.dumps(_probe(json.loads(sys.argv[1]))))
