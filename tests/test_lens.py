"""The TransformerLens view (aot.lens) computes what the aot model computes: same logits in float64, same
attention patterns, MSSA's Q = K = V; blocks without a mapping get one line. Skips without transformer-lens 3.x."""

from __future__ import annotations

import pytest
import torch

from aot.errors import AotError
from aot.lens import check_mappable
from aot.models import build_model, preset_config

CASES = [
    ("aot-mssa-l-cpu", {}),  # learned W_O, learned positions
    ("aot-mssa-tied-l-cpu", {"position": "rope"}),  # the paper's operator, rotary
    ("aot-mssa-tied-l-cpu", {"attn_scale": False, "residual_scale": "scalar", "residual_scale_init": 0.5}),
    ("aot-mssa-l-cpu", {"head_dim": 8, "norm": "none", "position": "none"}),  # K·p != d, no norm, no positions
    ("aot-mhsa-l-cpu", {"position": "rope", "residual_scale": "channel", "residual_scale_init": 0.3}),
    ("gpt2-cpu", {}),  # GELU MLP (GPT-2's tanh)
    ("gpt2-cpu", {"activation": "gelu", "bias": False}),
]


def small_model(name: str, **changes):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    fields = dict(n_layer=2, n_embd=32, n_head=2, head_dim=None, block_size=16)
    model = build_model(preset_config(name).replace(**{**fields, **changes})).double().eval()
    with torch.no_grad():  # away from the init, so that biases, norms and eta all matter
        for param in model.parameters():
            param.normal_(0.0, 0.3 if param.dim() > 1 else 0.1)
    return model


@pytest.fixture(scope="module")
def lens():  # type: ignore[no-untyped-def]
    transformer_lens = pytest.importorskip("transformer_lens", reason="transformer-lens not installed (aot[lens])")
    if not hasattr(transformer_lens, "HookedTransformerConfig"):
        pytest.skip("transformer-lens 4 has no HookedTransformer (aot[lens] installs 3.x)")
    import aot.lens

    return aot.lens


@pytest.mark.parametrize(("name", "changes"), CASES, ids=[f"{n}-{'-'.join(c) or 'default'}" for n, c in CASES])
def test_hooked_transformer_gives_our_logits_and_patterns(lens, name, changes) -> None:  # type: ignore[no-untyped-def]
    model = small_model(name, **changes)
    tl_model = lens.to_hooked_transformer(model)
    idx = torch.randint(0, model.cfg.vocab_size, (3, 16), generator=torch.Generator().manual_seed(1))
    (ours, _), our_cache = model.run_with_cache(idx, names_filter=lambda n: n.endswith("hook_pattern"))
    theirs, their_cache = tl_model.run_with_cache(idx)
    assert theirs.dtype == torch.float64
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-12)
    for layer in range(model.cfg.n_layer):
        pattern = their_cache[f"blocks.{layer}.attn.hook_pattern"]
        torch.testing.assert_close(pattern, our_cache[f"blocks.{layer}.attn.hook_pattern"], rtol=0, atol=1e-12)
    if model.cfg.block == "aot-mssa":  # one projection U_hᵀz serves as query, key and value
        q, k, v = (their_cache[f"blocks.0.attn.hook_{n}"] for n in "qkv")
        assert torch.equal(q, k) and torch.equal(k, v)


def test_patching_the_view_changes_its_output_as_patching_ours_does(lens) -> None:  # type: ignore[no-untyped-def]
    """Zero-ablating head 1 of layer 0 in TransformerLens (hook_z) equals the same ablation through our hook_z."""
    model = small_model("aot-mssa-l-cpu", position="rope")
    tl_model = lens.to_hooked_transformer(model)
    idx = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(2))

    def ablate(z: torch.Tensor, hook) -> torch.Tensor:  # type: ignore[no-untyped-def]
        z = z.clone()
        z[..., 1, :] = 0.0  # TransformerLens's z is (B, T, H, p)
        return z

    def ablate_ours(z: torch.Tensor, hook) -> torch.Tensor:  # type: ignore[no-untyped-def]
        z = z.clone()
        z[:, 1] = 0.0  # ours is (B, H, T, p)
        return z

    theirs = tl_model.run_with_hooks(idx, fwd_hooks=[("blocks.0.attn.hook_z", ablate)])
    with model.hooks([("blocks.0.attn.hook_z", ablate_ours)]):
        ours, _ = model(idx)
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-12)
    assert (theirs - tl_model(idx)).abs().max() > 1e-3  # the ablation did something


@pytest.mark.parametrize(
    ("name", "changes", "message"),
    [
        ("llama-l-cpu", {}, "no TransformerLens mapping for block 'llama'"),
        ("crate-l-cpu", {}, "no TransformerLens mapping for block 'crate'"),
        ("aot-mhsa-l-cpu", {"norm": "rmsnorm"}, "no TransformerLens mapping for norm 'rmsnorm'"),
        ("aot-mhsa-l-cpu", {"final_norm": False}, "without a final norm"),
    ],
)
def test_blocks_without_a_mapping_are_one_line(name, changes, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AotError, match=message) as error:
        check_mappable(small_model(name, **changes))
    assert "\n" not in str(error.value)
