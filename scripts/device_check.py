"""Does the GPU path work, and how fast? One prepared check of what the paper's runs do on a GPU, writing one JSON.

    python scripts/device_check.py --out $OUT                 # on one H100 / H200: about 8 minutes
    python scripts/device_check.py --tiny --out /tmp/check    # the same steps on a CPU at toy sizes (the test suite)

Sections of ``device_check.json``:

- ``versions``: torch, CUDA, cuDNN, NCCL, the device's name.
- ``sdpa``: attention at the paper's shape (bf16, causal, head 64, context 1024), Q = K = V as MSSA calls it and
  distinct Q, K, V, forward and backward of every SDPA backend against the explicit fp32 reference (max abs diff)
  with each backend's time.
- ``train``: ``Trainer.fit`` for GPT-2 Base and AoT-MSSA-L Base on synthetic tokens (vocabulary 50,257 in 50,304
  rows, context 1024, bf16, compile on): the first step's seconds (compilation), median step time and tokens/s
  after the warm-up, the trainer's MFU beside an independent one (6·(N + V·d) + 12·L·d·T FLOPs per token, PaLM's
  count with the head, over the data-sheet peak), peak memory, the loss at the first and last step.
- ``ab``: 20-step A/B runs of AoT-MSSA-L Base: the vocabulary padded vs not, fused vs for-each AdamW, and the trainer
  as it is vs a host synchronisation after every step.
- ``resume``: a run stopped at step 30 (its checkpoint's seconds and bytes) and resumed to 60, against the
  uninterrupted 60-step run (max abs difference of the weights; 0 with ``train.deterministic``).
- ``strategies``: DDP and FSDP (sharded checkpoints through torch.distributed.checkpoint) in a process group of one
  (NCCL; gloo on a CPU), trained, saved, resumed.

A part that cannot run on the device says why in its entry (``"skipped": "..."``); a part that fails records its
one-line error, and the rest still runs. ``--tiny`` shrinks every size (2 layers x 64, context 64, a few steps) and
turns compile off, so the whole script runs in seconds on a CPU: the suite runs it (tests/bench/test_device_check.py),
so what a GPU session runs has already run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from aot.bench.peaks import peak_flops
from aot.data.shards import LMBatches
from aot.models import build_model, preset_config
from aot.run_folder import write_text_atomic
from aot.train.distributed import unwrap
from aot.train.trainer import WARMUP_STEPS, TrainConfig, Trainer, read_metrics

GPT2_VOCAB = 50_257


@dataclass(frozen=True)
class Sizes:
    """What the check runs at: the paper's Base shapes on a GPU, toy ones with ``--tiny``."""

    n_layer: int | None  # None: the preset's own (12)
    n_embd: int | None
    n_head: int | None
    context: int
    batch: int
    steps: int
    ab_steps: int
    resume_at: int
    compile: bool
    precision: str
    sdpa_batch: int
    sdpa_heads: int


PAPER = Sizes(None, None, None, 1024, 16, 60, 20, 30, True, "bf16", 8, 12)
TINY = Sizes(2, 64, 2, 64, 4, 8, 4, 4, False, "fp32", 2, 2)


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _guarded(name: str, part: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one part; a failure becomes its entry (one line, and the traceback's last frames), not the end."""
    start = time.perf_counter()
    try:
        entry = part()
    except Exception as exc:
        frames = traceback.format_exception(exc)[-3:]
        entry = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0], "trace": "".join(frames)}
    entry["seconds"] = time.perf_counter() - start
    print(f"device_check: {name} {'failed: ' + entry['error'] if 'error' in entry else 'done'}", flush=True)
    return entry


# -- versions ---------------------------------------------------------------------------------------------------


def versions(device: torch.device) -> dict[str, Any]:
    cuda = device.type == "cuda"
    nccl = None
    with contextlib.suppress(Exception):
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if cuda else None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "nccl": nccl,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "python": sys.version.split()[0],
    }


# -- SDPA at the real shape -------------------------------------------------------------------------------------


