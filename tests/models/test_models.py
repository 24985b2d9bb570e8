"""Models: causality, closed-form parameter counts, every preset end to end, caches, hooks, persistence."""

from __future__ import annotations

import pytest
import torch

from aot.config import ModelConfig
from aot.errors import AotError
from aot.models import PRESETS, AotModel, build_model, preset_config
from aot.nn.blocks import make_block
from aot.nn.cache import Cache
from aot.nn.feedforward import swiglu_hidden

try:
    import mambapy  # noqa: F401

    HAS_MAMBAPY = True
except ImportError:
    HAS_MAMBAPY = False
needs_mambapy = pytest.mark.skipif(not HAS_MAMBAPY, reason="mambapy (aot[mamba]) is not installed")


def tiny(block: str, task: str = "lm", **kw) -> ModelConfig:
    base = dict(
        block=block,
        task=task,
        n_layer=2,
        n_embd=16,
        n_head=4,
        vocab_size=13,
        block_size=12,
        image_size=8,
        patch_size=4,
        in_chans=1,
        num_classes=3,
        n_dims=5,
        n_points=6,
    )
    return ModelConfig.from_dict({**base, **kw})


CAUSAL_CASES = [
    (block, task, position)
    for block in ["aot-mssa", "aot-mhsa", "transformer", "crate", "llama"]
    for task in ["lm", "icl"]
    for position in ["learned", "rope"]
] + [
    pytest.param(block, task, "learned", marks=needs_mambapy if block == "mamba" else ())
    for block in ["linear-attn", "mamba"]
    for task in ["lm", "icl"]
]


@pytest.mark.parametrize(("block", "task", "position"), CAUSAL_CASES)
def test_changing_the_future_leaves_past_outputs_bit_equal(block, task, position):
    torch.manual_seed(0)
    model = build_model(tiny(block, task, position=position)).double().eval()
    t = 5 if task == "lm" else 2  # outputs at positions <= t must not see positions > t
    if task == "lm":
        idx = torch.randint(0, 13, (2, 12))
        changed = idx.clone()
        changed[:, t + 1 :] = (changed[:, t + 1 :] + 1) % 13
        before, after = model(idx)[0], model(changed)[0]
    else:
        xs, ys = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 6, dtype=torch.float64)
        xs2, ys2 = xs.clone(), ys.clone()
        xs2[:, t + 1 :] += 1.0
        ys2[:, t:] += 1.0  # y_t comes after x_t in the prompt, so the prediction for x_t must not see it
        before, after = model(xs, ys), model(xs2, ys2)
    assert torch.equal(before[:, : t + 1], after[:, : t + 1])
    assert not torch.equal(before[:, t + 1 :], after[:, t + 1 :])  # the future does matter


def test_image_model_is_not_causal():
    model = build_model(tiny("aot-mssa", "image")).double().eval()
    images = torch.randn(1, 1, 8, 8, dtype=torch.float64)
    features = model.forward_features(images)
    images2 = images.clone()
    images2[..., 4:, 4:] += 1.0  # the last patch
    assert not torch.equal(features[:, 0], model.forward_features(images2)[:, 0])  # class token sees it


