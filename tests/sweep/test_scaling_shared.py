"""The shared-E fit (aot.sweep.scaling.shared, `aot scaling fit --shared-e`): on runs of two families drawn from
laws with one E the joint fit recovers every parameter; its objective is the sum of the families' Huber objectives
computed directly; a family's E cannot drift from the others' in any bootstrap refit; resamples keep each family's
run count and fail for all families at once; the command says the E is shared."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from aot.cli import main
from aot.sweep.scaling import FitSettings, Law, Observations, ScalingRun, fit_law, fit_study
from aot.sweep.scaling.shared import bootstrap_shared, fit_shared, joint_objective, levers, pack, unpack
from aot.sweep.scaling.study import observations
from scaling_synthetic import synthetic

LAWS = {
    "a": Law(E=1.7, A=400.0, alpha=0.34, B=410.0, beta=0.28),
    "b": Law(E=1.7, A=900.0, alpha=0.40, B=250.0, beta=0.24),
}


def runs_of(law: Law, family: str, noise: float = 0.0, seed: int = 0) -> list[ScalingRun]:
    return synthetic(law, noise, family, seed)


def families(noise: float = 0.0) -> dict[str, Observations]:
    return {name: observations(runs_of(law, name, noise, seed=i)) for i, (name, law) in enumerate(LAWS.items())}


def own_laws(obs: dict[str, Observations]) -> dict[str, Law]:
    return {name: fit_law(o, starts=2).law for name, o in obs.items()}


@pytest.fixture(scope="module")
def noise_free():  # type: ignore[no-untyped-def]
    """The joint fit of noise-free runs of the two families (a few seconds)."""
    obs = families()
    return obs, fit_shared(obs, own_laws(obs), starts=4)


def huber_sum(law: Law, runs: list[ScalingRun], weights: np.ndarray | None = None, delta: float = 1e-3) -> float:
    """Hoffmann et al. eq. (D.2) by hand: Σ w Huber_δ(log L̂ − log L) / δ."""
    r = np.log([float(law.loss(x.params, x.tokens)) for x in runs]) - np.log([x.loss for x in runs])
    huber = np.where(np.abs(r) < delta, 0.5 * r**2, delta * (np.abs(r) - 0.5 * delta))
    return float((huber if weights is None else weights * huber).sum() / delta)


def test_the_joint_objective_is_the_sum_of_each_familys_huber_objective_with_one_e():
    runs = {name: runs_of(law, name, noise=0.01, seed=i) for i, (name, law) in enumerate(LAWS.items())}
    obs = {name: observations(r) for name, r in runs.items()}
    trial = {"a": Law(1.2, 300.0, 0.3, 500.0, 0.3), "b": Law(1.2, 800.0, 0.45, 200.0, 0.2)}  # one E, off the truth
    thetas = {name: torch.tensor(law.theta(), dtype=torch.float64) for name, law in trial.items()}
    x = pack(math.log(1.2), thetas, levers(obs))
    assert len(x) == 1 + 4 * len(obs)
    for name, theta in unpack(x, levers(obs)).items():
        assert torch.allclose(theta, thetas[name], rtol=0, atol=1e-12)
    by_hand = sum(huber_sum(trial[name], runs[name]) for name in runs)
    assert float(joint_objective(x, obs, {})) == pytest.approx(by_hand, rel=1e-10)
    drawn = np.arange(len(runs["a"]), dtype=float)  # a resample's counts for family a, none for b
    weighted = huber_sum(trial["a"], runs["a"], drawn) + huber_sum(trial["b"], runs["b"])
    assert float(joint_objective(x, obs, {"a": torch.tensor(drawn)})) == pytest.approx(weighted, rel=1e-10)


def test_a_fit_with_e_held_keeps_e_and_finds_the_rest():
    """The profile's step: with e held at the truth the other four come back; held elsewhere e does not move."""
    from aot.sweep.scaling.shared import held_e_fit

    obs = observations(runs_of(LAWS["a"], "a"))
    start = Law(1.0, 100.0, 0.5, 100.0, 0.5)
    theta, value = held_e_fit(obs, math.log(1.7), start)
    law = Law.from_theta(theta.tolist())
    assert value < 1e-8
    for key, truth in LAWS["a"].values().items():
        assert law.values()[key] == pytest.approx(truth, rel=1e-3), key
    theta, value = held_e_fit(obs, math.log(1.2), start)
    assert float(theta[2]) == math.log(1.2) and value > 1e-3


