"""Candidate speed-ups of AoT-MSSA, each measured against the core's code in the same process (A/B interleaved).

The core's MSSA already uses one d → K·p projection and passes the same tensor as q, k and v to SDPA, and a
profile of a training step (torch.profiler) shows no copies, transposes-to-contiguous or concatenations: the
time goes to matmuls (~87 % of the matmul peak) and the CPU flash-attention kernel; element-wise work is
< 6 %. The variants below try what is left; a variant is kept in src/ only if it helps here.

- ``core``: the code in src/ (reference point).
- ``matmul-tied-output``: the tied output as ``out @ W`` instead of ``F.linear(out, W.t())`` (the weight
  gradient of that use lands in W's own layout) and identity modules (η = none, dropout 0) skipped in blocks.
- ``contiguous-P``: P made contiguous in (B, K, T, p) before SDPA (the kernel reads strided rows otherwise).
- ``reference-path``: the explicit softmax(P Pᵀ s + mask) P instead of the fused kernel.
- ``symmetric-backward``: the fused kernel's forward, and a backward that uses Q = K = V: the scores' gradient
  enters once as (dS + dSᵀ) P (batched matmuls over the full square, 4 products, instead of the kernel's 5 over
  the causal part).

    flock /tmp/aot-cpu.lock env PYTHONPATH=src python benchmarks/bench/mssa_variants.py [ROUNDS] [--note TEXT]

Writes mssa_variants.json beside this file (through `aot.bench.record`: the machine, date and load with the
figures): medians over rounds of a training step and a forward (aot-mssa tied, 6 layers, d = 256, 4 heads,
T = 256, batch 16, fp32) and of one cached decoding step. The variants are patched into the public classes
(`MultiHeadSubspaceSelfAttention`, `AttentionOnlyBlock`) for the time of a measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

import torch

from aot.bench.flops import flops_per_token
from aot.bench.peaks import measure_matmul_peak
from aot.bench.record import RecordedBenchmark, count, run_recorded
from aot.bench.timing import forward_pass, make_optimizer, median_seconds, training_step
from aot.config import ModelConfig
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention, use_reference_attention
from aot.nn.blocks import AttentionOnlyBlock


def _forward_matmul_output(self, x, cache=None):  # type: ignore[no-untyped-def]
    offset = cache.length if cache is not None else 0
    proj = self.hook_subspace(self.split_heads(self.subspace_proj(x)))
    (proj_all,) = cache.extend(proj) if cache is not None else (proj,)
    q, k = self.rotate(proj, proj_all, offset)
    out = self.merge_heads(self.attend(q, k, proj_all))
    if self.out_proj is not None:
        return self.out_proj(out)
    return torch.matmul(out, self.subspace_proj.weight)


def _attention_step_skipping_identities(self, x, cache):  # type: ignore[no-untyped-def]
    x = self.hook_resid_pre(x)
    branch = self.attn(self.attn_norm(x), cache)
    if self.attn_scale.eta is not None:
        branch = self.attn_scale(branch)
    branch = self.hook_attn_out(branch)
    return x + (self.drop(branch) if self.drop.p and self.training else branch)


def _split_contiguous(self, t):  # type: ignore[no-untyped-def]
    B, T, _ = t.shape
    return t.view(B, T, self.n_head, self.head_dim).transpose(1, 2).contiguous()


class _SymmetricBackwardAttention(torch.autograd.Function):
    """Causal softmax(P Pᵀ s) P: forward by the CPU flash kernel, backward dP = (dS + dSᵀ) P + Aᵀ dO."""

    @staticmethod
    def forward(ctx, P, scale):  # type: ignore[no-untyped-def]
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(P, P, P, 0.0, True, scale=scale)
        ctx.save_for_backward(P, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        P, out, lse = ctx.saved_tensors
        T = P.shape[-2]
        masked = ~torch.ones(T, T, dtype=torch.bool, device=P.device).tril()
        rowdot = (grad_out * out).sum(-1, keepdim=True)  # D = rowsum(dO ∘ O)
        grad = torch.empty_like(P)
        for b in range(0, P.shape[0], 4):  # chunks of the batch keep the T×T blocks in cache
            p, g = P[b : b + 4], grad_out[b : b + 4]
            pattern = (p @ p.transpose(-2, -1)).mul_(ctx.scale).sub_(lse[b : b + 4].unsqueeze(-1)).exp_()
            pattern.masked_fill_(masked, 0.0)
            d_scores = (g @ p.transpose(-2, -1)).sub_(rowdot[b : b + 4]).mul_(pattern).mul_(ctx.scale)
            grad[b : b + 4] = (d_scores + d_scores.transpose(-2, -1)) @ p + pattern.transpose(-2, -1) @ g
        return grad, None


_ATTEND = MultiHeadSubspaceSelfAttention.attend


def _attend_symmetric(self, q, k, v):  # type: ignore[no-untyped-def]
    if q is k and k is v and self.causal and not self.hook_pattern.active and not (self.training and self.dropout):
        return self.hook_z(_SymmetricBackwardAttention.apply(q, self.scale))
    return _ATTEND(self, q, k, v)


#: what each variant patches: (class, method) -> the variant's function
PATCHES: dict[str, dict[tuple[type, str], Any]] = {
    "matmul-tied-output": {
        (MultiHeadSubspaceSelfAttention, "forward"): _forward_matmul_output,
        (AttentionOnlyBlock, "attention_step"): _attention_step_skipping_identities,
    },
    "symmetric-backward": {(MultiHeadSubspaceSelfAttention, "attend"): _attend_symmetric},
    "contiguous-P": {(MultiHeadSubspaceSelfAttention, "split_heads"): _split_contiguous},
}


@contextlib.contextmanager
def variant(name: str, model: torch.nn.Module) -> Iterator[None]:
    """``model`` computing as variant ``name`` inside the block (the classes' own methods restored after)."""
    with contextlib.ExitStack() as stack:
        for (cls, method), function in PATCHES.get(name, {}).items():
            stack.enter_context(mock.patch.object(cls, method, function))
        if name == "reference-path":
            use_reference_attention(model)
            stack.callback(use_reference_attention, model, False)
        yield


def decode_step_seconds(model, n_cached: int = 256, steps: int = 64) -> float:  # type: ignore[no-untyped-def]
    cache = model.new_cache()
    seconds = []
    with torch.no_grad():
        model(torch.randint(0, model.cfg.vocab_size, (1, n_cached)), cache=cache)
        token = torch.zeros(1, 1, dtype=torch.long)
        for _ in range(steps):
            start = time.perf_counter()
            model(token, cache=cache)
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


VARIANTS = ("core", "matmul-tied-output", "contiguous-P", "reference-path", "symmetric-backward")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every variant, interleaved over ``args.rounds`` rounds; the summary is printed and recorded."""
    rounds = args.rounds
    cfg = ModelConfig(block="aot-mssa", n_layer=6, n_embd=256, n_head=4, tied_output=True, block_size=512)
    torch.manual_seed(0)
    model = build_model(cfg)
    idx = torch.randint(0, 256, (16, 256))
    optimizer = make_optimizer(model)
    peak = measure_matmul_peak(torch.float32)["peak"]
    flops_step = flops_per_token(cfg, 256).training() * idx.numel()
    times: dict[str, dict[str, list[float]]] = {v: {"train": [], "forward": [], "decode_step": []} for v in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else tuple(reversed(VARIANTS))
        for name in order:
            with variant(name, model):
                model.train()
                times[name]["train"].append(median_seconds(training_step(model, optimizer, idx), warmup=1, repeat=3))
                model.eval()
                times[name]["forward"].append(median_seconds(forward_pass(model, idx), warmup=1, repeat=3))
                times[name]["decode_step"].append(decode_step_seconds(model))
    summary = {}
    for name in VARIANTS:
        row = {f"{k}_ms": 1e3 * statistics.median(v) for k, v in times[name].items()}
        row["train_mfu"] = flops_step / (row["train_ms"] / 1e3) / peak
        row["train_speedup_vs_core"] = statistics.median(times["core"]["train"]) / statistics.median(
            times[name]["train"]
        )
        row["decode_speedup_vs_core"] = statistics.median(times["core"]["decode_step"]) / statistics.median(
            times[name]["decode_step"]
        )
        summary[name] = row
    for name, row in summary.items():
        print(
            f"{name:20s} train {row['train_ms']:7.1f} ms (MFU {100 * row['train_mfu']:.1f} %, "
            f"×{row['train_speedup_vs_core']:.3f})  forward {row['forward_ms']:6.1f} ms  "
            f"decode step {row['decode_step_ms']:.3f} ms (×{row['decode_speedup_vs_core']:.3f})"
        )
    return dict(
        setup="aot-mssa tied, 6 layers, d=256, 4 heads, T=256, batch 16, fp32; decode: 1 token after 256 cached",
        matmul_peak_flops=peak,
        rounds=rounds,
        summary=summary,
    )


def add_rounds(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "rounds", nargs="?", type=count, default=3, help="interleaved rounds over the variants (default: 3)"
    )


BENCH = RecordedBenchmark(__file__, __doc__, measure, options=add_rounds, rounds=None)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