def closed_form_block_params(cfg: ModelConfig) -> int:
    """Parameters of one block, written out from the architecture (docs/paper.md §2, §6)."""
    d, K, p = cfg.n_embd, cfg.n_head, cfg.p
    ln = (2 * d if cfg.bias else d) if cfg.norm == "layernorm" else d if cfg.norm == "rmsnorm" else 0
    mssa = d * K * p + (0 if cfg.tied_output else K * p * d + d)  # U, and a learned W_O with bias
    mhsa = 4 * d * d + (4 * d if cfg.bias else 0)
    eta = {"none": 0, "scalar": 1, "channel": d}[cfg.residual_scale]
    if cfg.block == "aot-mssa":
        return ln + mssa + eta
    if cfg.block == "aot-mhsa":
        return ln + mhsa + eta
    if cfg.block == "transformer":
        hidden = int(cfg.mlp_ratio * d)
        return 2 * ln + mhsa + 2 * d * hidden + hidden + d + eta
    if cfg.block == "crate":
        return 2 * ln + mssa + d * d + eta
    if cfg.block == "llama":
        return 2 * ln + 4 * d * d + 3 * d * swiglu_hidden(d, cfg.mlp_ratio) + eta
    if cfg.block == "linear-attn":  # W_Q, W_K, W_V, W_O as in MHSA; φ has no parameters
        return ln + mhsa + eta
    if cfg.block == "mamba":  # Mamba (Gu & Dao 2023), E = expand·d, R = ⌈d/16⌉, N = d_state, no projection biases
        E, R, N, w = cfg.mamba_expand * d, -(-d // 16), cfg.mamba_d_state, cfg.mamba_d_conv
        in_proj, conv, x_proj, dt_proj, A, D, out_proj = (
            d * 2 * E,
            E * w + E,
            E * (R + 2 * N),
            R * E + E,
            E * N,
            E,
            E * d,
        )
        return ln + in_proj + conv + x_proj + dt_proj + A + D + out_proj + eta
    raise AssertionError(cfg.block)


@pytest.mark.parametrize(
    "fields",
    [
        dict(block="aot-mssa", tied_output=True, norm="none"),
        dict(block="aot-mssa", tied_output=True),
        dict(block="aot-mssa", tied_output=False, head_dim=6),
        dict(block="aot-mssa", tied_output=True, residual_scale="scalar"),
        dict(block="aot-mhsa"),
        dict(block="aot-mhsa", residual_scale="channel"),
        dict(block="transformer"),
        dict(block="crate", tied_output=False),
        dict(block="llama", bias=False),
        dict(block="linear-attn"),
        dict(block="linear-attn", bias=False, residual_scale="scalar"),
        pytest.param(dict(block="mamba"), marks=needs_mambapy),
        pytest.param(
            dict(block="mamba", mamba_d_state=8, mamba_expand=3, mamba_d_conv=3, n_embd=40), marks=needs_mambapy
        ),
    ],
    ids=str,
)
def test_block_parameter_count_equals_closed_form(fields):
    cfg = tiny(**fields)
    block = make_block(cfg)
    assert sum(p.numel() for p in block.parameters()) == closed_form_block_params(cfg)


def test_tied_mssa_is_d_K_p_per_layer():
    cfg = tiny("aot-mssa", tied_output=True, norm="none", head_dim=3)
    assert sum(p.numel() for p in make_block(cfg).parameters()) == 16 * 4 * 3


def test_lm_head_is_tied_and_counted_once():
    model = build_model(tiny("transformer"))
    assert model.lm_head.weight is model.tok_embed.weight
    n_blocks = sum(p.numel() for p in model.backbone.blocks.parameters())
    assert model.num_params() == 13 * 16 + 12 * 16 + n_blocks + 2 * 16  # embeddings + blocks + final LN
    assert model.num_params(non_embedding=True) == n_blocks + 2 * 16


def _tiny_input(model: AotModel):
    cfg = model.cfg
    if cfg.task == "lm":
        idx = torch.randint(0, cfg.vocab_size, (1, 8))
        return (idx, idx)
    if cfg.task == "image":
        return (torch.randn(1, cfg.in_chans, cfg.image_size, cfg.image_size),)
    return (torch.randn(1, 4, cfg.n_dims), torch.randn(1, 4))


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_runs_forward_and_backward(name):
    if PRESETS[name].fields["block"] == "mamba":
        pytest.importorskip("mambapy")
    torch.manual_seed(0)
    model = build_model(preset_config(name))
    inputs = _tiny_input(model)
    out = model(*inputs)
    if model.cfg.task == "lm":
        logits, loss = out
        assert logits.shape == (1, 8, model.cfg.vocab_size)
    else:
        loss = out.float().pow(2).mean()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    # every parameter reaches the loss (nothing built but left unused)
    assert all(g.abs().sum() > 0 for g in grads if g is not None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(n_embd=100, n_head=3), "n_embd=100 is not divisible by n_head=3"),
        (dict(block="lstm"), "block='lstm' is not one of"),
        (dict(activation="relu"), "activation='relu' is not one of gelu, gelu_tanh"),
        (dict(causal="yes"), "causal='yes' must be true or false"),
        (dict(block="linear-attn", position="rope"), "block='linear-attn' has none"),
        (dict(block="mamba", task="image"), "block='mamba' is causal only"),
        (dict(n_layer=0), "n_layer=0 must be a positive integer"),
        (dict(block="aot-mhsa", head_dim=8), "needs n_head*head_dim == n_embd"),
        (dict(task="image", image_size=30, patch_size=4), "image_size=30 is not divisible by patch_size=4"),
        (dict(dropout=1.5), "dropout=1.5"),
        (dict(position="rope", head_dim=3, block="aot-mssa"), "even head_dim"),
        (dict(block="aot-mhsa", subspace_init="orthogonal"), "block='aot-mhsa' has none"),
        (dict(subspace_init="qr"), "model.subspace_init='qr' must be one of normal, orthogonal"),
    ],
)
def test_bad_config_raises_one_line_error_naming_the_field(fields, message):
    base = dict(n_layer=2, n_embd=16, n_head=4)
    with pytest.raises(AotError) as info:
        ModelConfig.from_dict({**base, **fields})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("n_head", "head_dim"), [(4, 4), (4, 8)])
