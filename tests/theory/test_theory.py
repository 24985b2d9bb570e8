"""Theory (docs/paper.md §1–3): Definition 1 sampler, SNR, the unrolled step, Theorem 1's factor and conditions,
each against a direct NumPy computation or an exact property (float64, small sizes, fixed seeds)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from aot.cli import main
from aot.config import ModelConfig
from aot.errors import AotError, ConfigError
from aot.nn.attention import MultiHeadSubspaceSelfAttention
from aot.theory.conditions import check_conditions, min_head_dim, tau_upper_bound
from aot.theory.config import SweepConfig, load_settings
from aot.theory.data import orthonormal_bases, sample_mixture
from aot.theory.denoiser import hard_threshold, mssa_step, threshold_events, unroll
from aot.theory.experiment import measure, run_trajectory
from aot.theory.metrics import layer_factors, match_heads, principal_angles, snr_per_cluster, snr_trajectory
from aot.theory.sweeps import sweep_point

# -- direct NumPy versions of the paper's formulas (tokens as COLUMNS, as in docs/paper.md) -------------------


def np_snr(Z: np.ndarray, U: np.ndarray) -> float:
    """‖U Uᵀ Z‖_F / ‖(I − U Uᵀ) Z‖_F for Z (d × N_k)."""
    P = U @ U.T
    return float(np.linalg.norm(P @ Z) / np.linalg.norm((np.eye(len(P)) - P) @ Z))


def np_phi(S: np.ndarray, tau: float | None) -> np.ndarray:
    """φ column-wise: softmax of each column, then h(x) = τ·1{x > τ} when τ is given."""
    E = np.exp(S - S.max(axis=0, keepdims=True))
    W = E / E.sum(axis=0, keepdims=True)
    return W if tau is None else tau * (tau < W)


def np_step(Z: np.ndarray, bases: list[np.ndarray], eta: float, tau: float | None) -> np.ndarray:
    """Z⁺ = Z + η Σ_k U_k U_kᵀ Z φ(Zᵀ U_k U_kᵀ Z), Z is d × N."""
    out = Z.copy()
    for U in bases:
        out += eta * U @ U.T @ Z @ np_phi(Z.T @ U @ U.T @ Z, tau)
    return out


# -- Definition 1 --------------------------------------------------------------------------------------


def test_bases_are_orthonormal_and_seeded():
    bases = orthonormal_bases(20, 3, 4, torch.Generator().manual_seed(1))
    stacked = torch.cat(list(bases), dim=1)  # (d, K·p)
    assert torch.allclose(stacked.T @ stacked, torch.eye(12, dtype=torch.float64), atol=1e-12)
    again = orthonormal_bases(20, 3, 4, torch.Generator().manual_seed(1))
    assert torch.equal(bases, again)
    assert not torch.allclose(bases, orthonormal_bases(20, 3, 4, torch.Generator().manual_seed(2)))


def test_sampler_statistics():
    """Signal variance 1 in its own subspace, δ² in the others, nothing outside the span (d > K·p)."""
    d, p, K, n, delta = 16, 3, 3, 6000, 0.3
    s = sample_mixture(d, p, K, n, delta, seed=0)
    assert s.tokens.shape == (K * n, d) and torch.equal(torch.bincount(s.labels), torch.full((K,), n))
    span = torch.cat(list(s.bases), dim=1)
    outside = s.tokens - s.tokens @ span @ span.T
    assert outside.abs().max() < 1e-12
    for k in range(K):
        z = s.tokens[s.labels == k]
        for j in range(K):
            coeffs = (z @ s.bases[j]).numpy()  # (n, p)
            cov = np.cov(coeffs, rowvar=False)
            expected = 1.0 if j == k else delta**2
            assert np.abs(coeffs.mean(axis=0)).max() < 4 * math.sqrt(expected / n)
            np.testing.assert_allclose(np.diag(cov), expected, rtol=0.08)
            assert np.abs(cov - np.diag(np.diag(cov))).max() < 0.08 * expected
        # the signal is exactly the part in the own subspace
        own = z @ s.bases[k] @ s.bases[k].T
        torch.testing.assert_close(s.signal[s.labels == k], own, atol=1e-12, rtol=0)


def test_sampler_is_seeded_and_checks_sizes():
    a = sample_mixture(12, 2, 3, 5, 0.2, seed=7)
    b = sample_mixture(12, 2, 3, 5, 0.2, seed=7)
    assert torch.equal(a.tokens, b.tokens)
    assert not torch.equal(a.tokens, sample_mixture(12, 2, 3, 5, 0.2, seed=8).tokens)
    with pytest.raises(AotError, match="d >= K\\*p"):
        sample_mixture(5, 2, 3, 5, 0.2)
    with pytest.raises(AotError, match="delta"):
        sample_mixture(12, 2, 3, 5, -1.0)


# -- SNR and the step ----------------------------------------------------------------------------------


def test_snr_matches_numpy():
    s = sample_mixture(14, 3, 4, 9, 0.4, seed=3)
    snr = snr_per_cluster(s.tokens, s.bases, s.labels)
    for k in range(4):
        Z = s.tokens[s.labels == k].numpy().T  # d × N_k, columns are tokens
        assert snr[k].item() == pytest.approx(np_snr(Z, s.bases[k].numpy()), rel=1e-12)
    # Definition 1 in expectation: SNR ≈ 1 / (δ √(K − 1))
    big = sample_mixture(32, 8, 4, 500, 0.4, seed=0)
    assert snr_per_cluster(big.tokens, big.bases, big.labels).mean() == pytest.approx(
        1 / (0.4 * math.sqrt(3)), rel=0.03
    )


@pytest.mark.parametrize("tau", [None, 0.6, 0.3])
def test_step_matches_paper_formula_in_numpy(tau):
    """Rows-as-tokens implementation against the paper's columns-as-tokens formula, both φ."""
    s = sample_mixture(10, 3, 3, 4, 0.3, seed=5)
    tokens = s.tokens * 1.7  # sharper softmax, so the threshold keeps some and drops some entries
    phi = "softmax" if tau is None else "threshold"
    ours = mssa_step(tokens, s.bases, 0.3, phi, tau)
    ref = np_step(tokens.numpy().T, list(s.bases.numpy()), 0.3, tau).T
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_hard_threshold():
    x = torch.tensor([0.2, 0.5, 0.50001, 0.9])
    assert hard_threshold(x, 0.5).tolist() == [0.0, 0.0, 0.5, 0.5]


