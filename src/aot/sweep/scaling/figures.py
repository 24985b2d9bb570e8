"""The figures of a fitted study (:func:`aot.sweep.scaling.study.fit_study`'s results): loss against training FLOPs
per family with its fitted compute frontier, and the gap to the reference family against compute, each with its
bootstrap band (beyond the largest recorded run the lines are dashed: an extrapolation); and the law-free gap to the
reference at matched size and budget against N."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aot.sweep.scaling.frontier import FlopsModel
from aot.sweep.scaling.law import Law
from aot.sweep.scaling.matched import MatchedGap


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _band(est: dict[str, Any], scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, low, high) arrays of an estimate along the FLOPs grid (NaN where undefined)."""

    def arr(key: str) -> np.ndarray:
        return scale * np.array([np.nan if v is None else v for v in est[key]], dtype=float)

    return arr("value"), arr("low"), arr("high")


def _split_plot(ax: Any, x: np.ndarray, y: np.ndarray, edge: float, color: Any, label: str) -> None:
    """``y`` against ``x``: solid up to ``edge`` (the recorded runs), dashed beyond."""
    inside = x <= edge * (1 + 1e-9)
    ax.plot(x[inside], y[inside], "-", color=color, lw=1.8, label=label)
    if (~inside).any():
        start = max(int(inside.sum()) - 1, 0)
        ax.plot(x[start:], y[start:], "--", color=color, lw=1.4)


def _finish(
    plt: Any, fig: Any, ax: Any, path: Path, y_label: str, title: str, x_label: str = "training FLOPs",
    legend: dict[str, Any] | None = None, title_size: float = 9,
) -> Path:  # fmt: skip
    """Log x axis (training FLOPs unless ``x_label`` says), labels, grid, legend (``legend``: its options, default
    font size 8) and title; the PNG written to ``path`` (a scratch name is fine)."""
    ax.set_xscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3, which="both")
    ax.legend(**(legend or {"fontsize": 8}))
    ax.set_title(title, fontsize=title_size)
    fig.savefig(path, dpi=120, format="png")
    plt.close(fig)
    return path


def draw_frontier(results: dict[str, Any], path: Path, units: str = "val loss") -> Path:
    """Each family's runs (loss against training FLOPs; error bars: the loss's standard error where recorded), the
    fitted law along each recorded size (thin) and the compute frontier with its band."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    flops = np.array(results["frontier"]["flops"])
    edge = results["frontier"]["recorded_max"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, fam) in enumerate(results["families"].items()):
        color = colors[i % len(colors)]
        runs = [r for r in results["runs"] if r["family"] == name]
        se = [r["loss_se"] or 0.0 for r in runs]
        ax.errorbar([r["flops_used"] for r in runs], [r["loss"] for r in runs], yerr=se, fmt="o", ms=4,
                    color=color, alpha=0.8)  # fmt: skip
        law = Law(**{k: v["value"] for k, v in fam["law"].items()})
        fm = FlopsModel(**fam["flops_model"])
        for n in fam["sizes"]:
            mine = [r["flops_used"] for r in runs if r["params"] == n]
            c = np.geomspace(min(mine), max(mine), 20)
            ax.plot(c, law.loss(n, fm.tokens(n, c)), "-", color=color, lw=0.7, alpha=0.45)
        value, low, high = _band(results["frontier"]["families"][name]["loss"])
        ax.fill_between(flops, low, high, color=color, alpha=0.15, lw=0)
        _split_plot(ax, flops, value, edge, color, f"{name} (frontier; runs: {fam['runs']})")
    ax.set_yscale("log")
    title = "Loss against training compute: runs, fitted law per size, compute frontier (95 % band)"
    return _finish(plt, fig, ax, path, units, title)


def draw_gap(results: dict[str, Any], path: Path) -> Path:
    """Each family's relative gap to the reference on the compute frontiers, in %, with its band."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    gap = results["gap"]
    flops = np.array(gap["flops"])
    edge = results["frontier"]["recorded_max"]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(results["families"])
    for name, est in gap["families"].items():
        color = colors[names.index(name) % len(colors)]
        value, low, high = _band(est, 100)
        ax.fill_between(flops, low, high, color=color, alpha=0.18, lw=0)
        _split_plot(ax, flops, value, edge, color, name)
    ax.axhline(0, color="grey", lw=1)
    ax.axvline(edge, color="grey", ls=":", lw=1)
    ax.annotate("largest run → extrapolation", (edge, 0), xytext=(4, 6), textcoords="offset points", fontsize=7)
    label = f"loss gap to {results['reference']} on the frontier (%)"
    return _finish(plt, fig, ax, path, label, "L_family / L_reference − 1 at equal compute (95 % band)")


def matched_series(gaps: Sequence[MatchedGap]) -> dict[tuple[str, float], tuple[list[float], list[float]]]:
    """The lines of :func:`draw_matched`: for each (family, budget D), its sizes N in increasing order and the gap
    to the reference there, in %."""
    series: dict[tuple[str, float], tuple[list[float], list[float]]] = {}
    for g in sorted(gaps, key=lambda g: (g.family, g.tokens, g.params)):
        ns, values = series.setdefault((g.family, g.tokens), ([], []))
        ns.append(g.params)
        values.append(100 * g.gap)
    return series


def draw_matched(gaps: Sequence[MatchedGap], reference: str, path: Path) -> Path:
    """The law-free gap to ``reference`` against N (:mod:`aot.sweep.scaling.matched`): one colour per family, one
    line style per token budget; hollow markers where a point stands on one seed of each side."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    families = sorted({g.family for g in gaps})
    budgets = sorted({g.tokens for g in gaps})
    styles = ["-", "--", ":", "-."]
    seeds = {(g.family, g.tokens, g.params): g.seeds > 1 or g.reference_seeds > 1 for g in gaps}
    for (family, tokens), (ns, values) in matched_series(gaps).items():
        color = colors[families.index(family) % len(colors)]
        style = styles[budgets.index(tokens) % len(styles)]
        ax.plot(ns, values, style, color=color, lw=1.5, label=f"{family}, {tokens / 1e6:.3g} M tokens")
        for n, v in zip(ns, values, strict=True):
            ax.plot([n], [v], "o", color=color, ms=5, mfc=color if seeds[(family, tokens, n)] else "white")
    ax.axhline(0, color="grey", lw=1)
    label = f"loss gap to {reference} at the same N and D (%)"
    title = f"L_family / L_{reference} − 1 read off the runs, no law ({reference} interpolated in log N, log L); "
    title += "filled: ≥ 2 seeds"
    legend = {"fontsize": 7, "ncol": 2}
    return _finish(plt, fig, ax, path, label, title, "non-embedding parameters N", legend, title_size=8)
