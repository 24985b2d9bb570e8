"""The recurrent blocks: causal linear attention (both forms against the quadratic formula) and Mamba's S6
(against the recurrence written out), cached decoding with a fixed-size state, and the missing-package error."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F

from aot.config import ModelConfig
from aot.errors import AotError
from aot.models import build_model
from aot.nn.cache import Cache
from aot.nn.linear_attention import feature_map, linear_attention_chunked, linear_attention_recurrent


def quadratic_linear_attention(q, k, v, normalize):
    """o_i = Σ_{j≤i} (φ(q_i)·φ(k_j)) v_j [/ Σ_{j≤i} φ(q_i)·φ(k_j)], computed as a masked T×T product."""
    scores = (feature_map(q) @ feature_map(k).transpose(-2, -1)).tril()
    out = scores @ v
    return out / scores.sum(-1, keepdim=True) if normalize else out


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("chunk", [1, 3, 4, 64])
def test_linear_attention_chunked_and_recurrent_forms_agree_with_the_quadratic_formula(normalize, chunk):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 10, 4, dtype=torch.float64) for _ in range(3))
    direct = quadratic_linear_attention(q, k, v, normalize)
    chunked, (S, z) = linear_attention_chunked(feature_map(q), feature_map(k), v, None, normalize, 0.0, chunk)
    recurrent, (S2, z2) = linear_attention_recurrent(feature_map(q), feature_map(k), v, None, normalize, 0.0)
    torch.testing.assert_close(chunked, direct, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(recurrent, direct, rtol=1e-12, atol=1e-12)
    # the final state is Σ_j φ(k_j) v_jᵀ and Σ_j φ(k_j), whichever form computed it
    torch.testing.assert_close(S, feature_map(k).transpose(-2, -1) @ v)
    torch.testing.assert_close(S2, S)
    torch.testing.assert_close(z, feature_map(k).sum(-2))
    torch.testing.assert_close(z2, z)


def test_linear_attention_continues_from_a_state():
    torch.manual_seed(1)
    q, k, v = (feature_map(torch.randn(1, 2, 9, 4, dtype=torch.float64)) for _ in range(3))
    whole, _ = linear_attention_chunked(q, k, v, chunk_size=4)
    first, state = linear_attention_chunked(q[..., :5, :], k[..., :5, :], v[..., :5, :], chunk_size=2)
    rest, _ = linear_attention_recurrent(q[..., 5:, :], k[..., 5:, :], v[..., 5:, :], state)
    torch.testing.assert_close(torch.cat([first, rest], dim=-2), whole)


def mamba_reference(ssm, x):
    """Mamba's mixer from its parameters, token by token (Gu & Dao 2023, Alg. 2), independent of mambapy's code."""
    E, N = ssm.config.d_inner, ssm.config.d_state
    R, width = ssm.config.dt_rank, ssm.config.d_conv
    u, z = (x @ ssm.in_proj.weight.T).chunk(2, dim=-1)  # (B, T, E) each
    padded = F.pad(u, (0, 0, width - 1, 0))  # causal depthwise conv over time
    kernel = ssm.conv1d.weight[:, 0, :]  # (E, width)
    u = torch.stack([(padded[:, t : t + width] * kernel.T).sum(1) for t in range(x.shape[1])], dim=1)
    u = F.silu(u + ssm.conv1d.bias)
    proj = u @ ssm.x_proj.weight.T
    delta = F.softplus(proj[..., :R] @ ssm.dt_proj.weight.T + ssm.dt_proj.bias)  # (B, T, E)
    Bm, Cm = proj[..., R : R + N], proj[..., R + N :]
    A = -torch.exp(ssm.A_log)  # (E, N)
    h = x.new_zeros(x.shape[0], E, N)
    ys = []
    for t in range(x.shape[1]):
        h = torch.exp(delta[:, t, :, None] * A) * h + delta[:, t, :, None] * Bm[:, t, None, :] * u[:, t, :, None]
        ys.append((h * Cm[:, t, None, :]).sum(-1) + ssm.D * u[:, t])
    y = torch.stack(ys, dim=1)
    return (y * F.silu(z)) @ ssm.out_proj.weight.T


def test_mamba_mixer_matches_the_recurrence_written_out():
    pytest.importorskip("mambapy")
    torch.manual_seed(0)
    model = build_model(ModelConfig(block="mamba", n_layer=1, n_embd=16, n_head=4, vocab_size=7, block_size=12))
    ssm = model.double().backbone.blocks[0].attn.ssm
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    torch.testing.assert_close(ssm(x), mamba_reference(ssm, x), rtol=1e-9, atol=1e-12)
    # Mamba's Δ initialisation survives the model's init (Δ = softplus(bias) between 0.001 and 0.1)
    dt = F.softplus(ssm.dt_proj.bias)
    assert float(dt.min().detach()) >= 1e-3 * 0.99 and float(dt.max().detach()) <= 0.1 * 1.01


def test_mamba_a_log_and_d_are_kept_out_of_weight_decay():
    pytest.importorskip("mambapy")
    model = build_model(ModelConfig(block="mamba", n_layer=1, n_embd=16, n_head=4, vocab_size=7, block_size=8))
    assert {"backbone.blocks.0.attn.ssm.A_log", "backbone.blocks.0.attn.ssm.D"} <= model.no_weight_decay()


def state_bytes(cfg: ModelConfig, batch: int, itemsize: int) -> int:
    """The closed-form size of the recurrent state of every layer."""
    if cfg.block == "linear-attn":  # S (p×p) and z (p) per head
        per_layer = cfg.n_head * (cfg.p * cfg.p + cfg.p)
    else:  # h (E×N) and the last d_conv − 1 conv inputs (E each)
        E = cfg.mamba_expand * cfg.n_embd
        per_layer = E * cfg.mamba_d_state + E * (cfg.mamba_d_conv - 1)
    return cfg.n_layer * batch * per_layer * itemsize


@pytest.mark.parametrize("block", ["linear-attn", "mamba"])
@pytest.mark.parametrize("grad", [False, True])
def test_cached_decoding_with_a_fixed_size_state_equals_full_forward(block, grad):
    if block == "mamba":
        pytest.importorskip("mambapy")
    torch.manual_seed(0)
    cfg = ModelConfig(block=block, n_layer=2, n_embd=16, n_head=4, vocab_size=13, block_size=12)
    model = build_model(cfg).double().eval()
    idx = torch.randint(0, 13, (2, 10))
    full = model(idx)[0]
    cache = Cache.for_layers(cfg.n_layer)
    with torch.set_grad_enabled(grad):
        chunks = [model(idx[:, :4], cache=cache)[0]]
        after_prefill = cache.nbytes
        chunks.append(model(idx[:, 4:7], cache=cache)[0])
        chunks += [model(idx[:, t : t + 1], cache=cache)[0] for t in range(7, 10)]
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-10, atol=1e-12)
    assert cache.length == 10
    assert cache.nbytes == after_prefill == state_bytes(cfg, 2, 8)  # the state does not grow with the tokens
    if grad:
        (cached,) = torch.autograd.grad(torch.cat(chunks, dim=1).square().sum(), [model.tok_embed.weight])
        (direct,) = torch.autograd.grad(full.square().sum(), [model.tok_embed.weight])
        torch.testing.assert_close(cached, direct, rtol=1e-9, atol=1e-12)


def test_generate_with_a_recurrent_cache_matches_without():
    torch.manual_seed(0)
    model = build_model(ModelConfig(block="linear-attn", n_layer=2, n_embd=16, n_head=4, vocab_size=13, block_size=12))
    model = model.double().eval()
    prompt = torch.randint(0, 13, (1, 3))
    assert torch.equal(
        model.generate(prompt, 8, temperature=0, use_cache=True),
        model.generate(prompt, 8, temperature=0, use_cache=False),
    )


def test_mamba_without_mambapy_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "mambapy.mamba", None)  # import fails as if it were not installed
    with pytest.raises(AotError, match=r"needs the mambapy package; install it with .*aot\[mamba\]") as info:
        build_model(ModelConfig(block="mamba", n_layer=1, n_embd=16, n_head=4))
    assert "\n" not in str(info.value)