def test_plain_softmax_step_equals_core_mssa_float64():
    """The core's MSSA (tied output, no score scale, not causal) with [U_1 … U_K]ᵀ loaded is the same step."""
    d, p, K = 12, 3, 4
    s = sample_mixture(d, p, K, 5, 0.3, seed=11)
    cfg = ModelConfig(
        block="aot-mssa",
        n_embd=d,
        n_head=K,
        head_dim=p,
        tied_output=True,
        score_scale=False,
        causal=False,
        position="none",
        norm="none",
    )
    attn = MultiHeadSubspaceSelfAttention(cfg).double()
    assert not attn.causal
    with torch.no_grad():
        attn.subspace_proj.weight.copy_(torch.cat([U.T for U in s.bases]))  # (K·p, d)
    torch.testing.assert_close(attn.bases(), s.bases)
    batch = torch.stack([s.tokens, 2 * s.tokens])  # (B, T, d)
    core = batch + 0.4 * attn(batch)
    ours = mssa_step(batch, s.bases, 0.4, "softmax")
    torch.testing.assert_close(core, ours, atol=1e-12, rtol=1e-12)


def test_unroll_and_run_trajectory_agree():
    s = sample_mixture(16, 4, 4, 8, 0.2, seed=2)
    traj = unroll(s.tokens, s.bases, 0.2, 3, "threshold", 0.7)
    assert len(traj) == 4
    measured = run_trajectory(s, 0.2, 3, "threshold", 0.7)
    torch.testing.assert_close(measured.snr, snr_trajectory(traj, s.bases, s.labels))
    per_layer = unroll(s.tokens, s.bases.expand(3, -1, -1, -1), 0.2, 3, "threshold", 0.7)
    torch.testing.assert_close(per_layer[-1], traj[-1])
    with pytest.raises(AotError, match="tau"):
        unroll(s.tokens, s.bases, 0.2, 3, "threshold", None)


# -- Theorem 1 -----------------------------------------------------------------------------------------

