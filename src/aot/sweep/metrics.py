"""What a sweep ranks its runs by, per task, and the numbers a results-store row keeps of a finished run.

Each task declares one :class:`Metric` (the value its lr sweep minimises or maximises) and one row function (the
fields of a run's ``results.json`` that a store row records): lm ranks by val nats/byte, vision by val top-1,
icl by the held-out error at k = 2d in-context examples (the point benchmarks/icl reads its models at).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aot.errors import ConfigError


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


def lm_row(results: dict[str, Any]) -> dict[str, Any]:
    """The numbers a store keeps of an lm run: size, budget, val / test loss, speed, the bigram, the curve."""
    model, train = results["model"], results["train"]
    return {
        "block": model["block"],
        "n_layer": model["n_layer"],
        "n_embd": model["n_embd"],
        "non_embedding_params": model["non_embedding_params"],
        "tokens": train["tokens"],
        "val_loss": results["val"]["loss"],
        "test_loss": results["test"]["loss"],
        "val_nats_per_byte": results["val"]["nats_per_byte"],
        "test_nats_per_byte": results["test"]["nats_per_byte"],
        "tokens_per_second": train["tokens_per_second"],
        "train_seconds": train["train_seconds"],
        "wall_seconds": train["wall_seconds"],
        "bigram_val_loss": results["baselines"]["val"]["bigram"]["loss"],
        "evals": [{"tokens": e["tokens"], "val_loss": e["val_loss"]} for e in train["evals"]],
        "date": results["machine"]["date"],
    }


def vision_row(results: dict[str, Any]) -> dict[str, Any]:
    """The numbers a store keeps of a vision run: size, epochs, val / test accuracy, speed."""
    model, train = results["model"], results["train"]
    return {
        "block": model["block"],
        "n_layer": model["n_layer"],
        "n_embd": model["n_embd"],
        "norm": model["norm"],
        "residual_scale": model["residual_scale"],
        "params": model["params"],
        "epochs": train["epochs"],
        "val_top1": results["val"]["top1"],
        "test_top1": results["test"]["top1"],
        "test_top5": results["test"]["top5"],
        "test_loss": results["test"]["loss"],
        "images_per_second": train["images_per_second"],
        "train_seconds": train["train_seconds"],
        "wall_seconds": train["wall_seconds"],
        "date": results["machine"]["date"],
    }


def icl_row(results: dict[str, Any]) -> dict[str, Any]:
    """The numbers a store keeps of an icl run: size, steps, and the held-out error at k = d/2, d and 2d."""
    model, train, errors = results["model"], results["train"], results["eval"]
    return {
        "block": model["block"],
        "n_layer": model["n_layer"],
        "n_embd": model["n_embd"],
        "params": model["params"],
        "steps": train["steps"],
        "train_seconds": train["train_seconds"],
        "final_train_loss": train["final_train_loss"],
        "error_at_half_d": errors.get("k=d/2"),
        "error_at_d": errors.get("k=d"),
        "error_at_2d": errors.get("k=2d"),
        "date": results["machine"]["date"],
    }


@dataclass(frozen=True)
class TaskMetrics:
    """A task's sweep declaration: the metric its lr sweep ranks by and the row its runs leave in a store."""

    metric: Metric
    row: Callable[[dict[str, Any]], dict[str, Any]]


TASK_METRICS: dict[str, TaskMetrics] = {
    "lm": TaskMetrics(Metric("val_nats_per_byte", "min", "val nats/byte"), lm_row),
    "vision": TaskMetrics(Metric("val_top1", "max", "val top-1"), vision_row),
    "icl": TaskMetrics(Metric("error_at_2d", "min", "error at k = 2d"), icl_row),
}


def task_metrics(task: str) -> TaskMetrics:
    """The sweep declaration of ``task``; a one-line error naming the tasks a sweep knows otherwise."""
    if task not in TASK_METRICS:
        raise ConfigError(f"aot sweep knows no metric for task {task!r}; use one of {', '.join(TASK_METRICS)}")
    return TASK_METRICS[task]
