"""What ``aot scaling fit RESULTS --out DIR`` does: read the runs of a file, fit the study, and write DIR/results.json
(the fit: every law with its intervals, the frontier, the gaps, the points, the runs read, the machine), DIR/table.md
and the figures DIR/frontier.png, and with a reference family DIR/gap.png and DIR/matched.png (the gap at matched N
and D, no law). Every input is checked before any work and nothing is written when one is refused; the files are
replaced atomically under the folder's lock."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aot.errors import ConfigError
from aot.run_folder import RESULTS_FILE, atomic_target, check_output_dir, file_sha256, folder_lock, write_text_atomic
from aot.runinfo import machine_info
from aot.sweep.scaling.figures import draw_frontier, draw_gap, draw_matched
from aot.sweep.scaling.matched import matched_gaps
from aot.sweep.scaling.render import study_markdown
from aot.sweep.scaling.runs import read_scaling_runs
from aot.sweep.scaling.study import FitSettings, Point, fit_study

TABLE_FILE = "table.md"
FRONTIER_FIGURE = "frontier.png"
GAP_FIGURE = "gap.png"
MATCHED_FIGURE = "matched.png"
POINT_FORM = "LABEL=FAMILY,N,D (e.g. 'GPT-2 Base=transformer,85e6,2.95e11')"


def parse_point(text: str) -> Point:
    """``LABEL=FAMILY,N,D`` → a :class:`Point`; a one-line error for anything else."""
    label, sep, rest = text.rpartition("=")
    parts = [p.strip() for p in rest.split(",")]
    if not sep or not label.strip() or len(parts) != 3 or not parts[0]:
        raise ConfigError(f"--at {text!r} must look like {POINT_FORM}")
    try:
        n, d = float(parts[1]), float(parts[2])
    except ValueError:
        raise ConfigError(f"--at {text!r}: N and D must be numbers; the form is {POINT_FORM}") from None
    if not (0 < n < float("inf") and 0 < d < float("inf")):
        raise ConfigError(f"--at {text!r}: N and D must be finite numbers > 0")
    return Point(label.strip(), parts[0], n, d)


def parse_where(texts: Sequence[str]) -> dict[str, list[str]]:
    """``["kind=main,branch"]`` → ``{"kind": ["main", "branch"]}``; a one-line error for anything else."""
    where: dict[str, list[str]] = {}
    for text in texts:
        field, sep, values = text.partition("=")
        kept = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", field.strip()) or not kept:
            raise ConfigError(f"--where {text!r} must look like FIELD=VALUE[,VALUE...] (e.g. kind=main,branch)")
        where.setdefault(field.strip(), []).extend(kept)
    return where


def fit_runs_file(
    runs_path: str | Path,
    out: str | Path,
    *,
    family: str | None = None,
    loss: str = "val_loss",
    reference: str | None = None,
    points: Sequence[str] = (),
    where: Sequence[str] = (),
    settings: FitSettings | None = None,
    log: Any = print,
) -> dict[str, Any]:
    """Fit the runs of ``runs_path`` and write the study into ``out``; returns the results written."""
    settings = (settings or FitSettings()).check()
    parsed, kept = [parse_point(p) for p in points], parse_where(where)
    if len({p.label for p in parsed}) != len(parsed):
        raise ConfigError("--at gives one label twice; give each point its own label")
    if loss and not re.fullmatch(r"[A-Za-z_]\w*", loss):
        raise ConfigError(f"--loss {loss!r} must name a field of the runs (e.g. val_loss)")
    out = check_output_dir(out)
    runs_path = Path(runs_path)
    runs = read_scaling_runs(runs_path, family, loss, kept)
    families = sorted({r.family for r in runs})
    log(f"fitting {len(runs)} runs of {len(families)} families ({', '.join(families)}) from {runs_path}")
    results = fit_study(runs, reference, parsed, settings, source=repr(str(runs_path)))
    results = {
        "source": {"path": str(runs_path), "sha256": file_sha256(runs_path), "loss": loss, "where": kept},
        **results,
        "machine": machine_info(),
    }
    markdown = study_markdown(results, source=str(runs_path))
    with folder_lock(out):  # each file replaced in one step; results.json, which says the fit is done, last
        with atomic_target(out / FRONTIER_FIGURE) as scratch:
            draw_frontier(results, scratch, units=loss)
        if reference is not None:
            with atomic_target(out / GAP_FIGURE) as scratch:
                draw_gap(results, scratch)
            gaps = matched_gaps(runs, reference)
            if gaps:
                with atomic_target(out / MATCHED_FIGURE) as scratch:
                    draw_matched(gaps, reference, scratch)
        write_text_atomic(out / TABLE_FILE, markdown)
        write_text_atomic(out / RESULTS_FILE, json.dumps(results, indent=2) + "\n")
    return results