def _attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax attention written out in fp32: softmax(q kᵀ / √p + causal mask) v."""
    q, k, v = q.float(), k.float(), v.float()
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    t = q.shape[-2]
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


def sdpa(device: torch.device, sizes: Sizes) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    shape = (sizes.sdpa_batch, sizes.sdpa_heads, sizes.context, 64)
    generator = torch.Generator(device=device).manual_seed(0)
    results: dict[str, Any] = {"shape": list(shape), "dtype": str(dtype)}
    backends = {
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION,
        "math": SDPBackend.MATH,
    }
    for kind in ("q=k=v", "distinct"):
        tensors = [torch.randn(shape, device=device, dtype=dtype, generator=generator) for _ in range(3)]
        if kind == "q=k=v":
            tensors = [tensors[0]] * 3  # MSSA: one projection serves as query, key and value
        reference_inputs = [t.detach().float().requires_grad_(True) for t in tensors]
        reference = _attention_reference(*reference_inputs)
        reference.sum().backward()
        rows: dict[str, Any] = {}
        for name, backend in backends.items():
            if device.type != "cuda" and name in ("efficient", "cudnn"):
                rows[name] = {"skipped": "a CUDA backend"}
                continue
            shared = kind == "q=k=v"  # one leaf feeding query, key and value collects the three gradients
            leaves = [t.detach().clone().requires_grad_(True) for t in (tensors[:1] if shared else tensors)]
            inputs = leaves * 3 if shared else leaves
            try:
                with sdpa_kernel(backend):
                    _sync(device)
                    start = time.perf_counter()
                    out = F.scaled_dot_product_attention(*inputs, is_causal=True)
                    out.float().sum().backward()
                    _sync(device)
                    seconds = time.perf_counter() - start
            except RuntimeError as exc:  # this backend cannot take this shape or dtype here
                rows[name] = {"skipped": str(exc).splitlines()[0][:200]}
                continue
            grads = [t.grad for t in leaves]
            expected_grads = [sum(t.grad for t in reference_inputs)] if shared else [t.grad for t in reference_inputs]
            rows[name] = {
                "forward_max_abs_diff": float((out.float() - reference).abs().max()),
                "backward_max_abs_diff": max(
                    float((g.float() - e).abs().max()) for g, e in zip(grads, expected_grads, strict=True)
                ),
                "seconds": seconds,
            }
        results[kind] = rows
    return results


# -- training ---------------------------------------------------------------------------------------------------


def _config(preset: str, sizes: Sizes, **changes: Any):  # type: ignore[no-untyped-def]
    shape = {k: v for k, v in (("n_layer", sizes.n_layer), ("n_embd", sizes.n_embd), ("n_head", sizes.n_head)) if v}
    shape = {**shape, "head_dim": None} if shape else shape  # the head width follows the toy width
    fields = {"vocab_size": GPT2_VOCAB, "vocab_multiple": 64, "block_size": sizes.context, **shape, **changes}
    return preset_config(preset).replace(**fields)


def _tokens(context: int) -> np.ndarray:
    """Synthetic GPT-2 ids (uniform; the check measures the path, not what the model learns)."""
    return np.random.default_rng(0).integers(0, GPT2_VOCAB, size=200 * context, dtype=np.int64).astype(np.uint16)


def _lm_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return model(batch[0], labels=batch[0])[1]


def _trainer(
    preset: str, out: Path, sizes: Sizes, device: torch.device, steps: int, model_changes: dict | None = None, **cfg
) -> Trainer:
    torch.manual_seed(0)
    model = build_model(_config(preset, sizes, **(model_changes or {})))
    config = TrainConfig(
        steps=steps,
        batch_size=sizes.batch,
        lr=6e-4,
        warmup_steps=2,
        log_every=1,
        progress=False,
        precision=sizes.precision,
        compile=sizes.compile,
        checkpoint_minutes=0,
        **cfg,
    )
    trainer = Trainer(model, LMBatches(_tokens(sizes.context), sizes.batch, sizes.context, seed=0), _lm_loss,
                      config, out, device=device, model_config=model.cfg.to_dict())  # fmt: skip
    trainer.flops_per_sample = _trainer_flops(model.cfg, sizes.context)
    return trainer


def _trainer_flops(cfg: Any, context: int) -> float | None:
    from aot.bench.flops import training_flops_per_sample

    return training_flops_per_sample(cfg, context)


def _independent_flops_per_token(model: torch.nn.Module, cfg: Any, context: int) -> float:
    """PaLM's count, per token trained: 6·(N + V·d) + 12·L·d·T, with N the parameters outside the embeddings, V·d
    the LM head's matmul (tied to the embedding, so not in N) and 12·L·d·T the attention's two matmuls (no causal
    discount: an upper bound where the trainer counts only what the mask leaves)."""
    embedding = sum(p.numel() for name, p in model.named_parameters() if "embed" in name)
    n = sum(p.numel() for p in model.parameters()) - embedding
    return 6 * (n + cfg.vocab_size * cfg.n_embd) + 12 * cfg.n_layer * cfg.n_embd * context


def _timed_run(trainer: Trainer, device: torch.device) -> dict[str, Any]:
    """Fit, and read what the metrics say: the first step (compilation), median step after the warm-up."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    result = trainer.fit()
    rows = [r for r in read_metrics(trainer.out_dir) if not r.get("eval")]
    steady = [r for r in rows if r["step"] > WARMUP_STEPS and not r.get("warmup")]
    step_seconds = [r["train_seconds"] - prev["train_seconds"] for prev, r in itertools.pairwise(rows)]
    steady_seconds = step_seconds[WARMUP_STEPS:] or step_seconds
    median = statistics.median(steady_seconds) if steady_seconds else float("nan")
    tokens_per_step = trainer.cfg.batch_size * trainer.tokens_per_sample
    peak = peak_flops(device, trainer.dtype, device.type == "cuda" and trainer.dtype == torch.float32)
    model = unwrap(trainer.model)
    independent = _independent_flops_per_token(model, model.cfg, trainer.tokens_per_sample)
    return {
        "first_step_seconds": rows[0]["train_seconds"] if rows else None,
        "median_step_seconds": median,
        "tokens_per_s": tokens_per_step / median if median == median else None,
        "mfu_trainer": statistics.median(r["mfu"] for r in steady) if steady else None,
        "mfu_independent": independent * tokens_per_step / median / peak if median == median and peak else None,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
        "loss_first": rows[0]["loss"] if rows else None,
        "loss_last": result.last_loss,
        "steps": result.step,
    }


