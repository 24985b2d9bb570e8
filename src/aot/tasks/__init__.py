"""Training tasks: ``lm`` (causal language modelling), ``vision`` (image classification), ``icl`` (in-context
regression), ``recall`` (multi-query associative recall), each a :class:`Task` (:mod:`aot.tasks.protocol`) that
:func:`run_task` runs the same way.

    from aot.tasks import get_task, run_task
    task = get_task("lm")
    run = task.build_run("cpu-quick", sets=["train.steps=100", "model.n_layer=2"])
    results = run_task(task, run, "runs/lm-small")        # results.json, loss_curve.png, checkpoint/

A new task: a module with a :class:`Task` subclass (its run config, presets, data, model, loss, evaluation, and what
a sweep ranks it by: :attr:`Task.metric`, :meth:`Task.store_row`; its smallest run: :attr:`Task.smoke`), registered
with :func:`register_task` (or a line in :data:`TASKS`); ``aot train NAME``, ``aot sweep NAME`` and the test suite's
tiny runs then have it. docs/extending.md walks through one.
"""

from __future__ import annotations

from aot.errors import ConfigError
from aot.tasks.icl import ICLTask
from aot.tasks.lm import LMTask
from aot.tasks.pipeline import run_task
from aot.tasks.protocol import Setup, Task, TaskCommand, TaskOption, TaskRun
from aot.tasks.recall import RecallTask
from aot.tasks.vision import VisionTask

#: every task, by the name ``aot train NAME`` gives it, in the order ``aot train --help`` lists them
TASKS: dict[str, Task] = {task.name: task for task in (LMTask(), VisionTask(), ICLTask(), RecallTask())}


def register_task(task: Task) -> Task:
    """Add ``task`` to :data:`TASKS` under its name (before the ``aot`` parser is built: ``aot train NAME`` and
    ``aot sweep NAME`` then have it); a name already taken is a one-line error. Returns the task."""
    if task.name in TASKS:
        raise ConfigError(f"a task called {task.name!r} is already registered; give yours another name")
    TASKS[task.name] = task
    return task


def get_task(name: str) -> Task:
    """The task called ``name``; a one-line error naming the tasks otherwise."""
    if name not in TASKS:
        raise ConfigError(f"unknown task {name!r}; use one of {', '.join(TASKS)}")
    return TASKS[name]


__all__ = [
    "TASKS",
    "Setup",
    "Task",
    "TaskCommand",
    "TaskOption",
    "TaskRun",
    "get_task",
    "register_task",
    "run_task",
]
