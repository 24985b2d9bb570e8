"""What a sweep ranks its runs by, per task, and the numbers a results-store row keeps of a finished run: both
declared by the task itself (:attr:`aot.tasks.Task.metric`, :meth:`aot.tasks.Task.store_row`; lm ranks by val
nats/byte, vision by val top-1, icl by the held-out error at k = 2d, recall by val accuracy). This module reads them
from the task registry, so a task registered later (:func:`aot.tasks.register_task`) is swept like the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aot.errors import ConfigError
from aot.tasks import TASKS
from aot.tasks.metric import Metric, pick

__all__ = ["TASK_METRICS", "Metric", "TaskMetrics", "pick", "task_metrics"]


@dataclass(frozen=True)
class TaskMetrics:
    """A task's sweep declaration: the metric its lr sweep ranks by and the row its runs leave in a store."""

    metric: Metric
    row: Callable[[dict[str, Any]], dict[str, Any]]


class _FromTasks(Mapping[str, TaskMetrics]):
    """Every registered task's :class:`TaskMetrics`, read from the task when asked (a view, not a second table)."""

    def __getitem__(self, name: str) -> TaskMetrics:
        task = TASKS[name]
        return TaskMetrics(task.metric, task.store_row)

    def __iter__(self) -> Iterator[str]:
        return iter(TASKS)

    def __len__(self) -> int:
        return len(TASKS)


#: ``{task: TaskMetrics}`` of every registered task
TASK_METRICS: Mapping[str, TaskMetrics] = _FromTasks()


def task_metrics(task: str) -> TaskMetrics:
    """The sweep declaration of ``task``; a one-line error naming the tasks a sweep knows otherwise."""
    if task not in TASKS:
        raise ConfigError(f"aot sweep knows no metric for task {task!r}; use one of {', '.join(TASKS)}")
    return TASK_METRICS[task]
