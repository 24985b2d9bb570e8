"""Markdown of a sweep: table lines, a summary's spread, and the summary table ``aot sweep`` writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aot.sweep.metrics import Metric
from aot.sweep.selection import Summary


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table as lines: the header, the ``|---|`` rule, a line per row (cells as given)."""
    return [row_line(header), "|---" * len(header) + "|", *(row_line(r) for r in rows)]


def row_line(cells: Sequence[Any]) -> str:
    """One Markdown table line: ``| a | b |``."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def spread(s: Summary, digits: int = 4) -> str:
    """``mean (min-max)`` over the seeds, or ``value (1 seed)``."""
    if len(s.seeds) == 1:
        return f"{s.mean:.{digits}f} (1 seed)"
    return f"{s.mean:.{digits}f} ({s.min:.{digits}f}-{s.max:.{digits}f}, {len(s.seeds)} seeds)"


def lr_list(lrs: Sequence[float]) -> str:
    """``0.001 0.003``: the lrs tried, as ``%g``."""
    return " ".join(f"{lr:g}" for lr in lrs)


def summary_markdown(summaries: Sequence[Summary], metric: Metric, title: str, note: str = "") -> str:
    """The table of a sweep: a row per config at its best lr, the lrs tried, the seeds and the metric's mean
    (min-max) over them, best first."""
    ordered = sorted(summaries, key=lambda s: metric.rank({metric.field: s.mean}))
    rows = [
        [
            " ".join(f"{v}" for v in s.config.values() if v not in (None, "", [])) or "—",
            lr_list(s.lrs_tried),
            f"{s.lr:g}",
            " ".join(str(seed) for seed in s.seeds),
            spread(s),
        ]
        for s in ordered
    ]
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines += table(["config", "lrs tried", "best lr", "seeds", f"{metric.name}: mean (min-max)"], rows)
    return "\n".join(lines) + "\n"