INSIDE = dict(p=24, n_clusters=2, tokens_per_cluster=64, delta=0.1, eta=0.1, tau=0.7, n_layers=5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_factor_is_one_plus_eta_tau_inside_the_conditions(seed):
    run = measure(**INSIDE, seed=seed)
    assert run.conditions.holds and run.conditions.holds_through_layers
    factors = run.trajectory.factors
    assert factors.shape == (5, 2)
    assert (factors / (1 + 0.1 * 0.7) - 1).abs().max() < 0.02


def test_factor_is_exact_when_both_events_hold():
    """When every token keeps itself in its own head and every other head is zeroed, the signal is scaled by
    exactly 1 + ητ and the noise is untouched (the mechanism of the proof)."""
    s = sample_mixture(80, 40, 2, 64, 0.1, seed=0)
    tokens = s.tokens
    for _ in range(3):
        events = threshold_events(tokens, s.bases, s.labels, 0.7)
        assert events["both"] == 1.0
        nxt = mssa_step(tokens, s.bases, 0.1, "threshold", 0.7)
        signal = torch.stack([tokens[i] @ s.bases[k] @ s.bases[k].T for i, k in enumerate(s.labels.tolist())])
        torch.testing.assert_close(nxt, tokens + 0.07 * signal, atol=1e-12, rtol=0)
        before = snr_per_cluster(tokens, s.bases, s.labels)
        after = snr_per_cluster(nxt, s.bases, s.labels)
        torch.testing.assert_close(after / before, torch.full((2,), 1.07, dtype=torch.float64), atol=1e-12, rtol=0)
        tokens = nxt


def test_factor_departs_outside_the_conditions():
    """Large δ: the check fails and so does the factor (noise heads keep weights above τ)."""
    run = measure(**{**INSIDE, "delta": 0.6}, seed=0)
    assert not run.conditions.holds
    assert run.trajectory.max_relative_deviation > 0.02
    assert run.trajectory.events[0]["other_heads_zeroed"] < 0.5
    # small p: outside the conditions and the rate is lost too
    small_p = measure(**{**INSIDE, "p": 4}, seed=0)
    assert not small_p.conditions.p_ok and small_p.trajectory.max_relative_deviation > 0.02
    # plain softmax does not give 1 + η
    soft = measure(**{**INSIDE, "phi": "softmax"}, seed=0)
    assert soft.trajectory.max_relative_deviation > 0.02


def test_large_step_breaks_the_rate_through_the_layers():
    """The paper's conditions do not involve η, but a large ητ grows the signal so fast that later layers'
    noise heads keep weights above τ: our through-the-layers check flags it, and the factor departs."""
    run = measure(**{**INSIDE, "eta": 3.0, "tau": 0.7, "n_layers": 4}, seed=0)
    assert run.conditions.holds and not run.conditions.holds_through_layers
    assert run.trajectory.max_relative_deviation > 0.02


# -- the condition check --------------------------------------------------------------------------------


def test_condition_bounds_match_formulas():
    c = check_conditions(p=32, n_tokens=1024, delta=0.2, tau=0.8)
    assert c.p_min == pytest.approx(32 / 9 * math.log(1024))
    assert c.tau_max == pytest.approx(1 / (1 + 1024 * math.exp(-9 * 32 / 32)))
    assert c.delta_max == pytest.approx(math.sqrt(math.log(1024) / 32))
    assert c.holds and c.failures() == []


def test_tau_interval_nonempty_exactly_when_p_exceeds_32_9_ln_n():
    for n in (10, 100, 1000, 5000):
        boundary = min_head_dim(n)
        below, above = math.floor(boundary), math.floor(boundary) + 1
        assert tau_upper_bound(below, n) <= 0.5 < tau_upper_bound(above, n)
        assert not check_conditions(below, n, 0.0, 0.5 + 1e-9).tau_interval_nonempty
        assert check_conditions(above, n, 0.0, 0.5 + 1e-9).tau_interval_nonempty


def test_condition_check_fails_each_way():
    base = dict(p=32, n_tokens=1024, delta=0.2, tau=0.8)
    assert not check_conditions(**{**base, "tau": 0.5}).tau_ok  # 1/2 excluded
    assert check_conditions(**{**base, "tau": tau_upper_bound(32, 1024)}).tau_ok  # upper end included
    assert not check_conditions(**{**base, "tau": 0.95}).tau_ok
    assert not check_conditions(**{**base, "delta": 0.5}).delta_ok
    assert check_conditions(**{**base, "delta": 0.5}, delta_constant=2.0).delta_ok
    small = check_conditions(**{**base, "p": 16})
    assert not small.p_ok and not small.tau_interval_nonempty and not small.holds
    assert any("32/9" in f for f in small.failures())
    layered = check_conditions(**base, eta=0.5, n_layers=6)
    assert layered.delta_last_layer == pytest.approx(0.2 * 1.4**5)
    assert layered.holds and not layered.layers_ok and not layered.holds_through_layers
    with pytest.raises(AotError):
        check_conditions(p=0, n_tokens=10, delta=0.1, tau=0.6)


# -- metrics -------------------------------------------------------------------------------------------


def test_principal_angles_known_values():
    e = torch.eye(4, dtype=torch.float64)
    assert principal_angles(e[:, :2], e[:, :2]).abs().max() < 1e-7
    np.testing.assert_allclose(principal_angles(e[:, :2], e[:, 2:]).numpy(), [math.pi / 2] * 2)
    theta = 0.3
    rotated = torch.stack([e[:, 0], math.cos(theta) * e[:, 1] + math.sin(theta) * e[:, 2]], dim=1)
    np.testing.assert_allclose(principal_angles(e[:, :2], 5 * rotated).numpy(), [0.0, theta], atol=1e-7)


def test_match_heads_recovers_a_permutation():
    true = orthonormal_bases(24, 3, 5, torch.Generator().manual_seed(0))
    perm = [3, 0, 4, 1, 2]  # head h holds cluster perm[h]
    learned = true[perm] * 2.0 + 0.01 * torch.randn(5, 24, 3, dtype=torch.float64)
    match = match_heads(learned, true)
    assert [perm[h] for h in match] == list(range(5))


def test_layer_factors():
    snrs = torch.tensor([[1.0, 2.0], [1.5, 3.0], [3.0, 3.0]])
    torch.testing.assert_close(layer_factors(snrs), torch.tensor([[1.5, 1.5], [2.0, 1.0]]))


# -- sweeps, config and the command --------------------------------------------------------------------


def test_sweep_point_records_deviation_and_conditions():
    cfg = SweepConfig(p=24, n_clusters=2, tokens_per_cluster=32, n_layers=3, seeds=1, eta=0.1, tau=0.7, delta=0.1)
    inside = sweep_point(cfg)
    outside = sweep_point(cfg, tau=0.1, delta=0.5)
    assert inside["conditions_hold"] and inside["max_relative_deviation"] < 0.02
    assert inside["rate_ratio"] == pytest.approx(1.0, abs=0.05)
    assert not outside["conditions_hold"] and outside["rate_ratio"] < 0.9


def test_config_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("denoise:\n  etta: 0.1\n")
    with pytest.raises(ConfigError, match="did you mean 'eta'"):
        load_settings(bad)
    bad.write_text("denoize: {}\n")
    with pytest.raises(ConfigError, match="unknown section"):
        load_settings(bad)


TINY = """\
denoise:
  p: 24
  n_clusters: 2
  tokens_per_cluster: 32
  deltas: [0.1, 0.6]
  eta: 0.1
  tau: 0.7
  n_layers: 3
sweep:
  p: 24
  n_clusters: 2
  tokens_per_cluster: 16
  n_layers: 2
  seeds: 1
  tau: 0.7
  deltas: [0.1, 0.6]
  taus: [0.3, 0.7]
  ps: [4, 24]
  tokens_per_cluster_grid: [8, 16]
  etas: [0.1, 1.0]
"""


def test_denoise_command_writes_results_and_figures(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    out = tmp_path / "out"
    assert main(["denoise", "--config", str(config), "--out", str(out), "--device", "cpu"]) == 0
    results = json.loads((out / "results.json").read_text())
    summary = {r["delta"]: r for r in results["main"]["summary"]}
    assert summary[0.1]["conditions_hold"] and summary[0.1]["within_tolerance"]
    assert not summary[0.6]["conditions_hold"]
    rows = results["main"]["per_layer"]
    assert len(rows) == 2 * 4 * 2  # δ × (L + 1) × K
    assert {"snr", "factor", "predicted_factor", "conditions_hold"} <= set(rows[0])
    assert set(results["sweeps"]) == {"delta_tau", "p_n", "eta", "softmax_delta"}
    for name in ("snr_per_layer.png", "factors_per_layer.png", "sweep_heatmaps.png", "phi_eta.png", "results.md"):
        assert (out / name).stat().st_size > 0
    assert "d=48, p=24, K=2, N=64" in (out / "results.md").read_text()
    captured = capsys.readouterr()
    assert "δ=0.1 (inside the conditions through all 3 layers)" in captured.out
    assert "δ=0.6 (outside the paper's conditions)" in captured.out
    assert "sweeps: 100%" in captured.err  # progress on stderr


def test_a_delta_failing_the_through_layers_check_is_not_called_inside():
    from aot.theory.tables import condition_status

    assert condition_status(True, True, 13) == "inside the conditions through all 13 layers"
    status = condition_status(True, False, 13)  # δ = 0.3 of the recorded main run
    assert "outside them by layer 13" in status and not status.startswith("inside the conditions")
    assert condition_status(False, False, 13) == "outside the paper's conditions"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tau", "1.5"], "tau"),
        (["--clusters", "8", "--dim", "16"], "d >= K\\*p"),
        (["--threads", "0"], "threads"),
    ],
)
def test_denoise_command_bad_input_is_one_line(tmp_path, capsys, argv, message):
    assert main(["denoise", "--no-sweeps", "--out", str(tmp_path), "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("aot: error:") and len(err.strip().splitlines()) == 1
    import re

    assert re.search(message, err)
