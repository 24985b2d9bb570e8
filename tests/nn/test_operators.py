"""The equations of docs/paper.md §2 and §6 against direct, independent computations (float64, NumPy)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from aot.config import ModelConfig
from aot.errors import ConfigError
from aot.models import build_model
from aot.nn.attention import MultiHeadSubspaceSelfAttention, use_reference_attention
from aot.nn.blocks import AttentionOnlyBlock, CrateBlock, make_block
from aot.nn.feedforward import ISTA
from aot.nn.rotary import Rotary


def softmax_columns(S: np.ndarray) -> np.ndarray:
    """φ of the paper: softmax applied to each column."""
    E = np.exp(S - S.max(axis=0, keepdims=True))
    return E / E.sum(axis=0, keepdims=True)


def paper_mssa_step(Z: np.ndarray, bases: list[np.ndarray], eta: float) -> np.ndarray:
    """Z⁺ = Z + η Σ_k U_k U_kᵀ Z softmax(Zᵀ U_k U_kᵀ Z); Z is d × N, tokens as columns."""
    out = Z.copy()
    for U in bases:
        P = U.T @ Z  # p × N
        out += eta * U @ P @ softmax_columns(P.T @ P)
    return out


def random_bases(d: int, K: int, p: int, rng: np.random.Generator) -> list[np.ndarray]:
    Q, _ = np.linalg.qr(rng.standard_normal((d, K * p)))
    return [Q[:, k * p : (k + 1) * p] for k in range(K)]


def test_fused_tied_unscaled_mssa_layer_equals_the_papers_formula():
    d, K, p, N, eta = 12, 3, 4, 7, 0.37
    rng = np.random.default_rng(0)
    bases = random_bases(d, K, p, rng)
    Z = rng.standard_normal((d, N))

    cfg = ModelConfig(
        block="aot-mssa",
        causal=False,
        n_embd=d,
        n_head=K,
        head_dim=p,
        tied_output=True,
        score_scale=False,
        norm="none",
        residual_scale="scalar",
        residual_scale_init=eta,
    )
    block = make_block(cfg).double()
    assert isinstance(block, AttentionOnlyBlock)
    with torch.no_grad():
        block.attn.subspace_proj.weight.copy_(torch.from_numpy(np.concatenate(bases, axis=1).T))
        block.attn_scale.eta.fill_(eta)  # in float64 (the init value was rounded to float32)
    assert not block.attn.use_reference  # the fused SDPA path
    out = block(torch.from_numpy(Z.T)[None])[0].detach().numpy().T  # rows ↔ columns

    np.testing.assert_allclose(out, paper_mssa_step(Z, bases, eta), rtol=1e-10, atol=1e-12)


def test_bases_view_returns_each_U_k():
    cfg = ModelConfig(block="aot-mssa", causal=False, n_embd=8, n_head=2, head_dim=3)
    attn = MultiHeadSubspaceSelfAttention(cfg)
    W = attn.subspace_proj.weight.detach()  # (K·p, d)
    U = attn.bases().detach()
    assert U.shape == (2, 8, 3)
    torch.testing.assert_close(U[1], W[3:6].T)


def test_scaled_untied_mssa_equals_direct_computation():
    d, K, p, N = 10, 2, 3, 5
    rng = np.random.default_rng(1)
    cfg = ModelConfig(block="aot-mssa", causal=False, n_embd=d, n_head=K, head_dim=p, tied_output=False)
    attn = MultiHeadSubspaceSelfAttention(cfg).double()
    W_U = attn.subspace_proj.weight.detach().numpy()
    W_O, b_O = attn.out_proj.weight.detach().numpy(), attn.out_proj.bias.detach().numpy()
    X = rng.standard_normal((N, d))
    heads = []
    for k in range(K):
        P = X @ W_U[k * p : (k + 1) * p].T  # N × p
        S = P @ P.T / np.sqrt(p)
        A = np.exp(S - S.max(1, keepdims=True))
        heads.append((A / A.sum(1, keepdims=True)) @ P)
    expected = np.concatenate(heads, axis=1) @ W_O.T + b_O
    out = attn(torch.from_numpy(X)[None])[0].detach().numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_causal_scaled_tied_mssa_equals_column_form():
    """Σ_k U_k (U_kᵀZ) softmax((U_kᵀZ)ᵀ(U_kᵀZ)/√p) with a causal mask, columns as tokens (docs/paper.md §2)."""
    cfg = ModelConfig(block="aot-mssa", n_embd=12, n_head=3, tied_output=True, block_size=6)
    attn = MultiHeadSubspaceSelfAttention(cfg).double()
    z = torch.randn(1, 6, 12, dtype=torch.float64)
    out = attn(z)[0].T  # (d, N)
    Z = z[0].T
    expected = torch.zeros_like(Z)
    for U in attn.bases():  # U: (d, p)
        P = U.T @ Z  # (p, N)
        scores = P.T @ P / cfg.p**0.5  # (N keys, N queries): column j is query j
        causal = torch.ones(6, 6, dtype=torch.bool).tril().T  # key i ≤ query j
        expected += U @ P @ torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=0)
    torch.testing.assert_close(out, expected)


def test_ista_step_equals_crate_formula_in_column_form():
    """ReLU(Z − η Dᵀ(D Z − Z) − η λ) with Z as columns (docs/paper.md §6)."""
    d, N = 6, 4
    rng = np.random.default_rng(2)
    cfg = ModelConfig(block="crate", n_embd=d, n_head=2, options={"ista_step": 0.1, "ista_lambda": 0.1})
    ista = ISTA(cfg).double()
    D = rng.standard_normal((d, d))
    with torch.no_grad():
        ista.dictionary.copy_(torch.from_numpy(D))
    Z = rng.standard_normal((d, N))
    expected = np.maximum(Z - 0.1 * D.T @ (D @ Z - Z) - 0.1 * 0.1, 0.0)
    out = ista(torch.from_numpy(Z.T))
    np.testing.assert_allclose(out.detach().numpy().T, expected, rtol=1e-10, atol=1e-12)


def _layer_norm_columns(Y: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LN(y) per column, affine g, b, eps 1e-5."""
    return (Y - Y.mean(axis=0)) / np.sqrt(Y.var(axis=0) + 1e-5) * g[:, None] + b[:, None]


