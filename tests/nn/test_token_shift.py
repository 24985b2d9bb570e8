"""The token shift ahead of MSSA's projection (``model.token_shift``, aot.nn.token_shift): its formula against a
direct loop, MSSA on the shifted tokens, cached decoding and beam reordering, the parameters and FLOPs it adds, and
that it is off by default without changing any existing config (config.json, resume fingerprint, weights)."""

from __future__ import annotations

import pytest
import torch

from aot.bench.flops import flops_per_token, measure_flops
from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.models import build_model
from aot.models.budget import model_size
from aot.nn.attention import use_reference_attention
from aot.nn.token_shift import TokenShift


def mssa(**fields) -> ModelConfig:  # type: ignore[no-untyped-def]
    base = dict(block="aot-mssa", n_layer=2, n_embd=16, n_head=2, vocab_size=40, block_size=24, tied_output=False)
    return ModelConfig.from_dict({**base, **fields})


@pytest.mark.parametrize("kind", ["scalar", "channel"])
def test_the_shift_mixes_each_token_with_the_one_before_it(kind: str) -> None:
    torch.manual_seed(0)
    shift = TokenShift(mssa(token_shift=kind)).double()
    with torch.no_grad():
        shift.mix.uniform_(-1, 2)
    z = torch.randn(3, 7, 16, dtype=torch.float64)
    out = shift(z)
    mu = shift.mix.detach().expand(16)
    for t in range(7):
        previous = z[:, t - 1] if t > 0 else torch.zeros(3, 16, dtype=torch.float64)  # z_{-1} = 0
        assert torch.allclose(out[:, t], (1 - mu) * z[:, t] + mu * previous, atol=1e-14)


def test_it_starts_as_rwkvs_ramp_or_one_half_and_is_kept_out_of_weight_decay() -> None:
    channel = build_model(mssa(token_shift="channel"))
    ramp = channel.backbone.blocks[0].attn.token_shift.mix
    assert torch.equal(ramp.detach(), torch.linspace(0, 1, 16))  # init_weights leaves it alone
    scalar = build_model(mssa(token_shift="scalar")).backbone.blocks[1].attn.token_shift.mix
    assert scalar.tolist() == [0.5]
    assert "backbone.blocks.0.attn.token_shift.mix" in channel.no_weight_decay()


def test_mssa_with_the_shift_projects_the_shifted_tokens() -> None:
    torch.manual_seed(1)
    model = build_model(mssa(token_shift="channel", n_layer=1)).double().eval()
    idx = torch.randint(0, 40, (2, 12))
    names = ["blocks.0.hook_resid_pre", "blocks.0.attn.hook_subspace"]
    _, cache = model.run_with_cache(idx, names_filter=lambda n: n in names)
    block = model.backbone.blocks[0]
    z = block.attn_norm(cache["blocks.0.hook_resid_pre"])
    mu = block.attn.token_shift.mix
    shifted = z + mu * (torch.nn.functional.pad(z, (0, 0, 1, 0))[:, :-1] - z)
    proj = (shifted @ block.attn.subspace_proj.weight.T).view(2, 12, 2, 8).transpose(1, 2)  # U_kᵀ z̃, per head
    assert torch.allclose(cache["blocks.0.attn.hook_subspace"], proj, atol=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_cached_decoding_and_the_reference_path_equal_the_full_forward(tied: bool) -> None:
    torch.manual_seed(2)
    model = build_model(mssa(token_shift="channel", tied_output=tied, position="rope")).double().eval()
    idx = torch.randint(0, 40, (2, 15))
    with torch.no_grad():
        full = model(idx)[0]
        cache = model.new_cache()
        steps = [model(idx[:, t : t + 1], cache=cache)[0] for t in range(15)]
        assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-12)
        cache = model.new_cache()
        chunks = [model(idx[:, a:b], cache=cache)[0] for a, b in ((0, 4), (4, 5), (5, 15))]
        assert torch.allclose(torch.cat(chunks, dim=1), full, atol=1e-12)
        use_reference_attention(model)
        assert torch.allclose(model(idx)[0], full, atol=1e-12)


def test_beam_reordering_moves_the_shift_state_with_the_cache() -> None:
    torch.manual_seed(3)
    model = build_model(mssa(token_shift="channel")).double().eval()
    idx = torch.randint(0, 40, (3, 9))
    order = torch.tensor([2, 0, 1])
    with torch.no_grad():
        cache = model.new_cache()
        model(idx[:, :8], cache=cache)
        cache.reorder_cache(order)  # what HF's beam search calls
        step = model(idx[order, 8:], cache=cache)[0]
        assert torch.allclose(step[:, 0], model(idx[order])[0][:, 8], atol=1e-12)


@pytest.mark.parametrize(("kind", "per_layer"), [("scalar", 1), ("channel", 16)])
def test_it_adds_one_or_d_parameters_per_layer_and_no_matmul_flops(kind: str, per_layer: int) -> None:
    plain, shifted = mssa(), mssa(token_shift=kind)
    assert build_model(shifted).num_params() == build_model(plain).num_params() + 2 * per_layer
    assert model_size(shifted, build_model).params == build_model(shifted).num_params()  # the memory check's count
    torch.manual_seed(4)
    model = build_model(shifted)
    idx = torch.randint(0, 40, (1, 16))
    analytic = flops_per_token(shifted, 16)
    assert analytic == flops_per_token(plain, 16)  # element-wise work: nothing counted
    assert measure_flops(model, idx, training=False) / 16 == pytest.approx(analytic.forward, rel=0.01)
    assert measure_flops(model, idx, training=True) / 16 == pytest.approx(analytic.training(recompute=True), rel=0.01)


def test_off_by_default_and_an_existing_config_is_unchanged() -> None:
    cfg = mssa()
    assert cfg.token_shift == "none" and "token_shift" not in cfg.to_dict()  # config.json, resume fingerprint
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert mssa(token_shift="channel").to_dict()["token_shift"] == "channel"
    torch.manual_seed(5)
    plain = build_model(cfg)
    torch.manual_seed(5)
    again = build_model(ModelConfig.from_dict({**cfg.to_dict(), "token_shift": "none"}))
    assert plain.state_dict().keys() == again.state_dict().keys()
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in plain.state_dict().items())
    assert not any("token_shift" in name for name in plain.state_dict())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"block": "aot-mhsa", "token_shift": "channel"}, "token_shift='channel' is an option of block 'aot-mssa'"),
        ({"block": "crate", "token_shift": "scalar"}, "block='crate' has none: drop it, or set that block"),
        ({"token_shift": "conv"}, "model.token_shift='conv' must be one of none, scalar, channel"),
    ],
)
def test_a_token_shift_where_it_means_nothing_is_one_line(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        mssa(**fields)


def test_the_transformer_lens_view_refuses_a_token_shift_in_one_line() -> None:
    from aot.errors import AotError
    from aot.lens import check_mappable

    check_mappable(build_model(mssa()))  # the plain operator maps
    with pytest.raises(AotError, match="no TransformerLens mapping for MSSA with a token shift"):
        check_mappable(build_model(mssa(token_shift="scalar")))