def test_orthogonal_subspace_init_gives_orthogonal_bases_of_normal_length(n_head, head_dim):
    """subspace_init='orthogonal': [U_1 … U_K] has orthonormal columns times init_std·√d (K·p ≤ d), so
    U_kᵀU_j = 0 for k ≠ j; when K·p > d its rows are orthogonal instead. Checked against the Gram matrices."""
    torch.manual_seed(0)
    d, std = 16, 0.02
    cfg = ModelConfig(n_layer=2, n_embd=d, n_head=n_head, head_dim=head_dim, options={"subspace_init": "orthogonal"})
    model = build_model(cfg).double()
    gain = std * d**0.5
    for block in model.backbone.blocks:
        U = block.attn.subspace_proj.weight.t()  # (d, K·p) = [U_1 … U_K]
        if n_head * head_dim <= d:
            torch.testing.assert_close(U.t() @ U, gain**2 * torch.eye(n_head * head_dim, dtype=U.dtype))
            bases = block.attn.bases()
            assert (bases[0].t() @ bases[1]).abs().max() / gain**2 < 1e-6  # initialised in float32
        else:
            torch.testing.assert_close(U @ U.t(), gain**2 * torch.eye(d, dtype=U.dtype))
    # the default keeps normal init: a random (d, K·p) matrix is far from orthogonal
    normal = build_model(ModelConfig(n_layer=1, n_embd=d, n_head=4)).double()
    W = normal.backbone.blocks[0].attn.subspace_proj.weight
    gram = W @ W.t() / gain**2
    assert (gram - torch.eye(d, dtype=W.dtype)).abs().max() > 0.1


def test_unknown_config_field_suggests_the_right_one():
    with pytest.raises(AotError, match=r"unknown field 'n_embed'.*did you mean 'n_embd'"):
        ModelConfig.from_dict({"n_embed": 64})


def test_block_types_are_the_registry():
    """Registering a block's spec is the only step: the config accepts it at once, and BLOCK_TYPES lists it."""
    import aot.config
    from aot.blockspec import BlockSpec, block_types, register_block, unregister_block
    from aot.nn.attention import MultiHeadSubspaceSelfAttention
    from aot.nn.blocks import AttentionOnlyBlock

    assert block_types() == aot.config.BLOCK_TYPES
    assert {"aot-mssa", "aot-mhsa", "transformer", "crate", "llama"} <= set(aot.config.BLOCK_TYPES)
    register_block(BlockSpec("test-only-block", AttentionOnlyBlock, MultiHeadSubspaceSelfAttention))
    try:
        assert "test-only-block" in aot.config.BLOCK_TYPES
        model = build_model(ModelConfig(block="test-only-block", n_layer=1, n_embd=16, n_head=4, vocab_size=13))
        assert isinstance(model.backbone.blocks[0], AttentionOnlyBlock)
    finally:
        unregister_block("test-only-block")
    assert "test-only-block" not in aot.config.BLOCK_TYPES