def _crate_half_step(Y: np.ndarray, D: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """u = LN(y) per column and the ISTA step ReLU(u − η Dᵀ(D u − u) − η λ), η = λ = 0.1."""
    u = _layer_norm_columns(Y, g, b)
    return u, np.maximum(u - 0.1 * D.T @ (D @ u - u) - 0.1 * 0.1, 0.0)


def _run_crate_block(block: CrateBlock, rng: np.random.Generator, N: int, **weights: np.ndarray):
    """Set the block's sparse-coding weights (``weights``: parameter name under ``block.mlp`` → value) and a
    random LayerNorm affine, run N random tokens; returns (output, Y = the stream after attention, g, b), the
    matrices d × N. Y comes from the block's hook, so only the sparse-coding half is checked against it."""
    d = block.mlp_norm.weight.shape[0]
    g, b = rng.uniform(0.5, 1.5, d), rng.standard_normal(d) * 0.1
    with torch.no_grad():
        for name, value in weights.items():
            getattr(block.mlp, name).copy_(torch.from_numpy(value))
        block.mlp_norm.weight.copy_(torch.from_numpy(g))
        block.mlp_norm.bias.copy_(torch.from_numpy(b))
    seen = {}
    block.hook_resid_mid.register_forward_hook(lambda module, args, out: seen.update(mid=out))
    out = block(torch.from_numpy(rng.standard_normal((1, N, d))))[0].detach().numpy().T
    return out, seen["mid"][0].detach().numpy().T, g, b


@pytest.mark.parametrize("residual", [False, True])
def test_crate_block_replaces_or_increments_the_stream(residual):
    """CRATE's code: Z ← ISTA(LN(Y)); ista_residual: Z ← Y + ISTA(LN(Y)) − LN(Y), where Y = Z + MSSA(LN(Z)) is
    the block's stream after attention (taken from the module's hook, so only the ISTA half is checked here)."""
    d, N = 8, 5
    rng = np.random.default_rng(4)
    cfg = ModelConfig(block="crate", n_embd=d, n_head=2, tied_output=False, options={"ista_residual": residual})
    D = rng.standard_normal((d, d))
    out, Y, g, b = _run_crate_block(make_block(cfg).double(), rng, N, dictionary=D)
    u, step = _crate_half_step(Y, D, g, b)
    expected = Y + step - u if residual else step
    np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-11)
    if residual:  # the increment form keeps the stream: a zero ISTA displacement leaves Z as it was
        assert not np.allclose(out, step)


def test_ista_residual_is_for_crate_only():
    with pytest.raises(ConfigError, match="ista_residual"):
        ModelConfig.from_dict({"block": "aot-mssa", "ista_residual": True})


