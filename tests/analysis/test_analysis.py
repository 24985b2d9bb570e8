"""aot.analysis: hooks sit on the tensors the forward uses, energies, SNR, coding rates, principal angles,
composition and induction scores — each against a direct computation or a planted, known answer (float64)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from aot.analysis.calibration import calibrate
from aot.analysis.circuits import (
    compositions,
    copying_scores,
    distance_from_uniform,
    head_scores,
    repeated_random_tokens,
    self_attention_share,
)
from aot.analysis.denoising import (
    claims,
    coding_rate,
    compression_term,
    energy_shares,
    layer_gain,
    orthonormal_bases,
    subspace_snr,
    token_snr,
)
from aot.analysis.geometry import orthogonality_gap, overlap, overlaps, pairwise_angles
from aot.analysis.heads import head_weights, model_heads
from aot.analysis.profile import layer_streams
from aot.analysis.vision import attention_entropy
from aot.cli import main
from aot.config import ModelConfig
from aot.models import build_model
from aot.theory import data as theory_data
from aot.theory.metrics import snr_per_cluster


def tiny_lm(block: str, n_layer: int = 2, seed: int = 0, **extra: object) -> torch.nn.Module:
    torch.manual_seed(seed)
    fields: dict = dict(block=block, n_layer=n_layer, n_embd=32, n_head=4, vocab_size=37, block_size=24, task="lm")
    fields.update(extra)
    return build_model(ModelConfig(**fields)).double().eval()


BLOCKS = ["aot-mssa", "aot-mhsa", "transformer"]


# -- hooks --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize(
    "hook",
    ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_post", "blocks.0.attn.hook_pattern", "blocks.1.attn.hook_z"],
)
def test_patching_a_hook_changes_the_output(block: str, hook: str) -> None:
    model = tiny_lm(block)
    idx = torch.randint(37, (2, 12), generator=torch.Generator().manual_seed(1))
    clean = model(idx)[0]
    with model.hooks([(hook, lambda t, h: t)]):  # returning the same tensor is a no-op
        same = model(idx)[0]
    with model.hooks([(hook, lambda t, h: t * 0.5)]):
        patched = model(idx)[0]
    torch.testing.assert_close(same, clean, rtol=1e-12, atol=1e-12)
    assert (patched - clean).abs().max() > 1e-6


def test_patching_the_subspace_hook_changes_an_mssa_output() -> None:
    model = tiny_lm("aot-mssa")
    idx = torch.randint(37, (2, 12), generator=torch.Generator().manual_seed(1))
    clean = model(idx)[0]
    with model.hooks([("blocks.0.attn.hook_subspace", lambda t, h: torch.zeros_like(t))]):
        patched = model(idx)[0]
    assert (patched - clean).abs().max() > 1e-6


@pytest.mark.parametrize("block", ["aot-mssa", "aot-mhsa"])
def test_head_weights_reproduce_the_hooked_projections(block: str) -> None:
    """The per-head W read by aot.analysis.heads times the normed stream equals what the forward computes."""
    model = tiny_lm(block, bias=False)
    idx = torch.randint(37, (2, 12), generator=torch.Generator().manual_seed(2))
    name = "blocks.1.attn.hook_subspace" if block == "aot-mssa" else "blocks.1.attn.hook_v"
    _, cache = model.run_with_cache(idx, names_filter=[name])
    z_in, _ = layer_streams(model, (idx,))[1]
    heads = model_heads(model)[1]
    expected = torch.einsum("btd,hpd->bhtp", z_in, heads.w_v)
    # hook_subspace is (B, H, T, p); hook_v has TransformerLens's layout (B, T, H, p)
    hooked = cache[name] if block == "aot-mssa" else cache[name].transpose(1, 2)
    torch.testing.assert_close(hooked, expected, rtol=1e-10, atol=1e-12)


def test_mssa_circuits_are_the_subspace_projectors() -> None:
    """MSSA: W_QK = U_k U_kᵀ, and with the tied output W_OV = U_k U_kᵀ too (docs/paper.md §2)."""
    model = tiny_lm("aot-mssa", tied_output=True)
    attn = model.backbone.blocks[0].attn
    heads = head_weights(attn)
    bases = attn.bases().double()
    projectors = bases @ bases.transpose(1, 2)
    torch.testing.assert_close(heads.qk(), projectors)
    torch.testing.assert_close(heads.ov(), projectors)


# -- energies, SNR, coding rates ------------------------------------------------------------------------


def projector(u: np.ndarray) -> np.ndarray:
    return u @ np.linalg.pinv(u)


def test_energy_shares_sum_to_one_when_the_subspaces_span_the_space() -> None:
    gen = torch.Generator().manual_seed(3)
    true = theory_data.orthonormal_bases(24, 6, 4, gen)  # K·p = d, mutually orthogonal
    mixing = torch.randn(4, 6, 6, generator=gen, dtype=torch.float64)
    learned = true @ mixing  # the same subspaces, neither orthonormal nor unit scale
    tokens = torch.randn(50, 24, generator=gen, dtype=torch.float64)
    shares = energy_shares(tokens, orthonormal_bases(learned))
    torch.testing.assert_close(shares.sum(dim=0), torch.ones(50, dtype=torch.float64))
    direct = np.stack([np.sum((tokens.numpy() @ projector(u.numpy()).T) ** 2, axis=1) for u in learned]) / np.sum(
        tokens.numpy() ** 2, axis=1
    )
    np.testing.assert_allclose(shares.numpy(), direct, rtol=1e-10)
    partial = energy_shares(tokens, orthonormal_bases(learned[:3]))  # three heads miss a quarter of R^d
    assert (partial.sum(dim=0) < 1 - 1e-6).all()


def test_subspace_snr_on_definition_1_data_equals_the_theorys_snr() -> None:
    sample = theory_data.sample_mixture(64, 8, 4, 40, delta=0.15, seed=4)
    shares = energy_shares(sample.tokens, orthonormal_bases(sample.bases))
    assert torch.equal(claims(shares), sample.labels)  # small δ: every token is claimed by its own head
    torch.testing.assert_close(
        subspace_snr(sample.tokens, orthonormal_bases(sample.bases)),
        snr_per_cluster(sample.tokens, sample.bases, sample.labels),
    )
    # per token: √(e/(1−e)) is the token's own ‖UUᵀz‖ / ‖(I − UUᵀ)z‖
    z, u = sample.tokens[0].numpy(), sample.bases[0].numpy()
    direct = np.linalg.norm(u @ u.T @ z) / np.linalg.norm(z - u @ u.T @ z)
    assert float(token_snr(shares)[0]) == pytest.approx(direct, rel=1e-10)


def test_subspace_snr_of_scaled_bases_matches_numpy() -> None:
    """Learned bases are not orthonormal: the SNR is taken in span(U_k) (direct: projector U U⁺)."""
    gen = torch.Generator().manual_seed(5)
    learned = torch.randn(3, 20, 4, generator=gen, dtype=torch.float64) * 3.0
    tokens = torch.randn(30, 20, generator=gen, dtype=torch.float64)
    labels = torch.arange(3).repeat(10)
    snr = subspace_snr(tokens, orthonormal_bases(learned), labels)
    for k in range(3):
        zk = tokens[labels == k].numpy().T  # columns
        proj = projector(learned[k].numpy())
        expected = np.linalg.norm(proj @ zk) / np.linalg.norm(zk - proj @ zk)
        assert float(snr[k]) == pytest.approx(expected, rel=1e-10)


def test_analysis_through_hooks_equals_the_theory_on_the_unrolled_denoiser() -> None:
    """Calibration: core MSSA blocks with the true bases, read through their hooks, give aot.theory's SNR."""
    result = calibrate(d=32, p=8, n_clusters=4, tokens_per_cluster=16, delta=0.2, eta=0.1, n_layers=3, batches=2)
    assert result["max_relative_difference"] < 1e-8
    assert all(row["coverage"] == pytest.approx(1.0) for row in result["profile"]["layers"])