def test_causal_is_a_field_derived_from_the_task_unless_set():
    assert ModelConfig(task="lm").causal and ModelConfig(task="icl").causal and not ModelConfig(task="image").causal
    old = {k: v for k, v in preset_config("aot-mssa-l-cpu").to_dict().items() if k != "causal"}  # saved before
    assert ModelConfig.from_dict(old).causal is True
    operator = ModelConfig(block="aot-mssa", n_embd=8, n_head=2, norm="none", causal=False)  # no task needed
    assert operator.task == "lm" and not operator.causal
    with pytest.raises(AotError, match="needs causal=True"):
        build_model(operator)  # a language model that sees the token it predicts is refused
    vit = build_model(tiny("transformer", "image", causal=True))  # settable: a causal image model
    assert all(block.attn.causal for block in vit.backbone.blocks)


def test_gelu_tanh_mlp_is_gpt2s_formula_float64():
    """GPT-2's GELU: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), against the exact x·Φ(x)."""
    from aot.nn.feedforward import GeluMLP

    torch.manual_seed(0)
    x = 3 * torch.randn(4, 16, dtype=torch.float64)
    for activation, act in (
        ("gelu_tanh", lambda h: 0.5 * h * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (h + 0.044715 * h**3)))),
        ("gelu", lambda h: h * 0.5 * (1 + torch.erf(h / 2**0.5))),
    ):
        mlp = GeluMLP(tiny("transformer", activation=activation)).double()
        expected = mlp.down_proj(act(mlp.up_proj(x)))
        torch.testing.assert_close(mlp(x), expected, rtol=1e-12, atol=1e-12)
    assert all(preset_config(name).activation == "gelu_tanh" for name in PRESETS if name.startswith("gpt2"))
    assert preset_config("vit-s").activation == "gelu"


def test_config_round_trips_through_dict():
    cfg = preset_config("aot-mssa-l-cpu", n_layer=3)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("block", "fields"),
    [
        ("aot-mssa", dict(tied_output=True)),
        ("aot-mssa", dict(tied_output=False, head_dim=6)),  # K·p != d
        ("aot-mssa", dict(position="rope")),
        ("aot-mhsa", {}),
        ("transformer", {}),
        ("crate", dict(tied_output=False)),
        ("llama", dict(bias=False)),
    ],
)
@pytest.mark.parametrize("grad", [False, True], ids=["in-place-buffers", "autograd-concatenation"])
def test_cached_decoding_equals_full_forward(block, fields, grad):
    torch.manual_seed(0)
    model = build_model(tiny(block, **fields)).double().eval()
    idx = torch.randint(0, 13, (2, 10))
    full = model(idx)[0]
    cache = Cache.for_layers(model.cfg.n_layer, min_capacity=3)  # buffers grow 4 → 8 → 16 on the way
    with torch.set_grad_enabled(grad):
        chunks = [model(idx[:, :4], cache=cache)[0], model(idx[:, 4:7], cache=cache)[0]]  # prefill, a chunk
        chunks += [model(idx[:, t : t + 1], cache=cache)[0] for t in range(7, 10)]  # one token at a time
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, rtol=1e-10, atol=1e-12)
    assert cache.length == 10 and cache.nbytes == sum(t.numel() * 8 for layer in cache for t in layer.tensors)
    assert cache[0].capacity == (16 if not grad else 10)
    if grad:  # the gradient through the cache is the gradient of the full forward
        (cached,) = torch.autograd.grad(torch.cat(chunks, dim=1).square().sum(), [model.tok_embed.weight])
        (direct,) = torch.autograd.grad(full.square().sum(), [model.tok_embed.weight])
        torch.testing.assert_close(cached, direct, rtol=1e-9, atol=1e-12)


def test_dropout_applies_in_training_only():
    model = build_model(tiny("aot-mssa", dropout=0.5)).train()
    idx = torch.randint(0, 13, (2, 8))
    torch.manual_seed(0)
    a = model(idx)[0]
    torch.manual_seed(1)
    assert not torch.allclose(a, model(idx)[0])
    model.eval()
    torch.testing.assert_close(model(idx)[0], model(idx)[0])


