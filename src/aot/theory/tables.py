"""The measurements and tables of `aot denoise` (:mod:`aot.cli.denoise`): the main runs of Theorem 1 (docs/paper.md
§3) with the thresholded and softmax denoisers, the per-layer and summary rows, the sweep tables and the Markdown
report."""

from __future__ import annotations

from typing import Any

from aot.theory.config import DenoiseConfig
from aot.theory.data import check_sizes
from aot.theory.experiment import Measurement, measure


def main_runs(cfg: DenoiseConfig, seed: int, device: str) -> tuple[list[Measurement], list[Measurement]]:
    """The main run: for every δ the thresholded denoiser and, for comparison, plain softmax."""
    common: dict[str, Any] = dict(
        p=cfg.p,
        n_clusters=cfg.n_clusters,
        tokens_per_cluster=cfg.tokens_per_cluster,
        d=cfg.d,
        eta=cfg.eta,
        tau=cfg.tau,
        n_layers=cfg.n_layers,
        seed=seed,
        delta_constant=cfg.delta_constant,
        device=device,
    )
    from tqdm.auto import tqdm

    check_sizes(cfg.d or cfg.n_clusters * cfg.p, cfg.p, cfg.n_clusters, cfg.tokens_per_cluster)  # before any bar
    jobs = [(phi, delta) for phi in ("threshold", "softmax") for delta in cfg.deltas]
    runs = [measure(delta=delta, phi=phi, **common) for phi, delta in tqdm(jobs, desc="main run", leave=False)]
    return runs[: len(cfg.deltas)], runs[len(cfg.deltas) :]


def condition_status(conditions_hold: bool, through_layers: bool, n_layers: int) -> str:
    """How a δ sits against Theorem 1's conditions; never "inside" when the through-layers check fails."""
    if through_layers:
        return f"inside the conditions through all {n_layers} layers"
    if conditions_hold:
        return f"inside the paper's conditions at the input only, outside them by layer {n_layers}"
    return "outside the paper's conditions"


def per_layer_rows(runs: list[Measurement], tolerance: float) -> list[dict[str, Any]]:
    """results.json's flat table: one row per δ, layer and cluster."""
    rows = []
    for run in runs:
        traj = run.trajectory
        factors = traj.factors
        for layer in range(traj.snr.shape[0]):
            for k in range(traj.snr.shape[1]):
                factor = float(factors[layer - 1, k]) if layer > 0 else None
                rows.append(
                    {
                        "delta": run.delta,
                        "layer": layer,
                        "cluster": k,
                        "snr": float(traj.snr[layer, k]),
                        "factor": factor,
                        "predicted_factor": traj.predicted,
                        "within_tolerance": None if factor is None else abs(factor / traj.predicted - 1) <= tolerance,
                        "conditions_hold": run.conditions.holds,
                        "conditions_hold_through_layers": run.conditions.holds_through_layers,
                    }
                )
    return rows


def summary_rows(thresholded: list[Measurement], softmax: list[Measurement], tolerance: float) -> list[dict]:
    rows = []
    for run, soft in zip(thresholded, softmax):
        traj = run.trajectory
        rows.append(
            {
                "delta": run.delta,
                "snr_first": float(traj.snr[0].mean()),
                "snr_last": float(traj.snr[-1].mean()),
                "predicted_factor": traj.predicted,
                "mean_factor": float(traj.factors.mean()),
                "fitted_rate": traj.fitted_rate(),
                "max_relative_deviation": traj.max_relative_deviation,
                "within_tolerance": traj.max_relative_deviation <= tolerance,
                "events_min_fraction": min(e["both"] for e in traj.events),
                "conditions_hold": run.conditions.holds,
                "conditions_hold_through_layers": run.conditions.holds_through_layers,
                "condition_failures": run.conditions.failures(),
                "delta_max": run.conditions.delta_max,
                "delta_last_layer": run.conditions.delta_last_layer,
                "tau_max": run.conditions.tau_max,
                "softmax_snr_last": float(soft.trajectory.snr[-1].mean()),
                "softmax_mean_factor": float(soft.trajectory.factors.mean()),
            }
        )
    return rows


def _pivot(rows: list[dict[str, Any]], row_key: str, col_key: str) -> list[str]:
    """A rate-ratio table: rows × columns; ``c`` marks the paper's conditions holding, ``✗`` a layer > 2 % off."""
    row_values = sorted({r[row_key] for r in rows})
    col_values = sorted({r[col_key] for r in rows})
    cell = {(r[row_key], r[col_key]): r for r in rows}
    lines = [
        f"| {row_key} \\ {col_key} | " + " | ".join(f"{c:g}" for c in col_values) + " |",
        "|---|" + "---|" * len(col_values),
    ]
    for rv in row_values:
        cells = []
        for cv in col_values:
            r = cell[(rv, cv)]
            mark = ("c" if r["conditions_hold"] else "") + ("" if r["max_relative_deviation"] <= 0.02 else " ✗")
            cells.append(f"{r['rate_ratio']:.2f} {mark}".strip())
        lines.append(f"| {rv:g} | " + " | ".join(cells) + " |")
    return lines