def test_crate_alpha_block_adds_two_overcomplete_ista_steps_to_the_stream():
    """CRATE-α (docs/paper.md, CRATE): with u = LN(Y) per column, a₁ = ReLU(η Dᵀu − ηλ),
    a₂ = ReLU(a₁ − η Dᵀ(D a₁ − u) − ηλ), Z = Y + D̂ a₂, for D, D̂ ∈ R^{d×4d}; the step costs 2·4·d² parameters."""
    d, N, C = 6, 5, 4
    rng = np.random.default_rng(7)
    cfg = ModelConfig(block="crate", n_embd=d, n_head=2, tied_output=False, options={"ista_expand": C})
    block = make_block(cfg).double()
    assert sum(p.numel() for p in block.mlp.parameters()) == 2 * C * d * d
    D, D_hat = rng.standard_normal((d, C * d)) * 0.5, rng.standard_normal((d, C * d))
    out, Y, g, b = _run_crate_block(block, rng, N, encoder=D, decoder=D_hat)
    u = _layer_norm_columns(Y, g, b)
    eta = lam = 0.1
    a1 = np.maximum(eta * D.T @ u - eta * lam, 0.0)
    a2 = np.maximum(a1 - eta * D.T @ (D @ a1 - u) - eta * lam, 0.0)
    assert (a2 > 0).any() and (a2 == 0).any()  # the shrinkage is active: the check sees both sides of the ReLU
    np.testing.assert_allclose(out, Y + D_hat @ a2, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            dict(block="aot-mssa", ista_expand=4),
            "ista_expand=4 is an option of block 'crate'; block='aot-mssa' has none",
        ),
        (dict(block="crate", ista_expand=4, ista_residual=True), "drop ista_residual"),
        (dict(block="crate", ista_expand=0), "ista_expand"),
    ],
)
def test_crate_alpha_options_are_checked(fields, message):
    with pytest.raises(ConfigError, match=message):
        ModelConfig.from_dict(fields)


def test_rotary_scores_depend_only_on_relative_position():
    rotary = Rotary(8).double()
    rng = np.random.default_rng(3)
    q, k = (torch.from_numpy(rng.standard_normal(8)) for _ in range(2))

    def score(s: int, t: int) -> float:
        qs = rotary(q.view(1, 1, 1, 8).expand(1, 1, s + 1, 8).contiguous())[0, 0, s]
        kt = rotary(k.view(1, 1, 1, 8).expand(1, 1, t + 1, 8).contiguous())[0, 0, t]
        return float(qs @ kt)

    assert score(5, 2) == pytest.approx(score(9, 6), rel=1e-12)
    assert score(5, 2) != pytest.approx(score(5, 3), rel=1e-6)
    # rotation keeps the norm (it is orthogonal)
    x = torch.from_numpy(rng.standard_normal((1, 1, 6, 8)))
    torch.testing.assert_close(rotary(x, offset=3).norm(dim=-1), x.norm(dim=-1))


def test_rotary_cached_tables_equal_the_direct_rotation():
    """The cached cos/sin tables (grown past their first size, first built under inference_mode) rotate
    exactly as the closed form x_i cos(t θ_i) - x_{i+p/2} sin(t θ_i) computed directly in float64."""
    p, theta = 8, 10000.0
    rotary = Rotary(p, theta)
    rng = np.random.default_rng(4)
    with torch.inference_mode():
        rotary(torch.zeros(1, 1, 3, p, dtype=torch.float64))  # first table (64 rows) made here
    x_np = rng.standard_normal((1, 2, 100, p))
    x = torch.from_numpy(x_np).requires_grad_()
    out = rotary(x, offset=30)  # needs 130 rows: the table grows; usable under autograd
    out.sum().backward()
    inv_freq = 1.0 / theta ** (np.arange(0, p, 2) / p)
    angles = np.outer(np.arange(30, 130), inv_freq)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x_np[..., : p // 2], x_np[..., p // 2 :]
    expected = np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert x.grad is not None


OPTION_GRID = [
    dict(task=task, block=b, tied_output=t, score_scale=s, position=pos)
    for task, b, t, s, pos in itertools.product(
        ["lm", "image"],
        ["aot-mssa", "aot-mhsa", "transformer", "crate", "llama"],
        [True, False],
        [True, False],
        ["learned", "rope"],
    )
    if (t or b in ("aot-mssa", "crate"))  # tied_output only means something for MSSA
    and not (task == "image" and pos == "rope")  # rotary positions are for sequences
]


@pytest.mark.parametrize("options", OPTION_GRID, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_fused_path_equals_reference_path(options):
    task = options["task"]
    cfg = ModelConfig(
        n_layer=2,
        n_embd=16,
        n_head=4,
        vocab_size=11,
        block_size=9,
        image_size=8,
        patch_size=4,
        in_chans=1,
        residual_scale="channel",
        **options,
    )
    torch.manual_seed(0)
    model = build_model(cfg).double().eval()
    x = torch.randint(0, 11, (2, 9)) if task == "lm" else torch.randn(2, 1, 8, 8, dtype=torch.float64)

    def run(reference: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        use_reference_attention(model, reference)
        model.zero_grad()
        out = model(x)
        out = out[0] if task == "lm" else out
        out.pow(2).mean().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    (fused, fused_grads), (reference, reference_grads) = run(False), run(True)
    torch.testing.assert_close(fused, reference, rtol=1e-10, atol=1e-12)
    assert len(fused_grads) == len(reference_grads) > 0
    for a, b in zip(fused_grads, reference_grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
