"""Scaling-law fits (aot.sweep.scaling, `aot scaling fit`) on synthetic runs drawn from a known law over 4 sizes
× 3 budgets: the fit recovers the law (tightly without noise), the bootstrap interval covers it, the objective is
Hoffmann et al.'s Huber on log L, the frontier is the brute-force minimum over N, a family's gap to itself is 0,
degenerate run sets and bad files are one-line errors, and the command writes its files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from aot.cli import main
from aot.errors import AotError
from aot.sweep.scaling import (
    FitSettings,
    FlopsModel,
    Law,
    Point,
    ScalingRun,
    fit_family,
    fit_flops_model,
    fit_law,
    fit_study,
    frontier_loss,
    gap_along_frontier,
    optimal_params,
    read_scaling_runs,
)
from aot.sweep.scaling.law import objective
from aot.sweep.scaling.study import compute_exponents, observations
from scaling_synthetic import BUDGETS, SIZES, TRUE, synthetic

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "scaling" / "runs.json"
QUICK = FitSettings(starts=4, bootstrap=0)


@pytest.fixture(scope="module")
def noisy_fit():  # type: ignore[no-untyped-def]
    """The law fitted on 0.3 %-noise runs, with 40 bootstrap refits (about 3 s)."""
    return fit_family("f", synthetic(noise=0.003), FitSettings(starts=8, bootstrap=40, boot_starts=1))


# -- the fit ------------------------------------------------------------------------------------------------------


def test_noise_free_runs_recover_the_law_tightly():
    fit = fit_law(observations(synthetic()), starts=4)
    for name, value in TRUE.values().items():
        assert fit.law.values()[name] == pytest.approx(value, rel=1e-4), name
    assert fit.objective < 1e-10 and fit.starts == 4 and fit.agreeing >= 1


def test_noisy_runs_recover_the_law_within_tolerance(noisy_fit):
    law = noisy_fit.law
    assert law.alpha == pytest.approx(TRUE.alpha, abs=0.02)
    assert law.beta == pytest.approx(TRUE.beta, abs=0.02)
    for name in ("E", "A", "B"):
        assert getattr(law, name) == pytest.approx(getattr(TRUE, name), rel=0.15), name
    far = (1e8, 1e10)  # 5× the largest size, 250× the largest budget
    assert float(law.loss(*far)) == pytest.approx(float(TRUE.loss(*far)), rel=0.03)


def test_the_bootstrap_interval_covers_the_truth(noisy_fit):
    from aot.sweep.scaling.study import family_summary

    summary = family_summary(noisy_fit)
    assert summary["bootstrap"] == {"requested": 40, "fitted": 40, "failed": 0}
    for name, value in TRUE.values().items():
        est = summary["law"][name]
        assert est["low"] <= value <= est["high"], (name, est)
        assert est["low"] < est["value"] < est["high"], (name, est)  # a real interval around the fit


def test_the_objective_is_huber_on_log_loss_of_the_law():
    """Hoffmann et al. eq. (D.2) computed directly: Huber_δ(log(E + A/N^α + B/D^β) − log L), δ = 1e-3, over δ."""
    runs = synthetic(noise=0.01)
    law = Law(E=1.5, A=300.0, alpha=0.3, B=500.0, beta=0.3)
    residual = np.log([float(law.loss(r.params, r.tokens)) for r in runs]) - np.log([r.loss for r in runs])
    delta = 1e-3
    huber = np.where(np.abs(residual) < delta, 0.5 * residual**2, delta * (np.abs(residual) - 0.5 * delta))
    weights = np.arange(len(runs), dtype=float)
    ours = objective(torch.tensor(law.theta(), dtype=torch.float64), observations(runs), torch.tensor(weights))
    assert float(ours) == pytest.approx(float((weights * huber).sum() / delta), rel=1e-10)


def test_a_resample_reweights_runs_and_the_seed_fixes_the_intervals():
    runs = synthetic(noise=0.003)
    one = fit_family("f", runs, FitSettings(starts=4, bootstrap=4, boot_starts=1, seed=3))
    two = fit_family("f", runs, FitSettings(starts=4, bootstrap=4, boot_starts=1, seed=3))
    other = fit_family("f", runs, FitSettings(starts=4, bootstrap=4, boot_starts=1, seed=4))
    assert [w.alpha for w in one.boot.laws] == [w.alpha for w in two.boot.laws]
    assert [w.alpha for w in one.boot.laws] != [w.alpha for w in other.boot.laws]


# -- the frontier and the gap -------------------------------------------------------------------------------------


@pytest.mark.parametrize("flops_model", [FlopsModel(6.0, 1.0, "6N"), FlopsModel(7.3, 1.04, "recorded")])
def test_the_frontier_is_the_brute_force_minimum_over_a_dense_n_grid(flops_model):
    n = np.geomspace(1e2, 1e14, 400_001)
    for c in (1e13, 1e17, 1e21):
        losses = TRUE.loss(n, c / flops_model.per_token(n))
        assert float(frontier_loss(TRUE, flops_model, c)) == pytest.approx(float(losses.min()), rel=1e-9)
        assert float(optimal_params(TRUE, flops_model, c)) == pytest.approx(float(n[losses.argmin()]), rel=1e-3)


def test_the_optimum_exponents_are_chinchillas_for_6n():
    a, b = compute_exponents(TRUE, FlopsModel(6.0, 1.0, "6N"))
    assert a == pytest.approx(0.28 / 0.62) and b == pytest.approx(0.34 / 0.62)
    c = np.array([1e18, 1e20])
    ratio = optimal_params(TRUE, FlopsModel(6.0, 1.0, "6N"), c)
    assert math.log(ratio[1] / ratio[0]) / math.log(100) == pytest.approx(a)


def test_a_family_gap_to_itself_is_zero_and_to_a_worse_law_positive(noisy_fit):
    grid = np.geomspace(1e13, 1e20, 7)
    itself = gap_along_frontier(noisy_fit, noisy_fit, grid)
    assert itself["value"] == [0.0] * 7 and itself["low"] == [0.0] * 7 and itself["high"] == [0.0] * 7
    worse = fit_family("g", synthetic(Law(1.9, 400.0, 0.34, 410.0, 0.28)), QUICK)
    gap = gap_along_frontier(worse, noisy_fit, grid)["value"]
    expected = frontier_loss(worse.law, worse.flops_model, grid) / frontier_loss(
        noisy_fit.law, noisy_fit.flops_model, grid
    )
    assert np.allclose(gap, expected - 1) and min(gap) > 0


def test_the_flops_model_fits_recorded_flops_and_falls_back_to_6n():
    n, d = np.array([1e5, 1e6, 1e7, 1e8]), np.array([1e6, 2e6, 3e6, 4e6])
    model = fit_flops_model(n, d, 7.5 * n**1.05 * d)
    assert (model.k, model.p, model.source) == (pytest.approx(7.5), pytest.approx(1.05), "recorded")
    assert model.max_error < 1e-9
    assert fit_flops_model(n, d, None) == FlopsModel(6.0, 1.0, "6N")


def test_the_study_reads_the_law_at_points_with_gaps_to_the_reference():
    runs = synthetic(family="ref") + synthetic(Law(1.8, 400.0, 0.34, 410.0, 0.28), family="other")
    points = [Point("R", "ref", 1e8, 1e11), Point("O", "other", 1e8, 1e11)]
    results = fit_study(runs, "ref", points, FitSettings(starts=4, bootstrap=3, boot_starts=1))
    ref, other = results["points"]
    assert ref["gap"] is None and other["gap_to"] == "R"
    assert ref["loss"]["value"] == pytest.approx(float(TRUE.loss(1e8, 1e11)), rel=1e-4)
    truth = (1.8 - 1.7 + float(TRUE.loss(1e8, 1e11))) / float(TRUE.loss(1e8, 1e11)) - 1
    assert other["gap"]["value"] == pytest.approx(truth, rel=1e-3)
    assert list(results["gap"]["families"]) == ["other"]
    assert results["frontier"]["flops"][-1] == pytest.approx(6 * 1e8 * 1e11)  # the grid reaches the points


# -- degenerate input: one line -----------------------------------------------------------------------------------


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("runs", "said"),
    [
        (synthetic()[:4], "has 4 runs"),
        ([r for r in synthetic() if r.params == SIZES[0]], "at 1 model size(s)"),
        ([r for r in synthetic() if r.tokens == BUDGETS[0]], "and 1 token budget(s)"),
    ],
    ids=["fewer runs than parameters", "one size", "one budget"],
)
def test_too_few_or_degenerate_runs_are_one_line_errors(runs, said):
    with pytest.raises(AotError) as exc:
        fit_study(runs + synthetic(family="ok"), settings=QUICK, source="'runs.json'")
    text = one_line(exc)
    assert said in text and "'f'" in text and "'runs.json'" in text


def test_an_unknown_reference_or_point_family_is_one_line():
    with pytest.raises(AotError, match="no runs of family 'gpt2'; its families are f"):
        fit_study(synthetic(), "gpt2", settings=QUICK)
    with pytest.raises(AotError, match="no runs of family 'x'"):
        fit_study(synthetic(), None, [Point("p", "x", 1e8, 1e9)], settings=QUICK)


def test_losses_that_grow_with_size_are_refused():
    rising = [
        ScalingRun("f", r.params, r.tokens, 1.7 + 410 / r.tokens**0.28 + 0.05 * r.params**0.1) for r in synthetic()
    ]
    with pytest.raises(AotError, match=r"α = .*does not fall with both size and data"):
        fit_study(rising, settings=QUICK)


# -- the runs file ------------------------------------------------------------------------------------------------


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def row(**fields: object) -> dict:
    return {"family": "f", "non_embedding_params": 1e6, "tokens": 1e7, "val_loss": 2.0, **fields}


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"runs": []}, "has no 'runs' list"),
        ({"runs": [row(), 3]}, "run 1 is not an object"),
        ({"runs": [row(val_loss=-1.0)]}, "run 0 has val_loss -1.0; it must be a finite number > 0"),
        ({"runs": [row(tokens=None)]}, "run 0 has tokens missing"),
        ({"runs": [row(family=None)]}, "run 0 has no 'family'"),
        ({"runs": [row(seed=0), row(seed=0)]}, "runs 0 and 1 are both f at N = 1e+06, D = 1e+07, seed 0"),
        ({"runs": [row(val_loss_se="x")]}, "val_loss_se 'x'"),
    ],
    ids=["empty", "not an object", "negative loss", "no tokens", "no family", "a run twice", "bad se"],
)
def test_a_bad_runs_file_is_one_line_naming_the_run_and_field(tmp_path, doc, said):
    with pytest.raises(AotError) as exc:
        read_scaling_runs(write(tmp_path / "runs.json", doc))
    assert said in one_line(exc) and "runs.json" in str(exc.value)


def test_a_sweep_store_is_read_at_each_configs_best_lr(tmp_path):
    """An `aot sweep lm` store (family: its block): the lr sweep's losers are not fitted; FLOPs per token count."""
    rows = []
    for lr, worse in ((1e-3, 0.0), (3e-3, 1.0)):
        for n in (1e6, 2e6):
            base = {"block": "transformer", "non_embedding_params": n, "tokens": 1e7, "seed": 0, "lr": lr}
            loss = 2.0 + worse + 1e6 / n
            rows.append({**base, "key": f"{n}-{lr}", "config": f"n={n}", "val_loss": loss,
                         "val_nats_per_byte": loss, "train_flops_per_token": 6 * n})  # fmt: skip
    store = {"sweep": {"task": "lm", "preset": "cpu-bench", "group": ["config"]}, "runs": rows}
    runs = read_scaling_runs(write(tmp_path / "results.json", store))
    assert sorted((r.family, r.params, r.loss, r.flops) for r in runs) == [
        ("transformer", 1e6, 3.0, 6e13),
        ("transformer", 2e6, 2.5, 1.2e14),
    ]