@pytest.mark.parametrize(
    "block, position",
    [
        ("aot-mssa", "learned"),
        ("aot-mssa", "rope"),
        ("aot-mhsa", "learned"),
        ("transformer", "learned"),
        ("llama", "rope"),
    ],
)
@pytest.mark.parametrize("batch", [1, 3])
def test_generate_with_and_without_cache_agree_greedily(block, position, batch):
    """Cached decoding picks, token by token, the argmax of a full forward over the whole prefix."""
    torch.manual_seed(0)
    model = build_model(tiny(block, position=position)).double().eval()
    prompt = torch.randint(0, 13, (batch, 3))
    with_cache = model.generate(prompt, 12, temperature=0, use_cache=True)  # runs past block_size=12
    without = model.generate(prompt, 12, temperature=0, use_cache=False)
    assert with_cache.shape == (batch, 15)
    assert torch.equal(with_cache[:, :12], without[:, :12])
    for end in range(3, 12):  # each token is the argmax of the uncached logits of its prefix
        logits, _ = model(with_cache[:, :end])
        assert torch.equal(with_cache[:, end], logits[:, -1].argmax(-1))


def test_run_with_cache_names_and_subspace_projection():
    torch.manual_seed(0)
    model = build_model(tiny("aot-mssa", norm="none")).double().eval()
    idx = torch.randint(0, 13, (1, 6))
    _, cache = model.run_with_cache(idx, names_filter=lambda n: n.startswith("blocks.1."))
    assert set(cache) == {
        "blocks.1.hook_resid_pre",
        "blocks.1.hook_attn_out",
        "blocks.1.hook_resid_post",
        "blocks.1.attn.hook_subspace",
        "blocks.1.attn.hook_pattern",
        "blocks.1.attn.hook_z",
    }
    # hook_subspace holds U_kᵀ z for every token and head
    U = model.backbone.blocks[1].attn.bases()  # (K, d, p)
    expected = torch.einsum("btd,kdp->bktp", cache["blocks.1.hook_resid_pre"], U)
    torch.testing.assert_close(cache["blocks.1.attn.hook_subspace"], expected)
    pattern = cache["blocks.1.attn.hook_pattern"]
    torch.testing.assert_close(pattern.sum(-1), torch.ones(1, 4, 6, dtype=torch.float64))
    assert torch.all(pattern.triu(1) == 0)  # causal


def test_hook_can_patch_an_activation():
    torch.manual_seed(0)
    model = build_model(tiny("aot-mhsa")).eval()
    idx = torch.randint(0, 13, (1, 6))
    clean = model(idx)[0]
    with model.hooks([("blocks.0.hook_attn_out", lambda t, hook: torch.zeros_like(t))]):
        patched = model(idx)[0]
    assert not torch.allclose(clean, patched)
    torch.testing.assert_close(model(idx)[0], clean)  # hooks are removed afterwards
    with pytest.raises(KeyError, match="no hook point matches"), model.hooks([("blocks.9.nothing", print)]):
        pass