def train(device: torch.device, sizes: Sizes, work: Path) -> dict[str, Any]:
    return {
        preset: _timed_run(_trainer(preset, work / f"train-{preset}", sizes, device, sizes.steps), device)
        for preset in ("gpt2-base", "aot-mssa-l-base")
    }


def ab(device: torch.device, sizes: Sizes, work: Path) -> dict[str, Any]:
    """20 steps each: the vocabulary padded vs not, fused vs for-each AdamW, no per-step sync vs one."""
    steps, preset = sizes.ab_steps, "aot-mssa-l-base"
    runs: dict[str, Any] = {}

    def timed(name: str, trainer: Trainer) -> None:
        runs[name] = {k: v for k, v in _timed_run(trainer, device).items() if k != "peak_memory_bytes"}

    timed("baseline", _trainer(preset, work / "ab-base", sizes, device, steps))
    timed("vocab_unpadded", _trainer(preset, work / "ab-unpadded", sizes, device, steps, {"vocab_multiple": 1}))
    foreach = _trainer(preset, work / "ab-foreach", sizes, device, steps)
    groups = [{k: v for k, v in g.items() if k not in ("fused", "foreach")} for g in foreach.optimizer.param_groups]
    foreach.optimizer = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), fused=False, foreach=True)
    timed("adamw_foreach", foreach)
    runs["adamw_fused"] = bool(runs["baseline"]) and device.type == "cuda"
    synced = _trainer(preset, work / "ab-sync", sizes, device, steps)
    step = synced.train_step

    def step_and_read() -> tuple[torch.Tensor, bool]:
        loss, finite = step()
        float(loss)  # a host read after every step, as the trainer did before
        return loss, finite

    synced.train_step = step_and_read  # type: ignore[method-assign]
    timed("sync_every_step", synced)
    return runs


