"""Attention paths for AoT-MSSA on CPU, each timed against SDPA (the fused kernel) in the same process.

MSSA's queries, keys and values are one tensor P = U_kᵀ z (B, H, T, p). Timed here, fp32, at the CPU bench
size (4 heads, p = 64, batch × T = 4096 tokens), T = 128 … 1024:

- ``sdpa``: ``F.scaled_dot_product_attention(P, P, P, is_causal=True)`` (PyTorch's CPU flash kernel), the
  path of ``aot.nn.attention`` (none of the others is kept: none wins a whole training step, see the table).
- ``blocked-64``, ``blocked-128``, ``blocked-256`` (:class:`BlockedCausalAttention`): query blocks of that
  many rows, fully masked blocks skipped, a hand-written backward that reuses P as queries, keys and values.
- ``blocked-autograd-64``: the same blocks through stock autograd (no hand-written backward).
- ``reference``: the explicit softmax(P Pᵀ s + mask) P over the full T × T square.
- ``flex`` (forward only): ``torch.compile(flex_attention)`` with a causal block mask; its compile time is
  recorded, and that its backward is refused on CPU (torch 2.13), so it cannot train here.
- non-causal (vision): ``sdpa-noncausal`` against ``symmetric-noncausal``, which computes the scores once
  (P Pᵀ is symmetric) and enters their gradient once as (dS + dSᵀ) P.
- ``forward`` rows: the forward alone (inference, no gradients): SDPA against blocked-64.
- ``model`` rows: a whole training step (AdamW) of AoT-MSSA (tied, 6 layers, d = 256, 4 heads), batch × T =
  4096, with the core's SDPA and with blocked-64 patched into MSSA's ``attend`` (:func:`attend_blocked`):
  in the model P arrives as a transposed view of the projection, so the blocked path pays copies in and out
  that the fused kernel, which reads strided tensors, does not.

Each figure is the median over interleaved rounds (order reversed every other round) of the median of
``--repeat`` calls after a warm-up call; ratios are SDPA's time / the variant's, measured in the same round
loop. Run with one thread, as recorded (about 1.5 CPU-minutes):

    OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/bench/attention_paths.py [--rounds 3] [--note TEXT]

Writes attention_paths.json and attention_paths.md beside this script through `aot.bench.record` (the machine,
date and load with the figures; ``--markdown-only`` rewrites the table from the JSON).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import torch
import torch.nn.functional as F
from torch.autograd.function import FunctionCtx, once_differentiable

from aot.bench.record import RecordedBenchmark, count, run_recorded
from aot.bench.timing import make_optimizer, time_calls, training_step
from aot.config import ModelConfig
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention, causal_mask, reference_attention
from aot.runinfo import timing_header

HEADS, HEAD_DIM, TOKENS = 4, 64, 4096
SCALE = 1.0 / math.sqrt(HEAD_DIM)
SEQ_LENS = (128, 256, 512, 1024)
KEEP_RATIO = 1.05  # a path replaces SDPA only if a whole training step is at least this much faster at every T


def sdpa(P: torch.Tensor, causal: bool = True) -> torch.Tensor:
    return F.scaled_dot_product_attention(P, P, P, is_causal=causal, scale=SCALE)


class BlockedCausalAttention(torch.autograd.Function):
    """Causal ``softmax(x xᵀ s) v`` over (N, T, p) tensors (N = batch × heads) in query blocks of ``block`` rows.

    Query block i multiplies only the keys 0 … end_i (the blocks above the diagonal, fully masked, are never
    computed; only the diagonal block is masked) and keeps its attention weights for the backward. The
    backward uses that queries and keys are one tensor: the score gradient dS reaches x as dS · x (queries)
    and dSᵀ · x (keys), and the values' gradient Aᵀ · dO lands in the same gradient when v is x (``v=None``).
    """

    @staticmethod
    def forward(ctx: FunctionCtx, x: torch.Tensor, v: torch.Tensor | None, scale: float, block: int) -> torch.Tensor:
        v_given = v is not None
        v = x if v is None else v  # None: the values are x too (MSSA without rotary positions)
        T = x.shape[-2]
        outs, patterns = [], []
        for start in range(0, T, block):
            end = min(start + block, T)
            scores = torch.bmm(x[:, start:end], x[:, :end].transpose(1, 2)).mul_(scale)
            above = torch.ones(end - start, end - start, dtype=torch.bool, device=x.device).triu_(1)
            scores[:, :, start:end].masked_fill_(above, float("-inf"))  # only the diagonal block is masked
            pattern = torch.softmax(scores, dim=-1)
            outs.append(torch.bmm(pattern, v[:, :end]))
            patterns.append(pattern)
        out = torch.cat(outs, dim=1)
        ctx.save_for_backward(x, v if v_given else None, out, *patterns)  # type: ignore[arg-type]
        ctx.scale, ctx.block = scale, block  # type: ignore[attr-defined]
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, None, None]:
        x, v_given, out, *patterns = ctx.saved_tensors
        v = x if v_given is None else v_given
        scale, block = ctx.scale, ctx.block
        T = x.shape[-2]
        starts = range(0, T, block)
        rowdot = (grad_out * out).sum(-1, keepdim=True)  # D_i = Σ_j A_ij dA_ij = dO_i · O_i
        # the gradients are accumulated per block of rows, each block its own contiguous tensor (baddbmm_ into
        # a strided slice of one gradient falls back to one small matmul per batch row on CPU)
        grad_x = [torch.zeros_like(x[:, s : s + block]) for s in starts]
        grad_v = grad_x if v_given is None else [torch.zeros_like(v[:, s : s + block]) for s in starts]
        for i, start in enumerate(starts):
            end = min(start + block, T)
            pattern, query, grad_block = patterns[i], x[:, start:end], grad_out[:, start:end]
            # dS = A ∘ (dO vᵀ − D) · s  (softmax backward, times the scale)
            d_scores = torch.bmm(grad_block, v[:, :end].transpose(1, 2)).sub_(rowdot[:, start:end])
            d_scores.mul_(pattern).mul_(scale)
            grad_x[i].baddbmm_(d_scores, x[:, :end])  # as queries
            for j, key_start in enumerate(starts[: i + 1]):  # key block j of the keys 0 … end
                key_end = min(key_start + block, T)
                grad_x[j].baddbmm_(d_scores[:, :, key_start:key_end].transpose(1, 2), query)  # as keys
                grad_v[j].baddbmm_(pattern[:, :, key_start:key_end].transpose(1, 2), grad_block)  # as values
        return torch.cat(grad_x, dim=1), None if v_given is None else torch.cat(grad_v, dim=1), None, None


def blocked_causal_attention(x: torch.Tensor, v: torch.Tensor, *, scale: float, block: int = 64) -> torch.Tensor:
    """Causal softmax(x xᵀ · scale + mask) v for x, v (B, H, T, p) by :class:`BlockedCausalAttention`."""
    B, H, T, p = x.shape
    flat_v = None if v is x else v.reshape(B * H, T, v.shape[-1])  # reshaped (copied) once when x is v
    out = BlockedCausalAttention.apply(x.reshape(B * H, T, p), flat_v, scale, block)
    return out.view(B, H, T, v.shape[-1])


def blocked_autograd(P: torch.Tensor, block: int) -> torch.Tensor:
    """Query blocks through stock autograd: the blocks above the diagonal skipped, no custom backward."""
    T = P.shape[-2]
    outs = []
    for start in range(0, T, block):
        end = min(start + block, T)
        scores = torch.matmul(P[..., start:end, :], P[..., :end, :].transpose(-2, -1)) * SCALE
        scores = scores.masked_fill(~causal_mask(end - start, end, P.device), float("-inf"))
        outs.append(torch.matmul(torch.softmax(scores, dim=-1), P[..., :end, :]))
    return torch.cat(outs, dim=-2)


class SymmetricNonCausal(torch.autograd.Function):
    """Non-causal softmax(P Pᵀ s) P: one score product, the score gradient entered once as (dS + dSᵀ) P."""

    @staticmethod
    def forward(ctx: Any, P: torch.Tensor) -> torch.Tensor:
        pattern = torch.softmax(torch.matmul(P, P.transpose(-2, -1)).mul_(SCALE), dim=-1)
        out = torch.matmul(pattern, P)
        ctx.save_for_backward(P, out, pattern)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        P, out, pattern = ctx.saved_tensors
        rowdot = (grad * out).sum(-1, keepdim=True)
        d_scores = torch.matmul(grad, P.transpose(-2, -1)).sub_(rowdot).mul_(pattern).mul_(SCALE)
        return torch.matmul(d_scores + d_scores.transpose(-2, -1), P) + torch.matmul(pattern.transpose(-2, -1), grad)


TRAINING_VARIANTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sdpa": sdpa,
    "blocked-64": lambda P: blocked_causal_attention(P, P, scale=SCALE, block=64),
    "blocked-128": lambda P: blocked_causal_attention(P, P, scale=SCALE, block=128),
    "blocked-256": lambda P: blocked_causal_attention(P, P, scale=SCALE, block=256),
    "blocked-autograd-64": lambda P: blocked_autograd(P, 64),
    "reference": lambda P: reference_attention(
        P, P, P, scale=SCALE, mask=causal_mask(P.shape[-2], P.shape[-2], P.device)
    )[0],
    "sdpa-noncausal": lambda P: sdpa(P, causal=False),
    "symmetric-noncausal": SymmetricNonCausal.apply,  # type: ignore[dict-item]
}
BASELINE = {"symmetric-noncausal": "sdpa-noncausal", "sdpa-noncausal": "sdpa-noncausal"}


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int, repeat: int) -> dict[str, float]:
    """Median seconds of each fn: per round the median of ``repeat`` calls after one warm-up call."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        for name in list(fns)[:: 1 if r % 2 == 0 else -1]:
            times[name].append(statistics.median(time_calls(fns[name], warmup=1, repeat=repeat)))
    return {name: statistics.median(v) for name, v in times.items()}


