"""Part ``recall``: can an attention-only subspace model recall? Multi-query associative recall (MQAR; Zoology, Arora
et al. 2023) with ``aot train recall`` for the blocks of :data:`aot.tasks.recall.RECALL_BLOCKS` at 2 layers: test
accuracy against width (one panel per sequence length and number of pairs) and against pairs (one per width).

The paper has no recall experiment: this part sits beside none of its numbers (issue 29 asks the question). Grids by
preset: ``tiny`` two blocks, 4 steps; ``quick`` AoT-MHSA, AoT-MSSA and AoT-MSSA with a token shift at width 64, 8
pairs in 64 tokens, 600 steps (about a minute); ``full`` the quick grid of benchmarks/recall (every block but Mamba,
widths 64 and 128, 4 / 8 / 16 pairs, about an hour on one CPU thread); ``paper`` the study's points at one lr and seed
(a GPU job). benchmarks/recall/run.py runs the study itself (lr sweeps, seeds) through the sweep engine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aot.report.document import Block, Paragraph, Table
from aot.report.part import Context, Part, Plan, Step, differences_blocks, figure_blocks, fmt_count, read_step_results
from aot.tasks import get_task
from aot.tasks.recall import RECALL_BLOCKS, study_sets


@dataclass(frozen=True)
class RecallGrid:
    """Points of the recall study: every block x width x (sequence length, pairs), the vocabulary, the steps of 64
    sequences, the lrs (more than one: a sweep at the first seed), the seeds, and ``--set`` assignments for every run
    (``extra``)."""

    tag: str
    blocks: tuple[str, ...]
    widths: tuple[int, ...]
    settings: tuple[tuple[int, int], ...]
    vocab: int
    steps: int
    lrs: tuple[float, ...]
    seeds: tuple[int, ...]
    extra: tuple[str, ...] = ()

    def points(self) -> list[tuple[str, int, int, int]]:
        """(block, width, sequence length, pairs) of every point, block by block."""
        return [(b, w, t, p) for b in self.blocks for t, p in self.settings for w in self.widths]


#: the study of benchmarks/recall (tag main): the issue's widths, lengths and pairs, a 3-lr sweep, 2 seeds
STUDY = RecallGrid(
    tag="main",
    blocks=tuple(RECALL_BLOCKS),
    widths=(64, 128, 256),
    settings=((64, 4), (64, 8), (64, 16), (128, 8), (128, 16), (128, 32), (256, 16), (256, 32), (256, 64)),
    vocab=256,
    steps=2000,
    lrs=(1e-3, 3e-3, 1e-2),
    seeds=(0, 1),
)
#: the quick grid (about a CPU-hour at one thread by benchmarks/recall/cost.json; AoT-MHSA and AoT-MSSA with a token
#: shift learned 8 pairs by step 400 in our trials): no Mamba, whose scan (mambapy) costs 35x AoT-MSSA's step on a CPU
QUICK = RecallGrid(
    tag="quick",
    blocks=tuple(b for b in RECALL_BLOCKS if b != "Mamba"),
    widths=(64, 128),
    settings=((64, 4), (64, 8), (64, 16)),
    vocab=64,
    steps=600,
    lrs=(3e-3,),
    seeds=(0,),
)
GRIDS: dict[str, RecallGrid] = {
    "tiny": RecallGrid(
        "tiny", ("AoT-MHSA", "AoT-MSSA (W_O)"), (16,), ((16, 2),), 16, 4, (3e-3,), (0,),
        ("eval.val_sequences=16", "eval.test_sequences=16"),
    ),
    "quick": RecallGrid(
        "quick-report", ("AoT-MHSA", "AoT-MSSA (W_O)", "AoT-MSSA (W_O) + token shift"), (64,), ((64, 8),), 64, 600,
        (3e-3,), (0,),
    ),
    "full": QUICK,
    "paper": RecallGrid("paper", STUDY.blocks, STUDY.widths, STUDY.settings, STUDY.vocab, STUDY.steps, (3e-3,), (0,)),
}  # fmt: skip


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def plan(ctx: Context) -> Plan:
    grid = GRIDS[ctx.preset]
    steps = []
    for block, width, seq_len, pairs in grid.points():
        sets = [*study_sets(block, width, seq_len, pairs, grid.vocab), f"train.steps={grid.steps}"]
        sets += [f"train.lr={grid.lrs[0]:g}", *grid.extra, "train.progress=false"]
        argv = ["train", "recall", "--recipe", "cpu-quick", *(a for s in sets for a in ("--set", s))]
        steps.append(
            Step(f"{slug(block)}-w{width}-t{seq_len}-p{pairs}", argv, resumable=ctx.preset in ("full", "paper"))
        )
    missing = []
    if ctx.preset == "paper" and not ctx.cuda_devices:
        missing.append(f"no CUDA GPU here: {len(steps)} runs of up to 256 tokens at widths up to 256 (days on a CPU)")
    labels = {step.name: point[0] for step, point in zip(steps, grid.points())}
    return Plan(steps, {"grid": grid.tag, "blocks": labels}, missing=missing)


def collect(part_dir: Path, plan: Plan) -> dict[str, Any]:
    rows = []
    for name, block in plan.settings["blocks"].items():
        results = read_step_results(part_dir, plan, name)
        rows.append({"model": block, **get_task("recall").store_row(results), "machine": results["machine"]})
    points = [
        {**r, "accuracy": r["test_accuracy"], "low": r["test_accuracy"], "high": r["test_accuracy"]} for r in rows
    ]
    figures = {
        "accuracy_vs_width.png": "MQAR test accuracy against width, per block (one panel per length and pairs)",
        "accuracy_vs_pairs.png": "MQAR test accuracy against the number of pairs, per block (one panel per width)",
    }
    draw_accuracy(points, "n_embd", part_dir / "accuracy_vs_width.png")
    draw_accuracy(points, "n_pairs", part_dir / "accuracy_vs_pairs.png")
    return {"machine": rows[0]["machine"], "runs": rows, "figures": figures}


def render(results: dict[str, Any], part_dir: Path) -> list[Block]:
    runs = results["runs"]
    table = Table(
        "MQAR: test accuracy per query and per sequence (every query right), 2 layers, one head, one seed and lr",
        ["model", "width", "tokens", "pairs", "V", "params", "steps", "test accuracy", "per sequence", "val accuracy"],
        [
            [
                r["model"],
                str(r["n_embd"]),
                str(r["seq_len"]),
                str(r["n_pairs"]),
                str(r["vocab_size"]),
                fmt_count(r["params"]),
                str(r["steps"]),
                f"{r['test_accuracy']:.3f}",
                f"{r['test_sequence_accuracy']:.3f}",
                f"{r['val_accuracy']:.3f}",
            ]
            for r in runs
        ],
    )
    chance = ", ".join(sorted({f"{1 / r['n_pairs']:.3f} at {r['n_pairs']} pairs" for r in runs}))
    differences = [
        "The paper has no recall experiment; this part asks issue 29's question with Zoology's task (Arora et al. "
        "2023), at 2 layers and one head as Zoology does, on a CPU budget: a small vocabulary and hundreds of steps, "
        "not V = 8,192 and 64 epochs of 100k sequences.",
        f"A model that knows only which values are in the sequence scores 1 / pairs ({chance}); one lr and one seed "
        "per point here, the lr sweep and seeds are benchmarks/recall's.",
    ]
    return [
        Paragraph(
            "Key-value pairs from disjoint halves of the vocabulary, then queries of the keys later in the sequence; "
            "the model must answer each with its value. Loss and accuracy count the answers only."
        ),
        table,
        *figure_blocks(results, part_dir),
        *differences_blocks(differences),
    ]


def summary_points(summaries: Sequence[Any]) -> list[dict[str, Any]]:
    """What the figures draw from :func:`aot.sweep.selection.seed_summary` summaries of a recall store: each point's
    mean test accuracy over seeds at its best lr, and the min-max band."""
    return [{**s.config, "accuracy": s.mean, "low": s.min, "high": s.max} for s in summaries]


def draw_accuracy(points: list[dict[str, Any]], x: str, path: Path) -> Path:
    """Test accuracy against ``x`` (``n_embd`` or ``n_pairs``), a line per block with its min-max band, one panel per
    value of the other two of (sequence length, pairs, width)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [f for f in ("seq_len", "n_pairs", "n_embd") if f != x]
    names = {"seq_len": "T", "n_pairs": "pairs", "n_embd": "width"}
    panels = sorted({tuple(p[f] for f in others) for p in points})
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        mine = [p for p in points if tuple(p[f] for f in others) == panel]
        for model in dict.fromkeys(p["model"] for p in mine):
            line = sorted((p for p in mine if p["model"] == model), key=lambda p: p[x])
            xs = [p[x] for p in line]
            ax.plot(xs, [p["accuracy"] for p in line], "o-", label=model, lw=1.2, ms=4)
            ax.fill_between(xs, [p["low"] for p in line], [p["high"] for p in line], alpha=0.15)
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(", ".join(f"{names[f]} = {v}" for f, v in zip(others, panel)), fontsize=9)
        ax.set_xlabel(names[x])
        ax.set_ylabel("test accuracy")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


PART = Part(
    name="recall",
    title="Can an attention-only subspace model recall? (MQAR, beyond the paper)",
    paper_items=(),
    plan=plan,
    collect=collect,
    render=render,
)
