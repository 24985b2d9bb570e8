"""Figures of `aot analyze` (matplotlib, Agg): the denoising profile with bands, circuits heat maps, spectra,
subspace geometry and, for a recall run, where its heads attend on MQAR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np


def _series(layers: list[dict[str, Any]], key: str, stat: str = "mean") -> np.ndarray:
    return np.array([row[key][stat] for row in layers], dtype=np.float64)


def _band_plot(ax: Any, x: np.ndarray, layers: list[dict[str, Any]], key: str, label: str, color: str) -> None:
    ax.plot(x, _series(layers, key), "o-", color=color, ms=3, label=label)
    ax.fill_between(x, _series(layers, key, "q10"), _series(layers, key, "q90"), color=color, alpha=0.2)


def plot_denoising(profile: dict[str, Any], path: Path, title: str) -> Path:
    """SNR of the tokens each layer reads (bands: 10–90 % over batches; dashed: token median with its
    25–75 % band), the per-layer gain, the coding rates, and the heads' energy shares."""
    layers = profile["layers"]
    x = np.arange(len(layers))
    fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
    ax = axes[0]
    _band_plot(ax, x, layers, "snr_in", "subspace SNR of layer input (batches 10–90 %)", "tab:blue")
    baseline = _series(layers, "snr_in_random_subspaces")
    ax.plot(x, baseline, ":", color="black", lw=1, label="same tokens, random subspaces")
    median = [row["token_snr_in"]["q50"] for row in layers]
    ax.plot(x, median, "--", color="tab:gray", lw=1, label="per-token SNR median (25–75 %)")
    low, high = ([row["token_snr_in"][q] for row in layers] for q in ("q25", "q75"))
    ax.fill_between(x, low, high, color="0.7", alpha=0.3)
    ax.set(xlabel="layer", ylabel="SNR", title="SNR in each layer's own subspaces")
    if "snr_undefined" in profile:  # head_dim = n_embd: the panels' SNR values divide by rounding error
        for panel in axes[:2]:
            panel.text(0.5, 0.5, "undefined: one head spans\nthe whole width", transform=panel.transAxes,
                       ha="center", va="center", color="tab:red", fontsize=11)  # fmt: skip
    ax.legend(fontsize=7)
    ax = axes[1]
    _band_plot(ax, x, layers, "gain", "SNR(out) / SNR(in), geometric mean", "tab:red")
    for key, style in (("gain_input_claims", ":"), ("gain_output_claims", "-.")):
        ax.plot(x, _series(layers, key), style, color="tab:red", lw=0.8, label=key.replace("_", " "))
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set(xlabel="layer", ylabel="gain", title="per-layer gain (Theorem 1: 1 + ητ > 1)")
    ax.legend(fontsize=7)
    ax = axes[2]
    _band_plot(ax, x, layers, "R_in", "R(Z)", "tab:green")
    _band_plot(ax, x, layers, "Rc_in", "R_c(Z | U)", "tab:purple")
    ax.set(xlabel="layer", ylabel="nats", title=f"coding rates of the layer input (ε = {profile['eps']:g})")
    ax.legend(fontsize=7)
    ax = axes[3]
    shares = np.array([row["share"] for row in layers])  # (L, K)
    image = ax.imshow(shares.T, aspect="auto", cmap="viridis", origin="lower")
    fig.colorbar(image, ax=ax)
    ax.set(xlabel="layer", ylabel="head", title="mean energy share ‖Q_kᵀz‖²/‖z‖²")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_circuits(circuits: dict[str, Any], path: Path, title: str) -> Path:
    """Per-head scores as layers × heads heat maps (LM: previous-token and induction; vision: the class token's
    attention entropy) and the largest Q/K/V-composition between every pair of layers."""
    panels = [
        (np.array(circuits[key]), name, vmax)
        for key, name, vmax in (
            ("previous_token", "previous-token score", 1.0),
            ("induction", "induction score", 1.0),
            ("copying", "OV copying score (direct path)", 1.0),
            ("cls_attention_entropy", "class-token attention entropy (nats)", circuits.get("uniform_entropy")),
        )
        if circuits.get(key) is not None
    ]
    n_layer = len(circuits["qk_singular_values"])
    fig, axes = plt.subplots(1, len(panels) + 3, figsize=(4 * (len(panels) + 3), 3.8))
    for ax, (scores, name, vmax) in zip(axes, panels):
        signed = name.startswith("OV copying")  # in [-1, 1]
        cmap, vmin = ("RdBu_r", -1.0) if signed else ("magma", 0.0)
        image = ax.imshow(scores, aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax, origin="lower")
        fig.colorbar(image, ax=ax)
        ax.set(xlabel="head", ylabel="layer", title=name)
    for ax, kind in zip(axes[len(panels) :], "qkv"):
        matrix = np.full((n_layer, n_layer), np.nan)
        for row in circuits["pairs"]:
            matrix[row["later"], row["earlier"]] = row[kind]["max"]
        image = ax.imshow(matrix, cmap="viridis", origin="lower")
        fig.colorbar(image, ax=ax)
        ax.set(
            xlabel="earlier layer",
            ylabel="later layer",
            title=f"{kind.upper()}-composition, max over heads\n(random ≈ {circuits['random_baseline']:.3f})",
        )
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_spectra(circuits: dict[str, Any], path: Path, title: str) -> Path:
    """Singular values of every head's QK and OV circuit, one line per layer (mean over heads)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, key, name in ((axes[0], "qk_singular_values", "QK"), (axes[1], "ov_singular_values", "OV")):
        values = np.array(circuits[key])  # (L, H, p)
        colors = plt.cm.viridis(np.linspace(0, 1, values.shape[0]))
        for layer, color in enumerate(colors):
            label = f"layer {layer}" if layer in (0, len(colors) - 1) else None
            ax.semilogy(values[layer].mean(0), color=color, lw=1, label=label)
        ax.set(xlabel="index", ylabel="singular value", title=f"{name} circuit spectra (mean over heads)")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_geometry(geometry: dict[str, Any], path: Path, title: str) -> Path:
    """Within-layer overlap and orthogonality gap against the random-subspace level, and the best overlap of
    heads across layers."""
    layers = geometry["layers"]
    x = np.arange(len(layers))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    ax = axes[0]
    ax.plot(x, [r["mean_overlap"] for r in layers], "o-", ms=3, label="mean overlap of head pairs (mean cos²)")
    ax.plot(x, [r["orthogonality_gap"] for r in layers], "s-", ms=3, label="orthogonality gap")
    ax.axhline(geometry["random_overlap"], color="black", lw=0.8, ls="--", label="random subspaces (p/d)")
    ax.set(xlabel="layer", ylim=(0, 1), title="heads within a layer (0 = orthogonal)")
    ax.legend(fontsize=7)
    ax = axes[1]
    image = ax.imshow(np.array(geometry["across_layers_best_overlap"]), cmap="viridis", vmin=0, vmax=1, origin="lower")
    fig.colorbar(image, ax=ax)
    ax.set(
        xlabel="layer",
        ylabel="layer",
        title=f"heads across layers: mean best overlap\n(random ≈ {geometry['random_best_overlap']:.3f})",
    )
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: the panels of recall.png: a score of aot.analysis.recall_attention and what it is
RECALL_PANELS = (
    ("key", "query → its matching key"),
    ("value", "query → the value after its key"),
    ("self", "query → itself"),
    ("previous_token", "previous token A[t, t−1], all t ≥ 1"),
    ("value_to_key", "a pair's value → its key"),
)


def plot_recall(recall: dict[str, Any], path: Path, title: str) -> Path:
    """The mean attention weight of every head (layers × heads) on MQAR sequences: from each query to its matching
    key, to the value after it (what a solved MQAR copies), to itself, and the previous-token weight."""
    fig, axes = plt.subplots(1, len(RECALL_PANELS), figsize=(4 * len(RECALL_PANELS), 3.8))
    for ax, (key, name) in zip(axes, RECALL_PANELS):
        scores = np.array(recall[key])  # (L, H)
        image = ax.imshow(scores, aspect="auto", cmap="magma", vmin=0.0, vmax=1.0, origin="lower")
        fig.colorbar(image, ax=ax)
        ax.set(xlabel="head", ylabel="layer", title=name, xticks=range(scores.shape[1]), yticks=range(len(scores)))
        if scores.size <= 64:  # the 2-layer, few-head models of the recall study: the numbers themselves
            for (layer, head), value in np.ndenumerate(scores):
                color = "black" if value > 0.6 else "white"
                ax.text(head, layer, f"{value:.2f}", ha="center", va="center", color=color, fontsize=9)
    accuracy = recall.get("val_accuracy")
    shown = "" if accuracy is None else f", val accuracy {accuracy:.3f}"
    fig.suptitle(f"{title}: attention on MQAR ({recall['n_pairs']} pairs in {recall['seq_len']} tokens{shown})")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(results: dict[str, Any], out: Path, title: str) -> list[Path]:
    paths = [
        plot_denoising(results["denoising"], out / "denoising.png", title),
        plot_circuits(results["circuits"], out / "circuits.png", title),
        plot_spectra(results["circuits"], out / "spectra.png", title),
        plot_geometry(results["geometry"], out / "geometry.png", title),
    ]
    recall = results.get("recall")
    if recall is not None and recall["value"] is not None:
        paths.append(plot_recall(recall, out / "recall.png", title))
    return paths


def plot_calibration(calibration: dict[str, Any], path: Path) -> Path:
    """The analysis' SNR read through the hooks against aot.theory's SNR of the same unrolled trajectory, for
    Theorem 1's thresholded operator and for plain softmax."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9))
    for ax, phi in zip(axes, ("threshold", "softmax")):
        run = calibration[phi]
        s = run["setting"]
        theory = np.array(run["theory_snr"])
        layers = np.arange(len(theory))
        ax.plot(layers, theory, "o-", ms=6, mfc="none", label="aot.theory SNR (true clusters)")
        ax.plot(layers, run["analysis_snr"], "x", color="tab:red", ms=6, label="aot.analysis SNR (claims, via hooks)")
        ax.plot(layers, theory[0] * s["predicted_factor"] ** layers, "--", color="black", lw=0.8, label="(1 + ητ)^l")
        tau = f", τ={s['tau']}" if s["tau"] is not None else ""
        ax.set(
            xlabel="layer",
            ylabel="SNR",
            title=f"φ = {'h∘softmax' if phi == 'threshold' else 'softmax'}: δ={s['delta']}, η={s['eta']}{tau}\n"
            f"d={s['d']}, p={s['p']}, K={s['K']}, N={s['N']}",
        )
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
