"""The device-dependent paths, on every device this machine has: CPU always, CUDA when present.

On a CPU-only machine (CI) these check the logic; on a GPU machine (`bash scripts/device_check.sh`) the
same tests cover what only runs there: SDPA's CUDA backends against the explicit reference, bf16 autocast,
``torch.cuda.max_memory_allocated`` for the peak training memory, the profiler's device time, the data-sheet
peak of the GPU, and cached decoding with buffers on the device.
"""

from __future__ import annotations

import pytest
import torch

from aot.bench.breakdown import time_breakdown
from aot.bench.peaks import gpu_peak_flops, peak_flops
from aot.bench.timing import make_optimizer, peak_training_memory, random_tokens, training_step
from aot.config import ModelConfig
from aot.models import build_model
from aot.nn.attention import use_reference_attention

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
BLOCKS = [
    ("aot-mssa", {"tied_output": True}),
    ("aot-mssa", {"tied_output": False}),
    ("aot-mssa", {"position": "rope"}),
    ("transformer", {}),
]


def config(block: str, **extra: object) -> ModelConfig:
    fields: dict[str, object] = dict(block=block, n_layer=2, n_embd=64, n_head=4, vocab_size=50, block_size=64)
    fields.update(extra)
    return ModelConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("block", "extra"), BLOCKS, ids=["mssa-tied", "mssa-wo", "mssa-rope", "gpt2"])
def test_fused_attention_equals_reference_on_device(device: str, block: str, extra: dict) -> None:
    """fp32 (TF32 off, torch's default): SDPA's backend on this device = the explicit softmax, outputs and
    gradients."""
    torch.manual_seed(0)
    model = build_model(config(block, **extra)).to(device)
    idx = random_tokens(model.cfg, 2, 64, device)
    results = []
    for reference in (False, True):
        use_reference_attention(model, reference)
        logits, loss = model(idx, labels=idx)
        results.append((logits, torch.autograd.grad(loss, list(model.parameters()))))
    (fused, fused_grads), (ref, ref_grads) = results
    torch.testing.assert_close(fused, ref, rtol=1e-4, atol=1e-5)
    for got, want in zip(fused_grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_autocast_stays_close_to_fp32(device: str) -> None:
    torch.manual_seed(0)
    model = build_model(config("aot-mssa")).to(device).eval()
    idx = random_tokens(model.cfg, 2, 64, device)
    with torch.no_grad():
        full = model(idx)[0]
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            half = model(idx)[0]
    assert half.dtype == torch.bfloat16
    assert (half.float() - full).abs().max() <= 0.05 * full.abs().max()


@pytest.mark.parametrize("device", DEVICES)
def test_cached_decoding_on_device(device: str) -> None:
    torch.manual_seed(0)
    model = build_model(config("aot-mssa", block_size=300)).to(device).eval()
    prompt = random_tokens(model.cfg, 2, 5, device)
    with torch.no_grad():
        cached = model.generate(prompt, 280, temperature=0, use_cache=True)  # buffers grow past 256 slots
        full = model(cached[:, :-1])[0]
    assert cached.device.type == torch.device(device).type
    assert torch.equal(full.argmax(-1)[:, 4:], cached[:, 5:])  # every sampled token is the full forward's argmax


@pytest.mark.parametrize("device", DEVICES)
def test_peak_training_memory_on_device_covers_the_model_state(device: str) -> None:
    if device == "cpu":
        pytest.skip("the CPU probe runs a subprocess; tests/bench/test_bench.py covers it as a slow test")
    cfg = config("aot-mssa", n_embd=256, n_layer=4)
    peak = peak_training_memory(cfg, batch=4, seq_len=64, device=device)
    assert peak["method"] == "torch.cuda.max_memory_allocated"
    assert peak["peak_bytes"] >= 16 * build_model(cfg).num_params()  # weights, grads, AdamW's two moments


@pytest.mark.parametrize("device", DEVICES)
def test_time_breakdown_on_device(device: str) -> None:
    torch.manual_seed(0)
    model = build_model(config("aot-mssa")).to(device)
    step = training_step(model, make_optimizer(model), random_tokens(model.cfg, 2, 64, device))
    seconds = time_breakdown(step, device, steps=2)
    assert seconds["matmul"] > 0 and seconds["attention"] > 0
    assert seconds["matmul"] + seconds["attention"] <= seconds["profiled_step"] * 1.05 or device == "cuda"


def test_peak_of_this_device() -> None:
    """A CUDA device reports its data-sheet peak when it is in the table; the CPU gets a measured one."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        table = gpu_peak_flops(name, torch.bfloat16)
        if table is None:
            pytest.skip(f"{name} is not in aot.bench.peaks.GPU_PEAK_FLOPS")
        assert peak_flops("cuda", torch.bfloat16) == table
    else:
        assert peak_flops("cpu", torch.float32) > 1e9


@pytest.mark.parametrize("device", DEVICES)
def test_precision_auto_on_device(device: str, tmp_path) -> None:
    """`train.precision: auto`: bf16 on a GPU that supports it (no measurement); on a CPU the measured faster one."""
    from aot.bench.precision import BF16_MARGIN, choose_precision

    choice = choose_precision(config("aot-mssa"), 2, 64, device, cache_file=tmp_path / "p.json")
    if device == "cuda":
        assert choice.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp32") and choice.seconds is None
    else:
        assert choice.seconds is not None
        faster = choice.seconds["bf16"] <= BF16_MARGIN * choice.seconds["fp32"]
        assert choice.precision == ("bf16" if faster else "fp32")


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="flex attention trains on CUDA only (no CPU backward in torch 2.13)"
)
def test_flex_attention_with_a_causal_block_mask_equals_the_reference_on_cuda() -> None:
    """MSSA's causal attention (queries = keys = values = P) through ``torch.compile(flex_attention)`` with a
    causal block mask equals the explicit softmax reference, outputs and gradients (benchmarks/bench/
    attention_paths.py times it on CPU, where its backward is missing)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from aot.nn.attention import causal_mask, reference_attention

    torch.manual_seed(0)
    T, scale = 256, 32**-0.5
    P = torch.randn(2, 4, T, 32, device="cuda", requires_grad=True)
    mask = create_block_mask(lambda b, h, q, k: q >= k, None, None, T, T, device="cuda")
    out = torch.compile(flex_attention)(P, P, P, block_mask=mask, scale=scale)
    (grad,) = torch.autograd.grad(out.square().sum(), P)
    ref, _ = reference_attention(P, P, P, scale=scale, mask=causal_mask(T, T, device=P.device))
    (ref_grad,) = torch.autograd.grad(ref.square().sum(), P)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-3, atol=1e-4)
