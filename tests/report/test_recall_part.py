"""The report's recall part: its grid per preset (the study's quick grid at ``full``; a GPU job at ``paper``), and at
``tiny`` its steps run as `aot train recall` commands, collected into a table whose numbers are the runs' own and the
two accuracy figures."""

from __future__ import annotations

import json
from pathlib import Path

from aot.cli import main
from aot.report.document import Figure, Table
from aot.report.part import Context
from aot.report.parts.recall import PART, QUICK


def test_each_preset_plans_its_grid(tmp_path: Path) -> None:
    sizes = {preset: len(PART.plan(Context(preset, tmp_path)).steps) for preset in ("tiny", "quick", "full", "paper")}
    assert sizes == {"tiny": 2, "quick": 3, "full": len(QUICK.points()), "paper": 9 * 3 * 9}
    assert (
        PART.plan(Context("paper", tmp_path)).missing
        and not PART.plan(Context("paper", tmp_path, cuda_devices=1)).missing
    )
    full = PART.plan(Context("full", tmp_path))
    assert all(step.resumable and step.argv[:2] == ["train", "recall"] for step in full.steps)
    assert len({step.name for step in full.steps}) == len(full.steps)


def test_the_tiny_part_collects_its_runs_into_a_table_and_figures(tmp_path: Path) -> None:
    plan = PART.plan(Context("tiny", tmp_path))
    for step in plan.steps:
        assert main([*step.options(tmp_path), "--device", "cpu"]) == 0
    results = PART.collect(tmp_path, plan)
    assert [r["model"] for r in results["runs"]] == ["AoT-MHSA", "AoT-MSSA (W_O)"]
    blocks = PART.render(json.loads(json.dumps(results)), tmp_path)
    (table,) = [b for b in blocks if isinstance(b, Table)]
    for row, step in zip(table.rows, plan.steps):
        run = json.loads(step.results_path(tmp_path).read_text())
        assert float(row[table.header.index("test accuracy")]) == round(run["test"]["accuracy"], 3)
        assert row[table.header.index("steps")] == "4"
    figures = [b for b in blocks if isinstance(b, Figure)]
    assert len(figures) == 2 and all(f.path.stat().st_size > 1000 for f in figures)
