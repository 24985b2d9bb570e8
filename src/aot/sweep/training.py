"""The one place a sweep reaches the package's training: build a task's run config, train it, read a finished
run. Everything else in :mod:`aot.sweep` goes through these three functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aot.run_folder import read_results
from aot.tasks import TaskRun, get_task, run_task


def build_run(
    task: str,
    recipe: str,
    sets: list[str] | None = None,
    model: str | None = None,
    config_file: str | None = None,
    flags: dict[str, Any] | None = None,
) -> TaskRun:
    """``task``'s run config: training ``recipe`` < ``config_file`` < ``flags`` < ``sets``, with the model
    preset ``model`` (None: the training recipe's), validated (a one-line ConfigError names a bad field)."""
    return get_task(task).build_run(recipe, config_file=config_file, flags=flags, sets=sets, model_preset=model)


def train(
    task: str, run: TaskRun, out_dir: str | Path, device: str = "auto", branch_from: str | Path | None = None
) -> dict[str, Any]:
    """Train ``run`` into ``out_dir`` (a killed run continues from its checkpoint; ``branch_from``: the checkpoint
    of another run that a cooldown branch starts from) and return its results."""
    return run_task(get_task(task), run, out_dir, device_name=device, resume="auto", branch_from=branch_from)


def finished_results(run_dir: str | Path) -> dict[str, Any] | None:
    """The results of the finished run in ``run_dir``; None when it has not finished (no results.json, or a
    truncated or unparsable one)."""
    return read_results(run_dir)