def test_patched_threshold_calibration_recovers_theorem_1s_factor() -> None:
    """φ = h∘softmax patched into hook_pattern: the analysis equals the theory, and each layer's gain is 1 + ητ."""
    result = calibrate(
        d=128, p=32, tokens_per_cluster=32, delta=0.1, eta=0.055, n_layers=3, batches=1, phi="threshold", tau=0.8
    )
    assert result["max_relative_difference"] < 1e-8
    for row in result["profile"]["layers"]:
        assert row["gain"]["mean"] == pytest.approx(1 + 0.055 * 0.8, rel=1e-6)


def test_coding_rate_equals_its_closed_form() -> None:
    """Z with orthogonal columns (ZᵀZ = diag(s²)): R = ½ Σ_i ln(1 + d s_i²/(N ε²)), and R_c over coordinate
    blocks of p columns is ½ Σ_i ln(1 + p s_i²/(N ε²))."""
    n, d, p, eps = 12, 6, 2, 0.5
    gen = torch.Generator().manual_seed(6)
    q, _ = torch.linalg.qr(torch.randn(n, d, generator=gen, dtype=torch.float64))
    s = torch.tensor([3.0, 2.0, 1.5, 1.0, 0.5, 0.1], dtype=torch.float64)
    tokens = q * s  # (N, d), orthogonal columns with norms s
    expected = 0.5 * torch.log1p(d * s**2 / (n * eps**2)).sum()
    assert float(coding_rate(tokens, eps)) == pytest.approx(float(expected), rel=1e-12)
    axes = torch.eye(d, dtype=torch.float64).reshape(d, d // p, p).permute(1, 0, 2)  # (K, d, p) coordinate blocks
    expected_c = 0.5 * torch.log1p(p * s**2 / (n * eps**2)).sum()
    assert float(compression_term(tokens, axes, eps)) == pytest.approx(float(expected_c), rel=1e-12)
    # the same R from the N × N Gram matrix (Sylvester's determinant identity), batched
    gram_form = 0.5 * np.linalg.slogdet(np.eye(n) + d / (n * eps**2) * tokens.numpy() @ tokens.numpy().T)[1]
    assert float(coding_rate(tokens[None], eps)[0]) == pytest.approx(gram_form, rel=1e-12)


# -- geometry ---------------------------------------------------------------------------------------------


def test_principal_angles_agree_with_scipy() -> None:
    linalg = pytest.importorskip("scipy.linalg")
    gen = torch.Generator().manual_seed(7)
    a = torch.randn(3, 16, 4, generator=gen, dtype=torch.float64)
    b = torch.randn(2, 16, 4, generator=gen, dtype=torch.float64)
    b[1] = a[0] @ torch.randn(4, 4, generator=gen, dtype=torch.float64) + 1e-3 * b[1]  # nearly the same span
    angles = pairwise_angles(a, b)
    for i in range(3):
        for j in range(2):
            expected = np.sort(linalg.subspace_angles(a[i].numpy(), b[j].numpy()))
            np.testing.assert_allclose(angles[i, j].numpy(), expected, atol=1e-9)


def test_orthogonality_gap() -> None:
    gen = torch.Generator().manual_seed(8)
    orthogonal = theory_data.orthonormal_bases(32, 4, 5, gen)
    assert orthogonality_gap(orthogonal * 2.0) == pytest.approx(0.0, abs=1e-12)
    same = orthogonal[:1].expand(3, -1, -1) @ torch.randn(3, 4, 4, generator=gen, dtype=torch.float64)
    assert orthogonality_gap(same) == pytest.approx(1.0, rel=1e-9)
    random = torch.randn(4, 32, 4, generator=gen, dtype=torch.float64)
    pair_overlap = overlap(pairwise_angles(random, random))
    off = ~torch.eye(4, dtype=torch.bool)
    assert orthogonality_gap(random) == pytest.approx(math.sqrt(float(pair_overlap[off].mean())), rel=1e-9)


# -- circuits: a hand-built induction circuit ----------------------------------------------------------------

V, N_REP = 16, 8  # vocabulary, length of the repeated half
BETA = 50.0


def induction_model(planted: bool) -> torch.nn.Module:
    """2-layer attention-only MHSA LM, no norms. Planted: head 0.0 attends to the previous position and copies
    that token into a 'previous token' slot; head 1.0 matches the current token against that slot, so it
    attends to the token after the earlier occurrence of the current one (Olsson et al. 2022)."""
    T = 2 * N_REP
    d = V + T + V  # [token one-hot | position one-hot | previous-token one-hot]
    cfg = ModelConfig(
        block="aot-mhsa", n_layer=2, n_embd=d, n_head=2, vocab_size=V, block_size=T, task="lm", norm="none",
        final_norm=False, position="learned",
    )  # fmt: skip
    torch.manual_seed(9)
    model = build_model(cfg).double().eval()
    if not planted:
        return model
    p = cfg.head_dim
    scale = BETA * math.sqrt(p)  # undo the 1/√p of the scores
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        model.tok_embed.weight[:, :V] = torch.eye(V)
        model.pos_embed.weight[:, V : V + T] = torch.eye(T)
        l0, l1 = model.backbone.blocks[0].attn, model.backbone.blocks[1].attn
        q0, k0, v0 = l0.qkv_proj.weight.view(3, 2, p, d).unbind(0)
        for t in range(1, T):
            q0[0, t, V + t] = scale  # the query of position t ...
            k0[0, t, V + t - 1] = 1.0  # ... matches the key of position t − 1
        v0[0, torch.arange(V), torch.arange(V)] = 1.0  # value: the token
        l0.out_proj.weight[V + T + torch.arange(V), torch.arange(V)] = 1.0  # written to the prev slot
        q1, k1, v1 = l1.qkv_proj.weight.view(3, 2, p, d).unbind(0)
        q1[0, torch.arange(V), torch.arange(V)] = scale  # the current token ...
        k1[0, torch.arange(V), V + T + torch.arange(V)] = 1.0  # ... against the previous token of each key
        v1[0, torch.arange(V), torch.arange(V)] = 1.0
        l1.out_proj.weight[torch.arange(V), torch.arange(V)] = 3.0  # copy it to the output, above the current token
    return model


def test_induction_score_finds_a_planted_circuit_and_not_a_random_one() -> None:
    tokens = repeated_random_tokens(8, N_REP, V, torch.Generator().manual_seed(10))
    planted = head_scores(induction_model(planted=True), tokens)
    assert planted["previous_token"][0, 0] > 0.99
    assert planted["induction"][1, 0] > 0.9
    others = planted["induction"].clone()
    others[1, 0] = 0
    assert others.max() < 0.3
    random = head_scores(induction_model(planted=False), tokens)
    assert random["induction"].max() < 0.3 and random["previous_token"].max() < 0.6
    logits = induction_model(planted=True)(tokens)[0]  # the circuit predicts the repeated half
    assert (logits[:, N_REP:-1].argmax(-1) == tokens[:, N_REP + 1 :]).float().mean() > 0.8


def test_planted_induction_circuit_is_k_composition() -> None:
    heads = model_heads(induction_model(planted=True))
    scores = compositions(heads[0], heads[1])  # rows: later heads, columns: earlier heads
    assert scores["k"][0, 0] > 0.2
    assert scores["q"][0, 0] < 1e-12 and scores["v"][0, 0] < 1e-12
    assert scores["k"][1, 1] == 0.0  # silent heads compose with nothing


def test_composition_score_matches_direct_frobenius_norms() -> None:
    heads = model_heads(tiny_lm("aot-mhsa", n_layer=2))
    scores = compositions(heads[0], heads[1])
    ov = heads[0].ov()[3].numpy()
    later = {"q": heads[1].qk()[2].numpy().T, "k": heads[1].qk()[2].numpy(), "v": heads[1].ov()[2].numpy()}
    for kind, a in later.items():
        expected = np.linalg.norm(a @ ov) / (np.linalg.norm(a) * np.linalg.norm(ov))
        assert float(scores[kind][2, 3]) == pytest.approx(expected, rel=1e-9)


# -- vision -------------------------------------------------------------------------------------------------


def test_attention_entropy_extremes() -> None:
    uniform = torch.full((2, 3, 5, 5), 0.2, dtype=torch.float64)
    torch.testing.assert_close(attention_entropy(uniform), torch.full((3,), math.log(5), dtype=torch.float64))
    one_hot = torch.zeros(2, 3, 5, 5, dtype=torch.float64)
    one_hot[..., 0, 2] = 1.0
    torch.testing.assert_close(attention_entropy(one_hot), torch.zeros(3, dtype=torch.float64))


# -- the command ------------------------------------------------------------------------------------------


def test_analyze_command_writes_results_and_figures(tmp_path, capsys) -> None:
    corpus = tmp_path / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text(" ".join("".join(rng.choice(list("abcdefgh"), 5)) for _ in range(2000)))
    run = tmp_path / "run"
    model = tiny_lm("aot-mssa", n_layer=3, vocab_size=256)
    model.float().save_pretrained(run / "checkpoint")
    (run / "results.json").write_text(json.dumps({"config": {"data": {"corpus": str(corpus), "tokenizer": "bytes"}}}))
    out = tmp_path / "inside"
    code = main(["analyze", str(run), "--batches", "2", "--batch-size", "2", "--seq-len", "16", "--out", str(out)])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert len(results["denoising"]["layers"]) == 3
    assert np.array(results["circuits"]["induction"]).shape == (3, 4)
    for name in ("denoising", "circuits", "spectra", "geometry"):
        assert (out / f"{name}.png").stat().st_size > 1000
    assert "top induction head" in capsys.readouterr().out


def test_analyze_bad_run_dir_is_a_one_line_error(tmp_path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error:") and "checkpoint" in err and err.count("\n") == 1


def tiny_vit(block: str) -> torch.nn.Module:
    torch.manual_seed(11)
    cfg = ModelConfig(block=block, n_layer=2, n_embd=32, n_head=4, task="image", image_size=8, patch_size=2)
    return build_model(cfg).double().eval()


@pytest.mark.parametrize("block", ["aot-mssa", "transformer"])
def test_vision_analysis_reads_the_class_tokens_attention(block: str, tmp_path) -> None:
    from aot.analysis.analyze import analyze_vision
    from aot.analysis.figures import plot_all

    images = [torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(i), dtype=torch.float64) for i in (0, 1)]
    model = tiny_vit(block)
    results = analyze_vision(model, images)
    entropy = np.array(results["circuits"]["cls_attention_entropy"])
    assert entropy.shape == (2, 4)
    uniform = results["circuits"]["uniform_entropy"]
    assert uniform == pytest.approx(math.log(17))  # 16 patches + the class token
    assert (entropy <= uniform + 1e-9).all() and (entropy > 0.9 * uniform).all()  # std-0.02 init: near uniform
    _, cache = model.run_with_cache(images[0], names_filter="blocks.1.attn.hook_pattern")
    row = cache["blocks.1.attn.hook_pattern"][:, :, 0]
    direct = -(row * row.log()).sum(-1)
    np.testing.assert_allclose(attention_entropy(cache["blocks.1.attn.hook_pattern"]).numpy(), direct.mean(0).numpy())
    assert [p.stat().st_size > 1000 for p in plot_all(results, tmp_path, "vit")] == [True] * 4


def test_analyze_an_image_run(tmp_path) -> None:
    images = pytest.importorskip("aot.data.images")
    pytest.importorskip("sklearn")
    run = tmp_path / "run"
    tiny_vit("aot-mssa").float().save_pretrained(run / "checkpoint")
    (run / "results.json").write_text(json.dumps({"config": {"data": {"dataset": "digits", "val_size": 0.1}}}))
    assert images.is_available("digits")
    assert main(["analyze", str(run), "--batches", "2", "--batch-size", "4", "--out", str(tmp_path / "out")]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert np.array(results["circuits"]["cls_attention_entropy"]).shape == (2, 4)


def test_layer_gain_is_one_for_a_neutral_change_and_one_plus_eta_tau_for_theorem_1() -> None:
    """Claims from the input alone read a neutral change (isotropic noise) as a loss (regression to the mean),
    claims from the output as a gain; their geometric mean is ≈ 1. The thresholded step gives 1 + ητ."""
    gen = torch.Generator().manual_seed(12)
    bases = orthonormal_bases(torch.randn(4, 64, 8, generator=gen, dtype=torch.float64))
    tokens = torch.randn(4000, 64, generator=gen, dtype=torch.float64)
    changed = tokens + 0.5 * torch.randn(4000, 64, generator=gen, dtype=torch.float64)
    neutral = layer_gain(tokens, changed, bases)
    assert neutral.gain_input_claims < 0.97 and neutral.gain_output_claims > 1.03
    assert neutral.gain == pytest.approx(1.0, abs=0.01)
    sample = theory_data.sample_mixture(128, 32, 4, 64, delta=0.1, seed=13)
    from aot.theory.denoiser import mssa_step

    after = mssa_step(sample.tokens, sample.bases, eta=0.055, phi="threshold", tau=0.8)
    theorem = layer_gain(sample.tokens, after, orthonormal_bases(sample.bases))
    assert theorem.gain_input_claims == theorem.gain_output_claims == pytest.approx(1.044, rel=1e-6)


def test_mssa_q_and_k_composition_coincide() -> None:
    """An MSSA head's W_QK = U_kU_kᵀ is symmetric, so reading through its query or its key is the same."""
    heads = model_heads(tiny_lm("aot-mssa", n_layer=2, tied_output=False))
    scores = compositions(heads[0], heads[1])
    torch.testing.assert_close(scores["q"], scores["k"])
    assert not torch.allclose(scores["q"], scores["v"])


def test_analyze_bad_options_are_one_line_errors(tmp_path, capsys) -> None:
    assert main(["analyze", "--calibrate", "--batches", "0"]) == 2
    assert "analyze.batches=0 must be >= 1" in capsys.readouterr().err
    config = tmp_path / "analyze.yaml"
    config.write_text("analyze:\n  batchez: 4\n")
    assert main(["analyze", "--calibrate", "--config", str(config)]) == 2
    assert "did you mean 'batches'" in capsys.readouterr().err
    assert main(["analyze"]) == 2
    assert "give a RUN_DIR" in capsys.readouterr().err


def test_copying_score_of_the_direct_path_matches_numpy_and_signs() -> None:
    model = tiny_lm("aot-mhsa", n_layer=2)
    scores = copying_scores(model)
    assert scores is not None and scores.shape == (2, 4)
    w_e = model.tok_embed.weight.detach().numpy().T
    w_u = model.lm_head.weight.detach().numpy()
    eig = np.linalg.eigvals(w_u @ model_heads(model)[1].ov()[2].numpy() @ w_e)  # the V × V direct path
    assert float(scores[1, 2]) == pytest.approx(eig.real.sum() / np.abs(eig).sum(), rel=1e-6)
    attn = model.backbone.blocks[0].attn
    p = attn.head_dim
    with torch.no_grad():  # head 0 of layer 0: W_OV = +I on its p dims (copies), head 1: −I (suppresses)
        attn.qkv_proj.weight[64 : 64 + 2 * p] = 0
        attn.out_proj.weight[:, : 2 * p] = 0
        for i in range(p):
            attn.qkv_proj.weight[64 + i, i] = 1.0
            attn.out_proj.weight[i, i] = 1.0
            attn.qkv_proj.weight[64 + p + i, p + i] = 1.0
            attn.out_proj.weight[p + i, p + i] = -1.0
    scores = copying_scores(model)
    assert float(scores[0, 0]) == pytest.approx(1.0) and float(scores[0, 1]) == pytest.approx(-1.0)


def test_overlaps_without_angles_equal_mean_cos_squared() -> None:
    gen = torch.Generator().manual_seed(14)
    a = orthonormal_bases(torch.randn(3, 20, 5, generator=gen, dtype=torch.float64))
    b = orthonormal_bases(torch.randn(2, 20, 5, generator=gen, dtype=torch.float64))
    torch.testing.assert_close(overlaps(a, b), overlap(pairwise_angles(a, b)))


def test_self_attention_share_is_the_mean_diagonal_weight_from_position_one():
    """self_attention_share against a loop over batch, head and query (float64): the weight each query puts on
    its own position, averaged over the batch and the positions from `first` on; uniform causal attention gives
    the mean of 1/(t+1)."""
    torch.manual_seed(0)
    B, H, T = 3, 2, 7
    scores = torch.randn(B, H, T, T, dtype=torch.float64).masked_fill(~torch.ones(T, T).tril().bool(), -math.inf)
    pattern = scores.softmax(-1)
    expected = torch.tensor(
        [sum(float(pattern[b, h, t, t]) for b in range(B) for t in range(1, T)) / (B * (T - 1)) for h in range(H)],
        dtype=torch.float64,
    )
    torch.testing.assert_close(self_attention_share(pattern), expected, rtol=1e-12, atol=0)
    uniform = torch.ones(T, T, dtype=torch.float64).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(B, H, T, T)
    assert self_attention_share(uniform).tolist() == pytest.approx(
        [sum(1 / (t + 1) for t in range(1, T)) / (T - 1)] * H
    )
    assert self_attention_share(pattern, first=0).tolist() != self_attention_share(pattern).tolist()


def test_icl_attention_distance_from_uniform():
    """distance_from_uniform: 0 for uniform causal attention; for attention all on the first key, the
    total-variation distance 1 − 1/(t+1) of query t, averaged over t = 1 … T−1."""
    T = 6
    uniform = torch.ones(T, T, dtype=torch.float64).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(2, 3, T, T)
    assert distance_from_uniform(uniform) == pytest.approx(0.0, abs=1e-12)
    first = torch.zeros(2, 3, T, T, dtype=torch.float64)
    first[..., 0] = 1.0
    expected = sum(1 - 1 / (t + 1) for t in range(1, T)) / (T - 1)
    assert distance_from_uniform(first) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("n_head", "undefined"), [(1, True), (2, False)])
def test_one_head_spanning_the_width_has_no_subspace_snr(n_head: int, undefined: bool) -> None:
    """With head_dim = n_embd the head's subspace is the whole space: nothing lies outside it, so SNR_k divides by
    rounding error; the profile says so instead of reporting 1e15."""
    from aot.analysis.profile import denoising_profile

    model = tiny_lm("aot-mssa", n_head=n_head).eval()
    profile = denoising_profile(model, [(torch.randint(0, 13, (2, 8)),)])
    assert ("snr_undefined" in profile) is undefined
    assert [layer.get("snr_defined", True) for layer in profile["layers"]] == [not undefined] * 2
    if not undefined:
        assert all(
            math.isfinite(layer["snr_in"]["mean"]) and layer["snr_in"]["mean"] < 1e6 for layer in profile["layers"]
        )
