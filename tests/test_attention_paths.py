"""The fused (SDPA) and explicit reference paths of MSSA / MHSA agree — outputs and gradients — with and
without a cached prefix; the performance changes to attention and blocks keep these behaviours."""

from __future__ import annotations

import math

import pytest
import torch

from aot.config import ModelConfig
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention


def _cfg(**extra: object) -> ModelConfig:
    fields: dict[str, object] = dict(block="aot-mssa", n_layer=2, n_embd=12, n_head=3, vocab_size=23, block_size=16)
    fields.update(extra)
    return ModelConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "extra",
    [
        {"tied_output": True},
        {"tied_output": False},
        {"position": "rope"},
        {"residual_scale": "channel", "residual_scale_init": 0.5},
        {"block": "aot-mhsa"},
        {"block": "transformer"},
    ],
)
def test_fused_and_reference_paths_agree_with_gradients(extra: dict) -> None:
    model = build_model(_cfg(**extra)).double()
    idx = torch.randint(0, 23, (2, 9))
    grads = []
    for reference in (False, True):
        for module in model.modules():
            if hasattr(module, "use_reference"):
                module.use_reference = reference
        model.zero_grad()
        logits, loss = model(idx, idx)
        assert loss is not None
        loss.backward()
        grads.append((logits.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (fused, fused_grads), (ref, ref_grads) = grads
    torch.testing.assert_close(fused, ref)
    for a, b in zip(fused_grads, ref_grads):
        torch.testing.assert_close(a, b)


def test_tied_mssa_is_the_papers_operator() -> None:
    """One layer's branch equals Σ_k U_k (U_kᵀ Z) softmax((U_kᵀ Z)ᵀ (U_kᵀ Z) / √p) with a causal mask (PAPER.md §2),
    computed directly with columns as tokens."""
    cfg = _cfg(tied_output=True, block_size=6)
    attn = MultiHeadSubspaceSelfAttention(cfg).double()
    z = torch.randn(1, 6, 12, dtype=torch.float64)
    out = attn(z)[0].T  # (d, N)
    Z = z[0].T
    expected = torch.zeros_like(Z)
    for U in attn.bases():  # U: (d, p)
        P = U.T @ Z  # (p, N)
        scores = P.T @ P / math.sqrt(cfg.p)  # (N keys, N queries): column j is query j
        causal = torch.ones(6, 6, dtype=torch.bool).tril().T  # key i ≤ query j
        weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=0)
        expected += U @ P @ weights
    torch.testing.assert_close(out, expected)


def test_pattern_hook_sees_the_attention_weights() -> None:
    model = build_model(_cfg())
    idx = torch.randint(0, 23, (1, 7))
    _, cache = model.run_with_cache(idx, names_filter="blocks.0.attn.hook_pattern")
    pattern = cache["blocks.0.attn.hook_pattern"]
    assert pattern.shape == (1, 3, 7, 7)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(1, 3, 7))
    assert torch.all(pattern.triu(1) == 0)  # causal


def test_dropout_still_applies_in_training() -> None:
    model = build_model(_cfg(dropout=0.5)).train()
    idx = torch.randint(0, 23, (2, 8))
    torch.manual_seed(0)
    a, _ = model(idx)
    torch.manual_seed(1)
    b, _ = model(idx)
    assert not torch.allclose(a, b)
    model.eval()
    torch.testing.assert_close(model(idx)[0], model(idx)[0])