def test_save_and_load_pretrained_round_trip(tmp_path):
    torch.manual_seed(0)
    model = build_model(tiny("aot-mssa", tied_output=False)).eval()
    model.save_pretrained(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json", "model.safetensors"]
    loaded = AotModel.from_pretrained(tmp_path / "m").eval()
    idx = torch.randint(0, 13, (1, 6))
    torch.testing.assert_close(loaded(idx)[0], model(idx)[0], rtol=0, atol=0)
    with pytest.raises(AotError, match=r"has no config\.json"):
        AotModel.from_pretrained(tmp_path / "missing")


def test_vision_model_follows_timm_interface():
    model = build_model(tiny("aot-mssa", "image", norm="none")).eval()
    images = torch.randn(2, 1, 8, 8)
    features, inter = model.forward_intermediates(images, indices=[0, 1])
    assert features.shape == (2, 5, 16) and len(inter) == 2
    torch.testing.assert_close(model.forward_head(features), model(images))
    assert model.forward_head(features, pre_logits=True).shape == (2, 16)
    model.reset_classifier(7)
    assert model(images).shape == (2, 7)
    pooled = model.forward_head(model.forward_features(images), pre_logits=True)
    model.reset_classifier(0)  # no head: the pooled features the head read
    torch.testing.assert_close(model(images), pooled, rtol=0, atol=0)
    assert {"pos_embed", "cls_token"} <= model.no_weight_decay()


def test_icl_interleaves_x_and_y():
    xs = torch.arange(2 * 3 * 4, dtype=torch.float32).view(2, 3, 4)
    ys = torch.tensor([[10.0, 11.0, 12.0], [20.0, 21.0, 22.0]])
    seq = build_model(tiny("aot-mssa", "icl", n_dims=4)).interleave(xs, ys)
    assert seq.shape == (2, 6, 4)
    torch.testing.assert_close(seq[:, 0::2], xs)
    torch.testing.assert_close(seq[:, 1::2, 0], ys)
    assert torch.all(seq[:, 1::2, 1:] == 0)


def test_too_long_input_is_a_clear_error():
    model = build_model(tiny("aot-mssa"))
    with pytest.raises(AotError, match="exceeds block_size=12"):
        model(torch.zeros(1, 13, dtype=torch.long))


# -- the LM loss: HF's convention (labels are the inputs, the model shifts) ------------------------------------


def test_lm_loss_with_labels_is_the_shifted_cross_entropy():
    """loss(idx, labels=idx) = −mean_t log softmax(logits_t)[idx_{t+1}] over t = 0..T−2, written out in float64."""
    torch.manual_seed(0)
    model = build_model(tiny("aot-mssa")).double().eval()
    idx = torch.randint(0, 13, (3, 9))
    logits, loss = model(idx, labels=idx)
    log_probs = torch.log_softmax(logits, dim=-1)
    manual = -torch.stack([log_probs[b, t, idx[b, t + 1]] for b in range(3) for t in range(8)]).mean()
    assert loss is not None and loss.dtype == torch.float64
    torch.testing.assert_close(loss, manual, rtol=1e-12, atol=1e-12)
    unshifted = torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx.flatten())  # the old, wrong reading
    assert not torch.isclose(loss, unshifted)


def test_lm_loss_ignores_labels_of_minus_100():
    torch.manual_seed(0)
    model = build_model(tiny("transformer")).double().eval()
    idx = torch.randint(0, 13, (2, 7))
    labels = idx.clone()
    labels[:, :4] = -100  # a prompt that is not scored: predictions of positions 1..3 are skipped
    logits, loss = model(idx, labels=labels)
    log_probs = torch.log_softmax(logits, dim=-1)
    manual = -torch.stack([log_probs[b, t, idx[b, t + 1]] for b in range(2) for t in range(3, 6)]).mean()
    torch.testing.assert_close(loss, manual, rtol=1e-12, atol=1e-12)


def test_hook_points_skip_module_calls_without_hooks_but_run_every_kind_of_hook():
    """HookPoint.__call__ returns its input unless a hook is attached; module, global and backward hooks fire."""
    from torch.nn.modules.module import register_module_forward_hook

    model = build_model(tiny("aot-mssa")).eval()
    point = model.backbone.blocks[0].hook_resid_pre
    x = torch.randn(2, 3, 16)
    assert point(x) is x
    seen: list[str] = []
    handle = point.register_forward_hook(lambda mod, inp, out: seen.append("module"))
    point(x)
    handle.remove()
    handle = register_module_forward_hook(lambda mod, inp, out: seen.append(type(mod).__name__))
    point(x)
    handle.remove()
    handle = point.register_full_backward_hook(lambda mod, grad_in, grad_out: seen.append("backward"))
    point(x.requires_grad_()).sum().backward()
    handle.remove()
    assert seen == ["module", "HookPoint", "backward"]
    assert point(x) is x


def test_generate_sizes_the_cache_once_for_prompt_and_new_tokens(monkeypatch):
    """The cache's buffers are allocated once for prompt + new tokens (capped at block_size): no step copies the
    prefix into a grown buffer."""
    from aot.nn.cache import LayerCache

    grown: list[int] = []
    original = LayerCache._grow

    def counting_grow(self, new, needed):  # type: ignore[no-untyped-def]
        original(self, new, needed)
        grown.append(self.capacity)

    monkeypatch.setattr(LayerCache, "_grow", counting_grow)
    torch.manual_seed(0)
    model = build_model(tiny("aot-mssa", block_size=300)).eval()
    model.generate(torch.randint(0, 13, (2, 5)), 280, temperature=0)  # 285 tokens: past MIN_CAPACITY = 256
    assert grown == [285] * model.cfg.n_layer  # one allocation per layer, at the first call
