"""The training-curve figure every task draws (``loss_curve.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_training_curve(
    out: Path,
    curve: list[dict[str, float]],
    evals: list[dict[str, Any]],
    *,
    x_per_step: float,
    x_label: str,
    eval_key: str,
    y_label: str,
    title: str,
    reference_lines: dict[str, float] | None = None,
    filename: str = "loss_curve.png",
) -> Path:
    """Training loss against ``step * x_per_step`` (tokens, images, prompts), the periodic evaluations
    (``evals[i][eval_key]`` at ``evals[i]["step"]``) and horizontal reference lines (baselines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([c["step"] * x_per_step for c in curve], [c["loss"] for c in curve], label="train", lw=1)
    points = [e for e in evals if eval_key in e]
    if points:
        ax.plot([e["step"] * x_per_step for e in points], [e[eval_key] for e in points], "o-", label="held out")
    for (name, value), style in zip((reference_lines or {}).items(), (":", "--", "-.", (0, (1, 3)))):
        ax.axhline(value, color="gray", ls=style, lw=1, label=name)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path = out / filename
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
