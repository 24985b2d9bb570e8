"""Figures of `aot denoise` (matplotlib, Agg backend): the paper-style SNR-per-layer panels, the per-layer
factors, the sweep heatmaps and the φ / η comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from aot.theory.experiment import Measurement


def _linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares line y ≈ a x + b and its R²."""
    a, b = np.polyfit(x, y, 1)
    residual = y - (a * x + b)
    r2 = 1.0 - float((residual**2).sum() / ((y - y.mean()) ** 2).sum()) if y.std() > 0 else 1.0
    return float(a), float(b), r2


def plot_snr_panels(
    thresholded: list[Measurement], softmax: list[Measurement] | None, path: str | Path
) -> list[dict[str, float]]:
    """One panel per δ: SNR against layer, a fitted straight line (the paper's figure, docs/paper.md §3), the
    prediction SNR⁽⁰⁾(1 + ητ)^l and, when given, plain softmax. Returns the fitted lines."""
    n = len(thresholded)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.6), squeeze=False)
    fits = []
    softmax_runs: list[Measurement | None] = list(softmax) if softmax else [None] * n
    for ax, run, soft in zip(axes[0], thresholded, softmax_runs):
        snr = run.trajectory.snr.numpy()  # (L + 1, K)
        layers = np.arange(snr.shape[0])
        mean = snr.mean(axis=1)
        for k in range(snr.shape[1]):
            ax.plot(layers, snr[:, k], ".", color="tab:blue", alpha=0.35, ms=4)
        ax.plot(layers, mean, "o", color="tab:blue", ms=5, label="SNR (thresholded φ)")
        a, b, r2 = _linear_fit(layers, mean)
        fits.append({"delta": run.delta, "slope": a, "intercept": b, "r2": r2})
        ax.plot(layers, a * layers + b, "-", color="tab:red", lw=1.2, label=f"fitted line (R²={r2:.4f})")
        predicted = mean[0] * run.trajectory.predicted**layers
        ax.plot(layers, predicted, "--", color="black", lw=1, label=f"(1+ητ)^l, 1+ητ={run.trajectory.predicted:.3f}")
        if soft is not None:
            ax.plot(
                layers,
                soft.trajectory.snr.numpy().mean(axis=1),
                "s-",
                color="tab:gray",
                ms=3,
                lw=0.8,
                label="plain softmax",
            )
        inside = "inside" if run.conditions.holds else "outside"
        ax.set_title(f"δ = {run.delta:g} ({inside} the conditions)", fontsize=10)
        ax.set_xlabel("layer")
        ax.set_ylabel("SNR")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    first = thresholded[0]
    fig.suptitle(
        f"Unrolled MSSA with true bases: d={first.d}, p={first.p}, K={first.n_clusters}, N={first.n_tokens}, "
        f"η={first.trajectory.eta:g}, τ={first.trajectory.tau:g}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return fits


def plot_factors(thresholded: list[Measurement], path: str | Path) -> None:
    """Per-layer factor of every cluster against 1 + ητ, and the fraction of tokens with both events."""
    n = len(thresholded)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
    for ax, run in zip(axes[0], thresholded):
        factors = run.trajectory.factors.numpy()  # (L, K)
        layers = np.arange(1, factors.shape[0] + 1)
        predicted = run.trajectory.predicted
        for k in range(factors.shape[1]):
            ax.plot(layers, factors[:, k], "o-", ms=3, lw=0.8, label=f"cluster {k}")
        ax.axhline(predicted, color="black", ls="--", lw=1, label="1 + ητ")
        ax.axhspan(predicted * 0.98, predicted * 1.02, color="gray", alpha=0.15, label="±2 %")
        ax.set_xlabel("layer l (factor SNR⁽ˡ⁾/SNR⁽ˡ⁻¹⁾)")
        ax.set_ylabel("per-layer factor")
        ax.set_title(
            f"δ = {run.delta:g}: max deviation {100 * run.trajectory.max_relative_deviation:.2f} %", fontsize=10
        )
        twin = ax.twinx()
        both = [e["both"] for e in run.trajectory.events]
        twin.plot(layers, both, "k:", lw=1.2)
        twin.set_ylim(0, 1.05)
        twin.set_ylabel("tokens with both events (dotted)", fontsize=8)
        ax.legend(fontsize=7, loc="lower left")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _heatmap(ax: Any, rows: list[dict[str, Any]], x_key: str, y_key: str, title: str) -> Any:
    xs = sorted({r[x_key] for r in rows})
    ys = sorted({r[y_key] for r in rows})
    grid = np.full((len(ys), len(xs)), np.nan)
    for r in rows:
        i, j = ys.index(r[y_key]), xs.index(r[x_key])
        grid[i, j] = r["rate_ratio"]
        dev = r["max_relative_deviation"]
        text = f"{r['rate_ratio']:.2f}" + ("" if dev <= 0.02 else "\n✗")
        ax.text(j, i, text, ha="center", va="center", fontsize=6)
        if r["conditions_hold"]:
            style = "-" if r["conditions_hold_through_layers"] else ":"
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=1.2, ls=style, ec="black"))
    image = ax.imshow(grid, origin="lower", cmap="RdYlGn", vmin=0, vmax=1.2, aspect="auto")
    ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs], fontsize=7)
    ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys], fontsize=7)
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.set_title(title, fontsize=9)
    return image


