"""Learned bases (beyond the paper): the unrolled core MSSA with per-layer bases trained by backprop."""

from __future__ import annotations

import json

import pytest
import torch

from aot.cli import main
from aot.theory.config import LearnConfig
from aot.theory.data import orthonormal_bases, sample_mixture
from aot.theory.denoiser import unroll
from aot.theory.learned import UnrolledMSSA, alignment, denoising_loss, energy_fractions, train_learned

TINY = LearnConfig(
    p=4, n_clusters=2, tokens_per_cluster=6, delta=0.3, n_layers=2, steps=3, batch_size=2, eval_samples=2
)


def test_unrolled_core_mssa_equals_theory_unroll():
    """Core MSSA layers loaded with per-layer bases compute the theory's plain-softmax unroll."""
    d, p, K, L = 12, 3, 3, 3
    model = UnrolledMSSA(d, p, K, L, eta=0.5, generator=torch.Generator().manual_seed(0)).double()
    per_layer = torch.stack([orthonormal_bases(d, p, K, torch.Generator().manual_seed(s)) * 1.3 for s in range(L)])
    for layer, bases in zip(model.mssa_layers(), per_layer):
        UnrolledMSSA.set_bases(layer, bases)
    torch.testing.assert_close(model.bases(), per_layer)
    s = sample_mixture(d, p, K, 4, 0.3, seed=1)
    ours = unroll(s.tokens, per_layer, 0.5, L, "softmax")
    core = model(s.tokens[None])
    for a, b in zip(ours, core):
        torch.testing.assert_close(b[0], a, atol=1e-12, rtol=1e-12)


def test_denoising_loss_and_alignment_of_true_bases():
    s = sample_mixture(16, 4, 3, 10, 0.3, seed=0)
    assert float(denoising_loss(3.0 * s.signal, s.signal)) == pytest.approx(0.0, abs=1e-12)
    share = s.noise.pow(2).sum() / s.tokens.pow(2).sum()  # signal ⟂ noise: 1 − cos² = noise share
    assert float(denoising_loss(s.tokens, s.signal)) == pytest.approx(float(share), rel=1e-9)
    torch.testing.assert_close(energy_fractions(2 * s.bases[1], s.bases), torch.tensor([0.0, 1.0, 0.0]).double())
    rows = alignment(s.bases[[2, 0, 1]][None] * 0.5, s.bases)
    assert rows[0]["energy_in_nearest"] == pytest.approx(1.0)
    assert rows[0]["mean_angle_to_nearest_deg"] < 1e-3 and rows[0]["matched_head_for_cluster"] == [1, 2, 0]
    assert rows[0]["clusters_covered"] == 3


def test_train_learned_tiny_runs():
    result = train_learned(TINY, seed=0)
    assert len(result["train_loss"]) == 3 and all(torch.isfinite(torch.tensor(result["train_loss"])))
    for key in ("before", "after"):
        assert len(result[key]["snr"]) == TINY.n_layers + 1 and len(result[key]["alignment"]) == TINY.n_layers


def test_denoise_learn_command_over_seeds(tmp_path, capsys):
    config = tmp_path / "learn.yaml"
    config.write_text(
        "learn:\n  p: 4\n  n_clusters: 2\n  tokens_per_cluster: 6\n  n_layers: 2\n  steps: 2\n"
        "  batch_size: 2\n  eval_samples: 2\n"
    )
    argv = ["denoise", "--learn", "--seeds", "3", "--config", str(config), "--out", str(tmp_path), "--device", "cpu"]
    assert main(argv) == 0
    result = json.loads((tmp_path / "learned" / "results.json").read_text())
    assert result["config"]["steps"] == 2 and (tmp_path / "learned" / "learned_bases.png").stat().st_size > 0
    assert [run["seed"] for run in result["runs"]] == [0, 1, 2] == result["summary"]["seeds"]
    angles = [run["after"]["alignment"][0]["mean_angle_to_nearest_deg"] for run in result["runs"]]
    spread = result["summary"]["angle_deg_per_layer"][0]
    assert spread["mean"] == pytest.approx(sum(angles) / 3)
    assert spread["std"] == pytest.approx(float(torch.tensor(angles, dtype=torch.float64).std()))
    assert spread["min"] == min(angles) and spread["max"] == max(angles)
    table = (tmp_path / "learned" / "results.md").read_text()
    assert "d=8, p=4, K=2, N=12" in table and "Over 3 seed(s) (0, 1, 2)" in table
    assert "learn seed 2" in capsys.readouterr().err  # a progress bar per seed


@pytest.fixture
def one_thread():
    """The experiment is many small operations: one thread avoids thread-sync overhead on a shared CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_learned_bases_align_and_denoise(one_thread):
    """The default experiment: after training, SNR rises at every layer, the loss falls well below its value at
    the input, and at least one layer's active heads lie (almost) inside true subspaces."""
    result = train_learned(LearnConfig(), seed=0)
    after = result["after"]
    snr = torch.tensor(after["snr"]).mean(dim=1)
    assert (snr[1:] > snr[:-1]).all()
    assert after["loss_per_layer"][-1] < 0.8 * after["loss_per_layer"][0]
    best = max(after["alignment"], key=lambda r: r["energy_in_nearest"])
    assert best["energy_in_nearest"] > 0.9 and best["mean_angle_to_nearest_deg"] < 20
    before = result["before"]["alignment"]
    assert max(r["energy_in_nearest"] for r in before) < 0.5  # random init: about p/d = 0.25