def test_noise_free_runs_with_one_e_recover_every_familys_law(noise_free):
    _, fit = noise_free
    assert fit.objective < 1e-8 and fit.agreeing >= 1
    for name, truth in LAWS.items():
        for key, value in truth.values().items():
            assert fit.laws[name].values()[key] == pytest.approx(value, rel=1e-3), (name, key)
    assert fit.laws["a"].E == fit.laws["b"].E


def test_e_is_shared_even_where_each_familys_own_e_differs():
    """Family b's runs come from a law with another E: fitted alone each family keeps its E; fitted jointly both
    take one E between them, and the joint objective is worse than the two own fits' (a constraint)."""
    obs = {
        "a": observations(runs_of(LAWS["a"], "a")),
        "b": observations(runs_of(Law(2.2, 900.0, 0.4, 250.0, 0.24), "b")),
    }
    own = own_laws(obs)
    assert pytest.approx(1.7, rel=1e-3) == own["a"].E and pytest.approx(2.2, rel=1e-3) == own["b"].E
    fit = fit_shared(obs, own, starts=4)
    assert fit.laws["a"].E == fit.laws["b"].E
    assert 1.7 * 0.9 < fit.laws["a"].E < 2.2 * 1.1
    assert fit.objective > 1e-3 and sum(fit.parts.values()) == pytest.approx(fit.objective, rel=1e-9)


def test_bootstrap_refits_are_joint_paired_and_fail_for_every_family_at_once():
    obs = families(noise=0.003)
    fit = fit_shared(obs, own_laws(obs), starts=2)
    boots = bootstrap_shared(obs, fit, resamples=6, seed=1, starts=1)
    a, b = boots["a"], boots["b"]
    assert a.requested == b.requested == 6 and a.failed == b.failed and len(a.laws) == len(b.laws) == 6 - a.failed
    assert len(a.laws) >= 3
    assert [law.E for law in a.laws] == [law.E for law in b.laws]  # refit i: one joint fit
    assert len({law.alpha for law in a.laws}) == len(a.laws)  # resamples differ
    again = bootstrap_shared(obs, fit, resamples=6, seed=1, starts=1)
    assert [law.alpha for law in again["b"].laws] == [law.alpha for law in b.laws]


def test_a_resample_keeps_every_family_and_one_that_cannot_determine_a_law_fails_for_all(monkeypatch, noise_free):
    import aot.sweep.scaling.shared as shared_module

    obs, fit = noise_free
    drawn = []

    def weights(n, generator):  # type: ignore[no-untyped-def]
        drawn.append(n)
        w = torch.zeros(n, dtype=torch.float64)
        if len(drawn) == 2:  # the second family of the first resample: one run drawn n times
            w[0] = n
        else:
            w[:] = 1.0
        return w

    monkeypatch.setattr(shared_module, "resample_weights", weights)
    boots = bootstrap_shared(obs, fit, resamples=2, starts=1)
    assert drawn == [12, 12, 12, 12]  # each family's resample has that family's size
    assert boots["a"].failed == boots["b"].failed == 1 and len(boots["a"].laws) == len(boots["b"].laws) == 1


def test_the_study_and_the_command_fit_one_e(tmp_path, capsys):
    runs = [*runs_of(LAWS["a"], "a", 0.002), *runs_of(LAWS["b"], "b", 0.002, seed=1)]
    results = fit_study(runs, "a", settings=FitSettings(starts=2, bootstrap=3, boot_starts=1, shared_e=True))
    e = {name: fam["law"]["E"] for name, fam in results["families"].items()}
    assert e["a"] == e["b"] and e["a"]["value"] == pytest.approx(1.7, rel=0.05)
    assert results["settings"]["shared_e"] is True
    path = tmp_path / "runs.json"
    rows = [
        {"family": r.family, "non_embedding_params": r.params, "tokens": r.tokens, "val_loss": r.loss} for r in runs
    ]
    path.write_text(json.dumps({"runs": rows}))
    out = tmp_path / "fit"
    argv = ["scaling", "fit", str(path), "--reference", "a", "--shared-e", "--starts", "2", "--bootstrap", "2"]
    assert main([*argv, "--boot-starts", "1", "--out", str(out)]) == 0
    written = json.loads((out / "results.json").read_text())
    assert written["settings"]["shared_e"] is True
    assert written["families"]["a"]["law"]["E"] == written["families"]["b"]["law"]["E"]
    assert "one E shared by every family" in (out / "table.md").read_text()
    assert "one E shared by every family" in capsys.readouterr().out
