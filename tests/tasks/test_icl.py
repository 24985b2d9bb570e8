"""In-context regression (Garg et al. 2022): prompts, curriculum, baselines against closed forms, bootstrap bands,
the prompt layout, a short training run and `aot train icl` / `aot eval icl`, and bad input."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from aot.cli import main
from aot.config import ModelConfig
from aot.data.icl import Curriculum, ICLBatches, ICLDataConfig, ICLSampler, eval_prompts
from aot.errors import AotError, ConfigError
from aot.eval.icl import (
    averaging,
    bootstrap_band,
    lasso,
    least_squares,
    model_predictions,
    nearest_neighbours,
    squared_errors,
)
from aot.models import build_model


def test_noiseless_least_squares_error_is_d_minus_k_over_d_then_zero():
    d = 6
    prompts = eval_prompts(ICLDataConfig(task="linear", n_dims=d, n_points=2 * d + 1), n_prompts=4000)
    errors = squared_errors(least_squares(prompts.xs, prompts.ys), prompts.ys, prompts.error_scale).mean(0)
    for k in range(d):  # the minimum-norm solution misses the d − k directions no example has seen
        assert abs(float(errors[k]) - (d - k) / d) < 0.06, (k, float(errors[k]))
    assert float(errors[d:].max()) < 1e-18  # from k = d examples on, w is determined


def test_curriculum_follows_garg_schedule():
    dims = Curriculum(start=5, end=20, inc=1, interval=2000)
    assert [dims.at(s) for s in (0, 1999, 2000, 4000, 29_999, 30_000, 10**6)] == [5, 5, 6, 7, 19, 20, 20]
    cfg = ICLDataConfig(
        n_dims=6, n_points=13, dims_start=2, points_start=5, dims_inc=1, points_inc=2, curriculum_interval=10
    )
    batches = ICLBatches(cfg, batch_size=8)
    for step, (n_dims, n_points) in {0: (2, 5), 9: (2, 5), 10: (3, 7), 25: (4, 9), 1000: (6, 13)}.items():
        xs, ys = batches.get(step)
        assert xs.shape == (8, n_points, 6) and ys.shape == (8, n_points)
        assert torch.all(xs[..., n_dims:] == 0) and torch.all(xs[..., :n_dims] != 0)  # inactive dims are zero
    xs, _ = ICLBatches(ICLDataConfig(n_dims=6, n_points=13, curriculum=False), 4).get(0)
    assert xs.shape == (4, 13, 6) and torch.all(xs != 0)


def test_batches_are_a_function_of_the_step():
    batches = ICLBatches(ICLDataConfig(n_dims=4, n_points=9), batch_size=8, seed=3)
    xs, ys = batches.get(7)
    again = ICLBatches(ICLDataConfig(n_dims=4, n_points=9), batch_size=8, seed=3).get(7)  # a resumed run
    assert torch.equal(xs, again[0]) and torch.equal(ys, again[1])
    part = batches.get(7, 2, 5)
    assert torch.equal(part[0], xs[2:5]) and torch.equal(part[1], ys[2:5])
    assert not torch.equal(batches.get(8)[0], xs)


def test_tasks_draw_the_right_functions():
    gen = torch.Generator().manual_seed(0)
    sparse = ICLSampler(ICLDataConfig(task="sparse", n_dims=8, n_points=17, sparsity=3)).sample(50, 17, 8, gen)
    assert torch.all((sparse.ws != 0).sum(1) == 3) and sparse.error_scale == 3
    torch.testing.assert_close(sparse.ys, torch.einsum("bnd,bd->bn", sparse.xs, sparse.ws))
    noisy = ICLSampler(ICLDataConfig(task="noisy", n_dims=8, n_points=17, noise_std=0.5)).sample(2000, 17, 8, gen)
    residual = noisy.ys - torch.einsum("bnd,bd->bn", noisy.xs, noisy.ws)
    assert abs(float(residual.std()) - 0.5) < 0.01
    pooled = ICLSampler(ICLDataConfig(n_dims=4, n_points=9, pool_size=5)).sample(200, 9, 4, gen)
    assert len(torch.unique(pooled.ws, dim=0)) == 5


def test_out_of_distribution_x():
    cfg = ICLDataConfig(n_dims=5, n_points=11)
    gen = torch.Generator().manual_seed(0)
    scaled = ICLSampler(cfg, "scaled", x_scale=3.0).sample(2000, 11, 5, gen)
    assert abs(float(scaled.xs.std()) - 3.0) < 0.05
    skewed_sampler = ICLSampler(cfg, "skewed")
    skewed = skewed_sampler.sample(20_000, 11, 5, gen).xs.reshape(-1, 5)
    eigenvalues = torch.linalg.eigvalsh(skewed.T @ skewed / len(skewed)).flip(0)
    expected = 1 / torch.arange(1, 6, dtype=torch.float64) ** 2
    torch.testing.assert_close(eigenvalues, expected * 5 / expected.sum(), rtol=0.05, atol=0.01)
    orthant = ICLSampler(cfg, "orthant").sample(100, 11, 5, gen).xs
    signs = orthant.sign()
    assert torch.all(signs == signs[:, :1])  # every x of a prompt in the prompt's orthant
    assert len(torch.unique(signs[:, 0], dim=0)) > 10  # the orthant differs between prompts


def test_averaging_and_nearest_neighbours_match_their_definitions():
    torch.manual_seed(0)
    xs, ys = torch.randn(3, 7, 4, dtype=torch.float64), torch.randn(3, 7, dtype=torch.float64)
    avg, knn = averaging(xs, ys), nearest_neighbours(xs, ys, k=3)
    for b in range(3):
        assert avg[b, 0] == 0 and knn[b, 0] == 0
        for i in range(1, 7):
            w = sum(ys[b, j] * xs[b, j] for j in range(i)) / i
            torch.testing.assert_close(avg[b, i], w @ xs[b, i])
            dist = [float((xs[b, j] - xs[b, i]).norm()) for j in range(i)]
            nearest = sorted(range(i), key=lambda j: dist[j])[:3]
            torch.testing.assert_close(knn[b, i], ys[b, nearest].mean())


def test_lasso_recovers_a_sparse_w_from_fewer_than_d_examples():
    pytest.importorskip("sklearn")
    prompts = eval_prompts(ICLDataConfig(task="sparse", n_dims=10, n_points=11, sparsity=1), n_prompts=20)
    lasso_err = squared_errors(lasso(prompts.xs, prompts.ys, alpha=0.001), prompts.ys, prompts.error_scale).mean(0)
    ls_err = squared_errors(least_squares(prompts.xs, prompts.ys), prompts.ys, prompts.error_scale).mean(0)
    assert float(lasso_err[6]) < 0.05 < float(ls_err[6])  # 6 < d examples: least squares cannot, Lasso can


def test_lasso_without_scikit_learn_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)
    with pytest.raises(AotError, match=r"lasso baseline needs scikit-learn; install it with") as info:
        lasso(torch.randn(1, 3, 2), torch.randn(1, 3))
    assert "\n" not in str(info.value)


def test_bootstrap_band_contains_the_mean_and_has_the_normal_width():
    torch.manual_seed(0)
    errors = torch.rand(400, 5, dtype=torch.float64) * torch.arange(1, 6)
    band = bootstrap_band(errors, n_boot=4000)
    mean, low, high = (torch.tensor(band[k], dtype=torch.float64) for k in ("mean", "low", "high"))
    torch.testing.assert_close(mean, errors.mean(0))
    assert torch.all(low < mean) and torch.all(mean < high)
    # the 5–95 % band of a mean of 400 draws is about ± 1.645 standard errors
    width = 2 * 1.645 * errors.std(0) / 400**0.5
    torch.testing.assert_close(high - low, width, rtol=0.1, atol=0.0)


@pytest.mark.parametrize("block", ["aot-mssa", "aot-mhsa", "transformer", "linear-attn", "mamba"])
def test_a_y_is_never_visible_at_the_position_that_predicts_it(block):
    if block == "mamba":
        pytest.importorskip("mambapy")
    torch.manual_seed(0)
    cfg = ModelConfig(block=block, task="icl", n_layer=2, n_embd=16, n_head=4, n_dims=3, n_points=7)
    model = build_model(cfg).double().eval()
    xs, ys = torch.randn(2, 7, 3, dtype=torch.float64), torch.randn(2, 7, dtype=torch.float64)
    before = model(xs, ys)
    for i in range(7):
        perturbed = ys.clone()
        perturbed[:, i] += 1.0  # y_i only
        after = model(xs, perturbed)
        assert torch.equal(before[:, : i + 1], after[:, : i + 1])  # predictions for x_1 … x_i do not see y_i
        if i < 6:
            assert not torch.equal(before[:, i + 1 :], after[:, i + 1 :])  # the later ones do


def test_a_short_training_run_on_d2_beats_the_averaging_baseline(tmp_path, capsys):
    args = [
        "train", "icl", "--model", "aot-mhsa-icl-cpu", "--dims", "2", "--steps", "400", "--lr", "3e-3",
        "--out", str(tmp_path / "run"), "--set", "model.n_embd=32", "--set", "model.n_layer=3",
        "--set", "model.position=rope", "--set", "train.warmup_steps=20", "--set", "data.dims_start=2",
        "--set", "data.points_start=5", "--set", "train.eval_every=0", "--set", "train.progress=false",
        "--set", "eval.final_prompts=200",
    ]  # fmt: skip
    assert main(args) == 0
    assert "squared error / d" in capsys.readouterr().out
    assert main(["eval", "icl", str(tmp_path / "run"), "--prompts", "500", "--out", str(tmp_path / "eval")]) == 0
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert (tmp_path / "eval" / "icl.png").stat().st_size > 10_000
    assert set(results["curves"]) == {"run", "least squares", "averaging", "3-nn", "zero"}
    curves = {name: torch.tensor(c["mean"][1:]) for name, c in results["curves"].items()}  # k = 1 … 4
    assert curves["run"].mean() < curves["averaging"].mean()
    assert curves["run"][1:].mean() < 0.9 * curves["zero"][1:].mean()  # it has learned to use the examples


def test_bad_input_is_one_line(tmp_path, capsys):
    model = build_model(ModelConfig(block="aot-mssa", task="icl", n_layer=1, n_embd=16, n_head=4, n_dims=3, n_points=4))
    with pytest.raises(AotError, match=r"5 points in 3 dims does not fit this model \(n_dims=3, 1\.\.4 points\)"):
        model(torch.randn(1, 5, 3), torch.randn(1, 5))
    with pytest.raises(AotError, match=r"2 points in 4 dims does not fit this model \(n_dims=3"):
        model(torch.randn(1, 2, 4), torch.randn(1, 2))
    with pytest.raises(ConfigError, match=r"unknown ICL task 'quadratic'; use one of linear, sparse, noisy"):
        ICLDataConfig(task="quadratic")
    assert main(["train", "icl", "--task", "quadratic", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("aot: error: unknown ICL task 'quadratic'") and "\n" not in err
    assert main(["eval", "icl", str(tmp_path / "nothing")]) == 2
    assert "is not a finished `aot train icl` run" in capsys.readouterr().err


def test_model_predictions_batches_do_not_change_the_result():
    torch.manual_seed(0)
    model = build_model(ModelConfig(block="aot-mhsa", task="icl", n_layer=1, n_embd=16, n_head=4, n_dims=3, n_points=5))
    xs, ys = torch.randn(10, 5, 3), torch.randn(10, 5)
    torch.testing.assert_close(model_predictions(model, xs, ys, batch=3), model_predictions(model, xs, ys, batch=100))