def test_where_keeps_a_studys_runs_and_training_flops_is_read(tmp_path):
    """benchmarks/scaling's rows: its lr sweep (several lrs at one size) is left out with --where kind=main,branch."""
    rows = [row(kind="sweep", lr=lr, seed=0, training_flops=1.0) for lr in (1e-3, 3e-3)]
    rows += [row(kind="main", seed=0, training_flops=6.5e13), row(kind="branch", tokens=5e6, seed=0)]
    path = write(tmp_path / "results.json", {"runs": rows})
    runs = read_scaling_runs(path, where={"kind": ["main", "branch"]})
    assert [(r.tokens, r.flops) for r in runs] == [(1e7, 6.5e13), (5e6, None)]
    with pytest.raises(AotError, match="no run with kind in cosine yet: nothing to fit"):
        read_scaling_runs(path, where={"kind": ["cosine"]})
    with pytest.raises(AotError, match="runs 0 and 1 are both f"):  # the sweep's two lrs, unfiltered
        read_scaling_runs(path)


# -- the command --------------------------------------------------------------------------------------------------


def test_the_command_writes_the_fit_table_and_figures(tmp_path, capsys):
    out = tmp_path / "fit"
    points = ["--at", "G=gpt2,1e8,1e11", "--at", "M=aot-mssa,1e8,1e11"]
    quick = ["--starts", "2", "--bootstrap", "3", "--boot-starts", "1"]
    argv = ["scaling", "fit", str(FIXTURE), "--reference", "gpt2", *points, *quick, "--out", str(out)]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["families"]) == {"gpt2", "aot-mssa"} and results["reference"] == "gpt2"
    assert results["source"]["sha256"] and results["machine"]["date"]
    assert results["families"]["gpt2"]["flops_model"]["source"] == "recorded"
    table = (out / "table.md").read_text()
    alpha = results["families"]["aot-mssa"]["law"]["alpha"]
    assert "| aot-mssa | 12 |" in table and f"{alpha['value']:.3f} [{alpha['low']:.3f}, {alpha['high']:.3f}]" in table
    gap = results["points"][1]["gap"]
    assert f"{100 * gap['value']:+.1f} %" in table
    largest = next(m for m in results["gap"]["at"] if m["where"] == "largest run")
    assert largest["flops"] == pytest.approx(max(r["training_flops"] for r in json.loads(FIXTURE.read_text())["runs"]))
    frontier = largest["families"]["aot-mssa"]
    assert f"| largest run | {largest['flops']:.3g} | aot-mssa | {100 * frontier['value']:+.1f} % [" in table
    for figure in ("frontier.png", "gap.png", "matched.png"):
        assert (out / figure).stat().st_size > 10_000
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "said"),
    [("{not json", "is not valid JSON"), ('{"runs": [{"family": "f"}]}', "run 0 has non_embedding_params missing")],
)
def test_the_command_refuses_a_bad_results_file_in_one_line_and_writes_nothing(tmp_path, capsys, content, said):
    bad = tmp_path / "runs.json"
    bad.write_text(content)
    out = tmp_path / "fit"
    assert main(["scaling", "fit", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aot: error: ") and said in err[0]
    assert not out.exists()


def test_the_command_refuses_a_bad_point_in_one_line(tmp_path, capsys):
    assert main(["scaling", "fit", str(FIXTURE), "--at", "G=gpt2,1e8", "--out", str(tmp_path / "o")]) == 2
    assert "must look like LABEL=FAMILY,N,D" in capsys.readouterr().err


def test_without_bootstrap_there_are_values_and_no_intervals(tmp_path):
    results = fit_study(synthetic(family="a") + synthetic(family="b"), "a", settings=FitSettings(starts=2, bootstrap=0))
    law = results["families"]["a"]["law"]["alpha"]
    assert law["value"] == pytest.approx(TRUE.alpha, rel=1e-3) and law["low"] is None and law["high"] is None
    frontier = results["frontier"]["families"]["b"]["loss"]
    assert len(frontier["value"]) == len(frontier["low"]) and set(frontier["low"]) == {None}


def test_an_end_point_whose_a_overflows_a_float_is_dropped_not_raised(monkeypatch):
    """Where the runs do not pin α down, L-BFGS can end at a finite objective with log A past a float's range
    (it did on the study's two-size AoT-MSSA, in a bootstrap refit: math.exp overflowed); that start is dropped
    like one that left the finite numbers, and the fit keeps the best representable one."""
    import aot.sweep.scaling.law as law_module

    obs = observations(synthetic())
    real = law_module.lbfgs
    calls = []

    def lbfgs(theta, obs, weights=None, max_iter=500):  # type: ignore[no-untyped-def]
        calls.append(theta)
        if len(calls) == 1:  # the best objective of all, at a = 800: e^800 is no float
            return torch.tensor([800.0, 6.0, 0.5, 60.0, 0.3], dtype=torch.float64), 0.0
        return real(theta, obs, weights, max_iter)

    monkeypatch.setattr(law_module, "lbfgs", lbfgs)
    fit = fit_law(obs, starts=3)
    assert len(calls) == 3 and math.isfinite(fit.law.A)
    assert fit.law.alpha == pytest.approx(TRUE.alpha, rel=0.05)
    assert not law_module.representable(torch.tensor([800.0, 6.0, 0.5, 60.0, 0.3]))
    assert law_module.representable(torch.tensor([700.0, 6.0, 0.5, 60.0, 0.3]))