def row(kind: str, variant: str, T: int, seconds: float, vs: str, ratio: float) -> dict[str, Any]:
    return dict(kind=kind, variant=variant, T=T, batch=TOKENS // T, ms=1e3 * seconds, vs=vs, ratio=ratio)


def attention_rows(rounds: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for T in SEQ_LENS:
        torch.manual_seed(0)
        P = torch.randn(TOKENS // T, HEADS, T, HEAD_DIM, requires_grad=True)
        grad = torch.randn_like(P)

        def train(
            fn: Callable[[torch.Tensor], torch.Tensor], P: torch.Tensor = P, grad: torch.Tensor = grad
        ) -> Callable[[], None]:
            def step() -> None:
                P.grad = None
                fn(P).backward(grad)

            return step

        def forward(fn: Callable[[torch.Tensor], torch.Tensor], P: torch.Tensor = P) -> Callable[[], None]:
            def call() -> None:
                with torch.no_grad():
                    fn(P)

            return call

        seconds = interleaved({name: train(fn) for name, fn in TRAINING_VARIANTS.items()}, rounds, repeat)
        for name, s in seconds.items():
            base = BASELINE.get(name, "sdpa")
            rows.append(row("training", name, T, s, base, seconds[base] / s))
        fwd = interleaved(
            {"sdpa": forward(sdpa), "blocked-64": forward(TRAINING_VARIANTS["blocked-64"])}, rounds, repeat
        )
        for name, s in fwd.items():
            rows.append(row("forward", name, T, s, "sdpa", fwd["sdpa"] / s))
        print(f"T={T}: " + ", ".join(f"{r['variant']} x{r['ratio']:.2f}" for r in rows if r["T"] == T), flush=True)
    return rows


def flex_row(T: int = 256, repeat: int = 3) -> dict[str, Any]:
    """torch.compile(flex_attention) with a causal block mask: compile time, forward time vs SDPA, backward."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    P = torch.randn(TOKENS // T, HEADS, T, HEAD_DIM)
    result: dict[str, Any] = dict(kind="flex", variant="flex", T=T, batch=TOKENS // T, vs="sdpa")
    start = time.perf_counter()
    mask = create_block_mask(lambda b, h, q, k: q >= k, None, None, T, T, device="cpu")
    compiled = torch.compile(flex_attention)
    compiled(P, P, P, block_mask=mask, scale=SCALE)
    result["compile_seconds"] = time.perf_counter() - start
    out = compiled(P, P, P, block_mask=mask, scale=SCALE)
    result["max_abs_diff_vs_sdpa"] = float((out - sdpa(P)).abs().max())
    seconds = interleaved(
        {"sdpa": lambda: sdpa(P), "flex": lambda: compiled(P, P, P, block_mask=mask, scale=SCALE)}, 3, repeat
    )
    result.update(ms=1e3 * seconds["flex"], sdpa_forward_ms=1e3 * seconds["sdpa"])
    result["ratio"] = seconds["sdpa"] / seconds["flex"]
    P.requires_grad_(True)
    try:
        compiled(P, P, P, block_mask=mask, scale=SCALE).sum().backward()
        result["backward"] = "ran"
    except Exception as error:  # recorded: why flex cannot train on CPU
        result["backward"] = f"{type(error).__name__}: {str(error).splitlines()[0]}"
    print(f"flex T={T}: compile {result['compile_seconds']:.1f} s, ×{result['ratio']:.2f}; {result['backward']}")
    return result


_CORE_ATTEND = MultiHeadSubspaceSelfAttention.attend


def attend_blocked(
    self: MultiHeadSubspaceSelfAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """MSSA's ``attend`` with the blocked path for causal self-attention whose queries are its keys
    (MSSA without a cache) in training, fp32, 128 <= T <= 512; the core's paths otherwise."""
    if self.causal and q is k and q.requires_grad and 128 <= q.shape[-2] <= 512 and not self.hook_pattern.active:
        return self.hook_z(blocked_causal_attention(q, v, scale=self.scale))
    return _CORE_ATTEND(self, q, k, v)


def model_rows(rounds: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    for T in (128, 256, 512):
        cfg = ModelConfig(block="aot-mssa", n_layer=6, n_embd=256, n_head=HEADS, tied_output=True, block_size=T)
        torch.manual_seed(0)
        model = build_model(cfg).train()
        optimizer = make_optimizer(model)
        idx = torch.randint(0, cfg.vocab_size, (TOKENS // T, T))
        step = training_step(model, optimizer, idx)

        def blocked_step(step: Callable[[], None] = step) -> None:
            with mock.patch.object(MultiHeadSubspaceSelfAttention, "attend", attend_blocked):
                step()

        seconds = interleaved({"sdpa": step, "blocked-64": blocked_step}, rounds, repeat)
        for name, s in seconds.items():
            rows.append(row("model", name, T, s, "sdpa", seconds["sdpa"] / s))
        print(f"model T={T}: blocked x{seconds['sdpa'] / seconds['blocked-64']:.3f}", flush=True)
    return rows


def markdown(record: dict[str, Any]) -> str:
    lines = [
        "# Attention paths for AoT-MSSA on CPU",
        "",
        timing_header(record),
        "",
        record["setup"],
        "",
        record["note"],
        "",
        "## Attention alone, training (forward + backward), ms (ratio: SDPA's time / this path's; >1 is faster)",
        "",
    ]
    rows = [r for r in record["rows"] if r["kind"] == "training"]
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    seq_lens = sorted({r["T"] for r in rows})
    lines += ["| path | vs | " + " | ".join(f"T = {T}" for T in seq_lens) + " |", "|---|---|" + "---|" * len(seq_lens)]

    def cell(r: dict[str, Any]) -> str:
        return f"{r['ms']:.1f} ({r['ratio']:.2f}×)"

    for v in variants:
        by_t = {r["T"]: r for r in rows if r["variant"] == v}
        lines.append(f"| {v} | {by_t[seq_lens[0]]['vs']} | " + " | ".join(cell(by_t[T]) for T in seq_lens) + " |")
    for kind, title in (
        ("forward", "Attention alone, forward only (no gradients: decoding and evaluation use SDPA)"),
        ("model", "Whole training step, AoT-MSSA tied, 6 layers, d = 256 (AdamW)"),
    ):
        rows = [r for r in record["rows"] if r["kind"] == kind]
        if not rows:
            continue
        seq_lens = sorted({r["T"] for r in rows})
        lines += ["", f"## {title}, ms", "", "| path | " + " | ".join(f"T = {T}" for T in seq_lens) + " |"]
        lines.append("|---|" + "---|" * len(seq_lens))
        for v in dict.fromkeys(r["variant"] for r in rows):
            by_t = {r["T"]: r for r in rows if r["variant"] == v}
            lines.append(f"| {v} | " + " | ".join(cell(by_t[T]) for T in seq_lens) + " |")
    model = [r for r in record["rows"] if r["kind"] == "model" and r["variant"] != r["vs"]]
    if model:
        ratios = ", ".join(f"{r['ratio']:.2f}× at T = {r['T']}" for r in model)
        kept = all(r["ratio"] >= KEEP_RATIO for r in model)
        lines += [
            "",
            f"Verdict: blocked-64 in a whole training step: {ratios} — "
            + (
                f"at least {KEEP_RATIO}× everywhere: a candidate to keep."
                if kept
                else f"not {KEEP_RATIO}× or more at every T, so `aot.nn.attention` keeps SDPA (the gain of the "
                "attention alone is lost to copying P, a transposed view of the projection, in and out)."
            ),
        ]
    flex = [r for r in record["rows"] if r["kind"] == "flex"]
    for r in flex:
        lines += [
            "",
            f"## FlexAttention (torch.compile, causal block mask), T = {r['T']}, batch {r['batch']}",
            "",
            f"compile {r['compile_seconds']:.1f} s; forward {r['ms']:.1f} ms against SDPA's {r['sdpa_forward_ms']:.1f}"
            f" ({r['ratio']:.2f}×; max |diff| {r['max_abs_diff_vs_sdpa']:.1e}); backward: {r['backward']}",
        ]
    return "\n".join(lines) + "\n"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=count, default=2, help="timed calls per round after a warm-up (default: 2)")
    parser.add_argument("--no-flex", action="store_true", help="skip the torch.compile FlexAttention check")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rows = attention_rows(args.rounds, args.repeat)
    if not args.no_flex:
        rows.append(flex_row())
    rows += model_rows(args.rounds, args.repeat)
    return dict(
        setup=(
            f"fp32, {HEADS} heads, p = {HEAD_DIM}, batch × T = {TOKENS} tokens; median over {args.rounds} "
            f"interleaved rounds of the median of {args.repeat} calls (after a warm-up call); ratio = SDPA's "
            "time / the path's, same process (non-causal paths against non-causal SDPA)."
        ),
        rows=rows,
    )


BENCH = RecordedBenchmark(__file__, __doc__, measure, markdown, options=add_options, rounds=3)


def main(argv: list[str] | None = None) -> int:
    return run_recorded(BENCH, argv)


if __name__ == "__main__":
    raise SystemExit(main())