def resume(device: torch.device, sizes: Sizes, work: Path) -> dict[str, Any]:
    from aot import run_folder

    end, cut = sizes.steps, sizes.resume_at
    whole = _trainer("aot-mssa-l-base", work / "resume-whole", sizes, device, end, deterministic=True)
    whole.fit()
    part = _trainer("aot-mssa-l-base", work / "resume-part", sizes, device, end, deterministic=True)
    saves: list[float] = []
    save = part.save

    def timed_save(**kwargs: Any) -> None:
        _sync(device)
        start = time.perf_counter()
        save(**kwargs)
        saves.append(time.perf_counter() - start)

    part.save = timed_save  # type: ignore[method-assign]
    part.fit(stop_at=cut)
    folder = run_folder.find_checkpoint(work / "resume-part")
    assert folder is not None
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    again = _trainer("aot-mssa-l-base", work / "resume-part", sizes, device, end, deterministic=True)
    again.fit(resume=True)
    a, b = unwrap(whole.model).state_dict(), unwrap(again.model).state_dict()
    diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
    return {"stopped_at": cut, "steps": end, "checkpoint_seconds": saves[-1] if saves else None,
            "checkpoint_bytes": size, "max_abs_diff_vs_uninterrupted": diff}  # fmt: skip


def strategies(device: torch.device, sizes: Sizes, work: Path) -> dict[str, Any]:
    """DDP and FSDP in a process group of one: trained, saved (FSDP: sharded), resumed."""
    import torch.distributed as dist

    from aot import run_folder

    backend = "nccl" if device.type == "cuda" else "gloo"
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    dist.init_process_group(backend, init_method=f"file://{work / 'store'}", rank=0, world_size=1)
    rows: dict[str, Any] = {}
    try:
        for strategy in ("ddp", "fsdp"):
            out = work / f"strategy-{strategy}"
            steps = max(4, sizes.ab_steps // 2)
            first = _trainer("aot-mssa-l-base", out, sizes, device, steps, strategy=strategy, checkpoint_every=2)
            first.fit(stop_at=steps // 2)
            state = run_folder.read_trainer_state(out / "checkpoint")
            resumed = _trainer("aot-mssa-l-base", out, sizes, device, steps, strategy=strategy, checkpoint_every=2)
            result = resumed.fit(resume=True)
            rows[strategy] = {"wrapped": type(first.model).__name__, "checkpoint_format": state["format"],
                              "resumed_to": result.step, "loss_last": result.last_loss}  # fmt: skip
    finally:
        dist.destroy_process_group()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "runs/device_check")))
    parser.add_argument("--tiny", action="store_true", help="toy sizes, compile off: seconds on a CPU")
    parser.add_argument("--only", nargs="+", choices=("sdpa", "train", "ab", "resume", "strategies"))
    args = parser.parse_args(argv)
    device = _device()
    sizes = TINY if args.tiny else (PAPER if device.type == "cuda" else replace(TINY, steps=12))
    args.out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"versions": versions(device), "sizes": sizes.__dict__, "tiny": args.tiny}
    parts = {
        "sdpa": lambda: sdpa(device, sizes),
        "train": lambda: train(device, sizes, work),
        "ab": lambda: ab(device, sizes, work),
        "resume": lambda: resume(device, sizes, work),
        "strategies": lambda: strategies(device, sizes, work),
    }
    with tempfile.TemporaryDirectory(prefix="aot-device-check-") as scratch:
        work = Path(scratch)
        for name, part in parts.items():
            if args.only and name not in args.only:
                continue
            record[name] = _guarded(name, part)
            write_text_atomic(args.out / "device_check.json", json.dumps(record, indent=2, default=str) + "\n")
    failed = [name for name, entry in record.items() if isinstance(entry, dict) and "error" in entry]
    print(
        f"device_check: wrote {args.out / 'device_check.json'}" + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
