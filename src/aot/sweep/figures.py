"""Quality per compute: the shown metric along training, against training FLOPs and against training seconds, a
line per config at its best lr averaged over its seeds (rows with periodic evaluations, FLOPs per token and
tokens/s: the lm rows of :mod:`aot.sweep.metrics` plus ``train_flops_per_token``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aot.errors import AotError
from aot.sweep.selection import Summary, mean_curve

#: overrides a legend leaves out: the shape it shows as layers × width
SHAPE_FIELDS = ("model.n_layer=", "model.n_embd=", "model.n_head=")


def summary_label(s: Summary) -> str:
    """A config's legend entry: its group values (list values: the overrides, less those of the shape), its shape
    (layers × width) where recorded, lr and seeds."""
    values = []
    for v in s.config.values():
        values += [o for o in v if not o.startswith(SHAPE_FIELDS)] if isinstance(v, list) else [str(v)] if v else []
    row = s.rows[0]
    shape = f" {row['n_layer']}×{row['n_embd']}" if "n_layer" in row and "n_embd" in row else ""
    return f"{' '.join(values)}{shape} (lr {s.lr:g}, {len(s.rows)} seed{'s' if len(s.rows) > 1 else ''})"


def quality_curves(summaries: Sequence[Summary], y: str = "val_loss") -> list[dict[str, Any]]:
    """Per summary whose runs recorded periodic evaluations: ``y`` averaged over seeds at each evaluation, against
    training FLOPs (tokens × the row's training FLOPs per token) and seconds (tokens / the mean tokens/s; the rate
    is constant along a run)."""
    curves = []
    for s in summaries:
        rows = [r for r in s.rows if r.get("evals")]
        if not rows:
            continue
        tokens, values = mean_curve(rows, "tokens", y)
        seconds_per_token = statistics.fmean(1 / r["tokens_per_second"] for r in rows)
        curves.append(
            {
                "label": summary_label(s),
                "summary": s,
                "flops": [t * rows[0]["train_flops_per_token"] for t in tokens],
                "seconds": [t * seconds_per_token for t in tokens],
                "values": values,
            }
        )
    return curves


def draw_quality_per_compute(
    summaries: Sequence[Summary], path: Path, title: str, y_label: str, solid: dict[str, Any] | None = None
) -> Path:
    """One PNG: ``val_loss`` against training FLOPs (left) and training seconds (right), a line per summary;
    with ``solid`` (field → value), the configs that have those values are drawn solid and the others dashed
    (e.g. the bytes tokenizer against BPE)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = quality_curves(summaries)
    if not curves:
        raise AotError(f"nothing to draw for {title!r}: no runs with periodic evaluations")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5 + 0.09 * len(curves)), sharey=True, layout="constrained")
    for curve in curves:
        s = curve["summary"]
        style = "--" if solid and any(s.get(k) != v for k, v in solid.items()) else "-"
        axes[0].plot(curve["flops"], curve["values"], style, marker="o", ms=3, label=curve["label"])
        axes[1].plot(curve["seconds"], curve["values"], style, marker="o", ms=3)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("training FLOPs (model FLOPs, causal attention)")
    axes[1].set_xlabel("training seconds on this machine (shared CPU: ±30 %)")
    axes[0].set_ylabel(y_label)
    fig.legend(loc="outside lower center", ncols=2, fontsize=6)
    fig.suptitle(title)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
