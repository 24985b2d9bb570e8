"""What a task's runs are compared by, declared by the task itself (:attr:`aot.tasks.Task.metric`,
:meth:`aot.tasks.Task.store_row`): the one number an lr sweep minimises or maximises, and the fields of a finished
run's ``results.json`` that a results-store row keeps (picked with :func:`pick`). :mod:`aot.sweep` reads both from
the task, so a new task brings its own and no table elsewhere needs a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    """A row field that a sweep ranks runs by: ``goal`` ``min`` (a loss) or ``max`` (an accuracy)."""

    field: str
    goal: str = "min"
    label: str = ""

    def rank(self, row: dict[str, Any]) -> float:
        """Sort key of a row: smaller is better whatever the goal."""
        value = float(row[self.field])
        return value if self.goal == "min" else -value

    @property
    def name(self) -> str:
        """How a table heads the metric."""
        return self.label or self.field


def pick(results: dict[str, Any], fields: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """``{name: results[a][b]...}`` for each ``name: (a, b, ...)`` of ``fields`` (a missing key gives None)."""
    row = {}
    for name, path in fields.items():
        value: Any = results
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        row[name] = value
    return row


#: the training and wall time of a run, which every task's row keeps
TIMES: dict[str, tuple[str, ...]] = {name: ("train", name) for name in ("train_seconds", "wall_seconds")}


def dated_row(results: dict[str, Any], fields: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """:func:`pick` of ``fields`` and the date the run finished."""
    return {**pick(results, fields), "date": results["machine"]["date"]}
