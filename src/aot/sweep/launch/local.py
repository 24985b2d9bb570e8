"""``aot sweep --launcher local`` (the default): every trial of a study trains in this process, one after another,
in the order its plan gives; a trial that waits for others (the other seeds of an lr sweep, a cooldown branch)
trains once they have finished. The same command resumes an interrupted sweep."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aot.run_folder import check_output_dir, write_text_atomic
from aot.sweep.execute import Study

TABLE_FILE = "table.md"  # OUT/table.md: the study's summary, rewritten after every run


def row_line(study: Study, row: dict[str, Any]) -> str:
    """How a progress line names a recorded run: the study's own words where it has them, else the run's key."""
    describe = getattr(study, "row_line", None)
    return describe(row) if callable(describe) else str(row["key"])


def run_local(
    study: Study, out: str | Path, device: str = "auto", log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Check the study, then train every trial not finished under ``out`` (a progress line per run), record the
    store and rewrite OUT/table.md after each; returns the store."""
    study.check()
    out = check_output_dir(out)  # never a training run, a checkpoint or a saved model
    plan = study.plan({"runs": []})
    total = len(plan.runs) + len(plan.pending)
    done: list[str] = []
    how = {"trained": "trained in {:.0f} s", "finished": "finished before"}

    def progress(store: dict[str, Any], row: dict[str, Any], status: str) -> None:
        if row["key"] not in done:
            done.append(row["key"])
        said = how.get(status, "recorded").format(row.get("train_seconds", 0))
        log(f"[{len(done)}/{max(total, len(done))}] {row_line(study, row)} ({said})")
        write_text_atomic(out / TABLE_FILE, study.markdown(store))

    store = study.execution(out, device, log).run_plan(study.plan, on_record=progress)
    write_text_atomic(out / TABLE_FILE, study.markdown(store))
    return store