def sweep_markdown(sweeps: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The sweeps as tables of the rate ratio mean ln(factor) / ln(1 + ητ) (1 = Theorem 1 exactly)."""
    lines = [
        "",
        "## Sweeps",
        "",
        "Cells: rate ratio = mean over layers and clusters of ln(factor) / ln(1+ητ) (1.00 = Theorem 1 exactly, "
        "0 = no denoising, < 0 = SNR falls); `c` = the paper's conditions hold; `✗` = some layer's factor is "
        "more than 2 % off 1 + ητ. Mean over the sweep's seeds.",
    ]
    if "delta_tau" in sweeps:
        r = sweeps["delta_tau"][0]
        lines += ["", f"δ × τ at p={r['p']}, K={r['K']}, N={r['N']}, η={r['eta']:g}, {r['n_layers']} layers:", ""]
        lines += _pivot(sweeps["delta_tau"], "delta", "tau")
    if "p_n" in sweeps:
        r = sweeps["p_n"][0]
        lines += [
            "",
            f"p × N at δ={r['delta']:g}, η={r['eta']:g}, τ={r['tau']:g}, K={r['K']}, {r['n_layers']} layers:",
            "",
        ]
        lines += _pivot(sweeps["p_n"], "p", "N")
    for name, title in (("eta", "η"), ("softmax_delta", "δ, thresholded φ against plain softmax")):
        if name not in sweeps:
            continue
        lines += [
            "",
            f"Sweep over {title} (plain softmax is compared with 1 + η):",
            "",
            "| φ | δ | η | τ | predicted factor | mean factor | rate ratio | max deviation "
            "| conditions / through layers |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in sweeps[name]:
            lines.append(
                f"| {r['phi']} | {r['delta']:g} | {r['eta']:g} | {r['tau']:g} | {r['predicted_factor']:.4f} | "
                f"{r['mean_factor']:.4f} | {r['rate_ratio']:.3f} | {100 * r['max_relative_deviation']:.2f} % | "
                f"{'hold' if r['conditions_hold'] else 'fail'} / "
                f"{'hold' if r['conditions_hold_through_layers'] else 'fail'} |"
            )
    return lines


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    params = results["main"]["params"]
    lines = [
        "# `aot denoise` — Theorem 1 measured",
        "",
        f"Command: `{results['command']}` — {m['date']}, {m['platform']}, {m['processor']}, "
        f"{m['cpu_count']} CPUs, torch {m['torch']} ({m['torch_threads']} thread(s)), {results['seconds']:.0f} s.",
        "",
        f"Main run: d={params['d']}, p={params['p']}, K={params['K']}, N={params['N']} "
        f"({params['tokens_per_cluster']} per cluster), η={params['eta']:g}, τ={params['tau']:g}, "
        f"{params['n_layers']} layers, seed {params['seed']}, float64. Predicted factor 1+ητ = "
        f"{1 + params['eta'] * params['tau']:.4f}. Conditions (docs/paper.md §3, constant 1 on δ): "
        f"p > (32/9) ln N = {results['main']['p_min']:.1f}, δ ≤ √(ln N/p) = {results['main']['delta_max']:.3f}, "
        f"τ ∈ (0.5, {results['main']['tau_max']:.4f}]; through the layers also δ(1+ητ)^(L−1) ≤ √(ln N/p).",
        "",
        "| δ | SNR layer 0 | SNR layer L | mean factor | fitted rate | max deviation | within 2 % | "
        "min fraction of tokens with both events | conditions (paper) | through layers | plain softmax: SNR layer L |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["main"]["summary"]:
        lines.append(
            f"| {r['delta']:g} | {r['snr_first']:.3f} | {r['snr_last']:.3f} | {r['mean_factor']:.4f} | "
            f"{r['fitted_rate']:.4f} | {100 * r['max_relative_deviation']:.2f} % | "
            f"{'yes' if r['within_tolerance'] else 'no'} | {r['events_min_fraction']:.3f} | "
            f"{'hold' if r['conditions_hold'] else 'fail: ' + '; '.join(r['condition_failures'])} | "
            f"{'hold' if r['conditions_hold_through_layers'] else 'fail'} | {r['softmax_snr_last']:.3f} |"
        )
    runs = results["main"]["runs"]
    lines += ["", "Mean SNR over clusters per layer:", ""]
    lines.append("| layer | " + " | ".join(f"δ={r['delta']:g}" for r in runs) + " |")
    lines.append("|---|" + "---|" * len(runs))
    for layer in range(len(runs[0]["snr"])):
        cells = [sum(r["snr"][layer]) / len(r["snr"][layer]) for r in runs]
        lines.append(f"| {layer} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
    if results.get("sweeps"):
        lines += sweep_markdown(results["sweeps"])
    return "\n".join(lines) + "\n"