def plot_sweep_heatmaps(sweeps: dict[str, list[dict[str, Any]]], path: str | Path) -> None:
    """Rate ratio mean ln(factor)/ln(1 + ητ) over δ × τ and p × N. Boxes: the paper's conditions hold (solid:
    also through the layers); ✗: some layer's factor is more than 2 % off 1 + ητ."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    base = sweeps["delta_tau"][0]
    image = _heatmap(
        axes[0],
        sweeps["delta_tau"],
        "tau",
        "delta",
        f"δ × τ (p={base['p']}, N={base['N']}, η={base['eta']:g}, {base['n_layers']} layers)",
    )
    base = sweeps["p_n"][0]
    _heatmap(
        axes[1],
        sweeps["p_n"],
        "N",
        "p",
        f"p × N (δ={base['delta']:g}, η={base['eta']:g}, τ={base['tau']:g}, K={base['K']})",
    )
    fig.colorbar(image, ax=axes, shrink=0.8, label="rate ratio: measured ln-rate / ln(1+ητ)")
    fig.suptitle("Where Theorem 1's factor 1 + ητ holds (1.00) and where it fails", fontsize=11)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_phi_eta(sweeps: dict[str, list[dict[str, Any]]], path: str | Path) -> None:
    """Rate ratio mean ln(factor) / ln(1 + ητ) (plain softmax: / ln(1 + η)) against η (left) and δ (right),
    thresholded φ against plain softmax."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for phi, color in (("threshold", "tab:blue"), ("softmax", "tab:orange")):
        rows = [r for r in sweeps["eta"] if r["phi"] == phi]
        axes[0].plot([r["eta"] for r in rows], [r["rate_ratio"] for r in rows], "o-", color=color, label=f"φ = {phi}")
        rows = [r for r in sweeps["softmax_delta"] if r["phi"] == phi]
        axes[1].plot([r["delta"] for r in rows], [r["rate_ratio"] for r in rows], "o-", color=color, label=f"φ = {phi}")
    base = sweeps["eta"][0]
    axes[0].set_xscale("log")
    axes[0].set_xlabel("step size η")
    axes[0].set_title(f"η sweep (δ={base['delta']:g}, τ={base['tau']:g}, {base['n_layers']} layers)", fontsize=10)
    base = sweeps["softmax_delta"][0]
    axes[1].set_xlabel("δ")
    axes[1].set_title(f"δ sweep (η={base['eta']:g}, τ={base['tau']:g}, {base['n_layers']} layers)", fontsize=10)
    for ax in axes:
        ax.axhline(1, color="black", ls="--", lw=1, label="Theorem 1 (1 + ητ)")
        ax.axhline(0, color="gray", lw=0.8)
        ax.set_ylabel("rate ratio: mean ln factor / ln(1+ητ)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"thresholded φ = h∘softmax against plain softmax (p={base['p']}, K={base['K']}, N={base['N']}; "
        "softmax measured against 1 + η)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
