"""Sweeps that map where Theorem 1's factor 1 + ητ holds and where it fails (docs/paper.md §3).

Every point varies one or two of δ, τ, p, N, η (or φ) around the base point of a :class:`SweepConfig` and
records, averaged over seeds, the largest relative deviation of the per-layer factor from 1 + ητ, the rate
ratio mean ln(factor) / ln(1 + ητ) (1 = the theorem's linear rate; 0 = no denoising), the fraction of tokens
for which the theorem's two events hold at the first layer, and whether its conditions hold.
"""

from __future__ import annotations

from typing import Any

from aot.theory.config import SweepConfig
from aot.theory.experiment import measure


def sweep_point(cfg: SweepConfig, device: str = "cpu", **changes: Any) -> dict[str, Any]:
    """One point of a sweep: the base point of ``cfg`` with ``changes``, averaged over ``cfg.seeds`` seeds."""
    params: dict[str, Any] = dict(
        p=cfg.p,
        n_clusters=cfg.n_clusters,
        tokens_per_cluster=cfg.tokens_per_cluster,
        delta=cfg.delta,
        eta=cfg.eta,
        tau=cfg.tau,
        n_layers=cfg.n_layers,
        phi="threshold",
    )
    params.update(changes)
    runs = [measure(**params, seed=seed, device=device) for seed in range(cfg.seeds)]
    first = runs[0]
    events = [run.trajectory.events[0]["both"] for run in runs if run.trajectory.events]
    return {
        "p": first.p,
        "K": first.n_clusters,
        "N": first.n_tokens,
        "delta": first.delta,
        "eta": params["eta"],
        "tau": params["tau"],
        "phi": params["phi"],
        "n_layers": params["n_layers"],
        "seeds": cfg.seeds,
        "predicted_factor": first.trajectory.predicted,
        "mean_factor": sum(float(r.trajectory.factors.mean()) for r in runs) / len(runs),
        "max_relative_deviation": max(r.trajectory.max_relative_deviation for r in runs),
        "rate_ratio": sum(r.trajectory.rate_ratio for r in runs) / len(runs),
        "events_first_layer": sum(events) / len(events) if events else None,
        "conditions_hold": first.conditions.holds,
        "conditions_hold_through_layers": first.conditions.holds_through_layers,
        "condition_failures": first.conditions.failures(),
    }


def delta_tau_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """δ × τ grid at the base p, N, η: large δ and τ ≤ 1/2 are the failures to look for."""
    return [dict(delta=delta, tau=tau) for delta in cfg.deltas for tau in cfg.taus]


def p_n_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """p × N grid at the base δ, η, τ: small p (p ≤ (32/9) ln N) is the failure to look for."""
    return [dict(p=p, tokens_per_cluster=n) for p in cfg.ps for n in cfg.tokens_per_cluster_grid]


def eta_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """η for the thresholded φ and for plain softmax: does the factor follow 1 + ητ (resp. 1 + η)?"""
    return [dict(eta=eta, phi=phi) for phi in ("threshold", "softmax") for eta in cfg.etas]


def softmax_delta_points(cfg: SweepConfig) -> list[dict[str, Any]]:
    """δ for plain softmax against the thresholded φ at the base point."""
    return [dict(delta=delta, phi=phi) for phi in ("threshold", "softmax") for delta in cfg.deltas]


#: sweep name → the changes to the base point that make up its grid
SWEEPS = {
    "delta_tau": delta_tau_points,
    "p_n": p_n_points,
    "eta": eta_points,
    "softmax_delta": softmax_delta_points,
}


def run_sweeps(
    cfg: SweepConfig, names: list[str] | None = None, device: str = "cpu", progress: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """Run the named sweeps (all by default): {name: rows}, with one tqdm bar (stderr) over every point."""
    from tqdm.auto import tqdm

    grids = {name: SWEEPS[name](cfg) for name in (names or list(SWEEPS))}
    bar = tqdm(total=sum(len(g) for g in grids.values()), desc="sweeps", unit="point", disable=not progress)
    results: dict[str, list[dict[str, Any]]] = {}
    for name, grid in grids.items():
        bar.set_postfix_str(name, refresh=False)
        results[name] = []
        for changes in grid:
            results[name].append(sweep_point(cfg, device, **changes))
            bar.update()
    bar.close()
    return results
