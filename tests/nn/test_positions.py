"""Positions and MSSA's self-score bound (docs/math.md, "Positions and the self-score bound").

An MSSA head scores with the same projection for queries and keys: s_ij = <R_i P_i, R_j P_j> with P = U_kᵀz and
R the rotary rotation (identity without rotary positions). Cauchy-Schwarz and |R P| = |P| give
s_ij <= |P_i||P_j| <= s_ii whenever |P_j| <= |P_i|, so the head's weight on such a token never exceeds the
weight on the token itself. These tests check the bound on the real module's pattern (float64) and that MHSA,
with separate W_Q and W_K, is not bound by it (so the check can fail).
"""

from __future__ import annotations

import pytest
import torch

from aot.config import ModelConfig
from aot.models.factory import build_model


def _pattern_and_norms(block: str, position: str) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    cfg = ModelConfig(
        block=block, n_layer=1, n_embd=32, n_head=4, norm="layernorm", position=position, task="lm",
        vocab_size=50, block_size=24, init_std=0.3,
    )  # fmt: skip
    model = build_model(cfg).double().eval()
    idx = torch.randint(0, 50, (3, 24))
    names = ["blocks.0.attn.hook_pattern", "blocks.0.attn.hook_subspace", "blocks.0.attn.hook_q"]
    _, cache = model.run_with_cache(idx, names_filter=lambda n: n in names)
    pattern = cache["blocks.0.attn.hook_pattern"]  # (B, H, T, T)
    if "blocks.0.attn.hook_subspace" in cache:  # MSSA: U_kᵀz, (B, H, T, p)
        proj = cache["blocks.0.attn.hook_subspace"]
    else:  # MHSA's queries: hook_q is TransformerLens's (B, T, H, p)
        proj = cache["blocks.0.attn.hook_q"].transpose(1, 2)
    return pattern, proj.norm(dim=-1)  # (B, H, T)


def _violations(pattern: torch.Tensor, norms: torch.Tensor) -> tuple[int, int]:
    """(pairs j < i with |P_j| <= |P_i| and A_ij > A_ii, number of such pairs)."""
    t = pattern.shape[-1]
    earlier = torch.ones(t, t, dtype=torch.bool).tril(-1)  # j < i (causal: later keys are masked)
    not_longer = norms[..., None, :] <= norms[..., :, None]  # |P_j| <= |P_i|
    pairs = earlier & not_longer
    self_weight = pattern.diagonal(dim1=-2, dim2=-1)[..., :, None]
    beats_self = pattern > self_weight + 1e-12
    return int((pairs & beats_self).sum()), int(pairs.sum())


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_mssa_never_weights_a_shorter_token_above_itself(position: str) -> None:
    pattern, norms = _pattern_and_norms("aot-mssa", position)
    violations, pairs = _violations(pattern, norms)
    assert pairs > 300  # the bound is tested on many pairs, not vacuously
    assert violations == 0


def test_mhsa_is_not_bound_by_the_self_score() -> None:
    pattern, norms = _pattern_and_norms("aot-mhsa", "rope")  # norms of its queries; any choice works
    violations, pairs = _violations(pattern, norms)
    assert violations > 0.2 * pairs
